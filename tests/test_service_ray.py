"""The service end to end on a real local Ray: two digits jobs submitted, decided by OASiS slot by
slot, trained by the executor's parameter-server containers; the state holds every slot's real
progress and checkpoints, and a checkpoint restores into a fresh executor.

Slots are one second; nothing asserts on time: the run is awaited by polling the runner's status a
bounded number of times, and what is checked is the executor's promise (real mini-batches equal
the planned ones) and the simulator's decisions.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from oasis_opt.model import Instance, Job, Server, Utility
from oasis_opt.online.pricing import oracle_pricing
from oasis_opt.policies import get_policy
from oasis_opt.service.runner import ServiceRunner
from oasis_opt.service.scheduler import Scheduler
from oasis_opt.service.store import Store
from oasis_opt.sim.core import simulate

pytestmark = pytest.mark.ray
ray = pytest.importorskip("ray")

CONFIG = {"learning_rate": 0.01, "weight_decay": 1e-4, "width": 16, "depth": 1,
          "batch_size": 32, "optimizer": "adam"}


def cluster_and_jobs():
    cap = {"cpu": 2.0, "mem": 8.0, "bw": 10.0}
    dem = {"cpu": 1.0, "mem": 1.0, "bw": 1.0}
    u = Utility.sigmoid(10.0, 1.0, 3.0)
    # E N x = 2 * 4 * 0.5 = 4 and 1 * 4 * 0.5 = 2 worker-slots: done in a few slots
    jobs = (Job("a", 1, 2, 4, 0.5, dem, dem, u, task={"name": "digits-mlp", "config": CONFIG,
                                                      "seed": 1}),
            Job("b", 2, 1, 4, 0.5, dem, dem, u, task={"name": "digits-mlp", "config": CONFIG,
                                                      "seed": 2}))
    inst = Instance(5, ("cpu", "mem", "bw"), (Server("w0", cap), Server("w1", cap)),
                    (Server("p0", cap),), jobs)
    return inst


def run_to_the_end(sched: Scheduler, inst, polls: int) -> None:
    """Submit ``inst``'s jobs, run the slots on Ray (slots of 1 s) until the runner finishes,
    polled at most ``polls`` times."""
    from oasis_opt.model.io import instance_to_dict

    for doc in instance_to_dict(inst)["jobs"]:
        sched.submit(doc)
    runner = ServiceRunner(sched, 1.0, execute=True).start()
    try:
        for _ in range(polls):
            if runner.status in ("finished", "failed"):
                break
            time.sleep(0.25)
    finally:
        runner.stop()
    assert runner.status == "finished", runner.error


def test_the_service_trains_submitted_jobs_on_ray(tmp_path):
    """Every planned mini-batch trained, and learning: an executor whose PSs drop the workers'
    gradients (an untrained network, still 0 < accuracy <= 1) fails here."""
    from oasis_opt.runtime.executor import Executor

    inst = cluster_and_jobs()
    pricing = oracle_pricing(inst)
    store = Store(tmp_path / "state.db")
    sched = Scheduler(inst, lambda: get_policy("oasis", pricing=pricing), store=store,
                      policy="oasis", executes=True)
    run_to_the_end(sched, inst, polls=1200)  # Ray's start-up, then 5 slots
    assert not ray.is_initialized()  # the runner's executor shut its Ray down

    ref = simulate(inst, get_policy("oasis", pricing=pricing))
    views = sched.jobs_view()
    assert [v["admitted"] for v in views] == list(ref.admitted) == [True, True]
    assert [v["completion"] for v in views] == list(ref.completion)
    for v, job in zip(views, inst.jobs):
        real = v["real"]
        # 1,078 digits examples / (4 chunks x 32) = 8 mini-batches a chunk; E N M of them
        assert real["minibatches"] == real["planned_minibatches"] == job.epochs * 4 * 8
        assert real["restarts"] == 0
        assert real["slots"] == len({r["slot"] for r in v["plan"]} & set(range(1, 6)))
    checkpoints = store.checkpoints()
    assert sorted(checkpoints) == [0, 1]
    assert all(c["done"] == 8 * inst.jobs[j].epochs * 4 for j, c in checkpoints.items())
    # the jobs learned: digits has 10 classes (chance 0.1); the stored models' loss fell by a
    # quarter from the untrained one, and their accuracy is the one the service reports
    from oasis_opt.training.tasks import get_task, ravel

    task = get_task("digits-mlp")
    data, model = task.split(0), task.model(CONFIG)
    unflatten = ravel(model.init(0))[1]
    for j, v in enumerate(views):
        untrained = model.evaluate(model.init(inst.jobs[j].task["seed"]), data.x_val, data.y_val)
        acc, loss = model.evaluate(unflatten(checkpoints[j]["flat"]), data.x_val, data.y_val)
        assert v["real"]["val_accuracy"] == pytest.approx(float(acc), abs=1e-6)
        assert float(acc) > 4 / task.classes
        assert float(loss) < 0.75 * float(untrained[1])

    # a restarted service trains on from the stored checkpoint: it restores exactly
    with Executor(inst, slot_seconds=1.0) as ex:
        ex.restore(0, checkpoints[0])
        np.testing.assert_array_equal(ex.final_params(0), checkpoints[0]["flat"])
        assert ex.snapshot(0)["completion_slot"] == views[0]["completion"]


def test_the_closed_loop_service_credits_what_the_executor_measured(tmp_path):
    """``oasis-opt serve``'s default with an executor: slots time-boxed, each credited the
    progress the executor measured (``Scheduler(closed_loop=True)``). On a real Ray (the first
    slot of each job also starts and compiles its containers, so a job may fall behind and be
    re-planned): every job completes with every one of its E N M mini-batches trained once, its
    completion slot the one the executor completed it in, the credits stored per slot sum to
    its W_i, each job-slot the state says fell behind got less than its rows promised, and the
    stored schedule is valid. Bugs caught: a service that credits the plan (a completion before
    the executor's when a job fell behind, as the first slot's start-up makes it here), a runner
    that hands the scheduler no measured progress (the run fails), credits that do not add up
    to the job's work."""
    from oasis_opt.model import validate
    from oasis_opt.service.scheduler import stored_schedule

    base = cluster_and_jobs()
    inst = Instance(8, base.resources, base.servers[:2], base.servers[2:], base.jobs)
    pricing = oracle_pricing(inst)
    store = Store(tmp_path / "state.db")
    sched = Scheduler(inst, lambda: get_policy("oasis", pricing=pricing), store=store,
                      policy="oasis", executes=True, closed_loop=True)
    run_to_the_end(sched, inst, polls=1600)  # Ray's start-up, then at most 8 slots
    views = sched.jobs_view()
    records = store.slot_records()
    assert all("closed_loop" in rec for rec in records.values())
    credit: dict[int, float] = {}
    for t, rec in records.items():
        for j, c in rec["closed_loop"]["credit"].items():
            credit[int(j)] = credit.get(int(j), 0.0) + c
        for b in rec["closed_loop"]["behind"]:
            promised = sum(c for j, _, r, c in store.slot_rows(t) if j == b["job"] and r == 0)
            assert b["measured"] < b["model"] == promised
    for j, (v, job) in enumerate(zip(views, inst.jobs)):
        assert v["state"] == "completed", v
        real = v["real"]
        assert real["minibatches"] == job.epochs * 4 * 8  # E N M, each trained once
        assert credit[j] == pytest.approx(job.work)
        final = store.progress()[j][-1]
        assert v["completion"] == final["completion_slot"]
    summary = sched.summary()
    assert summary["loop"] == "closed" and summary["replans"] == len(sched.replans)
    assert summary["behind"] == sum(len(r["closed_loop"]["behind"]) for r in records.values())
    stored_inst, stored = stored_schedule(store)
    assert validate(stored_inst, stored).ok
    assert list(stored.completion) == [v["completion"] for v in views]
    print("closed loop on Ray: behind", summary["behind"], "replans", summary["replans"],
          "completions", [v["completion"] for v in views])
