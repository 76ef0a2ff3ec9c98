"""Gavel's allocation programs (Narayanan et al., OSDI 2020, section 4) as LPs for HiGHS.

Every program chooses time fractions x_jg >= 0, the share of time job j spends on accelerator
type g, under Gavel's base constraints

    sum_g x_jg <= 1                (a job runs on one type at a time)
    sum_j N_jg x_jg <= n_g         (type g has n_g GPUs; job j takes N_jg of them)
    x_jg = 0 where T_jg = 0        (a type the job cannot use)

with T_jg the throughput of the whole job j on type g (any unit of work per unit of time, the
same for every type of the job) and N_jg its GPU count there (rigid; Gavel's scale factor N_j).
The effective throughput of j is y_j = sum_g T_jg x_jg. Objectives (Gavel's names in brackets):

* ``max_min_fairness`` [``max_min_fairness_perf``, heterogeneity-aware LAS]: maximise
  min_j N_j y_j / (w_j P_j), P_j = sum_g T_jg n_g / n the throughput of an equal share of every
  type (n = sum_g n_g GPUs), w_j the priority weight; with T = 1 on usable types it is the
  type-blind ``max_min_fairness``. Linear: maximise z s.t. z <= N_j y_j / (w_j P_j).
* ``min_makespan`` [``min_total_duration_perf``]: minimise max_j r_j / y_j (r_j the work left).
  With lambda = 1 / makespan: maximise lambda s.t. y_j >= lambda r_j, one LP. Gavel instead
  bisects the makespan M in seconds over [100, 10^6] until the bracket is within 5% and keeps a
  feasible point of "y_j >= r_j / M" at the M found (``gavel_bisection`` reproduces that M).
* ``finish_time_fairness`` [``finish_time_fairness_perf``, Themis's rho]: minimise
  max_j rho_j, rho_j = (t_j + r_j / y_j) / (c_j + r_j / p_j), t_j the time since arrival, p_j
  the job's isolated throughput (Gavel's ``IsolatedPolicy``: a 1/J share of every type,
  ``isolated_throughput``) and c_j the isolated time of the work it has already done (Gavel's
  ``_cumulative_isolated_time``: at each computation, the work done since the previous one
  divided by the p_j of that one; the caller keeps it). Quasi-convex: rho is feasible iff
  y_j >= r_j / (rho e_j - t_j) for all j (e_j the denominator), an LP feasibility question, so
  rho is bisected to a relative ``RHO_TOL``.

Only the objective is optimised: other optimal allocations exist (a max-min LP pins only its
binding jobs), and which one a solver returns decides the rest. ``central=False`` asks HiGHS for
a vertex (dual simplex); ``central=True`` for a point inside the optimal face (interior point
method without crossover or presolve), the kind of solution Gavel's interior-point solver
(ECOS) returns.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ..model.numerics import FEAS_TOL
from .lp import RowwiseMatrix
from .solver import LinearProgram, new_highs, run_highs, solve_program, to_highs_lp

RHO_TOL = 1e-4  # relative width at which the finish-time-fairness bisection stops


class AllocationError(RuntimeError):
    """HiGHS did not solve an allocation LP to optimality (its status in the message)."""


@dataclass(frozen=True)
class Allocation:
    """``x`` (J, G) time fractions and the program's objective value."""

    x: np.ndarray
    objective: float
    lps: int = 1  # LPs solved to find it


def _base_rows(N: np.ndarray, last: np.ndarray) -> RowwiseMatrix:
    """Rows over columns [x (J*G, row-major), extra (E)]: sum_g x_jg (J rows), sum_j N_jg x_jg
    (G rows), then per job j its row ``last[j]`` ((J, G + E): x_j's coefficients, then the
    extra columns'), built straight as CSR arrays (scipy's stacking costs more than HiGHS here, and
    importing scipy.sparse ~0.2 s: HiGHS takes the arrays as they are)."""
    J, G = N.shape
    E = last.shape[1] - G
    cols = J * G + E
    x = np.arange(J * G).reshape(J, G)
    job_idx = x.ravel()
    type_idx = x.T.ravel()  # row g: x_0g, x_1g, ...
    last_idx = np.hstack([x, J * G + np.tile(np.arange(E), (J, 1))]).ravel()
    indices = np.concatenate([job_idx, type_idx, last_idx])
    data = np.concatenate([np.ones(J * G), N.T.ravel(), last.ravel()])
    indptr = np.concatenate([np.arange(0, J * G + 1, G)[:-1], J * G + np.arange(0, J * G, J),
                             2 * J * G + np.arange(0, J * (G + E) + 1, G + E)])
    return RowwiseMatrix(data, indices.astype(np.int32), indptr.astype(np.int32),
                         (2 * J + G, cols))


