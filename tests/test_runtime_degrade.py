"""Degradation for real: the ``degrade-real`` preset solved by ``priority-degrade`` and run by
the executor on a local Ray (``oasis-opt generate`` / ``solve`` / ``execute``, slots of 0.5 s).

The "GPU" server of the preset is a logical server of the testbed (every container trains on this
machine's CPUs); its type sets only the speed the schedule credits. Every expected number is worked
out by hand below (nothing here replays the ledger): one work unit is one mini-batch of "low"
(M / (x u) = 8 / (0.8 x 10)); a worker on the GPU server gives 10 units a slot, on the CPU server
1; a checkpoint every 3 slots with workers since the last (re)start; a restart of one whole slot;
a promotion's checkpoint write of w = 1.9344 s / 3600 s (the cost model's: 3 x 80.6 MB at 1
Gbps, the catalogue's default model, ``lm`` being a family and not a model; hour-long model
slots, the preset names no ``slot_s``).

"low", slot by slot: 1-4 on the GPU server, 10 mini-batches each (40; the checkpoint at the end of
slot 3 holds 30). Slot 5: "high" arrives and "low" is degraded to the CPU server: back to the
checkpoint, 10 mini-batches lost; slot 5 is its restart (0 mini-batches). Slot 6 on CPU: 1 (31,
since the restart: 2 slots < 3, unsaved). Slot 7: "high" completed in slot 6, "low" is promoted
back, writing a checkpoint first: it keeps its 31 (0 lost); its restart takes 1 + w slots, so
slot 7 runs 0 and slot 8 floor(10 x (1 - w)) = 9 (40); slot 9 the last 8 of its 48. "high":
slots 5, 6 on the GPU server, 10 and 6 (W = 16).
Caught: CPU slots credited at the GPU speed (slot 6 would run 10), no rollback at a stop (nothing
lost; "low" would finish in slot 8), a promotion that rolls back (slot 9 would run 9 and "low"
finish in slot 10), a free checkpoint write (slot 8 would run 10), a restart slot credited in
full, parameters that are not the rolled-back ones (the replay differs).
"""
from __future__ import annotations

import numpy as np
import pytest

from oasis_opt import solve
from oasis_opt.cli import main
from oasis_opt.model.io import load_instance, load_result
from oasis_opt.runtime.plan import SlotProgress, job_plan, slot_events
from oasis_opt.runtime.replay import replay_training
from oasis_opt.runtime.report import load_report
from oasis_opt.workloads import generate

# slot -> (mini-batches trained, workers on the CPU server, degraded, event, lost mini-batches)
LOW = {1: (10, 0, False, None, 0), 2: (10, 0, False, None, 0), 3: (10, 0, False, None, 0),
       4: (10, 0, False, None, 0), 5: (0, 1, True, "degrade", 10), 6: (1, 1, True, None, 0),
       7: (0, 0, False, "promote", 0), 8: (9, 0, False, None, 0), 9: (8, 0, False, None, 0)}
HIGH = {5: (10, 0, False, None, 0), 6: (6, 0, False, None, 0)}
EVENTS = [["low", 5, "degrade", "high"], ["low", 7, "promote", None]]


def schedule_files(d):
    """The README's commands, up to the execution."""
    assert main(["generate", "--preset", "degrade-real", "--seed", "0",
                 "--out", str(d / "degrade.json")]) == 0
    assert main(["solve", str(d / "degrade.json"), "--policy", "priority-degrade", "--option",
                 "cap=1", "--out", str(d / "degrade-sched.json")]) == 0
    inst = load_instance(d / "degrade.json")
    return inst, load_result(inst, d / "degrade-sched.json")


def per_slot(job_entry) -> dict:
    return {r["slot"]: (r["real_minibatches"], r["cpu_workers"], r["degraded"], r["event"],
                        r["lost_minibatches"]) for r in job_entry["slots"]}


