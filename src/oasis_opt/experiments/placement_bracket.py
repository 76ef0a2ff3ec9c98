"""Experiment: ``oasis-topo`` and greedy + tree placement against the placement-aware bracket.

On a Philly window with placement-aware progress on 4:1 oversubscribed racks, the optimum is
bracketed by two programs (``offline.topo``): the best **full-speed** schedule (``offline-topo``,
started from the full-speed part of the policy schedule (greedy + tree or ``oasis-topo``) with
the most of it; a feasible schedule, so a lower bound, as is every validated policy schedule:
the lower end is the best of them) and the **topology-free** MILP of (1) (its proven bound,
and its LP relaxation: upper bounds because a worker-slot never credits more than one
worker-slot on these servers). Every schedule is validated. Against the bracket we measure
greedy (admit all, up to N_i workers per job per slot, tree placement), the paper's OASiS and
``oasis-topo``, each with the oracle pricing and with the plug-in pricing estimated on history
seeds (``history_pricing``), and explain ``oasis-topo``'s loss: utility of the jobs it rejects,
of the admitted jobs it finishes later than their earliest slot, and of the jobs it admits that
finish later than greedy's.

The instance is a smaller window than the placement experiment's two days (the MILP of
1839 jobs x 452 slots x 120 servers has 95 M columns): the first ``jobs`` Philly jobs from
2017-11-01 on 4 racks of 4 eight-GPU servers and 2 PS servers, two-hour slots, 4 slots of tail.

``experiments/placement_bracket.py --jobs 30 100 --time-limit 300`` writes
one JSON per size under ``results/placement-bracket`` and ``paper_figs/placement-bracket.md``.
"""
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from .calibration import HISTORY_SEEDS

SCHEMA = "oasis-opt/placement-bracket@2"
WINDOW = {"start": "2017-11-01", "days": 0.5, "racks": 4, "servers_per_rack": 4,
          "ps_per_rack": 2, "slot_s": 7200.0, "tail": 4}


def bracket_instance(jobs: int, seed: int = 0, oversubscription: float = 4.0,
                     racks: int | None = None, servers_per_rack: int | None = None,
                     ps_per_rack: int | None = None):
    """The first ``jobs`` Philly jobs of the window ``WINDOW`` (its cluster unless given),
    placement-aware progress."""
    from ..workloads.traces import PhillyCluster, PhillyFilter, TraceMapping, philly_instance

    w = WINDOW
    cluster = PhillyCluster(racks=racks or w["racks"],
                            servers_per_rack=servers_per_rack or w["servers_per_rack"],
                            ps_per_rack=ps_per_rack or w["ps_per_rack"])
    return philly_instance(w["start"], w["days"], seed, slot_s=w["slot_s"], cluster=cluster,
                           select=PhillyFilter(max_jobs=jobs),
                           mapping=TraceMapping(tail=w["tail"], oversubscription=oversubscription,
                                                progress="placement"))


def loss_breakdown(instance, schedule, reference) -> dict:
    """Where ``schedule`` loses utility against ``reference`` (both validated): rejected or
    unfinished jobs (their utility in ``reference``), jobs both finish (the difference), and the
    utility of completing each finished job at its earliest slot a_i + d_i - 1 (upper end)."""
    got = np.asarray(schedule.utility)
    ref = np.asarray(reference.utility)
    done = np.array([c is not None for c in schedule.completion])
    ref_done = np.array([c is not None for c in reference.completion])
    earliest = np.array([instance.utility_of(i, min(instance.horizon, int(instance.arrival[i])
                                                    + int(instance.min_duration[i]) - 1))
                         for i in range(instance.I)])
    late = np.array([(c - instance.arrival[i] + 1) - instance.min_duration[i]
                     if c is not None else 0 for i, c in enumerate(schedule.completion)])
    return {"completed": int(done.sum()), "admitted": int(np.sum(schedule.admitted)),
            "not_done_but_reference_done": int((~done & ref_done).sum()),
            "utility_of_those_in_reference": float(ref[~done & ref_done].sum()),
            "both_done": int((done & ref_done).sum()),
            "utility_diff_on_both_done": float((got - ref)[done & ref_done].sum()),
            "done_here_only_utility": float(got[done & ~ref_done].sum()),
            "late_jobs": int((late[done] > 0).sum()),
            "mean_slots_late": float(late[done].mean()) if done.any() else math.nan,
            "utility_at_earliest_of_done": float(earliest[done].sum())}


