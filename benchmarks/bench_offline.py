"""Offline solvers: Fig. 5 MILPs, Pyomo vs highspy hand-off, column generation at full scale.

Parts (``--part``, default all; each part's numbers are stored in offline.json and the
markdown offline.md is rebuilt from every stored part, so parts can be run separately):

* ``fig5``: every Fig. 5 instance (10 jobs, T = 10, 3/6/9/12 servers, 4 gamma1 ranges, seeds
  0..N-1) solved to proven optimality by HiGHS (policy ``offline``) and CP-SAT, with the model
  build (arrays), the hand-off to the solver and the solve timed separately. Target: each
  <= 10 s on 2 cores.
* ``handoff``: the same MILP built and handed to HiGHS through Pyomo (``milp_pyomo``) and as
  arrays through ``highspy.passModel`` (``milp_arrays``), on Fig. 5 instances and on larger
  paper-sim instances (LP relaxation solved, so the solve stays short); ratio Pyomo / arrays of
  build + hand-off time, measured in the same run.
* ``colgen``: the column-generation bracket [lower, upper] on a paper-sim instance (default
  400 jobs, T = 300, H = K = 50) within a time budget (default 600 s), against OASiS.
* ``sizes``: which paper-sim instances (seed 1, T = 300, H = K = 50) the exact MILP handles:
  10/20/50/100 jobs, each in a fresh process, policy ``offline`` (and ``offline-cpsat`` up to
  ``--cpsat-jobs``) with a time limit (``--budget``, default 120 s): columns, nonzeros, the
  memory estimate of ``oasis_opt.offline.exact.memory_estimate`` beside the measured peak
  resident memory (this process and its solver child), status, bound, gap, wall time.
* ``limit``: does ``oasis-opt solve --policy P --time-limit S`` stop on time? The README's
  100-job instance (paper-sim, seed 1, T = 300) solved through the command line (``offline``
  with S = 30 and 60 s, ``offline-cpsat`` and ``offline-colgen`` with S = 30 s): wall time of
  the whole command vs S (the target: S + 10 % + 2 s), with the machine's load when it started.

    .venv/bin/python benchmarks/bench_offline.py --quick          # small: a minute or two
    .venv/bin/python benchmarks/bench_offline.py --part fig5      # 5 seeds x 16 instances
    .venv/bin/python benchmarks/bench_offline.py --part colgen    # 400 jobs, 600 s budget
    .venv/bin/python benchmarks/bench_offline.py --part sizes     # ~15 min
    .venv/bin/python benchmarks/bench_offline.py --part limit     # ~3 min

Writes benchmarks/results/offline.md (tables) and offline.json (raw numbers).
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyomo.environ as pyo
from tqdm import tqdm

from oasis_opt.experiments.fig5 import PRIORITIES, SERVERS
from oasis_opt.offline.colgen import bracket
from oasis_opt.offline.exact import OfflinePolicy
from oasis_opt.offline.milp_arrays import build_milp
from oasis_opt.offline.milp_pyomo import solve_pyomo
from oasis_opt.offline.solver import solve_program
from oasis_opt.policies import get_policy
from oasis_opt.sizing import physical_memory
from oasis_opt.workloads import paper_fig5, paper_sim

RESULTS = Path(__file__).parent / "results"


def bench_fig5(seeds) -> dict:
    rows = []
    grid = [(n, pr, s) for n in SERVERS for pr in PRIORITIES for s in seeds]
    for n, pr, s in tqdm(grid, desc="Fig. 5 MILPs", unit="inst"):
        inst = paper_fig5(s, servers=n, priority=pr)
        row = {"servers": n, "priority": list(pr), "seed": s}
        for backend in ("highs", "cpsat"):
            sched = OfflinePolicy(backend=backend).solve(inst)
            st = sched.stats
            row[backend] = {"objective": sched.total_utility, "status": st["status"],
                            "proven": st["proven_optimal"], "build_s": st["build_s"],
                            "handoff_s": st["handoff_s"], "solve_s": st["solve_s"],
                            "total_s": st["build_s"] + st["handoff_s"] + st["solve_s"]}
        row["columns"], row["rows"] = st["columns"], st["rows"]
        row["agree"] = abs(row["highs"]["objective"] - row["cpsat"]["objective"]) <= 1e-4
        rows.append(row)
    return {"seeds": list(seeds), "rows": rows}


def bench_handoff(seeds, sim_sizes) -> dict:
    rows = []
    cases = [("fig5", s, n, pr) for n in SERVERS for pr in PRIORITIES[:1] for s in seeds]
    cases += [("paper-sim", 0, jobs, T) for jobs, T in sim_sizes]
    for kind, seed, a, b in tqdm(cases, desc="hand-off", unit="model"):
        if kind == "fig5":
            inst = paper_fig5(seed, servers=a, priority=b)
            label = f"Fig. 5, {a} servers, seed {seed}"
            relax = False
        else:
            inst = paper_sim(seed, jobs=a, horizon=b, worker_servers=10, ps_servers=10)
            label = f"paper-sim {a} jobs, T={b}, H=K=10 (LP)"
            relax = True
        t0 = time.perf_counter()
        model = build_milp(inst)
        arrays_build = time.perf_counter() - t0
        res = solve_program(model.lp, relax=relax)
        ref = solve_pyomo(inst, relax=relax)
        arrays = arrays_build + res.build_s
        pyomo = ref["build_s"] + ref["handoff_s"]
        pyomo_cols = sum(1 for _ in ref["model"].component_data_objects(pyo.Var))
        rows.append({"model": label, "columns": model.lp.n_cols, "pyomo_columns": pyomo_cols,
                     "nonzeros": int(model.lp.A.nnz),
                     "arrays_build_s": arrays_build, "passmodel_s": res.build_s,
                     "arrays_solve_s": res.solve_s, "pyomo_build_s": ref["build_s"],
                     "pyomo_handoff_s": ref["handoff_s"], "pyomo_highs_s": ref["highs_s"],
                     "ratio": pyomo / arrays, "objective_arrays": res.objective,
                     "objective_pyomo": ref["objective"]})
    return {"rows": rows}


def bench_colgen(jobs: int, horizon: int, budget: float, seed: int) -> dict:
    inst = paper_sim(seed, jobs=jobs, horizon=horizon)
    t0 = time.perf_counter()
    oasis = get_policy("oasis").solve(inst)
    oasis_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    br = bracket(inst, time_limit=budget, progress=True)
    wall = time.perf_counter() - t0
    return {"jobs": jobs, "horizon": horizon, "seed": seed, "budget_s": budget,
            "wall_s": wall, "oasis": oasis.total_utility, "oasis_s": oasis_s,
            "oasis_admitted": int(sum(oasis.admitted)),
            "admitted": int(sum(br.schedule.admitted)), **br.stats(),
            "ratio_upper_over_oasis": br.upper / oasis.total_utility,
            "ratio_lower_over_oasis": br.lower / oasis.total_utility,
            "history": br.history}


SIZES = (10, 20, 50, 100)


def size_one(jobs: int, backend: str, budget: float) -> dict:
    """One row of ``sizes`` (run in a fresh process, so that peak memory is this run's)."""
    import resource

    from oasis_opt.offline.exact import memory_estimate
    from oasis_opt.offline.milp_arrays import milp_size

    inst = paper_sim(1, jobs=jobs, horizon=300)
    size = milp_size(inst)
    t0 = time.perf_counter()
    # measured even above the default budget (half the memory), within the whole memory
    sched = OfflinePolicy(backend=backend, memory_budget_gb=physical_memory() / 1e9).solve(
        inst, time_limit=budget)
    wall = time.perf_counter() - t0
    st = sched.stats
    peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) * 1024
    return {"jobs": jobs, "backend": backend, "budget_s": budget, "columns": st["columns"],
            "rows": st.get("rows"), "nonzeros": st.get("nonzeros"),
            "size": size, "estimate_gb": memory_estimate(size, backend) / 1e9,
            "peak_gb": peak / 1e9,
            "status": st["status"], "incumbent": st["incumbent"],
            "objective": st["objective"], "bound": st["bound"], "gap": st["gap"],
            "build_s": st["build_s"], "handoff_s": st["handoff_s"], "solve_s": st["solve_s"],
            "wall_s": wall}


