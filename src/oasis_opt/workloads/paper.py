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

Mixed clusters (``cluster_mix``, accelerator types; ``model.instance``). ``paper_sim`` can
split its H worker servers over accelerator types by shares, e.g. ``"v100:p100:k80:cpu"`` (equal
shares) or ``"v100=2:k80=1:cpu=1"``: each type gets its largest-remainder share of the servers
(ties to the type listed first; every listed type needs at least one), in contiguous blocks in
the order listed (so racks hold one generation), each server a uniform draw among the
catalogue's hosts of its type (``costmodel.catalogue.ACCELERATOR_SERVERS``). Every job draws a
model family (``costmodel.accelerators.FAMILIES``, uniformly, from its own seeded stream); its
drawn chunk time is read as its time on a V100 (the reference accelerator), and on each type of
the mix its chunk time is the V100 one with the computation share sped up or slowed down by the
family's relative speed (``chunk_time_on``); the integer unit and speeds follow
``integer_speeds`` (loss below ``speed_tolerance``, default 1%). A job whose workers need a
GPU lists every type of the mix, the CPU type with its CPU-mode demand (``cpu_mode_worker``);
a job that needs no GPU runs on every type alike (no ``types``, unit 1). No job spans types.
Without ``cluster_mix`` the instance is exactly the untyped one.

Guards. A container that fits on no server of its pool is capped resource by resource at the
largest server's capacity (count recorded in ``meta``; never happens with the default pools,
where a p2.16xlarge holds any worker, unless the pool has no server large enough), so every job
can run alone on the empty cluster. b_i <= B_i always (b < 5 <= B with the paper's ranges; the
generator enforces B_i = max(B_i, b_i) anyway).
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..costmodel.accelerators import (ACCELERATORS, FAMILIES, SPEED_TOLERANCE, chunk_time_on,
                                      cpu_mode_worker, integer_speeds, relative_speed)
from ..costmodel.catalogue import (ACCELERATOR_SERVERS, CATALOGUE, CPU_TYPES, GPU_TYPES,
                                   PAPER_SERVER_BW_GBPS)
from ..costmodel.chunktime import chunk_time, comm_time_s, provenance
from ..model import JOB_CLASSES, Instance, Job, JobType
from ..model.numerics import workers_alone
from ._common import (DEFAULT_CLASS_MIX, MAX_REDRAWS, RESOURCES, TARGET_RANGE, cap_demands,
                      capacity_matrix, check_choice, check_class_mix, check_int, check_interval,
                      check_positive, check_seed, demand_map, duration_alone, job_ids,
                      make_servers, rack_of, sample_utilities, tie_order)

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


def parse_cluster_mix(mix) -> dict[str, float]:
    """``"v100:p100:k80:cpu"`` (equal shares), ``"v100=2:k80=1"`` or ``{type: share}`` ->
    ``{type: share > 0}`` in the order given; ValueError naming ``cluster_mix`` otherwise."""
    if isinstance(mix, str):
        out: dict[str, float] = {}
        for part in mix.split(":"):
            name, sep, share = part.partition("=")
            if name in out:
                raise ValueError(f"cluster_mix: type {name!r} given twice")
            try:
                out[name] = float(share) if sep else 1.0
            except ValueError:
                raise ValueError(f"cluster_mix: bad share {share!r} of {name!r} "
                                 "(expected TYPE[=SHARE]:TYPE[=SHARE]...)") from None
        mix = out
    if not isinstance(mix, dict) or not mix:
        raise ValueError(f"cluster_mix: expected 'TYPE[=SHARE]:...' or {{type: share}}, got {mix!r}")
    for name, share in mix.items():
        if name not in ACCELERATORS:
            raise ValueError(f"cluster_mix: unknown accelerator {name!r} "
                             f"(known: {', '.join(ACCELERATORS)})")
        if isinstance(share, bool) or not isinstance(share, (int, float)) or \
                not math.isfinite(share) or share <= 0:
            raise ValueError(f"cluster_mix: the share of {name!r} must be a finite number > 0, "
                             f"got {share!r}")
    return {name: float(share) for name, share in mix.items()}


