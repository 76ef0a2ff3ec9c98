"""The paper's 9-server testbed workload (section 14 of the reference; p.9), as an instance.

What the paper states, and how each number is used:
- 7 worker hosts (32 cores, 80 GB RAM, 600 GB storage; 4 GPUs in total, over 4 of them: hosts
  0-3 get one GPU each) and 2 PS hosts (8 cores, 32 GB, 1.5 TB). Every server has a dual-port
  10GbE NIC: 20 Gbps each (the 1GbE ports we take as management). All 9 hosts share one rack.
- 10 slots of 20 minutes (slot_s = 1200); 12 jobs arriving in the first 9 slots (uniform on 1..9).
- 6 models (AlexNet, ResNet-50/101/152, VGG-11, Inception-BN), drawn uniformly per job; the
  gradient size e_i is the fp32 parameter size (standard parameter counts x 4 bytes) [choice].
- 200 images in chunks of 20 or 30 images, mini-batches of 10 images: N_i = ceil(200 / c) = 10
  or 7 chunks, M_i = c / 10 = 2 or 3 mini-batches.
- E_i uniform on 4..30.
- Containers: 0-1 GPU, 1-5 CPU cores, 2-10 GB memory, 1-3 Gbps bandwidth (integers except the
  bandwidth); storage is not given, U[5, 10] GB as in the simulations. b_i, B_i are two draws
  from U[1, 3], the smaller one for the worker, so b_i <= B_i. PSs have no GPU.
- Each job runs 40 min - 2 h, and the whole workload needs about the testbed's capacity over
  the 10 slots [choice]. A target duration D_i ~ U[40 min, min(2 h, the slots left after its
  arrival)] is drawn (2 - 6 slots, never past the horizon) and the job is sized for a *typical*
  allocation k_i = max(1, round(c K_i)) workers, where K_i is the most it gets alone on the empty
  testbed with its PSs (first fit) and the share c in (0, 1] is the one (bisection) that makes
  the load factor (``oasis_opt.model.load``: bottleneck resource, PS pool included) equal
  ``TARGET_LOAD`` = 1 with W_i = D_i k_i (c = 1 if the load stays below 1 even then). The chunk
  time is set so that W_i = E_i N_i x_i = D_i k_i worker-slots: run at k_i from its arrival, the
  job takes ceil(D_i) slots. Sizing each job as the work it could do alone on the empty testbed
  (K_i) instead makes the workload about 4.8 times the testbed's capacity, and most jobs cannot
  finish. The per-mini-batch compute time is tau_i = x_i * slot_s / M_i - 2 e_i / b_i (seconds);
  a job whose communication alone exceeds its time budget (tau_i <= 0) is redrawn (all parameters
  but its arrival).
- Utilities: "similar to simulation": the simulation's class mix and gamma1 ~ U[priority], gamma2
  by class; the target gamma3 = ceil(D_i) - 1, the duration (completion slot - arrival) of the job
  run at its typical allocation [choice]: the simulations' gamma3 ~ U[1, 15] lies past the
  10-slot horizon for most jobs, so that "actual - target" (Fig. 9) would be negative by
  construction.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..costmodel.catalogue import CATALOGUE, TESTBED_BW_GBPS
from ..costmodel.chunktime import chunk_time, comm_time_s
from ..model import Instance
from ..model.load import load_factor
from ..model.numerics import WORK_EPS, workers_alone
from ._common import (DEFAULT_CLASS_MIX, MAX_REDRAWS, RESOURCES, check_class_mix, check_interval,
                      check_seed, make_servers, sample_utilities, tie_order)
from .paper import build_jobs

SLOT_S = 1200.0
HORIZON = 10
JOBS = 12
ARRIVAL_SLOTS = 9
WORKER_HOSTS, GPU_HOSTS, PS_HOSTS = 7, 4, 2
DATASET_IMAGES = 200
IMAGES_PER_CHUNK = (20, 30)
IMAGES_PER_MINIBATCH = 10
EPOCHS = (4, 30)
DURATION_MIN = (40.0, 120.0)
# the load factor (model.load) the typical allocations are sized for
TARGET_LOAD = 1.0

# Gradient (= parameter) size in MB, fp32: parameters (millions) x 4 bytes.
MODEL_GRADIENT_MB = {
    "alexnet": 61.1 * 4, "resnet-50": 25.6 * 4, "resnet-101": 44.5 * 4,
    "resnet-152": 60.2 * 4, "vgg-11": 132.9 * 4, "inception-bn": 11.3 * 4,
}
MODELS = tuple(MODEL_GRADIENT_MB)


def testbed_servers():
    kinds = ["testbed-worker-gpu"] * GPU_HOSTS + ["testbed-worker"] * (WORKER_HOSTS - GPU_HOSTS)
    workers = make_servers("worker", kinds, [CATALOGUE[k].capacity(TESTBED_BW_GBPS) for k in kinds],
                           ["rack-0"] * WORKER_HOSTS)
    pss = make_servers("ps", ["testbed-ps"] * PS_HOSTS,
                       [CATALOGUE["testbed-ps"].capacity(TESTBED_BW_GBPS)] * PS_HOSTS,
                       ["rack-0"] * PS_HOSTS)
    return workers, pss


def _draw(rng: np.random.Generator, arrival: np.ndarray) -> dict:
    """Job parameters for jobs arriving at ``arrival`` (their target duration ends by T)."""
    n = len(arrival)
    model = rng.integers(0, len(MODELS), size=n)
    per_chunk = np.asarray(IMAGES_PER_CHUNK)[rng.integers(0, len(IMAGES_PER_CHUNK), size=n)]
    bws = np.sort(rng.uniform(1.0, 3.0, size=(n, 2)), axis=1)
    worker = np.column_stack([rng.integers(0, 2, n), rng.integers(1, 6, n), rng.integers(2, 11, n),
                              rng.uniform(5.0, 10.0, n), bws[:, 0]])
    ps = np.column_stack([np.zeros(n), rng.integers(1, 6, n), rng.integers(2, 11, n),
                          rng.uniform(5.0, 10.0, n), bws[:, 1]])
    return {"model": model,
            "epochs": rng.integers(EPOCHS[0], EPOCHS[1] + 1, size=n),
            "chunks": -(-DATASET_IMAGES // per_chunk),
            "minibatches": per_chunk // IMAGES_PER_MINIBATCH,
            "gradient_mb": np.array([MODEL_GRADIENT_MB[MODELS[m]] for m in model]),
            "duration_slots": rng.uniform(DURATION_MIN[0] * 60.0 / SLOT_S,
                                          np.minimum(DURATION_MIN[1] * 60.0 / SLOT_S,
                                                     HORIZON + 1 - arrival)),
            "worker": worker.astype(float), "ps": ps.astype(float),
            # filled in below, once k_i is known
            "minibatch_time_s": np.zeros(n), "chunk_time": np.ones(n)}


def testbed(seed: int, *, class_mix=DEFAULT_CLASS_MIX, priority=(1.0, 100.0)) -> Instance:
    """The 9-server testbed of section 14 with 12 jobs over 10 slots of 20 minutes (module docstring)."""
    seed = check_seed(seed)
    class_mix = check_class_mix(class_mix)
    priority = check_interval("priority", priority)
    r_arr, r_job, r_util, r_ord = np.random.default_rng(seed).spawn(4)
    workers, pss = testbed_servers()
    arrival = r_arr.integers(1, ARRIVAL_SLOTS + 1, size=JOBS)
    classes, utilities = sample_utilities(r_util, JOBS, class_mix, priority)
    params = _draw(r_job, arrival)
    for _ in range(MAX_REDRAWS):
        cand = Instance(HORIZON, RESOURCES, workers, pss,
                        build_jobs(params, arrival, classes, utilities, SLOT_S))
        alone = np.array([workers_alone(cand, j) for j in range(JOBS)], dtype=np.int64)
        k = typical_workers(cand, alone, params["duration_slots"])
        x_target = params["duration_slots"] * k / (params["epochs"] * params["chunks"])
        b = params["worker"][:, RESOURCES.index("bw")]
        tau_s = x_target * SLOT_S / params["minibatches"] - comm_time_s(params["gradient_mb"], b)
        bad = np.flatnonzero((tau_s <= 0) | (alone == 0))
        if not len(bad):
            break
        new = _draw(r_job, arrival[bad])
        for key, value in new.items():
            params[key][bad] = value
    else:  # pragma: no cover - the containers always fit and comm is far below the budget
        raise ValueError("testbed: could not draw feasible jobs")
    params["minibatch_time_s"] = tau_s
    params["chunk_time"] = np.asarray(chunk_time(params["minibatches"], tau_s, params["gradient_mb"],
                                                 b, SLOT_S), dtype=float)
    extra = [{"model": MODELS[m], "target_duration_slots": float(d), "typical_workers": int(w)}
             for m, d, w in zip(params["model"], params["duration_slots"], k)]
    # the target: the duration (completion slot - arrival) of a run at the typical allocation
    utilities = [replace(u, target=float(math.ceil(d - WORK_EPS) - 1)) if u.kind == "sigmoid" else u
                 for u, d in zip(utilities, params["duration_slots"])]
    order = tie_order(r_ord, arrival)
    meta = {"generator": "testbed", "seed": seed, "class_mix": list(class_mix),
            "priority": list(priority), "slot_s": SLOT_S, "target_load": TARGET_LOAD}
    return Instance(HORIZON, RESOURCES, workers, pss,
                    build_jobs(params, arrival, classes, utilities, SLOT_S, order, extra), meta=meta)


def typical_workers(instance: Instance, alone: np.ndarray, duration: np.ndarray) -> np.ndarray:
    """k_i = max(1, round(c K_i)) for the share c in (0, 1] at which the load factor of the work
    W_i = D_i k_i (``duration`` D, ``alone`` K) is ``TARGET_LOAD`` (module docstring)."""
    def k_at(c: float) -> np.ndarray:
        return np.maximum(1, np.rint(c * alone)).astype(np.int64)

    def load(c: float) -> float:  # continuous in c, so that bisection converges
        return load_factor(instance, duration * np.maximum(1.0, c * alone))[0]

    if load(1.0) <= TARGET_LOAD:
        return k_at(1.0)
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if load(mid) <= TARGET_LOAD else (lo, mid)
    return k_at(lo)


testbed.__test__ = False  # not a pytest test, though its name starts with "test"
