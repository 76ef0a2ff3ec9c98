"""Each validator rule, broken on its own: the report names exactly that rule, at the right place.

One small hand-built instance; every case starts from a valid schedule and breaks one thing, with
the claimed completions and utilities kept consistent (derived from the allocations) unless the
case is about them, so that no other rule fires.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from oasis_opt.model import (DEFAULT_RESOURCES, PS, RULES, WORKER, Allocations, Instance, Job,
                             JobType, Schedule, Server, Utility, derive_outcome, validate)
from oasis_opt.model.schedule import work_done
from oasis_opt.testing import hetero_instances, instances

T = 5
W0, W1, P0 = 0, 1, 2  # global server index: worker servers first, then PS servers
A, BIG, CPU = 0, 1, 2  # job index

_WORKER_CAP = {"gpu": 4.0, "cpu": 8.0, "mem": 32.0, "storage": 100.0, "bw": 20.0}
_PS_CAP = {"gpu": 0.0, "cpu": 8.0, "mem": 32.0, "storage": 100.0, "bw": 40.0}
_PS_DEMAND = {"cpu": 1.0, "mem": 2.0, "storage": 1.0, "bw": 10.0}  # B_i = 10


def _job(jid, arrival, chunks, worker):
    # epochs 1 x chunks x chunk_time 1.0 = `chunks` worker-slots of work
    return Job(jid, arrival, 1, chunks, 1.0, worker, dict(_PS_DEMAND),
               Utility.sigmoid(10.0, 1.0, 1.0), "time-sensitive")


INST = Instance(
    T, DEFAULT_RESOURCES,
    (Server("w0", dict(_WORKER_CAP), rack="r0"), Server("w1", dict(_WORKER_CAP), rack="r0")),
    (Server("p0", dict(_PS_CAP), rack="r1"),),
    (
        # a: 2 worker-slots, b_i = 5 so ceil(2 * 5 / 10) = 1 PS serves 2 workers
        _job("a", 2, 2, {"gpu": 1.0, "cpu": 2.0, "mem": 4.0, "storage": 1.0, "bw": 5.0}),
        # big: 3 GPUs per worker, so two workers overflow a 4-GPU server
        _job("big", 1, 2, {"gpu": 3.0, "cpu": 2.0, "mem": 4.0, "storage": 1.0, "bw": 5.0}),
        # cpu: no GPU, so its worker fits a PS server's capacity (only the pool rule is broken)
        _job("cpu", 1, 1, {"cpu": 1.0, "mem": 1.0, "storage": 1.0, "bw": 5.0}),
    ),
)

# a valid schedule: job a, slot 2, two workers on w0 and one PS on p0
VALID_ROWS = [(A, 2, W0, WORKER, 2), (A, 2, P0, PS, 1)]


# ---- a cluster with accelerator types: a V100, a K80 and a CPU server, one PS server ----------
V100, K80, CPUS, TP0 = 0, 1, 2, 3
X, Y, Z = 0, 1, 2
_GPU_WORKER = {"gpu": 1.0, "cpu": 2.0, "mem": 4.0, "storage": 1.0, "bw": 5.0}


def _typed_job(jid, types, span=False, worker=_GPU_WORKER):
    # epochs 1 x chunks 2 x chunk_time 1.0 x unit 3 = 6 work units; a V100 worker does 3 a slot
    return Job(jid, 1, 1, 2, 1.0, dict(worker), dict(_PS_DEMAND), Utility.sigmoid(10.0, 1.0, 1.0),
               unit=3, types=types, span_types=span)


TYPED = Instance(
    T, DEFAULT_RESOURCES,
    (Server("v0", dict(_WORKER_CAP), accelerator="v100"),
     Server("k0", dict(_WORKER_CAP), accelerator="k80"),
     Server("c0", {**_WORKER_CAP, "gpu": 0.0}, accelerator="cpu")),
    (Server("tp0", dict(_PS_CAP)),),
    (
        # x: V100 at 3 units per worker-slot, K80 at 1; one type per slot
        _typed_job("x", {"v100": JobType(3), "k80": JobType(1)}),
        # y: the same, but its workers may span types
        _typed_job("y", {"v100": JobType(3), "k80": JobType(1)}, span=True),
        # z: V100 only, with no GPU demand, so a worker of it fits any server (only the type
        # rule can object)
        _typed_job("z", {"v100": JobType(2)}, worker={"cpu": 1.0, "mem": 1.0, "storage": 1.0,
                                                       "bw": 5.0}),
    ),
)
# valid: x's two workers on the V100 in slot 1 do 2 x 3 = 6 units, its work
TYPED_ROWS = [(X, 1, V100, WORKER, 2), (X, 1, TP0, PS, 1)]


def schedule(rows, admitted=(True, False, False), completion=None, utility=None, total=None,
             inst=INST):
    """A schedule of ``rows``; completion/utility/total derived unless given (then as claimed)."""
    alloc = Allocations.from_rows(rows)
    derived, _ = derive_outcome(inst, alloc)
    completion = derived if completion is None else tuple(completion)
    if utility is None:
        utility = tuple(inst.utility_of(i, c) if c is not None and 1 <= c <= T else 0.0
                        for i, c in enumerate(completion))
    total = math.fsum(utility) if total is None else total
    return Schedule("hand-made", tuple(admitted), alloc, completion, tuple(utility), total)


@dataclass(frozen=True)
class Case:
    rule: str
    name: str
    sched: Schedule
    # each dict must match some violation of `rule` on every key it gives (None = not named)
    where: list[dict] = field(default_factory=list)
    inst: Instance = INST


F_A0 = INST.utility_of(A, 2)  # f_a(0): job a finishing in its arrival slot

CASES = [
    Case("workload", "completed-with-too-little-work",
         schedule([(A, 2, W0, WORKER, 1), (A, 2, P0, PS, 1)], completion=(2, None, None)),
         [dict(job="a", slot=None, server=None, resource=None)]),
    Case("max-workers", "three-workers-for-two-chunks",
         schedule([(A, 2, W0, WORKER, 3), (A, 2, P0, PS, 2)]),
         [dict(job="a", slot=2, server=None)]),
    Case("capacity", "gpu-overflow",
         schedule([(BIG, 1, W0, WORKER, 2), (BIG, 1, P0, PS, 1)], admitted=(False, True, False)),
         [dict(job=None, slot=1, server="w0", resource="gpu")]),
    Case("capacity", "two-jobs-share-a-server",
         schedule([(A, 2, W0, WORKER, 2), (A, 2, P0, PS, 1), (BIG, 2, W0, WORKER, 1),
                   (BIG, 2, P0, PS, 1), (BIG, 3, W1, WORKER, 1), (BIG, 3, P0, PS, 1)],
                  admitted=(True, True, False)),
         [dict(job=None, slot=2, server="w0", resource="gpu")]),
    Case("ps-bandwidth", "workers-without-ps",
         schedule([(A, 2, W0, WORKER, 2)]),
         [dict(job="a", slot=2, server=None)]),
    Case("ps-le-workers", "two-ps-one-worker",
         schedule([(A, 2, W0, WORKER, 1), (A, 2, P0, PS, 2), (A, 3, W0, WORKER, 1),
                   (A, 3, P0, PS, 1)]),
         [dict(job="a", slot=2, server=None)]),
    Case("ps-without-workers", "ps-after-completion",
         schedule(VALID_ROWS + [(A, 4, P0, PS, 1)]),
         [dict(job="a", slot=4, server=None)]),
    Case("pool", "ps-on-worker-server",
         schedule([(A, 2, W0, WORKER, 2), (A, 2, W1, PS, 1)]),
         [dict(job="a", slot=2, server="w1")]),
    Case("pool", "worker-on-ps-server",
         schedule([(CPU, 1, P0, WORKER, 1), (CPU, 1, P0, PS, 1)], admitted=(False, False, True)),
         [dict(job="cpu", slot=1, server="p0")]),
    Case("arrival", "before-arrival",
         schedule([(A, 1, W0, WORKER, 2), (A, 1, P0, PS, 1)]),
         [dict(job="a", slot=1, server="w0"), dict(job="a", slot=1, server="p0")]),
    Case("horizon", "after-last-slot",
         schedule([(A, T + 1, W0, WORKER, 2), (A, T + 1, P0, PS, 1)]),
         [dict(job="a", slot=T + 1, server="w0"), dict(job="a", slot=T + 1, server="p0")]),
    Case("count", "zero-count-row",
         schedule(VALID_ROWS + [(A, 3, W1, WORKER, 0)]),
         [dict(job="a", slot=3, server="w1")]),
    Case("count", "negative-count-row",
         schedule(VALID_ROWS + [(A, 3, W1, WORKER, -1)]),
         [dict(job="a", slot=3, server="w1")]),
    Case("count", "wrong-number-of-jobs",
         Schedule("hand-made", (True,), Allocations.from_rows(VALID_ROWS), (2,), (F_A0,), F_A0),
         [dict(job=None, slot=None, server=None)]),
    Case("rejected", "allocations-of-a-rejected-job",
         schedule(VALID_ROWS, admitted=(False, False, False)),
         [dict(job="a", slot=2, server="w0"), dict(job="a", slot=None, server=None)]),
    Case("completion", "claims-a-later-slot",
         schedule(VALID_ROWS, completion=(3, None, None)),
         [dict(job="a", slot=None)]),
    Case("completion", "claims-unfinished",
         schedule(VALID_ROWS, completion=(None, None, None)),
         [dict(job="a", slot=None)]),
    Case("utility", "claims-more-utility",
         schedule(VALID_ROWS, utility=(F_A0 + 1.0, 0.0, 0.0)),
         [dict(job="a")]),
    Case("utility", "utility-for-an-unfinished-job",
         schedule(VALID_ROWS, utility=(F_A0, 0.0, 1.0)),
         [dict(job="cpu")]),
    Case("total", "total-not-the-sum",
         schedule(VALID_ROWS, total=F_A0 + 1.0),
         [dict(job=None, slot=None, server=None, resource=None)]),
    # accelerator types
    Case("type", "worker-on-a-type-the-job-cannot-use",
         schedule([(Z, 1, K80, WORKER, 1), (Z, 1, TP0, PS, 1)], admitted=(False, False, True),
                  inst=TYPED),
         [dict(job="z", slot=1, server="k0")], TYPED),
    Case("type", "worker-on-the-cpu-server",
         schedule([(Z, 1, CPUS, WORKER, 1), (Z, 1, TP0, PS, 1)], admitted=(False, False, True),
                  inst=TYPED),
         [dict(job="z", slot=1, server="c0")], TYPED),
    Case("mixed-types", "v100-and-k80-in-one-slot",
         schedule([(X, 1, V100, WORKER, 1), (X, 1, K80, WORKER, 1), (X, 1, TP0, PS, 1)],
                  inst=TYPED),
         [dict(job="x", slot=1, server=None)], TYPED),
    Case("workload", "two-k80-worker-slots-are-2-of-6-units",
         schedule([(X, 1, K80, WORKER, 2), (X, 1, TP0, PS, 1)], completion=(1, None, None),
                  inst=TYPED),
         [dict(job="x", slot=None, server=None)], TYPED),
    Case("completion", "six-units-claimed-unfinished",
         schedule(TYPED_ROWS, completion=(None, None, None), inst=TYPED),
         [dict(job="x", slot=None)], TYPED),
]


# ---- preemption (model.preemption): a V100 and a CPU server; checkpoint every 2 slots, restart
# half a slot (instance meta overrides) -------------------------------------------------------
PV, PC, PP = 0, 1, 2
_CPU_WORKER = {"cpu": 2.0, "mem": 4.0, "storage": 1.0, "bw": 5.0}
PRE = Instance(
    8, DEFAULT_RESOURCES,
    (Server("v0", dict(_WORKER_CAP), accelerator="v100"),
     Server("c0", {**_WORKER_CAP, "gpu": 0.0}, accelerator="cpu")),
    (Server("pp0", dict(_PS_CAP)),),
    # p: 1 epoch x 2 chunks x chunk_time 2.0 x unit 2 = 8 units; V100 2 a worker-slot, CPU 1
    (Job("p", 1, 1, 2, 2.0, dict(_GPU_WORKER), dict(_PS_DEMAND), Utility.sigmoid(10.0, 1.0, 1.0),
         unit=2, types={"v100": JobType(2), "cpu": JobType(1, _CPU_WORKER)}),),
    meta={"preemption": {"checkpoint_slots": 2, "restart_slots": 0.5, "write_slots": 0.25}},
)


def _rows(*slots):
    """(slot, server, workers) -> rows with one PS each."""
    return [r for t, s, k in slots for r in ((0, t, s, WORKER, k), (0, t, PP, PS, 1))]


def preempted(rows, events, completion=None, counted=None, claim=None):
    """A schedule on PRE with preemption ``events`` ([job, slot, kind, by]); completion derived
    with them unless given; counters replayed from ``counted`` events (default: ``events``),
    then overridden by ``claim``."""
    from oasis_opt.model.preemption import parse_events, replay

    alloc = Allocations.from_rows(rows)
    evs = parse_events(PRE, {"events": events})[0]
    derived, _ = derive_outcome(PRE, alloc, evs)
    completion = derived if completion is None else tuple(completion)
    utility = tuple(PRE.utility_of(i, c) if c is not None else 0.0 for i, c in enumerate(completion))
    counted_evs = evs if counted is None else parse_events(PRE, {"events": counted})[0]
    record = replay(PRE, alloc, counted_evs)[0].record(PRE)
    record["events"] = events
    record["jobs"].update(claim or {})
    return Schedule("hand-made", (True,), alloc, completion, utility, math.fsum(utility),
                    {"preemption": record})


# slot 1: 2 V100 workers (4 units, unsaved); preempted in 2 (4 lost); slot 3: restart, half of 4;
# slot 4: 4 units (checkpoint: 2 slots since the restart); slot 5: 2 units -> 8, done in 5
PRE_ROWS = _rows((1, PV, 2), (3, PV, 2), (4, PV, 2), (5, PV, 1))
PRE_EVENTS = [["p", 2, "preempt", None]]
# degraded in 2 (4 lost): CPU slots 2 (restart: 1 of 2), 3 and 4 (2 each), promoted in 5 (a
# checkpoint written first: the 2 since the one after slot 3 are kept), V100 slots 5 (restart
# and write, 0.5 + 0.25 slot: 1 of 4) and 6 (one worker, 2): 1 + 2 + 2 + 1 + 2 = 8
DEG_ROWS = _rows((1, PV, 2), (2, PC, 2), (3, PC, 2), (4, PC, 2), (5, PV, 2), (6, PV, 1))
DEG_EVENTS = [["p", 2, "degrade", None], ["p", 5, "promote", None]]

CASES += [
    Case("restart", "progress-counted-during-the-restart",
         preempted(PRE_ROWS[:6], PRE_EVENTS, completion=(4,)),  # 2 + 4 = 6 < 8 (+2 withheld)
         [dict(job="p", slot=None)], PRE),
    Case("lost-work", "lost-work-not-redone",
         preempted(_rows((1, PV, 2), (3, PV, 2), (4, PV, 1)), PRE_EVENTS, completion=(4,)),
         [dict(job="p", slot=None)], PRE),  # 2 + 2 = 4; + 2 withheld = 6 < 8 <= 6 + 4 lost
    Case("lost-work", "counters-claim-no-lost-work",
         preempted(PRE_ROWS, PRE_EVENTS, claim={"lost_work": [0.0]}),
         [dict(job="p", slot=None)], PRE),
    Case("preemption-event", "preempt-of-a-job-that-did-not-run",
         preempted(_rows((3, PV, 2), (4, PV, 2)), [["p", 2, "preempt", None]], completion=(4,),
                   counted=[]),
         [dict(job="p", slot=2)], PRE),
    Case("preemption-event", "promote-of-a-job-not-degraded",
         preempted(PRE_ROWS, PRE_EVENTS + [["p", 4, "promote", None]]),
         [dict(job="p", slot=4)], PRE),
    Case("preemption-event", "unknown-kind",
         preempted(_rows((1, PV, 2), (2, PV, 2)), [["p", 2, "hibernate", None]], counted=[]),
         [dict(job=None, slot=None)], PRE),
    Case("degraded", "degraded-job-on-the-v100",
         preempted(_rows((1, PV, 2), (2, PC, 2), (3, PV, 2)), [["p", 2, "degrade", None]]),
         [dict(job="p", slot=3, server="v0")], PRE),
]


def test_preempted_schedules_pay_the_costs_and_are_valid():
    """Hand-computed: the preemption costs a slot (4 lost, 2 withheld by the restart); the
    degrade/promote pair completes on CPU and V100 at the stated units."""
    from oasis_opt.model.preemption import parse_events, replay

    sched = preempted(PRE_ROWS, PRE_EVENTS)
    assert validate(PRE, sched).ok, str(validate(PRE, sched))
    assert sched.completion == (5,)
    # the same rows without the preemption would have done 14 units, done after slot 3 (4 + 4)
    assert work_done(PRE, sched.allocations).tolist() == [14]
    ledger = replay(PRE, sched.allocations, parse_events(PRE, {"events": PRE_EVENTS})[0])[0]
    assert ledger.progress.tolist() == [8.0] and ledger.withheld.tolist() == [2.0]
    jobs = sched.stats["preemption"]["jobs"]
    assert jobs["lost_work"] == [4.0] and jobs["restart_slots"] == [1]
    assert jobs["preemptions"] == [1] and jobs["degradations"] == [0]
    deg = preempted(DEG_ROWS, DEG_EVENTS)
    assert validate(PRE, deg).ok, str(validate(PRE, deg))
    ledger = replay(PRE, deg.allocations, parse_events(PRE, {"events": DEG_EVENTS})[0])[0]
    # slot 1: 4 (lost at 2); CPU: 1 + 2 (checkpoint) + 2 (saved at the promote); V100: 1 + 2
    assert ledger.progress.tolist() == [8.0]
    assert ledger.withheld.tolist() == [4.0]  # 1 on CPU, 3 on the V100
    assert deg.completion == (6,)
    assert ledger.counts["lost_work"].tolist() == [4.0]
    assert ledger.counts["restart_slots"].tolist() == [2]
    assert ledger.counts["degradations"].tolist() == [1] and ledger.counts["promotions"].tolist() == [1]


def test_every_rule_has_a_case():
    assert {c.rule for c in CASES} == set(RULES)


def test_the_base_schedule_is_valid():
    sched = schedule(VALID_ROWS)
    assert sched.completion == (2, None, None)
    report = validate(INST, sched)
    assert report.ok, str(report)
    assert str(report) == "valid"


def test_the_typed_base_schedules_are_valid():
    """Six units by type: two V100 workers in one slot complete x; y may mix V100 and K80."""
    sched = schedule(TYPED_ROWS, inst=TYPED)
    assert sched.completion == (1, None, None)
    assert validate(TYPED, sched).ok
    # y: one V100 (3) and one K80 (1) worker in slot 1, one V100 in slot 2: 3 + 1 + 3 >= 6
    rows = [(Y, 1, V100, WORKER, 1), (Y, 1, K80, WORKER, 1), (Y, 1, TP0, PS, 1),
            (Y, 2, V100, WORKER, 1), (Y, 2, TP0, PS, 1)]
    sched = schedule(rows, admitted=(False, True, False), inst=TYPED)
    assert sched.completion == (None, 2, None)
    assert validate(TYPED, sched).ok
    # the same rows for x (no span_types): only the mixed slot is wrong
    x_rows = [(X, t, s, r, c) for _, t, s, r, c in rows]
    report = validate(TYPED, schedule(x_rows, inst=TYPED))
    assert report.rules() == {"mixed-types"} and [v.slot for v in report.violations] == [1]


@pytest.mark.parametrize("case", CASES, ids=[f"{c.rule}:{c.name}" for c in CASES])
def test_a_broken_rule_is_named_where_it_breaks(case):
    report = validate(case.inst, case.sched)
    assert not report.ok
    assert report.rules() == {case.rule}, str(report)
    for where in case.where:
        assert any(all(getattr(v, k) == x for k, x in where.items()) for v in report.violations), \
            f"no [{case.rule}] violation at {where}:\n{report}"
    text = str(report)
    assert f"[{case.rule}]" in text
    for where in case.where:
        for key, value in where.items():
            if value is not None:
                assert f"{key}={value}" in text


# ---- the same rules on random instances: break a valid (greedy) schedule in one way ------------
def _mutate(inst, sched, how, job):
    rows = list(sched.allocations.rows())
    admitted, utility = list(sched.admitted), list(sched.utility)
    total = sched.total_utility
    h = int(np.flatnonzero(inst.server_speed(job) > 0)[0])  # a worker server the job can use
    if how == "total":
        total += 1.0
    elif how == "utility":
        utility[job] += 1.0
        total = math.fsum(utility)
    elif how == "horizon":  # one worker + its PS after the last slot: outside 1..T only
        rows += [(job, inst.horizon + 1, h, WORKER, 1), (job, inst.horizon + 1, inst.H, PS, 1)]
    elif how == "count":
        rows.append((job, int(inst.arrival[job]), h, WORKER, 0))
    elif how == "rejected":
        admitted[job] = False
    return Schedule(sched.policy, tuple(admitted), Allocations.from_rows(rows), sched.completion,
                    tuple(utility), total)


@given(st.one_of(instances(), hetero_instances()),
       st.sampled_from(["total", "utility", "horizon", "count", "rejected"]), st.data())
def test_mutating_a_valid_schedule_names_the_rule(inst, how, data):
    from oasis_opt import solve

    sched = solve(inst, "greedy")
    assert validate(inst, sched).ok
    used = sorted(set(sched.allocations.job.tolist()))
    candidates = used if how == "rejected" else list(range(inst.I))
    assume(candidates)
    job = data.draw(st.sampled_from(candidates))
    report = validate(inst, _mutate(inst, sched, how, job))
    assert report.rules() == {how}, str(report)
    if how != "total":
        assert {v.job for v in report.violations} == {inst.jobs[job].id}