def apportion(total: int, shares: dict[str, float]) -> dict[str, int]:
    """Largest-remainder (Hamilton) split of ``total`` by ``shares``; ties to the earlier type."""
    weight = np.array(list(shares.values()))
    quota = total * weight / weight.sum()
    count = np.floor(quota).astype(np.int64)
    rest = quota - count
    for n in np.lexsort((np.arange(len(rest)), -rest))[: total - int(count.sum())].tolist():
        count[n] += 1
    return dict(zip(shares, count.tolist()))


def mixed_servers(rng: np.random.Generator, counts: dict[str, int], K: int, rack_size: int):
    """Worker servers by accelerator type (contiguous blocks, each a uniform draw among the
    type's catalogue hosts) and K C4 PS servers, NICs U[20, 50] Gbps, racks of ``rack_size``."""
    H = sum(counts.values())
    w_kinds = []
    for acc, n in counts.items():
        hosts = ACCELERATOR_SERVERS[acc]
        w_kinds += [hosts[k] for k in rng.integers(0, len(hosts), size=n)]
    bw = rng.uniform(*PAPER_SERVER_BW_GBPS, size=H + K)
    p_kinds = [CPU_TYPES[0]] * K
    racks = math.ceil((H + K) / rack_size)
    workers = tuple(
        replace(s, accelerator=CATALOGUE[k].accelerator) for s, k in zip(
            make_servers("worker", w_kinds,
                         [CATALOGUE[k].capacity(v) for k, v in zip(w_kinds, bw[:H])],
                         rack_of(H, racks)), w_kinds))
    pss = make_servers("ps", p_kinds, [CATALOGUE[k].capacity(v) for k, v in zip(p_kinds, bw[H:])],
                       rack_of(K, racks))
    return workers, pss


def job_types(params: dict, families: np.ndarray, mix: dict[str, float], tolerance: float
              ) -> list[tuple[int, dict[str, JobType] | None]]:
    """``(unit, types)`` per job row of ``params`` on a cluster of the types of ``mix``
    (module docstring: GPU jobs list every type, CPU mode with its own demand)."""
    gpu = RESOURCES.index("gpu")
    comm = comm_time_s(params["gradient_mb"], params["worker"][:, RESOURCES.index("bw")])
    tau = params["minibatch_time_s"]
    share = np.divide(tau, tau + comm, out=np.zeros(len(tau)), where=(tau + comm) > 0)
    out: list[tuple[int, dict[str, JobType] | None]] = []
    for i, family in enumerate(families.tolist()):
        if params["worker"][i, gpu] <= 0:
            out.append((1, None))
            continue
        ratios = {g: 1.0 / chunk_time_on(1.0, float(share[i]), relative_speed(family, g))
                  for g in mix}
        unit, speeds = integer_speeds(ratios, tolerance)
        worker = demand_map(params["worker"][i])
        out.append((unit, {g: JobType(speeds[g], cpu_mode_worker(worker) if g == "cpu" else None)
                           for g in mix}))
    return out


def _guard(params: dict, workers, pss) -> None:
    """Apply ``cap_demands`` to both pools; masks of capped rows go to params["capped_*"]."""
    params["worker"], params["capped_worker"] = cap_demands(params["worker"], capacity_matrix(workers))
    params["ps"], params["capped_ps"] = cap_demands(params["ps"], capacity_matrix(pss))


def _capped_meta(params: dict) -> dict:
    return {"capped_worker_demands": int(params["capped_worker"].sum()),
            "capped_ps_demands": int(params["capped_ps"].sum())}


