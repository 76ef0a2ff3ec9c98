"""Priority preemption with degradation (cluster.priority) on hand-built clusters, and its rules
as properties of random instances with priorities and a CPU mode."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_opt import solve, validate
from oasis_opt.cluster.priority import (DEFAULT_WEIGHTS, JOB_TYPES, USER_CLASSES, priority,
                                        user_class)
from oasis_opt.model import DEFAULT_RESOURCES, Instance, Job, JobType, Server, Utility
from oasis_opt.testing import hetero_instances

POLICIES = ("priority-degrade", "priority-kill", "priority-checkpoint", "priority-nopreempt")
_GPU = {"gpu": 4.0, "cpu": 16.0, "mem": 64.0, "storage": 100.0, "bw": 40.0}
_CPU = {"gpu": 0.0, "cpu": 64.0, "mem": 256.0, "storage": 100.0, "bw": 40.0}
_PS = {"gpu": 0.0, "cpu": 16.0, "mem": 64.0, "storage": 100.0, "bw": 100.0}
_PSD = {"cpu": 1.0, "mem": 1.0, "storage": 1.0, "bw": 5.0}


def _job(jid, arrival, gpus, *, user="low", kind="automl", slots=6, unit=10, cpu_speed=1):
    """One worker of ``gpus`` GPUs (V100 speed ``unit``, CPU ``cpu_speed``) training ``slots``
    V100 slots of work."""
    worker = {"gpu": float(gpus), "cpu": 2.0, "mem": 4.0, "storage": 1.0, "bw": 5.0}
    cpu = {"cpu": 16.0, "mem": 4.0, "storage": 1.0, "bw": 5.0}
    return Job(jid, arrival, 1, 1, float(slots), worker, dict(_PSD),
               Utility.sigmoid(10.0, 0.1, 5.0), None,
               {"user_class": user, "job_type": kind}, unit=unit,
               types={"v100": JobType(unit), "cpu": JobType(cpu_speed, cpu)})


def _cluster(jobs, racks=(("r0", 1), ("r1", 1)), cpu=True, horizon=40, meta=None):
    """One V100 server (4 GPUs) and one PS server per rack; a CPU server in the last rack."""
    workers = [Server(f"v{n}", dict(_GPU), rack=r, accelerator="v100")
               for n, (r, k) in enumerate(racks) for _ in range(k)]
    if cpu:
        workers.append(Server("c0", dict(_CPU), rack=racks[-1][0], accelerator="cpu"))
    else:  # the jobs' CPU mode goes with the CPU server
        from dataclasses import replace

        jobs = [replace(j, types={"v100": j.types["v100"]}) for j in jobs]
    ps = [Server(f"p{n}", dict(_PS), rack=r) for n, (r, _) in enumerate(racks)]
    return Instance(horizon, DEFAULT_RESOURCES, tuple(workers), tuple(ps), tuple(jobs),
                    meta=meta or {})


def _events(s):
    return [tuple(e) for e in s.stats.get("preemption", {}).get("events", [])]


def _run(inst, policy, **opts):
    s = solve(inst, policy, **{"max_workers": 1, "cap": 1.0, **opts})
    assert validate(inst, s).ok, str(validate(inst, s))
    return s


def test_the_priority_sums_its_normalised_terms():
    one = np.ones(1)
    w = DEFAULT_WEIGHTS
    got = priority(w, one, 0.5 * one, 12 * one, 0 * one, 0.5 * one, 6 * one, max_wait=24,
                   max_remaining=24, max_stops=3)
    want = w["user"] + 0.5 * w["type"] + 0.5 * w["wait"] + w["remaining"] + 0.5 * w["unsaved"] \
        + w["preempted"]
    assert got[0] == pytest.approx(want)


def test_user_class_defaults_and_bad_values():
    j = _job("a", 1, 1)
    assert user_class(j) == "low"
    from dataclasses import replace

    assert user_class(replace(j, provenance=None, job_class="time-critical")) == "high"
    assert user_class(replace(j, provenance=None)) == "mid"
    with pytest.raises(ValueError, match=r"provenance.user_class: unknown class 'vip'"):
        user_class(replace(j, provenance={"user_class": "vip"}))
    inst = _cluster([replace(j, provenance={"job_type": "batch"})])
    with pytest.raises(ValueError, match=r"provenance.job_type: unknown type 'batch'"):
        solve(inst, "priority-kill")


@pytest.mark.parametrize("bad, match", [({"delta": -1}, "delta"), ({"cap": 2}, "cap"),
                                        ({"weights": {"user": -1}}, "weights.user: must be"),
                                        ({"weights": "user"}, "weights: expected an object"),
                                        ({"weights": {**DEFAULT_WEIGHTS, "x": 1}},
                                         "weights.x: unknown")])
def test_bad_options_name_the_field(bad, match):
    with pytest.raises(ValueError, match=match):
        solve(_cluster([_job("a", 1, 1)]), "priority-kill", **bad)


def test_a_higher_band_preempts_and_the_victim_is_degraded_then_promoted():
    """"low" fills the one V100 server from slot 1; "high" arrives in 3:
    priority-degrade moves "low" to the CPU server (degrade, by "high") and back to the V100 once
    "high" is done (promote); priority-kill requeues it; priority-nopreempt makes "high" wait."""
    jobs = [_job("low", 1, 4, slots=8), _job("high", 3, 4, user="high", kind="prod-train",
                                            slots=2)]
    inst = _cluster(jobs, racks=(("r0", 1),))
    deg = _run(inst, "priority-degrade")
    ev = _events(deg)
    assert ev[0] == ("low", 3, "degrade", "high") and ev[1][1:3] == (5, "promote")
    assert {s for j, t, s, r, n in deg.allocations.rows() if j == 0 and r == 0 and 3 <= t < 5} \
        == {1}  # the CPU server
    assert deg.completion[1] == 4 and deg.completion[0] is not None
    kill = _run(inst, "priority-kill")
    assert _events(kill) == [("low", 3, "preempt", "high")]
    assert kill.completion[1] == 4
    assert deg.stats["preemption"]["jobs"]["lost_work"] == kill.stats["preemption"]["jobs"][
        "lost_work"]
    wait = _run(inst, "priority-nopreempt")
    assert _events(wait) == [] and wait.completion[1] > 4
    # CPU at 1/10 of the V100: below a min_cpu_speed of 0.2, so the victim is requeued instead
    slow = _run(inst, "priority-degrade", min_cpu_speed=0.2)
    assert _events(slow) == [("low", 3, "preempt", "high")]


def two_jobs_one_server(checkpoint_slots: int, restart_slots: float = 0.5,
                        write_slots: float = 0.1):
    """"low" (4 GPUs, one V100 worker: 10 units a slot, W = 8 x 10 = 80 units) from slot 1;
    "high" (4 GPUs, 2 slots) arrives in slot 3 and stops "low" there; a CPU server (1 unit a
    slot for "low"). A promotion's checkpoint write takes ``write_slots``."""
    jobs = [_job("low", 1, 4, slots=8), _job("high", 3, 4, user="high", kind="prod-train",
                                            slots=2)]
    return _cluster(jobs, racks=(("r0", 1),),
                    meta={"preemption": {"checkpoint_slots": checkpoint_slots,
                                         "restart_slots": restart_slots,
                                         "write_slots": write_slots}})


