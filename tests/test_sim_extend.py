"""Jobs appended to a running slot loop (``SlotLoop.extend``, ``OnlinePolicy.extend``): what the
scheduling service does with every job it accepts, so that a slot's cost does not grow with the
jobs seen before it. A loop extended slot by slot must decide exactly as a loop started with
every job; a policy that cannot take new jobs says so, and the loop refuses an instance that is
not an extension of its own."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_opt.model import Topology, validate
from oasis_opt.online.pricing import oracle_pricing
from oasis_opt.policies import get_policy
from oasis_opt.sim.core import SlotLoop, simulate
from oasis_opt.sim.state import ClusterState
from oasis_opt.testing import instances
from oasis_opt.workloads import generate


def by_arrival(inst):
    """The instance with its jobs in arrival order (ties in instance order): the order a
    service accepts them in."""
    order = sorted(range(inst.I), key=lambda i: (inst.jobs[i].arrival, i))
    return inst.with_jobs([inst.jobs[i] for i in order])


def extended_run(inst, policy, submit_at):
    """Start a loop on the cluster alone and, before slot t, extend it with the jobs whose
    ``submit_at`` is t (each at most its arrival); returns the loop and how many extensions the
    policy took."""
    loop = SlotLoop(inst.with_jobs(()), policy)
    taken = 0
    for t in range(1, inst.horizon + 1):
        n = sum(s <= t for s in submit_at)
        if n > loop.instance.I:
            taken += loop.extend(inst.with_jobs(inst.jobs[:n]))
        loop.step()
    assert loop.instance.I == inst.I
    return loop, taken


def submissions(inst, data):
    """A submission slot per job, at most its arrival and never before an earlier job's."""
    at = [data.draw(st.integers(1, j.arrival), label=f"submit {j.id}") for j in inst.jobs]
    at = list(np.maximum.accumulate(at))
    return [min(s, j.arrival) for s, j in zip(at, inst.jobs)]


def same_run(loop, inst, policy):
    ref = simulate(inst, policy)
    got = loop.schedule()
    assert got.admitted == ref.admitted
    assert got.completion == ref.completion
    assert sorted(got.allocations.rows()) == sorted(ref.allocations.rows())
    assert got.stats["job_payoff"] == ref.stats["job_payoff"]
    assert validate(inst, got).ok


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), data=st.data())
def test_oasis_extended_slot_by_slot_decides_as_one_started_with_every_job(seed, data):
    """A pricing fixed in advance (here the oracle's, computed once and passed as a Pricing):
    every admission, allocation, completion and payoff equal, and every extension taken (the
    first one starts the policy afresh: the loop began without jobs)."""
    inst = by_arrival(generate("paper-fig5", seed=seed))
    pricing = oracle_pricing(inst)
    submit_at = submissions(inst, data)
    loop, taken = extended_run(inst, get_policy("oasis", pricing=pricing), submit_at)
    assert taken == len(set(submit_at))
    same_run(loop, inst, get_policy("oasis", pricing=pricing))


@settings(max_examples=15, deadline=None)
@given(inst=instances(max_jobs=5), o=st.sampled_from([1.0, 4.0]),
       progress=st.sampled_from(["chunk-time", "placement"]), data=st.data())
def test_oasis_topo_extended_decides_as_one_started_with_every_job(inst, o, progress, data):
    """The topology-aware variant rebuilds its per-job cost-model arrays for the larger
    instance; under placement-aware progress the loop credits with the new instance's too."""
    inst = by_arrival(dataclasses.replace(inst, topology=Topology.from_racks(inst, o),
                                          progress=progress))
    if not inst.I:
        return
    pricing = oracle_pricing(inst)
    loop, taken = extended_run(inst, get_policy("oasis-topo", pricing=pricing),
                               submissions(inst, data))
    assert taken >= 1
    ref = simulate(inst, get_policy("oasis-topo", pricing=pricing))
    got = loop.schedule()
    assert got.admitted == ref.admitted and got.completion == ref.completion
    assert got.stats["job_topo_payoff"] == ref.stats["job_topo_payoff"]


@pytest.mark.parametrize("name, options", [("oasis", {}), ("drf", {}), ("fifo", {}),
                                           ("greedy", {})])
def test_a_policy_that_reads_every_job_at_its_start_refuses(name, options):
    """OASiS with the oracle pricing (computed from all jobs) and the baselines (their start
    reads every job) cannot take new jobs: ``extend`` is False, and the caller replays."""
    inst = by_arrival(generate("paper-fig5", seed=2))
    loop = SlotLoop(inst.with_jobs(inst.jobs[:1]), get_policy(name, **options))
    late = [j for j in inst.jobs[1:] if j.arrival > 1]
    loop.step()
    assert loop.extend(inst.with_jobs([inst.jobs[0], *late])) is False


