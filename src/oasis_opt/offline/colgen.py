"""Column generation on the schedule formulation (14)-(18): an upper bound and an integer schedule.

**Master.** Over a pool of generated schedules (columns) l of each job, the restricted master LP

    max  sum_l f_i(t_il - a_i) x_l
    s.t. sum_l w_i^r y^l_h(t) x_l <= c_h^r      (15)   dual p_h^r(t) >= 0
         sum_l s_i^r z^l_k(t) x_l <= c_k^r      (16)   dual q_k^r(t) >= 0
         sum_{l of job i} x_l <= 1              (17)   dual mu_i >= 0
         x_l >= 0                               (18), relaxed

Of the capacity rows some column touches, the LP holds only those some LP solution violated
(row generation): an optimum that satisfies the omitted rows is optimal for the full master with
dual 0 on them. Columns never exceed a capacity on their own, so an untouched row never binds.

**Pricing.** At prices (p, q), a job's best schedule maximises its payoff f - sum p w y -
sum q s z (eq. (21)/(27)): exactly the OASiS dual subroutine
``oasis_opt.online.dual.best_schedule`` with the *full* capacities as free room. Its reduced
cost is payoff_i - mu_i; a column enters when that is positive at the master's duals.

**Bounds.** For ANY prices p, q >= 0, (p, q, mu'_i = max(0, payoff_i)) is feasible for the dual
(19)-(20) of the full LP relaxation of (14), so by weak duality

    OPT(1) <= LP(14) <= L(p, q) = sum_{t,s,r} price c + sum_i max(0, best payoff_i),

the Lagrangian (Farley) bound: valid at every priced point (it is <= master value +
sum_i max(0, payoff_i - mu_i), the form usually quoted). The reported upper bound is the best L
over all priced points, never the restricted master's value alone; when no column has a
positive reduced cost at the master's duals, L = the master value = LP(14).

**Two phases.** LP duals of a large master are very sparse (a few hundred of ~10^5 rows are
priced), so pricing piles every job on the same unpriced servers and L stays near the trivial
bound (phase 2 alone moved neither in our 400-job trials). Phase 1 therefore runs on the
*pooled* master, whose capacity rows are summed over each pool's servers
(``sum_h sum_l w y^l_h(t) x_l <= sum_h c_h^r`` per slot and resource: a relaxation of (15)-(16)
with ~10^3 rows). Its duals, copied to every server of the pool, are prices like any others:
L at them is a valid bound, equal to the pooled LP's value at convergence. Phase 2 then runs on
the per-server master, starting from all phase-1 columns, with Wentges dual smoothing: pricing at
``alpha * center + (1 - alpha) * duals``, ``center`` being the prices of the best L so far.

**Accelerator types.** Columns are priced by the typed dual subroutine (exact over the typed
schedules: workers on usable types, one type a slot unless spanning, work in units), amounts
use each worker's type demand, and a column completes its job when its work units reach W_i.
The ``spread`` re-placement, which moves workers across servers, is not used there (it would
move them across types).

**Integer schedule.** A feasible schedule from the pool. Candidates: the seed policy's own
schedule (OASiS by default) and every extra seed schedule (``seeds``, e.g. every baseline and
OASiS under the figures' pricings: each completed job is a column, so the masters start from
them too); an LP-guided greedy rounding (columns by decreasing LP value, each taken if its job
is free and it fits), alone and completing the best seed; the best of these completed by
``fill_residual`` (each job left out gets its best plan in the room left, at the best bound's
prices and at zero prices: new columns, feasible by construction; ``could_complete`` first
skips, in one vectorised pass, each job the room cannot hold, so the DP runs only for jobs that
may fit: 2.7x fewer seconds a ruin-and-recreate round at 400 jobs, the same schedules), then improved by
``ruin_and_recreate`` (re-plan every job of a random time window and the jobs left out, keep
the result when it earns no less); then the restricted master
as a MILP (x_l binary) over the candidate columns (all of the above and every column with a
positive LP value), started from the best candidate, its result completed by ``fill_residual``
too. The best is validated; its utility is the lower end of the bracket [lower, upper] on
OPT(1), so lower >= every seed schedule's utility by construction.
"""
from __future__ import annotations

import inspect
import math
import time
from dataclasses import dataclass, field, fields, replace

from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from ..model import Instance
from ..model.numerics import DIVISOR_FLOOR, RC_TOL, VALUE_EPS, capacity_slack, fit_count
from ..model.schedule import WORKER, Schedule, ScheduleBuilder
from ..model.validate import assert_valid
from ._checks import is_finite, is_fraction, is_real, is_share, is_whole
from .solver import (STOPPED, IncrementalLP, LinearProgram, SolverLimits, ordered_bound,
                     relative_gap, solve_program)
from .lp import MIP_GAP

if TYPE_CHECKING:
    from ..online.dual import Plan

# share of the time limit for column generation (phases 1 and 2); the rest: integer schedule
CG_SHARE = 0.7
# share of the column-generation time phase 1 (pooled master) may use before phase 2 starts
POOLED_SHARE = 0.4
# columns with at least this LP value join the integer master's candidates
CANDIDATE_X = 1e-3
# weight of the best-bound prices in the smoothed pricing point of phase 2 (Wentges smoothing)
SMOOTHING = 0.5
# a phase stops once (best bound - master value) / master value is at most this
CG_GAP = 1e-7
# ruin-and-recreate: share of the horizon whose jobs a round re-plans, and the score noise.
# 0.05, not 0.1: at 400 jobs (Fig. 3's seed 0, the state ruin-and-recreate starts from in the
# bracket, 150 CPU-seconds each) a half window gave 11,052-11,109 (3 search seeds) where 0.1
# gave 10,964-10,990 (2): rounds are cheaper (fewer jobs re-planned) and fail less often
LNS_WINDOW = 0.05
LNS_NOISE = 0.5
# share of the integer phase's time for ruin-and-recreate (the rest: the integer master), and
# its rounds when there is no time limit
LNS_SHARE = 0.5
LNS_ROUNDS = 20
# baselines whose schedules ``policy_schedules`` seeds the master with by default
SEED_POLICIES = ("fifo", "drf", "rrh", "dorm", "greedy")