@pytest.mark.parametrize("policy, checkpoint_slots, lost, completion", [
    # kill, checkpoints every 3 slots: slots 1, 2 credit 10 + 10 units, no checkpoint yet (2 < 3
    # slots), so the stop in slot 3 loses 20. From slot 5 (after "high", slots 3-4): slot 5 is a
    # restart of rho = 0.5 slots, credited floor(10 x 0.5) = 5; then 10 a slot: 0 + 5 + 10 k >= 80
    # at k = 8, slots 6..13: completion 13.
    ("priority-kill", 3, 20.0, 13),
    # kill, checkpoints every 2 slots: saved at the end of slot 2, the stop loses 0;
    # 20 + 5 + 10 k >= 80 at k = 6: completion 11.
    ("priority-kill", 2, 0.0, 11),
    # degrade, every 3 slots: the stop in slot 3 loses 20; on CPU slot 3 is the restart,
    # floor(1 x 0.5) = 0, slot 4 credits 1 (unsaved: 2 slots < 3); the promote in slot 5 writes a
    # checkpoint first (it keeps that 1: 20 lost in all), and its V100 restart takes the write
    # too, 0.5 + 0.1 slot: floor(10 x 0.4) = 4; 1 + 4 + 10 k >= 80 at k = 8: completion 13.
    ("priority-degrade", 3, 20.0, 13),
    # degrade, every 2 slots: the degrade loses 0; on CPU slots 3 (0 units) and 4 (1 unit), the
    # promote keeps them; 21 + 4 + 10 k >= 80 at k = 6: completion 11.
    ("priority-degrade", 2, 0.0, 11),
])
def test_lost_work_by_hand(policy, checkpoint_slots, lost, completion):
    """Lost work and completion computed by hand (the arithmetic in the cases): a ledger that
    loses no work at a stop, or loses it at a checkpoint, fails here."""
    inst = two_jobs_one_server(checkpoint_slots)
    s = _run(inst, policy)
    counters = s.stats["preemption"]["jobs"]
    assert counters["lost_work"] == [lost, 0.0]
    assert s.completion == (completion, 4)
    # the restart slots: one after each stop (rho = 0.5 < 1 slot)
    assert counters["restart_slots"] == [1 if policy == "priority-kill" else 2, 0]


