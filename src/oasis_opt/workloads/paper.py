"""The paper's simulation workloads (section 10 of the reference; Bao et al. 2018, p.8).

``paper_sim``: H worker servers, K PS servers, I jobs over T slots with the printed ranges.
``paper_fig5``: the small instances of Fig. 5 (10 jobs, T = 10, n servers split as in A9).

Distributions (A3): independent uniforms; integers for E, N, M, GPUs, vCPUs and memory (GB);
continuous tau, e, storage, b, B and the gammas. Job class per job with ``class_mix``.

Job-size calibration (A2). Taken literally (``calibration="literal"``), tau_i ~ U[0.001, 0.1]
slots per mini-batch and x_i = M_i (tau_i + 2 e_i / b_i) give d_min with a median of about 250
slots, far beyond gamma3 in [1, 15] and T <= 300. ``"calibrated"`` (default) is option (b) of
A2: the printed tau_i ~ U[0.001, 0.1] slots and e_i ~ U[30, 575] MB are read per *chunk*, so
x_i = tau_i + 2 e_i / b_i (1-hour slot for the communication term). The provenance records it in
the formula's per-mini-batch terms (minibatch_time_s = tau_i / M_i, gradient_mb = e_i / M_i), so
``chunk_time_from_provenance`` reproduces x_i exactly. Measured over 2,000 jobs: d_min median 6,
p90 about 14, about 95% within 15 slots, as the reference's section 15.2 estimates. Option (a)
(tau_i = u / M_i, communication kept per mini-batch) was tried first and rejected: its
communication term M_i 2 e_i / b_i has a heavy tail at small b_i (only 73% of jobs within 15
slots, d_min up to 223).

Servers (A1): worker servers are GPU servers drawn uniformly from the P2/G3 types, PS servers are
C4; ``gpu_pool="ps"`` gives the paper's literal (swapped) text, C4 workers and P2/G3 PS hosts, in
which case no worker server has a GPU and the guard below sets every worker's GPU demand to 0.
Every server's NIC is U[20, 50] Gbps; storage 1000 GB. Servers are spread over racks of
``rack_size`` (ceil((H + K) / rack_size) racks, each holding a contiguous block of the worker
servers and of the PS servers), so the default topology has several racks mixing both pools.

Guards. A container that fits on no server of its pool is capped resource by resource at the
largest server's capacity (count recorded in ``meta``; never happens with the default pools,
where a p2.16xlarge holds any worker, unless the pool has no server large enough), so every job
can run alone on the empty cluster. b_i <= B_i always (b < 5 <= B with the paper's ranges; the
generator enforces B_i = max(B_i, b_i) anyway).
"""
from __future__ import annotations

import math

import numpy as np

from ..costmodel.catalogue import (CATALOGUE, CPU_TYPES, GPU_TYPES, PAPER_SERVER_BW_GBPS)
from ..costmodel.chunktime import chunk_time, provenance
from ..model import JOB_CLASSES, Instance, Job
from ..model.numerics import workers_alone
from ._common import (DEFAULT_CLASS_MIX, MAX_REDRAWS, RESOURCES, cap_demands, capacity_matrix,
                      check_choice, check_class_mix, check_int, check_interval, check_positive,
                      check_seed, demand_map, duration_alone, job_ids, make_servers,
                      rack_of, sample_utilities, tie_order)

CALIBRATIONS = ("calibrated", "literal")
ARRIVALS = ("uniform", "poisson")
GPU_POOLS = ("worker", "ps")

# The printed ranges of section 10 (closed intervals; units in the names).
PAPER_RANGES = {
    "epochs": (50, 200),  # E_i
    "chunks": (5, 100),  # N_i
    "minibatches": (10, 100),  # M_i
    "tau_slots": (0.001, 0.1),  # tau_i, slots per mini-batch (literal) / per chunk (calibrated)
    "gradient_mb": (30.0, 575.0),  # e_i, MB
    "worker_bw_gbps": (0.1, 5.0),  # b_i: 100 Mbps .. 5 Gbps
    "ps_bw_gbps": (5.0, 20.0),  # B_i
    "worker_gpu": (0, 4),
    "cpu": (1, 10),  # vCPUs, worker and PS
    "mem_gb": (2, 32),  # worker and PS
    "storage_gb": (5.0, 10.0),  # worker and PS
}
FIG5_MAX_EPOCHS = PAPER_RANGES["epochs"][1]