# ---- the plan (no Ray) ---------------------------------------------------------------------
def test_priority_degrade_degrades_and_promotes_on_the_preset(tmp_path):
    inst, sched = schedule_files(tmp_path)
    assert sched.stats["preemption"]["events"] == EVENTS
    assert sched.completion == (9, 6)
    assert sched.stats["preemption"]["jobs"]["lost_work"] == [10.0, 0.0]
    cpu = inst.server_index["cpu0"]
    on_cpu = sorted({t for j, t, s, r, c in sched.allocations.rows() if j == 0 and s == cpu})
    assert on_cpu == [5, 6]


def test_slot_progress_follows_the_ledger_by_hand():
    """The executor's targets, without Ray: cumulative mini-batches after each slot of "low"."""
    inst = generate("degrade-real", seed=0)
    sched = solve(inst, "priority-degrade", cap=1.0)
    plan, progress = job_plan(inst, 0), SlotProgress(inst)
    events = slot_events(sched, inst)
    rows: dict[int, list] = {}
    for j, t, s, r, c in sched.allocations.rows():
        if j == 0:
            rows.setdefault(t, []).append((s, r, c))
    kept, got = {}, {}
    for t in sorted(rows):
        for j, kind in events.get(t, ()):
            kept[t] = progress.stop(plan, t, kind)
        got[t] = progress.credit(plan, rows[t], t).target
    assert kept == {5: 30, 7: 31}
    assert got == {1: 10, 2: 20, 3: 30, 4: 40, 5: 30, 6: 31, 7: 31, 8: 40, 9: 48}
    assert plan.total_minibatches == 48


# ---- for real ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def degrade_run(tmp_path_factory):
    """The preset's schedule executed on a local Ray of its servers (what ``oasis-opt execute``
    runs; the README block runs the command itself), with the executor kept for its final
    parameters."""
    ray = pytest.importorskip("ray")
    from oasis_opt.runtime.executor import execute, start_ray

    if ray.is_initialized():  # another module's Ray lacks the preset's servers
        ray.shutdown()
    inst, sched = schedule_files(tmp_path_factory.mktemp("degrade"))
    start_ray(None, [s.id for s in inst.servers])
    seen = {}

    def keep(executor, job, t, iteration):
        seen["executor"] = executor

    try:
        report = execute(inst, sched, slot_seconds=0.5, on_iteration=keep)
        yield inst, sched, report, seen["executor"]
    finally:
        ray.shutdown()


@pytest.mark.ray
def test_the_real_run_degrades_trains_on_cpu_and_is_promoted(degrade_run):
    inst, sched, report, _ = degrade_run
    low, high = report.job("low"), report.job("high")
    assert per_slot(low) == LOW
    assert per_slot(high) == HIGH
    assert [r["planned_minibatches"] for r in low["slots"]] == [v[0] for v in LOW.values()]
    # the CPU slots ran on the CPU server, as the containers reported it
    for r in low["slots"]:
        where = {s["server"] for s in r["servers"] if s["role"] == "worker"}
        assert where == ({"cpu0"} if r["slot"] in (5, 6) else {"gpu0"})
    assert low["minibatches"] == {"planned": 48, "real": 48}
    assert low["real"]["completion_slot"] == 9 and high["real"]["completion_slot"] == 6
    assert "low: degrade in slot 5 (lost 10 mini-batches); promote in slot 7 (lost 0 " \
           "mini-batches); degraded (CPU mode) in slots 5, 6" in report.summary()


@pytest.mark.ray
def test_the_real_run_trains_what_the_replay_trains(degrade_run):
    """The executor's final parameters equal the replay's bit for bit; the replay follows the
    same rollbacks."""
    inst, sched, report, executor = degrade_run
    for job in ("low", "high"):
        i = inst.job_index[job]
        np.testing.assert_array_equal(executor.final_params(i), replay_training(inst, sched, i))
    # a mini-batch's data depends only on its number, so the final parameters of a one-worker
    # job do not show the rollback; the checkpoints after the stops do: after slot 5 "low" holds
    # the checkpoint of slot 3 (30 mini-batches), not slot 4's 40; after slot 7 the one it wrote
    # at the promotion, slot 6's 31
    loss = {r["slot"]: r["val_loss"] for r in report.job("low")["slots"]}
    assert loss[5] == loss[3] != loss[4]
    assert loss[7] == loss[6] != loss[5]
