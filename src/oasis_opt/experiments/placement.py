"""Experiment: tree placement against round-robin, random and packing on oversubscribed racks.

For each workload (a paper-sim instance; a month of the Philly trace), oversubscription ratio
(1:1, 2:1, 4:1 rack uplinks, ``Topology.from_racks``), placement and seed, the greedy policy
(``sim.greedy.GreedyPolicy``: admit all, give every running job up to N_i workers each slot, in
arrival order; the placement decides where) runs with **placement-aware progress**
(``costmodel.placement``), so a job whose containers straddle an oversubscribed uplink trains
slower. Every schedule is validated. Metrics per run (``placement_metrics``):

* JCT: t_hat - a_i + 1 slots (hours: x slot length) of completed jobs, mean and median;
* total utility: sum of f_i(t_hat - a_i) (the paper's metric);
* useful GPU work: sum_i g_i min(W_i, credited_i) / sum_i g_i allocated_i, where g_i is the GPUs
  of one worker, credited_i the placement-aware worker-slots the job received and allocated_i the
  worker-slots it held: the share of allocated GPU time that turned into training (1.0 when no
  job ever waits on a congested uplink);
* completed / unfinished counts, simulation time.

Results are stored one JSON file per run under ``results/placement`` (a rerun skips stored runs);
``write_report`` draws ``paper_figs/placement.{png,pdf}`` and writes ``paper_figs/placement.md``.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Iterable

import numpy as np

from .._extras import require
from .figures.common import bars_caption, whiskers

PLACEMENT_NAMES = ("tree", "round-robin", "random", "packing")
OVERSUBSCRIPTIONS = (1.0, 2.0, 4.0)
WORKLOADS = ("paper-sim", "philly-month")
SCHEMA = "oasis-opt/placement-run@1"


def make_instance(workload: str, seed: int, oversubscription: float, quick: bool = False):
    """The instance of one run: placement-aware progress on racks at ``oversubscription``:1."""
    from ..model import Topology
    from ..workloads import paper_sim
    from ..workloads.traces import philly_instance

    if workload == "paper-sim":
        inst = paper_sim(seed, jobs=60 if quick else 200, horizon=100 if quick else 300)
    elif workload == "philly-month":
        inst = philly_instance("2017-11-01", 2 if quick else 30, seed)
    else:
        raise ValueError(f"workload: expected one of {', '.join(WORKLOADS)}, got {workload!r}")
    return dataclasses.replace(inst, topology=Topology.from_racks(inst, oversubscription),
                               progress="placement")


def placement_metrics(instance, schedule) -> dict:
    """The experiment's metrics of a validated schedule (module docstring)."""
    from ..costmodel.placement import placement_work_remaining

    comp = np.array([-1 if c is None else c for c in schedule.completion], dtype=np.int64)
    done = comp >= 0
    slot_h = float(instance.meta.get("slot_s", 3600.0)) / 3600.0
    jct = (comp - instance.arrival + 1)[done] * slot_h
    alloc = schedule.allocations.workers_per_job_slot(instance.I, instance.horizon).sum(axis=1)
    if instance.progress == "placement":
        credited = placement_work_remaining(instance, schedule.allocations)[0]
    else:
        credited = alloc.astype(float)
    g = instance.worker_demand[:, instance.resources.index("gpu")]
    useful = float((g * np.minimum(credited, instance.work)).sum())
    held = float((g * alloc).sum())
    return {"jct_mean_h": float(jct.mean()) if done.any() else math.nan,
            "jct_median_h": float(np.median(jct)) if done.any() else math.nan,
            "total_utility": float(schedule.total_utility),
            "useful_gpu_work": useful / held if held > 0 else math.nan,
            "completed": int(done.sum()), "unfinished": int((~done).sum()), "jobs": instance.I}


def run_one(spec: dict) -> dict:
    """Build, simulate, validate and measure one run (``spec``: workload, seed,
    oversubscription, placement, quick)."""
    from ..model import assert_valid
    from ..sim.greedy import GreedyPolicy

    inst = make_instance(spec["workload"], spec["seed"], spec["oversubscription"], spec["quick"])
    t0 = time.perf_counter()
    sched = GreedyPolicy(placement=spec["placement"]).solve(inst)
    sim_s = time.perf_counter() - t0
    assert_valid(inst, sched)
    return {"format": SCHEMA, "spec": spec, "sim_s": sim_s, **placement_metrics(inst, sched)}


def _key(spec: dict) -> str:
    return ("{workload}-s{seed}-o{oversubscription:g}-{placement}" + ("-quick" if spec["quick"]
                                                                      else "")).format(**spec)


