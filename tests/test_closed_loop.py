"""The closed loop (``runtime.closed_loop``): measured progress fed back, jobs behind re-planned.

Without Ray: ``ClosedLoop`` on a measure that does a fraction of the model's progress (a speed
model that over-predicts) must still give schedules the validator accepts, for every policy the
fidelity benchmark runs, and OASiS must re-plan a slowed job's remaining work over later slots.
With Ray: a real, time-boxed execution in which one job is slowed by a real sleep before each of
its iterations (the executor's ``on_iteration`` hook) is re-planned.
"""
from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_opt import get_policy, validate
from oasis_opt.model import PS, WORKER, Instance, Job, Server, Utility
from oasis_opt.runtime.closed_loop import ClosedLoop
from oasis_opt.testing import instances

POLICIES = ("oasis", "drf", "fifo", "dorm", "greedy")


def slowed(share: dict[int, float]):
    """A measure crediting job j ``share[j]`` of the model's progress (1 when not named)."""
    left: dict[int, float] = {}

    def measure(t, rows, model):
        out = {}
        for j, gross in model.items():
            before = left.get(j, measure.work[j])
            out[j] = max(0.0, before - share.get(j, 1.0) * gross)
            if out[j] < 1e-9:
                out[j] = 0.0
            left[j] = out[j]
        return out

    return measure


def run(instance, name, share):
    measure = slowed(share)
    measure.work = instance.work.astype(float)  # type: ignore[attr-defined]
    loop = ClosedLoop(instance, get_policy(name), measure)
    return loop, loop.run()


@settings(max_examples=12, deadline=None)
@given(inst=instances(max_jobs=3, max_horizon=6, max_servers=2, max_work=6),
       share=st.sampled_from([0.25, 0.5, 0.75]), name=st.sampled_from(POLICIES))
def test_closed_loop_schedules_are_valid_whatever_the_slowdown(inst, share, name):
    """Bug caught: a re-plan that keeps the released plan (double allocation, over capacity),
    one placed before its slot, or crediting that completes a job the measure has not."""
    loop, sched = run(inst, name, {0: share})
    report = validate(inst, sched)
    assert report.ok, report.violations
    # a job completes exactly when the measured work is done: never before it got W_i
    state = loop.loop.state
    for j in np.flatnonzero(state.completion >= 0):
        assert state.remaining[j] <= 1e-9
    for rec in loop.replans:
        for slot, _, _, _ in rec.get("rows", []):
            assert slot > rec["slot"]


def two_jobs(horizon: int = 8, epochs_a: int = 1) -> Instance:
    cap = {"cpu": 2.0, "mem": 8.0, "bw": 10.0}
    dem = {"cpu": 1.0, "mem": 1.0, "bw": 1.0}
    u = Utility.sigmoid(10.0, 1.0, 4.0)
    config = {"learning_rate": 0.01, "weight_decay": 1e-4, "width": 16, "depth": 1,
              "batch_size": 32, "optimizer": "adam"}
    # each: E N x = E * 4 * 0.5 = 2 E worker-slots (digits: 16 mini-batches per worker-slot)
    jobs = tuple(Job(name, 1, epochs, 4, 0.5, dem, dem, u,
                     task={"name": "digits-mlp", "config": config, "seed": seed})
                 for name, epochs, seed in (("a", epochs_a, 1), ("b", 1, 2)))
    return Instance(horizon, ("cpu", "mem", "bw"), (Server("w0", cap), Server("w1", cap)),
                    (Server("p0", cap),), jobs)


def test_oasis_replans_a_slowed_job_over_later_slots_at_current_prices():
    """Bug caught: ``replan`` that does not release the job's old plan (its rows stay and the
    new ones come on top), or plans from the current slot, or a loop that never re-plans."""
    inst = two_jobs(epochs_a=4)  # a: 8 worker-slots, more than one slot's 4 workers
    _, planned = run(inst, "oasis", {})
    assert len(set(planned.allocations.slot[planned.allocations.job == 0].tolist())) > 1
    loop, sched = run(inst, "oasis", {0: 0.5})
    assert validate(inst, sched).ok
    assert loop.replans and {r["job"] for r in loop.replans} == {0}
    first = loop.replans[0]
    assert first["remaining"] == pytest.approx(inst.work[0] - 0.5 * planned_workers(planned, 0,
                                                                                   first["slot"]))
    assert first["completion"] is not None and first["completion"] > first["slot"]
    # the job got more worker-slots than its W_i (half of each slot's went to waste), and it
    # completes later than planned; job b's plan is the open loop's
    assert worker_slots(sched, 0) > worker_slots(planned, 0) == inst.work[0]
    assert sched.completion[0] > planned.completion[0]
    assert rows_of(sched, 1) == rows_of(planned, 1)
    # after each re-plan the job holds exactly the new plan from the next slot on (the old one
    # released), and the slots after the last re-plan ran exactly it
    last = loop.replans[-1]
    assert sorted(r for r in loop.policy.plan(0) if r[0] > last["slot"]) == sorted(last["rows"])
    assert [r for r in rows_of(sched, 0) if r[0] > last["slot"]] == sorted(last["rows"])


def planned_workers(sched, job, upto):
    al = sched.allocations
    sel = (al.job == job) & (al.role == WORKER) & (al.slot <= upto)
    return float(al.count[sel].sum())


def worker_slots(sched, job):
    return planned_workers(sched, job, 10 ** 6)


