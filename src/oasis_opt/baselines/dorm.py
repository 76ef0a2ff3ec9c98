"""Dorm (Sun, Wen, Ta, Yan, IEEE SmartComp 2017; arXiv 1704.06738): utilisation-maximising
dynamic partitioning with fairness and adjustment-overhead constraints (paper §V baseline 4).

Every job is admitted. At every event (a slot in which a job arrives, or the slot after one
completes; all of a slot's events share one decision) Dorm solves the MILP below over the
unfinished jobs J, then places the jobs whose allocation changed; the others keep their
containers on the same servers until the next event.

Variables: k_j workers (integer), p_j PSs (integer), and for every *running* job (k_j^old > 0)
an adjustment indicator delta_j in {0, 1}::

    maximise   sum_j mu_j k_j  -  lambda sum_j delta_j
    subject to sum_j k_j w~_j^r <= C_W^r                every resource r   (worker pool, (4))
               sum_j p_j s~_j^r <= C_P^r                every resource r   (PS pool, (5))
               p_j >= rho_j k_j,  N'_j p_j >= k_j,  p_j <= k_j     ((6); p >= 1 if k >= 1; (7))
               k_j - k_j^old <= (U_j - k_j^old) delta_j,  k_j^old - k_j <= k_j^old delta_j,
               sum_j delta_j <= M_adj                                   (adjustment overhead)
               k_j >= (1 - eps) k_j^fair                                 (fairness)
               0 <= k_j <= U_j = max(k_j^old, min(N'_j, ceil(r_j)))

* mu_j = max_r (w_j^r + (b_j / B_j) s_j^r) / C^r is the dominant share of one worker with its
  (fractional) PSs over the pooled cluster, C^r = sum of c^r over all H + K servers; so the
  objective is the sum of the jobs' dominant-resource shares (Dorm's "resource utilisation")
  and mu_j k_j >= (1 - eps) mu_j k_j^fair is the fairness constraint on dominant shares;
* k_j^fair: the job's DRF (max-min fair) allocation, by progressive filling on the pooled
  capacities with the demands w~, s~ below (``progressive_fill``); eps = 0.1;
* N'_j = the most workers the job can run with on the empty cluster (<= N_i), r_j = remaining
  worker-slots; the bound U_j never forces a running job to change;
* M_adj = 2. Only jobs that hold containers are *adjusted* (resized, moved or paused); starting
  a job that holds none is not an adjustment (Dorm's overhead is checkpoint-and-restart of
  running applications);
* lambda = 1e-3 min_j mu_j / max_j mu_j (objective scaled by 1 / max mu): among allocations
  of equal utilisation, fewer adjustments;
* **relaxation** (``relaxation``): when the MILP is infeasible (fairness and M_adj cannot both
  hold, typically when a newcomer's fair share would need more than M_adj running jobs to
  shrink), it is solved again with the fairness constraint
  - ``"drop"`` (default): removed; always feasible (keep everything); a newcomer then gets only
    what is free or what the M_adj adjustments free for better utilisation;
  - ``"soft"``: k_j + sigma_j >= (1 - eps) k_j^fair with integer sigma_j >= 0, each worker of
    shortfall costing ``FAIRNESS_PENALTY`` = 100 times its utilisation mu_j; a newcomer gets
    what M_adj adjustments can free for it (several times slower on loaded clusters).
  ``stats["fairness_relaxed"]`` counts these decisions, ``stats["fairness_shortfall"]`` the
  workers below ceil((1 - eps) k^fair) they left.

Pooled capacities and placement: the capacity rows are per pool (per-server variables would
make every event a large MILP), with each container's demand rounded up to its per-server
granularity, w~_j^r = max(w_j^r, C_W^r / F_j^r) (``effective_demand``: a 3-GPU worker on 4-GPU
servers counts as 4 GPUs), likewise s~ for PSs; a pool row's bound is raised to the running
jobs' current use when that is higher (so keeping everything is always feasible). Row
coefficients (w~, s~, rho_j = b_j / B_j) are rounded *up* to 6 decimals: conservative, and exact
for CP-SAT's integer scaling. The jobs the MILP changed are placed after the unchanged ones keep
theirs, largest per-worker dominant share first (first-fit decreasing; the placement component
is best-fit ``packing`` by default, since the pooled rows presume tight packing; Dorm's own MILP
places containers itself, so the paper's round-robin rule is not Dorm's), each with ``place`` or,
when fragmentation defeats the pooled count, the most workers that fit (``place_most``;
``stats["placement_shortfall"]`` counts the workers lost); then capacity left over is offered,
one worker at a time in arrival order up to U_j, to those same jobs and to jobs that held
nothing (work conservation; it adjusts no further running job). So at most M_adj running jobs
change per event. Solver: ``oasis_opt.offline.solver.solve_program`` (``backend`` "highs" or
"cpsat"), relative ``mip_gap`` 2% by default: with a few hundred unfinished jobs the MILP is a
multi-dimensional knapsack whose LP bound is far from integral (every running job needs >= 1
PS, and PSs are bulky), and closing the gap fully takes minutes per event; at 2% HiGHS needs
about a second on 400-job paper instances. ``time_limit`` (10 s) is a safety cap: a solve that
reaches it uses its incumbent, and then the run depends on machine speed (counted in
``stats["solver_status"]["time_limit"]``); a solve with no incumbent keeps every allocation (the
current allocation is the solver's starting point whenever it satisfies the program).
``node_limit`` (HiGHS) and ``deterministic_time`` (CP-SAT) are deterministic caps instead:
with ``time_limit=None`` and one of them, a run is the same on any machine.
A provably infeasible fair MILP (``fairness_hopeless``: more than M_adj running jobs below
their bound, or the bounds cannot fit even after the M_adj largest reductions) goes straight
to the relaxation without a solve.

Accelerator types: Dorm stays type-agnostic (``baselines.common``). Its pooled rows count the
job's own ``worker`` demand over all worker servers, as if every type were one pool, and U_j
divides the remaining work units by the job's slowest speed; the placement puts the workers on
the fastest type where they fit, and ``place_most`` (``placement_shortfall``) absorbs what the
pooled count overestimates when the types split the pool.
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import scipy.sparse as sp

from ..model.numerics import (DIVISOR_FLOOR, INTEGER_RTOL, WORK_EPS, capacity_slack,
                              fit_one_resource)
from ..sim.placement import Placement, apply
from .common import (DominantShare, EventPolicy, grow_one, max_workers_alone, merge_rows,
                     progressive_fill, ps_table, work_cap)

# Weight of one worker of fairness shortfall, relative to that worker's utilisation, in the
# relaxed program: fairness first, utilisation second.
FAIRNESS_PENALTY = 100.0
RELAXATIONS = ("drop", "soft")
COEF_DECIMALS = 6


class DormPolicy(EventPolicy):
    name = "dorm"

    def __init__(self, *, seed: int = 0, placement: str | Placement = "packing",
                 backend: str = "highs", eps: float = 0.1, max_adjust: int = 2,
                 relaxation: str = "drop", time_limit: float | None = 10.0,
                 mip_gap: float = 0.02, node_limit: int | None = None,
                 deterministic_time: float | None = None):
        super().__init__(seed=seed, placement=placement)
        from ..offline.solver import BACKENDS, SolverLimits, check_limits

        if backend not in BACKENDS:
            raise ValueError(f"backend: unknown {backend!r} (known: {', '.join(BACKENDS)})")
        if not 0.0 <= eps <= 1.0:
            raise ValueError(f"eps: must be in [0, 1], got {eps}")
        if max_adjust < 0:
            raise ValueError(f"max_adjust: must be >= 0, got {max_adjust}")
        if time_limit is not None and not time_limit > 0:
            raise ValueError(f"time_limit: must be > 0 seconds or None, got {time_limit}")
        if relaxation not in RELAXATIONS:
            raise ValueError(f"relaxation: expected one of {RELAXATIONS}, got {relaxation!r}")
        if not 0.0 <= mip_gap < 1.0:
            raise ValueError(f"mip_gap: must be in [0, 1), got {mip_gap}")
        self.relaxation = relaxation
        self.backend = backend
        self.eps = float(eps)
        self.max_adjust = int(max_adjust)
        self.limits = SolverLimits(time_limit=time_limit, mip_gap=float(mip_gap),
                                   node_limit=node_limit, deterministic_time=deterministic_time)
        check_limits(backend, False, self.limits)

    def start(self, instance, state) -> None:
        super().start(instance, state)
        self.share = DominantShare(instance)
        self.ps = ps_table(instance)
        self.kalone = max_workers_alone(instance)
        H = instance.H
        self.cap_w = instance.capacity[:H].sum(axis=0)
        self.cap_p = instance.capacity[H:].sum(axis=0)
        self.eff_w = round_up(effective_demand(instance.capacity[:H], instance.worker_demand))
        self.eff_p = round_up(effective_demand(instance.capacity[H:], instance.ps_demand))
        self.rho = round_up(np.divide(instance.worker_bw, instance.ps_bw,
                                      out=np.zeros(instance.I), where=instance.ps_bw > 0))
        self.decisions = 0
        self.solver_s = 0.0
        self.fairness_relaxed = 0
        self.fairness_shortfall = 0
        self.no_solution = 0
        self.shortfall = 0
        self.topped_up = 0
        self.max_adjusted = 0
        self.statuses: Counter[str] = Counter()

    # ---- the fair share -------------------------------------------------------------------
    def fair_workers(self, jobs: list[int], cap: dict[int, int]) -> dict[int, int]:
        """k^fair: DRF progressive filling on the pooled capacities of the two pools (with
        the effective demands w~, s~ of the MILP's rows, so the fair allocation fits them)."""
        used_w = np.zeros_like(self.cap_w)
        used_p = np.zeros_like(self.cap_p)

        def grow(j: int, k: int) -> bool:
            ps = self.ps[j][k]
            dp = ps - self.ps[j][k - 1]
            w = used_w + self.eff_w[j]
            p = used_p + dp * self.eff_p[j]
            if ps > k or (w > self.cap_w + capacity_slack(self.cap_w)).any() or \
                    (p > self.cap_p + capacity_slack(self.cap_p)).any():
                return False
            used_w[:], used_p[:] = w, p
            return True

        return progressive_fill(jobs, cap, self.share.with_ps(self.ps), grow)

    # ---- the MILP ------------------------------------------------------------------------
    def program(self, jobs: list[int], old: np.ndarray, upper: np.ndarray,
                fair_lower: np.ndarray, *, soft: bool = False):
        """The LinearProgram of the module docstring.

        Columns [k (n), p (n), delta (m running jobs)] and, when ``soft``, [sigma (n)]:
        fairness becomes k_j + sigma_j >= fair_lower_j with sigma_j penalised by
        FAIRNESS_PENALTY mu_j; otherwise it is the column bound k_j >= fair_lower_j.
        """
        from ..offline.solver import LinearProgram

        inst = self.instance
        n = len(jobs)
        J = np.asarray(jobs)
        running = np.flatnonzero(old > 0)
        m = len(running)
        ns = n if soft else 0
        mu = self.share.per_worker[J]
        scale = max(float(mu.max()), DIVISOR_FLOOR)
        lam = 1e-3 * max(float(mu.min()), DIVISOR_FLOOR) / scale
        c = np.concatenate([mu / scale, np.zeros(n), np.full(m, -lam),
                            -FAIRNESS_PENALTY * mu[:ns] / scale])

        K0, P0, D0, S0 = 0, n, 2 * n, 2 * n + m  # column offsets of k, p, delta, sigma
        rr, cc, vv, lo, up = [], [], [], [], []

        def rows(cols, vals, lower, upper_):
            """Append rows: cols/vals are (rows, entries) arrays; one row per first-axis item."""
            cols, vals = np.atleast_2d(cols), np.atleast_2d(vals)
            first = len(lo)
            rr.append(np.repeat(np.arange(first, first + len(cols)), cols.shape[1]))
            cc.append(cols.ravel())
            vv.append(vals.ravel().astype(float))
            lo.extend(np.broadcast_to(lower, len(cols)).tolist())
            up.extend(np.broadcast_to(upper_, len(cols)).tolist())

        idx = np.arange(n)
        wd, pd = self.eff_w[J], self.eff_p[J]
        old_ps = self.keep_ps(jobs, old)
        for r in range(inst.R):  # pooled capacities (4)/(5), never below the current use
            if wd[:, r].any():
                rows(K0 + idx, wd[:, r], -np.inf, max(self.cap_w[r], float(wd[:, r] @ old)))
            if pd[:, r].any():
                rows(P0 + idx, pd[:, r], -np.inf, max(self.cap_p[r], float(pd[:, r] @ old_ps)))
        pair = np.stack([K0 + idx, P0 + idx], axis=1)
        rows(pair, np.stack([-self.rho[J], np.ones(n)], axis=1), 0.0, np.inf)  # (6) p >= rho k
        rows(pair, np.stack([-np.ones(n), np.maximum(upper, 1)], axis=1), 0.0, np.inf)  # p>=1
        rows(pair, np.stack([-np.ones(n), np.ones(n)], axis=1), -np.inf, 0.0)  # (7) p <= k
        if m:
            dk = np.stack([K0 + running, D0 + np.arange(m)], axis=1)
            o = old[running].astype(float)
            grow = upper[running] - o  # the tightest big-Ms: k in [0, U] around k_old
            rows(dk, np.stack([np.ones(m), -grow], axis=1), -np.inf, o)  # k - k_old <= grow d
            rows(dk, np.stack([np.ones(m), o], axis=1), o, np.inf)  # k_old - k <= k_old d
            rows(D0 + np.arange(m)[None, :], np.ones((1, m)), -np.inf,
                 float(self.max_adjust))  # sum delta <= M_adj
        if soft:  # k + sigma >= (1 - eps) k^fair
            rows(np.stack([K0 + idx, S0 + idx], axis=1), np.ones((n, 2)), fair_lower, np.inf)
        k_lower = np.zeros(n) if soft else fair_lower
        lower = np.concatenate([k_lower, np.zeros(n + m + ns)]).astype(float)
        upper_b = np.concatenate([upper, upper, np.ones(m), fair_lower[:ns]]).astype(float)
        A = sp.csr_matrix((np.concatenate(vv), (np.concatenate(rr), np.concatenate(cc))),
                          shape=(len(lo), len(c)))
        return LinearProgram(c=c, A=A, row_lower=np.asarray(lo, float),
                             row_upper=np.asarray(up, float), lower=lower, upper=upper_b,
                             integer=np.ones(len(c), dtype=bool), sense="max")

    def _solve(self, lp, initial):
        from ..offline.solver import check_point, solve_program

        try:  # the kept allocation starts the solver only where it satisfies this program
            initial = check_point(lp, initial, "initial")
        except ValueError:  # (it may break a fairness bound of the fair program)
            initial = None
        res = solve_program(lp, self.limits, backend=self.backend, seed=self.seed,
                            initial=initial)
        self.solver_s += res.build_s + res.solve_s
        self.statuses[res.status] += 1
        return res

    def fairness_hopeless(self, jobs: list[int], old: np.ndarray, fair_lower: np.ndarray) -> bool:
        """A necessary condition of the fair MILP fails (so it is infeasible without solving).

        More than M_adj running jobs below their fairness bound must all change; and per pool
        resource, the bounds of the jobs that hold nothing, plus max(k^old, bound) of the running
        ones, less the M_adj largest reductions (k^old - bound) w~ the running ones could make,
        must fit the row bound.
        """
        run = old > 0
        if int((run & (old < fair_lower)).sum()) > self.max_adjust:
            return True
        base = np.where(run, np.maximum(old, fair_lower), fair_lower)
        spare = np.where(run, np.maximum(old - fair_lower, 0), 0)
        for dem, k_of, cap, now in (
                (self.eff_w[jobs], lambda k: k, self.cap_w, old),
                (self.eff_p[jobs], lambda k: self.keep_ps(jobs, k), self.cap_p,
                 self.keep_ps(jobs, old))):
            need = k_of(base) @ dem
            free_up = (k_of(base) - k_of(base - spare))[:, None] * dem
            top = -np.sort(-free_up, axis=0)[:self.max_adjust].sum(axis=0)
            bound = np.maximum(cap, now @ dem)
            if (need - top > bound + capacity_slack(bound)).any():
                return True
        return False

    def keep_ps(self, jobs: list[int], k: np.ndarray) -> np.ndarray:
        """PSs of k workers in the MILP's terms: ceil(k b/B), raised to the rounded rho k."""
        need = np.array([self.ps[j][int(n)] for j, n in zip(jobs, k)])
        return np.minimum(k, np.maximum(need, np.ceil(self.rho[jobs] * k - WORK_EPS))).astype(float)

    def decide(self, t, state) -> None:
        jobs = [int(j) for j in state.active()]
        if not jobs:
            self.held = {}
            return
        n = len(jobs)
        old = np.array([sum(c for _, role, c in self.held.get(j, ()) if role == 0)
                        for j in jobs], dtype=np.int64)
        cap = {j: min(int(self.kalone[j]), work_cap(state, j)) for j in jobs}
        upper = np.maximum(old, [cap[j] for j in jobs]).astype(np.int64)
        fair = self.fair_workers(jobs, cap)
        fair_lower = np.array([math.ceil((1 - self.eps) * fair[j] - WORK_EPS) for j in jobs],
                              dtype=np.int64)
        running = np.flatnonzero(old > 0)
        keep = np.concatenate([old, self.keep_ps(jobs, old), np.zeros(len(running))])
        self.decisions += 1
        if self.fairness_hopeless(jobs, old, fair_lower):
            res = None  # provably infeasible: skip straight to the relaxation
        else:
            res = self._solve(self.program(jobs, old, upper, fair_lower), keep)
        if res is None or res.status == "infeasible":
            self.fairness_relaxed += 1
            if self.relaxation == "soft":
                short = np.maximum(fair_lower - old, 0).astype(float)
                res = self._solve(self.program(jobs, old, upper, fair_lower, soft=True),
                                  np.concatenate([keep, short]))
            else:
                res = self._solve(self.program(jobs, old, upper, np.zeros(n, np.int64)), keep)
            if res.x is not None:
                self.fairness_shortfall += int(np.maximum(fair_lower - res.x[:n], 0).sum())
        if res.x is None:
            self.no_solution += 1
            return  # keep every allocation
        new = np.round(res.x[:n]).astype(np.int64)
        self.max_adjusted = max(self.max_adjusted, int(((old > 0) & (old != new)).sum()))
        self.place_changes(jobs, old, new, upper)

    def place_changes(self, jobs: list[int], old: np.ndarray, new: np.ndarray,
                      upper: np.ndarray) -> None:
        """Place the jobs whose count changed (first-fit decreasing), then top up (docstring)."""
        inst = self.instance
        changed = [j for j, a, b in zip(jobs, old, new) if a != b]
        for j in changed:
            self.held.pop(j, None)
        free = self.free_after_held()
        target = dict(zip(jobs, new.tolist()))
        for j in sorted(changed, key=lambda j: (-self.share.per_worker[j], jobs.index(j))):
            k = target[j]
            if k == 0:
                continue
            rows = self.placement.place(inst, j, k, free)
            if rows is None:
                got, rows = self.placement.place_most(inst, j, k, free)
                self.shortfall += k - got
            if rows:
                apply(inst, j, rows, free)
                self.held[j] = rows
        movable = set(changed) | {j for j, a in zip(jobs, old) if a == 0}
        for j, bound in zip(jobs, upper.tolist()):
            if j not in movable:
                continue
            rows = list(self.held.get(j, ()))
            k = sum(c for _, role, c in rows if role == 0)
            grown = k
            while grown < bound and grow_one(self.placement, inst, self.ps, j, grown + 1, free,
                                             rows):
                grown += 1
            if grown > k:
                self.topped_up += grown - k
                self.held[j] = merge_rows(rows)

    def stats(self) -> dict:
        return {**super().stats(), "decisions": self.decisions, "solver_s": self.solver_s,
                "fairness_relaxed": self.fairness_relaxed,
                "fairness_shortfall": self.fairness_shortfall, "no_solution": self.no_solution,
                "placement_shortfall": self.shortfall, "topped_up": self.topped_up,
                "relaxation": self.relaxation, "max_adjusted": self.max_adjusted,
                "solver_status": dict(self.statuses), "backend": self.backend}


def effective_demand(capacity: np.ndarray, demand: np.ndarray) -> np.ndarray:
    """Per-container demand rounded up to its per-server granularity, for pooled rows.

    d~_j^r = max(d_j^r, C^r / F_j^r), with C^r = sum_s c_s^r and F_j^r = sum_s floor(c_s^r / d_j^r)
    the containers of j that resource r alone admits: a 3-GPU worker on 4-GPU servers blocks 4
    GPUs of the pool. Resources with d_j^r = 0 stay 0. Exact for one job and one resource;
    for a mix of jobs the per-server packing can still differ (``placement_shortfall``).
    """
    total = capacity.sum(axis=0)
    out = demand.astype(float).copy()
    for r in range(capacity.shape[1]):
        need = demand[:, r] > 0
        if not need.any():
            continue
        fits = fit_one_resource(capacity[None, :, r], demand[need, r][:, None]).sum(axis=1)
        gran = total[r] / np.maximum(fits, 1)  # fits = 0: the job never runs (k <= 0 anyway)
        out[need, r] = np.maximum(demand[need, r], gran)
    return out


def round_up(x: np.ndarray, decimals: int = COEF_DECIMALS) -> np.ndarray:
    """x rounded up to ``decimals`` decimals (values within 1e-9 of a grid point stay on it)."""
    scale = 10.0**decimals
    xs = np.asarray(x, dtype=float) * scale
    return np.ceil(xs - INTEGER_RTOL * np.maximum(1.0, np.abs(xs))) / scale