def run_grid(workloads: Iterable[str], seeds: Iterable[int], *, quick: bool = False,
             placements=PLACEMENT_NAMES, oversubscriptions=OVERSUBSCRIPTIONS,
             results: str | Path = "results/placement", workers: int = 1,
             progress: bool = True) -> list[dict]:
    """Run (or load, if stored) every combination; returns the records."""
    from tqdm import tqdm

    from ..model.io import write_json_atomic

    results = Path(results)
    specs = [{"workload": w, "seed": int(s), "oversubscription": float(o), "placement": p,
              "quick": bool(quick)}
             for w in workloads for s in seeds for o in oversubscriptions for p in placements]
    records, todo = [], []
    for spec in specs:
        path = results / f"{_key(spec)}.json"
        if path.is_file():
            records.append(json.loads(path.read_text()))
        else:
            todo.append(spec)
    with tqdm(total=len(todo), desc="placement runs", unit="run", disable=not progress) as bar:
        if workers > 1 and len(todo) > 1:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                for rec in pool.map(run_one, todo):
                    write_json_atomic(results / f"{_key(rec['spec'])}.json", rec)
                    records.append(rec)
                    bar.update(1)
        else:
            for spec in todo:
                rec = run_one(spec)
                write_json_atomic(results / f"{_key(spec)}.json", rec)
                records.append(rec)
                bar.update(1)
    return records


