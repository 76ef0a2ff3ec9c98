"""The Tiresias simulator's 60-job example on its cluster spec (switch -> node -> GPU)."""
from __future__ import annotations

from pathlib import Path

from ..model import Instance, Server
from ..model.io import FormatError
from ._common import check_int
from .trace_common import (WORKER_DEMAND, TraceJob, TraceMapping, parse_float, parse_int,
                           parse_str, read_csv, trace_instance, trace_root)

TIRESIAS_COLUMNS = ("job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration",
                    "interval")
CLUSTER_SPEC_COLUMNS = ("num_switch", "num_node_p_switch", "num_gpu_p_node", "num_cpu_p_node",
                        "mem_p_node")


def read_cluster_spec(path: str | Path) -> dict:
    """A Tiresias ``cluster_spec.csv`` (one data row)."""
    rows = read_csv(path, CLUSTER_SPEC_COLUMNS, {c: parse_int(1) for c in CLUSTER_SPEC_COLUMNS})
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
        "job_id": parse_int(0), "num_gpu": parse_int(1), "submit_time": parse_float(0.0),
        "iterations": parse_int(1), "model_name": parse_str,
        "duration": parse_float(0.0, strict=True), "interval": parse_float(0.0)})
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
    mapping = TraceMapping(tail=tail, oversubscription=oversubscription, progress=progress)
    return trace_instance(jobs, workers, pss, seed=seed, slot_s=slot_s, mapping=mapping,
                          meta={"generator": "tiresias-trace", "spec": spec},
                          model_of=lambda j, coin: models[j.key])
