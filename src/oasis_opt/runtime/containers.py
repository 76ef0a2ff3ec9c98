"""The containers of a logical server: Ray actors that act as a worker or a PS of one job.

A ``Container`` is created on the Ray node that provides its server's custom resource
(``server:<id>``) and holds one unit of it. Between slots the executor reassigns it (to another
job, another role, or the same job with other counts): the process, its imported libraries and
its compiled kernels stay warm, the training state does not (it comes from the job's checkpoint).

- worker: ``gradient(n0, *shards)`` -> the gradient of the mean loss on the job's mini-batch
  ``n0 + rank`` (``plan.minibatch_indices``), cut into the PS shards (one return value per PS).
  The parameters are the PS shards of the previous iteration, passed as Ray object references,
  so a worker *pulls* them from the PSs and *pushes* its gradient shards to them.
- PS: holds ``flat[b[j]:b[j+1]]`` and its optimiser state; ``step(*grads)`` averages the shards
  of the iteration's workers (``mean_gradients``: equal batches, equal weights) and takes one
  optimiser step (element-wise, so a shard steps as the whole vector would); returns the new
  shard and an acknowledgement, the number of gradients it averaged.

``assign_worker`` and ``assign_ps`` return ``(server, node)``: the id of the logical server the
container holds (the ``server:<id>`` resource Ray assigned it) and the id of the Ray node it runs
on, so the executor reports where its containers really ran (on a cluster, which machine).

The jitted kernels live at module level in ``oasis_opt.training.tasks``, so a process compiles each
architecture and shard size once, whatever the jobs it serves.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any, Mapping

import numpy as np

from .plan import minibatch_indices


class _JobData:
    """A job's data and model inside a container (cached per task spec)."""

    def __init__(self, spec: Mapping[str, Any]):
        from ..training.tasks import get_task, ravel

        task = get_task(spec["name"])
        self.split = task.split(spec["data_seed"])
        self.model = task.model(spec["config"])
        self.seed, self.chunks = spec["seed"], spec["chunks"]
        self.minibatches = spec["minibatches"]
        self.batch_size = self.model.config["batch_size"]
        self.chunk_bounds = self.split.chunk_bounds(self.chunks)
        flat, self.unflatten = ravel(self.model.init(self.seed))
        self.size = int(flat.size)

    def batch(self, n: int):
        idx = minibatch_indices(n, seed=self.seed, chunks=self.chunks,
                                minibatches=self.minibatches, batch_size=self.batch_size,
                                chunk_bounds=self.chunk_bounds)
        return self.split.x_train[idx], self.split.y_train[idx]


def _key(spec: Mapping[str, Any]) -> str:
    return json.dumps({k: spec[k] for k in ("name", "config", "seed", "data_seed", "chunks",
                                             "minibatches")}, sort_keys=True)


class Container:
    """One container (see the module docstring). Methods run one at a time, in call order."""

    def __init__(self):
        self._jobs: dict[str, _JobData] = {}
        self.role: str | None = None
        self.job: _JobData | None = None
        self.bounds: np.ndarray | None = None
        self.shard = self.state = None
        self.steps = 0

    def ping(self) -> int:
        return os.getpid()

    def server(self) -> str | None:
        """The logical server whose ``server:<id>`` resource this container holds (None outside
        Ray or without one)."""
        try:
            import ray

            held = ray.get_runtime_context().get_assigned_resources()
        except Exception:  # noqa: BLE001 - not inside a Ray actor
            return None
        ids = [name.split(":", 1)[1] for name in held if name.startswith("server:")]
        return ids[0] if len(ids) == 1 else None

    def where(self) -> tuple[str | None, str | None]:
        """``(server(), the id of the Ray node this container runs on)``; None outside Ray."""
        try:
            import ray

            node = ray.get_runtime_context().get_node_id()
        except Exception:  # noqa: BLE001 - not inside a Ray actor
            node = None
        return self.server(), node

    def _data(self, spec) -> _JobData:
        key = _key(spec)
        if key not in self._jobs:
            self._jobs[key] = _JobData(spec)
        return self._jobs[key]

    def warm(self, specs: list[dict], ps_counts: list[list[int]]) -> float:
        """Load the data and compile the kernels of ``specs``: a gradient on one batch, and the
        optimiser step on every shard size of each PS count in ``ps_counts[n]`` (none for a
        container of a worker server). Returns the seconds it took."""
        import jax

        from ..training.shards import shard_bounds
        from ..training.tasks import ravel

        t0 = time.perf_counter()
        for spec, counts in zip(specs, ps_counts):
            job = self._data(spec)
            params = job.model.init(job.seed)
            x, y = job.batch(0)
            _, grads = job.model.loss_and_grad(params, x, y)
            flat = np.asarray(ravel(grads)[0])
            sizes = {int(n) for ps in counts for n in np.diff(shard_bounds(job.size, ps))}
            for n in sorted(sizes):
                shard = flat[:n]
                state = jax.tree.map(np.asarray, job.model.optimizer.init(shard))  # as sent
                jax.block_until_ready(job.model.optimizer.step(shard, state, shard))
        return time.perf_counter() - t0

    # ---- worker ----------------------------------------------------------------------------
    def assign_worker(self, spec: dict) -> tuple[str | None, str | None]:
        from ..training.shards import shard_bounds

        self.role, self.job = "worker", self._data(spec)
        self.bounds = shard_bounds(self.job.size, spec["ps"])
        self.shard = self.state = None
        return self.where()

    def gradient(self, n: int, *shards: np.ndarray):
        """Gradient shards of mini-batch ``n`` at the parameters ``concat(shards)``."""
        from ..training.tasks import ravel

        job = self.job
        x, y = job.batch(n)
        _, grads = job.model.loss_and_grad(job.unflatten(np.concatenate(shards)), x, y)
        flat = np.asarray(ravel(grads)[0])
        parts = tuple(flat[lo:hi] for lo, hi in zip(self.bounds[:-1], self.bounds[1:]))
        return parts if len(parts) > 1 else parts[0]

    # ---- PS --------------------------------------------------------------------------------
    def assign_ps(self, spec: dict, shard: np.ndarray,
                  state: Any) -> tuple[str | None, str | None]:
        import jax.numpy as jnp

        self.role, self.job = "ps", self._data(spec)
        self.shard = jnp.asarray(shard)
        self.state = state
        self.steps = 0
        return self.where()

    def step(self, *grads: np.ndarray):
        """Average the workers' gradient shards, one optimiser step: (new shard, the number of
        gradients averaged)."""
        from ..training.tasks import mean_gradients

        g = mean_gradients(list(grads), [self.job.batch_size] * len(grads))
        self.shard, self.state = self.job.model.optimizer.step(g, self.state, self.shard)
        self.steps += 1
        return np.asarray(self.shard), len(grads)

    def checkpoint(self):
        """(shard, optimiser state) as numpy, for the job's checkpoint."""
        import jax

        return np.asarray(self.shard), jax.tree.map(np.asarray, self.state)
