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
    """The restricted master LP of (14)-(18), grown column by column (warm-started HiGHS)."""

    def __init__(self, instance):
        self.instance = instance
        T, S, R = instance.horizon, instance.H + instance.K, instance.R
        self.row_of = np.full((T + 1, S, R), -1, dtype=np.int64)  # capacity row of (t, s, r)
        self.cap_rows: list[tuple[int, int, int]] = []  # (t, s, r) of capacity rows, in order
        self.lp = IncrementalLP("max")
        self.lp.add_rows(np.full(instance.I, -math.inf), np.ones(instance.I))  # (17): rows 0..I-1
        self.columns: list[Column] = []
        self._entries: list[tuple[np.ndarray, np.ndarray]] = []  # (row indices, coefficients)
        self._seen: set[tuple[int, bytes]] = set()

    def _entries_of(self, col: Column, new_keys: list) -> tuple[np.ndarray, np.ndarray]:
        inst = self.instance
        demand = np.where((col.rows[:, 3] == WORKER)[:, None], inst.worker_demand[col.job],
                          inst.ps_demand[col.job]) * col.rows[:, 4:5]
        n, r = np.nonzero(demand > 0)
        t, s = col.rows[n, 1], col.rows[n, 2]
        rows = self.row_of[t, s, r]
        for m in np.flatnonzero(rows < 0):  # a capacity row no column touched before
            key = (int(t[m]), int(s[m]), int(r[m]))
            if self.row_of[key] < 0:
                self.row_of[key] = self.instance.I + len(self.cap_rows) + len(new_keys)
                new_keys.append(key)
            rows[m] = self.row_of[key]
        return np.r_[col.job, rows], np.r_[1.0, demand[n, r]]

    def add(self, columns) -> int:
        """Add the columns not already present; returns how many were new."""
        new_keys: list[tuple[int, int, int]] = []
        fresh, entries = [], []
        for col in columns:
            key = (col.job, col.rows.tobytes())
            if key in self._seen:
                continue
            self._seen.add(key)
            fresh.append(col)
            entries.append(self._entries_of(col, new_keys))
        if new_keys:
            cap = self.instance.capacity
            self.lp.add_rows(np.full(len(new_keys), -math.inf),
                             np.array([cap[s, r] for _, s, r in new_keys]))
            self.cap_rows.extend(new_keys)
        if fresh:
            A = self._matrix(entries, self.lp.n_rows)
            self.lp.add_cols([c.utility for c in fresh], np.zeros(len(fresh)),
                             np.full(len(fresh), math.inf), A)
            self.columns.extend(fresh)
            self._entries.extend(entries)
        return len(fresh)

    @staticmethod
    def _matrix(entries, n_rows: int) -> sp.csc_matrix:
        rows = np.concatenate([e[0] for e in entries])
        vals = np.concatenate([e[1] for e in entries])
        cols = np.repeat(np.arange(len(entries)), [len(e[0]) for e in entries])
        return sp.csc_matrix((vals, (rows, cols)), shape=(n_rows, len(entries)))

    def solve(self):
        """(value, x, worker prices (T+1,H,R), PS prices (T+1,K,R), mu (I,)) at the LP optimum.

        Duals are clipped at 0 (they are >= 0 up to float noise for these <= rows)."""
        status, value, x, duals = self.lp.solve()
        if status != "optimal":
            raise RuntimeError(f"restricted master LP not solved: {status}")
        inst = self.instance
        T, H, K, R = inst.horizon, inst.H, inst.K, inst.R
        duals = np.maximum(duals, 0.0)
        prices = np.zeros((T + 1, H + K, R))
        if self.cap_rows:
            t, s, r = np.array(self.cap_rows).T
            prices[t, s, r] = duals[inst.I:]
        return value, x, prices[:, :H], prices[:, H:], duals[:inst.I]

    def capacity_value(self, p: np.ndarray, q: np.ndarray) -> float:
        """sum over the master's capacity rows of price x capacity (the (19) terms in p, q)."""
        if not self.cap_rows:
            return 0.0
        t, s, r = np.array(self.cap_rows).T
        prices = np.concatenate([p, q], axis=1)
        return float(np.sum(prices[t, s, r] * self.instance.capacity[s, r]))

    def integer_program(self) -> LinearProgram:
        """The restricted master with x_l binary (rows (15)-(17) as above)."""
        n = len(self.columns)
        A = self._matrix(self._entries, self.lp.n_rows).tocsr() if n else sp.csr_matrix(
            (self.lp.n_rows, 0))
        upper = np.r_[np.ones(self.instance.I),
                      [self.instance.capacity[s, r] for _, s, r in self.cap_rows]]
        return LinearProgram(c=np.array([c.utility for c in self.columns]), A=A,
                             row_lower=np.full(self.lp.n_rows, -math.inf), row_upper=upper,
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


def _zero_prices(instance):
    T, R = instance.horizon, instance.R
    return np.zeros((T + 1, instance.H, R)), np.zeros((T + 1, instance.K, R))


def price_jobs(instance, p, q, *, backend: str = "numpy"):
    """Best plan of every job at prices (p, q) with full capacities free (the pricing problem)."""
    from ..online.dual import best_schedule

    T = instance.horizon
    wfree = np.broadcast_to(instance.worker_capacity, (T + 1,) + instance.worker_capacity.shape)
    pfree = np.broadcast_to(instance.ps_capacity, (T + 1,) + instance.ps_capacity.shape)
    return [best_schedule(instance, i, p, q, wfree, pfree, backend=backend)
            for i in range(instance.I)]


def column_generation(instance, master: RestrictedMaster, *, deadline: float | None = None,
                      max_iterations: int | None = None, backend: str = "numpy",
                      progress: bool = False) -> dict:
    """Run column generation on ``master`` until no column improves, the deadline
    (``time.perf_counter()`` value) or the iteration cap; returns the bound and the history."""
    from tqdm import tqdm

    fmax = max(1.0, float(np.max(np.where(np.isfinite(instance.utility_table),
                                          instance.utility_table, 0.0), initial=0.0)))
    tol = RC_TOL * fmax
    best_bound, value, it, converged = math.inf, 0.0, 0, instance.I == 0
    history = []
    bar = tqdm(desc="column generation", unit="it", disable=not progress, leave=False)
    t0 = time.perf_counter()
    try:
        while not converged:
            if max_iterations is not None and it >= max_iterations:
                break
            if deadline is not None and time.perf_counter() >= deadline:
                break
            value, _, p, q, mu = master.solve()
            plans = price_jobs(instance, p, q, backend=backend)
            payoff = np.array([pl.payoff for pl in plans])
            bound = master.capacity_value(p, q) + float(np.sum(np.maximum(payoff, 0.0)))
            best_bound = min(best_bound, bound)
            improving = [pl for pl in plans if pl.completion is not None
                         and pl.payoff - mu[pl.job] > tol]
            added = master.add(c for c in (column_from_rows(instance, pl.job, pl.rows)
                                           for pl in improving) if c is not None)
            it += 1
            converged = added == 0
            if converged:  # no improving column: the master LP is LP(14)
                best_bound = min(best_bound, value + len(plans) * tol)
            gap = relative_gap(value, best_bound)
            history.append({"iteration": it, "master": value, "bound": bound,
                            "best_bound": best_bound, "added": added,
                            "columns": len(master.columns), "t": time.perf_counter() - t0})
            bar.update(1)
            bar.set_postfix(master=f"{value:.4g}", bound=f"{best_bound:.4g}",
                            gap="-" if gap is None else f"{gap:.2%}", cols=len(master.columns))
    finally:
        bar.close()
    if converged and instance.I == 0:
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