def test_equal_bands_never_preempt_each_other_with_the_band_rule():
    """With ``bands``: same band, however long "late" waits (aging) and with delta 0: no
    preemption. Without (the default, the score alone) the prod-train job outranks the automl
    one (type weight 0.2 x (1 - 0.3) = 0.14 >= delta 0) and preempts it on arrival."""
    jobs = [_job("first", 1, 4, user="mid", kind="automl", slots=20),
            _job("late", 2, 4, user="mid", kind="prod-train", slots=2)]
    inst = _cluster(jobs, racks=(("r0", 1),))
    for policy in ("priority-degrade", "priority-kill"):
        s = _run(inst, policy, delta=0.0, bands=True)
        assert _events(s) == [] and s.completion[1] > 20
        free = _run(inst, policy, delta=0.0)
        assert _events(free)[0][1:] == (2, "degrade" if policy == "priority-degrade"
                                        else "preempt", "late")


def test_the_delta_rule_blocks_a_small_priority_gap():
    """Bands differ (mid over low) but with delta 0.9 the gap never suffices."""
    jobs = [_job("low", 1, 4, slots=10), _job("mid", 3, 4, user="mid", kind="automl", slots=2)]
    inst = _cluster(jobs, racks=(("r0", 1),))
    assert _events(_run(inst, "priority-kill")) != []
    assert _events(_run(inst, "priority-kill", delta=0.9)) == []


def test_degraded_jobs_never_preempt():
    """One V100 server of 4 GPUs. "top" (2 GPUs, done after slot 3) degrades "mid" (4 GPUs) in
    slot 2 and "low" (2 GPUs) takes the other half. From slot 4 "mid" (band above "low", priority
    gap >= delta) would fit by preempting "low", but a degraded job never preempts: it stays on
    CPU until "low" is done. Under priority-kill the requeued "mid" is not degraded and preempts
    "low" in slot 4: the chain that degradation breaks."""
    jobs = [_job("mid", 1, 4, user="mid", slots=30),
            _job("top", 2, 2, user="high", kind="prod-train", slots=2),
            _job("low", 2, 2, slots=30)]
    inst = _cluster(jobs, racks=(("r0", 1),))
    s = _run(inst, "priority-degrade", delta=0.1)
    ev = _events(s)
    assert ev[0] == ("mid", 2, "degrade", "top") and all(by != "mid" for *_, by in ev)
    assert ev[1][:3] == ("mid", 32, "promote")  # once "low" (30 slots from slot 2) is done
    kill = _run(inst, "priority-kill", delta=0.1)
    assert _events(kill)[:2] == [("mid", 2, "preempt", "top"), ("low", 4, "preempt", "mid")]


def test_victims_fewest_then_lowest_highest_priority():
    """Rack r0: two automl jobs of 2 GPUs each; rack r1: one job of 4 GPUs. "high" (4 GPUs, one
    worker) needs a whole server. At the same highest victim priority (r1's job automl too) it
    preempts the single job (fewer victims); when r1's job is a dev job (type weight 0.6 over
    0.3) it preempts the two automl jobs (lower highest-victim priority first)."""
    racks = (("r0", 1), ("r1", 1))
    for kind, victims in (("automl", ["b"]), ("dev", ["a1", "a2"])):
        jobs = [_job("a1", 1, 2), _job("a2", 1, 2), _job("b", 1, 4, kind=kind),
                _job("high", 2, 4, user="high", kind="prod-train", slots=2)]
        # bands: the victims' own follow-up preemptions (chains) are another test's
        s = _run(_cluster(jobs, racks=racks, cpu=False), "priority-kill", bands=True)
        assert sorted(e[0] for e in _events(s)) == victims, kind
        assert all(e[1] == 2 and e[3] == "high" for e in _events(s))


