"""A deliberately simple reference policy used to exercise the simulator.

Admit every job; each slot, in arrival order, give each running job as many workers as still
help (up to N_i and its remaining work) with their PSs, first fit.
"""
from __future__ import annotations

import math

from ..model.numerics import DONE_EPS
from .core import OnlinePolicy
from .placement import FirstFit, apply, get_placement


class GreedyPolicy(OnlinePolicy):
    name = "greedy"

    def __init__(self, placement: str = "first-fit"):
        self.placement = get_placement(placement) if placement != "first-fit" else FirstFit()

    def start(self, instance, state) -> None:
        self.placement.reset(instance)

    def allocate(self, t, state):
        inst = state.instance
        for job in state.active():
            want = min(int(inst.chunks[job]), math.ceil(state.remaining[job] - DONE_EPS))
            k, rows = self.placement.place_most(inst, int(job), want, state.free)
            if k:
                apply(inst, int(job), rows, state.free)
                for s, role, n in rows:
                    yield int(job), s, role, n