def summarise(records: list[dict]) -> dict:
    """{(workload, oversubscription, placement): {metric: (mean, std, seeds, min, max)}}."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        s = r["spec"]
        groups.setdefault((s["workload"], s["oversubscription"], s["placement"]), []).append(r)
    out = {}
    for key, recs in sorted(groups.items()):
        out[key] = {m: (float(np.mean([r[m] for r in recs])), float(np.std([r[m] for r in recs])),
                        sorted(r["spec"]["seed"] for r in recs),
                        float(np.min([r[m] for r in recs])), float(np.max([r[m] for r in recs])))
                    for m in ("jct_mean_h", "jct_median_h", "total_utility", "useful_gpu_work",
                              "completed", "unfinished", "sim_s")}
    return out


def write_report(records: list[dict], out: str | Path = "paper_figs", name: str = "placement"):
    """Figure (PNG + PDF) and markdown table of the grid."""
    matplotlib = require("matplotlib", extra="plots", feature="figures")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    summary = summarise(records)
    workloads = [w for w in WORKLOADS if any(k[0] == w for k in summary)]
    osubs = sorted({k[1] for k in summary})
    placements = [p for p in PLACEMENT_NAMES if any(k[2] == p for k in summary)]
    metrics = (("jct_mean_h", "mean JCT (hours)"), ("useful_gpu_work", "useful GPU work"),
               ("total_utility", "total utility"))
    fig, axes = plt.subplots(len(workloads), len(metrics), figsize=(4.2 * len(metrics),
                                                                     3.2 * len(workloads)),
                             squeeze=False)
    width = 0.8 / len(placements)
    for r, w in enumerate(workloads):
        for c, (m, label) in enumerate(metrics):
            ax = axes[r][c]
            for n, p in enumerate(placements):
                vals = [summary.get((w, o, p), {m: (math.nan, 0, [], math.nan, math.nan)})[m]
                        for o in osubs]
                mean, lo, hi = (np.array([v[i] for v in vals]) for i in (0, 3, 4))
                ax.bar(np.arange(len(osubs)) + (n - (len(placements) - 1) / 2) * width,
                       mean, width, yerr=whiskers(mean, lo, hi), label=p, capsize=2)
            ax.set_xticks(np.arange(len(osubs)), [f"{o:g}:1" for o in osubs])
            ax.set_xlabel("rack uplink oversubscription")
            ax.set_title(f"{w}: {label}", fontsize=10)
            vals = [v[m][0] for k, v in summary.items() if k[0] == w and math.isfinite(v[m][0])]
            if m == "jct_mean_h" and vals and min(vals) > 0 and max(vals) / min(vals) > 5:
                ax.set_yscale("log")  # a saturated cluster's JCT dwarfs the others
    axes[0][0].legend(fontsize=8)
    seeds = {len(v[metrics[0][0]][2]) for v in summary.values()}
    fig.suptitle(bars_caption(seeds.pop()) if len(seeds) == 1
                 else "bars: mean over seeds, whiskers: min … max", fontsize=10)
    fig.tight_layout()
    for ext in ("png", "pdf"):
        fig.savefig(out / f"{name}.{ext}", dpi=130)
    plt.close(fig)
    (out / f"{name}.md").write_text(markdown_table(summary, records))
    return summary


def markdown_table(summary: dict, records: list[dict]) -> str:
    lines = ["# Tree placement vs round-robin, random and packing",
             "",
             "Greedy policy (admit all, up to N_i workers per job per slot, arrival order), "
             "placement-aware progress (`costmodel.placement`, PS model), racks with uplink "
             "oversubscription o:1. Mean (± std over seeds) per cell; every schedule validated. "
             "Generated by `experiments/placement.py`.",
             "",
             "| workload | o | placement | seeds | mean JCT (h) | median JCT (h) | useful GPU work "
             "| total utility | completed | unfinished |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for (w, o, p), v in summary.items():
        lines.append(f"| {w} | {o:g}:1 | {p} | {','.join(map(str, v['jct_mean_h'][2]))} | "
                     f"{v['jct_mean_h'][0]:.2f} ± {v['jct_mean_h'][1]:.2f} | "
                     f"{v['jct_median_h'][0]:.2f} | {v['useful_gpu_work'][0]:.3f} ± "
                     f"{v['useful_gpu_work'][1]:.3f} | {v['total_utility'][0]:.0f} | "
                     f"{v['completed'][0]:.0f} | {v['unfinished'][0]:.0f} |")
    lines += ["", "## Tree against round-robin", ""]
    for w in WORKLOADS:
        for o in sorted({k[1] for k in summary if k[0] == w}):
            t, rr = summary.get((w, o, "tree")), summary.get((w, o, "round-robin"))
            if not t or not rr:
                continue
            lines.append(
                f"- {w}, {o:g}:1 (seeds {','.join(map(str, t['jct_mean_h'][2]))}): mean JCT "
                f"{t['jct_mean_h'][0]:.2f} h vs {rr['jct_mean_h'][0]:.2f} h "
                f"({_change(t['jct_mean_h'][0], rr['jct_mean_h'][0])}), useful GPU work "
                f"{t['useful_gpu_work'][0]:.3f} vs {rr['useful_gpu_work'][0]:.3f} "
                f"({_change(t['useful_gpu_work'][0], rr['useful_gpu_work'][0])}), total utility "
                f"{t['total_utility'][0]:.0f} vs {rr['total_utility'][0]:.0f}.")
    lines += ["", "## Notes", "",
              "- paper-sim jobs are compute-bound under the calibrated reading of A2 (tau_i of "
              "3.6-360 s per chunk against 2 e_i / b_i of seconds), so the network costs them a "
              "few percent whatever the placement; their unfinished jobs are the horizon's "
              "(T = 300 slots), not the placement's.",
              "- Philly jobs (model classes by GPU-time, `costmodel.models`) spend about 60-80% of "
              "an iteration communicating at b_i = 5 Gbps, so a worker or PS across a 4:1 uplink "
              "makes a job 2-3x slower. Round-robin and random then push the offered load past "
              "the cluster's capacity and queues build up for the rest of the month: their JCTs "
              "grow by far more than the per-job slowdown.",
              "- The Philly seeds change the synthesised utilities and model classes only (the "
              "trace is fixed)."]
    return "\n".join(lines) + "\n"


def _change(new: float, old: float) -> str:
    if not (math.isfinite(new) and math.isfinite(old)) or old == 0:
        return "n/a"
    return f"{100.0 * (new - old) / old:+.1f}%"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--oversubscription", nargs="+", type=float, default=list(OVERSUBSCRIPTIONS))
    ap.add_argument("--placements", nargs="+", default=list(PLACEMENT_NAMES),
                    choices=PLACEMENT_NAMES)
    ap.add_argument("--quick", action="store_true", help="small instances (minutes -> seconds)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--results", default="results/placement")
    ap.add_argument("--out", default="paper_figs")
    ap.add_argument("--no-report", action="store_true", help="run only; draw nothing")
    args = ap.parse_args(argv)
    run_grid(args.workloads, args.seeds, quick=args.quick, placements=args.placements,
             oversubscriptions=args.oversubscription, results=args.results, workers=args.workers)
    if not args.no_report:
        # the report covers every stored run of this size (earlier invocations included)
        suffix = "-quick.json" if args.quick else ".json"
        records = [json.loads(p.read_text()) for p in sorted(Path(args.results).glob("*.json"))
                   if p.name.endswith(suffix)
                   and (args.quick or not p.name.endswith("-quick.json"))]
        write_report(records, args.out, "placement-quick" if args.quick else "placement")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
