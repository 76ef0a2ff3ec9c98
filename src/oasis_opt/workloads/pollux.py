"""The Pollux evaluation workloads (8 workloads of 160 jobs in 8 hours) on a Philly-like
cluster."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..model import Instance
from ..model.io import FormatError
from ._common import check_int, check_seed
from .philly import philly_cluster
from .trace_common import (TraceJob, TraceMapping, parse_float, parse_int, parse_str, read_csv,
                           trace_instance, trace_root)

POLLUX_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")

# Pollux workloads carry no durations: GPU-time drawn log-uniformly in the application's Pollux
# class (the classes of the Philly model assignment) [choice].
POLLUX_GPU_HOURS = {"cifar10": (0.1, 1.0), "ncf": (0.1, 1.0), "deepspeech2": (1.0, 10.0),
                    "bert": (1.0, 10.0), "yolov3": (10.0, 100.0), "imagenet": (100.0, 500.0)}


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
        "name": parse_str, "time": parse_float(0.0), "application": parse_str,
        "num_replicas": parse_int(1), "batch_size": parse_int(1)})
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
    mapping = TraceMapping(tail=tail, oversubscription=oversubscription, progress=progress)
    return trace_instance(jobs, workers, pss, seed=seed, slot_s=slot_s, mapping=mapping,
                          meta={"generator": "pollux-workload", "workload": workload},
                          model_of=lambda j, coin: apps[j.key])
