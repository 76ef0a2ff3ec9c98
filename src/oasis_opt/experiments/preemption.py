"""The preemption experiment: the priority policies and Tiresias on the Philly-derived workload
with priority classes and a CPU mode (``workloads.priority``), at several loads and seeds.
``oasis-opt reproduce preemption`` draws it (``figures.preemption``).

One run per (policy, load, seed), stored as ``<results>/preemption/<key>.json`` (atomically;
stored runs are reused, so a killed sweep resumes; delete the folder after changing the code):
the schedule is validated (``oasis_opt.validate``) and ``sim.preemption.preemption_metrics``
recorded. Runs are short (seconds) and go in-process, in a fixed order.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..model.io import jsonable, read_json, write_json_atomic

POLICIES = ("priority-degrade", "priority-kill", "priority-nopreempt", "tiresias")
CLASSES = ("high", "mid", "low")
# the priority policies' options: a looser cap and delta than their defaults (10 %, 0.2), under
# which this workload sees preemption at all (with the defaults a handful of jobs are stopped)
OPTIONS = {"cap": 0.25, "delta": 0.1}
FULL = {"policies": POLICIES, "loads": (1.0, 2.0, 4.0), "seeds": (0, 1, 2), "max_jobs": 200,
        "options": OPTIONS}
QUICK = {"policies": POLICIES, "loads": (2.0,), "seeds": (0, 1), "max_jobs": 60,
         "options": OPTIONS}
SLOT_S = 600.0


def settings(quick: bool) -> dict:
    return QUICK if quick else FULL


def key(policy: str, load: float, seed: int, max_jobs: int) -> str:
    return f"{policy}-load{load:g}-s{seed}-n{max_jobs}"


def run(policy: str, load: float, seed: int, max_jobs: int) -> dict[str, Any]:
    """One run: the workload, the policy (its seed = the workload's), validation, metrics."""
    from .. import solve, validate
    from ..sim.preemption import preemption_metrics
    from ..workloads.priority import priority_instance

    inst = priority_instance(load, seed, max_jobs=max_jobs, slot_s=SLOT_S)
    # Tiresias's queue thresholds are in seconds of GPU time: tell it the slot length
    opts = OPTIONS if policy.startswith("priority-") else {"slot_seconds": SLOT_S}
    sched = solve(inst, policy, seed=seed, **opts)
    report = validate(inst, sched)
    return {"policy": policy, "load": load, "seed": seed, "jobs": inst.I,
            "horizon": inst.horizon, "valid": report.ok, "violations": str(report)[:2000],
            **preemption_metrics(inst, sched, SLOT_S)}


def compute(quick: bool = False, results: str | Path = "results", workers: int | None = None,
            address: str | None = None, progress: bool = True) -> dict[str, Any]:
    """Every run, computed or loaded: ``{"runs": {key: record}, "settings": ...}``.
    ``workers`` and ``address`` are not used (the runs take seconds)."""
    s = settings(quick)
    root = Path(results) / "preemption"
    tasks = [(p, load, seed) for load in s["loads"] for seed in s["seeds"] for p in s["policies"]]
    data: dict[str, Any] = {"quick": quick, "settings": s, "runs": {}, "computed": 0}
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(tasks), desc=f"preemption{' (quick)' if quick else ''}", unit="run")
    for p, load, seed in tasks:
        k = key(p, load, seed, s["max_jobs"])
        path = root / f"{k}.json"
        if path.is_file():
            data["runs"][k] = read_json(path)
        else:
            rec = jsonable(run(p, load, seed, s["max_jobs"]))
            write_json_atomic(path, rec)
            data["runs"][k] = rec
            data["computed"] += 1
        if bar is not None:
            bar.update()
    if bar is not None:
        bar.close()
    return data


def records(data, policy: str, load: float) -> list[dict]:
    s = data["settings"]
    return [data["runs"][key(policy, load, seed, s["max_jobs"])] for seed in s["seeds"]]
