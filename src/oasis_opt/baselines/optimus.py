"""Optimus (Peng et al., EuroSys 2018): greedy allocation by marginal gain.

A modern peer, in the same slot model as the paper's baselines. Every slot:

1. in arrival order (ties: instance order), each unfinished job gets one worker and the PSs it
   needs, if they fit (Optimus starts every job with one worker and one PS);
2. then repeatedly the job with the largest marginal gain per unit of resource gets one more
   worker, together with the PSs constraint (6) then requires
   (ceil((k+1) b_i / B_i) - ceil(k b_i / B_i)), until nothing more fits.

Progress model (the paper's): k workers train k worker-slots per slot, so with r_i remaining
worker-slots the estimated remaining time is r_i / k slots, and the marginal gain of the
(k+1)-th worker is

    gain_i(k) = r_i / k - r_i / (k + 1)        (slots saved)

per unit of resource = the dominant share of the increment over the pooled cluster,
max_r (w_i^r + dp s_i^r) / C^r (C^r = sum of c^r over all H + K servers, dp the extra PSs).
In this model a PS beyond ceil(k b_i / B_i) speeds nothing up (the PS side is never the
bottleneck, constraint (6)), so Optimus's "one more PS" step never wins and PSs are added only
as (6) requires. A job stops growing at min(N_i, ceil(r_i)) workers or when its next worker
does not fit. Ties in gain per resource: arrival, then instance order.

With accelerator types r_i is the remaining work units divided by the speed of the type the
job's first worker got (``baselines.common``), so the gain is in slots there.

Documented choices: the continuous estimate r/k (not ceil(r/k)) so that gains never plateau;
allocations are recomputed every slot (Optimus reschedules every interval) and placed afresh;
every job is admitted; placement first-fit by default.
"""
from __future__ import annotations

import heapq

from ..sim.core import OnlinePolicy
from ..sim.placement import Placement
from .common import (DominantShare, grow_one, make_placement, max_workers_alone, merge_rows,
                     ps_table, rows_type, work_cap)
from ..model.numerics import DIVISOR_FLOOR


class OptimusPolicy(OnlinePolicy):
    name = "optimus"

    def __init__(self, *, seed: int = 0, placement: str | Placement = "first-fit"):
        self.seed = int(seed)
        self.placement_option = placement
        make_placement(placement, self.seed)

    def start(self, instance, state) -> None:
        self.instance = instance
        self.placement = make_placement(self.placement_option, self.seed)
        self.placement.reset(instance)
        self.share = DominantShare(instance)
        self.ps = ps_table(instance)
        self.kmax = max_workers_alone(instance)
        self.steps = 0

    def marginal(self, job: int, k: int, remaining: float) -> float:
        """gain_i(k) / dominant share of the (k+1)-th worker and its extra PSs; ``remaining`` in
        worker-slots of the job's type (work units / speed)."""
        dp = self.ps[job][k + 1] - self.ps[job][k]
        cost = float((self.share.w[job] + dp * self.share.s[job]).max())
        gain = remaining / k - remaining / (k + 1)
        return gain / max(cost, DIVISOR_FLOOR)

    def slots_left(self, job: int, rows, remaining: float) -> float:
        """r_i in worker-slots on the type of the job's workers: remaining units / its speed
        (the units themselves without accelerator types)."""
        g = rows_type(self.instance, job, rows)
        speed = self.instance.max_speed[job] if g is None else self.instance.type_speed[job, g]
        return remaining if not self.instance.typed else remaining / float(speed)

    def allocate(self, t, state):
        jobs = state.active().tolist()
        free = state.free
        cap = {j: min(int(self.kmax[j]), work_cap(state, j)) for j in jobs}
        k = dict.fromkeys(jobs, 0)
        rows: dict[int, list] = {j: [] for j in jobs}
        heap = []
        left: dict[int, float] = {}
        for pos, j in enumerate(jobs):
            if cap[j] > 0 and grow_one(self.placement, self.instance, self.ps, j, 1, free, rows[j]):
                k[j] = 1
                left[j] = self.slots_left(j, rows[j], state.remaining[j])
                if cap[j] > 1:
                    heap.append((-self.marginal(j, 1, left[j]), pos, j))
        heapq.heapify(heap)
        while heap:
            _, pos, j = heapq.heappop(heap)
            if not grow_one(self.placement, self.instance, self.ps, j, k[j] + 1, free, rows[j],
                            float(state.remaining[j])):
                continue
            k[j] += 1
            self.steps += 1
            if k[j] < cap[j]:
                heapq.heappush(heap, (-self.marginal(j, k[j], left[j]), pos, j))
        for j in jobs:
            for s, role, n in merge_rows(rows[j]):
                yield j, s, role, n

    def stats(self) -> dict:
        return {"marginal_steps": self.steps}

