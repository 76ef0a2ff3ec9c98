"""The Helios GPU utilisation series (SenseTime, 2020): the Earth virtual cluster every 10
minutes, what the utilisation predictors are fitted and scored on."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..model.io import FormatError
from .trace_common import parse_float, parse_int, parse_time, read_csv, trace_root

HELIOS_COLUMNS = ("time", "total_gpu_num", "running_gpu_num", "pending_gpu_num",
                  "gpu_utilization", "running_job_num", "pending_job_num")


def load_helios_utilisation(root: str | Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(times as datetime64[s], GPU utilisation in [0, 1]) of the Helios Earth VC every 10 min.

    Checks that ``gpu_utilization`` = running / total GPUs (to the file's 3 decimals)."""
    path = trace_root(root) / "helios-util" / "earth_vc6YE_10min.csv"
    rows = read_csv(path, HELIOS_COLUMNS, {
        "time": parse_time, "total_gpu_num": parse_int(1), "running_gpu_num": parse_int(0),
        "pending_gpu_num": parse_int(0), "gpu_utilization": parse_float(0.0),
        "running_job_num": parse_int(0), "pending_job_num": parse_int(0)})
    for r in rows:
        expect = r["running_gpu_num"] / r["total_gpu_num"]
        if r["gpu_utilization"] > 1 or abs(r["gpu_utilization"] - expect) > 6e-4:
            raise FormatError(f"{path.name} row {r['_row']} column gpu_utilization",
                              f"{r['gpu_utilization']:g} != running / total = {expect:.4f}")
    times = np.array([r["time"] for r in rows], dtype="datetime64[s]")
    return times, np.array([r["gpu_utilization"] for r in rows])
