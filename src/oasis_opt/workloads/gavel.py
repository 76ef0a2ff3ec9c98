"""Gavel's traces (Narayanan et al., OSDI 2020) as heterogeneous instances.

A Gavel trace (``*.trace``, made by Gavel's ``generate_trace.py``) is tab-separated, one job per
line, ten columns (``TRACE_COLUMNS``); Gavel's simulator reads only ``job_type``,
``total_steps``, ``scale_factor``, ``priority_weight`` and ``arrival_time``. The throughput table
(``simulation_throughputs.json``) maps ``gpu_type -> "(job_type, scale_factor)" -> "null" ->``
steps/s of the whole job running alone on ``scale_factor`` GPUs of that type (0: it cannot run
there). Malformed input raises ``FormatError`` naming the file, the line and the column
(``dev.trace line 3 column total_steps: ...``) or the throughput entry.

**Mapping a job to the model** [choice]. With slot length L (``slot_s``, Gavel's round, 360 s):

* **types**: the cluster has ``--cluster v:p:k`` GPUs of types v100, p100, k80 on servers of
  ``gpus_per_server`` GPUs of one type; a job gets ``types`` = the types of the cluster where its
  throughput T_g > 0; workers never span types (``span_types`` false, as in Gavel);
* **work units**: N_i = ``scale_factor`` (rigid: the Gavel policies give all N_i GPUs or none),
  E_i = 1, reference accelerator V100 (the generator's): one unit is q_i = T_v100 L / (N_i S)
  steps with S = ``SPEED_SCALE`` = 1000, so a V100 worker does u_i = S units per slot and a worker
  on type g does s_ig = round(S T_g / T_v100) >= 1 (relative rounding error <= 0.5 / s_ig;
  about 0.5% for the slowest K80 entries); the work is W_i = ceil(total_steps / q_i) units, i.e.
  x_i = total_steps / (q_i N_i S) V100-slots;
* **arrival**: a job submitted at t seconds joins Gavel's next round boundary, so
  a_i = ceil(t / L) + 1 (slot a covers [(a - 1) L, a L) seconds); ``provenance.arrival_s`` keeps
  t, from which the JCT metrics count (``sim.metrics.jct_metrics``);
* **utility** (Gavel's metrics are JCTs, not utilities): the paper's sigmoid with gamma1 = the
  trace's ``priority_weight``, target gamma3 = d_i, the job's isolated run time in slots (alone,
  all N_i GPUs, its fastest type: ceil(W_i / (N_i max_g s_ig))), and decay gamma2 = 1 / d_i, so
  utility halves when the JCT reaches twice the isolated run time; class ``time-sensitive``;
* **containers**: a worker is 1 GPU (and 1 unit of bandwidth, which never binds); Gavel's jobs
  have no parameter servers, so each running job takes one nominal PS on one PS server whose
  capacity never binds (constraint (6) with B_i = N_i b_i);
* **horizon**: the last arrival plus the sum of all isolated run times plus ``tail`` slots (room
  to run every job one after another on its fastest type).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ..model import Instance, Job, JobType, Server, Utility
from ..model.io import FormatError
from ._common import RESOURCES, check_int, check_positive, check_seed
from ..model.numerics import WORK_EPS

TRACE_COLUMNS = ("job_type", "command", "working_directory", "num_steps_arg", "needs_data_dir",
                 "total_steps", "scale_factor", "priority_weight", "SLO", "arrival_time")
GPU_TYPES = ("v100", "p100", "k80")  # Gavel's --cluster_spec order
REFERENCE_TYPE = "v100"  # the generator draws run times on V100
SPEED_SCALE = 1000  # units a reference (V100) worker does per slot
ROUND_S = 360.0  # Gavel's --time_per_iteration
WORKER = {"gpu": 1.0, "bw": 1.0}


@dataclass(frozen=True)
class GavelJob:
    """One line of a Gavel trace (the columns the simulator reads); ``line`` is 1-based."""

    line: int
    job_type: str
    total_steps: int
    scale_factor: int
    priority_weight: float
    arrival_s: float

    @property
    def key(self) -> str:
        """The throughput table's key: the string form of the tuple (job_type, scale_factor)."""
        return str((self.job_type, self.scale_factor))


def gavel_files(root: str | Path | None = None) -> dict[str, Path]:
    """Paths of the Gavel files shipped with the package (``oasis_opt/data/traces/gavel``) or
    under ``root`` laid out the same way: ``trace`` (dev.trace), ``throughputs`` and
    ``results`` (Gavel's own numbers on the dev trace)."""
    from .trace_common import trace_root

    folder = trace_root(root) / "gavel"
    return {"trace": folder / "dev.trace", "throughputs": folder / "throughputs.json",
            "results": folder / "results.csv"}


