"""The executor's twin: the same training, replayed in this process without Ray or PSs.

``replay_training(instance, schedule, job)`` runs the job's mini-batches exactly as the executor
groups them (``plan``: per slot, synchronous iterations of the slot's workers), but averages the
whole gradients and steps the whole parameter vector at once. Sharding the vector over PSs
changes nothing (element-wise optimisers), so the executor's final parameters must equal these;
the tests hold the two against each other, with and without a killed container.
"""
from __future__ import annotations

import numpy as np

from ..model.schedule import Schedule
from .plan import iteration_sizes, job_plan


def replay_training(instance, schedule: Schedule, job: int) -> np.ndarray:
    """Final flat parameters of job ``job`` (instance index) trained as the schedule says."""
    from ..training.tasks import mean_gradients, ravel
    from .containers import _JobData

    plan = job_plan(instance, job)
    data = _JobData(plan.spec(ps=1))
    model = data.model
    flat = ravel(model.init(plan.task["seed"]))[0]
    state = model.optimizer.init(flat)
    workers = schedule.allocations.workers_per_job_slot(instance.I, instance.horizon)[job]
    done, cumulative = 0, 0
    for t in np.flatnonzero(workers).tolist():
        cumulative += int(workers[t])
        target = plan.planned_minibatches(cumulative)
        for size in iteration_sizes(target - done, int(workers[t])):
            grads = []
            for rank in range(size):
                x, y = data.batch(done + rank)
                grads.append(np.asarray(ravel(model.loss_and_grad(data.unflatten(flat), x, y)[1])[0]))
            g = mean_gradients(grads, [plan.batch_size] * size)  # numpy, as a PS averages
            flat, state = model.optimizer.step(g, state, flat)
            done += size
    return np.asarray(flat)