CENTRAL = {"solver": "ipm", "run_crossover": "off", "presolve": "off"}  # HiGHS options


def _solve_ratio(T: np.ndarray, N: np.ndarray, n: np.ndarray, coef: np.ndarray,
                 rhs: np.ndarray, *, cap: float | None = None, fixed: float | None = None,
                 central: bool = False) -> Allocation:
    """maximise v s.t. the base constraints and coef_j y_j - rhs_j v >= 0 for every job j
    (v <= ``cap``; ``fixed``: v = fixed and no objective: a feasibility question); columns
    [x (J*G, row-major), v]."""
    J, G = T.shape
    rows = _base_rows(N, np.hstack([T * coef[:, None], -rhs[:, None]]))
    c = np.zeros(J * G + 1)
    c[-1] = 0.0 if fixed is not None else 1.0
    v_lo, v_hi = (fixed, fixed) if fixed is not None else (0.0, np.inf if cap is None else cap)
    lp = LinearProgram(c, rows,
                       np.concatenate([np.full(J + G, -np.inf), np.zeros(J)]),
                       np.concatenate([np.ones(J), n, np.full(J, np.inf)]),
                       np.concatenate([np.zeros(J * G), [v_lo]]),
                       np.concatenate([np.where(T > 0, 1.0, 0.0).ravel(), [v_hi]]),
                       np.zeros(J * G + 1, dtype=bool), "max")
    res = solve_program(lp, highs_options=CENTRAL if central else None)
    if res.status == "infeasible" and fixed is not None:
        return Allocation(np.zeros((J, G)), -np.inf)
    if res.status != "optimal" or res.x is None:
        raise AllocationError(f"allocation LP: HiGHS status {res.status} "
                              f"({res.info.get('highs_status')})")
    x = np.clip(res.x[:-1].reshape(J, G), 0.0, 1.0)
    return Allocation(x, float(res.x[-1]))


class _Floors:
    """The base constraints plus throughput floors y_j >= floor_j, no objective: one HiGHS model
    whose floors change between solves (bisections re-solve it warm, from the last basis)."""

    def __init__(self, T: np.ndarray, N: np.ndarray, n: np.ndarray, central: bool = False):
        J, G = T.shape
        self.J, self.G = J, G
        rows = _base_rows(N, T)
        lp = LinearProgram(np.zeros(J * G), rows,
                           np.concatenate([np.full(J + G, -np.inf), np.zeros(J)]),
                           np.concatenate([np.ones(J), n, np.full(J, np.inf)]),
                           np.zeros(J * G), np.where(T > 0, 1.0, 0.0).ravel(),
                           np.zeros(J * G, dtype=bool), "max")
        self.h = new_highs(primal_feasibility_tolerance=FEAS_TOL, **(CENTRAL if central else {}))
        self.h.passModel(to_highs_lp(lp))
        self.index = np.arange(J + G, 2 * J + G, dtype=np.int32)
        self.solves = 0

    def solve(self, floor: np.ndarray) -> np.ndarray | None:
        """x (J, G) meeting the floors, or None when none does."""
        import highspy

        self.h.changeRowsBounds(self.J, self.index, np.asarray(floor, float),
                                np.full(self.J, np.inf))
        self.solves += 1
        status = run_highs(self.h)
        if status == highspy.HighsModelStatus.kInfeasible:
            return None
        if status != highspy.HighsModelStatus.kOptimal:
            raise AllocationError(f"allocation LP: HiGHS status {self.h.modelStatusToString(status)}")
        x = np.array(self.h.getSolution().col_value, dtype=float)
        return np.clip(x.reshape(self.J, self.G), 0.0, 1.0)


