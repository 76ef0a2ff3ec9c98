"""OASiS with a topology-aware per-slot cost (policy ``oasis-topo``); the paper's stays ``oasis``.

The paper's dual subroutine prices a slot of a plan as sum_h sum_r p_h^r(t) w^r y_h(t) (+ the
PS term): where the workers land does not matter, because every worker-slot delivers one
worker-slot of training. With the placement-aware cost model (``costmodel.placement``) a
worker-slot delivers only eta_t = T_ref / T_actual of one when its job's containers straddle an
oversubscribed uplink, so a resource-slot's real price per unit of training is p / eta. This
variant changes OASiS in two places and leaves the subroutine itself (``online.dual``) untouched:

1. **Steered prices (what the subroutine sees).** For a job i and a candidate *home* subtree v
   (a rack), every server h outside v gets the price p_h^r(t) / eta_i(h, v), where
   eta_i(h, v) = T_ref / (tau_i + (T_ref - tau_i) / r(h, v)) is job i's efficiency when one of
   its workers sits on h and the rest in v (its gradients cross the links between h and v at
   the share r(h, v) = min r_l over those links, as in the cost model), and eta = 1 inside v.
   The greedy of Alg. 2 then fills v first and spills out only when v is full, and the DP trades
   a later completion against spilling. Candidates: the racks with the most free container-slots
   of the job's demand over the slots [a_i, T] its plan may use, those that fit its W_i
   worker-slots and their PS-slots first (``candidates`` of them), plus the paper's own prices
   (no home). (Ranking on the job's first d_min slots instead found no rack with room under a
   backlog, left every job to the paper's prices and straddling placements at eta ~ 1/o: on
   the 100-job Philly window on 2 racks with one PS server each, 73 of 240 (job, slot) groups
   ran below full speed and oasis-topo earned 2533 against greedy's 3238.) On a topology with
   an oversubscribed link, each home is also tried **confined**: every server outside it
   removed (its free capacity zeroed), at the true prices. The exponential prices (22) span
   many orders of magnitude (on the Philly window of ``experiments.placement_bracket`` an empty
   server's worker costs 2.4e-85 and a lightly used one 3.6e-75), so dividing by eta (a factor
   of at most o) rarely moves a plan, while confining it keeps a job whose home has room at
   full speed.
2. **Topology-aware payoff (admission).** Each candidate plan is scored with the cost model on
   its actual rows: mu_topo = f_i(t_hat - a_i) - sum_t cost_t / eta_t, where cost_t is the
   plan's slot-t cost at the *true* prices and eta_t = progress_t / k_t the placement's
   efficiency in slot t. With ``instance.progress == "placement"`` a plan whose placement-aware
   worker-slots fall short of W_i would not finish: it is re-planned (up to ``REPLANS`` times)
   for the work target ceil(W_i / eta), eta = its placement-aware / plain worker-slots (the
   array-level ``best_schedule_arrays`` with only ``work`` changed), and dropped if it still
   falls short. The
   best-scoring plan (ties: the fewest worker-slots, then the first tried) is admitted iff
   mu_topo > 0; committing it and raising prices (eq. 22) are
   the paper's, with the true amounts. (The simulator completes the job as soon as its real
   W_i is reached and OASiS skips the plan's remaining rows.)

So with a non-blocking network (every eta = 1), ``oasis-topo`` makes the same decisions as
``oasis``: the paper's prices are one of the candidates, steering changes no price, and every
plan scores its paper payoff. Cost: up to (2 ``candidates`` + 1) x (``REPLANS`` + 1)
dual-subroutine calls per job.
"""
from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np

from ..costmodel.placement import progress_kernel, context
from ..model.numerics import DONE_EPS, WORK_EPS, fit_count, payoff_positive
from ..model.schedule import WORKER
from ..online.dual import DualJob, Market, best_schedule_arrays
from ..online.oasis import OasisPolicy

REPLANS = 2  # re-plans of a plan whose placement falls short of W_i (placement mode)


