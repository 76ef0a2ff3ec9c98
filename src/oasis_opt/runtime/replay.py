"""The executor's twin: the same training, replayed in this process without Ray or PSs.

``replay_training(instance, schedule, job)`` runs the job's mini-batches exactly as the executor
groups them (``plan``: per slot, synchronous iterations of the slot's workers), but averages the
whole gradients and steps the whole parameter vector at once. Sharding the vector over PSs
changes nothing (element-wise optimisers), so the executor's final parameters must equal these;
the tests hold the two against each other, with and without a killed container. Server types and
preemption events count as in the executor (``plan.SlotProgress``): each slot its events (a stop
rolls the job back to its last checkpoint; a suspend or a promote writes one first), then its
progress at its servers' speeds.
"""
from __future__ import annotations

import numpy as np

from ..model.preemption import SAVES
from ..model.schedule import Schedule
from ..model.schedule import WORKER
from .plan import SlotProgress, iteration_sizes, job_plan, slot_events


def replay_training(instance, schedule: Schedule, job: int) -> np.ndarray:
    """Final flat parameters of job ``job`` (instance index) trained as the schedule says."""
    from ..training.tasks import mean_gradients, ravel
    from .containers import _JobData

    plan = job_plan(instance, job)
    data = _JobData(plan.spec(ps=1))
    model = data.model
    flat = ravel(model.init(plan.task["seed"]))[0]
    state = model.optimizer.init(flat)
    rows: dict[int, list] = {}
    for j, t, server, role, count in schedule.allocations.rows():
        if j == job:
            rows.setdefault(t, []).append((server, role, count))
    events = {t: [kind for j, kind in ev if j == job]
              for t, ev in slot_events(schedule, instance).items()}
    progress = SlotProgress(instance)
    done = 0
    saved = (flat, state, done)  # the last checkpoint: where a stop rolls back to
    for t in sorted(set(rows) | {t for t, kinds in events.items() if kinds}):
        for kind in events.get(t, ()):
            if kind in SAVES:  # a checkpoint written before the stop: nothing rolls back
                saved = (flat, state, done)
            progress.stop(plan, t, kind)
            flat, state, done = saved
        workers = sum(c for _, r, c in rows.get(t, ()) if r == WORKER)
        if not workers:
            continue
        credit = progress.credit(plan, rows[t], t)
        for size in iteration_sizes(credit.target - done, workers):
            grads = []
            for rank in range(size):
                x, y = data.batch(done + rank)
                grads.append(np.asarray(ravel(model.loss_and_grad(data.unflatten(flat), x, y)[1])[0]))
            g = mean_gradients(grads, [plan.batch_size] * size)  # numpy, as a PS averages
            flat, state = model.optimizer.step(g, state, flat)
            done += size
        if credit.checkpointed:
            saved = (flat, state, done)
    return np.asarray(flat)