@dataclass(frozen=True, kw_only=True)
class ColgenOptions:
    """How ``bracket`` (and policy ``offline-colgen``) runs column generation (keyword fields;
    checked when built, ``ValueError`` naming the field). The defaults are the module's constants.

    * ``seed_policy``: the policy whose schedule seeds the pool and is the first integer
      candidate (a registered policy name; "oasis").
    * ``backend``: the dual subroutine's backend for pricing (``online.dual.BACKENDS``; "numpy").
    * Deterministic limits (None: none): ``max_iterations`` (an integer >= 0) caps the pricing
      rounds of both phases together, ``node_limit`` (>= 0) the branch-and-bound nodes of the
      integer master (HiGHS). Stopped early, the upper end is still a valid bound.
    * Time shares of ``bracket``'s ``time_limit``, each in (0, 1]: ``cg_share`` (``CG_SHARE``)
      for column generation, both phases; ``pooled_share`` (``POOLED_SHARE``) of that for
      phase 1, the pooled master; ``lns_share`` (``LNS_SHARE``) of the integer phase for
      ruin-and-recreate (the rest: the integer master).
    * ``smoothing`` in [0, 1) (``SMOOTHING``): the Wentges weight of the best-bound prices in
      phase 2's pricing point (0: price at the master's duals).
    * ``cg_gap`` in [0, 1) (``CG_GAP``): a phase ends once (best bound - master value) / master
      value <= ``cg_gap`` (the default ends at the LP optimum; e.g. 0.005 leaves the integer
      master more time at the cost of an upper end up to 0.5 % above LP(14), still a valid
      bound).
    * ``lns_rounds``: rounds of ``ruin_and_recreate`` before the integer master (an integer
      >= 0; 0: none; None: until ``lns_share`` of the integer phase's time, or ``LNS_ROUNDS``
      without a time limit).
    * ``lns_window`` in (0, 1] (``LNS_WINDOW``): the share of the horizon whose running jobs a
      ruin-and-recreate round re-plans (``LnsOptions.window``).
    * ``lp_solver``: phase 2's LP solver, "ipm" (HiGHS interior point, no crossover) or
      "simplex".
    * ``seed`` (an integer >= 0): the integer master's HiGHS seed and ruin-and-recreate's.
    """

    seed_policy: str = "oasis"
    backend: str = "numpy"
    max_iterations: int | None = None
    node_limit: int | None = None
    cg_share: float = CG_SHARE
    pooled_share: float = POOLED_SHARE
    smoothing: float = SMOOTHING
    cg_gap: float = CG_GAP
    lns_rounds: int | None = None
    lns_share: float = LNS_SHARE
    lns_window: float = LNS_WINDOW
    lp_solver: str = "ipm"
    seed: int = 0

    def __post_init__(self) -> None:
        from ..online.dual import BACKENDS

        if not (isinstance(self.seed_policy, str) and self.seed_policy):
            raise ValueError(f"seed_policy: expected a policy name, got {self.seed_policy!r}")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend: expected one of {', '.join(BACKENDS)}, "
                             f"got {self.backend!r}")
        for name in ("max_iterations", "node_limit"):
            v = getattr(self, name)
            if v is not None and not is_whole(v, 0):
                raise ValueError(f"{name}: must be an integer >= 0, got {v!r}")
        for name in ("cg_share", "pooled_share", "lns_share", "lns_window"):
            if not is_share(getattr(self, name)):
                raise ValueError(f"{name}: must be in (0, 1], got {getattr(self, name)}")
        for name in ("smoothing", "cg_gap"):
            if not is_fraction(getattr(self, name)):
                raise ValueError(f"{name}: must be in [0, 1), got {getattr(self, name)}")
        if self.lns_rounds is not None and not is_whole(self.lns_rounds, 0):
            raise ValueError(f"lns_rounds: must be an integer >= 0 or None, "
                             f"got {self.lns_rounds!r}")
        if self.lp_solver not in ("ipm", "simplex"):
            raise ValueError(f"lp_solver: expected 'ipm' or 'simplex', got {self.lp_solver!r}")
        if not is_whole(self.seed, 0):
            raise ValueError(f"seed: must be an integer >= 0, got {self.seed!r}")


@dataclass(frozen=True, kw_only=True)
class LnsOptions:
    """One ``ruin_and_recreate`` search (keyword fields; checked when built, ``ValueError``
    naming the field):

    * ``rounds`` (an integer >= 0) and ``deadline`` (a ``time.perf_counter()`` value): it stops
      after ``rounds`` rounds or at ``deadline``, whichever comes first; at least one of them.
    * ``window`` in (0, 1] (``LNS_WINDOW``): a round re-plans the jobs running in a random window
      of ``window`` x T slots.
    * ``noise`` (a finite number >= 0, ``LNS_NOISE``): the re-planning order is the score plus
      uniform noise in [0, ``noise``).
    * ``seed`` (an integer >= 0): fixes the windows and the noise.
    """

    rounds: int | None = None
    deadline: float | None = None
    window: float = LNS_WINDOW
    noise: float = LNS_NOISE
    seed: int = 0

    def __post_init__(self) -> None:
        if self.rounds is None and self.deadline is None:
            raise ValueError("rounds or deadline: one of them must be given")
        if self.rounds is not None and not is_whole(self.rounds, 0):
            raise ValueError(f"rounds: must be an integer >= 0 or None, got {self.rounds!r}")
        if self.deadline is not None and not (is_real(self.deadline)
                                              and not math.isnan(self.deadline)):
            raise ValueError(f"deadline: must be a time.perf_counter() value, got "
                             f"{self.deadline!r}")
        if not is_share(self.window):
            raise ValueError(f"window: must be in (0, 1], got {self.window}")
        if not is_finite(self.noise, 0.0):
            raise ValueError(f"noise: must be a finite number >= 0, got {self.noise!r}")
        if not is_whole(self.seed, 0):
            raise ValueError(f"seed: must be an integer >= 0, got {self.seed!r}")


@dataclass(frozen=True)
class Column:
    """One schedule of one job: allocation rows (job, slot, server, role, count)."""

    job: int
    rows: np.ndarray
    utility: float
    completion: int


def column_from_rows(instance: Instance, job: int, rows: np.ndarray) -> Column | None:
    """The column of a job's allocation rows, or None if they do not complete the job (2).

    Its objective is the utility of its actual completion slot, the last slot with workers (8).
    """
    rows = np.asarray(rows, dtype=np.int64).reshape(-1, 5)
    rows = rows[rows[:, 4] > 0]
    w = rows[rows[:, 3] == WORKER]
    # (2) in work units: each worker does its server type's speed (1 without types)
    if len(w) == 0 or (w[:, 4] * instance.worker_credit(w[:, 0], w[:, 2])).sum() \
            < instance.work[job]:
        return None
    completion = int(w[:, 1].max())
    rows = rows[np.lexsort((rows[:, 3], rows[:, 2], rows[:, 1]))]
    return Column(job, rows, instance.utility_of(job, completion), completion)


def columns_of(instance: Instance, schedule: Schedule) -> list[Column]:
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