def test_the_reprieve_spares_a_victim_that_is_not_needed():
    """One 4-GPU server: "x" (1 GPU, automl) and "y" (3 GPUs, dev). "high" needs 3 GPUs: the
    lowest-priority-first pass takes "x", then "y"; the reprieve then gives "x" back, since
    "y"'s 3 GPUs suffice."""
    jobs = [_job("x", 1, 1, slots=20), _job("y", 1, 3, kind="dev", slots=20),
            _job("high", 2, 3, user="high", kind="prod-train", slots=2)]
    s = _run(_cluster(jobs, racks=(("r0", 1),), cpu=False), "priority-kill")
    assert _events(s) == [("y", 2, "preempt", "high")]


def test_victims_least_lost_work_at_equal_priority():
    """Checkpoints every 3 slots; "y" (rack r0) started in 2, "x" (rack r1) in 1. In slot 4 "x"
    has just checkpointed (nothing to lose) while "y" would lose 2 slots of work: with the
    remaining-time and unsaved-work weights at 0 both have the same priority, and "x" goes."""
    weights = {**DEFAULT_WEIGHTS, "remaining": 0.0, "unsaved": 0.0}
    jobs = [_job("y", 2, 4, slots=20), _job("x", 1, 4, slots=20),
            _job("high", 4, 4, user="high", kind="prod-train", slots=2)]
    inst = _cluster(jobs, racks=(("r0", 1), ("r1", 1)), cpu=False,
                    meta={"preemption": {"checkpoint_slots": 3, "restart_slots": 0.1}})
    s = _run(inst, "priority-kill", weights=weights, bands=True)
    assert _events(s) == [("x", 4, "preempt", "high")]
    assert s.stats["preemption"]["jobs"]["lost_work"] == [0.0, 0.0, 0.0]


def test_the_per_slot_gpu_cap_holds():
    """Preempting the 4-GPU job needs 4 of the cluster's 8 GPUs: a cap of 0.4 forbids it, 0.5
    allows it; the GPUs preempted per slot never exceed the cap."""
    jobs = [_job("b", 1, 4, slots=20), _job("c", 1, 4, slots=20),
            _job("high", 2, 4, user="high", kind="prod-train", slots=2)]
    inst = _cluster(jobs, cpu=False)
    assert _events(_run(inst, "priority-kill", cap=0.4)) == []
    s = _run(inst, "priority-kill", cap=0.5, bands=True)
    assert len(_events(s)) == 1
    assert max(s.stats["preempted_gpus"]) <= s.stats["gpu_cap"] == 4.0


def test_without_bands_a_killed_victim_preempts_in_turn_and_degradation_ends_the_chain():
    """Two racks of one 4-GPU server; "b", "c" (low, automl, 4 GPUs each) from slot 1; "high"
    arrives in 2 and preempts "b" (rack r0, first by instance order at equal priority). Killed
    and requeued, "b" gains 0.3 x 1/3 = 0.1 from its stop (and its wait), enough at delta 0 to
    preempt "c" in slot 3: a chain of length 2. With the band rule (both low) the chain stops at 1;
    degraded to the CPU server instead, "b" never preempts: chains of length 1."""
    jobs = [_job("b", 1, 4, slots=20), _job("c", 1, 4, slots=20),
            _job("high", 2, 4, user="high", kind="prod-train", slots=2)]
    from oasis_opt.sim.preemption import chain_lengths

    inst = _cluster(jobs)
    kill = _run(inst, "priority-kill", delta=0.0)
    assert _events(kill)[:2] == [("b", 2, "preempt", "high"), ("c", 3, "preempt", "b")]
    assert chain_lengths(inst, kill)[0] == 2
    banded = _run(inst, "priority-kill", delta=0.0, bands=True)
    assert set(chain_lengths(inst, banded)) == {1}
    deg = _run(inst, "priority-degrade", delta=0.0)
    assert _events(deg)[0] == ("b", 2, "degrade", "high")
    assert set(chain_lengths(inst, deg)) == {1}