class TopoOasisPolicy(OasisPolicy):
    """OASiS whose prices and admission account for where workers land (module docstring)."""

    name = "oasis-topo"

    def __init__(self, backend: str = "numpy", pricing="oracle", u_scale: float = 1.0,
                 granularity: str = "worker-slot", candidates: int = 2):
        # no server index: its duals read steered prices, which an index over the committed
        # ones cannot serve (one would only cost time on large clusters)
        super().__init__(backend=backend, pricing=pricing, u_scale=u_scale,
                         granularity=granularity, server_index=False)
        if isinstance(candidates, bool) or int(candidates) != candidates or candidates < 0:
            raise ValueError(f"candidates: must be an integer >= 0, got {candidates!r}")
        self.candidates = int(candidates)

    def check(self, instance, state) -> None:
        instance.require_untyped(f"policy {self.name!r}")  # its cost model reads one demand
        super().check(instance, state)

    def start(self, instance, state) -> None:
        instance.require_untyped(f"policy {self.name!r}")  # its cost model reads one demand
        super().start(instance, state)
        ctx = context(instance)
        topo = instance.get_topology()
        H = instance.H
        racks = [n for n, k in topo.graph.nodes(data="kind") if k == "rack"]
        self._racks = racks
        member = np.zeros((len(racks), H + instance.K), dtype=bool)
        ids = {s.id: n for n, s in enumerate(instance.servers)}
        for v, rack in enumerate(racks):
            member[v, [ids[s] for s in topo.servers_under(rack)]] = True
        self._member_w, self._member_p = member[:, :H], member[:, H:]
        # r(h, v): the smallest link share between server h and rack v (1 inside v)
        links = [[ctx.link_nodes[x] for x in row if x >= 0] for row in ctx.links]
        ratio = dict(zip(ctx.link_nodes, ctx.ratio.tolist()))
        r = np.ones((H + instance.K, len(racks)))
        for v, rack in enumerate(racks):
            home = [rack] + [a for a in topo.path_to_root(rack)[1:-1]]
            for s, path in enumerate(links):
                if not member[v, s]:
                    cross = (set(path) - set(home)) | (set(home) - set(path))
                    r[s, v] = min((ratio[n] for n in cross), default=1.0)
        self._share = r
        self._blocking = bool((ctx.ratio < 1.0).any())  # an oversubscribed link exists
        self._ctx = ctx
        self.topo_payoff = [None] * instance.I
        self.home = [None] * instance.I

    def extend(self, instance, state) -> bool:
        """OASiS's extension (``OasisPolicy.extend``) with the cost model's per-job arrays
        rebuilt for ``instance``; the racks and link shares are the cluster's and stay."""
        if not super().extend(instance, state):
            return False
        self._ctx = context(instance)
        grow = instance.I - len(self.topo_payoff)  # 0 when the extension started afresh
        self.topo_payoff.extend([None] * grow)
        self.home.extend([None] * grow)
        return True

    # ---- candidate homes and steered prices ------------------------------------------------------
    def _home_candidates(self, job: int) -> list[int]:
        if not self._racks or self.candidates == 0:
            return []
        inst = self.instance
        # room over every slot the plan may use, [a_i, T]: under a backlog no rack has room in
        # the job's first d_min slots, the plan runs later, and ranking on those slots alone
        # left it to the unsteered prices (and a straddling placement at eta ~ 1/o)
        window = slice(int(inst.arrival[job]), inst.horizon + 1)
        n = int(inst.chunks[job])
        need_w = int(inst.work[job])  # worker-slots, and the PS-slots of W_i / N_i slots at N_i
        need_p = int(inst.ps_needed(job, n)) * -(-need_w // max(n, 1))
        fw = fit_count(self.worker_free[window], inst.worker_demand[job]).sum(axis=0)  # (H,)
        fp = fit_count(self.ps_free[window], inst.ps_demand[job]).sum(axis=0)
        rw, rp = self._member_w @ fw, self._member_p @ fp  # free container-slots per rack
        fits = (rw >= need_w) & (rp >= need_p)
        order = np.lexsort((np.arange(len(rw)), -(rw + rp), ~fits))
        return [int(v) for v in order[: self.candidates] if rw[v] > 0 and rp[v] > 0]

    def _efficiency(self, job: int, share: np.ndarray) -> np.ndarray:
        """eta_i for one worker across links of the given share (module docstring)."""
        ctx, inst = self._ctx, self.instance
        tau, S = ctx.compute_s[job], ctx.model_mb[job]
        comm = 2.0 * S * 8.0 / 1000.0 / inst.worker_bw[job]  # 2 e_i / b_i (constraint (6))
        t_ref = tau + comm
        return t_ref / (tau + comm / share) if t_ref > 0 else np.ones_like(share)

    def _steered(self, job: int, home: int):
        eta = self._efficiency(job, self._share[:, home])
        H = self.instance.H
        return (self.worker_price / eta[None, :H, None], self.ps_price / eta[None, H:, None])

    # ---- topology-aware payoff of a plan ---------------------------------------------------------
    def _score(self, job: int, plan) -> tuple[float, bool, float]:
        """(mu_topo, whether the plan finishes, overall efficiency sum progress / sum k)."""
        inst = self.instance
        rows = plan.rows
        if not len(rows):
            return plan.utility, True, 1.0
        slots, group = np.unique(rows[:, 1], return_inverse=True)
        progress = progress_kernel(inst, self._ctx, group, len(slots),
                                    np.full(len(slots), job, dtype=np.int64), rows[:, 2],
                                    rows[:, 3], rows[:, 4])
        k = np.bincount(group, weights=np.where(rows[:, 3] == WORKER, rows[:, 4], 0),
                        minlength=len(slots))
        H = inst.H
        w = rows[:, 3] == WORKER
        unit = np.where(w, (self.worker_price[rows[:, 1], np.minimum(rows[:, 2], H - 1)]
                            @ inst.worker_demand[job]),
                        (self.ps_price[rows[:, 1], np.maximum(rows[:, 2] - H, 0)]
                         @ inst.ps_demand[job]))
        cost = np.bincount(group, weights=unit * rows[:, 4], minlength=len(slots))
        with np.errstate(divide="ignore", invalid="ignore"):
            eta = np.where(k > 0, progress / np.maximum(k, 1), 1.0)
            topo_cost = float(np.sum(np.where(eta > 0, cost / eta, np.inf)))
        finishes = True
        if inst.progress == "placement":
            remaining = float(inst.work[job])
            for g in progress.tolist():
                remaining -= g
            finishes = remaining <= DONE_EPS
        eta_all = float(progress.sum() / k.sum()) if k.sum() > 0 else 1.0
        return plan.utility - topo_cost, finishes, eta_all

    def _confined(self, home: int):
        """Free capacities with every server outside rack ``home`` emptied."""
        return (self.worker_free * self._member_w[home][None, :, None],
                self.ps_free * self._member_p[home][None, :, None])

    def _plan(self, job: int, wp, pp, free=None):
        """The dual subroutine at prices (wp, pp); in placement mode, a plan whose placement
        delivers less than W_i is re-planned (at most ``REPLANS`` times) for the larger target
        ceil(W_i / eta), eta = its placement-aware worker-slots / its worker-slots, so that
        spilling over racks is paid for with more worker-slots instead of failing."""
        inst = self.instance
        spec = DualJob.from_instance(inst, job)
        worker_free, ps_free = (self.worker_free, self.ps_free) if free is None else free
        market = Market(wp, pp, worker_free, ps_free)
        for attempt in range(REPLANS + 1):
            plan = best_schedule_arrays(spec, market, backend=self.backend,
                                        granularity=self.granularity)
            if not plan.feasible:
                return plan, -math.inf, False
            score, finishes, eta = self._score(job, plan)
            if finishes or inst.progress != "placement" or attempt == REPLANS or eta <= 0:
                return plan, score, finishes
            work = spec.work
            spec = replace(spec, work=max(work + 1, math.ceil(work / eta - WORK_EPS)))
        return plan, score, finishes

    # ---- Alg. 1 with the topology-aware choice ---------------------------------------------------
    def on_arrival(self, job: int, t: int, state) -> bool:
        t0 = time.perf_counter()
        best, best_key, best_home = None, (-math.inf, 0), None
        for home in [None] + self._home_candidates(job):
            for confine in (False, True) if home is not None and self._blocking else (False,):
                if confine:  # inside its home the steered prices are the true ones
                    plan, score, finishes = self._plan(job, self.worker_price, self.ps_price,
                                                       self._confined(home))
                else:
                    wp, pp = ((self.worker_price, self.ps_price) if home is None
                              else self._steered(job, home))
                    plan, score, finishes = self._plan(job, wp, pp)
                if not (plan.feasible and finishes):
                    continue
                # equal scores (prices negligible against utility): fewer worker-slots first
                key = (score, -int(plan.rows[plan.rows[:, 3] == WORKER, 4].sum()))
                if key > best_key:
                    best, best_key, best_home = plan, key, home
        best_score = best_key[0]
        admit = best is not None and payoff_positive(best_score, best.cost)
        if admit:
            self._commit(best)
        self.decision_s[job] = time.perf_counter() - t0
        self.payoff[job] = best.payoff if best is not None else None
        self.topo_payoff[job] = best_score if best is not None else None
        self.planned[job] = best.completion if best is not None else None
        self.home[job] = None if best_home is None else self._racks[best_home]
        return admit

    def stats(self) -> dict:
        out = super().stats()
        out["job_topo_payoff"] = self.topo_payoff
        out["job_home"] = self.home
        homes = [h for h in self.home if h is not None]
        out["steered_admissions"] = len(homes)
        return out
