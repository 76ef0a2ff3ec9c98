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
from typing import Iterable, Sequence

from ..model import Instance, Server
from ..model.io import FormatError
from ._common import check_choice, check_int, check_object
from .pai import pai_cluster
from .trace_common import (TIME_FORMAT, TraceJob, TraceMapping, parse_float, parse_int,
                           parse_str, parse_time, _window, read_csv, trace_instance, trace_root)

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
"""``philly_cluster`` / ``PhillyCluster`` arguments of a cluster of Philly's full size, about
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


@dataclass(frozen=True, kw_only=True)
class PhillyCluster:
    """The servers ``philly_instance`` maps the jobs onto (keyword fields; checked when built,
    ``ValueError`` naming the field). The defaults: the 120-server Philly-like cluster.

    * ``kind``: "philly", racks of 8-GPU servers with PS servers in every rack (module
      docstring; ``philly_cluster(racks, servers_per_rack, ps_per_rack)``), or "pai", PAI 2020's
      machines (``pai_cluster(machines=pai_machines, seed=seed)``, sampled with the instance's
      seed);
    * ``racks``, ``servers_per_rack``, ``ps_per_rack`` (integers >= 1; 10, 8, 4): the Philly-like
      shape (kind "philly"); ``PhillyCluster(**PHILLY_FULL_SIZE)`` is Philly's full size;
    * ``pai_machines`` (an integer >= 1, or None: all 1,814; 128): the GPU machines kept
      (kind "pai").
    """

    kind: str = "philly"
    racks: int = 10
    servers_per_rack: int = 8
    ps_per_rack: int = 4
    pai_machines: int | None = 128

    def __post_init__(self) -> None:
        check_choice("kind", self.kind, ("philly", "pai"))
        for name in ("racks", "servers_per_rack", "ps_per_rack"):
            check_int(name, getattr(self, name), 1)
        if self.pai_machines is not None:
            check_int("pai_machines", self.pai_machines, 1)

    def servers(self, seed: int = 0, root: str | Path | None = None
                ) -> tuple[tuple[Server, ...], tuple[Server, ...]]:
        """(worker servers, PS servers); kind "pai" reads ``root``'s machine list (None: the
        packaged copy) and samples it with ``seed``."""
        if self.kind == "philly":
            return philly_cluster(self.racks, self.servers_per_rack, self.ps_per_rack)
        return pai_cluster(root, machines=self.pai_machines, seed=seed)


@dataclass(frozen=True, kw_only=True)
class PhillyFilter:
    """Which of the window's jobs ``philly_instance`` keeps (keyword fields; checked when built,
    ``ValueError`` naming the field). The defaults keep every job of November 2017's digest.

    * ``source``: the digest, "month" (every job of November 2017) or "multigpu" (the jobs with
      >= 2 GPUs of the whole trace); ``PHILLY_SOURCES``;
    * ``clusters`` (virtual cluster names, or None: all): keep only these virtual clusters (kept
      as a tuple; a name the digest does not have is a ``ValueError`` when the jobs are read);
    * ``max_jobs`` (an integer >= 1, or None: all): keep the first jobs only (quick runs).
    """

    source: str = "month"
    clusters: tuple[str, ...] | None = None
    max_jobs: int | None = None

    def __post_init__(self) -> None:
        check_choice("source", self.source, tuple(PHILLY_SOURCES))
        if self.clusters is not None:
            given = self.clusters
            names = tuple(given) if isinstance(given, Iterable) and not isinstance(given, str) \
                else ()
            if not names or not all(isinstance(n, str) and n for n in names):
                raise ValueError(f"clusters: expected virtual cluster names, got {self.clusters!r}")
            object.__setattr__(self, "clusters", names)
        if self.max_jobs is not None:
            check_int("max_jobs", self.max_jobs, 1)


def philly_instance(start: str = "2017-11-01", days: float = 30, seed: int = 0, *,
                    slot_s: float = 3600.0, cluster: PhillyCluster | None = None,
                    select: PhillyFilter | None = None, mapping: TraceMapping | None = None,
                    root: str | Path | None = None) -> Instance:
    """An instance of the Philly jobs submitted in [start, start + days) (module docstring), in
    slots of ``slot_s`` seconds.

    ``cluster``: the servers (``PhillyCluster``; None: the 120-server Philly-like cluster);
    ``PhillyCluster(**PHILLY_FULL_SIZE)`` is Philly's full size, 550 servers (a month there is
    over ``solve``'s default work limit: pass ``max_work=math.inf``). ``select``: the digest,
    virtual clusters and job count kept (``PhillyFilter``; None: every job of the month's
    digest). ``mapping``: the horizon, utilities, topology and progress model
    (``trace_common.TraceMapping``; None: its defaults). Entry point of
    ``oasis-opt generate --trace philly --start ... --days ...``.
    """
    cluster = check_object("cluster", cluster, PhillyCluster)
    select = check_object("select", select, PhillyFilter)
    t0, _ = _window(start, days)
    rows = philly_jobs(start, days, source=select.source, root=root, clusters=select.clusters)
    if select.max_jobs is not None:
        rows = rows[: int(select.max_jobs)]
    name = PHILLY_SOURCES[select.source]
    jobs = [TraceJob(f"philly-{r.row:05d}", (r.submitted - t0).total_seconds(), r.duration_s,
                     r.gpus, {"trace": f"philly/{name}", "row": r.row,
                              "timestamp": r.submitted.strftime(TIME_FORMAT),
                              "virtual_cluster": r.cluster}) for r in rows]
    workers, pss = cluster.servers(seed, root)
    meta = {"generator": "philly-trace", "start": t0.strftime(TIME_FORMAT), "days": days,
            "source": select.source, "cluster": cluster.kind}
    return trace_instance(jobs, workers, pss, seed=seed, slot_s=slot_s, mapping=mapping,
                          meta=meta)