# ---- properties on random instances with priorities and a CPU mode --------------------------
@st.composite
def prioritised(draw):
    """``hetero_instances`` with a user class and job type drawn for every job."""
    from dataclasses import replace

    inst = draw(hetero_instances(max_jobs=8, max_horizon=12, max_servers=2))
    if "cpu" not in inst.types:  # a CPU-mode server to degrade to
        cpu = Server("wc", {"gpu": 0.0, "cpu": 32.0, "mem": 64.0, "storage": 100.0, "bw": 40.0},
                     rack="rack-0", accelerator="cpu")
        inst = replace(inst, worker_servers=inst.worker_servers + (cpu,))
    jobs = []
    for j in inst.jobs:
        types = j.types
        # every job gets a small CPU mode (speed 1, one vCPU), so that it can be degraded
        types = dict(types or {g: JobType(j.unit) for g in inst.types if g != "cpu"})
        types["cpu"] = JobType(1, {"cpu": 1.0, "mem": 1.0, "storage": 5.0, "bw": j.worker["bw"]})
        jobs.append(replace(j, types=types, provenance={
            "user_class": draw(st.sampled_from(sorted(USER_CLASSES))),
            "job_type": draw(st.sampled_from(sorted(JOB_TYPES)))}))
    jobs = tuple(jobs)
    # roomier PS servers, so that a victim's PSs often fit again beside its preemptor's
    ps = tuple(replace(p, capacity={r: 3 * v for r, v in p.capacity.items()})
               for p in inst.ps_servers)
    inst = replace(inst, ps_servers=ps)
    ckpt = draw(st.integers(1, 3))
    rho = draw(st.sampled_from([0.0, 0.3, 1.0, 1.5]))
    return replace(inst, jobs=jobs, meta={"preemption": {"checkpoint_slots": ckpt,
                                                         "restart_slots": rho}})


@st.composite
def contended(draw):
    """Small clusters under contention, built so that preemption and degradation happen: one
    or two racks of a 4-GPU V100 server, a CPU-mode server in the last, 3-8 jobs of 1-4 GPUs
    arriving in slots 1-6 with random classes, types and lengths, random costs."""
    racks = (("r0", 1),) if draw(st.booleans()) else (("r0", 1), ("r1", 1))
    jobs = [_job(f"j{n}", draw(st.integers(1, 6)), draw(st.integers(1, 4)),
                 user=draw(st.sampled_from(sorted(USER_CLASSES))),
                 kind=draw(st.sampled_from(sorted(JOB_TYPES))), slots=draw(st.integers(1, 8)),
                 unit=draw(st.sampled_from([2, 10])), cpu_speed=1)
            for n in range(draw(st.integers(3, 8)))]
    meta = {"preemption": {"checkpoint_slots": draw(st.integers(1, 3)),
                           "restart_slots": draw(st.sampled_from([0.0, 0.3, 1.0, 1.5]))}}
    return _cluster(jobs, racks=racks, horizon=30, meta=meta)


@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=40, deadline=None)
@given(inst=st.one_of(prioritised(), contended()), seed=st.integers(0, 3),
       delta=st.sampled_from([0.0, 0.1, 0.2]), cap=st.sampled_from([0.25, 1.0]),
       bands=st.booleans())
def test_the_rules_hold_on_random_instances(policy, inst, seed, delta, cap, bands):
    """Valid schedules; every preemption with a priority gap >= delta (by a job of a higher
    band with ``bands``), never by a degraded job; GPUs preempted per slot within the cap; none
    without preemption; priority-checkpoint loses no work at its stops (suspends), only at the
    stops it does not make."""
    from oasis_opt.cluster.priority import user_class

    s = solve(inst, policy, seed=seed, delta=delta, cap=cap, bands=bands)
    report = validate(inst, s)
    assert report.ok, str(report)
    band = {j.id: USER_CLASSES[user_class(j)][0] for j in inst.jobs}
    events = _events(s)
    if policy == "priority-nopreempt":
        assert events == [] and s.stats["preemption_log"] == []
    degraded: set[str] = set()
    for job, t, kind, by in sorted(events, key=lambda e: e[1]):
        if by is not None:
            assert (band[by] > band[job] or not bands) and by not in degraded
        if kind == "degrade":
            degraded.add(job)
        elif kind in ("promote",):
            degraded.discard(job)
        elif kind in ("preempt", "suspend"):
            assert kind == ("suspend" if policy == "priority-checkpoint" else "preempt")
            degraded.discard(job)
    for t, a, b, pa, pb in s.stats["preemption_log"]:
        assert pa - pb >= delta - 1e-9
    assert max(s.stats["preempted_gpus"], default=0.0) <= s.stats["gpu_cap"] + 1e-9
