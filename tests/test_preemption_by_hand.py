"""Preemption costs on tiny instances, with every expected number worked out by hand in the
docstrings (a preempted job's lost work, its restart slots, its progress while degraded to CPU,
a promotion's checkpoint write, the GPU- and CPU-hours the metrics call lost). The expectations
are plain numbers: nothing here replays the shared ledger (``model.preemption.replay``) to get
them, so a ledger, a simulator or a metric that zeroes lost work, skips the restart, credits CPU
mode at GPU speed, loses a promoted job's work, makes its checkpoint write free or counts CPU
time as GPU time fails here."""
from __future__ import annotations

import pytest
from test_cluster_priority import _cluster, _job, _run

from oasis_opt.model import PS, WORKER, Allocations
from oasis_opt.model.preemption import parse_events
from oasis_opt.sim.preemption import lost_resource_hours, preemption_metrics


def _low_then_high(checkpoint_slots: int, restart_slots: float, low_slots: float,
                   high_slots: float, cpu_speed: int = 2, write_slots: float = 0.25):
    """"low" (one 4-GPU V100 worker, 10 units a slot, ``cpu_speed`` units a slot on the CPU
    server with 16 vCPUs; W = 10 x ``low_slots``) from slot 1 on the one V100 server; "high"
    (4 GPUs, W = 10 x ``high_slots``) arrives in slot 3 and stops "low" there. A promotion's
    checkpoint write takes ``write_slots``. In 1-hour slots a V100 unit is 4 / 10 = 0.4
    GPU-hours."""
    jobs = [_job("low", 1, 4, slots=low_slots, cpu_speed=cpu_speed),
            _job("high", 3, 4, user="high", kind="prod-train", slots=high_slots)]
    return _cluster(jobs, racks=(("r0", 1),),
                    meta={"preemption": {"checkpoint_slots": checkpoint_slots,
                                         "restart_slots": restart_slots,
                                         "write_slots": write_slots}})


def _slots_on(s, job: int, server: int) -> list[int]:
    return sorted({t for j, t, sv, r, n in s.allocations.rows() if j == job and sv == server
                   and r == 0})


def test_a_degraded_job_finishes_on_cpu_at_the_cpu_speed() -> None:
    """W("low") = 25 units; checkpoints every slot (the stop loses nothing), restarts of 0.5 slot.
    Slots 1, 2 on the V100: 10 + 10 = 20 units, 5 left. "high" (10 slots of work) stops "low" in
    slot 3. Degraded to CPU (2 units a slot): slot 3 is the restart, floor(2 x 0.5) = 1 unit
    (1 withheld, 1 restart slot), slot 4: 2 more (3), slot 5: 2 more (5): "low" completes in slot
    5, on the CPU server in slots 3-5, with no promotion. Killed instead, it waits for "high"
    (slots 3..12), restarts in slot 13 with floor(10 x 0.5) = 5 units and completes there.
    Caught: CPU mode credited at the GPU speed (completion 3), a restart not withheld (4), a
    degrade that does not move the job.
    Metrics (1-hour slots): nothing lost on the GPUs (the stop lost nothing, the restart was on
    the CPU server): 0 GPU-h, where counting the withheld CPU unit at the V100's rate gave
    0.4; the CPU restart wastes half a slot of the 16-vCPU worker: 8 vCPU-h; the 5 units done
    on CPU are 5 x 0.4 = 2 GPU-h moved off the GPUs. Held: "low" 2 slots, "high" 10, x 4 GPUs
    = 48 GPU-h."""
    inst = _low_then_high(1, 0.5, 2.5, 10)
    cpu, v100 = inst.server_index["c0"], inst.server_index["v0"]
    deg = _run(inst, "priority-degrade")
    assert deg.completion == (5, 12)
    assert _slots_on(deg, 0, cpu) == [3, 4, 5] and _slots_on(deg, 0, v100) == [1, 2]
    c = deg.stats["preemption"]["jobs"]
    assert (c["degradations"], c["promotions"], c["preemptions"]) == ([1, 0], [0, 0], [0, 0])
    assert c["lost_work"] == [0.0, 0.0] and c["restart_slots"] == [1, 0]
    m = preemption_metrics(inst, deg, 3600.0)
    assert m["lost_gpu_hours"] == 0.0
    assert m["lost_cpu_hours"] == pytest.approx(8.0)
    assert m["cpu_work_gpu_hours"] == pytest.approx(2.0)
    assert m["gpu_hours"] == pytest.approx(48.0) and m["useful_gpu_hours"] == pytest.approx(48.0)
    kill = _run(inst, "priority-kill")
    assert kill.completion == (13, 12)
    assert _slots_on(kill, 0, v100) == [1, 2, 13]
    assert kill.stats["preemption"]["jobs"]["restart_slots"] == [1, 0]