def _int_uniform(rng, key: str, n: int) -> np.ndarray:
    lo, hi = PAPER_RANGES[key]
    return rng.integers(lo, hi + 1, size=n)


def _uniform(rng, key: str, n: int) -> np.ndarray:
    return rng.uniform(*PAPER_RANGES[key], size=n)


def draw_job_params(rng: np.random.Generator, n: int, calibration: str, slot_s: float) -> dict:
    """The per-job parameters of section 10 for ``n`` jobs, as arrays (one row per job).

    Returns epochs, chunks, minibatches, minibatch_time_s, gradient_mb, worker (n, R),
    ps (n, R) demands in RESOURCES order, and chunk_time x_i in worker-slots.
    """
    E = _int_uniform(rng, "epochs", n)
    N = _int_uniform(rng, "chunks", n)
    M = _int_uniform(rng, "minibatches", n)
    u = _uniform(rng, "tau_slots", n)
    e = _uniform(rng, "gradient_mb", n)
    if calibration == "calibrated":  # A2 option (b): tau and e per chunk, written per mini-batch
        tau_slots, e = u / M, e / M
    else:
        tau_slots = u
    b = _uniform(rng, "worker_bw_gbps", n)
    B = np.maximum(_uniform(rng, "ps_bw_gbps", n), b)  # guard b_i <= B_i (a no-op here)
    worker = np.column_stack([_int_uniform(rng, "worker_gpu", n), _int_uniform(rng, "cpu", n),
                              _int_uniform(rng, "mem_gb", n), _uniform(rng, "storage_gb", n), b])
    ps = np.column_stack([np.zeros(n), _int_uniform(rng, "cpu", n), _int_uniform(rng, "mem_gb", n),
                          _uniform(rng, "storage_gb", n), B])
    tau_s = tau_slots * slot_s
    x = chunk_time(M, tau_s, e, b, slot_s) if n else np.zeros(0)
    return {"epochs": E, "chunks": N, "minibatches": M, "minibatch_time_s": tau_s,
            "gradient_mb": e, "worker": worker.astype(float), "ps": ps.astype(float),
            "chunk_time": np.asarray(x, dtype=float)}


def _replace_rows(params: dict, rows: np.ndarray, new: dict) -> None:
    for key, value in new.items():
        params[key][rows] = value


def paper_servers(rng: np.random.Generator, H: int, K: int, gpu_pool: str, rack_size: int):
    """H worker and K PS servers (A1), NICs U[20, 50] Gbps, spread over racks of ``rack_size``."""
    n_gpu = H if gpu_pool == "worker" else K
    gpu_kinds = [GPU_TYPES[k] for k in rng.integers(0, len(GPU_TYPES), size=n_gpu)]
    bw = rng.uniform(*PAPER_SERVER_BW_GBPS, size=H + K)
    w_kinds = gpu_kinds if gpu_pool == "worker" else [CPU_TYPES[0]] * H
    p_kinds = [CPU_TYPES[0]] * K if gpu_pool == "worker" else gpu_kinds
    racks = math.ceil((H + K) / rack_size)
    workers = make_servers("worker", w_kinds, [CATALOGUE[k].capacity(v) for k, v in zip(w_kinds, bw[:H])],
                           rack_of(H, racks))
    pss = make_servers("ps", p_kinds, [CATALOGUE[k].capacity(v) for k, v in zip(p_kinds, bw[H:])],
                       rack_of(K, racks))
    return workers, pss


def _guard(params: dict, workers, pss) -> None:
    """Apply ``cap_demands`` to both pools; masks of capped rows go to params["capped_*"]."""
    params["worker"], params["capped_worker"] = cap_demands(params["worker"], capacity_matrix(workers))
    params["ps"], params["capped_ps"] = cap_demands(params["ps"], capacity_matrix(pss))