class ColumnPool:
    """Generated columns (deduplicated) with their resource use per (slot, server, resource).

    Capacity keys are flattened ``(t S + s) R + r`` over shape (T+1, S, R), S = H + K."""

    def __init__(self, instance: Instance):
        self.instance = instance
        self.shape = (instance.horizon + 1, instance.H + instance.K, instance.R)
        self.cap = np.broadcast_to(instance.capacity, self.shape).reshape(-1).copy()
        self.cap[: self.shape[1] * self.shape[2]] = 0.0  # slot 0 does not exist
        self.columns: list[Column] = []
        self.keys: list[np.ndarray] = []
        self.amounts: list[np.ndarray] = []
        self._seen: dict[tuple[int, bytes], int] = {}

    def add(self, columns: Iterable[Column]) -> list[int]:
        """Add the new columns; returns the pool indices of all given columns (new or not)."""
        out = []
        for col in columns:
            key = (col.job, col.rows.tobytes())
            n = self._seen.get(key)
            if n is None:
                n = self._seen[key] = len(self.columns)
                keys, amounts = self.entries_of(col)
                self.keys.append(keys)
                self.amounts.append(amounts)
                self.columns.append(col)
            out.append(n)
        return out

    def entries_of(self, col: Column) -> tuple[np.ndarray, np.ndarray]:
        """(keys, amounts): w_i^r y (workers, with their server type's demand) or s_i^r z (PSs)
        per slot, server and resource."""
        inst = self.instance
        r = col.rows
        demand = inst.row_demand(r[:, 0], r[:, 2], r[:, 3]) * r[:, 4:5]
        m, r = np.nonzero(demand > 0)
        return (col.rows[m, 1] * self.shape[1] + col.rows[m, 2]) * self.shape[2] + r, demand[m, r]

    def __len__(self) -> int:
        return len(self.columns)

    def load(self, x: dict[int, float]) -> np.ndarray:
        """sum_l x_l (amounts of column l) for x = {pool index: value}, shape (T+1, S, R)."""
        out = np.zeros(self.cap.size)
        for n, v in x.items():
            np.add.at(out, self.keys[n], v * self.amounts[n])
        return out.reshape(self.shape)

    def spread(self, col: Column, load: np.ndarray) -> Column:
        """``col`` with the same worker and PS counts per slot, re-placed one container at a
        time on the server whose most-used resource (``load`` + this placement, relative to
        capacity) stays lowest, within each server's room. The same schedule for (2)-(10), at
        the same cost under prices equal across a pool's servers (the pooled phase)."""
        inst = self.instance
        H = inst.H
        rows = []
        for role, demand, lo, hi in ((WORKER, inst.worker_demand[col.job], 0, H),
                                     (1 - WORKER, inst.ps_demand[col.job], H, H + inst.K)):
            cap = inst.capacity[lo:hi]
            need = demand > 0
            sel = col.rows[:, 3] == role
            if not sel.any():
                continue
            room = fit_count(cap, demand)
            with np.errstate(divide="ignore", invalid="ignore"):
                step = np.where(need & (cap > 0), demand / cap, 0.0).max(axis=1)
            slots, inv = np.unique(col.rows[sel, 1], return_inverse=True)
            counts = np.bincount(inv, weights=col.rows[sel, 4]).astype(np.int64)
            for t, k in zip(slots, counts):
                with np.errstate(divide="ignore", invalid="ignore"):
                    util = np.where(need & (cap > 0), load[t, lo:hi] / cap, 0.0).max(axis=1)
                placed = np.zeros(hi - lo, dtype=np.int64)
                for _ in range(int(k)):
                    h = int(np.argmin(np.where(placed < room, util + step, np.inf)))
                    placed[h] += 1
                    util[h] += step[h]
                for j in np.flatnonzero(placed):
                    rows.append((col.job, int(t), lo + int(j), role, int(placed[j])))
        spread = column_from_rows(inst, col.job, np.array(rows, dtype=np.int64))
        if spread is None:  # the same counts per slot: it completes the job as ``col`` does
            raise RuntimeError(f"re-placing job {col.job}'s column lost work")
        return spread

    def costs(self, prices: np.ndarray, idx: Iterable[int]) -> np.ndarray:
        """Resource cost at ``prices`` (T+1, S, R) of the columns ``idx``."""
        flat = prices.reshape(-1)
        return np.array([float(self.amounts[n] @ flat[self.keys[n]]) for n in idx])


