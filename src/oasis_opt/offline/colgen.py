"""Column generation on the schedule formulation (14)-(18): an upper bound and an integer schedule.

**Master.** Over a set of generated schedules (columns) l of each job, the restricted master LP

    max  sum_l f_i(t_il - a_i) x_l
    s.t. sum_l w_i^r y^l_h(t) x_l <= c_h^r      (15)   dual p_h^r(t) >= 0
         sum_l s_i^r z^l_k(t) x_l <= c_k^r      (16)   dual q_k^r(t) >= 0
         sum_{l of job i} x_l <= 1              (17)   dual mu_i >= 0
         x_l >= 0                               (18), relaxed

keeps only the capacity rows some column touches (an absent row has price 0, which is what
pricing sees; columns never exceed a capacity on their own, so an absent row never binds).

**Pricing.** At the master's duals (19), a job's best schedule maximises its payoff
f - sum p w y - sum q s z (eq. (21)/(27)): exactly the OASiS dual subroutine
``oasis_opt.online.dual.best_schedule`` with the LP prices and the *full* capacities as free
room. Its reduced cost is payoff_i - mu_i; every job with a positive one gets its column.

**Bounds.** For any prices p, q >= 0, (p, q, mu'_i = max(0, payoff_i)) is feasible for the dual
(19)-(20) of the *full* LP relaxation of (14), so by weak duality

    OPT(1) <= LP(14) <= L(p, q) = sum_rows (p c + q c) + sum_i max(0, payoff_i),

the Lagrangian (Farley) bound, valid at every iteration (it is <= master value +
sum_i max(0, payoff_i - mu_i), the form usually quoted). The best L over the iterations is the
reported upper bound, never the restricted master's value alone; once no column has a positive
reduced cost, L equals the master value, which is then LP(14).

**Integer schedule.** The restricted master as a MILP (x_l binary) over all generated columns,
seeded with the schedules of a policy (OASiS by default: each of its admitted jobs becomes a
column, and its solution is the MILP's first incumbent), gives a feasible schedule, hence the
lower end of the bracket [lower, upper] on OPT(1), with lower >= the seed policy's utility.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..model.schedule import WORKER, Schedule, ScheduleBuilder
from ..model.validate import assert_valid
from .solver import IncrementalLP, LinearProgram, relative_gap, solve_program

# reduced costs at or below this (relative to the largest utility) count as "no improving column"
RC_TOL = 1e-9
# share of the time limit given to column generation; the rest goes to the integer master
CG_SHARE = 0.8
# weight of the best-bound prices in the smoothed pricing point (Wentges smoothing)
SMOOTHING = 0.5
# column generation stops once (bound - master value) / master value is at most this
CG_GAP = 1e-7


@dataclass(frozen=True)
class Column:
    """One schedule of one job: allocation rows (job, slot, server, role, count)."""

    job: int
    rows: np.ndarray
    utility: float
    completion: int


def column_from_rows(instance, job: int, rows: np.ndarray) -> Column | None:
    """The column of a job's allocation rows, or None if they do not complete the job (2).

    Its objective is the utility of its actual completion slot, the last slot with workers (8).
    """
    rows = np.asarray(rows, dtype=np.int64).reshape(-1, 5)
    rows = rows[rows[:, 4] > 0]
    w = rows[rows[:, 3] == WORKER]
    if w[:, 4].sum() < instance.work[job] or len(w) == 0:
        return None
    completion = int(w[:, 1].max())
    rows = rows[np.lexsort((rows[:, 3], rows[:, 2], rows[:, 1]))]
    return Column(job, rows, instance.utility_of(job, completion), completion)


def columns_of(instance, schedule: Schedule) -> list[Column]:
    """One column per completed job of ``schedule``."""
    a = schedule.allocations
    rows = np.column_stack([a.job, a.slot, a.server, a.role, a.count])
    out = []
    for i in range(instance.I):
        if schedule.admitted[i] and schedule.completion[i] is not None:
            col = column_from_rows(instance, i, rows[rows[:, 0] == i])
            if col is not None:
                out.append(col)
    return out


class RestrictedMaster:
    """The restricted master LP of (14)-(18), grown column by column (warm-started HiGHS).

    Capacity rows are keyed by ``(t, s, r)`` (slot, global server, resource), flattened to
    ``key = (t S + s) R + r``. Of the rows some column touches, the LP holds only those that
    have been violated (row generation): an LP optimum that satisfies every omitted row is
    optimal for the full master, with dual 0 on the omitted rows, so duals, values and bounds
    are those of the full master. ``integer_program`` keeps every row an integer solution could
    violate.
    """

    def __init__(self, instance):
        self.instance = instance
        T, S, R = instance.horizon, instance.H + instance.K, instance.R
        self.shape = (T + 1, S, R)
        self.cap = np.broadcast_to(instance.capacity, self.shape).reshape(-1)  # c of each key
        self.row_of = np.full(self.cap.size, -1, dtype=np.int64)  # LP row of each key, -1: none
        self.active: list[int] = []  # keys of the LP's capacity rows, in row order
        import os
        opts = {"solver": "ipm", "run_crossover": "off"} if os.environ.get("CG_IPM") else {}
        self.lp = IncrementalLP("max", **opts)
        self.lp.add_rows(np.full(instance.I, -math.inf), np.ones(instance.I))  # (17): rows 0..I-1
        self.columns: list[Column] = []
        self._keys: list[np.ndarray] = []  # per column: capacity keys it uses
        self._coefs: list[np.ndarray] = []  # per column: amounts it uses there
        self._A: sp.csr_matrix | None = None  # keys x columns, built on demand
        self._seen: set[tuple[int, bytes]] = set()

    # ---- columns -----------------------------------------------------------------------------
    def entries(self, col: Column) -> tuple[np.ndarray, np.ndarray]:
        """(keys, amounts): w_i^r y (workers) or s_i^r z (PSs) per slot, server and resource."""
        inst = self.instance
        demand = np.where((col.rows[:, 3] == WORKER)[:, None], inst.worker_demand[col.job],
                          inst.ps_demand[col.job]) * col.rows[:, 4:5]
        n, r = np.nonzero(demand > 0)
        keys = (col.rows[n, 1] * self.shape[1] + col.rows[n, 2]) * self.shape[2] + r
        return keys, demand[n, r]

    def add(self, columns) -> int:
        """Add the columns not already present; returns how many were new."""
        fresh = []
        for col in columns:
            key = (col.job, col.rows.tobytes())
            if key not in self._seen:
                self._seen.add(key)
                fresh.append(col)
        if not fresh:
            return 0
        rows, vals, sizes = [], [], []
        for col in fresh:
            keys, coefs = self.entries(col)
            self._keys.append(keys)
            self._coefs.append(coefs)
            lp_rows = self.row_of[keys]
            m = lp_rows >= 0
            rows.append(np.r_[col.job, lp_rows[m]])
            vals.append(np.r_[1.0, coefs[m]])
            sizes.append(1 + int(m.sum()))
        A = sp.csc_matrix((np.concatenate(vals), (np.concatenate(rows),
                                                  np.repeat(np.arange(len(fresh)), sizes))),
                          shape=(self.lp.n_rows, len(fresh)))
        self.lp.add_cols([c.utility for c in fresh], np.zeros(len(fresh)),
                         np.full(len(fresh), math.inf), A)
        self.columns.extend(fresh)
        self._A = None
        return len(fresh)

    def usage_matrix(self) -> sp.csr_matrix:
        """All columns' amounts, keys x columns."""
        if self._A is None:
            n = len(self.columns)
            if n:
                sizes = [len(k) for k in self._keys]
                self._A = sp.csr_matrix((np.concatenate(self._coefs),
                                         (np.concatenate(self._keys),
                                          np.repeat(np.arange(n), sizes))),
                                        shape=(self.cap.size, n))
            else:
                self._A = sp.csr_matrix((self.cap.size, 0))
        return self._A

    def _activate(self, keys: np.ndarray) -> None:
        """Add capacity rows for ``keys`` with every existing column's amounts."""
        sub = self.usage_matrix()[keys]
        self.lp.add_rows(np.full(len(keys), -math.inf), self.cap[keys], sub)
        self.row_of[keys] = self.lp.n_rows - len(keys) + np.arange(len(keys))
        self.active.extend(keys.tolist())

    # ---- the LP ------------------------------------------------------------------------------
    def solve(self):
        """(value, x, prices (T+1, S, R) over all servers, mu (I,)) at the master's LP optimum.

        Re-solves after adding any violated capacity row. Duals are clipped at 0 (they are
        >= 0 up to float noise for these <= rows)."""
        inst = self.instance
        while True:
            status, value, x, duals = self.lp.solve()
            if status != "optimal":
                raise RuntimeError(f"restricted master LP not solved: {status}")
            if not self.columns:
                break
            usage = self.usage_matrix() @ x
            over = np.flatnonzero((usage > self.cap * (1 + 1e-7) + 1e-7) & (self.row_of < 0))
            if not len(over):
                break
            self._activate(over)
        duals = np.maximum(duals, 0.0)
        prices = np.zeros(self.cap.size)
        if self.active:
            prices[np.asarray(self.active)] = duals[inst.I:]
        return value, x, prices.reshape(self.shape), duals[:inst.I]

    def column_costs(self, prices: np.ndarray, columns: list[Column]) -> np.ndarray:
        """Resource cost of each column at ``prices`` (T+1, S, R): sum of amount x price."""
        flat = prices.reshape(-1)
        out = np.zeros(len(columns))
        for n, c in enumerate(columns):
            keys, amounts = self.entries(c)
            out[n] = amounts @ flat[keys]
        return out

    def capacity_value(self, prices: np.ndarray) -> float:
        """sum over capacity rows of price x capacity (the p c + q c terms of (19))."""
        return float(np.sum(prices.reshape(-1) * self.cap))

    def integer_program(self) -> LinearProgram:
        """The restricted master with x_l binary, over every capacity row that some integer
        choice of columns (at most one per job) could overfill."""
        n = len(self.columns)
        inst = self.instance
        A = self.usage_matrix()
        if n:
            # most a row can carry: sum over jobs of the job's largest amount there
            coo = A.tocoo()
            job = np.array([c.job for c in self.columns])[coo.col]
            order = np.lexsort((job, coo.row))
            r, j, v = coo.row[order], job[order], coo.data[order]
            start = np.flatnonzero(np.r_[True, (r[1:] != r[:-1]) | (j[1:] != j[:-1])])
            most = np.zeros(self.cap.size)
            np.add.at(most, r[start], np.maximum.reduceat(v, start))
            keys = np.flatnonzero(most > self.cap * (1 + 1e-12))
        else:
            keys = np.zeros(0, dtype=np.int64)
        jobs_rows = sp.csr_matrix((np.ones(n), ([c.job for c in self.columns], np.arange(n))),
                                  shape=(inst.I, n))
        M = sp.vstack([jobs_rows, A[keys]]).tocsr()
        return LinearProgram(c=np.array([c.utility for c in self.columns]), A=M,
                             row_lower=np.full(M.shape[0], -math.inf),
                             row_upper=np.r_[np.ones(inst.I), self.cap[keys]],
                             lower=np.zeros(n), upper=np.ones(n), integer=np.ones(n, bool))


