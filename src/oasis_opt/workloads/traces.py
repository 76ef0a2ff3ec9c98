"""Real GPU-cluster traces as instances: Philly, the Pollux workloads, Tiresias, PAI, Helios.

The trace files ship with the package (``oasis_opt/data/traces``, 1.8 MB, each folder with its
licence; see its README for sources and citations); every loader also takes ``root``, a folder
laid out the same way (e.g. ``../shared/traces``). Malformed files raise ``FormatError`` whose
field names the file, the row (1 = header) and the column.

**Mapping a rigid trace job to the paper's model** [choice]. A trace job ran ``d`` seconds on
``g`` GPUs. With slot length L (``slot_s``):

* arrival a_i = floor((submission - window start) / L) + 1;
* N_i = g: one worker per GPU, at most g at once (the paper's elastic jobs may get fewer);
* E_i = ceil(d / L) and x_i = d / (L E_i) in (0, 1], so the workload is
  W_i = ceil(E_i N_i x_i) = ceil(g d / L) worker-slots (the job's GPU-time in slots) and with all
  g workers it runs d_min = ceil(d / L) slots, its trace run time rounded up to whole slots;
* a worker is 1 GPU, 4 vCPUs, 16 GB, 10 GB storage and b_i = 5 Gbps; a PS is 2 vCPUs, 8 GB,
  10 GB and B_i = b_i min(g, 4), so one PS serves up to 4 workers (ceil(k / min(g, 4)) PSs);
* utility: the paper's sigmoid (class mix 10/55/35 %, gamma1 ~ U[1, 100], gamma2 by class,
  ``workloads._common.sample_utilities``), with the target gamma3 ~ U[1, 15] counted from the
  job's fastest completion: gamma3 + d_min - 1 slots after arrival (a long trace job cannot
  meet a 15-slot target);
* ``provenance``: the trace row (timestamp, duration, GPUs, virtual cluster), the model class by
  GPU-time as Pollux assigns it (< 1 GPU-h cifar10/ncf, 1-10 deepspeech2/bert, 10-100 yolov3,
  >= 100 imagenet; the coin within a pair is seeded), which the placement-aware cost model uses;
* instance order = submission order (the trace's real order breaks ties within a slot);
* horizon: the last job's earliest possible completion plus ``tail`` slots.

Everything random (utilities, model coins, PAI sampling) comes from ``seed``.

**Clusters.** ``philly_cluster``: racks of 8-GPU servers (Philly's servers have 8 GPUs; 48
vCPUs, 256 GB, 40 Gbps = 8 workers of 5 Gbps) with PS servers (32 vCPUs, 128 GB, 100 Gbps) in
every rack [choice]. ``pai_cluster``: the real heterogeneous PAI 2020 machines (P100, T4: 2 GPUs;
MISC, V100, V100M32: 8 GPUs; CPU-only machines become the PS pool), optionally a stratified
seeded sample; NICs are not in the spec: 12.5 Gbps per GPU and 100 Gbps for CPU machines
[choice]; racks hold ``rack_size`` machines of one GPU type and the CPU machines are dealt
round-robin over the racks, so every rack has PS servers [choice].
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..costmodel.models import pollux_model_for_gpu_hours
from ..model import JOB_CLASSES, Instance, Job, Server, Topology, Utility
from ..model.io import FormatError
from ._common import (DEFAULT_CLASS_MIX, RESOURCES, check_class_mix, check_int, check_interval,
                      check_positive, check_seed, sample_utilities)

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
WORKER_DEMAND = {"gpu": 1.0, "cpu": 4.0, "mem": 16.0, "storage": 10.0, "bw": 5.0}
PS_DEMAND = {"cpu": 2.0, "mem": 8.0, "storage": 10.0}
WORKERS_PER_PS = 4
PHILLY_SOURCES = {"month": "philly_2017-11.csv", "multigpu": "philly_multigpu.csv"}
PHILLY_COLUMNS = ("timestamp", "submit_s", "duration", "num_gpus", "gpu_time", "cluster")
POLLUX_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
TIRESIAS_COLUMNS = ("job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration",
                    "interval")
CLUSTER_SPEC_COLUMNS = ("num_switch", "num_node_p_switch", "num_gpu_p_node", "num_cpu_p_node",
                        "mem_p_node")
PAI_COLUMNS = ("machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu")
HELIOS_COLUMNS = ("time", "total_gpu_num", "running_gpu_num", "pending_gpu_num",
                  "gpu_utilization", "running_job_num", "pending_job_num")
# Pollux workloads carry no durations: GPU-time drawn log-uniformly in the application's Pollux
# class (the classes of the Philly model assignment) [choice].
POLLUX_GPU_HOURS = {"cifar10": (0.1, 1.0), "ncf": (0.1, 1.0), "deepspeech2": (1.0, 10.0),
                    "bert": (1.0, 10.0), "yolov3": (10.0, 100.0), "imagenet": (100.0, 500.0)}


def trace_root(root: str | Path | None = None) -> Path:
    """The folder holding the trace folders: ``root``, or the copy shipped with the package."""
    if root is None:
        return Path(str(resources.files("oasis_opt") / "data" / "traces"))
    path = Path(root)
    if not path.is_dir():
        raise ValueError(f"root: {path} is not a folder")
    return path


# ---- strict CSV reading -------------------------------------------------------------------------
def _parse_int(minimum: int) -> Callable[[str], int]:
    def parse(v: str) -> int:
        try:
            x = float(v)
        except ValueError:
            raise ValueError(f"expected an integer, got {v!r}") from None
        if not math.isfinite(x) or x != int(x):
            raise ValueError(f"expected an integer, got {v!r}")
        if x < minimum:
            raise ValueError(f"must be >= {minimum}, got {v!r}")
        return int(x)
    return parse


def _parse_float(minimum: float, strict: bool = False) -> Callable[[str], float]:
    def parse(v: str) -> float:
        try:
            x = float(v)
        except ValueError:
            raise ValueError(f"expected a number, got {v!r}") from None
        if not math.isfinite(x):
            raise ValueError(f"must be finite, got {v!r}")
        if x < minimum or (strict and x == minimum):
            raise ValueError(f"must be {'>' if strict else '>='} {minimum:g}, got {v!r}")
        return x
    return parse


def _parse_str(v: str) -> str:
    if not v.strip():
        raise ValueError("expected a non-empty value")
    return v.strip()


def _parse_time(v: str) -> datetime:
    try:
        return datetime.strptime(v.strip(), TIME_FORMAT)
    except ValueError:
        raise ValueError(f"expected a time {TIME_FORMAT!r}, got {v!r}") from None


def read_csv(path: str | Path, columns: Sequence[str],
             parsers: dict[str, Callable[[str], object]]) -> list[dict]:
    """Rows of a CSV with exactly the header ``columns``, each field parsed by ``parsers``.

    Every error is a ``FormatError`` whose field is ``"<file> row <n> column <name>"`` (the
    header is row 1). Each row dict also carries ``_row``, its row number.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise FormatError(str(path), f"cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise FormatError(str(path), f"not a UTF-8 text file ({e.reason})") from None
    lines = list(csv.reader(text.splitlines()))
    if not lines:
        raise FormatError(f"{path.name} row 1", "empty file: no header")
    header = [h.strip() for h in lines[0]]
    if header != list(columns):
        raise FormatError(f"{path.name} row 1", f"expected the header {','.join(columns)}, "
                          f"got {','.join(header)}")
    out = []
    for n, fields in enumerate(lines[1:], start=2):
        if not fields or (len(fields) == 1 and not fields[0].strip()):
            continue  # blank line
        if len(fields) < len(columns):
            raise FormatError(f"{path.name} row {n} column {columns[len(fields)]}",
                              f"missing (expected {len(columns)} fields, got {len(fields)})")
        if len(fields) > len(columns):
            raise FormatError(f"{path.name} row {n}", f"extra field after column {columns[-1]} "
                              f"(expected {len(columns)} fields, got {len(fields)})")
        row: dict = {"_row": n}
        for col, v in zip(columns, fields):
            try:
                row[col] = parsers[col](v)
            except ValueError as e:
                raise FormatError(f"{path.name} row {n} column {col}", str(e)) from None
        out.append(row)
    return out


# ---- Philly --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PhillyJob:
    row: int
    submitted: datetime
    duration_s: float
    gpus: int
    cluster: str


def read_philly(path: str | Path) -> list[PhillyJob]:
    """The Philly digest (columns ``PHILLY_COLUMNS``), checked row by row; ``gpu_time`` must
    equal ``duration * num_gpus``."""
    rows = read_csv(path, PHILLY_COLUMNS, {
        "timestamp": _parse_time, "submit_s": _parse_int(0),
        "duration": _parse_float(0.0, strict=True), "num_gpus": _parse_int(1),
        "gpu_time": _parse_float(0.0), "cluster": _parse_str})
    name = Path(path).name
    for r in rows:
        expect = r["duration"] * r["num_gpus"]
        if not math.isclose(r["gpu_time"], expect, rel_tol=1e-6, abs_tol=1e-6):
            raise FormatError(f"{name} row {r['_row']} column gpu_time",
                              f"{r['gpu_time']:g} != duration x num_gpus = {expect:g}")
    return [PhillyJob(r["_row"], r["timestamp"], r["duration"], r["num_gpus"], r["cluster"])
            for r in rows]


def _window(start: str, days) -> tuple[datetime, datetime]:
    if isinstance(days, bool) or not isinstance(days, (int, float)) or not math.isfinite(days) \
            or days <= 0:
        raise ValueError(f"days: must be a number > 0, got {days!r}")
    for fmt in (TIME_FORMAT, "%Y-%m-%d"):
        try:
            t0 = datetime.strptime(str(start), fmt)
            break
        except ValueError:
            continue
    else:
        raise ValueError(f"start: expected YYYY-MM-DD or {TIME_FORMAT!r}, got {start!r}")
    return t0, t0 + timedelta(days=float(days))


def philly_jobs(start: str = "2017-11-01", days: float = 30, *, source: str = "month",
                root: str | Path | None = None, clusters: Sequence[str] | None = None
                ) -> list[PhillyJob]:
    """Jobs submitted in [start, start + days) (``source``: "month", every job of November 2017;
    "multigpu", the jobs with >= 2 GPUs of the whole trace), optionally only some virtual
    clusters. A window reaching outside the file's coverage is a ValueError."""
    if source not in PHILLY_SOURCES:
        raise ValueError(f"source: expected one of {', '.join(PHILLY_SOURCES)}, got {source!r}")
    t0, t1 = _window(start, days)
    jobs = read_philly(trace_root(root) / "philly" / PHILLY_SOURCES[source])
    if source == "month":
        lo, hi = datetime(2017, 11, 1), datetime(2017, 12, 1)
    else:
        lo = datetime.combine(min(j.submitted for j in jobs).date(), datetime.min.time())
        hi = datetime.combine(max(j.submitted for j in jobs).date(), datetime.min.time()) \
            + timedelta(days=1)  # whole days
    if t0 < lo or t1 > hi:
        raise ValueError(f"start/days: the window {t0} .. {t1} is not inside the {source!r} "
                         f"digest ({lo} .. {hi})" + ("; use source='multigpu' for jobs with >= 2 "
                                                     "GPUs from 2017-09-04 to 2017-12-22"
                                                     if source == "month" else ""))
    out = [j for j in jobs if t0 <= j.submitted < t1]
    if clusters is not None:
        wanted = set(clusters)
        unknown = wanted - {j.cluster for j in jobs}
        if unknown:
            raise ValueError(f"clusters: unknown virtual cluster {sorted(unknown)[0]!r}")
        out = [j for j in out if j.cluster in wanted]
    return out


# ---- clusters ------------------------------------------------------------------------------------
PHILLY_FULL_SIZE = {"racks": 55, "servers_per_rack": 8, "ps_per_rack": 2}
"""``philly_cluster`` / ``philly_instance`` arguments of a cluster of Philly's full size, about
550 servers [choice: counted as H + K, as the OASiS grid counts servers]: 55 racks of 8 GPU
servers and 2 PS servers, H = 440 (3,520 GPUs; Philly's real machines also had 2-GPU servers,
about 2,500 GPUs in all) and K = 110. The default cluster (10 racks of 8 + 4) has 120."""


def philly_cluster(racks: int = 10, servers_per_rack: int = 8, ps_per_rack: int = 4):
    """Worker and PS servers of a Philly-like cluster (module docstring), rack by rack."""
    racks = check_int("racks", racks, 1)
    servers_per_rack = check_int("servers_per_rack", servers_per_rack, 1)
    ps_per_rack = check_int("ps_per_rack", ps_per_rack, 1)
    gpu = {"gpu": 8.0, "cpu": 48.0, "mem": 256.0, "storage": 2000.0, "bw": 40.0}
    cpu = {"gpu": 0.0, "cpu": 32.0, "mem": 128.0, "storage": 2000.0, "bw": 100.0}
    workers = tuple(Server(f"r{r:02d}-gpu{s:02d}", dict(gpu), f"rack-{r:02d}", "philly-8gpu")
                    for r in range(racks) for s in range(servers_per_rack))
    pss = tuple(Server(f"r{r:02d}-cpu{s:02d}", dict(cpu), f"rack-{r:02d}", "philly-cpu")
                for r in range(racks) for s in range(ps_per_rack))
    return workers, pss


def read_pai_machines(path: str | Path) -> list[dict]:
    rows = read_csv(path, PAI_COLUMNS, {
        "machine": _parse_str, "gpu_type": _parse_str, "cap_cpu": _parse_float(0.0, strict=True),
        "cap_mem": _parse_float(0.0, strict=True), "cap_gpu": _parse_int(0)})
    name = Path(path).name
    seen = set()
    for r in rows:
        if r["machine"] in seen:
            raise FormatError(f"{name} row {r['_row']} column machine",
                              f"duplicate machine {r['machine']!r}")
        seen.add(r["machine"])
        if (r["gpu_type"] == "CPU") != (r["cap_gpu"] == 0):
            raise FormatError(f"{name} row {r['_row']} column cap_gpu",
                              f"gpu_type {r['gpu_type']!r} with {r['cap_gpu']} GPUs")
    return rows


def pai_cluster(root: str | Path | None = None, *, machines: int | None = None,
                ps_machines: int | None = None, seed: int = 0, rack_size: int = 16):
    """Worker servers (GPU machines) and PS servers (CPU machines) of the PAI 2020 cluster.

    ``machines``: keep this many GPU machines, sampled per GPU type in proportion (largest
    remainders), seeded; None keeps all 1,814. ``ps_machines``: CPU machines kept (None: all 83,
    or, when sampling, the same fraction, at least one). Server kind = GPU type (its speed in
    ``costmodel.models.GPU_SPEED``).
    """
    seed = check_seed(seed)
    rack_size = check_int("rack_size", rack_size, 1)
    rows = read_pai_machines(trace_root(root) / "pai-2020" / "pai_machine_spec.csv")
    gpu_rows = [r for r in rows if r["cap_gpu"] > 0]
    cpu_rows = [r for r in rows if r["cap_gpu"] == 0]
    rng = np.random.default_rng(seed)
    if machines is not None:
        machines = check_int("machines", machines, 1)
        if machines > len(gpu_rows):
            raise ValueError(f"machines: at most {len(gpu_rows)} GPU machines, got {machines}")
        gpu_rows = _stratified(rng, gpu_rows, machines)
        if ps_machines is None:
            ps_machines = max(1, round(len(cpu_rows) * machines / len(rows)))
    if ps_machines is not None:
        ps_machines = check_int("ps_machines", ps_machines, 1)
        if ps_machines > len(cpu_rows):
            raise ValueError(f"ps_machines: at most {len(cpu_rows)} CPU machines, "
                             f"got {ps_machines}")
        keep = np.sort(rng.choice(len(cpu_rows), size=ps_machines, replace=False))
        cpu_rows = [cpu_rows[i] for i in keep]
    # racks: GPU machines grouped by type in file order, rack_size per rack
    racks: list[str] = []
    workers = []
    by_type: dict[str, list[dict]] = {}
    for r in gpu_rows:
        by_type.setdefault(r["gpu_type"], []).append(r)
    for gtype in sorted(by_type):
        for n, r in enumerate(by_type[gtype]):
            rack = f"rack-{gtype}-{n // rack_size:03d}"
            if not racks or racks[-1] != rack:
                racks.append(rack)
            workers.append(Server(f"pai-{r['machine']}", {
                "gpu": float(r["cap_gpu"]), "cpu": r["cap_cpu"], "mem": r["cap_mem"],
                "storage": 2000.0, "bw": 12.5 * r["cap_gpu"]}, rack, gtype))
    pss = tuple(Server(f"pai-{r['machine']}", {"gpu": 0.0, "cpu": r["cap_cpu"], "mem": r["cap_mem"],
                                                "storage": 2000.0, "bw": 100.0},
                       racks[n % len(racks)], r["gpu_type"]) for n, r in enumerate(cpu_rows))
    return tuple(workers), pss


def _stratified(rng, rows: list[dict], n: int) -> list[dict]:
    types = sorted({r["gpu_type"] for r in rows})
    groups = {t: [r for r in rows if r["gpu_type"] == t] for t in types}
    quota = {t: n * len(groups[t]) / len(rows) for t in types}
    take = {t: int(math.floor(q)) for t, q in quota.items()}
    for t in sorted(types, key=lambda t: (-(quota[t] - take[t]), t))[: n - sum(take.values())]:
        take[t] += 1
    out = []
    for t in types:
        idx = np.sort(rng.choice(len(groups[t]), size=take[t], replace=False))
        out += [groups[t][i] for i in idx]
    return out


# ---- trace jobs -> instance ----------------------------------------------------------------------
@dataclass(frozen=True)
class TraceJob:
    """One rigid trace job before mapping: submitted ``offset_s`` after the window start."""

    key: str
    offset_s: float
    duration_s: float
    gpus: int
    provenance: dict


def trace_instance(jobs: Sequence[TraceJob], workers, pss, *, seed: int, slot_s: float,
                   tail: int = 24, horizon: int | None = None, class_mix=DEFAULT_CLASS_MIX,
                   priority=(1.0, 100.0), oversubscription: float | None = None,
                   progress: str = "chunk-time", meta: dict | None = None,
                   model_of: Callable[[TraceJob, float], str] | None = None) -> Instance:
    """Map rigid trace jobs to the paper's model (module docstring) on the given servers.

    ``model_of(job, coin)``: the job's model name (default: Pollux's rule by GPU-time).
    ``oversubscription``: if given, the instance carries ``Topology.from_racks`` with it.
    """
    seed = check_seed(seed)
    slot_s = check_positive("slot_s", slot_s)
    tail = check_int("tail", tail, 0)
    class_mix = check_class_mix(class_mix)
    priority = check_interval("priority", priority)
    if progress not in ("chunk-time", "placement"):
        raise ValueError(f"progress: expected 'chunk-time' or 'placement', got {progress!r}")
    if not jobs:
        raise ValueError("jobs: no trace job in the window")
    r_util, r_model = np.random.default_rng(seed).spawn(2)
    classes, utilities = sample_utilities(r_util, len(jobs), class_mix, priority)
    coins = r_model.random(len(jobs))
    model_of = model_of or (lambda j, coin: pollux_model_for_gpu_hours(
        j.duration_s * j.gpus / 3600.0, coin))
    out, last = [], 1
    for n, j in enumerate(jobs):
        arrival = int(j.offset_s // slot_s) + 1
        epochs = max(1, math.ceil(j.duration_s / slot_s))
        x = j.duration_s / (slot_s * epochs)
        u = utilities[n]
        utility = Utility.sigmoid(u.priority, u.decay, u.target + epochs - 1)
        prov = {**j.provenance, "duration_s": j.duration_s, "num_gpus": j.gpus,
                "model": model_of(j, float(coins[n])), "slot_s": slot_s}
        job = Job(j.key, arrival, epochs, j.gpus, x, dict(WORKER_DEMAND),
                  {**PS_DEMAND, "bw": WORKER_DEMAND["bw"] * min(j.gpus, WORKERS_PER_PS)},
                  utility, JOB_CLASSES[int(classes[n])], prov)
        last = max(last, arrival + job.min_duration - 1)
        out.append(job)
    T = last + tail if horizon is None else check_int("horizon", horizon, last)
    base = Instance(T, RESOURCES, tuple(workers), tuple(pss), tuple(out), progress=progress,
                    meta={**(meta or {}), "seed": seed, "slot_s": slot_s})
    if oversubscription is None:
        return base
    return Instance(T, RESOURCES, base.worker_servers, base.ps_servers, base.jobs,
                    Topology.from_racks(base, check_positive("oversubscription", oversubscription)),
                    progress, dict(base.meta, oversubscription=oversubscription))


def philly_instance(start: str = "2017-11-01", days: float = 30, seed: int = 0, *,
                    slot_s: float = 3600.0, source: str = "month", cluster: str = "philly",
                    racks: int = 10, servers_per_rack: int = 8, ps_per_rack: int = 4,
                    pai_machines: int | None = 128, clusters: Sequence[str] | None = None,
                    max_jobs: int | None = None, tail: int = 24, horizon: int | None = None,
                    oversubscription: float | None = None, progress: str = "chunk-time",
                    root: str | Path | None = None) -> Instance:
    """An instance of the Philly jobs submitted in [start, start + days) (module docstring).

    ``cluster``: "philly" (``philly_cluster(racks, servers_per_rack, ps_per_rack)``) or "pai"
    (``pai_cluster(machines=pai_machines, seed=seed)``); ``**PHILLY_FULL_SIZE`` gives Philly's
    full size, 550 servers (a month there is over ``solve``'s default work limit: pass
    ``max_work=math.inf``). ``clusters``: keep only these virtual
    clusters. ``max_jobs``: keep the first jobs only (quick runs). Entry point of
    ``oasis-opt generate --trace philly --start ... --days ...``.
    """
    if cluster not in ("philly", "pai"):
        raise ValueError(f"cluster: expected 'philly' or 'pai', got {cluster!r}")
    t0, _ = _window(start, days)
    rows = philly_jobs(start, days, source=source, root=root, clusters=clusters)
    if max_jobs is not None:
        rows = rows[: check_int("max_jobs", max_jobs, 1)]
    name = PHILLY_SOURCES[source]
    jobs = [TraceJob(f"philly-{r.row:05d}", (r.submitted - t0).total_seconds(), r.duration_s,
                     r.gpus, {"trace": f"philly/{name}", "row": r.row,
                              "timestamp": r.submitted.strftime(TIME_FORMAT),
                              "virtual_cluster": r.cluster}) for r in rows]
    workers, pss = (philly_cluster(racks, servers_per_rack, ps_per_rack) if cluster == "philly"
                    else pai_cluster(root, machines=pai_machines, seed=seed))
    meta = {"generator": "philly-trace", "start": t0.strftime(TIME_FORMAT), "days": days,
            "source": source, "cluster": cluster}
    return trace_instance(jobs, workers, pss, seed=seed, slot_s=slot_s, tail=tail,
                          horizon=horizon, oversubscription=oversubscription, progress=progress,
                          meta=meta)


def pollux_instance(workload: int = 1, seed: int = 0, *, slot_s: float = 600.0,
                    racks: int = 4, servers_per_rack: int = 4, ps_per_rack: int = 2,
                    tail: int = 24, oversubscription: float | None = None,
                    progress: str = "chunk-time", root: str | Path | None = None) -> Instance:
    """One of the 8 Pollux evaluation workloads (160 jobs in 8 hours) on a Philly-like cluster.

    Jobs have no duration in the file: GPU-time is drawn log-uniformly in the application's
    Pollux class (``POLLUX_GPU_HOURS``, seeded) and divided by ``num_replicas``.
    """
    workload = check_int("workload", workload, 1)
    if workload > 8:
        raise ValueError(f"workload: the Pollux study has workloads 1..8, got {workload}")
    path = trace_root(root) / "pollux-workloads" / f"workload-{workload}.csv"
    rows = read_csv(path, POLLUX_COLUMNS, {
        "name": _parse_str, "time": _parse_float(0.0), "application": _parse_str,
        "num_replicas": _parse_int(1), "batch_size": _parse_int(1)})
    for r in rows:
        if r["application"] not in POLLUX_GPU_HOURS:
            raise FormatError(f"{path.name} row {r['_row']} column application",
                              f"unknown application {r['application']!r} "
                              f"(known: {', '.join(POLLUX_GPU_HOURS)})")
    rows.sort(key=lambda r: (r["time"], r["_row"]))
    rng = np.random.default_rng([check_seed(seed), 1])
    jobs, apps = [], {}
    for r in rows:
        apps[f"pollux{workload}-{r['name']}"] = r["application"]
        lo, hi = POLLUX_GPU_HOURS[r["application"]]
        gpu_h = math.exp(rng.uniform(math.log(lo), math.log(hi)))
        jobs.append(TraceJob(f"pollux{workload}-{r['name']}", r["time"],
                             gpu_h * 3600.0 / r["num_replicas"], r["num_replicas"],
                             {"trace": f"pollux-workloads/{path.name}", "row": r["_row"],
                              "batch_size": r["batch_size"], "gpu_hours": gpu_h}))
    workers, pss = philly_cluster(racks, servers_per_rack, ps_per_rack)
    return trace_instance(jobs, workers, pss, seed=seed, slot_s=slot_s, tail=tail,
                          oversubscription=oversubscription, progress=progress,
                          meta={"generator": "pollux-workload", "workload": workload},
                          model_of=lambda j, coin: apps[j.key])


def read_cluster_spec(path: str | Path) -> dict:
    """A Tiresias ``cluster_spec.csv`` (one data row)."""
    rows = read_csv(path, CLUSTER_SPEC_COLUMNS, {c: _parse_int(1) for c in CLUSTER_SPEC_COLUMNS})
    if len(rows) != 1:
        raise FormatError(f"{Path(path).name} row 2", f"expected one data row, got {len(rows)}")
    return rows[0]


def tiresias_instance(seed: int = 0, *, spec: str = "cluster_spec.csv", slot_s: float = 60.0,
                      ps_per_rack: int = 4, tail: int = 24, oversubscription: float | None = None,
                      progress: str = "chunk-time", root: str | Path | None = None) -> Instance:
    """The Tiresias simulator's 60-job example on its cluster spec (switch -> node -> GPU).

    Each switch becomes a rack of ``num_node_p_switch`` GPU nodes plus ``ps_per_rack`` PS
    servers [choice: Tiresias co-locates PSs with workers; our model keeps two pools]. Jobs keep
    their ``model_name`` (every one is in ``costmodel.models``).
    """
    folder = trace_root(root) / "tiresias"
    sp = read_cluster_spec(folder / spec)
    path = folder / "60_job.csv"
    rows = read_csv(path, TIRESIAS_COLUMNS, {
        "job_id": _parse_int(0), "num_gpu": _parse_int(1), "submit_time": _parse_float(0.0),
        "iterations": _parse_int(1), "model_name": _parse_str,
        "duration": _parse_float(0.0, strict=True), "interval": _parse_float(0.0)})
    from ..costmodel.models import MODELS

    for r in rows:
        if r["model_name"] not in MODELS:
            raise FormatError(f"{path.name} row {r['_row']} column model_name",
                              f"unknown model {r['model_name']!r}")
        if r["num_gpu"] > sp["num_node_p_switch"] * sp["num_gpu_p_node"] * sp["num_switch"]:
            raise FormatError(f"{path.name} row {r['_row']} column num_gpu",
                              f"{r['num_gpu']} GPUs exceed the cluster")
    rows.sort(key=lambda r: (r["submit_time"], r["_row"]))
    g, c, m = sp["num_gpu_p_node"], sp["num_cpu_p_node"], sp["mem_p_node"]
    for col, have, need in (("num_cpu_p_node", c, "cpu"), ("mem_p_node", m, "mem")):
        if have < g * WORKER_DEMAND[need]:
            raise FormatError(f"{spec} row 2 column {col}", f"{have} is less than "
                              f"{WORKER_DEMAND[need]:g} per GPU x {g} GPUs (a worker's demand)")
    worker = {"gpu": float(g), "cpu": float(c), "mem": float(m), "storage": 2000.0,
              "bw": WORKER_DEMAND["bw"] * g}
    workers = tuple(Server(f"sw{s}-node{n:02d}", dict(worker), f"rack-{s}", "tiresias-node")
                    for s in range(sp["num_switch"]) for n in range(sp["num_node_p_switch"]))
    pss = tuple(Server(f"sw{s}-ps{n}", {"gpu": 0.0, "cpu": 32.0, "mem": 128.0, "storage": 2000.0,
                                        "bw": 100.0}, f"rack-{s}", "tiresias-ps")
                for s in range(sp["num_switch"])
                for n in range(check_int("ps_per_rack", ps_per_rack, 1)))
    models = {f"tiresias-{r['job_id']}": r["model_name"] for r in rows}
    jobs = [TraceJob(f"tiresias-{r['job_id']}", r["submit_time"], r["duration"], r["num_gpu"],
                     {"trace": "tiresias/60_job.csv", "row": r["_row"],
                      "iterations": r["iterations"]})
            for r in rows]
    return trace_instance(jobs, workers, pss, seed=seed, slot_s=slot_s, tail=tail,
                          oversubscription=oversubscription, progress=progress,
                          meta={"generator": "tiresias-trace", "spec": spec},
                          model_of=lambda j, coin: models[j.key])


# ---- Helios utilisation series -------------------------------------------------------------------
def load_helios_utilisation(root: str | Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(times as datetime64[s], GPU utilisation in [0, 1]) of the Helios Earth VC every 10 min.

    Checks that ``gpu_utilization`` = running / total GPUs (to the file's 3 decimals)."""
    path = trace_root(root) / "helios-util" / "earth_vc6YE_10min.csv"
    rows = read_csv(path, HELIOS_COLUMNS, {
        "time": _parse_time, "total_gpu_num": _parse_int(1), "running_gpu_num": _parse_int(0),
        "pending_gpu_num": _parse_int(0), "gpu_utilization": _parse_float(0.0),
        "running_job_num": _parse_int(0), "pending_job_num": _parse_int(0)})
    for r in rows:
        expect = r["running_gpu_num"] / r["total_gpu_num"]
        if r["gpu_utilization"] > 1 or abs(r["gpu_utilization"] - expect) > 6e-4:
            raise FormatError(f"{path.name} row {r['_row']} column gpu_utilization",
                              f"{r['gpu_utilization']:g} != running / total = {expect:.4f}")
    times = np.array([r["time"] for r in rows], dtype="datetime64[s]")
    return times, np.array([r["gpu_utilization"] for r in rows])