def test_lost_work_and_restart_slots_of_a_late_checkpoint() -> None:
    """W("low") = 80 units; checkpoints every 4 slots, restarts of 1.5 slots. Slots 1, 2: 20
    units, none saved (2 < 4), so the kill in slot 3 loses 20: 80 left. "high" (2 slots of work)
    runs in slots 3-4; "low" restarts in slot 5: share clip(0 + 1 - 1.5, 0, 1) = 0 (0 units),
    slot 6: clip(1 + 1 - 1.5) = 0.5 (floor(10 x 0.5) = 5), then full slots: 5 + 10 k >= 80 at
    k = 8, slots 7..14: completion 14, 2 restart slots, withheld 10 + 5 = 15 units.
    Metrics (1-hour slots, 4 GPUs for 10 units): lost (20 + 15) x 4 / 10 = 14 GPU-h; held: "low"
    2 + 10 slots, "high" 2, x 4 GPUs = 56 GPU-h; useful 56 - 14 = 42 GPU-h. Caught: lost work
    zeroed (completion 12, lost 6 GPU-h), the restart made free (completion 12), the checkpoint
    taken too early."""
    inst = _low_then_high(4, 1.5, 8, 2)
    s = _run(inst, "priority-kill")
    assert s.completion == (14, 4)
    c = s.stats["preemption"]["jobs"]
    assert c["lost_work"] == [20.0, 0.0] and c["restart_slots"] == [2, 0]
    m = preemption_metrics(inst, s, 3600.0)
    assert m["lost_gpu_hours"] == pytest.approx(14.0)
    assert m["gpu_hours"] == pytest.approx(56.0)
    assert m["useful_gpu_hours"] == pytest.approx(42.0)
    assert m["stops"] == {"preemptions": 1, "degradations": 0, "promotions": 0}


def test_a_promotion_writes_a_checkpoint_first_and_pays_the_write() -> None:
    """W("low") = 80; checkpoints every 3 slots, restarts of 0.5, a checkpoint write of 0.25;
    CPU speed 4. Slots 1-2: 20 units unsaved; the degrade in slot 3 loses them (0 left). On CPU:
    slot 3 is the restart, floor(4 x 0.5) = 2 (2 withheld), slot 4: 4 more (6, unsaved: 2 slots
    < 3). "high" (2 slots) completes in 4, so "low" is promoted in slot 5: the scheduler's own
    move, so it writes a checkpoint first and keeps its 6 units; its V100 restart takes the write
    and the restart, 0.25 + 0.5 slot: floor(10 x 0.25) = 2 (8 withheld), 8 units. Then
    8 + 10 k >= 80 at k = 8: slots 6..13, completion 13. 20 lost in all, 2 restart slots.
    Metrics in 1-hour slots: the 20 units lost were slots 1-2 of 4 GPUs, 8 GPU-h; the V100
    restart withholds 8 of slot 5's 10 units, 0.8 x 4 = 3.2 GPU-h: 11.2 GPU-h lost; the CPU
    restart withholds half of slot 3: 0.5 x 16 = 8 vCPU-h lost; 6 units kept from CPU mode,
    6 x 0.4 = 2.4 GPU-h moved off the GPUs. Held: "low" 2 + 9 slots, "high" 2, x 4 = 52
    GPU-h; useful 52 - 11.2 = 40.8.
    Caught: a promotion that loses its unsaved CPU work (26 lost), a free write (floor(10 x
    0.5) = 5 in slot 5: 11 + 70 >= 80, completion 12), the CPU units counted at the V100's GPU
    rate ((20 + 2 + 8) x 0.4 = 12 GPU-h lost)."""
    inst = _low_then_high(3, 0.5, 8, 2, cpu_speed=4, write_slots=0.25)
    s = _run(inst, "priority-degrade")
    assert [tuple(e) for e in s.stats["preemption"]["events"]] == [
        ("low", 3, "degrade", "high"), ("low", 5, "promote", None)]
    assert s.completion == (13, 4)
    cpu, v100 = inst.server_index["c0"], inst.server_index["v0"]
    assert _slots_on(s, 0, cpu) == [3, 4] and _slots_on(s, 0, v100) == [1, 2, *range(5, 14)]
    c = s.stats["preemption"]["jobs"]
    assert c["lost_work"] == [20.0, 0.0] and c["restart_slots"] == [2, 0]
    assert (c["degradations"], c["promotions"]) == ([1, 0], [1, 0])
    m = preemption_metrics(inst, s, 3600.0)
    assert m["lost_gpu_hours"] == pytest.approx(11.2)
    assert m["lost_gpu_hours_at_stops"] == pytest.approx(8.0)
    assert m["lost_gpu_hours_restarts"] == pytest.approx(3.2)
    assert m["stops_losing_work"] == 1  # the degrade; the promote saves its work
    assert m["lost_cpu_hours"] == pytest.approx(8.0)
    assert m["cpu_work_gpu_hours"] == pytest.approx(2.4)
    assert m["gpu_hours"] == pytest.approx(52.0)
    assert m["useful_gpu_hours"] == pytest.approx(40.8)


