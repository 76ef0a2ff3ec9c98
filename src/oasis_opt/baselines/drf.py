"""DRF: Dominant Resource Fairness, the default of YARN and Mesos (paper §V baseline 2).

Documented choices (A8):

* every job is admitted;
* at every event (an arrival, or the slot after a completion) all allocations are recomputed
  from an empty cluster by progressive filling: repeatedly give one more worker, together with
  the PSs constraint (6) then requires (ceil((k+1) b_i / B_i) - ceil(k b_i / B_i) of them), to
  the unfinished job with the lowest dominant share

      share_i = max_r (k_i w_i^r + p_i s_i^r) / C^r,    C^r = sum over all H + K servers of c^r

  (shares over the pooled cluster resources; ties by arrival, then instance order), placing
  each increment with the placement component at once; a job leaves the filling when its next
  worker does not fit or k_i = min(N_i, ceil(remaining worker-slots)) (with accelerator types:
  ceil(remaining units / the speed of the type its first worker got), ``baselines.common``);
* the allocation is held (same servers) until the next event; since the filling restarts from
  an empty cluster, containers may move between servers at an event (the slot model charges
  nothing for moving, as for every policy here);
* placement round-robin by default, as the paper says for DRF (each increment starts one
  server further on, so a job's workers spread across servers).
"""
from __future__ import annotations

from ..sim.placement import Placement
from .common import (DominantShare, EventPolicy, grow_one, merge_rows, progressive_fill,
                     ps_table, work_cap)


class DrfPolicy(EventPolicy):
    name = "drf"

    def __init__(self, *, seed: int = 0, placement: str | Placement = "round-robin"):
        super().__init__(seed=seed, placement=placement)

    def start(self, instance, state) -> None:
        super().start(instance, state)
        self.ps = ps_table(instance)
        self.share = DominantShare(instance).with_ps(self.ps)

    def decide(self, t, state) -> None:
        inst = self.instance
        jobs = [int(j) for j in state.active()]
        cap = {j: min(int(inst.chunks[j]), work_cap(state, j)) for j in jobs}
        free = inst.capacity.copy()
        rows: dict[int, list] = {j: [] for j in jobs}

        def grow(j: int, k: int) -> bool:
            return grow_one(self.placement, inst, self.ps, j, k, free, rows[j],
                            float(state.remaining[j]))

        k = progressive_fill(jobs, cap, self.share, grow)
        self.held = {j: merge_rows(rows[j]) for j in jobs if k[j] > 0}
