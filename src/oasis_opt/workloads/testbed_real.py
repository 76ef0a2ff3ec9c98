"""A testbed that trains for real on this machine: the paper's testbed (Figs. 8-9) scaled to Ray.

The paper's testbed ran 12 MXNet jobs on 9 hosts in 20-minute slots. Here the logical cluster is
sized to a 2-core machine and its jobs are real training tasks (``oasis_opt.automl``) whose chunk
times come from measured speed profiles (``oasis-opt profile``), so a schedule of it can be run
by the executor in slots of a few seconds and its real progress compared with the plan:

- 2 worker servers and 1 PS server of 2 cores each (``{"cpu": 2, "mem": 8, "storage": 100,
  "bw": 10}``, no GPU); a worker container takes 1 core and 1 Gbps (b_i = 1), a PS 1 core and
  2 Gbps (B_i = 2), 1 GB of memory and storage each: at most 4 workers and 2 PSs at once, one PS
  per two workers (constraint (6)).
- ``jobs`` jobs (default 8) arriving uniformly in the first 60 % of the ``horizon`` slots
  (default 10) of ``slot_s`` seconds (default 4). Each draws a profile (uniformly over
  ``profiles``: its task and config, with the job's own seed) and N_i in {2, 3, 4} data chunks
  (one fewer when a chunk would hold no mini-batch).
- Chunk time from the profile, the testbed preset's derivation with measured speed: k_i = N_i
  workers (all fit alone) and p_i = ceil(k_i / 2) PSs, t_i seconds per iteration, M_i
  mini-batches per chunk pass, so x_i = M_i t_i / slot_s worker-slots per chunk. ``speed``
  chooses t_i: ``"contention"`` (default) the contention-aware model fitted on the profile
  (``costmodel.profile``, ``optimus-shared``) at the job's own (k_i, p_i) in a full slot, W = 4
  workers and P = 2 PSs (the cluster's capacity: the policies pack it, so most slots run full)
  on ``cores`` cores (default 2, the machine the preset is sized for; a profile measured on
  other cores is rescaled by its ``meta.cores``); ``"own"`` the per-job model t(k_i, p_i), the
  job alone on the machine (the preset's behaviour before the contention model). A target
  duration D_i ~ U[2, 4] slots alone gives E_i =
  max(1, round(D_i k_i / (N_i x_i))) epochs.
- Utilities as in the paper's simulations (class mix, gamma1 ~ U[1, 100], gamma3 ~ U[1, 15]).
- ``slowdown`` c (default 1): the correction an execution suggests (``ExecutionReport.slowdown``,
  the median real / predicted busy time) or a calibration measures on the machine as it is now
  (``runtime.calibrate``, ``oasis-opt calibrate``: a high quantile of real / predicted over a
  short real run, so that the plan's slots hold their work under the load of the moment):
  chunk times become c x_i with everything else as drawn (the same jobs, planned at the speed
  they really run at).

**Slots long against their overheads** (measured with ``ExecutionReport.overhead_shares``:
the restart, i.e. loading a job into new containers, plus the per-slot checkpoint, summed over
a slot's jobs, over the slot's length). In real runs of this preset on the 2-core machine under
foreign load (1-minute load 5-17, three runs of 8 slots), the largest share was 4.7 % of a 2 s
slot (0.094 s; mean 0.6-1.7 %), so at most 2.4 % of the default 4 s slot; in the 0.5 s slots of the quick
reproduction at load 14, at most 5.3 %. All under 10 %, so the default sizes stand. Start-up
(Ray 15-34 s, containers 15-24 s, compilation 25-38 s) is paid before slot 1, not in a slot: the
containers are created and compiled first and stay warm across slots.

A job's ``provenance`` records M_i, t_i, (k_i, p_i), the slot length, the profile's fitted
``speed_model`` (per job) and ``contention_model`` (its θ and the ``cores`` it was planned for),
so the executor can put the profiles' predictions beside the chunk-time model's.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..costmodel.profile import SPEED_MODEL, THETA, SpeedProfile, shared_iteration_time
from ..model import JOB_CLASSES, Instance, Job, Server
from ._common import (DEFAULT_CLASS_MIX, check_choice, check_class_mix, check_int, check_interval,
                      check_positive, check_seed, job_ids, sample_utilities, tie_order)
from ..model.numerics import WORK_EPS

RESOURCES = ("gpu", "cpu", "mem", "storage", "bw")
SERVER_CAPACITY = {"gpu": 0.0, "cpu": 2.0, "mem": 8.0, "storage": 100.0, "bw": 10.0}
WORKER_DEMAND = {"cpu": 1.0, "mem": 1.0, "storage": 1.0, "bw": 1.0}
PS_DEMAND = {"cpu": 1.0, "mem": 1.0, "storage": 1.0, "bw": 2.0}
CHUNK_CHOICES = (2, 3, 4)
DURATION_SLOTS = (2.0, 4.0)
ARRIVAL_SHARE = 0.6
SPEEDS = ("contention", "own")
MACHINE_CORES = 2  # the machine the preset is sized for
FULL_SLOT = (4, 2)  # the cluster's capacity in workers and PSs


def testbed_real_servers() -> tuple[tuple[Server, ...], tuple[Server, ...]]:
    workers = tuple(Server(f"w-{n:02d}", dict(SERVER_CAPACITY), "rack-0") for n in range(2))
    return workers, (Server("ps-00", dict(SERVER_CAPACITY), "rack-0"),)


def testbed_real(seed: int, *, profiles: Sequence[SpeedProfile] = (), jobs: int = 8,
                 horizon: int = 10, slot_s: float = 4.0, slowdown: float = 1.0,
                 speed: str = "contention", cores: int = MACHINE_CORES,
                 class_mix=DEFAULT_CLASS_MIX, priority=(1.0, 100.0)) -> Instance:
    """The real testbed's instance for ``seed`` (module docstring); ``profiles`` required."""
    speed = check_choice("speed", speed, SPEEDS)
    cores = check_int("cores", cores, 1)
    seed = check_seed(seed)
    profiles = tuple(profiles)
    if not profiles or not all(isinstance(p, SpeedProfile) for p in profiles):
        raise ValueError("profiles: the testbed-real preset needs at least one speed profile "
                         "(make one with `oasis-opt profile`)")
    n = check_int("jobs", jobs, 1)
    horizon = check_int("horizon", horizon, 2)
    slot_s = check_positive("slot_s", slot_s)
    slowdown = check_positive("slowdown", slowdown)
    class_mix = check_class_mix(class_mix)
    priority = check_interval("priority", priority)
    contention = [p.contention_model(cores) for p in profiles]
    r_arr, r_job, r_util, r_ord = np.random.default_rng(seed).spawn(4)
    arrival = r_arr.integers(1, max(1, math.ceil(ARRIVAL_SHARE * horizon)) + 1, size=n)
    classes, utilities = sample_utilities(r_util, n, class_mix, priority)
    which = r_job.integers(0, len(profiles), size=n)
    chunk_draw = r_job.integers(0, len(CHUNK_CHOICES), size=n)
    duration = r_job.uniform(*DURATION_SLOTS, size=n)
    job_seed = r_job.integers(0, 2**31 - 1, size=n)
    bw_ratio = WORKER_DEMAND["bw"] / PS_DEMAND["bw"]
    ids = job_ids(n)
    order = tie_order(r_ord, arrival)
    out = []
    for new, i in enumerate(order.tolist()):
        prof = profiles[which[i]]
        chunks = CHUNK_CHOICES[chunk_draw[i]]
        while chunks > 1 and prof.minibatches(chunks) < 1:
            chunks -= 1
        minibatches = prof.minibatches(chunks)
        if minibatches < 1:
            raise ValueError(f"profiles: {prof.task['name']!r} has fewer training examples "
                             f"({prof.train_size}) than one mini-batch of {prof.batch_size}")
        workers = chunks
        ps = max(1, math.ceil(workers * bw_ratio - WORK_EPS))
        shared = contention[which[i]]
        if speed == "contention":
            t_iter = float(shared_iteration_time(shared["theta"], workers, ps, *FULL_SLOT, cores))
        else:
            t_iter = float(prof.iteration_time(workers, ps))
        chunk_time = minibatches * t_iter / slot_s
        epochs = max(1, round(duration[i] * workers / (chunks * chunk_time)))
        chunk_time *= slowdown
        task = {**prof.task, "seed": int(job_seed[i])}
        provenance = {"minibatches": minibatches, "iteration_s": t_iter, "slowdown": slowdown,
                      "reference_workers": workers, "reference_ps": ps, "slot_s": slot_s,
                      "target_duration_slots": float(duration[i]),
                      "speed_model": {"kind": SPEED_MODEL,
                                      "theta": {k: prof.theta[k] for k in THETA}},
                      "contention_model": {"kind": shared["kind"], "theta": shared["theta"],
                                           "cores": cores}, "speed": speed}
        out.append(Job(ids[new], int(arrival[i]), int(epochs), int(chunks), float(chunk_time),
                       dict(WORKER_DEMAND), dict(PS_DEMAND), utilities[i],
                       job_class=JOB_CLASSES[int(classes[i])], provenance=provenance, task=task))
    workers_, pss = testbed_real_servers()
    meta = {"generator": "testbed-real", "seed": seed, "slot_s": slot_s, "slowdown": slowdown,
            "speed": speed, "cores": cores,
            "profiles": [p.task["name"] for p in profiles], "class_mix": list(class_mix),
            "priority": list(priority)}
    return Instance(horizon, RESOURCES, workers_, pss, tuple(out), meta=meta)



testbed_real.__test__ = False  # not a pytest test, though its name starts with "test"