def rows_of(sched, job):
    al = sched.allocations
    sel = al.job == job
    return sorted(zip(al.slot[sel].tolist(), al.server[sel].tolist(), al.role[sel].tolist(),
                      al.count[sel].tolist()))


# ---- for real, on Ray ----------------------------------------------------------------------------
@pytest.mark.ray
def test_a_job_slowed_for_real_is_replanned_and_the_replan_is_valid(tmp_path):
    """Job a sleeps 0.05 s before each of its iterations (the executor's ``on_iteration`` hook:
    real time, nothing mocked), so its planned slot of 2 workers (16 iterations, at least 0.8 s)
    cannot fit in a 0.4 s slot whatever the machine's speed; the time-boxed executor cuts it, the
    measured progress goes back to the loop and OASiS re-plans a's remaining work. 12 slots
    leave room to finish both jobs on a loaded machine (with 8 slots and a 0.1 s sleep, job a
    ran out of slots with both cores busy beside the suite). Bug caught: an executor that does not cut the slot (no
    shortfall to feed back), a loop that credits the model's progress (no re-plan), a re-plan
    the validator refuses, a report without the re-plans."""
    ray = pytest.importorskip("ray")
    from oasis_opt.runtime.closed_loop import run_closed_loop
    from oasis_opt.runtime.executor import start_ray

    if ray.is_initialized():
        ray.shutdown()
    start_ray(None, ["w0", "w1", "p0"])
    inst = two_jobs(horizon=12)

    def slow_a(executor, job, slot, iteration):
        if job == 0:
            time.sleep(0.05)

    try:
        out = run_closed_loop(inst, get_policy("oasis"), slot_seconds=0.4, on_iteration=slow_a)
    finally:
        ray.shutdown()
    assert validate(inst, out.schedule).ok
    assert 0 in {r["job"] for r in out.replans}
    first = next(r for r in out.replans if r["job"] == 0)
    assert first["completion"] is not None and first["completion"] > first["slot"]
    assert all(slot > first["slot"] for slot, *_ in first["rows"])
    # what ran: the slowed job did fewer mini-batches than planned in the slot it fell behind
    # in, and every mini-batch of both jobs in the end
    job_a = out.report.doc["jobs"][0]
    behind = next(s for s in job_a["slots"] if s["slot"] == first["slot"])
    assert behind["real_minibatches"] < behind["planned_minibatches"]
    assert all(j["minibatches"]["real"] == j["minibatches"]["planned"]
               for j in out.report.doc["jobs"])
    assert out.schedule.completion[0] > out.planned.completion[0]
    assert out.report.doc["meta"]["closed_loop"]["replans"] == out.replans
    assert PS in out.schedule.allocations.role.tolist()


def test_execute_refuses_a_result_the_closed_loop_cannot_rerun(tmp_path, capsys):
    """``execute`` re-runs the result's online policy; a result made by hand (or with options
    the default policy does not reproduce) is refused before Ray starts, pointing at
    ``--open-loop``. Bug caught: a closed loop that silently runs another schedule."""
    from oasis_opt.cli import main
    from oasis_opt.cli.common import CliError
    from oasis_opt.cli.execute import closed_loop_policy
    from oasis_opt.model import ScheduleBuilder
    from oasis_opt.model.io import save_instance, save_result

    inst = two_jobs()
    drf = get_policy("drf").solve(inst)
    assert closed_loop_policy(inst, drf, "r.json").name == "drf"
    b = ScheduleBuilder(inst)
    b.admit(0)
    b.add(0, 1, 0, WORKER, 2)
    b.add(0, 1, 2, PS, 2)
    hand = b.build("hand")
    assert validate(inst, hand).ok
    b = ScheduleBuilder(inst)
    b.admit(0)
    b.add(0, 1, 0, WORKER, 2)
    b.add(0, 1, 2, PS, 2)
    other = b.build("drf")  # DRF by name, not DRF's schedule
    for sched, says in ((hand, "'hand' is not one the closed loop can re-run"),
                        (other, "does not give this schedule")):
        with pytest.raises(CliError, match=says):
            closed_loop_policy(inst, sched, "r.json")
    save_instance(inst, tmp_path / "inst.json")
    save_result(inst, hand, tmp_path / "hand.json")
    code = main(["execute", str(tmp_path / "inst.json"), str(tmp_path / "hand.json"),
                 "--slot-s", "1", "--no-progress", "--out", str(tmp_path / "r.json")])
    assert code == 2 and "--open-loop" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_closed_loop_refuses_a_schedule_with_preemption_events():
    """``priority-degrade`` is an online policy whose schedule on ``philly-chains`` degrades jobs
    to CPU; the closed loop steps only the policy's allocations and re-plans jobs that fall
    behind, it does not apply degrade/promote events, so it refuses such a result (pointing at
    ``--open-loop``, which applies them). Bug caught: ``execute``'s default closed loop running
    a degrading schedule with every job kept at GPU speed."""
    from oasis_opt.cli.common import CliError
    from oasis_opt.cli.execute import closed_loop_policy
    from oasis_opt.runtime.plan import slot_events
    from oasis_opt.workloads import generate

    inst = generate("philly-chains", seed=0)
    sched = get_policy("priority-degrade").solve(inst)
    events = slot_events(sched, inst)
    assert events and any(kind == "degrade" for ev in events.values() for _, kind in ev)
    with pytest.raises(CliError, match=r"preemption events .*--open-loop"):
        closed_loop_policy(inst, sched, "r.json")