POLICIES = (("greedy-tree", "greedy", {"placement": "tree"}, None),
            ("oasis", "oasis", {}, "oracle"), ("oasis-topo", "oasis-topo", {}, "oracle"),
            ("oasis plugin", "oasis", {}, "plugin"),
            ("oasis-topo plugin", "oasis-topo", {}, "plugin"))


def history_pricing(jobs: int, oversubscription: float = 4.0, racks: int | None = None,
                    servers_per_rack: int | None = None, ps_per_rack: int | None = None,
                    seeds: Sequence[int] = HISTORY_SEEDS):
    """The plug-in pricing (``online.plugin.plugin_pricing``, eqs. (23)-(26)) estimated on the
    same window and cluster drawn with the history ``seeds`` (other utilities and model sizes;
    the Philly month file starts on 2017-11-01, so no earlier window exists): fixed before the
    evaluated instance (seed < 1000) is seen."""
    from ..online.plugin import plugin_pricing

    return plugin_pricing([bracket_instance(jobs, s, oversubscription, racks, servers_per_rack,
                                            ps_per_rack) for s in seeds])


def run_one(jobs: int, seed: int = 0, time_limit: float | None = 300.0,
            oversubscription: float = 4.0, racks: int | None = None,
            servers_per_rack: int | None = None, ps_per_rack: int | None = None,
            node_limit: int | None = None, stored: dict | None = None,
            history_seeds: Sequence[int] = HISTORY_SEEDS) -> dict:
    """Every policy and both bounds on one instance (module docstring); ``time_limit`` and
    ``node_limit`` (deterministic) bound each program's solve. ``stored``: an earlier record of
    the same instance and limits whose bounds (``lower``, ``upper``, ``upper_lp``) are reused
    (they do not depend on OASiS; greedy, the lower bound's start, is deterministic); the
    policies are rerun."""
    from ..model import assert_valid
    from ..offline.topo import (TopoOfflinePolicy, full_speed_jobs, full_speed_part,
                                placement_upper_bound)
    from ..policies import solve

    inst = bracket_instance(jobs, seed, oversubscription, racks, servers_per_rack, ps_per_rack)
    cluster = {"racks": racks or WINDOW["racks"],
               "servers_per_rack": servers_per_rack or WINDOW["servers_per_rack"],
               "ps_per_rack": ps_per_rack or WINDOW["ps_per_rack"]}
    plugin = history_pricing(jobs, oversubscription, racks, servers_per_rack, ps_per_rack,
                             history_seeds)
    rec: dict = {"format": SCHEMA, "jobs": inst.I, "seed": seed, "horizon": inst.horizon,
                 "servers": [inst.H, inst.K], "oversubscription": oversubscription,
                 "time_limit": time_limit, "window": {**WINDOW, **cluster}, "policies": {},
                 "plugin": {"history_seeds": list(history_seeds), "document": dict(plugin),
                            "alpha": plugin.details["alpha"]}}
    schedules = {}
    for name, policy, opts, pricing in POLICIES:
        if pricing is not None:
            opts = {**opts, "pricing": plugin if pricing == "plugin" else pricing}
        t0 = time.perf_counter()
        sched = solve(inst, policy, **opts)
        assert_valid(inst, sched)
        schedules[name] = sched
        rec["policies"][name] = {"utility": float(sched.total_utility),
                                 "seconds": time.perf_counter() - t0}
        if pricing is not None:
            rec["policies"][name]["alpha"] = float(sched.stats["pricing"]["alpha"])
    greedy = schedules["greedy-tree"]
    if stored is not None:
        for key in ("lower", "upper", "upper_lp"):
            rec[key] = stored[key]
    else:
        # the solver starts from the policy schedule whose full-speed part earns the most
        first = max(("greedy-tree", "oasis-topo", "oasis-topo plugin"),
                    key=lambda n: full_speed_part(inst, schedules[n], n).total_utility)
        start = full_speed_jobs(inst, schedules[first])
        t0 = time.perf_counter()
        lower = TopoOfflinePolicy(node_limit=node_limit).solve_from(inst, schedules[first],
                                                                  time_limit=time_limit)
        assert_valid(inst, lower)
        st = lower.stats
        rec["lower"] = {"utility": float(lower.total_utility), "status": st["status"],
                        "program_bound": st["bound"], "gap": st["gap"],
                        "seconds": time.perf_counter() - t0, "columns": st.get("columns"),
                        "start": first, "start_jobs": len(start),
                        "start_utility": float(sum(schedules[first].utility[i]
                                                   for i in start)),
                        "message": st["message"]}
        t0 = time.perf_counter()
        up = placement_upper_bound(inst, time_limit=time_limit, node_limit=node_limit)
        rec["upper"] = {**up, "seconds": time.perf_counter() - t0}
        t0 = time.perf_counter()
        lp = placement_upper_bound(inst, relax=True)
        rec["upper_lp"] = {**lp, "seconds": time.perf_counter() - t0}
    # every validated schedule is feasible: the bracket's lower end is the best of them
    best = max(["offline-topo", *rec["policies"]],
               key=lambda n: rec["lower"]["utility"] if n == "offline-topo"
               else rec["policies"][n]["utility"])
    rec["best_known"] = {"by": best, "utility": rec["lower"]["utility"] if best == "offline-topo"
                         else rec["policies"][best]["utility"]}
    rec["loss"] = {name: loss_breakdown(inst, schedules[name], greedy)
                   for name in ("oasis", "oasis-topo", "oasis-topo plugin")}
    for name in ("oasis-topo", "oasis-topo plugin"):
        topo = schedules[name]
        rejected = [i for i in range(inst.I) if not topo.admitted[i]]
        rec["policies"][name].update({
            "rejected": len(rejected),
            "rejected_utility_in_greedy": float(sum(greedy.utility[i] for i in rejected)),
            "steered_admissions": topo.stats.get("steered_admissions")})
    return rec