def gavel_validation(root: str | Path | None = None) -> list[dict[str, str | Path]]:
    """The validation traces shipped in ``gavel/validation`` (made by Gavel's generator, with
    Gavel's simulator's results; that folder's README): per trace ``name``, ``trace`` (its
    path), ``cluster`` (``v:p:k``), ``num_jobs``, ``lam`` and ``seed`` (the generator's), in
    ``traces.csv`` order; ``results`` and ``jcts`` (Gavel's numbers) are the folder's CSVs."""
    import csv

    from .trace_common import trace_root

    folder = trace_root(root) / "gavel" / "validation"
    with open(folder / "traces.csv") as f:
        rows = list(csv.DictReader(f))
    return [{"name": r["name"], "trace": folder / f"{r['name']}.trace",
             "cluster": r["cluster_spec"], "num_jobs": r["num_jobs"], "lam": r["lam"],
             "seed": r["seed"], "results": folder / "results.csv", "jcts": folder / "jcts.csv"}
            for r in rows]


def read_trace(path: str | Path) -> list[GavelJob]:
    """The jobs of a Gavel ``*.trace`` file, in line order (their Gavel job ids are 0, 1 ...)."""
    path = Path(path)
    text = _read_text(path)
    jobs = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        where = f"{path.name} line {n}"
        if len(fields) != len(TRACE_COLUMNS):
            col = TRACE_COLUMNS[min(len(fields), len(TRACE_COLUMNS) - 1)]
            raise FormatError(f"{where} column {col}" if len(fields) < len(TRACE_COLUMNS)
                              else where, f"expected {len(TRACE_COLUMNS)} tab-separated fields "
                              f"({', '.join(TRACE_COLUMNS)}), got {len(fields)}")
        row = dict(zip(TRACE_COLUMNS, fields))
        if not row["job_type"].strip():
            raise FormatError(f"{where} column job_type", "expected a non-empty job type")
        jobs.append(GavelJob(
            n, row["job_type"].strip(),
            _integer(row["total_steps"], f"{where} column total_steps", 1),
            _integer(row["scale_factor"], f"{where} column scale_factor", 1),
            _real(row["priority_weight"], f"{where} column priority_weight", strict=True),
            _real(row["arrival_time"], f"{where} column arrival_time", strict=False)))
        _real(row["SLO"], f"{where} column SLO", strict=False, minimum=-1.0)
    if not jobs:
        raise FormatError(path.name, "no job in the trace")
    for a, b in zip(jobs, jobs[1:]):
        if b.arrival_s < a.arrival_s:
            raise FormatError(f"{path.name} line {b.line} column arrival_time",
                              f"arrivals must not decrease ({b.arrival_s:g} after {a.arrival_s:g})")
    return jobs