@dataclass
class Bracket:
    """Bounds on OPT(1) from column generation: ``lower <= OPT <= upper``.

    ``lower``: utility of ``schedule`` (the restricted master MILP's incumbent, >= ``seed``,
    the seed policy's utility). ``upper``: the best Lagrangian bound (= LP(14) when
    ``converged``). ``lp_value``: the last restricted master LP value (not a bound unless
    converged). ``gap`` = (upper - lower) / upper.
    """

    lower: float
    upper: float
    gap: float
    lp_value: float
    converged: bool
    iterations: int
    columns: int
    seed_utility: float
    seed_policy: str
    schedule: Schedule
    mip_status: str
    cg_s: float
    mip_s: float
    seed_s: float
    history: list[dict] = field(default_factory=list)

    def stats(self) -> dict:
        return {"lower": self.lower, "upper": self.upper, "gap": self.gap,
                "lp_value": self.lp_value, "converged": self.converged,
                "iterations": self.iterations, "columns": self.columns,
                "seed_utility": self.seed_utility, "seed_policy": self.seed_policy,
                "mip_status": self.mip_status, "cg_s": self.cg_s, "mip_s": self.mip_s,
                "seed_s": self.seed_s}


def price_jobs(instance, prices: np.ndarray, *, backend: str = "numpy"):
    """Best plan of every job at ``prices`` (T+1, H+K, R) with full capacities free (pricing)."""
    from ..online.dual import best_schedule

    T, H = instance.horizon, instance.H
    wfree = np.broadcast_to(instance.worker_capacity, (T + 1,) + instance.worker_capacity.shape)
    pfree = np.broadcast_to(instance.ps_capacity, (T + 1,) + instance.ps_capacity.shape)
    p, q = np.ascontiguousarray(prices[:, :H]), np.ascontiguousarray(prices[:, H:])
    return [best_schedule(instance, i, p, q, wfree, pfree, backend=backend)
            for i in range(instance.I)]


