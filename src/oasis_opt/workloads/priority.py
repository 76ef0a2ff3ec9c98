"""A workload with priority classes and a CPU mode, from the Philly trace (priority preemption).

The Philly trace (``traces.philly_jobs``) carries no priorities; the mapping is ours [choice]:

* **user class** (``provenance.user_class``, the band of ``cluster.priority``): drawn for every
  job from ``class_mix`` (default 20 % high, 50 % mid, 30 % low) by a generator seeded by
  ``seed``, in submission order (a draw per virtual cluster, one team's quota, would be more
  faithful, but a window of a day holds only a handful of VCs, so whole classes go missing);
* **job type** (``provenance.job_type``) by the job's shape: 1 GPU and under 15 minutes ->
  ``automl`` (trial-like), >= 2 GPUs or >= 4 hours -> ``prod-train``, else ``dev``.

The jobs are the first ``max_jobs`` of the window at most ``max_hours`` long (a bound on the
horizon), mapped by ``traces.trace_instance`` (slots of ``slot_s``, utilities, the model by
GPU-time). **Load**: arrival times are divided by ``load`` (2: the same jobs arrive twice as
fast). **Cluster**: ``traces.philly_cluster(racks, servers_per_rack, ps_per_rack)`` with its
8-GPU servers as accelerator type ``p100`` (Philly's GPUs; the reference the trace's durations
were measured on) and ``cpu_per_rack`` CPU-mode servers per rack (96 vCPUs, 384 GB, 40 Gbps).
Every job can run on both: speed on ``p100`` and in CPU mode from the cost model by model family
(``costmodel.accelerators``: CPU 10-50x slower than a V100, integer speeds by
``integer_speeds``), with its CPU-mode demand (``cpu_mode_worker``).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..costmodel.accelerators import cpu_mode_worker, integer_speeds, model_family, relative_speed
from ..model import Instance, JobType, Server
from ._common import check_int, check_positive, check_seed
from .traces import (TIME_FORMAT, TraceJob, TraceMapping, _window, philly_cluster, philly_jobs,
                     trace_instance)

USER_CLASS_MIX = {"high": 0.2, "mid": 0.5, "low": 0.3}
CPU_SERVER = {"gpu": 0.0, "cpu": 96.0, "mem": 384.0, "storage": 2000.0, "bw": 40.0}
GPU_TYPE = "p100"


def job_type_of(gpus: int, duration_s: float) -> str:
    """The job type of a trace job's shape (module docstring)."""
    if gpus == 1 and duration_s < 15 * 60:
        return "automl"
    if gpus >= 2 or duration_s >= 4 * 3600:
        return "prod-train"
    return "dev"


def priority_instance(load: float = 1.0, seed: int = 0, *, start: str = "2017-11-01",
                      days: float = 2.0, max_jobs: int = 120, max_hours: float = 12.0,
                      slot_s: float = 600.0, racks: int = 2, servers_per_rack: int = 2,
                      ps_per_rack: int = 2, cpu_per_rack: int = 1, tail: int = 24,
                      class_mix: dict[str, float] | None = None) -> Instance:
    """The Philly-derived instance with priority classes and a CPU mode (module docstring)."""
    seed = check_seed(seed)
    load = check_positive("load", load)
    max_jobs = check_int("max_jobs", max_jobs, 1)
    max_hours = check_positive("max_hours", max_hours)
    cpu_per_rack = check_int("cpu_per_rack", cpu_per_rack, 0)
    mix = dict(USER_CLASS_MIX if class_mix is None else class_mix)
    if set(mix) != set(USER_CLASS_MIX) or any(not v >= 0 for v in mix.values()) \
            or not sum(mix.values()) > 0:
        raise ValueError(f"class_mix: expected shares >= 0 of {', '.join(USER_CLASS_MIX)}, "
                         f"got {mix!r}")
    t0, _ = _window(start, days)
    rows = [r for r in philly_jobs(start, days) if r.duration_s <= max_hours * 3600][:max_jobs]
    if not rows:
        raise ValueError("max_jobs: no Philly job in the window")
    names = list(USER_CLASS_MIX)
    p = np.array([mix[n] for n in names], dtype=float)
    drawn = np.random.default_rng([seed, 14]).choice(len(names), size=len(rows), p=p / p.sum())
    return _instance(rows, [names[int(k)] for k in drawn], load, seed, t0, slot_s=slot_s,
                     racks=racks, servers_per_rack=servers_per_rack, ps_per_rack=ps_per_rack,
                     cpu_per_rack=cpu_per_rack, tail=tail,
                     meta={"generator": "philly-priority", "load": load,
                           "start": t0.strftime(TIME_FORMAT), "days": days})