def read_throughputs(path: str | Path) -> dict[str, dict[str, float]]:
    """``{gpu_type: {"(job_type, scale_factor)": steps/s alone}}`` from Gavel's table (the
    ``null`` entries; co-location pairs are for packing policies and are not read)."""
    path = Path(path)
    try:
        doc = json.loads(_read_text(path))
    except json.JSONDecodeError as e:
        raise FormatError(path.name, f"not JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(doc, dict):
        raise FormatError(path.name, "expected an object {gpu_type: {job_key: {...}}}")
    out: dict[str, dict[str, float]] = {}
    for gpu, table in doc.items():
        if not isinstance(table, dict):
            raise FormatError(f"{path.name}: {gpu}", "expected an object {job_key: {...}}")
        out[gpu] = {}
        for key, entry in table.items():
            where = f"{path.name}: {gpu}: {key}"
            if not isinstance(entry, dict) or "null" not in entry:
                raise FormatError(where, "expected an object with the isolated throughput 'null'")
            out[gpu][key] = _real(entry["null"], f"{where}: null", strict=False)
    return out


def parse_cluster(spec: str) -> dict[str, int]:
    """``"8:8:8"`` -> {"v100": 8, "p100": 8, "k80": 8} (Gavel's --cluster_spec order)."""
    parts = str(spec).split(":")
    if len(parts) != len(GPU_TYPES):
        raise ValueError(f"cluster: expected {':'.join(GPU_TYPES)} GPU counts such as 8:8:8, "
                         f"got {spec!r}")
    counts = {}
    for g, p in zip(GPU_TYPES, parts):
        try:
            counts[g] = check_int(f"cluster ({g})", int(p), 0)
        except ValueError:
            raise ValueError(f"cluster: {g}: expected a whole number of GPUs, got {p!r}") from None
    if not any(counts.values()):
        raise ValueError(f"cluster: no GPU at all in {spec!r}")
    return counts


def gavel_servers(counts: Mapping[str, int], gpus_per_server: int) -> tuple[list[Server], Server]:
    """Worker servers of ``gpus_per_server`` GPUs of one type (the last one of a type holds the
    rest), in Gavel's type order, and the one PS server (never binding)."""
    gpus_per_server = check_int("gpus_per_server", gpus_per_server, 1)
    servers = []
    for g in GPU_TYPES:
        left, n = counts.get(g, 0), 0
        while left > 0:
            k = min(gpus_per_server, left)
            servers.append(Server(f"{g}-{n}", {"gpu": float(k), "bw": float(k)}, rack=g,
                                  kind=f"{g}x{k}", accelerator=g))
            left, n = left - k, n + 1
    total = sum(counts.values())
    ps = Server("ps-0", {"bw": float(total * total)}, rack="ps", kind="nominal-ps")
    return servers, ps


def gavel_instance(trace: str | Path, throughputs: str | Path, *, cluster: str = "8:8:8",
                   gpus_per_server: int = 4, slot_s: float = ROUND_S, seed: int = 0,
                   tail: int = 24) -> Instance:
    """A Gavel trace on a Gavel cluster as an instance (module docstring)."""
    seed = check_seed(seed)  # nothing is random here; recorded for provenance
    slot_s = check_positive("slot_s", slot_s)
    tail = check_int("tail", tail, 0)
    counts = parse_cluster(cluster)
    workers, ps = gavel_servers(counts, gpus_per_server)
    table = read_throughputs(throughputs)
    jobs = read_trace(trace)
    present = [g for g in GPU_TYPES if counts[g] > 0]
    for g in (REFERENCE_TYPE, *present):
        if g not in table:
            raise FormatError(f"{Path(throughputs).name}: {g}", "missing GPU type")
    width = max(3, len(str(len(jobs) - 1)))
    out, last, busy = [], 1, 0
    for n, gj in enumerate(jobs):
        where = f"{Path(trace).name} line {gj.line}"
        rates = {}
        for g in (REFERENCE_TYPE, *present):
            if gj.key not in table[g]:
                raise FormatError(f"{Path(throughputs).name}: {g}: {gj.key}",
                                  f"missing (needed by {where})")
            rates[g] = table[g][gj.key]
        ref = rates[REFERENCE_TYPE]
        if ref <= 0:
            raise FormatError(f"{Path(throughputs).name}: {REFERENCE_TYPE}: {gj.key}: null",
                              f"the reference throughput must be > 0 (needed by {where})")
        speeds = {g: max(1, round(SPEED_SCALE * rates[g] / ref)) for g in present if rates[g] > 0}
        if not speeds:
            raise FormatError(f"{where} column job_type", f"{gj.key} cannot run on any GPU type "
                              f"of the cluster {cluster} (throughput 0 on each)")
        if gj.scale_factor > max(counts[g] for g in speeds):
            raise FormatError(f"{where} column scale_factor", f"{gj.scale_factor} GPUs do not "
                              f"fit on any type it can use in the cluster {cluster}")
        step_unit = ref * slot_s / (gj.scale_factor * SPEED_SCALE)  # q_i, steps per unit
        work = math.ceil(gj.total_steps / step_unit - WORK_EPS)
        chunk_time = work / (gj.scale_factor * SPEED_SCALE)  # x_i: W_i = ceil(N_i x_i u_i)
        arrival = math.ceil(gj.arrival_s / slot_s - WORK_EPS) + 1
        alone = -(-work // (gj.scale_factor * max(speeds.values())))  # d_i, isolated slots
        prov = {"trace_line": gj.line, "gavel_job_id": n, "job_type": gj.job_type,
                "total_steps": gj.total_steps, "scale_factor": gj.scale_factor,
                "arrival_s": gj.arrival_s, "steps_per_unit": step_unit,
                "throughput": {g: rates[g] for g in present}, "isolated_slots": alone}
        job = Job(f"job-{n:0{width}d}", arrival, 1, gj.scale_factor, chunk_time, dict(WORKER),
                  {"bw": float(gj.scale_factor)},
                  Utility.sigmoid(gj.priority_weight, 1.0 / alone, float(alone)),
                  "time-sensitive", prov, SPEED_SCALE,
                  {g: JobType(s) for g, s in speeds.items()}, False)
        if job.work != work:  # x_i is a float: W_i = ceil(N_i x_i u_i) must come back exact
            raise FormatError(f"{where} column total_steps", f"{gj.total_steps} steps are too "
                              "many to count in whole work units exactly")
        last, busy = max(last, arrival), busy + alone
        out.append(job)
    return Instance(last + busy + tail, RESOURCES, tuple(workers), (ps,), tuple(out),
                    meta={"source": "gavel", "trace": Path(trace).name, "cluster": cluster,
                          "gpus_per_server": gpus_per_server, "seed": seed, "slot_s": slot_s})


# ---- strict fields ------------------------------------------------------------------------------
def _read_text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as e:
        raise FormatError(str(path), f"cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise FormatError(str(path), f"not a UTF-8 text file ({e.reason})") from None


def _real(v, where: str, *, strict: bool, minimum: float = 0.0) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise FormatError(where, f"expected a number, got {v!r}") from None
    if not math.isfinite(x) or x < minimum or (strict and x == minimum):
        raise FormatError(where, f"must be a finite number {'>' if strict else '>='} "
                          f"{minimum:g}, got {v!r}")
    return x


def _integer(v: str, where: str, minimum: int) -> int:
    x = _real(v, where, strict=False, minimum=-math.inf)
    if x != int(x):
        raise FormatError(where, f"expected an integer, got {v!r}")
    if x < minimum:
        raise FormatError(where, f"must be >= {minimum}, got {v!r}")
    return int(x)