class RestrictedMaster:
    """The restricted master LP of (14)-(18) over the first ``n`` columns of a pool.

    ``pooled=True``: capacity rows summed over the servers of each pool (phase 1, see the
    module doc); otherwise one row per slot, server and resource. Warm-started HiGHS; rows are
    added when an LP solution violates them.
    """

    def __init__(self, pool: ColumnPool, *, pooled: bool = False, **lp_options: Any):
        inst = pool.instance
        self.pool, self.pooled, self.instance = pool, pooled, inst
        T1, S, R = pool.shape
        if pooled:  # key (t, pool, r); pool 0 = worker servers, 1 = PS servers
            self.group = np.r_[np.zeros(inst.H, np.int64), np.ones(inst.K, np.int64)]
            cap = np.stack([inst.worker_capacity.sum(axis=0), inst.ps_capacity.sum(axis=0)])
            self.cap = np.broadcast_to(cap, (T1, 2, R)).reshape(-1).copy()
            self.cap[: 2 * R] = 0.0
        else:
            self.cap = pool.cap
        self.row_of = np.full(self.cap.size, -1, dtype=np.int64)
        self.active = np.zeros(0, dtype=np.int64)  # keys of the LP's capacity rows, in order
        self.lp = IncrementalLP("max", **lp_options)
        self.lp.add_rows(np.full(inst.I, -math.inf), np.ones(inst.I))  # (17): rows 0..I-1
        self.cols: list[int] = []  # pool index of each LP column
        self.in_lp: set[int] = set()
        self._blocks: list[sp.csc_matrix] = []
        self._A: sp.csr_matrix | None = None

    def _key(self, full_keys: np.ndarray) -> np.ndarray:
        if not self.pooled:
            return full_keys
        S, R = self.pool.shape[1], self.pool.shape[2]
        t, rest = np.divmod(full_keys, S * R)
        s, r = np.divmod(rest, R)
        return (t * 2 + self.group[s]) * R + r

    def sync(self, indices: Iterable[int] | None = None) -> int:
        """Add pool columns to the LP: ``indices`` (default: every pool column), skipping those
        already in it; returns how many were added."""
        todo = range(len(self.pool)) if indices is None else indices
        new = [n for n in dict.fromkeys(todo) if n not in self.in_lp]
        if not new:
            return 0
        keys = [self._key(self.pool.keys[n]) for n in new]
        amounts = [self.pool.amounts[n] for n in new]
        sizes = [len(k) for k in keys]
        block = sp.csc_matrix((np.concatenate(amounts), (np.concatenate(keys),
                               np.repeat(np.arange(len(new)), sizes))),
                              shape=(self.cap.size, len(new)))  # duplicates summed (pooled)
        self._blocks.append(block)
        self._A = None
        cols = [self.pool.columns[n] for n in new]
        lp_part = block[self.active] if len(self.active) else sp.csc_matrix((0, len(new)))
        jobs = sp.csc_matrix((np.ones(len(new)), ([c.job for c in cols], np.arange(len(new)))),
                             shape=(self.instance.I, len(new)))
        self.lp.add_cols([c.utility for c in cols], np.zeros(len(new)),
                         np.full(len(new), math.inf), sp.vstack([jobs, lp_part]).tocsc())
        self.cols.extend(new)
        self.in_lp.update(new)
        return len(new)

    def usage_matrix(self) -> sp.csr_matrix:
        """Amounts of the LP's columns, keys x columns."""
        if self._A is None:
            self._A = (sp.hstack(self._blocks).tocsr() if self._blocks
                       else sp.csr_matrix((self.cap.size, 0)))
        return self._A

    def solve(self, deadline: float | None = None
              ) -> tuple[float, dict[int, float], np.ndarray, np.ndarray] | None:
        """(value, x, prices (T+1, S, R), mu (I,)) at the LP optimum of the master, with x a
        dict pool index -> value (positive ones); None if the deadline (``perf_counter``) passed.

        Re-solves after adding violated capacity rows. Duals are clipped at 0 (they are >= 0
        up to float noise for these <= rows); pooled duals are copied to every server of the
        pool."""
        inst = self.instance
        while True:
            left = None if deadline is None else deadline - time.perf_counter()
            if left is not None and left <= 0:
                return None
            status, value, x, duals = self.lp.solve(time_limit=left)
            if status == "time_limit":  # the deadline passed
                return None
            if status != "optimal" or value is None or x is None or duals is None:
                raise RuntimeError(f"restricted master LP not solved: {status}")
            if not self.cols:
                break
            usage = self.usage_matrix() @ x
            over = np.flatnonzero((usage > self.cap * (1 + 1e-7) + 1e-7) & (self.row_of < 0))
            if not len(over):
                break
            self.lp.add_rows(np.full(len(over), -math.inf), self.cap[over],
                             self.usage_matrix()[over])
            self.row_of[over] = self.lp.n_rows - len(over) + np.arange(len(over))
            self.active = np.r_[self.active, over]
        row_prices = np.zeros(self.cap.size)
        row_prices[self.active] = np.maximum(duals[inst.I:], 0.0)
        if self.pooled:
            T1, S, R = self.pool.shape
            prices = row_prices.reshape(T1, 2, R)[:, self.group, :]
        else:
            prices = row_prices.reshape(self.pool.shape)
        xs = {self.cols[k]: float(v) for k, v in enumerate(x) if v > VALUE_EPS}
        return value, xs, prices, np.maximum(duals[:inst.I], 0.0)


def price_jobs(instance: Instance, prices: np.ndarray, *, backend: str = "numpy") -> list[Plan]:
    """Best plan of every job at ``prices`` (T+1, H+K, R) with full capacities free (pricing)."""
    from ..online.dual import Market, best_schedule

    T, H = instance.horizon, instance.H
    wfree = np.broadcast_to(instance.worker_capacity, (T + 1,) + instance.worker_capacity.shape)
    pfree = np.broadcast_to(instance.ps_capacity, (T + 1,) + instance.ps_capacity.shape)
    p, q = np.ascontiguousarray(prices[:, :H]), np.ascontiguousarray(prices[:, H:])
    market = Market(p, q, wfree, pfree)
    return [best_schedule(instance, i, market, backend=backend)
            for i in range(instance.I)]


def lagrangian_bound(pool: ColumnPool, prices: np.ndarray, plans: Iterable[Plan]) -> float:
    """L(p, q) = sum_{t,s,r} price x capacity + sum_i max(0, best payoff_i) >= LP(14) >= OPT."""
    return (float(prices.reshape(-1) @ pool.cap)
            + float(sum(max(0.0, pl.payoff) for pl in plans)))


@dataclass
class CGState:
    """What column generation has learnt so far: best bound, its prices, history."""

    best_bound: float = math.inf
    center: np.ndarray | None = None
    iterations: int = 0
    history: list[dict] = field(default_factory=list)
    last_x: dict[int, float] = field(default_factory=dict)  # pool index -> last LP value


