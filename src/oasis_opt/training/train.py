"""Real training of one trial, recording its learning curve.

``train_trial(task, config, epochs, seed)`` trains the task's model with the configuration's
optimiser on the train split (mini-batches of ``batch_size`` drawn from a fresh permutation every
epoch; the last incomplete batch is dropped, so every step compiles to one shape) and evaluates on
the validation split after every epoch. Recorded per epoch: validation accuracy (rounded to 6
decimals), validation loss (6 decimals) and the wall time of the epoch (training steps plus
evaluation, rounded to 0.1 ms; compilation happens before the first epoch and is not counted).

Determinism: the split depends on ``data_seed`` only, the initial weights and the batch order on
``seed`` only; on one machine the same arguments give the same accuracies and losses (tested).
"""
from __future__ import annotations

import time
from typing import Any, Mapping

from .tasks import Split, Task, get_task  # first: without jax it names the automl extra

import jax
import numpy as np

from .curves import Curve


def epoch_batches(split: Split, batch_size: int, rng: np.random.Generator):
    """Index arrays of one epoch's batches: a permutation of the train set cut into
    ``len(train) // batch_size`` batches (the remainder is dropped)."""
    n = len(split.y_train)
    steps = n // batch_size
    return rng.permutation(n)[:steps * batch_size].reshape(steps, batch_size)


def train_trial(task: Task | str, config: Mapping[str, Any], epochs: int, seed: int, *,
                data_seed: int = 0, split: Split | None = None) -> Curve:
    """Train ``config`` for ``epochs`` epochs; the curve has ``study = task.name``, ``trial = 0``.

    ``split`` (optional) is ``task.split(data_seed)`` computed once by a caller running many
    trials. ``ValueError`` names a bad argument (``config.<name>``, ``epochs``, ...).
    """
    task = get_task(task) if isinstance(task, str) else task
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs: expected an integer >= 1, got {epochs!r}")
    model = task.model(config)
    split = task.split(data_seed) if split is None else split
    batch = model.config["batch_size"]
    if batch > len(split.y_train):
        raise ValueError(f"config.batch_size: {batch} exceeds the {len(split.y_train)} training "
                         "examples")
    params = model.init(seed)
    state = model.optimizer.init(params)
    rng = np.random.default_rng(seed)
    # compile the step and the evaluation outside the timed epochs (results discarded)
    jax.block_until_ready(model.train_step(params, state, split.x_train[:batch],
                                           split.y_train[:batch]))
    jax.block_until_ready(model.evaluate(params, split.x_val, split.y_val))

    accuracy, loss, seconds = [], [], []
    for _ in range(epochs):
        start = time.perf_counter()
        for idx in epoch_batches(split, batch, rng):
            params, state, _ = model.train_step(params, state, split.x_train[idx],
                                                split.y_train[idx])
        acc, val_loss = model.evaluate(params, split.x_val, split.y_val)
        acc, val_loss = float(acc), float(val_loss)  # waits for the device
        seconds.append(round(time.perf_counter() - start, 4))
        accuracy.append(round(acc, 6))
        loss.append(round(val_loss, 6))
    return Curve(task.name, 0, dict(model.config), tuple(accuracy), tuple(loss), tuple(seconds))