def bench_sizes(budget: float, cpsat_jobs: int) -> dict:
    import subprocess
    import sys

    rows = []
    cases = [(j, "highs") for j in SIZES] + [(j, "cpsat") for j in SIZES if j <= cpsat_jobs]
    for jobs, backend in tqdm(cases, desc="MILP sizes", unit="solve"):
        out = subprocess.run([sys.executable, __file__, "--size-one", str(jobs), backend,
                              str(budget)], capture_output=True, text=True)
        if out.returncode:
            raise RuntimeError(f"{jobs} jobs, {backend}: exit {out.returncode}\n{out.stderr}")
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {"budget_s": budget, "rows": rows}


# (policy, time limit in seconds) cases of the ``limit`` part
LIMIT_CASES = (("offline", 30.0), ("offline", 60.0), ("offline-cpsat", 30.0),
               ("offline-colgen", 30.0))


def bench_limit(cases=LIMIT_CASES) -> dict:
    import os
    import subprocess
    import sys
    import tempfile

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        inst = Path(tmp) / "inst.json"
        cli = [sys.executable, "-m", "oasis_opt"]
        subprocess.run(cli + ["generate", "--preset", "paper-sim", "--jobs", "100", "--horizon",
                              "300", "--seed", "1", "--out", str(inst)], check=True,
                       capture_output=True)
        for policy, limit in tqdm(cases, desc="time limits", unit="solve"):
            result = Path(tmp) / "r.json"
            # the MILP is above the default memory budget (half the memory): allow all of it
            budget = ([] if policy == "offline-colgen" else
                      ["--option", f"memory_budget_gb={physical_memory() / 1e9:.1f}"])
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            proc = subprocess.run(cli + ["solve", str(inst), "--policy", policy,
                                         "--time-limit", str(limit), *budget,
                                         "--out", str(result)],
                                  capture_output=True, text=True, check=True)
            wall = time.perf_counter() - t0
            st = json.loads(result.read_text())["stats"]
            rows.append({"policy": policy, "limit_s": limit, "wall_s": wall,
                         "target_s": 1.1 * limit + 2, "load": load, "line": proc.stdout.strip(),
                         "status": st["status"], "build_s": st.get("build_s"),
                         "handoff_s": st.get("handoff_s"), "solve_s": st.get("solve_s"),
                         "message": st.get("message")})
    return {"rows": rows}