def column_generation(pool: ColumnPool, master: RestrictedMaster, state: CGState,
                      options: ColgenOptions | None = None, *, deadline: float | None = None,
                      spread: str | None = None, phase: str = "", progress: bool = False) -> dict:
    """Column generation on ``master`` until no column improves (or the best bound meets the
    master value within ``options.cg_gap``), the deadline (a ``time.perf_counter()`` value) or
    ``state.iterations`` reaching ``options.max_iterations``. Updates ``state``; returns the
    phase's last master ``value``, whether it ``converged`` and what ``stopped`` it otherwise
    ("time", "iterations" or None). ``options``: also the pricing ``backend`` and
    ``smoothing``; None: ``ColgenOptions(smoothing=0.0)`` (the defaults, no smoothing).

    With ``smoothing`` > 0 (Wentges), pricing runs at ``alpha * center + (1 - alpha) * duals``,
    alpha starting at ``smoothing``, halving its distance to 1 after a round that did not improve
    the bound and moving back towards ``smoothing`` after one that did;
    a column enters if its reduced cost at the master's own duals is positive; when none does
    ("mispricing") the same round prices at the duals themselves, so "no improving column" is
    always decided at the master's duals. Every priced point gives a valid bound.

    ``spread="only"`` replaces each priced column by its ``ColumnPool.spread`` re-placement
    (cost-neutral in the pooled phase); ``"both"`` adds both; None keeps the DP's placement.
    """
    from tqdm import tqdm

    inst = pool.instance
    options = ColgenOptions(smoothing=0.0) if options is None else options
    max_iterations, backend, smoothing = options.max_iterations, options.backend, options.smoothing
    finite = np.where(np.isfinite(inst.utility_table), inst.utility_table, 0.0)
    tol = RC_TOL * max(1.0, float(finite.max(initial=0.0)))
    value, converged, stopped = 0.0, inst.I == 0, None
    weight = smoothing  # adaptive smoothing weight of the center
    bar = tqdm(desc=f"column generation {phase}".strip(), unit="it", disable=not progress,
               leave=False)
    t0 = time.perf_counter()
    try:
        while not converged:
            if max_iterations is not None and state.iterations >= max_iterations:
                stopped = "iterations"
                break
            if deadline is not None and time.perf_counter() >= deadline:
                stopped = "time"
                break
            solved = master.solve(deadline)
            if solved is None:
                stopped = "time"
                break
            value, x, duals, mu = solved
            state.last_x = x
            alpha = weight if state.center is not None else 0.0
            while True:
                prices = (duals if alpha == 0 or state.center is None
                          else alpha * state.center + (1 - alpha) * duals)
                plans = price_jobs(inst, prices, backend=backend)
                bound = lagrangian_bound(pool, prices, plans)
                if bound < state.best_bound:
                    state.best_bound, state.center = bound, prices
                    if alpha > 0:  # the step paid off: trust the duals a little more
                        weight = max(smoothing, 2 * weight - 1)
                elif alpha > 0:  # no better bound: stay closer to the center next time
                    weight = (1 + weight) / 2
                cols = [c for c in (column_from_rows(inst, pl.job, pl.rows) for pl in plans
                                    if pl.completion is not None) if c is not None]
                if spread:  # re-place on the least-loaded servers, this round's columns included
                    load = pool.load(x)
                    spread_cols = []
                    for c in cols:
                        spread_cols.append(pool.spread(c, load))
                        k, a = pool.entries_of(spread_cols[-1])
                        load.reshape(-1)[k] += a
                    cols = spread_cols + (cols if spread == "both" else [])
                idx = pool.add(cols)
                rc = (np.array([c.utility for c in cols]) - pool.costs(duals, idx)
                      - mu[[c.job for c in cols]]) if cols else np.zeros(0)
                improving = [n for n, r in zip(idx, rc) if r > tol and n not in master.in_lp]
                if improving or alpha == 0:
                    break
                alpha = 0.0  # mispricing: decide at the master's own duals
            master.sync(improving)
            state.iterations += 1
            gap = relative_gap(value, state.best_bound)
            if not improving or (gap is not None and gap <= options.cg_gap):
                converged = True  # no improving column: value = this master's LP optimum
            state.history.append({"phase": phase, "iteration": state.iterations,
                                  "master": value, "bound": bound,
                                  "best_bound": state.best_bound, "alpha": alpha,
                                  "added": len(improving), "columns": len(pool),
                                  "rows": len(master.active), "t": time.perf_counter() - t0})
            bar.update(1)
            bar.set_postfix(master=f"{value:.6g}", bound=f"{state.best_bound:.6g}",
                            gap="-" if gap is None else f"{gap:.2%}", cols=len(pool))
    finally:
        bar.close()
    return {"value": value, "converged": converged, "stopped": stopped}


def fits_greedily(pool: ColumnPool, order: Iterable[int], start: Iterable[int] = ()
                  ) -> list[int]:
    """Columns taken in ``order`` when their job is still free and they fit the capacities
    left (after the columns ``start``, which are taken first)."""
    used = np.zeros(pool.cap.size)
    taken, busy = [], set()
    limit = pool.cap + capacity_slack(pool.cap)
    first = set(start)
    for n in list(start) + [n for n in order if n not in first]:
        job = pool.columns[n].job
        k, a = pool.keys[n], pool.amounts[n]
        if job in busy or np.any(used[k] + a > limit[k]):
            continue
        used[k] += a
        taken.append(n)
        busy.add(job)
    return taken


def could_complete(instance: Instance, job: int, room: np.ndarray) -> bool:
    """False only if ``job`` cannot complete within the free capacity ``room`` (T+1, H+K, R):
    a necessary condition of the dual subroutine finding a plan there, checked in one vectorised
    pass instead of a DP over the whole horizon (the DP's most expensive case: with no feasible
    completion slot its scan is never cut short).

    From its arrival on, slot t admits at most k_t = min(N_i, workers that fit on the worker
    servers, the most workers whose PSs ceil(k b_i / B_i) fit on the PS servers) workers, each
    fit counted per server by ``model.numerics.fit_count`` as the DP counts it; the job needs
    sum_t k_t >= W_i (constraint (2) in worker-slots). With accelerator types (work per worker
    depends on the server) it returns True: no screen, the DP decides.
    """
    if instance.typed:
        return True
    H, a, N = instance.H, int(instance.arrival[job]), int(instance.chunks[job])
    workers = fit_count(room[a:, :H], instance.worker_demand[job], N).sum(axis=1)
    ps = fit_count(room[a:, H:], instance.ps_demand[job], N).sum(axis=1)
    need = np.asarray(instance.ps_needed(job, np.arange(N + 1)))  # non-decreasing in k
    by_ps = np.searchsorted(need, ps, side="right") - 1  # most k whose PSs fit
    return int(np.minimum(np.minimum(workers, by_ps), N).sum()) >= int(instance.work[job])


def fill_residual(pool: ColumnPool, taken: list[int], prices: np.ndarray, order: Iterable[int],
                  *, backend: str = "numpy") -> list[int]:
    """``taken`` completed with new columns: each job of ``order`` not in ``taken`` gets, in
    turn, its best plan (eq. (21)) at ``prices`` (T+1, H+K, R) within the capacity that the
    columns taken so far leave free, kept (and added to the pool) when it completes the job.

    Feasible by construction: the dual subroutine only places containers in the free room, so
    the columns returned use at most the capacities, one per job.
    """
    from ..online.dual import Market, best_schedule

    inst = pool.instance
    H = inst.H
    free = pool.cap.copy()
    for n in taken:
        free[pool.keys[n]] -= pool.amounts[n]
    np.maximum(free, 0.0, out=free)
    room = free.reshape(pool.shape)
    busy = {pool.columns[n].job for n in taken}
    p, q = np.ascontiguousarray(prices[:, :H]), np.ascontiguousarray(prices[:, H:])
    out = list(taken)
    for job in order:
        if job in busy or not could_complete(inst, job, room):
            continue
        market = Market(p, q, room[:, :H], room[:, H:])
        plan = best_schedule(inst, job, market, backend=backend)
        col = (None if plan.completion is None
               else column_from_rows(inst, job, np.asarray(plan.rows)))
        if col is None:
            continue
        n = pool.add([col])[0]
        free[pool.keys[n]] -= pool.amounts[n]
        np.maximum(free, 0.0, out=free)  # float noise only: the plan fits the room
        out.append(n)
        busy.add(job)
    return out