def lagrangian_bound(master: RestrictedMaster, prices: np.ndarray, plans) -> float:
    """L(p, q) = sum_rows price x capacity + sum_i max(0, best payoff_i): >= LP(14) >= OPT."""
    return master.capacity_value(prices) + float(sum(max(0.0, pl.payoff) for pl in plans))


def column_generation(instance, master: RestrictedMaster, *, deadline: float | None = None,
                      max_iterations: int | None = None, backend: str = "numpy",
                      smoothing: float = SMOOTHING, gap_tol: float = CG_GAP,
                      progress: bool = False) -> dict:
    """Column generation on ``master`` until no column improves (or the bound meets the master
    value within ``gap_tol``), the deadline (a ``time.perf_counter()`` value) or the iteration
    cap. Returns the best bound, the last master value and the history.

    Dual smoothing (Wentges): pricing runs at ``alpha * center + (1 - alpha) * duals``, where
    ``center`` are the prices of the best Lagrangian bound so far; a column enters if its reduced
    cost at the master's own duals is positive. When none does ("mispricing"), the same round
    prices at the master's duals, so "no improving column" is always decided at those duals.
    Every priced point gives a valid bound, so smoothing never weakens the reported one.
    """
    from tqdm import tqdm

    if not 0 <= smoothing < 1:
        raise ValueError(f"smoothing: must be in [0, 1), got {smoothing}")
    finite = np.where(np.isfinite(instance.utility_table), instance.utility_table, 0.0)
    tol = RC_TOL * max(1.0, float(finite.max(initial=0.0)))
    best_bound, value, it, converged = math.inf, 0.0, 0, instance.I == 0
    center = None
    history = []
    bar = tqdm(desc="column generation", unit="it", disable=not progress, leave=False)
    t0 = time.perf_counter()
    try:
        while not converged:
            if max_iterations is not None and it >= max_iterations:
                break
            if deadline is not None and time.perf_counter() >= deadline:
                break
            value, _, duals, mu = master.solve()
            alpha = smoothing if center is not None else 0.0
            while True:
                prices = duals if alpha == 0 else alpha * center + (1 - alpha) * duals
                plans = price_jobs(instance, prices, backend=backend)
                bound = lagrangian_bound(master, prices, plans)
                if bound < best_bound:
                    best_bound, center = bound, prices
                cols = [c for c in (column_from_rows(instance, pl.job, pl.rows) for pl in plans
                                    if pl.completion is not None) if c is not None]
                rc = (np.array([c.utility for c in cols]) - master.column_costs(duals, cols)
                      - mu[[c.job for c in cols]]) if cols else np.zeros(0)
                improving = [c for c, r in zip(cols, rc) if r > tol]
                if improving or alpha == 0:
                    break
                alpha = 0.0  # mispricing: decide at the master's own duals
            added = master.add(improving)
            it += 1
            if added == 0:  # no improving column at the master's duals: value = LP(14)
                converged = True
                best_bound = min(best_bound, value + instance.I * tol)
            gap = relative_gap(value, best_bound)
            if gap is not None and gap <= gap_tol:
                converged = True
            history.append({"iteration": it, "master": value, "bound": bound,
                            "best_bound": best_bound, "alpha": alpha, "added": added,
                            "columns": len(master.columns), "rows": len(master.active),
                            "t": time.perf_counter() - t0})
            bar.update(1)
            bar.set_postfix(master=f"{value:.6g}", bound=f"{best_bound:.6g}",
                            gap="-" if gap is None else f"{gap:.2%}", cols=len(master.columns))
    finally:
        bar.close()
    if instance.I == 0:
        best_bound = 0.0
    return {"upper": best_bound, "lp_value": value, "converged": converged, "iterations": it,
            "history": history}