def _instance(rows, classes: list[str], load: float, seed: int, t0, *, slot_s: float,
              racks: int, servers_per_rack: int, ps_per_rack: int, cpu_per_rack: int,
              tail: int, meta: dict) -> Instance:
    """The typed instance of trace ``rows`` with the given user classes, arrivals / ``load``;
    ``meta`` as given (key order kept: it is part of the instance's fingerprint)."""
    jobs = [TraceJob(f"philly-{r.row:05d}", (r.submitted - t0).total_seconds() / load,
                     r.duration_s, r.gpus,
                     {"trace": "philly/philly_2017-11.csv", "row": r.row,
                      "timestamp": r.submitted.strftime(TIME_FORMAT), "virtual_cluster": r.cluster,
                      "user_class": c, "job_type": job_type_of(r.gpus, r.duration_s)})
            for r, c in zip(rows, classes)]
    workers, pss = philly_cluster(racks, servers_per_rack, ps_per_rack)
    base = trace_instance(jobs, workers, pss, seed=seed, slot_s=slot_s,
                          mapping=TraceMapping(tail=tail),
                          meta=dict(meta))
    typed_workers = tuple(replace(s, accelerator=GPU_TYPE) for s in base.worker_servers)
    cpus = tuple(Server(f"r{r:02d}-cpumode{n:02d}", dict(CPU_SERVER), f"rack-{r:02d}",
                        "cpu-mode", "cpu") for r in range(racks) for n in range(cpu_per_rack))
    out = []
    for j in base.jobs:
        family = model_family(j.provenance["model"])
        unit, speed = integer_speeds({GPU_TYPE: 1.0,
                                      "cpu": relative_speed(family, "cpu", GPU_TYPE)})
        types = {GPU_TYPE: JobType(speed[GPU_TYPE])}
        if cpus:
            types["cpu"] = JobType(speed["cpu"], cpu_mode_worker(j.worker))
        out.append(replace(j, unit=unit, types=types,
                           provenance={**j.provenance, "model_family": family}))
    return Instance(base.horizon, base.resources, typed_workers + cpus, base.ps_servers,
                    tuple(out), meta=dict(base.meta))


WAVE_ORDER = ("low", "mid", "high")