def _capped_meta(params: dict) -> dict:
    return {"capped_worker_demands": int(params["capped_worker"].sum()),
            "capped_ps_demands": int(params["capped_ps"].sum())}


def build_jobs(params: dict, arrival: np.ndarray, classes: np.ndarray, utilities, slot_s: float,
               order: np.ndarray | None = None, extra_provenance=None) -> tuple[Job, ...]:
    """Jobs in instance order ``order`` (row indices into the arrays), ids job-000, job-001 ..."""
    order = np.arange(len(arrival)) if order is None else order
    ids = job_ids(len(order))
    jobs = []
    for new, i in enumerate(order):
        prov = provenance(params["minibatches"][i], params["minibatch_time_s"][i],
                          params["gradient_mb"][i], params["worker"][i, RESOURCES.index("bw")],
                          slot_s)
        if extra_provenance is not None:
            prov.update(extra_provenance[i])
        jobs.append(Job(ids[new], int(arrival[i]), int(params["epochs"][i]), int(params["chunks"][i]),
                        float(params["chunk_time"][i]), demand_map(params["worker"][i]),
                        demand_map(params["ps"][i]), utilities[i], JOB_CLASSES[int(classes[i])], prov))
    return tuple(jobs)


def _check_common(seed, calibration, class_mix, priority, gpu_pool, slot_s):
    return (check_seed(seed), check_choice("calibration", calibration, CALIBRATIONS),
            check_class_mix(class_mix), check_interval("priority", priority),
            check_choice("gpu_pool", gpu_pool, GPU_POOLS), check_positive("slot_s", slot_s))


def paper_sim(seed: int, *, jobs: int = 100, horizon: int = 300, worker_servers: int = 50,
              ps_servers: int = 50, calibration: str = "calibrated", arrivals: str = "uniform",
              class_mix=DEFAULT_CLASS_MIX, priority=(1.0, 100.0), gpu_pool: str = "worker",
              slot_s: float = 3600.0, rack_size: int = 10) -> Instance:
    """The paper's simulation instance (section 10), deterministic in ``seed``.

    jobs: I (``arrivals="uniform"``: exactly I jobs, arrival slots i.i.d. uniform on 1..T;
    ``"poisson"``: per-slot counts Poisson(I / T), so the job count is random with mean I).
    horizon: T. worker_servers, ps_servers: H, K. calibration: A2 (module docstring).
    class_mix: probabilities of (time-insensitive, time-sensitive, time-critical).
    priority: range of gamma1. gpu_pool: which pool gets the P2/G3 GPU servers (A1).
    slot_s: slot length in seconds (the comm term 2 e_i / b_i is converted with it).
    rack_size: servers per rack (before spreading both pools over the racks).

    Jobs arriving in the same slot are shuffled with the seed, then sorted stably by arrival, so
    instance order is the tie order (A4). ``meta`` records the generator, seed and options.
    """
    seed, calibration, class_mix, priority, gpu_pool, slot_s = _check_common(
        seed, calibration, class_mix, priority, gpu_pool, slot_s)
    jobs = check_int("jobs", jobs, 0)
    horizon = check_int("horizon", horizon, 1)
    H = check_int("worker_servers", worker_servers, 1)
    K = check_int("ps_servers", ps_servers, 1)
    arrivals = check_choice("arrivals", arrivals, ARRIVALS)
    rack_size = check_int("rack_size", rack_size, 1)

    r_srv, r_arr, r_job, r_util, r_ord = np.random.default_rng(seed).spawn(5)
    workers, pss = paper_servers(r_srv, H, K, gpu_pool, rack_size)
    if arrivals == "uniform":
        arrival = r_arr.integers(1, horizon + 1, size=jobs)
    else:
        arrival = np.repeat(np.arange(1, horizon + 1), r_arr.poisson(jobs / horizon, size=horizon))
    n = len(arrival)
    params = draw_job_params(r_job, n, calibration, slot_s)
    _guard(params, workers, pss)
    classes, utilities = sample_utilities(r_util, n, class_mix, priority)
    order = tie_order(r_ord, arrival)
    meta = {"generator": "paper-sim", "seed": seed, "calibration": calibration,
            "arrivals": arrivals, "class_mix": list(class_mix), "priority": list(priority),
            "gpu_pool": gpu_pool, "slot_s": slot_s, "rack_size": rack_size, **_capped_meta(params)}
    return Instance(horizon, RESOURCES, workers, pss,
                    build_jobs(params, arrival, classes, utilities, slot_s, order), meta=meta)


