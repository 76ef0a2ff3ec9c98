"""A cancelled OASiS job gives its reservation back (``OasisPolicy.on_cancel``, through
``SlotLoop.cancel``, the scheduling service's ``DELETE``).

OASiS reserves a job's whole plan at admission. Before, a cancelled job's future slots stayed
committed: their prices stayed raised and their room was lost to later arrivals. Now, from the
cancellation's slot on, the committed amounts, free capacities and prices are exactly those of a
run in which the job was never admitted, so every later decision is that run's too; a mutant that
releases nothing (or subtracts, leaving round-off) fails the equalities below.
"""
from __future__ import annotations

import numpy as np
import pytest

from oasis_opt.model import validate
from oasis_opt.online.pricing import oracle_pricing
from oasis_opt.policies import get_policy
from oasis_opt.sim.core import SlotLoop
from oasis_opt.workloads import generate

ARRAYS = ("worker_used", "ps_used", "worker_free", "ps_free", "worker_price", "ps_price",
          "worker_min", "ps_min")


def candidate(inst, pricing):
    """A job admitted with a plan beyond its arrival slot and decided last in that slot (so
    nothing decided with its reservation in place before the cancellation), or None."""
    loop = SlotLoop(inst, get_policy("oasis", pricing=pricing))
    while loop.t < inst.horizon:
        loop.step()
    policy = loop.policy
    for j in range(inst.I):
        a = int(inst.arrival[j])
        later_same_slot = [k for k in range(j + 1, inst.I) if inst.arrival[k] == a]
        plan = policy.plan(j) or []
        if not later_same_slot and any(t > a for t, *_ in plan):
            return j
    return None


def run(inst, pricing, job, cancel_at):
    """The slot loop with ``job`` cancelled before slot ``cancel_at`` (0: before anything)."""
    loop = SlotLoop(inst, get_policy("oasis", pricing=pricing))
    if cancel_at == 0:
        loop.cancel(job)
    while loop.t < inst.horizon:
        if loop.t + 1 == cancel_at:
            loop.cancel(job)
        loop.step()
    return loop


def test_a_cancelled_jobs_reservation_is_released_as_if_never_admitted():
    tested = 0
    for seed in range(8):
        inst = generate("paper-fig5", seed=seed)
        pricing = oracle_pricing(inst)
        job = candidate(inst, pricing)
        if job is None:  # seed 0 has none: every such job is decided before another
            continue
        tested += 1
        a = int(inst.arrival[job])
        cancelled = run(inst, pricing, job, a + 1)  # admitted in slot a, withdrawn from a + 1
        never = run(inst, pricing, job, 0)
        pc, pn = cancelled.policy, never.policy
        assert cancelled.state.admitted[job] and not never.state.admitted[job]
        for name in ARRAYS:  # from the cancellation on: bit for bit the run without the job
            np.testing.assert_array_equal(getattr(pc, name)[a + 1:], getattr(pn, name)[a + 1:],
                                          err_msg=f"seed {seed}: {name}")
        assert not [t for t, *_ in pc.plan(job) if t > a]  # nothing of it ahead any more
        for k in range(inst.I):  # every other job decided and planned as without it
            if k != job:
                assert pc.plan(k) == pn.plan(k), (seed, k)
                assert cancelled.state.admitted[k] == never.state.admitted[k]
                assert cancelled.state.completion[k] == never.state.completion[k]
        report = validate(inst, cancelled.schedule())  # the job's one slot of containers too
        assert report.ok, report.violations
    assert tested >= 5


def test_the_released_room_goes_to_a_later_job():
    """On some seed a later job is planned otherwise than beside the uncancelled job, with
    containers on a (slot, server) the cancelled job had reserved: the room is used. A policy
    that releases nothing plans every later job as beside it and fails this."""
    used = []
    for seed in range(6):
        inst = generate("paper-fig5", seed=seed)
        pricing = oracle_pricing(inst)
        job = candidate(inst, pricing)
        if job is None:
            continue
        a = int(inst.arrival[job])
        full = run(inst, pricing, job, inst.horizon + 1).policy  # never cancelled
        reserved = {(t, s) for t, s, *_ in full.plan(job) if t > a}
        cancelled = run(inst, pricing, job, a + 1).policy
        used += [(seed, k) for k in range(inst.I) if k != job
                 and cancelled.plan(k) != full.plan(k)  # planned otherwise than with it
                 and reserved & {(t, s) for t, s, *_ in cancelled.plan(k) or []}]
    assert used
