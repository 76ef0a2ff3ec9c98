"""Profile a training task for real: time synchronous PS iterations at several (workers, PSs).

``profile_task(task, workers=(1, 2, 4), ps=(1, 2))`` runs the executor itself (the same
containers, the same synchronous iterations, the same busy-time measurement as ``execute``) on a
two-server profiling cluster: for every point (w, p) with p <= w, one job of the task with
``max(workers)`` data chunks gets w workers and p PSs for ``1 + repeats`` slots of ``iterations``
iterations each; the first slot (which loads the job into its containers) is discarded, each
other slot's busy time is one ``Sample``. ``costmodel.profile.fitted_profile`` fits the Optimus
speed model to the samples.
"""
from __future__ import annotations

import itertools
import os
import platform
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..costmodel.profile import Sample, SpeedProfile, fitted_profile
from ..model import Instance, Job, Server, Utility
from ..model.schedule import PS, WORKER

# A documented default per task for ``oasis-opt profile --task NAME`` without ``--config``.
DEFAULT_CONFIGS: dict[str, dict[str, Any]] = {
    "digits-mlp": {"learning_rate": 0.01, "weight_decay": 1e-4, "width": 64, "depth": 2,
                   "batch_size": 32, "optimizer": "adam"},
    "digits-cnn": {"learning_rate": 0.01, "weight_decay": 1e-4, "width": 16, "depth": 2,
                   "batch_size": 32, "optimizer": "adam"},
    "breast-cancer-mlp": {"learning_rate": 0.01, "weight_decay": 1e-4, "width": 32, "depth": 2,
                          "batch_size": 16, "optimizer": "adam"},
    "wine-mlp": {"learning_rate": 0.01, "weight_decay": 1e-4, "width": 32, "depth": 2,
                 "batch_size": 8, "optimizer": "adam"},
}
WORKER_SERVER, PS_SERVER = "profile-worker", "profile-ps"


def profile_points(workers: Sequence[int], ps: Sequence[int]) -> list[tuple[int, int]]:
    """The (w, p) points with p <= w (at most one PS per worker), sorted."""
    for name, values in (("workers", workers), ("ps", ps)):
        if not values or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1
                             for v in values):
            raise ValueError(f"{name}: expected integers >= 1, got {list(values)!r}")
    return sorted((int(w), int(p)) for w, p in itertools.product(set(workers), set(ps)) if p <= w)


def profiling_instance(task_spec: Mapping[str, Any], points: Sequence[tuple[int, int]], *,
                       iterations: int, repeats: int) -> tuple[Instance, dict[int, list]]:
    """The profiling cluster and jobs, and the rows of every slot: ``{slot: rows}``."""
    from .plan import train_size

    chunks = max(w for w, _ in points)
    batch = int(task_spec["config"]["batch_size"])
    size = train_size(task_spec["name"], task_spec.get("data_seed", 0))
    minibatches = size // (chunks * batch)
    if minibatches < 1:
        raise ValueError(f"workers: {chunks} chunks of the {size} training examples hold fewer "
                         f"than one mini-batch of {batch}")
    slots = 1 + repeats
    # x = M / iterations: one worker-slot is ``iterations`` mini-batches per worker
    chunk_time = minibatches / iterations
    demand = {"cpu": 1.0, "bw": 1.0}
    jobs, rows, t = [], {}, 0
    for n, (w, p) in enumerate(points):
        epochs = -(-(slots * w * iterations + 1) // (chunks * minibatches))  # never completes
        jobs.append(Job(f"w{w}-p{p}", t + 1, epochs, chunks, chunk_time, demand, demand,
                        Utility("constant", value=0.0), task=dict(task_spec)))
        for _ in range(slots):
            t += 1
            rows[t] = [(n, 0, WORKER, w), (n, 1, PS, p)]
    servers = (Server(WORKER_SERVER, {"cpu": float(chunks), "bw": float(chunks)}),
               Server(PS_SERVER, {"cpu": float(chunks), "bw": float(chunks)}))
    inst = Instance(t, ("cpu", "bw"), servers[:1], servers[1:], jobs)
    return inst, rows


def profile_task(task_spec: Mapping[str, Any], workers: Sequence[int] = (1, 2, 4),
                 ps: Sequence[int] = (1, 2), *, iterations: int = 40, repeats: int = 3,
                 address: str | None = None, pool=None,
                 progress: Callable[[int, int], None] | None = None,
                 on_phase: Callable[[str, float], None] | None = None) -> SpeedProfile:
    """Measure and fit the task ``task_spec`` (``{"name", "config", "seed"?, "data_seed"?}``).

    ``progress(done, total)`` is called after every slot, ``on_phase(name, seconds)`` as each
    start-up phase ends (``executor.STARTUP_PHASES``); ``pool`` (an executor
    ``ContainerPool``) keeps the containers for the next profile. ``ValueError`` names a bad
    argument.
    """
    from .executor import Executor
    from .plan import job_plan, train_size

    for name, v in (("iterations", iterations), ("repeats", repeats)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name}: expected an integer >= 1, got {v!r}")
    points = profile_points(workers, ps)
    spec = {"seed": 0, "data_seed": 0, **task_spec}
    inst, rows = profiling_instance(spec, points, iterations=iterations, repeats=repeats)
    plans = {i: job_plan(inst, i) for i in range(inst.I)}
    t0 = time.perf_counter()
    # no pacing: a slot lasts as long as its iterations (slots of 1 ms always overrun)
    with Executor(inst, slot_seconds=1e-3, address=address, plans=plans, pool=pool,
                  on_phase=on_phase) as ex:
        demand = np.array([max(points)[0], max(p for _, p in points)])
        ex.warm(demand, {i: [p] for i, (_, p) in enumerate(points)})
        for t in sorted(rows):
            ex.run_slot(t, rows[t])
            if progress is not None:
                progress(t, len(rows))
        samples = []
        for i, (w, p) in enumerate(points):
            measured = ex.job_records(i)[1:]  # the first slot loads the job: not timed
            samples += [Sample(w, p, r["iterations"], r["busy_s"]) for r in measured]
    meta = {"machine": platform.node(), "processor": platform.machine(),
            "cores": os.cpu_count() or 1,  # what the contention model shares (costmodel.profile)
            "iterations": iterations, "repeats": repeats, "address": address or "local",
            "wall_s": round(time.perf_counter() - t0, 3),
            "measured": time.strftime("%Y-%m-%dT%H:%M:%S")}
    return fitted_profile(spec, inst.jobs[0].chunks,
                          train_size(spec["name"], spec["data_seed"]), samples, meta)