def paper_fig5(seed: int, *, servers: int = 3, priority=(50.0, 100.0), jobs: int = 10,
               horizon: int = 10, calibration: str = "calibrated", class_mix=DEFAULT_CLASS_MIX,
               gpu_pool: str = "worker", slot_s: float = 3600.0) -> Instance:
    """Fig. 5 instances (A9): ``servers`` = n split into ceil(n/2) worker and floor(n/2) PS hosts.

    Jobs are drawn as in ``paper_sim`` (uniform arrivals on 1..T), then made small enough for an
    exact MILP: each job must be able to finish alone, on the empty cluster, with as many workers
    as fit (<= N_i, first fit, its PSs included), by slot T, i.e. ceil(W_i / k_i) <= T - a_i + 1.
    With the paper's E_i in [50, 200] almost no job can, so E_i is drawn uniformly from 1..E_max_i,
    the largest epoch count (<= 200) that finishes in time; a job for which even E_i = 1 does not
    is redrawn (all parameters but its arrival). Hence d_min <= T - a_i + 1 <= T for every job.
    ``priority`` is the gamma1 range varied across Fig. 5's bar groups.
    """
    seed, calibration, class_mix, priority, gpu_pool, slot_s = _check_common(
        seed, calibration, class_mix, priority, gpu_pool, slot_s)
    n_servers = check_int("servers", servers, 2)
    jobs = check_int("jobs", jobs, 0)
    horizon = check_int("horizon", horizon, 1)
    H, K = -(-n_servers // 2), n_servers // 2

    r_srv, r_arr, r_job, r_util, r_ord = np.random.default_rng(seed).spawn(5)
    workers, pss = paper_servers(r_srv, H, K, gpu_pool, rack_size=10)
    arrival = r_arr.integers(1, horizon + 1, size=jobs)
    classes, utilities = sample_utilities(r_util, jobs, class_mix, priority)
    params = draw_job_params(r_job, jobs, calibration, slot_s)
    _guard(params, workers, pss)
    allowance = horizon - arrival + 1
    grid = np.arange(1, FIG5_MAX_EPOCHS + 1)
    for _ in range(MAX_REDRAWS):
        cand = Instance(horizon, RESOURCES, workers, pss,
                        build_jobs({**params, "epochs": np.ones(jobs, dtype=np.int64)}, arrival,
                                   classes, utilities, slot_s))
        k = np.array([workers_alone(cand, j) for j in range(jobs)], dtype=np.int64)
        dur = duration_alone(grid[None, :], params["chunks"][:, None],
                             params["chunk_time"][:, None], k[:, None])
        e_max = (dur <= allowance[:, None]).sum(axis=1)  # duration is non-decreasing in E
        bad = np.flatnonzero(e_max == 0)
        if not len(bad):
            break
        new = draw_job_params(r_job, len(bad), calibration, slot_s)
        _guard(new, workers, pss)
        _replace_rows(params, bad, new)
    else:
        raise ValueError(f"paper_fig5: no job fits horizon={horizon} on {n_servers} servers "
                         f"after {MAX_REDRAWS} redraws")
    params["epochs"] = r_job.integers(1, e_max + 1) if jobs else np.zeros(0, dtype=np.int64)
    order = tie_order(r_ord, arrival)
    meta = {"generator": "paper-fig5", "seed": seed, "servers": n_servers,
            "calibration": calibration, "class_mix": list(class_mix), "priority": list(priority),
            "gpu_pool": gpu_pool, "slot_s": slot_s, **_capped_meta(params)}
    return Instance(horizon, RESOURCES, workers, pss,
                    build_jobs(params, arrival, classes, utilities, slot_s, order), meta=meta)