def test_cpu_work_lost_at_a_stop_costs_cpu_hours_not_gpu_hours() -> None:
    """A schedule written by hand (W("low") = 80, checkpoints every 3 slots, restarts of 0.5,
    CPU speed 2): "low" on the V100 in slots 1-2 (20 units, unsaved), degraded by "high" in slot
    3 (20 lost), on the CPU server in slots 3-8: slot 3 the restart, floor(2 x 0.5) = 1 (1
    withheld), slots 4, 5: 2 each, a checkpoint at the end of slot 5 (3 slots since the
    restart), slots 6, 7: 2 each, unsaved; resized in slot 8, which loses those 4; slot 8 is a
    restart again, 1 (1 withheld). "high" on the V100 in slots 3-4.
    GPU-time lost: slots 1-2 of 4 GPUs, 8 GPU-h (1-hour slots); CPU-time lost (16 vCPUs):
    half of slot 3 (8), slots 6 and 7 (32), half of slot 8 (8): 48 vCPU-h. Units kept from CPU
    mode: 1 + 2 + 2 + 1 = 6, x 0.4 = 2.4 GPU-h. The old definition, every lost or withheld unit
    at the V100's rate, gave (20 + 4 + 1 + 1) x 0.4 = 10.4 GPU-h."""
    inst = _low_then_high(3, 0.5, 8, 2, cpu_speed=2)
    v0, c0, p0 = (inst.server_index[n] for n in ("v0", "c0", "p0"))
    place = {0: [(t, v0) for t in (1, 2)] + [(t, c0) for t in range(3, 9)],
             1: [(3, v0), (4, v0)]}
    rows = [(j, t, server, role, 1) for j, slots in place.items() for t, s in slots
            for server, role in ((s, WORKER), (p0, PS))]
    events = parse_events(inst, {"events": [["low", 3, "degrade", "high"],
                                            ["low", 8, "resize", None]]})[0]
    got = lost_resource_hours(inst, Allocations.from_rows(rows), events, 3600.0)
    assert got["lost_gpu_hours"] == pytest.approx(8.0)
    assert got["lost_cpu_hours"] == pytest.approx(48.0)
    assert got["cpu_work_gpu_hours"] == pytest.approx(2.4)


def test_a_kill_with_checkpoint_restart_loses_nothing_but_restarts() -> None:
    """W("low") = 80; checkpoints every 3 slots, restarts of 0.5; "high" (2 slots) stops "low"
    in slot 3 with 20 units unsaved. priority-kill loses them: 0 + 5 + 10 k >= 80 from slot 5
    at k = 8, completion 13. priority-checkpoint saves them first (a "suspend"): lost 0, the
    restart in slot 5 still credits floor(10 x 0.5) = 5: 20 + 5 + 10 k >= 80 at k = 6, slots
    6..11, completion 11; one restart slot, 5 withheld units = 2 lost GPU-h (1-hour slots,
    4 GPUs per 10 units). Caught: a suspend that loses the unsaved work, or skips the restart."""
    inst = _low_then_high(3, 0.5, 8, 2)
    s = _run(inst, "priority-checkpoint")
    assert [tuple(e) for e in s.stats["preemption"]["events"]] == [("low", 3, "suspend", "high")]
    assert s.completion == (11, 4)
    c = s.stats["preemption"]["jobs"]
    assert c["lost_work"] == [0.0, 0.0] and c["restart_slots"] == [1, 0]
    assert c["preemptions"] == [1, 0]
    assert preemption_metrics(inst, s, 3600.0)["lost_gpu_hours"] == pytest.approx(2.0)
    assert _run(inst, "priority-kill").completion == (13, 4)