def _check(T: ArrayLike, N: ArrayLike, n: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Arrays as floats, N broadcast to (J, G)."""
    T = np.asarray(T, dtype=float)
    n = np.asarray(n, dtype=float)
    N = np.asarray(N, dtype=float)
    if T.ndim != 2 or T.shape != (len(N), len(n)):
        raise ValueError(f"throughputs: expected shape ({len(N)}, {len(n)}), got {T.shape}")
    N = np.broadcast_to(N[:, None] if N.ndim == 1 else N, T.shape)
    if (T < 0).any() or (N < 0).any() or (n < 0).any():
        raise ValueError("throughputs, GPU counts and cluster sizes must be >= 0")
    if not (T > 0).any(axis=1).all():
        raise ValueError("throughputs: every job needs a type with throughput > 0")
    return T, N, n


def equal_share_throughput(T: ArrayLike, n: ArrayLike) -> np.ndarray:
    """P_j = sum_g T_jg n_g / sum_g n_g: job j's throughput on an equal share of every type;
    max_g T_jg for a job that can use only types without GPUs (n_g = 0), where it needs none."""
    T = np.asarray(T, float)
    n = np.asarray(n, float)
    P = T @ (n / float(n.sum())) if n.sum() > 0 else np.zeros(len(T))
    return np.where(P > 0, P, T.max(axis=1) if T.size else 0.0)


def isolated_throughput(T: ArrayLike, N: ArrayLike, n: ArrayLike) -> np.ndarray:
    """p_j = P_j min(1, n / (J N_j)), Gavel's ``IsolatedPolicy``: each of the J jobs gets a 1/J
    share of every type's GPUs (n_g / J GPUs of type g, n = sum_g n_g), as time fractions
    n_g / (J N_j), scaled down to sum to 1 when they exceed it; P_j is
    ``equal_share_throughput``. No water-filling: a share a small job cannot use is not passed
    on to the others."""
    T, N, n = _check(T, N, n)
    size = N.max(axis=1) if len(N) else np.zeros(0)
    total = float(n.sum())
    share = np.minimum(1.0, np.divide(total, len(size) * size, out=np.ones(len(size)),
                                      where=size > 0))
    return share * equal_share_throughput(T, n)


def max_min_fairness(T: ArrayLike, N: ArrayLike, n: ArrayLike, weights: ArrayLike | None = None,
                     scale: ArrayLike | None = None, *, central: bool = False) -> Allocation:
    """Gavel's ``max_min_fairness_perf`` (module docstring); objective = the minimum ratio.
    ``scale``: the N_j of the objective (default: the largest of job j's ``N``)."""
    T, N, n = _check(T, N, n)
    if len(N) == 0:
        return Allocation(np.zeros((0, len(n))), 0.0, 0)
    w = np.ones(len(N)) if weights is None else np.asarray(weights, float)
    scale = N.max(axis=1) if scale is None else np.asarray(scale, float)
    P = equal_share_throughput(T, n)
    return _solve_ratio(T, N, n, scale / (w * P), np.ones(len(N)), central=central)


def spread_over_types(alloc: Allocation, N: ArrayLike, n: ArrayLike) -> Allocation:
    """The type-blind program's symmetric optimum: each job's total share s_j = sum_g x_jg
    spread over the types in proportion to their sizes, x_jg = s_j n_g / sum n.

    With every throughput 1 the objective sees only the s_j, so this point is as optimal as
    ``alloc``; it is feasible when job j takes the same N_j GPUs on every type (summing the
    capacity rows gives sum_j N_j s_j <= sum n, hence sum_j N_j x_jg <= n_g). It is the analytic
    centre of the optimal face when every job's share is pinned (a loaded cluster), the point
    an interior-point solver such as Gavel's ECOS approaches, where a simplex vertex or
    HiGHS's interior point without crossover can put most of a job's time on one type."""
    N = np.asarray(N, float)
    n = np.asarray(n, float)
    if N.ndim != 2 or not np.allclose(N, N[:, :1]):
        raise ValueError("spread_over_types: every job must take the same GPUs on every type")
    x = alloc.x.sum(axis=1, keepdims=True) * (n / n.sum())[None, :]
    return Allocation(x, alloc.objective, alloc.lps)


def min_makespan(T: ArrayLike, N: ArrayLike, n: ArrayLike, remaining: ArrayLike, *,
                 central: bool = False) -> Allocation:
    """Gavel's ``min_total_duration_perf``, exactly: objective = the least makespan
    max_j r_j / y_j (in the time unit of T), 0 when no work is left."""
    T, N, n = _check(T, N, n)
    r = np.asarray(remaining, float)
    if len(N) == 0 or not (r > 0).any():
        return Allocation(np.zeros(T.shape), 0.0, 0)
    alloc = _solve_ratio(T, N, n, np.ones(len(N)), r, central=central)
    return Allocation(alloc.x, 1.0 / alloc.objective if alloc.objective > 0 else np.inf)


def makespan_feasible(T: ArrayLike, N: ArrayLike, n: ArrayLike, remaining: ArrayLike,
                      makespan: float, *, central: bool = True) -> Allocation:
    """A point of {x: base constraints, y_j >= r_j / makespan} (Gavel's feasibility program);
    objective -inf (and x = 0) when there is none."""
    T, N, n = _check(T, N, n)
    x = _Floors(T, N, n, central).solve(np.asarray(remaining, float) / float(makespan))
    return Allocation(np.zeros(T.shape), -np.inf) if x is None else Allocation(x, float(makespan))


def gavel_bisection(optimum: float, low: float = 100.0, high: float = 1e6,
                    ratio: float = 1.05) -> float:
    """The makespan Gavel's search settles on when the least feasible one is ``optimum``:
    bisect [low, high] while ratio * low < high (a midpoint >= optimum is feasible and becomes
    high); if none was feasible, retry on [high, 10 high]. Returns the last feasible midpoint."""
    best = None
    last_high = high
    while best is None:
        while ratio * low < high:
            mid = 0.5 * (low + high)
            if mid >= optimum:
                best, high = mid, mid
            else:
                low = mid
        low, high, last_high = last_high, 10.0 * last_high, 10.0 * last_high
    return best


def finish_time_fairness(T: ArrayLike, N: ArrayLike, n: ArrayLike, remaining: ArrayLike,
                         elapsed: ArrayLike, isolated: ArrayLike,
                         done_isolated: ArrayLike | None = None, *, central: bool = False
                         ) -> Allocation:
    """Gavel's ``finish_time_fairness_perf``; objective = the least max_j rho_j, found by
    bisection (module docstring): ``elapsed`` t_j >= 0, ``isolated`` throughputs p_j > 0 and
    ``done_isolated`` c_j >= 0, the isolated time of the work already done (default 0: jobs
    that have done none), times in the unit of T. The point returned is one at the final
    (feasible) rho."""
    T, N, n = _check(T, N, n)
    r, t, p = (np.asarray(v, float) for v in (remaining, elapsed, isolated))
    c = np.zeros(len(r)) if done_isolated is None else np.asarray(done_isolated, float)
    if c.shape != r.shape or (c < 0).any():
        raise ValueError(f"done_isolated: expected {len(r)} values >= 0, got {c.tolist()}")
    if len(N) == 0:
        return Allocation(np.zeros(T.shape), 0.0, 0)
    e = c + np.divide(r, p, out=np.zeros_like(r), where=p > 0)  # expected isolated time
    need = r > 0
    model = _Floors(T, N, n)

    def floors(rho: float) -> np.ndarray | None:
        slack = rho * e - t
        if (slack[need] <= 0).any():
            return None
        return np.where(need, r / np.where(need, slack, 1.0), 0.0)

    def feasible(rho: float) -> np.ndarray | None:
        f = floors(rho)
        return None if f is None else model.solve(f)

    lo = float(np.max(np.where(need & (e > 0), t / np.where(e > 0, e, 1.0), 0.0)))
    hi = max(lo, 1.0) * 2
    best = feasible(hi)
    while best is None:
        lo, hi = hi, hi * 2
        best = feasible(hi)
    while hi - lo > RHO_TOL * hi:
        mid = 0.5 * (lo + hi)
        x = feasible(mid)
        if x is None:
            lo = mid
        else:
            hi, best = mid, x
    lps = model.solves
    final = floors(hi)
    if central and final is not None:
        x = _Floors(T, N, n, central=True).solve(final)
        best, lps = (best if x is None else x), lps + 1
    return Allocation(best, hi, lps)
