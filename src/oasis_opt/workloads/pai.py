"""The Alibaba PAI 2020 cluster: its real heterogeneous machines as worker and PS servers.

``pai_cluster``: the GPU machines (P100, T4: 2 GPUs; MISC, V100, V100M32: 8 GPUs) are the worker
servers and the CPU-only machines the PS pool, optionally a stratified seeded sample; NICs are
not in the spec: 12.5 Gbps per GPU and 100 Gbps for CPU machines [choice]; racks hold
``rack_size`` machines of one GPU type and the CPU machines are dealt round-robin over the
racks, so every rack has PS servers [choice].
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..model import Server
from ..model.io import FormatError
from ._common import check_int, check_seed
from .trace_common import parse_float, parse_int, parse_str, read_csv, trace_root

PAI_COLUMNS = ("machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu")


def read_pai_machines(path: str | Path) -> list[dict]:
    rows = read_csv(path, PAI_COLUMNS, {
        "machine": parse_str, "gpu_type": parse_str, "cap_cpu": parse_float(0.0, strict=True),
        "cap_mem": parse_float(0.0, strict=True), "cap_gpu": parse_int(0)})
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