SWEEP_FLOORS = (1e-6, 1e-4, 1e-3, 1e-2, 1e-1)
URGENT_DELAY = 4  # a job is urgent if finishing this many slots after its earliest halves f


def floor_sweep(jobs: int, seed: int = 0, racks: int | None = None,
                servers_per_rack: int | None = None, ps_per_rack: int | None = None,
                floors: Sequence[float] = SWEEP_FLOORS,
                history_seeds: Sequence[int] = HISTORY_SEEDS) -> dict:
    """A diagnostic, not a pricing rule: ``oasis-topo`` on the evaluated instance with U of
    eqs. (23)-(24) from the history seeds and the floor L1 = L2 fixed at each of ``floors``
    (hindsight: the floors are compared on the instance itself), against the oracle and plug-in
    pricings. Per run the utility lost against every job finishing at its earliest slot
    a_i + d_i - 1, split into *urgent* jobs (f_i falls below half within ``URGENT_DELAY`` slots
    of that) and the others."""
    from ..model import assert_valid
    from ..online.estimate import history_u, pricing_document
    from ..policies import solve

    inst = bracket_instance(jobs, seed, 4.0, racks, servers_per_rack, ps_per_rack)
    history = [bracket_instance(jobs, s, 4.0, racks, servers_per_rack, ps_per_rack)
               for s in history_seeds]
    u = history_u(history)
    T = inst.horizon
    earliest = [min(T, int(inst.arrival[i] + inst.min_duration[i]) - 1) for i in range(inst.I)]
    best = np.array([inst.utility_of(i, e) for i, e in enumerate(earliest)])
    later = np.array([inst.utility_of(i, min(T, e + URGENT_DELAY))
                      for i, e in enumerate(earliest)])
    urgent = later < 0.5 * best
    runs = [("oracle", "oracle"), ("plug-in", history_pricing(jobs, 4.0, racks, servers_per_rack,
                                                               ps_per_rack, history_seeds))]
    runs += [(f"L = {L:g}", pricing_document(u, L)) for L in floors]
    rows = []
    for label, pricing in runs:
        sched = solve(inst, "oasis-topo", pricing=pricing)
        assert_valid(inst, sched)
        got = np.asarray(sched.utility)
        rows.append({"pricing": label, "utility": float(sched.total_utility),
                     "admitted": int(np.sum(sched.admitted)),
                     "alpha": float(sched.stats["pricing"]["alpha"]),
                     "lost_urgent": float((best - got)[urgent].sum()),
                     "lost_other": float((best - got)[~urgent].sum())})
    return {"jobs": inst.I, "urgent": int(urgent.sum()), "best_case": float(best.sum()),
            "best_case_urgent": float(best[urgent].sum()), "rows": rows}