def build_jobs(params: dict, arrival: np.ndarray, classes: np.ndarray, utilities, slot_s: float,
               order: np.ndarray | None = None, extra_provenance=None,
               types: list | None = None) -> tuple[Job, ...]:
    """Jobs in instance order ``order`` (row indices into the arrays), ids job-000, job-001 ...;
    ``types``: ``(unit, types)`` per row (``job_types``) on a cluster with accelerator types."""
    order = np.arange(len(arrival)) if order is None else order
    ids = job_ids(len(order))
    jobs = []
    for new, i in enumerate(order):
        prov = provenance(params["minibatches"][i], params["minibatch_time_s"][i],
                          params["gradient_mb"][i], params["worker"][i, RESOURCES.index("bw")],
                          slot_s)
        if extra_provenance is not None:
            prov.update(extra_provenance[i])
        unit, typed = (1, None) if types is None else types[i]
        jobs.append(Job(ids[new], int(arrival[i]), int(params["epochs"][i]), int(params["chunks"][i]),
                        float(params["chunk_time"][i]), demand_map(params["worker"][i]),
                        demand_map(params["ps"][i]), utilities[i], JOB_CLASSES[int(classes[i])], prov,
                        unit=unit, types=typed))
    return tuple(jobs)


def _check_common(seed, calibration, class_mix, priority, gpu_pool, slot_s):
    return (check_seed(seed), check_choice("calibration", calibration, CALIBRATIONS),
            check_class_mix(class_mix), check_interval("priority", priority),
            check_choice("gpu_pool", gpu_pool, GPU_POOLS), check_positive("slot_s", slot_s))