# ---- markdown -----------------------------------------------------------------------------
def md_fig5(d: dict) -> list[str]:
    out = [f"## Fig. 5 MILPs (seeds {d['seeds']}): build / hand-off / solve, seconds", "",
           "| servers | gamma1 | instances | cols | rows | build | hand-off | HiGHS solve "
           "median | HiGHS max total | CP-SAT solve median | CP-SAT max total | all proven | "
           "HiGHS = CP-SAT |", "|" + "---|" * 13]
    groups: dict = {}
    for r in d["rows"]:
        groups.setdefault((r["servers"], tuple(r["priority"])), []).append(r)
    worst = 0.0
    for (n, pr), rs in groups.items():
        h = [r["highs"] for r in rs]
        c = [r["cpsat"] for r in rs]
        worst = max(worst, max(x["total_s"] for x in h))
        out.append(
            f"| {n} | [{pr[0]:g},{pr[1]:g}] | {len(rs)} | "
            f"{statistics.median(r['columns'] for r in rs):.0f} | "
            f"{statistics.median(r['rows'] for r in rs):.0f} | "
            f"{statistics.median(x['build_s'] for x in h):.3f} | "
            f"{statistics.median(x['handoff_s'] for x in h):.4f} | "
            f"{statistics.median(x['solve_s'] for x in h):.2f} | "
            f"{max(x['total_s'] for x in h):.2f} | "
            f"{statistics.median(x['solve_s'] for x in c):.2f} | "
            f"{max(x['total_s'] for x in c):.2f} | "
            f"{'yes' if all(x['proven'] for x in h + c) else 'NO'} | "
            f"{'yes' if all(r['agree'] for r in rs) else 'NO'} |")
    out += ["", f"Slowest HiGHS instance (build + hand-off + solve): {worst:.2f} s "
            "(target <= 10 s).", ""]
    return out


def md_handoff(d: dict) -> list[str]:
    out = ["## Pyomo vs highspy hand-off (same MILP), seconds", "",
           "| model | columns (arrays / Pyomo) | nonzeros | arrays build | passModel | Pyomo "
           "build | Pyomo hand-off | Pyomo / arrays (build + hand-off) | HiGHS solve | "
           "objectives agree |", "|" + "---|" * 10]
    for r in d["rows"]:
        agree = (r["objective_pyomo"] is not None and r["objective_arrays"] is not None
                 and abs(r["objective_pyomo"] - r["objective_arrays"])
                 <= 1e-6 * max(1, abs(r["objective_arrays"])))
        out.append(f"| {r['model']} | {r['columns']} / {r.get('pyomo_columns', '?')} | {r['nonzeros']} | "
                   f"{r['arrays_build_s']:.3f} | {r['passmodel_s']:.3f} | "
                   f"{r['pyomo_build_s']:.3f} | {r['pyomo_handoff_s']:.3f} | "
                   f"{r['ratio']:.1f}x | {r['arrays_solve_s']:.2f} | "
                   f"{'yes' if agree else 'no (Pyomo model is the unreduced one)'} |")
    out += ["", "The Pyomo model is the unreduced reference (more columns than the array "
            "model): its LP relaxation may be weaker, the MILP optima agree.", ""]
    return out


