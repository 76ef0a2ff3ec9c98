"""OASiS against Gavel's policies on heterogeneous clusters: ``oasis-opt reproduce hetero``
(drawn by ``figures.hetero``).

Two workloads, every policy on the same instances:

* ``gavel``: Gavel's dev trace (``workloads.gavel``, 8 V100 + 8 P100 + 8 K80); the instance is
  deterministic, so only the policies that draw at random (``max-min-fairness``, ``gavel-fifo``
  with ``variant="gavel"``) run over several policy seeds;
* ``paper-sim``: ``paper_sim`` with a mixed worker pool (``cluster_mix``), over instance seeds
  (the policy's seed = the instance's).

OASiS's pricing follows the rule of the paper's figures (``figures.common``): ``oasis`` priced with
U and L estimated on history instances of the same workload (seeds 1000+, disjoint from the
evaluated ones; ``online.estimate.estimate_pricing``), ``oasis-oracle`` with the constants of
eqs. (23)-(26) computed on the evaluated instance. The dev trace is a single trace with no history
to estimate on, so there OASiS runs with the oracle constants only.

Every schedule is validated (an invalid one raises). Runs go in-process in a fixed order and take
seconds each; nothing is stored.
"""
from __future__ import annotations

from typing import Any

from .gavel import label

WORKLOADS = ("gavel", "paper-sim")
GAVEL_POLICIES: tuple[tuple[str, dict], ...] = (
    ("gavel-las", {}), ("gavel-ftf", {}), ("gavel-makespan", {}), ("max-min-fairness", {}),
    ("gavel-fifo", {"variant": "gavel"}), ("gavel-fifo", {"variant": "textbook"}))
RANDOM = ("max-min-fairness", "gavel-fifo (gavel)")  # policies that draw with their seed
MIX = "v100:p100:k80"
FULL = {"gavel_seeds": (0, 1, 2), "sim_seeds": (0, 1, 2), "history": (1000, 1001, 1002),
        "grid": None,  # online.estimate.DEFAULT_FLOOR_GRID
        "sim": {"jobs": 40, "horizon": 60, "worker_servers": 12, "ps_servers": 12,
                "cluster_mix": MIX}}
QUICK = {"gavel_seeds": (0,), "sim_seeds": (0,), "history": (1000,),
         "grid": (1e-6, 1e-4, 1e-2, 1.0),
         "sim": {"jobs": 12, "horizon": 40, "worker_servers": 6, "ps_servers": 6,
                 "cluster_mix": MIX}}


def settings(quick: bool) -> dict:
    return QUICK if quick else FULL


def instance(workload: str, seed: int, s: dict):
    """The evaluated instance of ``workload`` at ``seed`` (the dev trace ignores the seed)."""
    if workload == "gavel":
        from ..workloads.gavel import gavel_files, gavel_instance

        files = gavel_files()
        return gavel_instance(files["trace"], files["throughputs"])
    from ..workloads import paper_sim

    return paper_sim(seed, **s["sim"])


def record(workload: str, name: str, seed: int, inst, schedule) -> dict[str, Any]:
    """One row: validity, utility, admission and Gavel's JCT metrics (``sim.metrics``)."""
    from ..model.validate import validate
    from ..sim.metrics import summarize

    report = validate(inst, schedule)
    if not report.ok:
        raise RuntimeError(f"hetero: {workload} {name} seed {seed}: invalid schedule: {report}")
    s = summarize(inst, schedule)
    jct = s["jct"] or {}
    return {"workload": workload, "policy": name, "seed": seed, "jobs": s["jobs"],
            "valid": True, "total_utility": float(s["total_utility"]),
            "admitted": s["admitted"], "completed": s["completed"],
            "avg_jct_h": jct.get("avg_jct_h"), "makespan_h": jct.get("makespan_h"),
            "utilisation": jct.get("utilisation")}


def runs(quick: bool) -> list[tuple[str, str, str, dict, int]]:
    """(workload, row name, policy, options, seed) of every run, in order; ``options`` of
    ``oasis`` on paper-sim get the estimated pricing at run time (``"pricing": "estimated"``)."""
    s = settings(quick)
    out = [("gavel", "oasis-oracle", "oasis", {}, 0)]
    for p, o in GAVEL_POLICIES:
        name = label(p, o)
        for seed in (s["gavel_seeds"] if name in RANDOM else (0,)):
            out.append(("gavel", name, p, {**o, "seed": seed}, seed))
    for seed in s["sim_seeds"]:
        out.append(("paper-sim", "oasis", "oasis", {"pricing": "estimated"}, seed))
        out.append(("paper-sim", "oasis-oracle", "oasis", {}, seed))
        for p, o in GAVEL_POLICIES:
            out.append(("paper-sim", label(p, o), p, {**o, "seed": seed}, seed))
    return out


def estimate(s: dict, progress: bool = False):
    """OASiS's U and L for paper-sim mixed, estimated on the history seeds."""
    from ..online.estimate import DEFAULT_FLOOR_GRID, estimate_pricing
    from ..workloads import paper_sim

    history = [paper_sim(h, **s["sim"]) for h in s["history"]]
    grid = s["grid"] or DEFAULT_FLOOR_GRID
    if not progress:
        return estimate_pricing(history, grid)
    from tqdm import tqdm

    with tqdm(total=len(grid) * len(history), desc="hetero calibration", unit="run") as bar:
        return estimate_pricing(history, grid, progress=lambda done, total: bar.update())


def compute(quick: bool = False, results=None, workers=None, address=None,
            progress: bool = True) -> dict[str, Any]:
    """Every run: ``{"quick", "settings", "rows": [record], "pricing": calibration table}``.
    ``results``, ``workers`` and ``address`` are not used (in-process, nothing stored)."""
    from ..policies import solve

    s = settings(quick)
    pricing = estimate(s, progress)
    todo = runs(quick)
    if progress:
        from tqdm import tqdm

        todo = tqdm(todo, desc=f"hetero{' (quick)' if quick else ''}", unit="run")
    cache: dict[tuple[str, int], Any] = {}
    rows = []
    for workload, name, policy, options, seed in todo:
        key = (workload, seed)
        if key not in cache:
            cache[key] = instance(workload, seed, s)
        inst = cache[key]
        opts = dict(options, pricing=pricing) if options.get("pricing") == "estimated" else options
        rows.append(record(workload, name, seed, inst, solve(inst, policy, **opts)))
    cal = pricing.calibration
    return {"quick": quick, "settings": s, "rows": rows,
            "floor": {"chosen": cal.chosen, "grid": list(cal.grid), "mean": list(cal.mean)}}
