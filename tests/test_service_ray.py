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


def test_the_service_trains_submitted_jobs_on_ray(tmp_path):
    """Every planned mini-batch trained, and learning: an executor whose PSs drop the workers'
    gradients (an untrained network, still 0 < accuracy <= 1) fails here."""
    from oasis_opt.model.io import instance_to_dict
    from oasis_opt.runtime.executor import Executor

    inst = cluster_and_jobs()
    pricing = oracle_pricing(inst)
    store = Store(tmp_path / "state.db")
    sched = Scheduler(inst, lambda: get_policy("oasis", pricing=pricing), store=store,
                      policy="oasis", executes=True)
    for doc in instance_to_dict(inst)["jobs"]:
        sched.submit(doc)
    runner = ServiceRunner(sched, 1.0, execute=True).start()
    try:
        for _ in range(1200):  # bounded: Ray's start-up, then 5 slots
            if runner.status in ("finished", "failed"):
                break
            time.sleep(0.25)
    finally:
        runner.stop()
    assert runner.status == "finished", runner.error
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