def ruin_and_recreate(pool: ColumnPool, start: list[int], prices: Sequence[np.ndarray],
                      score: np.ndarray, search: LnsOptions, *, backend: str = "numpy"
                      ) -> tuple[list[int], int]:
    """Large-neighbourhood search on an integer schedule (a list of pool columns): each round
    removes the columns of every job running in a random window of ``search.window`` x T
    slots, then ``fill_residual`` re-plans the removed and the left-out jobs, in the order of
    ``score`` (larger first) plus uniform noise in [0, ``search.noise``), at the round's prices
    (``prices`` in turn, the dual subroutine's ``backend``); the result replaces the current
    schedule when it earns at least as much. Stops after ``search.rounds`` rounds or at
    ``search.deadline`` (``perf_counter``), whichever comes first. Returns (the best schedule,
    rounds run). Every schedule it keeps is ``fill_residual``'s, feasible by construction;
    ``search.seed`` fixes the windows and the noise.
    """
    rounds, deadline = search.rounds, search.deadline
    inst = pool.instance
    rng = np.random.default_rng(search.seed)
    T = inst.horizon
    width = max(1, int(round(search.window * T)))
    best = list(start)

    def worth(cols: list[int]) -> float:
        return float(sum(pool.columns[n].utility for n in cols))

    value, done = worth(best), 0
    while (rounds is None or done < rounds) and (deadline is None
                                                 or time.perf_counter() < deadline):
        t0 = int(rng.integers(1, max(2, T - width + 2)))
        keep = [n for n in best
                if not ((pool.columns[n].rows[:, 1] >= t0)
                        & (pool.columns[n].rows[:, 1] < t0 + width)).any()]
        order = np.argsort(-(score + rng.uniform(0.0, search.noise, len(score))), kind="stable")
        trial = fill_residual(pool, keep, prices[done % len(prices)], order.tolist(),
                              backend=backend)
        done += 1
        v = worth(trial)
        if v >= value - VALUE_EPS:
            best, value = trial, v
    return best, done


def schedule_of(pool: ColumnPool, cols: Iterable[int], name: str) -> Schedule:
    """The schedule that admits the job of each pool column in ``cols`` and runs its rows
    (policy name ``name``); valid when the columns fit the capacities, one per job."""
    builder = ScheduleBuilder(pool.instance)
    for n in cols:
        builder.admit(pool.columns[n].job)
        builder.add_array(pool.columns[n].rows)
    return builder.build(name, {})


def integer_program(pool: ColumnPool, candidates: list[int]) -> LinearProgram:
    """The restricted master over ``candidates`` with x_l binary, keeping every capacity row
    that some choice of columns (at most one per job) could overfill."""
    inst = pool.instance
    n = len(candidates)
    keys = [pool.keys[c] for c in candidates]
    amounts = [pool.amounts[c] for c in candidates]
    jobs = np.array([pool.columns[c].job for c in candidates], dtype=np.int64)
    sizes = [len(k) for k in keys]
    A = sp.csr_matrix((np.concatenate(amounts) if n else np.zeros(0),
                       (np.concatenate(keys) if n else np.zeros(0, np.int64),
                        np.repeat(np.arange(n), sizes))), shape=(pool.cap.size, n))
    if n:  # most a row can carry: sum over jobs of the job's largest amount there
        coo = A.tocoo()
        j = jobs[coo.col]
        order = np.lexsort((j, coo.row))
        r, j, v = coo.row[order], j[order], coo.data[order]
        start = np.flatnonzero(np.r_[True, (r[1:] != r[:-1]) | (j[1:] != j[:-1])])
        most = np.zeros(pool.cap.size)
        np.add.at(most, r[start], np.maximum.reduceat(v, start))
        rows = np.flatnonzero(most > pool.cap + capacity_slack(pool.cap))
    else:
        rows = np.zeros(0, dtype=np.int64)
    J = sp.csr_matrix((np.ones(n), (jobs, np.arange(n))), shape=(inst.I, n))
    M = sp.vstack([J, A[rows]]).tocsr()
    return LinearProgram(c=np.array([pool.columns[c].utility for c in candidates]), A=M,
                         row_lower=np.full(M.shape[0], -math.inf),
                         row_upper=np.r_[np.ones(inst.I), pool.cap[rows]], lower=np.zeros(n),
                         upper=np.ones(n), integer=np.ones(n, bool))


@dataclass
class Bracket:
    """Bounds on OPT(1) from column generation: ``lower <= OPT <= upper``.

    ``lower``: utility of ``schedule`` (>= ``seed_utility``, the seed policy's utility, and
    >= every value in ``candidates``).
    ``upper``: the best Lagrangian bound (= LP(14) when ``converged`` with ``cg_gap`` 0, i.e.
    phase 2 ended with no improving column). ``lp_value``: the last master LP value (a bound
    only if converged). ``gap`` = (upper - lower) / upper. ``source``: which candidate gave
    ``schedule``. ``candidates``: utility of each integer schedule tried before the integer
    master (each seed schedule as columns, "lp-greedy", "<best seed>+lp-greedy").
    """

    lower: float
    upper: float
    gap: float
    lp_value: float
    converged: bool
    pooled_converged: bool
    iterations: int
    columns: int
    seed_utility: float
    greedy_utility: float
    seed_policy: str
    schedule: Schedule
    source: str
    mip_status: str
    cg_s: float
    mip_s: float
    seed_s: float
    history: list[dict] = field(default_factory=list)
    candidates: dict[str, float] = field(default_factory=dict)
    lns_rounds: int = 0

    def stats(self) -> dict:
        return {"lower": self.lower, "upper": self.upper, "gap": self.gap,
                "lp_value": self.lp_value, "converged": self.converged,
                "pooled_converged": self.pooled_converged, "iterations": self.iterations,
                "columns": self.columns, "seed_utility": self.seed_utility,
                "greedy_utility": self.greedy_utility, "seed_policy": self.seed_policy,
                "source": self.source, "mip_status": self.mip_status, "cg_s": self.cg_s,
                "mip_s": self.mip_s, "seed_s": self.seed_s, "candidates": dict(self.candidates),
                "lns_rounds": self.lns_rounds}