def md_colgen(d: dict) -> list[str]:
    h = d["history"]
    last = {p: [x for x in h if x["phase"] == p] for p in ("(pooled)", "(per server)")}
    out = [f"## Column generation: paper-sim {d['jobs']} jobs, T = {d['horizon']}, seed "
           f"{d['seed']}, budget {d['budget_s']:.0f} s", "",
           "| quantity | value |", "|---|---|",
           f"| OASiS total utility (admitted) | {d['oasis']:.1f} ({d['oasis_admitted']}) |",
           f"| lower: integer schedule (source: {d['source']}) | {d['lower']:.1f} "
           f"({d['admitted']} admitted) |",
           f"| upper: best Lagrangian bound | {d['upper']:.1f} |",
           f"| gap (upper - lower) / upper | {100 * d['gap']:.2f} % |",
           f"| OPT / OASiS in | [{d['ratio_lower_over_oasis']:.3f}, "
           f"{d['ratio_upper_over_oasis']:.3f}] |",
           f"| LP-guided greedy utility | {d['greedy_utility']:.1f} |",
           f"| pricing rounds (pooled + per server) | {len(last['(pooled)'])} + "
           f"{len(last['(per server)'])} |",
           f"| pooled master converged / per-server converged | "
           f"{d['pooled_converged']} / {d['converged']} |",
           f"| last per-server master LP value | {d['lp_value']:.1f} |",
           f"| columns generated | {d['columns']} |",
           f"| time: OASiS seed / column generation / integer master / wall | "
           f"{d['seed_s']:.1f} / {d['cg_s']:.1f} / {d['mip_s']:.1f} / {d['wall_s']:.1f} s |",
           f"| integer master status | {d['mip_status']} |", "",
           "Seeded with only OASiS (oracle constants). Seeded with every policy (OASiS as the "
           "figures price it included), completed and searched (ruin and recreate): "
           "`colgen_bracket.md` (`benchmarks/bench_colgen_bracket.py`).", ""]
    return out


def md_sizes(d: dict) -> list[str]:
    from oasis_opt.offline.exact import default_memory_budget_gb, memory_estimate

    out = [f"## Exact MILP by size: paper-sim seed 1, T = 300, H = K = 50, time limit "
           f"{d['budget_s']:.0f} s", "",
           "| jobs | backend | columns | nonzeros | memory estimate | peak memory | status | "
           "incumbent | bound | gap | build + hand-off + solve | wall |", "|" + "---|" * 12]
    budget = default_memory_budget_gb()
    for r in d["rows"]:
        fmt = (lambda v, f: "-" if v is None else format(v, f))
        out.append(f"| {r['jobs']} | {r['backend']} | {r['columns']:,} | "
                   f"{fmt(r['nonzeros'], ',')} | "
                   f"{memory_estimate(r['size'], r['backend']) / 1e9:.2f} GB"
                   + (" (refused)" if memory_estimate(r["size"], r["backend"]) / 1e9 > budget
                      else "") + " | "
                   f"{r['peak_gb']:.2f} GB | {r['status']} | "
                   f"{fmt(r['objective'], '.1f') if r['incumbent'] else 'none'} | "
                   f"{fmt(r['bound'], '.1f')} | "
                   f"{fmt(r['gap'], '.1%') if r['incumbent'] else '-'} | "
                   f"{r['build_s']:.1f} + {r['handoff_s']:.1f} + {r['solve_s']:.1f} s | "
                   f"{r['wall_s']:.1f} s |")
    out += ["", "Peak memory: this process plus its solver child (the sum of both peaks, an "
            "upper bound on the simultaneous peak). (refused): above the default memory budget "
            f"on this machine ({budget:.1f} GB, half its memory); measured with the whole "
            "memory as budget.", ""]
    return out