def sweep_markdown(rec: dict, what: str) -> str:
    lines = [f"Diagnosis (hindsight, not a pricing rule; `--floor-sweep`), {what}: every job "
             "at its earliest "
             f"slot would earn {rec['best_case']:.1f} ({rec['urgent']} urgent jobs, whose utility "
             f"halves within {URGENT_DELAY} slots: {rec['best_case_urgent']:.1f}). oasis-topo "
             "with U from the history and a fixed floor L:", "",
             "| pricing | alpha | oasis-topo | admitted | lost on urgent jobs | lost on others |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in rec["rows"]:
        lines.append(f"| {r['pricing']} | {r['alpha']:.1f} | {r['utility']:.1f} | "
                     f"{r['admitted']} | {r['lost_urgent']:.1f} | {r['lost_other']:.1f} |")
    return "\n".join(lines) + "\n"


def run_two_days(seed: int = 0) -> dict:
    """greedy + tree and oasis-topo on the placement experiment's two-day Philly window at 4:1
    (``placement.make_instance("philly-month", seed, 4.0, quick=True)``: too big for the
    programs), with ``loss_breakdown`` and the (job, slot) groups below full speed."""
    from ..costmodel.placement import placement_worker_slots
    from ..model import assert_valid
    from ..policies import solve
    from .placement import make_instance

    inst = make_instance("philly-month", seed, 4.0, quick=True)
    rec: dict = {"format": SCHEMA, "jobs": inst.I, "seed": seed, "horizon": inst.horizon,
                 "servers": [inst.H, inst.K], "policies": {}}
    schedules = {}
    for name, policy, opts in (("greedy-tree", "greedy", {"placement": "tree"}),
                               ("oasis-topo", "oasis-topo", {})):
        t0 = time.perf_counter()
        sched = solve(inst, policy, **opts)
        assert_valid(inst, sched)
        schedules[name] = sched
        gjob, gslot, got = placement_worker_slots(inst, sched.allocations)
        workers = sched.allocations.workers_per_job_slot(inst.I, inst.horizon)[gjob, gslot]
        rec["policies"][name] = {"utility": float(sched.total_utility),
                                 "seconds": time.perf_counter() - t0,
                                 "slow_groups": int((got < workers).sum()),
                                 "groups": len(got)}
    rec["loss"] = loss_breakdown(inst, schedules["oasis-topo"], schedules["greedy-tree"])
    return rec


def two_days_markdown(rec: dict) -> str:
    g, o, lt = rec["policies"]["greedy-tree"], rec["policies"]["oasis-topo"], rec["loss"]
    return "\n".join([
        f"## The placement experiment's two-day window, seed {rec['seed']}", "",
        "`.venv/bin/python experiments/placement_bracket.py --two-days` (10 racks x (8 + 4) "
        f"servers, {rec['jobs']} jobs, T = {rec['horizon']}: too big for the programs)", "",
        "| policy | utility | (job, slot) groups below full speed | seconds |",
        "|---|---:|---:|---:|",
        f"| greedy + tree | {g['utility']:.1f} | {g['slow_groups']} of {g['groups']} | "
        f"{g['seconds']:.0f} |",
        f"| oasis-topo | {o['utility']:.1f} | {o['slow_groups']} of {o['groups']} | "
        f"{o['seconds']:.0f} |", "",
        f"oasis-topo completes {lt['completed']} jobs ({lt['late_jobs']} after their earliest "
        f"slot, {lt['mean_slots_late']:.2f} slots late on average); on the jobs both finish it "
        f"earns {lt['utility_diff_on_both_done']:+.1f} against greedy.", ""])


def best_upper(rec: dict) -> float | None:
    vals = [v for v in (rec["upper"]["upper"], rec["upper_lp"]["upper"]) if v is not None]
    return min(vals) if vals else None


PAGE_HEAD = ("# oasis-topo and greedy + tree against the placement-aware bracket\n\n"
             "Philly jobs from 2017-11-01 (the first *n* of a 12-hour window), rack uplinks 4:1, "
             "two-hour slots, placement-aware progress (`costmodel.placement`, PS model). "
             "**offline-topo**: the best full-speed schedule (started from the full-speed part of "
             "the policy schedule with the most of it; a feasible schedule under the time "
             "limit); **lower**: the best validated schedule of any policy or offline-topo; "
             "**upper**: the topology-free MILP of (1) "
             "(proven bound under the time limit) and its LP relaxation, whichever is smaller "
             "(valid since eta <= 1 here). OPT lies in [lower, upper]. oasis and oasis-topo with "
             "the oracle pricing and with the plug-in pricing (`estimate-pricing --method "
             "plugin`, eqs. (23)-(26)) estimated on the same window and cluster at seeds "
             "1000-1002 (other utilities and model sizes; the trace file starts on the "
             "window's day, so no earlier window exists), fixed before the evaluated seed; "
             "alpha of Theorem 4 for each. Every schedule validated. Generated by "
             "`experiments/placement_bracket.py` (command per section).\n\n")


def _cluster_title(args) -> str:
    return (f"## {args.racks} racks x ({args.servers_per_rack} eight-GPU servers + "
            f"{args.ps_per_rack} PS servers), seed {args.seed}, time limit {args.time_limit:g} s")


def _sections(text: str) -> dict[str, str]:
    """The page's '## ' sections by title line (each with its body)."""
    out: dict[str, str] = {}
    title = None
    for line in text.splitlines(keepends=True):
        if line.startswith("## "):
            title = line.rstrip("\n")
            out[title] = ""
        if title is not None:
            out[title] += line
    return out


def markdown(records: Sequence[dict], command: str, title: str = "") -> str:
    lines = [title, "", f"`{command}`", "",
             "| jobs | T | greedy + tree | oasis: oracle; plug-in | oasis-topo: oracle; plug-in "
             "| alpha: oracle; plug-in | offline-topo (status) | lower: best known (by) "
             "| upper (MILP; LP) | greedy / upper | oasis-topo / lower: oracle; plug-in |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in records:
        p, lo, up, known = r["policies"], r["lower"], best_upper(r), r["best_known"]
        milp_up = r["upper"]["upper"]
        greedy = p["greedy-tree"]["utility"]
        ratio = "—" if up is None else f"{greedy / up:.3f}"
        lines.append(
            f"| {r['jobs']} | {r['horizon']} | {greedy:.1f} | "
            f"{p['oasis']['utility']:.1f}; {p['oasis plugin']['utility']:.1f} | "
            f"{p['oasis-topo']['utility']:.1f}; {p['oasis-topo plugin']['utility']:.1f} | "
            f"{p['oasis-topo']['alpha']:.1f}; {p['oasis-topo plugin']['alpha']:.1f} | "
            f"{lo['utility']:.1f} ({lo['status']}) | {known['utility']:.1f} ({known['by']}) | "
            f"{'—' if milp_up is None else f'{milp_up:.1f}'} ({r['upper']['status']}); "
            f"{r['upper_lp']['upper']:.1f} | {ratio} | "
            f"{p['oasis-topo']['utility'] / known['utility']:.3f}; "
            f"{p['oasis-topo plugin']['utility'] / known['utility']:.3f} |")
    lines += ["", "oasis-topo against greedy + tree:", "",
              "| jobs | pricing | admitted (of n) | completed: oasis-topo / greedy | utility of "
              "jobs oasis-topo leaves unfinished (in greedy) | utility difference on jobs both "
              "finish | oasis-topo finishes late (jobs, mean slots) |",
              "|---:|---|---:|---:|---:|---:|---:|"]
    for r in records:
        for name, label in (("oasis-topo", "oracle"), ("oasis-topo plugin", "plug-in")):
            lt = r["loss"][name]
            greedy_done = lt["both_done"] + lt["not_done_but_reference_done"]
            lines.append(f"| {r['jobs']} | {label} | {lt['admitted']} | {lt['completed']} / "
                         f"{greedy_done} | {lt['utility_of_those_in_reference']:.1f} | "
                         f"{lt['utility_diff_on_both_done']:+.1f} | {lt['late_jobs']}, "
                         f"{lt['mean_slots_late']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", nargs="+", type=int, default=[30, 100])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-limit", type=float, default=300.0)
    ap.add_argument("--racks", type=int, default=WINDOW["racks"])
    ap.add_argument("--servers-per-rack", type=int, default=WINDOW["servers_per_rack"])
    ap.add_argument("--ps-per-rack", type=int, default=WINDOW["ps_per_rack"])
    ap.add_argument("--two-days", action="store_true",
                    help="instead: greedy + tree and oasis-topo on the two-day window")
    ap.add_argument("--floor-sweep", action="store_true",
                    help="also the hindsight diagnostic floor_sweep on each instance")
    ap.add_argument("--rerun-policies", action="store_true",
                    help="rerun the policies on stored instances (their bounds are reused)")
    ap.add_argument("--results", default="results/placement-bracket")
    ap.add_argument("--out", default="paper_figs")
    args = ap.parse_args(argv)
    from tqdm import tqdm

    from ..model.io import write_json_atomic

    results = Path(args.results)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    page = out / "placement-bracket.md"
    # one section per cluster: a run for another cluster keeps the sections already there
    sections = _sections(page.read_text()) if page.is_file() else {}
    if args.two_days:
        path = results / f"philly-2days-s{args.seed}.json"
        rec = json.loads(path.read_text()) if path.is_file() else run_two_days(args.seed)
        write_json_atomic(path, rec)
        text = two_days_markdown(rec) + "\n"
        sections[text.splitlines()[0]] = text
        page.write_text(PAGE_HEAD + "".join(sections[k] for k in sorted(sections)))
        return 0
    records = []
    for n in tqdm(args.jobs, desc="bracket instances", unit="instance"):
        path = results / (f"philly-n{n}-r{args.racks}x{args.servers_per_rack}+"
                          f"{args.ps_per_rack}-s{args.seed}-t{args.time_limit:g}.json")
        stored = json.loads(path.read_text()) if path.is_file() else None
        if stored is not None and stored.get("format") == SCHEMA and not args.rerun_policies:
            records.append(stored)
            continue
        rec = run_one(n, args.seed, args.time_limit, racks=args.racks,
                      servers_per_rack=args.servers_per_rack, ps_per_rack=args.ps_per_rack,
                      stored=stored)
        write_json_atomic(path, rec)
        records.append(rec)
    command = (".venv/bin/python experiments/placement_bracket.py --jobs "
               f"{' '.join(map(str, args.jobs))} --seed {args.seed} --time-limit "
               f"{args.time_limit:g} --racks {args.racks} --servers-per-rack "
               f"{args.servers_per_rack} --ps-per-rack {args.ps_per_rack}"
               + (" --floor-sweep" if args.floor_sweep else ""))
    title = _cluster_title(args)
    text = markdown(records, command, title) + "\n"
    if args.floor_sweep:
        for n in args.jobs:
            path = results / (f"floor-sweep-n{n}-r{args.racks}x{args.servers_per_rack}+"
                              f"{args.ps_per_rack}-s{args.seed}.json")
            rec = json.loads(path.read_text()) if path.is_file() else floor_sweep(
                n, args.seed, args.racks, args.servers_per_rack, args.ps_per_rack)
            write_json_atomic(path, rec)
            text += sweep_markdown(rec, f"{n} jobs") + "\n"
    sections[title] = text
    page.write_text(PAGE_HEAD + "".join(sections[k] for k in sorted(sections)))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
