"""The Microsoft Philly trace (2017): the jobs of a submission window on a Philly-like cluster
(racks of 8-GPU servers, 48 vCPUs, 256 GB, 40 Gbps = 8 workers of 5 Gbps, with PS servers of 32
vCPUs, 128 GB, 100 Gbps in every rack [choice]) or on PAI's machines. The mapping of a trace job
to the paper's model is ``trace_common``'s.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Sequence

from ..model import Instance, Server
from ..model.io import FormatError
from ._common import check_int
from .pai import pai_cluster
from .trace_common import (TIME_FORMAT, TraceJob, parse_float, parse_int, parse_str,
                           parse_time, _window, read_csv, trace_instance, trace_root)

PHILLY_SOURCES = {"month": "philly_2017-11.csv", "multigpu": "philly_multigpu.csv"}
PHILLY_COLUMNS = ("timestamp", "submit_s", "duration", "num_gpus", "gpu_time", "cluster")


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
        "timestamp": parse_time, "submit_s": parse_int(0),
        "duration": parse_float(0.0, strict=True), "num_gpus": parse_int(1),
        "gpu_time": parse_float(0.0), "cluster": parse_str})
    name = Path(path).name
    for r in rows:
        expect = r["duration"] * r["num_gpus"]
        if not math.isclose(r["gpu_time"], expect, rel_tol=1e-6, abs_tol=1e-6):
            raise FormatError(f"{name} row {r['_row']} column gpu_time",
                              f"{r['gpu_time']:g} != duration x num_gpus = {expect:g}")
    return [PhillyJob(r["_row"], r["timestamp"], r["duration"], r["num_gpus"], r["cluster"])
            for r in rows]



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
