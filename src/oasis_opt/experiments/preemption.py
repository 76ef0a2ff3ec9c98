"""The preemption experiment: the priority policies, Tiresias and FIFO on the chain workload
(``workloads.priority.chain_instance``: Philly jobs near GPU saturation, priority classes in
waves, a CPU mode), at two saturations and five seeds. ``oasis-opt reproduce preemption``
draws it (``figures.preemption``).

The priority policies run at their defaults (delta 0.1, cap 25 %, score alone); the variants
``+bands`` add the band rule (``bands=True``) to show what it costs and saves. One run per
(policy, saturation, seed), stored as ``<results>/preemption/<key>.json`` (atomically; stored
runs are reused, so a killed sweep resumes; delete the folder after changing the code): the
schedule is validated (``oasis_opt.validate``) and ``sim.preemption.preemption_metrics``
recorded. Runs are short (about a second) and go in-process, in a fixed order.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..model.io import jsonable, read_json, write_json_atomic

POLICIES = ("priority-degrade", "priority-kill", "priority-checkpoint", "priority-nopreempt",
            "tiresias", "fifo", "priority-degrade+bands", "priority-kill+bands")
CLASSES = ("high", "mid", "low")
FULL = {"policies": POLICIES, "loads": (1.0, 1.5), "seeds": (0, 1, 2, 3, 4), "max_jobs": 200}
QUICK = {"policies": POLICIES, "loads": (1.5,), "seeds": (0, 1), "max_jobs": 60}
SLOT_S = 600.0


def settings(quick: bool) -> dict:
    return QUICK if quick else FULL


def key(policy: str, load: float, seed: int, max_jobs: int) -> str:
    """``load`` is the chain workload's saturation."""
    return f"{policy}-sat{load:g}-s{seed}-n{max_jobs}"


def policy_options(policy: str) -> tuple[str, dict]:
    """The registered policy and its options of a study policy name (``+bands``: the band
    rule on; Tiresias told the slot length, its queue thresholds being in GPU-seconds)."""
    if policy.endswith("+bands"):
        return policy[:-len("+bands")], {"bands": True}
    if policy == "tiresias":
        return policy, {"slot_seconds": SLOT_S}
    return policy, {}


def run(policy: str, load: float, seed: int, max_jobs: int) -> dict[str, Any]:
    """One run: the workload at saturation ``load``, the policy (its seed = the workload's),
    validation, metrics."""
    from .. import solve, validate
    from ..sim.preemption import preemption_metrics
    from ..workloads.priority import chain_instance

    inst = chain_instance(seed, saturation=load, max_jobs=max_jobs, slot_s=SLOT_S)
    name, opts = policy_options(policy)
    sched = solve(inst, name, seed=seed, **opts)
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