def chain_instance(seed: int = 0, *, saturation: float = 1.5, max_jobs: int = 200,
                   wave_h: float = 3.0, wave_share: float = 0.8, start: str = "2017-11-01",
                   days: float = 2.0, max_hours: float = 12.0, slot_s: float = 600.0,
                   racks: int = 2, servers_per_rack: int = 2, ps_per_rack: int = 2,
                   cpu_per_rack: int = 1, tail: int = 24) -> Instance:
    """The chain workload: the Philly jobs of ``priority_instance`` near GPU saturation, with
    priority classes arriving in waves, on which killing victims produces preemption chains.

    * **Saturation**: arrivals are divided by the load at which the offered GPU-time (the trace
      jobs' GPUs x duration) over the arrival span equals ``saturation`` x the cluster's GPUs
      (1.5: half as much work again as the GPUs can take while the jobs arrive).
    * **Waves** [choice]: the arrival time (after scaling, hours) cycles through periods of
      ``wave_h`` hours, whose thirds are a low, a mid and a high wave; a job is of its wave's
      class with probability ``wave_share``, else drawn from the default mix (20/50/30 %), by a
      generator seeded by ``seed``. Low jobs fill the GPUs, mid jobs preempt them, high jobs
      preempt the mid ones, and a requeued mid job (its wait and stops raise its priority) may
      outrank a running low one: a chain.
    * The rest (job types, the cluster with one CPU-mode server per rack, slots, utilities) as
      ``priority_instance``; ``meta`` records the load and the saturation.
    """
    seed = check_seed(seed)
    saturation = check_positive("saturation", saturation)
    wave_h = check_positive("wave_h", wave_h)
    max_jobs = check_int("max_jobs", max_jobs, 1)
    max_hours = check_positive("max_hours", max_hours)
    cpu_per_rack = check_int("cpu_per_rack", cpu_per_rack, 0)
    if not (isinstance(wave_share, (int, float)) and 0 <= wave_share <= 1):
        raise ValueError(f"wave_share: must be in [0, 1], got {wave_share!r}")
    t0, _ = _window(start, days)
    rows = [r for r in philly_jobs(start, days) if r.duration_s <= max_hours * 3600][:max_jobs]
    if len(rows) < 2:
        raise ValueError("max_jobs: fewer than two Philly jobs in the window")
    offsets = np.array([(r.submitted - t0).total_seconds() for r in rows])
    span = max(float(offsets.max() - offsets.min()), slot_s)
    gpus = racks * servers_per_rack * 8.0  # philly_cluster's 8-GPU servers
    offered = sum(r.gpus * r.duration_s for r in rows) / (span * gpus)
    load = saturation / offered
    rng = np.random.default_rng([seed, 31])
    names = list(USER_CLASS_MIX)
    mix = np.array([USER_CLASS_MIX[n] for n in names])
    classes = []
    for off in offsets:
        phase = ((off / load / 3600.0) % wave_h) / wave_h
        wave = WAVE_ORDER[min(int(phase * 3), 2)]
        other = names[int(rng.choice(len(names), p=mix))]
        classes.append(wave if rng.random() < wave_share else other)
    return _instance(rows, classes, load, seed, t0, slot_s=slot_s, racks=racks,
                     servers_per_rack=servers_per_rack, ps_per_rack=ps_per_rack,
                     cpu_per_rack=cpu_per_rack, tail=tail,
                     meta={"generator": "philly-chains", "load": load, "saturation": saturation,
                           "wave_h": wave_h, "wave_share": wave_share, "days": days,
                           "start": t0.strftime(TIME_FORMAT)})


def philly_priority(seed: int = 0, *, load: float = 1.0, max_jobs: int = 120,
                    slot_s: float = 600.0, racks: int = 2, servers_per_rack: int = 2,
                    cpu_per_rack: int = 1) -> Instance:
    """``priority_instance(load, seed, ...)`` with the seed first: the ``philly-priority``
    preset of ``workloads.generate``."""
    return priority_instance(load, seed, max_jobs=max_jobs, slot_s=slot_s, racks=racks,
                             servers_per_rack=servers_per_rack, cpu_per_rack=cpu_per_rack)


# ---- degrade-real: the smallest instance on which priority-degrade degrades and promotes -------
DEGRADE_REAL_TASK = {"name": "digits-mlp", "config": {
    "learning_rate": 0.01, "weight_decay": 1e-4, "width": 16, "depth": 1, "batch_size": 128,
    "optimizer": "adam"}}
DEGRADE_REAL_COSTS = {"checkpoint_slots": 3, "restart_slots": 1.0}
DEGRADE_REAL_FAMILY = "lm"  # CPU mode 10x slower than a V100 (costmodel.accelerators)