def bracket(instance: Instance, options: ColgenOptions | None = None, *,
            time_limit: float | None = 600.0, seeds: Mapping[str, Schedule] | None = None,
            progress: bool = False, policy_name: str = "offline-colgen") -> Bracket:
    """[lower, upper] on OPT(1) by column generation run as ``options`` say (a
    ``ColgenOptions``; None: the defaults), seeded with ``options.seed_policy``'s schedule and
    the schedules ``seeds`` (name -> a valid schedule of ``instance``, e.g. from
    ``policy_schedules``: every policy that runs at that size).

    Every completed job of every seed schedule enters the pool as a column, so the masters start
    from them; each seed schedule is also an integer candidate, as is the best of them completed
    by the LP-guided greedy ("<name>+lp-greedy"), and the best candidate starts the integer master.
    Hence ``lower`` >= every seed schedule's utility.

    ``time_limit`` (seconds, None = no limit) covers everything: the seed policy, phase 1 (up
    to ``options.pooled_share`` of the column-generation time), phase 2 (until
    ``options.cg_share`` of the limit, or convergence) and the integer schedule (the rest;
    skipped when no time is left), in which ``options.lns_rounds`` rounds of
    ``ruin_and_recreate`` run on the best candidate before the integer master (None: until
    ``options.lns_share`` of the integer phase's time, or ``LNS_ROUNDS`` without a time
    limit). Deterministic limits (``options.max_iterations``, ``options.node_limit``) and the
    other options: ``ColgenOptions``. Stopped early, ``upper`` is still a valid bound.
    ``progress``: a progress bar per phase; ``policy_name``: the schedule's policy name.

    ``lower <= upper`` holds by weak duality; float noise in the duals may put ``upper`` below
    ``lower`` by at most ``model.numerics.BOUND_RTOL`` (relative), and then ``upper = lower``.
    A larger inversion raises ``RuntimeError`` naming both numbers (a bug, never hidden).
    """
    from ..model.validate import validate
    from ..policies import get_policy

    options = ColgenOptions() if options is None else options
    if not isinstance(options, ColgenOptions):
        raise ValueError(f"options: expected ColgenOptions, got {type(options).__name__}")
    if time_limit is not None and not time_limit > 0:
        raise ValueError(f"time_limit: must be > 0 seconds, got {time_limit}")
    seed_policy, backend = options.seed_policy, options.backend
    seeds = dict(seeds or {})
    for name, s in seeds.items():
        if name in (seed_policy, "lp-greedy", "mip", "mip+fill") or "+" in name:
            raise ValueError(f"seeds: name {name!r} is taken (seed policy or a candidate; "
                             "no '+' in seed names)")
        report = validate(instance, s)
        if not report.ok:  # an invalid seed would make the lower end no bound
            raise ValueError(f"seeds[{name!r}]: not a valid schedule of the instance: {report}")
    start = time.perf_counter()
    seed_schedule = get_policy(seed_policy).solve(instance)
    seed_s = time.perf_counter() - start
    pool = ColumnPool(instance)
    seed_cols = {name: pool.add(columns_of(instance, s))
                 for name, s in {seed_policy: seed_schedule, **seeds}.items()}
    seeded = {n for cols in seed_cols.values() for n in cols}

    t_cg = time.perf_counter()
    cg_end = None if time_limit is None else start + options.cg_share * time_limit
    phase1_end = None if cg_end is None else t_cg + options.pooled_share * (cg_end - t_cg)
    state = CGState()
    pooled = RestrictedMaster(pool, pooled=True)
    pooled.sync()
    # phase 1 prices at the pooled master's duals themselves (no smoothing)
    one = column_generation(pool, pooled, state, replace(options, smoothing=0.0),
                            deadline=phase1_end, spread=None if instance.typed else "only",
                            phase="(pooled)", progress=progress)
    candidates = seeded | set(state.last_x)
    # interior-point duals without crossover: faster on the big per-server master, and centred
    # duals stabilise column generation (any prices give a valid bound)
    ipm: dict[str, Any] = ({"solver": "ipm", "run_crossover": "off"}
                           if options.lp_solver == "ipm" else {})
    full = RestrictedMaster(pool, **ipm)
    # warm start: the pooled LP's support and the seeds' columns (a small, good start), priced
    # from the pooled phase's best prices (``state.center``, the smoothing centre)
    full.sync(sorted(candidates))
    two = column_generation(pool, full, state, options, deadline=cg_end,
                            spread=None if instance.typed else "both",
                            phase="(per server)", progress=progress)
    candidates |= {n for n, v in state.last_x.items() if v >= CANDIDATE_X}
    cg_s = time.perf_counter() - t_cg

    # integer schedule: the seeds, LP-guided greedy (alone and completing the best seed), then
    # the MILP over the candidates started from the best of these
    t_mip = time.perf_counter()
    by_value = sorted(state.last_x, key=lambda n: (-state.last_x[n], -pool.columns[n].utility))
    order = by_value + sorted(range(len(pool)), key=lambda n: -pool.columns[n].utility)
    found: dict[str, list[int]] = {**seed_cols, "lp-greedy": fits_greedily(pool, order)}

    def worth(cols: list[int]) -> float:
        return float(sum(pool.columns[n].utility for n in cols))

    greedy_value = worth(found["lp-greedy"])
    top = max(seed_cols, key=lambda k: worth(seed_cols[k]))
    found[f"{top}+lp-greedy"] = fits_greedily(pool, order, start=seed_cols[top])
    # the best so far, completed by new plans in the room it leaves: jobs by LP mass, then by
    # best utility, planned at the best bound's prices (steering them to uncontended room)
    # and at zero prices (earliest completion)
    mass = np.zeros(instance.I)
    for n, v in state.last_x.items():
        mass[pool.columns[n].job] += v
    top_utility = np.array([instance.utility_of(i, instance.arrival[i])
                            for i in range(instance.I)])
    jobs = sorted(range(instance.I), key=lambda i: (-mass[i], -top_utility[i]))
    base = max(found, key=lambda k: worth(found[k]))
    deadline = None if time_limit is None else start + time_limit
    for label, prices in (("prices", state.center), ("0", np.zeros(pool.shape))):
        if prices is not None and (deadline is None or time.perf_counter() < deadline):
            found[f"{base}+fill@{label}"] = fill_residual(pool, found[base], prices, jobs,
                                                          backend=backend)
    values = {k: worth(cols) for k, cols in found.items()}
    source = max(values, key=lambda k: values[k])  # ties: the first (the seed policy)
    best = found[source]
    # ruin and recreate from the best candidate: jobs the LP likes, then valuable ones, first
    lns_done, lns_rounds = 0, options.lns_rounds
    now = time.perf_counter()
    if lns_rounds != 0 and (deadline is None or now < deadline):
        score = mass + 0.5 * top_utility / max(DIVISOR_FLOOR, float(top_utility.max(initial=0.0)))
        lns_prices = [p for p in (state.center, np.zeros(pool.shape)) if p is not None]
        search = LnsOptions(
            rounds=LNS_ROUNDS if lns_rounds is None and deadline is None else lns_rounds,
            deadline=None if deadline is None else now + options.lns_share * (deadline - now),
            window=options.lns_window, seed=options.seed)
        improved, lns_done = ruin_and_recreate(pool, best, lns_prices, score, search,
                                               backend=backend)
        if worth(improved) > values[source] + VALUE_EPS:
            source = f"{source}+lns"
            found[source], values[source] = improved, worth(improved)
            best = improved
    cand = sorted(candidates | {n for cols in found.values() for n in cols})
    lp = integer_program(pool, cand)
    initial = np.isin(cand, best).astype(float)
    res = solve_program(lp, SolverLimits(node_limit=options.node_limit, deadline=deadline),
                        backend="highs", seed=options.seed, initial=initial)
    if res.incumbent == "solver" and res.x is not None and res.objective is not None \
            and res.objective > float(lp.c @ initial) + VALUE_EPS:
        best, source = [cand[k] for k in np.flatnonzero(res.x > 0.5)], "mip"
    if source == "mip" and (deadline is None or time.perf_counter() < deadline):
        filled = fill_residual(pool, best, state.center if state.center is not None
                               else np.zeros(pool.shape), jobs, backend=backend)
        if worth(filled) > worth(best) + VALUE_EPS:
            best, source = filled, "mip+fill"
    mip_s = time.perf_counter() - t_mip

    schedule = schedule_of(pool, best, policy_name)
    assert_valid(instance, schedule)  # the lower end is a bound only for a valid schedule
    lower = schedule.total_utility
    # every job at its best utility f_i(0) also bounds OPT: the bound before any pricing round
    trivial = float(sum(instance.utility_table[i, instance.arrival[i]] for i in range(instance.I)))
    upper = ordered_bound("max", lower, min(state.best_bound, trivial),
                          what="column-generation upper bound")
    gap = 0.0 if upper <= 0 else (upper - lower) / upper
    out = Bracket(lower, upper, gap, two["value"], two["converged"], one["converged"],
                  state.iterations, len(pool), seed_schedule.total_utility, greedy_value,
                  seed_policy, schedule, source, res.status, cg_s, mip_s, seed_s, state.history,
                  values, lns_done)
    closed = gap <= MIP_GAP
    # what stopped the search short of convergence: phase 2's limit, else the integer master's
    stopped = ({"time": "time_limit", "iterations": "iteration_limit"}.get(two["stopped"])
               or (res.status if res.status in STOPPED else None))
    schedule.stats.update(out.stats())
    schedule.stats.update({"status": "optimal" if closed else "bracket",
                           "stopped_by": None if closed else stopped, "incumbent": True,
                           "objective": lower, "bound": upper, "proven_optimal": closed,
                           "message": ("optimal (bracket closed)" if gap <= MIP_GAP else
                                       f"bracket [{lower:.6g}, {upper:.6g}], gap {gap:.3%}: "
                                       "NOT proven optimal")})
    return out