def md_limit(d: dict) -> list[str]:
    out = ["## `oasis-opt solve --policy P --time-limit S`, 100 paper-sim jobs (seed 1, T = 300;"
           " `--option memory_budget_gb=` the machine's memory: the MILP is above the default "
           "budget)", "", "| policy | S | wall (whole command) | target S + 10 % + 2 s | within | "
           "load (1 min) | build | hand-off | solve | solve line (solver part) |",
           "|" + "---|" * 10]

    def sec(v):
        return "-" if v is None else f"{v:.1f} s"

    for r in d["rows"]:
        words = r["line"].split("; solver: ")[-1].split("; schedule")[0]
        load = f"{r['load']:.1f}" if "load" in r else "-"  # not recorded by earlier runs
        within = "yes" if r["wall_s"] <= r["target_s"] else "NO"
        out.append(f"| {r.get('policy', 'offline')} | {r['limit_s']:.0f} s | {r['wall_s']:.1f} s "
                   f"| {r['target_s']:.1f} s | {within} | {load} | {sec(r['build_s'])} | "
                   f"{sec(r['handoff_s'])} | {sec(r['solve_s'])} | {words} |")
    return out + ["", "build: the MILP's arrays (column generation: -); hand-off: starting the "
                  "solver's process and its model; wall: the whole command (start, load, solve, "
                  "validate, write).", ""]


def write_markdown(store: dict) -> str:
    lines = ["# Offline solvers benchmark", "",
             f"Machine: {store.get('machine', '?')}. Generated by benchmarks/bench_offline.py; "
             "each part records when it ran.", ""]
    for part, fn in (("fig5", md_fig5), ("handoff", md_handoff), ("colgen", md_colgen),
                     ("colgen_quick", md_colgen), ("sizes", md_sizes), ("limit", md_limit)):
        if part in store:
            lines.append(f"_{part}: run {store[part]['when']}_")
            lines.append("")
            lines += fn(store[part]["data"])
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("fig5", "handoff", "colgen", "sizes", "limit", "all"),
                    default="all")
    ap.add_argument("--cpsat-jobs", type=int, default=20,
                    help="sizes: CP-SAT up to this many jobs (default 20)")
    ap.add_argument("--size-one", nargs=3, metavar=("JOBS", "BACKEND", "BUDGET"),
                    help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true",
                    help="1 seed, small hand-off models, column generation on 100 jobs / 120 s")
    ap.add_argument("--seeds", type=int, default=5, help="Fig. 5 seeds (default 5)")
    ap.add_argument("--jobs", type=int, default=None, help="column generation jobs (400)")
    ap.add_argument("--horizon", type=int, default=300)
    ap.add_argument("--budget", type=float, default=None, help="column generation seconds (600)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.size_one:
        jobs, backend, budget = args.size_one
        print(json.dumps(size_one(int(jobs), backend, float(budget))))
        return 0

    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "offline.json"
    store = json.loads(path.read_text()) if path.is_file() else {}
    store["machine"] = f"{platform.processor() or platform.machine()}, {platform.system()}"
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts = (("fig5", "handoff", "colgen", "sizes", "limit") if args.part == "all"
             else (args.part,))
    if "fig5" in parts:
        seeds = range(1 if args.quick else args.seeds)
        store["fig5"] = {"when": when, "data": bench_fig5(seeds)}
        print("\n".join(md_fig5(store["fig5"]["data"])))
    if "handoff" in parts:
        sizes = [(10, 30)] if args.quick else [(20, 60), (60, 100), (100, 150)]
        store["handoff"] = {"when": when, "data": bench_handoff(range(1), sizes)}
        print("\n".join(md_handoff(store["handoff"]["data"])))
    if "colgen" in parts:
        jobs = args.jobs or (100 if args.quick else 400)
        budget = args.budget or (120.0 if args.quick else 600.0)
        key = "colgen" if (jobs, args.horizon) == (400, 300) else "colgen_quick"
        store[key] = {"when": when,
                      "data": bench_colgen(jobs, args.horizon, budget, args.seed)}
        print("\n".join(md_colgen(store[key]["data"])))
    if "sizes" in parts:
        store["sizes"] = {"when": when,
                          "data": bench_sizes(args.budget or 120.0, args.cpsat_jobs)}
        print("\n".join(md_sizes(store["sizes"]["data"])))
    if "limit" in parts:
        store["limit"] = {"when": when, "data": bench_limit()}
        print("\n".join(md_limit(store["limit"]["data"])))
    path.write_text(json.dumps(store, indent=1, default=float) + "\n")
    (RESULTS / "offline.md").write_text(write_markdown(store))
    print(f"wrote {RESULTS / 'offline.md'}")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    raise SystemExit(main())