def degrade_real(seed: int = 0) -> Instance:
    """The ``degrade-real`` preset: degradation to CPU and promotion back, small enough to run
    for real (``oasis-opt execute``, slots of a fraction of a second).

    **Cluster**: one "GPU" server ``gpu0`` (accelerator ``v100``, 4 GPUs), one CPU-mode server
    ``cpu0`` (accelerator ``cpu``) and one PS server ``ps0``. On a machine without GPUs the
    "GPU" server is a logical server of the testbed: the executor runs every container on the
    CPU, and the server types only set the speeds the schedule credits.

    **Jobs** (``digits-mlp``, one chunk of 8 mini-batches of 128 examples, x = 0.8; with the
    ``lm`` family's speeds, V100 10 and CPU 1 work units per worker-slot, u = 10, one work unit
    is one mini-batch): ``low`` (low user class, ``automl``, arrives in slot 1, 6 epochs: W = 48
    units) and ``high`` (high class, ``prod-train``, arrives in slot 5, 2 epochs: W = 16). Both
    take one worker of all 4 GPUs (16 vCPUs in CPU mode) and one PS. **Costs**
    (``meta.preemption``): a checkpoint every 3 slots with workers since the last (re)start, a
    restart of one whole slot (the first slot with workers after a stop is credited nothing).

    Under ``priority-degrade`` with ``cap=1`` (the default cap, 25 % of the 4 GPUs, cannot free
    a 4-GPU worker): ``low`` trains on the GPU server in slots 1-4 (40 units; the checkpoint at
    the end of slot 3 holds 30); ``high`` arrives in slot 5 and degrades ``low`` to the CPU
    server, which loses the 10 unsaved units; slot 5 is its restart (0 units), slot 6 gives 1
    unit at the CPU speed (31); ``high`` trains in slots 5-6 and completes, so ``low`` is
    promoted in slot 7, writing a checkpoint first (it keeps its 31 units; 10 lost in all);
    its restart on the GPU server takes the restart and the write (1 + 1.9 s / 3600 s slots):
    slot 7 gives 0 units, slot 8 floor(10 x (1 - 1.9 / 3600)) = 9, slot 9 the last 8:
    completion 9. ``seed`` sets the tasks' seeds only.
    """
    from ..model import Job, Utility

    seed = check_seed(seed)
    unit, speeds = integer_speeds({"v100": 1.0,
                                   "cpu": relative_speed(DEGRADE_REAL_FAMILY, "cpu", "v100")})
    gpu = {"gpu": 4.0, "cpu": 16.0, "mem": 64.0, "storage": 100.0, "bw": 40.0}
    worker = {"gpu": 4.0, "cpu": 2.0, "mem": 4.0, "storage": 1.0, "bw": 5.0}
    ps = {"cpu": 1.0, "mem": 1.0, "storage": 1.0, "bw": 5.0}
    types = {"v100": JobType(speeds["v100"]),
             "cpu": JobType(speeds["cpu"], cpu_mode_worker(worker))}
    jobs = tuple(
        Job(jid, arrival, epochs, 1, 0.8, dict(worker), dict(ps), Utility.sigmoid(10.0, 0.5, 8.0),
            None, {"user_class": user, "job_type": kind, "model": DEGRADE_REAL_FAMILY},
            unit=unit, types=dict(types),
            task={**DEGRADE_REAL_TASK, "seed": seed + n, "data_seed": 0})
        for n, (jid, arrival, epochs, user, kind) in enumerate(
            (("low", 1, 6, "low", "automl"), ("high", 5, 2, "high", "prod-train"))))
    workers = (Server("gpu0", gpu, rack="r0", accelerator="v100"),
               Server("cpu0", dict(CPU_SERVER), rack="r0", accelerator="cpu"))
    pss = (Server("ps0", {"gpu": 0.0, "cpu": 16.0, "mem": 64.0, "storage": 100.0,
                          "bw": 100.0}, rack="r0"),)
    return Instance(14, ("gpu", "cpu", "mem", "storage", "bw"), workers, pss, jobs,
                    meta={"generator": "degrade-real", "seed": seed,
                          "preemption": dict(DEGRADE_REAL_COSTS)})
