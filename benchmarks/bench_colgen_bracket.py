"""The column-generation bracket on OPT at 100-400 jobs, against the OASiS the figures use.

Instances: Fig. 3's (``experiments.fig3.sim_params``: paper-sim, T = 300, H = K = 50,
calibrated job sizes, uniform arrivals), seed 0 by default. Per instance:

* **OASiS as the figures price it**: U and L estimated on history instances of the same size
  (seeds 1000-1002, the floor with the best mean history utility: ``fig3.estimate``, run here
  in-process by ``online.estimate.estimate_pricing``, the same rule); beside it OASiS under the
  plug-in estimate (``online.plugin``, same history) and the oracle constants (eqs. (23)-(26)
  on the instance itself).
* **Every policy that runs at that size** (``offline.colgen.SEED_POLICIES``: FIFO, DRF, RRH,
  Dorm, greedy) and those three OASiS runs: utility, admitted jobs, seconds.
* **The bracket** ``offline.colgen.bracket`` seeded with all of these schedules: lower end = the
  best valid schedule found (which source), upper end = the best Lagrangian bound, gap, and
  OPT / OASiS in [lower / OASiS, upper / OASiS] for the figures' OASiS.

Time shares (options): column generation 0.22 of the bracket's time, stopping at a 0.1 % gap
between its bound and master value, 0.75 of it for the pooled phase; of the integer phase, 0.95
for ruin-and-recreate (re-planning windows of 0.05 x T, ``LNS_WINDOW``) and the rest for the
integer master. Why: at 400 jobs every upper end so far came from the pooled phase (the
per-server phase's Lagrangian bounds stayed above it in every round), the integer master never
improved on ruin-and-recreate's schedule, and ruin-and-recreate was still climbing when its time
ran out; so the pooled phase gets the time to converge and ruin-and-recreate nearly all of the
rest. (First measured: the bracket's own defaults 0.7 / 0.4 / 0.5 / exact, then 0.35 / 0.4 /
0.85 / 0.1 %, then 0.3 / 0.7 / 0.95 and 0.22 / 0.75 / 0.95 with windows of 0.1 x T: the rows
that say so.)

Budget: the policies' runs and the bracket together within ``--budget`` seconds per instance
(the bracket gets what the policies left); the calibration is "past experience", run once per
size and stored with the results (reused when rerun). The machine's load average when each
instance started is recorded: its 2 cores are shared, and the bracket's progress depends on it.

    nice -n 10 .venv/bin/python benchmarks/bench_colgen_bracket.py --jobs 100 200 400
    .venv/bin/python benchmarks/bench_colgen_bracket.py --jobs 20 --budget 60   # a quick look

Writes benchmarks/results/colgen_bracket.json (rows keyed by jobs, seed; a rerun replaces its
rows) and colgen_bracket.md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from oasis_opt.experiments import fig3
from oasis_opt.model.validate import assert_valid
from oasis_opt.offline.colgen import LNS_WINDOW, POOLED_SHARE, SEED_POLICIES, ColgenOptions, bracket
from oasis_opt.online.estimate import estimate_pricing
from oasis_opt.online.oasis import OasisPolicy
from oasis_opt.online.plugin import plugin_pricing
from oasis_opt.policies import get_policy
from oasis_opt.workloads import paper_sim

RESULTS = Path(__file__).parent / "results"
FIGURES_OASIS = "oasis-estimated"  # the OASiS of Figs. 3 and 6: U, L estimated on a history


def pricings(jobs: int, store: dict, path: Path) -> dict:
    """The estimated (figures') and plug-in pricing for ``jobs``, computed once and stored
    (in ``path`` at once, so an interrupted run keeps them)."""
    est = fig3.estimate(jobs, quick=False)
    cached = store.setdefault("calibrations", {}).get(est.key)
    if cached is None:
        history = [paper_sim(**est.params, seed=s) for s in est.seeds]
        t0 = time.perf_counter()
        estimated = estimate_pricing(history, est.grid)
        cached = {"jobs": jobs, "history_seeds": list(est.seeds),
                  "estimated": dict(estimated), "chosen_L": estimated.calibration.chosen,
                  "plugin": dict(plugin_pricing(history)),
                  "seconds": time.perf_counter() - t0}
        store["calibrations"][est.key] = cached
        save(store, path)
        print(f"{jobs} jobs: estimated L = {cached['chosen_L']:.2g} "
              f"({cached['seconds']:.0f} s)", flush=True)
    return cached


def save(store: dict, path: Path) -> None:
    """Write ``store``, merged with what another run wrote to ``path`` meanwhile."""
    if path.is_file():
        disk = json.loads(path.read_text())
        for part in ("calibrations", "rows"):
            store[part] = {**disk.get(part, {}), **store.get(part, {})}
    path.write_text(json.dumps(store, indent=1, default=float) + "\n")
    (path.parent / "colgen_bracket.md").write_text(write_markdown(store))


def bench_one(jobs: int, seed: int, budget: float, shares: dict, store: dict,
              path: Path) -> dict:
    cal = pricings(jobs, store, path)
    inst = paper_sim(**fig3.sim_params(jobs, seed, quick=False))
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    runs: dict[str, dict] = {}
    schedules = {}
    oasis = {FIGURES_OASIS: cal["estimated"], "oasis-plugin": cal["plugin"],
             "oasis-oracle": "oracle"}
    for name in list(SEED_POLICIES) + list(oasis):
        t = time.perf_counter()
        s = (OasisPolicy(pricing=oasis[name]).solve(inst) if name in oasis
             else get_policy(name).solve(inst))
        assert_valid(inst, s)
        schedules[name] = s
        runs[name] = {"utility": float(s.total_utility), "admitted": int(sum(s.admitted)),
                      "seconds": time.perf_counter() - t}
        print(f"{jobs} jobs, seed {seed}: {name} {s.total_utility:.1f}", flush=True)
    policies_s = time.perf_counter() - t0
    # the bracket's own seed policy is OASiS (oracle); the others enter as seeds
    seeds = {k: v for k, v in schedules.items() if k != "oasis-oracle"}
    br = bracket(inst, ColgenOptions(**shares), time_limit=max(budget - policies_s, 1.0),
                 seeds=seeds, progress=True)
    assert_valid(inst, br.schedule)
    wall = time.perf_counter() - t0
    ref = runs[FIGURES_OASIS]["utility"]
    phases = {p: sum(1 for h in br.history if h["phase"] == p)
              for p in ("(pooled)", "(per server)")}
    return {"jobs": jobs, "seed": seed, "horizon": inst.horizon, "budget_s": budget,
            **shares, "load_at_start": load, "when": datetime.now(timezone.utc)
            .strftime("%Y-%m-%d %H:%M UTC"), "chosen_L": cal["chosen_L"], "policies": runs,
            "policies_s": policies_s, "figures_oasis": ref, **br.stats(),
            "admitted": int(sum(br.schedule.admitted)),
            "ratio_lower": br.lower / ref if ref > 0 else None,
            "ratio_upper": br.upper / ref if ref > 0 else None,
            "rounds_pooled": phases["(pooled)"], "rounds_per_server": phases["(per server)"],
            "wall_s": wall, "history": br.history}


def write_markdown(store: dict) -> str:
    rows = sorted(store["rows"].values(), key=lambda r: (r["seed"], r["jobs"], -r["cg_share"]))
    names = list(SEED_POLICIES) + [FIGURES_OASIS, "oasis-plugin", "oasis-oracle"]
    out = ["# Column-generation bracket on OPT, 100-400 jobs, against the figures' OASiS", "",
           f"Machine: {store.get('machine', '?')}, 2 cores shared with other jobs (load average "
           "at each instance's start in the table). Generated by "
           "`nice -n 10 .venv/bin/python benchmarks/bench_colgen_bracket.py --jobs 100 200 400` "
           "(the unlabelled 400-job rows: `--jobs 400 --seeds 0 1 2`, one instance at a time; "
           "a row's label says which earlier code, split or window made it).",
           "", "Instances: Fig. 3's (paper-sim, T = 300, H = K = 50). **OASiS (figures)** is "
           "priced as Figs. 3 and 6 price it: U and L estimated on history seeds 1000-1002 of "
           "the same size (floor L with the best mean history utility). The bracket is seeded "
           "with every schedule in the first table; its lower end is the best valid schedule "
           "found (source), its upper end the best Lagrangian bound (a valid bound at any "
           "prices). Budget per instance: the policies' runs plus the bracket.", "",
           "**Reading the gap.** The last per-server master LP value is a lower bound on the "
           "LP relaxation LP(14) over all columns, and every Lagrangian bound is at least "
           "LP(14); so (upper - LP master) / upper is the most the upper end could still gain "
           "without cuts or branching, and the rest of the gap lies between the best schedule "
           "and the LP relaxation (a weaker schedule, an integrality gap, or both).", "",
           *target_checks(rows), "## Bracket", "",
           "| jobs | seed | load | CG share / pooled share / LNS share / CG gap / LNS window | "
           "OASiS (figures), L | "
           "lower (source) | upper | gap | "
           "OPT / OASiS (figures) | LP master / upper | rounds pooled + per server | "
           "LNS rounds | CG / integer phase / wall s | integer master |", "|" + "---|" * 14]
    for r in rows:
        out.append(
            f"| {r['jobs']} | {r['seed']} | {r['load_at_start']:.1f} | "
            f"{r['cg_share']} / {r.get('pooled_share', POOLED_SHARE)} / {r['lns_share']} / "
            f"{r['cg_gap']} / {r.get('lns_window', 0.1)}"
            f"{' (' + r['label'] + ')' if r.get('label') else ''} | {r['figures_oasis']:.1f}, {r['chosen_L']:.2g} | {r['lower']:.1f} ({r['source']}) "
            f"| {r['upper']:.1f} | {100 * r['gap']:.2f} % | [{r['ratio_lower']:.3f}, "
            f"{r['ratio_upper']:.3f}] | {r['lp_value'] / r['upper']:.4f} | "
            f"{r['rounds_pooled']} + {r['rounds_per_server']} | {r.get('lns_rounds', 0)} | "
            f"{r['cg_s']:.0f} / "
            f"{r['mip_s']:.0f} / {r['wall_s']:.0f} | {r['mip_status']} |")
    out += moved(rows)
    out += ["", "## Every policy's utility (admitted jobs, seconds)", "",
            "| jobs | seed | " + " | ".join(names) + " | lower end |",
            "|" + "---|" * (len(names) + 3)]
    for r in rows:
        cells = [f"{r['policies'][n]['utility']:.1f} ({r['policies'][n]['admitted']}, "
                 f"{r['policies'][n]['seconds']:.1f})" for n in names]
        out.append(f"| {r['jobs']} | {r['seed']} | " + " | ".join(cells) +
                   f" | {r['lower']:.1f} ({r['admitted']}) |")
    out += ["", "## Integer candidates before the integer master", "",
            "| jobs | seed | candidate utilities |", "|---|---|---|"]
    for r in rows:
        cand = ", ".join(f"{k} {v:.1f}" for k, v in
                         sorted(r["candidates"].items(), key=lambda kv: -kv[1]))
        out.append(f"| {r['jobs']} | {r['seed']} | {cand} |")
    return "\n".join(out + [""])


def target_checks(rows: list[dict]) -> list[str]:
    """Issue #29's target, checked on the unlabelled 400-job rows (the code and split as they
    are): gap <= 5 % within 10 minutes (policies and bracket together) on at least 3 seeds."""
    mine = sorted((r for r in rows if r["jobs"] == 400 and not r.get("label")),
                  key=lambda r: r["seed"])
    if not mine:
        return []
    ok = [r for r in mine if r["gap"] <= 0.05 and r["wall_s"] <= 1.01 * r["budget_s"]]
    out = ["## Target: gap <= 5 % at 400 jobs within 10 minutes, on at least 3 seeds", "",
           "The budget (600 s) is the time limit of the policies' runs and the bracket together; "
           "the round running at the limit, the integer master's stop and the validation of the "
           "schedule overrun it by about a second (held to 1 % here).", ""]
    for r in mine:
        mark = "✅" if r in ok else "❌"
        out.append(f"- {mark} seed {r['seed']}: gap {100 * r['gap']:.2f} % "
                   f"([{r['lower']:.1f}, {r['upper']:.1f}]) in {r['wall_s']:.0f} s "
                   f"(budget {r['budget_s']:.0f} s; load average {r['load_at_start']:.1f} "
                   "at its start)")
    out += ["", f"{'✅' if len(ok) >= 3 else '❌'} {len(ok)} of {len(mine)} seeds hold it.", ""]
    return out


def moved(rows: list[dict]) -> list[str]:
    """Which end of the bracket moved: each unlabelled row against the rows of the same size and
    seed kept under a label (an earlier code, or another split), lower and upper in percent of theirs."""
    out = []
    for r in rows:
        for old in rows:
            if r.get("label") or not old.get("label") or (old["jobs"], old["seed"]) != (
                    r["jobs"], r["seed"]):
                continue
            if not out:
                out = ["", "## Which end moved (the unlabelled row against each labelled row of its instance)", "",
                       "Rows labelled \"before\" ran the code before ``could_complete`` (the "
                       "screen that spares ruin-and-recreate the DP of every job the room "
                       "cannot hold) with the split 0.35 / 0.4 / 0.85; the rows labelled with "
                       "a split ran the screen with that split and ruin-and-recreate's window "
                       "0.1 of the horizon; the unlabelled rows run the split 0.22 / 0.75 / 0.95 "
                       "and the window 0.05 (``LNS_WINDOW``, chosen on seed 0's ruin-and-recreate "
                       "start alone). The lower end moves with ruin-and-recreate, the upper "
                       "end only where the pooled phase had not converged before.", "",
                       "| jobs | seed | against | lower | upper | gap | LNS rounds |",
                       "|---|---|---|---|---|---|---|"]
            out.append(
                f"| {r['jobs']} | {r['seed']} | {old['label']} | {old['lower']:.1f} -> "
                f"{r['lower']:.1f} ({100 * (r['lower'] / old['lower'] - 1):+.2f} %) | "
                f"{old['upper']:.1f} -> {r['upper']:.1f} "
                f"({100 * (r['upper'] / old['upper'] - 1):+.2f} %) | {100 * old['gap']:.2f} % "
                f"-> {100 * r['gap']:.2f} % | {old.get('lns_rounds', 0)} -> "
                f"{r.get('lns_rounds', 0)} |")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, nargs="+", default=[100, 200, 400])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--budget", type=float, default=600.0,
                    help="seconds per instance: policies + bracket (default 600)")
    ap.add_argument("--cg-gap", type=float, default=0.001,
                    help="column generation stops within this relative gap of the master LP")
    ap.add_argument("--cg-share", type=float, default=0.22,
                    help="share of the bracket's time for column generation (both phases)")
    ap.add_argument("--pooled-share", type=float, default=0.75,
                    help="share of the column-generation time for the pooled phase")
    ap.add_argument("--lns-share", type=float, default=0.95,
                    help="share of the integer phase for ruin-and-recreate (rest: the MILP)")
    ap.add_argument("--lns-window", type=float, default=LNS_WINDOW,
                    help="share of the horizon a ruin-and-recreate round re-plans")
    ap.add_argument("--label", default="",
                    help="keep these rows beside the unlabelled ones (e.g. a code variant)")
    args = ap.parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "colgen_bracket.json"
    store = json.loads(path.read_text()) if path.is_file() else {}
    store["machine"] = f"{platform.processor() or platform.machine()}, {platform.system()}"
    store.setdefault("rows", {})
    for seed in args.seeds:
        for jobs in args.jobs:
            shares = {"cg_gap": args.cg_gap, "cg_share": args.cg_share,
                      "pooled_share": args.pooled_share, "lns_share": args.lns_share,
                      "lns_window": args.lns_window}
            row = bench_one(jobs, seed, args.budget, shares, store, path)
            row["label"] = args.label
            store["rows"][f"{jobs}-{seed}" + (f"-{args.label}" if args.label else "")] = row
            save(store, path)
            print(f"{jobs} jobs, seed {seed}: [{row['lower']:.1f} ({row['source']}), "
                  f"{row['upper']:.1f}], gap {100 * row['gap']:.2f} %, OPT/OASiS in "
                  f"[{row['ratio_lower']:.3f}, {row['ratio_upper']:.3f}]", flush=True)
    print(f"wrote {RESULTS / 'colgen_bracket.md'}")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    raise SystemExit(main())