def policy_schedules(instance: Instance, policies: Iterable[str] = SEED_POLICIES,
                     oasis_pricings: Mapping[str, Any] | None = None) -> dict[str, Schedule]:
    """Seeds for ``bracket``: each policy's schedule of ``instance`` and OASiS's under each
    pricing (name -> pricing document, e.g. the figures' estimated and plug-in pricing), every
    one validated (``AssertionError`` otherwise)."""
    from ..policies import get_policy

    out = {name: get_policy(name).solve(instance) for name in policies}
    for name, pricing in (oasis_pricings or {}).items():
        out[name] = get_policy("oasis", pricing=pricing).solve(instance)
    for s in out.values():
        assert_valid(instance, s)
    return out


# the options of policy ``offline-colgen``: these fields of ``ColgenOptions`` (``lns_share`` is
# ``bracket``'s only) and ``seed_with``
POLICY_OPTIONS = ("seed_policy", "backend", "max_iterations", "node_limit", "cg_share",
                  "pooled_share", "smoothing", "cg_gap", "lns_rounds", "lns_window", "lp_solver",
                  "seed")


def _policy_signature() -> inspect.Signature:
    """``ColgenPolicy``'s signature as the policy registry reads it: the keyword options
    ``POLICY_OPTIONS`` (defaults: ``ColgenOptions``'s) and ``seed_with``."""
    given = {f.name: f for f in fields(ColgenOptions)}
    params = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=given[name].default,
                                annotation=given[name].type) for name in POLICY_OPTIONS]
    params.append(inspect.Parameter("seed_with", inspect.Parameter.KEYWORD_ONLY, default=(),
                                    annotation="Sequence[str]"))
    return inspect.Signature(params)


class ColgenPolicy:
    """Policy ``offline-colgen``: the best integer schedule found, with the bracket in ``stats``.

    Built from a ``ColgenOptions`` (``ColgenPolicy(ColgenOptions(max_iterations=30))``) or, as
    the policy registry and the command line do, from its fields as keywords: ``seed_policy``
    ("oasis"), ``backend`` of the dual subroutine ("numpy"), ``max_iterations`` and
    ``node_limit`` (deterministic limits, see ``bracket``), ``cg_share``, ``pooled_share``,
    ``smoothing``, ``cg_gap``, ``lns_rounds``, ``lns_window``, ``lp_solver``, ``seed``
    (``POLICY_OPTIONS``; a bad value raises ``ValueError`` naming it); ``seed_with``: baselines
    whose schedules seed the master too (``policy_schedules``, e.g. ``SEED_POLICIES``; default none). ``solve(instance,
    time_limit=None)`` runs to convergence (and an unlimited integer master) when no limit is
    given. ``stats``: the bracket (``lower``, ``upper``, ``gap`` ...) and, as for the exact
    policies, ``status`` ("optimal" when the bracket closed, else "bracket"), ``stopped_by``
    (what stopped it short: "time_limit", "iteration_limit", "node_limit" or None),
    ``objective`` = lower, ``bound`` = upper, ``proven_optimal``, ``message``.
    """

    name = "offline-colgen"
    # what ``inspect.signature`` (hence ``policies.build``) reads: the keyword options
    __signature__: ClassVar[inspect.Signature] = _policy_signature()

    def __init__(self, options: ColgenOptions | None = None, *, seed_with: Sequence[str] = (),
                 **given: Any):
        unknown = sorted(set(given) - set(POLICY_OPTIONS))
        if unknown:
            raise TypeError(f"ColgenPolicy() got an unexpected keyword argument {unknown[0]!r}")
        if options is not None and given:
            raise ValueError("options: give a ColgenOptions or its fields as keywords, not both")
        if options is not None and not isinstance(options, ColgenOptions):
            raise ValueError(f"options: expected ColgenOptions, got {type(options).__name__}")
        self.options = ColgenOptions(**given) if options is None else options
        self.seed_with = tuple(seed_with)

    def solve(self, instance: Instance, *, time_limit: float | None = None,
              progress: bool = False) -> Schedule:
        seeds = policy_schedules(instance, self.seed_with) if self.seed_with else None
        result = bracket(instance, self.options, time_limit=time_limit, progress=progress,
                         seeds=seeds)
        assert_valid(instance, result.schedule)
        return result.schedule