def paper_sim(seed: int, *, jobs: int = 100, horizon: int = 300, worker_servers: int = 50,
              ps_servers: int = 50, calibration: str = "calibrated", arrivals: str = "uniform",
              class_mix=DEFAULT_CLASS_MIX, priority=(1.0, 100.0), gpu_pool: str = "worker",
              slot_s: float = 3600.0, rack_size: int = 10, cluster_mix=None,
              speed_tolerance: float = SPEED_TOLERANCE) -> Instance:
    """The paper's simulation instance (section 10), deterministic in ``seed``.

    jobs: I (``arrivals="uniform"``: exactly I jobs, arrival slots i.i.d. uniform on 1..T;
    ``"poisson"``: per-slot counts Poisson(I / T), so the job count is random with mean I).
    horizon: T. worker_servers, ps_servers: H, K. calibration: A2 (module docstring).
    class_mix: probabilities of (time-insensitive, time-sensitive, time-critical).
    priority: range of gamma1. gpu_pool: which pool gets the P2/G3 GPU servers (A1).
    slot_s: slot length in seconds (the comm term 2 e_i / b_i is converted with it).
    rack_size: servers per rack (before spreading both pools over the racks).
    cluster_mix: None (the paper's cluster) or accelerator types with shares of the worker
    servers, ``"v100:p100:k80:cpu"`` (module docstring); speed_tolerance: the largest share of a
    job's speed on a type lost by rounding it to whole work units (``integer_speeds``).

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
    mix = None if cluster_mix is None else parse_cluster_mix(cluster_mix)
    if mix is not None:
        if gpu_pool != "worker":
            raise ValueError("cluster_mix: accelerator types are for worker servers: only with "
                             "gpu_pool='worker'")
        if not (isinstance(speed_tolerance, (int, float)) and 0 < speed_tolerance < 1):
            raise ValueError(f"speed_tolerance: must be in (0, 1), got {speed_tolerance!r}")

    # the sixth stream (families) exists only with a mix; the first five are the same either way
    r_srv, r_arr, r_job, r_util, r_ord, r_fam = np.random.default_rng(seed).spawn(6)
    if mix is None:
        workers, pss = paper_servers(r_srv, H, K, gpu_pool, rack_size)
    else:
        counts = apportion(H, mix)
        empty = [t for t, n in counts.items() if n == 0]
        if empty:
            raise ValueError(f"cluster_mix: {H} worker servers leave type {empty[0]!r} with none "
                             "(more servers, or a larger share)")
        workers, pss = mixed_servers(r_srv, counts, K, rack_size)
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
    types = families = None
    if mix is not None:
        families = r_fam.choice(np.array(FAMILIES), size=n)
        types = job_types(params, families, mix, float(speed_tolerance))
        meta.update(cluster_mix=mix, speed_tolerance=float(speed_tolerance))
    extra = None if families is None else [{"model_family": f} for f in families.tolist()]
    return Instance(horizon, RESOURCES, workers, pss,
                    build_jobs(params, arrival, classes, utilities, slot_s, order, extra, types),
                    meta=meta)


def paper_fig5(seed: int, *, servers: int = 3, priority=(50.0, 100.0), jobs: int = 10,
               horizon: int = 10, calibration: str = "calibrated", class_mix=DEFAULT_CLASS_MIX,
               gpu_pool: str = "worker", slot_s: float = 3600.0, e_max_scale: float = 1.0,
               target_range=TARGET_RANGE) -> Instance:
    """Fig. 5 instances (A9): ``servers`` = n split into ceil(n/2) worker and floor(n/2) PS hosts.

    Jobs are drawn as in ``paper_sim`` (uniform arrivals on 1..T), then made small enough for an
    exact MILP: each job must be able to finish alone, on the empty cluster, with as many workers
    as fit (<= N_i, first fit, its PSs included), by slot T, i.e. ceil(W_i / k_i) <= T - a_i + 1.
    With the paper's E_i in [50, 200] almost no job can, so E_i is drawn uniformly from 1..E_max_i,
    the largest epoch count (<= 200) that finishes in time; a job for which even E_i = 1 does not
    is redrawn (all parameters but its arrival). Hence d_min <= T - a_i + 1 <= T for every job.
    ``priority`` is the gamma1 range varied across Fig. 5's bar groups.

    Two options vary the choices that break Theorem 4's assumptions (the defaults are the preset,
    and leave its instances unchanged; a non-default value is recorded in ``meta``):

    * ``e_max_scale`` s in (0, 1]: E_i ~ U{1..max(1, floor(s E_max_i))}, so that a job's work is
      at most a share s of what it could do alone on the empty cluster by T (s = 1: the preset);
    * ``target_range`` (lo, hi): gamma3 ~ U[lo, hi] instead of the paper's U[1, 15] (e.g.
      (1, T/2): every target inside the horizon).

    The random streams are the preset's, so an option changes only what it names: the same seed
    gives the same servers, arrivals, job parameters and utilities' gamma1/gamma2.
    """
    seed, calibration, class_mix, priority, gpu_pool, slot_s = _check_common(
        seed, calibration, class_mix, priority, gpu_pool, slot_s)
    n_servers = check_int("servers", servers, 2)
    jobs = check_int("jobs", jobs, 0)
    horizon = check_int("horizon", horizon, 1)
    e_max_scale = check_positive("e_max_scale", e_max_scale)
    if e_max_scale > 1:
        raise ValueError(f"e_max_scale: must be in (0, 1], got {e_max_scale!r}")
    target_range = check_interval("target_range", target_range)
    H, K = -(-n_servers // 2), n_servers // 2

    r_srv, r_arr, r_job, r_util, r_ord = np.random.default_rng(seed).spawn(5)
    workers, pss = paper_servers(r_srv, H, K, gpu_pool, rack_size=10)
    arrival = r_arr.integers(1, horizon + 1, size=jobs)
    classes, utilities = sample_utilities(r_util, jobs, class_mix, priority, target_range)
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
    if e_max_scale != 1.0:
        e_max = np.maximum(1, np.floor(e_max_scale * e_max).astype(np.int64))
    params["epochs"] = r_job.integers(1, e_max + 1) if jobs else np.zeros(0, dtype=np.int64)
    order = tie_order(r_ord, arrival)
    meta = {"generator": "paper-fig5", "seed": seed, "servers": n_servers,
            "calibration": calibration, "class_mix": list(class_mix), "priority": list(priority),
            "gpu_pool": gpu_pool, "slot_s": slot_s, **_capped_meta(params)}
    # recorded only when set, so that the preset's instances (and fingerprints) stay as they were
    if e_max_scale != 1.0:
        meta["e_max_scale"] = e_max_scale
    if target_range != TARGET_RANGE:
        meta["target_range"] = list(target_range)
    return Instance(horizon, RESOURCES, workers, pss,
                    build_jobs(params, arrival, classes, utilities, slot_s, order), meta=meta)
