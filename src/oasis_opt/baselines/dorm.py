"""Dorm (Sun, Wen, Ta, Yan, IEEE SmartComp 2017; arXiv 1704.06738): utilisation-maximising
dynamic partitioning with fairness and adjustment-overhead constraints (paper §V baseline 4).

Every job is admitted. At every event (a slot in which a job arrives, or the slot after one
completes; all of a slot's events share one decision) Dorm solves the MILP below over the
unfinished jobs J, then places the jobs whose allocation changed; the others keep their
containers on the same servers until the next event.

Variables: k_j workers (integer), p_j PSs (integer), and for every *running* job (k_j^old > 0)
an adjustment indicator delta_j in {0, 1}::

    maximise   sum_j mu_j k_j  -  lambda sum_j delta_j
    subject to sum_j k_j w~_j^r <= sum_h c_h^r         every resource r   (worker pool, (4))
               sum_j p_j s~_j^r <= sum_k c_k^r         every resource r   (PS pool, (5))
               B_j p_j >= b_j k_j,  N'_j p_j >= k_j,  p_j <= k_j           ((6), p >= 1 if k >= 1, (7))
               |k_j - k_j^old| <= U_j delta_j,  sum_j delta_j <= M_adj  (adjustment overhead)
               k_j >= (1 - eps) k_j^fair                                 (fairness)
               0 <= k_j <= U_j = max(k_j^old, min(N'_j, ceil(r_j)))

* mu_j = max_r (w_j^r + (b_j / B_j) s_j^r) / C^r is the dominant share of one worker with its
  (fractional) PSs over the pooled cluster, C^r = sum of c^r over all H + K servers; so the
  objective is the sum of the jobs' dominant-resource shares (Dorm's "resource utilisation")
  and mu_j k_j >= (1 - eps) mu_j k_j^fair is the fairness constraint on dominant shares;
* k_j^fair: the job's DRF (max-min fair) allocation, by progressive filling on the pooled
  capacities (``progressive_fill``); eps = 0.1;
* N'_j = the most workers the job can run with on the empty cluster (<= N_i), r_j = remaining
  worker-slots; the bound U_j never forces a running job to change;
* M_adj = 2. Only jobs that hold containers are *adjusted* (resized, moved or paused); starting
  a job that holds none is not an adjustment (Dorm's overhead is checkpoint-and-restart of
  running applications);
* lambda = 1e-3 min_j mu_j / max_j mu_j (objective scaled by 1 / max mu): among allocations
  of equal utilisation, fewer adjustments;
* **relaxation**: when the MILP is infeasible (fairness and M_adj cannot both hold, typically
  when a newcomer's fair share would need more than M_adj running jobs to shrink), it is solved
  again with the fairness constraint made soft: k_j + sigma_j >= (1 - eps) k_j^fair, integer
  sigma_j >= 0, each worker of shortfall costing ``FAIRNESS_PENALTY`` = 100 times its
  utilisation mu_j in the objective (always feasible: keep everything). So a newcomer still gets
  what M_adj adjustments can free for it. ``stats["fairness_relaxed"]`` counts these decisions
  and ``stats["fairness_shortfall"]`` the workers below (1 - eps) x fair share they left.

Placement: the capacity constraints are pooled per pool (per-server variables would make every
event a large MILP), with each container's demand rounded up to its per-server granularity,
w~_j^r = max(w_j^r, C_W^r / F_j^r) (``effective_demand``: a 3-GPU worker on 4-GPU servers
counts as 4 GPUs), and likewise s~ for PSs; the changed jobs are placed after the unchanged
ones keep theirs, in
arrival order, each with ``place`` or, when fragmentation defeats the pooled count, the most
workers that fit (``place_most``; ``stats["placement_shortfall"]`` counts the workers lost).
A shortfall only touches jobs the MILP already changed, so at most M_adj running jobs change
per event. Solver: ``oasis_opt.offline.solver.solve_program`` (``backend`` "highs" or
"cpsat"), ``time_limit`` seconds per MILP; a solve with no incumbent keeps every allocation.
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import scipy.sparse as sp

from ..sim.placement import EPS, Placement, apply
from .common import (DominantShare, EventPolicy, max_workers_alone, progressive_fill,
                     work_cap)

# Weight of one worker of fairness shortfall, relative to that worker's utilisation, in the
# relaxed program: fairness first, utilisation second.
FAIRNESS_PENALTY = 100.0


class DormPolicy(EventPolicy):
    name = "dorm"

    def __init__(self, *, seed: int = 0, placement: str | Placement = "round-robin",
                 backend: str = "highs", eps: float = 0.1, max_adjust: int = 2,
                 time_limit: float | None = 10.0):
        super().__init__(seed=seed, placement=placement)
        from ..offline.solver import BACKENDS

        if backend not in BACKENDS:
            raise ValueError(f"backend: unknown {backend!r} (known: {', '.join(BACKENDS)})")
        if not 0.0 <= eps <= 1.0:
            raise ValueError(f"eps: must be in [0, 1], got {eps}")
        if max_adjust < 0:
            raise ValueError(f"max_adjust: must be >= 0, got {max_adjust}")
        if time_limit is not None and not time_limit > 0:
            raise ValueError(f"time_limit: must be > 0 seconds or None, got {time_limit}")
        self.backend = backend
        self.eps = float(eps)
        self.max_adjust = int(max_adjust)
        self.time_limit = time_limit

    def start(self, instance, state) -> None:
        super().start(instance, state)
        self.share = DominantShare(instance)
        self.kalone = max_workers_alone(instance)
        H = instance.H
        self.cap_w = instance.capacity[:H].sum(axis=0)
        self.cap_p = instance.capacity[H:].sum(axis=0)
        self.eff_w = effective_demand(instance.capacity[:H], instance.worker_demand)
        self.eff_p = effective_demand(instance.capacity[H:], instance.ps_demand)
        self.decisions = 0
        self.solver_s = 0.0
        self.fairness_relaxed = 0
        self.fairness_shortfall = 0
        self.no_solution = 0
        self.shortfall = 0
        self.max_adjusted = 0
        self.statuses: Counter[str] = Counter()

    # ---- the fair share -------------------------------------------------------------------
    def fair_workers(self, jobs: list[int], cap: dict[int, int]) -> dict[int, int]:
        """k^fair: DRF progressive filling on the pooled capacities of the two pools."""
        inst = self.instance
        used_w = np.zeros_like(self.cap_w)
        used_p = np.zeros_like(self.cap_p)

        def grow(j: int, k: int) -> bool:
            ps = inst.ps_needed(j, k)
            dp = ps - inst.ps_needed(j, k - 1)
            w = used_w + inst.worker_demand[j]
            p = used_p + dp * inst.ps_demand[j]
            if ps > k or (w > self.cap_w * (1 + EPS) + EPS).any() or \
                    (p > self.cap_p * (1 + EPS) + EPS).any():
                return False
            used_w[:], used_p[:] = w, p
            return True

        return progressive_fill(jobs, cap, lambda j, n: self.share(j, n, inst.ps_needed(j, n)),
                                grow)

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
        scale = max(float(mu.max()), 1e-12)
        lam = 1e-3 * max(float(mu.min()), 1e-12) / scale
        c = np.concatenate([mu / scale, np.zeros(n), np.full(m, -lam),
                            -FAIRNESS_PENALTY * mu[:ns] / scale])

        def block(k=None, p=None, d=None, s=None, nrows=n):
            """Rows over the column groups; None = zeros."""
            parts = [x if x is not None else sp.csr_matrix((nrows, w))
                     for x, w in ((k, n), (p, n), (d, m), (s, ns)) if w]
            return sp.hstack(parts, format="csr")

        A, lo, up = [], [], []
        wd, pd = self.eff_w[J], self.eff_p[J]
        for r in range(inst.R):  # pooled capacities (4)/(5)
            if wd[:, r].any():
                A.append(block(k=sp.csr_matrix(wd[:, r][None, :]), nrows=1))
                lo.append(-np.inf)
                up.append(self.cap_w[r])
            if pd[:, r].any():
                A.append(block(p=sp.csr_matrix(pd[:, r][None, :]), nrows=1))
                lo.append(-np.inf)
                up.append(self.cap_p[r])
        eye = sp.identity(n, format="csr")
        A += [block(k=-sp.diags(inst.worker_bw[J]), p=sp.diags(inst.ps_bw[J])),  # (6)
              block(k=-eye, p=sp.diags(np.maximum(upper, 1).astype(float))),  # PS when k >= 1
              block(k=-eye, p=eye)]  # (7) p <= k
        lo += [0.0] * n + [0.0] * n + [-np.inf] * n
        up += [np.inf] * n + [np.inf] * n + [0.0] * n
        if m:
            sel = sp.csr_matrix((np.ones(m), (np.arange(m), running)), shape=(m, n))
            U = sp.diags(upper[running].astype(float))
            A += [block(k=sel, d=-U, nrows=m),  # k - U delta <= k_old
                  block(k=sel, d=U, nrows=m),  # k + U delta >= k_old
                  block(d=sp.csr_matrix(np.ones((1, m))), nrows=1)]  # sum delta <= M_adj
            lo += [-np.inf] * m + old[running].astype(float).tolist() + [-np.inf]
            up += old[running].astype(float).tolist() + [np.inf] * m + [float(self.max_adjust)]
        if soft:
            A.append(block(k=eye, s=eye))  # k + sigma >= (1 - eps) k^fair
            lo += fair_lower.astype(float).tolist()
            up += [np.inf] * n
        k_lower = np.zeros(n) if soft else fair_lower
        lower = np.concatenate([k_lower, np.zeros(n + m + ns)]).astype(float)
        upper_b = np.concatenate([upper, upper, np.ones(m), fair_lower[:ns]]).astype(float)
        return LinearProgram(c=c, A=sp.vstack(A, format="csr"), row_lower=np.asarray(lo, float),
                             row_upper=np.asarray(up, float), lower=lower, upper=upper_b,
                             integer=np.ones(len(c), dtype=bool), sense="max")

    def _solve(self, lp, initial):
        from ..offline.solver import solve_program

        res = solve_program(lp, backend=self.backend, time_limit=self.time_limit,
                            seed=self.seed, initial=initial)
        self.solver_s += res.build_s + res.solve_s
        self.statuses[res.status] += 1
        return res

    def decide(self, t, state) -> None:
        inst = self.instance
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
        fair_lower = np.array([math.ceil((1 - self.eps) * fair[j] - 1e-9) for j in jobs],
                              dtype=np.int64)
        running = np.flatnonzero(old > 0)
        keep = np.concatenate([old, [inst.ps_needed(j, int(k)) for j, k in zip(jobs, old)],
                               np.zeros(len(running))]).astype(float)
        self.decisions += 1
        res = self._solve(self.program(jobs, old, upper, fair_lower), keep)
        if res.status == "infeasible":
            self.fairness_relaxed += 1
            short = np.maximum(fair_lower - old, 0).astype(float)
            res = self._solve(self.program(jobs, old, upper, fair_lower, soft=True),
                              np.concatenate([keep, short]))
            if res.x is not None:
                self.fairness_shortfall += int(round(res.x[-n:].sum()))
        if res.x is None:
            self.no_solution += 1
            return  # keep every allocation
        new = np.round(res.x[:n]).astype(np.int64)
        changed = [j for j, a, b in zip(jobs, old, new) if a != b]
        self.max_adjusted = max(self.max_adjusted,
                                sum(1 for j, a, b in zip(jobs, old, new) if a > 0 and a != b))
        for j in changed:
            self.held.pop(j, None)
        free = self.free_except()
        for j, k in zip(jobs, new.tolist()):
            if j not in changed or k == 0:
                continue
            rows = self.placement.place(inst, j, k, free)
            if rows is None:
                got, rows = self.placement.place_most(inst, j, k, free)
                self.shortfall += k - got
            if rows:
                apply(inst, j, rows, free)
                self.held[j] = rows

    def stats(self) -> dict:
        return {**super().stats(), "decisions": self.decisions, "solver_s": self.solver_s,
                "fairness_relaxed": self.fairness_relaxed,
                "fairness_shortfall": self.fairness_shortfall, "no_solution": self.no_solution,
                "placement_shortfall": self.shortfall, "max_adjusted": self.max_adjusted,
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
        fits = np.floor((capacity[None, :, r] + EPS) / demand[need, r][:, None]).sum(axis=1)
        gran = total[r] / np.maximum(fits, 1)  # fits = 0: the job never runs (k <= 0 anyway)
        out[need, r] = np.maximum(demand[need, r], gran)
    return out