def test_the_state_keeps_the_old_jobs_and_starts_the_new_ones_fresh():
    """Hand-set values of two jobs survive; the third starts not arrived, undecided, with all
    its work remaining and no completion."""
    inst = by_arrival(generate("paper-fig5", seed=4))
    two = inst.with_jobs(inst.jobs[:2])
    state = ClusterState(two)
    state.t = 3
    state.arrived[:] = True
    state.admitted[0] = state.decided[:] = True
    state.remaining[0] = 1.5
    state.completion[1] = 2
    state.attained[0] = 7.0
    state.last_ran[0] = 3
    state.ledger.progress[0] = 6.0
    state.ledger.counts["preemptions"][0] = 2
    three = inst.with_jobs(inst.jobs[:3])
    state.extend(three)
    assert state.instance is three and state.t == 3
    assert state.arrived.tolist() == [True, True, False]
    assert state.admitted.tolist() == [True, False, False]
    assert state.decided.tolist() == [True, True, False]
    assert state.remaining.tolist() == [1.5, float(two.work[1]), float(three.work[2])]
    assert state.completion.tolist() == [-1, 2, -1]
    assert state.attained.tolist() == [7.0, 0.0, 0.0]
    assert state.last_ran.tolist() == [3, 0, 0]
    assert state.ledger.progress.tolist() == [6.0, 0.0, 0.0]
    assert state.ledger.counts["preemptions"].tolist() == [2, 0, 0]
    assert len(state.ledger.checkpoint_slots) == 3


def test_the_loop_refuses_what_is_not_an_extension_of_its_instance():
    inst = by_arrival(generate("paper-fig5", seed=6))
    pricing = oracle_pricing(inst)
    first = [j for j in inst.jobs if j.arrival == inst.jobs[0].arrival]
    loop = SlotLoop(inst.with_jobs(first), get_policy("oasis", pricing=pricing))
    for _ in range(inst.jobs[0].arrival):
        loop.step()
    t = loop.t
    early = dataclasses.replace(inst.jobs[-1], id="early", arrival=t)
    with pytest.raises(ValueError, match=f"arrives in slot {t}, which is decided"):
        loop.extend(inst.with_jobs([*first, early]))
    later = dataclasses.replace(inst.jobs[-1], id="later", arrival=t + 1)
    with pytest.raises(ValueError, match="not the loop's jobs"):
        loop.extend(inst.with_jobs([later, *first]))
    with pytest.raises(ValueError, match="not the loop's cluster"):
        loop.extend(dataclasses.replace(inst.with_jobs([*first, later]),
                                        horizon=inst.horizon + 1))
    assert loop.instance.I == len(first)  # nothing changed by a refusal
    assert loop.extend(inst.with_jobs([*first, later])) is True


# ---- Instance.extended: the growing instance at the cost of its new jobs -------------------------
def _cached_names():
    from functools import cached_property

    from oasis_opt.model.instance import Instance

    return [n for n, v in vars(Instance).items() if isinstance(v, cached_property)]


def test_every_cached_property_has_a_rule_in_extended():
    """A cached property added to Instance without saying whether it is the cluster's or per
    job would be silently dropped (recomputed) by ``extended``, or worse, carried stale."""
    from oasis_opt.model import instance as m

    ruled = set(m._CLUSTER_CACHED) | set(m._PER_JOB_CACHED) | {"job_index", "fingerprint"}
    assert set(_cached_names()) == ruled


@settings(max_examples=40, deadline=None)
@given(inst=instances(max_jobs=6), data=st.data(), warm=st.booleans())
def test_extended_equals_with_jobs_array_for_array(inst, data, warm):
    """Every cached property of ``a.extended(rest)`` equals that of ``with_jobs`` of all the
    jobs, dtype and shape included, whether ``a`` had computed its arrays (then they are
    stacked) or not (then they are computed afresh)."""
    k = data.draw(st.integers(0, inst.I), label="jobs before")
    head = inst.with_jobs(inst.jobs[:k])
    if warm:
        for name in _cached_names():
            getattr(head, name)
    got = head.extended(inst.jobs[k:])
    want = inst.with_jobs(inst.jobs)
    assert got.jobs == want.jobs and got == want
    for name in _cached_names():
        a, b = getattr(got, name), getattr(want, name)
        if isinstance(b, np.ndarray):
            assert a.dtype == b.dtype and a.shape == b.shape, name
            assert np.array_equal(a, b), name
            assert not a.flags.writeable, name
        else:
            assert a == b, name


def test_extended_refuses_a_duplicate_id_and_checks_the_new_jobs():
    from oasis_opt.model import FormatError

    inst = generate("paper-fig5", seed=1)
    head = inst.with_jobs(inst.jobs[:3])
    with pytest.raises(FormatError, match=r"jobs\[3\]\.id.*duplicate job id"):
        head.extended([inst.jobs[1]])
    bad = dataclasses.replace(inst.jobs[5], epochs=0)
    with pytest.raises(FormatError, match="epochs"):
        head.extended([bad])