def bracket(instance, *, time_limit: float | None = 600.0, max_iterations: int | None = None,
            seed_policy: str = "oasis", backend: str = "numpy", cg_share: float = CG_SHARE,
            seed: int = 0, progress: bool = False, policy_name: str = "offline-colgen") -> Bracket:
    """[lower, upper] on OPT(1) by column generation, seeded with ``seed_policy``'s schedule.

    ``time_limit`` (seconds, None = no limit) covers everything: the seed policy, column
    generation (until ``cg_share`` of the limit or convergence) and the integer master (the
    rest). Stopped early, ``upper`` is still a valid bound (Lagrangian, see the module doc).
    """
    from ..policies import get_policy

    if time_limit is not None and not time_limit > 0:
        raise ValueError(f"time_limit: must be > 0 seconds, got {time_limit}")
    if not 0 < cg_share <= 1:
        raise ValueError(f"cg_share: must be in (0, 1], got {cg_share}")
    start = time.perf_counter()
    seed_schedule = get_policy(seed_policy).solve(instance)
    seed_s = time.perf_counter() - start
    master = RestrictedMaster(instance)
    master.add(columns_of(instance, seed_schedule))
    seed_cols = len(master.columns)  # the seed's columns come first, one per completed job

    deadline = None if time_limit is None else start + cg_share * time_limit
    t_cg = time.perf_counter()
    cg = column_generation(instance, master, deadline=deadline, max_iterations=max_iterations,
                           backend=backend, progress=progress)
    cg_s = time.perf_counter() - t_cg

    t_mip = time.perf_counter()
    lp = master.integer_program()
    initial = np.zeros(lp.n_cols)
    initial[:seed_cols] = 1.0
    left = None if time_limit is None else max(1.0, start + time_limit - time.perf_counter())
    res = solve_program(lp, backend="highs", time_limit=left, seed=seed, initial=initial)
    mip_s = time.perf_counter() - t_mip
    x = res.x if res.x is not None else initial
    builder = ScheduleBuilder(instance)
    for n in np.flatnonzero(x > 0.5):
        col = master.columns[n]
        builder.admit(col.job)
        builder.add_array(col.rows)
    upper = cg["upper"]
    schedule = builder.build(policy_name, {})
    lower = schedule.total_utility
    if lower > upper:  # only float noise can do this: the bound is proven
        upper = max(upper, lower)
    gap = 0.0 if upper <= 0 else (upper - lower) / upper
    out = Bracket(lower, upper, gap, cg["lp_value"], cg["converged"], cg["iterations"],
                  len(master.columns), seed_schedule.total_utility, seed_policy, schedule,
                  res.status, cg_s, mip_s, seed_s, cg["history"])
    schedule.stats.update(out.stats())
    schedule.stats.update({"status": "bracket", "objective": lower, "bound": upper,
                           "proven_optimal": bool(gap <= 1e-6),
                           "message": ("optimal (bracket closed)" if gap <= 1e-6 else
                                       f"bracket [{lower:.6g}, {upper:.6g}], gap {gap:.3%}: "
                                       "NOT proven optimal")})
    return out


class ColgenPolicy:
    """Policy ``offline-colgen``: the restricted-master integer schedule, bracket in ``stats``.

    Options: ``seed_policy`` ("oasis"), ``backend`` of the dual subroutine ("numpy"),
    ``max_iterations``, ``cg_share``, ``seed``. ``solve(instance, time_limit=None)`` runs to
    convergence (and an unlimited integer master) when no time limit is given.
    """

    name = "offline-colgen"

    def __init__(self, seed_policy: str = "oasis", backend: str = "numpy",
                 max_iterations: int | None = None, cg_share: float = CG_SHARE, seed: int = 0):
        self.options = {"seed_policy": seed_policy, "backend": backend,
                        "max_iterations": max_iterations, "cg_share": cg_share, "seed": seed}

    def solve(self, instance, *, time_limit: float | None = None, progress: bool = False,
              **_ignored) -> Schedule:
        result = bracket(instance, time_limit=time_limit, progress=progress, **self.options)
        assert_valid(instance, result.schedule)
        return result.schedule
