"""End to end against Gavel's driver, side by side in one run, on every Gavel trace (issue #34).

For each trace (the shipped dev trace and the validation traces,
``src/oasis_opt/data/traces/gavel/validation``) and each Gavel policy, three whole processes in
turn on the same machine:

* **ours**: ``python -m oasis_opt generate --trace gavel --file T --cluster C --seed 0`` then
  ``python -m oasis_opt solve I --policy P --out R`` (the two together: *ours s*);
* **Gavel**: its driver ``scripts/drivers/simulate_scheduler_with_trace.py`` with the flags of
  the validation README (``--gavel`` its ``scheduler`` folder, ``--gavel-python`` the
  interpreter that has its dependencies);
* **shares**: one more process that runs what the two commands run, stage by stage, and times
  each: start-up (interpreter + the imports of both commands), generate (trace -> instance ->
  JSON), read (JSON -> instance), policy (``solve``), validation (``validate``), writing
  (``save_result``). The shares are of that process's sum (they say where the time goes, not
  the timed run itself).

Wall seconds are the ratio's measure (Gavel's own numbers are wall times); CPU seconds of the
children are shown beside them. Without ``--gavel`` only our side runs (no ratio).

    .venv/bin/python benchmarks/bench_gavel.py --gavel GAVEL/scheduler --gavel-python PY

Writes benchmarks/results/gavel.md (and .json).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from oasis_opt.workloads.gavel import gavel_files, gavel_validation

RESULTS = Path(__file__).parent / "results"
POLICIES = {"gavel-fifo": ("fifo", ["--option", "variant=gavel"]),
            "gavel-las": ("max_min_fairness_perf", []),
            "gavel-ftf": ("finish_time_fairness_perf", []),
            "gavel-makespan": ("min_total_duration_perf", []),
            "max-min-fairness": ("max_min_fairness", [])}
STAGES = """
import sys, time
t = {"start": time.perf_counter()}
from oasis_opt.workloads.gavel import gavel_instance
from oasis_opt.model.io import save_instance, load_instance, save_result
from oasis_opt.model.validate import validate
from oasis_opt.policies import solve
t["imports"] = time.perf_counter()
trace, thr, cluster, policy, out, opts = sys.argv[1:7]
inst = gavel_instance(trace, thr, cluster=cluster)
save_instance(inst, out + "/i.json")
t["generate"] = time.perf_counter()
inst = load_instance(out + "/i.json")
t["read"] = time.perf_counter()
options = dict(kv.split("=") for kv in opts.split(",") if kv)
sched = solve(inst, policy, **options)
t["policy"] = time.perf_counter()
report = validate(inst, sched)
t["validation"] = time.perf_counter()
save_result(inst, sched, out + "/r.json")
t["writing"] = time.perf_counter()
print(repr(t))
"""


def child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(cmd: list[str], cwd: str | None = None) -> tuple[float, float, str]:
    """Wall and CPU seconds of one whole process, and its stdout."""
    t0, c0 = time.perf_counter(), child_cpu()
    res = subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True)
    return time.perf_counter() - t0, child_cpu() - c0, res.stdout


def stages(trace: str, thr: str, cluster: str, policy: str, opts: list[str], tmp: str
           ) -> dict[str, float]:
    """Seconds per stage (start-up = interpreter start + imports, from the parent's clock)."""
    kv = ",".join(opts[1::2])
    t0 = time.time()
    out = subprocess.run([sys.executable, "-c", STAGES, trace, thr, cluster, policy, tmp, kv],
                         check=True, capture_output=True, text=True).stdout
    t = eval(out.strip().splitlines()[-1])  # noqa: S307 - our own child's repr of a dict
    names = ["imports", "generate", "read", "policy", "validation", "writing"]
    secs, prev = {}, t["start"]
    for n in names:
        secs[n], prev = t[n] - prev, t[n]
    secs["interpreter"] = max(0.0, (time.time() - t0) - (t["writing"] - t["start"]))
    return secs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gavel", help="Gavel's scheduler folder (its driver runs beside ours)")
    ap.add_argument("--gavel-python", default="python", help="the Python with Gavel's deps")
    ap.add_argument("--traces", help="comma-separated trace names (default: all)")
    ap.add_argument("--policies", help="comma-separated policies (default: all)")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--from-json", help="only redraw the markdown from a gavel.json of a run")
    args = ap.parse_args(argv)
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        (Path(args.out) / "gavel.md").write_text(markdown(saved["rows"], saved["machine"]))
        return 0
    files = gavel_files()
    thr = str(files["throughputs"])
    traces = [{"name": "dev", "trace": files["trace"], "cluster": "8:8:8"}] + gavel_validation()
    if args.traces:
        traces = [t for t in traces if t["name"] in args.traces.split(",")]
    policies = {k: v for k, v in POLICIES.items()
                if not args.policies or k in args.policies.split(",")}
    py = [sys.executable, "-m", "oasis_opt"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for t in traces:
            trace = str(Path(t["trace"]).resolve())
            for name, (gname, opts) in policies.items():
                g_wall = g_cpu = None
                if args.gavel:
                    g_wall, g_cpu, _ = run([args.gavel_python,
                                            "scripts/drivers/simulate_scheduler_with_trace.py",
                                            "--trace_file", trace, "--policy", gname,
                                            "--throughputs_file", "simulation_throughputs.json",
                                            "--cluster_spec", str(t["cluster"]),
                                            "--num_gpus_per_server", "4:4:4",
                                            "--time_per_iteration", "360", "--seed", "11"],
                                           cwd=args.gavel)
                inst, res = f"{tmp}/i.json", f"{tmp}/r.json"
                gen_wall, gen_cpu, _ = run(py + ["generate", "--trace", "gavel", "--file", trace,
                                                 "--throughputs", thr, "--cluster",
                                                 str(t["cluster"]), "--seed", "0",
                                                 "--out", inst])
                sol_wall, sol_cpu, line = run(py + ["solve", inst, "--policy", name, *opts,
                                                    "--out", res])
                assert ", valid," in line, line
                share = stages(trace, thr, str(t["cluster"]), name, opts, tmp)
                ours = gen_wall + sol_wall
                rows.append({"trace": t["name"], "cluster": str(t["cluster"]), "policy": name,
                             "gavel": gname, "generate_s": gen_wall, "solve_s": sol_wall,
                             "ours_s": ours, "ours_cpu_s": gen_cpu + sol_cpu,
                             "gavel_s": g_wall, "gavel_cpu_s": g_cpu,
                             "ratio": g_wall / ours if g_wall else None, "stages_s": share,
                             "load_1min": os.getloadavg()[0] if hasattr(os, "getloadavg")
                             else None})
                print(json.dumps(rows[-1]), flush=True)
    machine = {"cpus": os.cpu_count(), "platform": platform.platform(),
               "python": platform.python_version(),
               "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
               "when": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    text = markdown(rows, machine)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gavel.md").write_text(text)
    (out / "gavel.json").write_text(json.dumps({"rows": rows, "machine": machine}, indent=1)
                                    + "\n")
    return 0


def stages_share(row: dict, names: tuple[str, ...]) -> float:
    """The share of ``names`` in the row's stage-by-stage process (0-1)."""
    s = row["stages_s"]
    return sum(s[n] for n in names) / sum(s.values())


def markdown(rows: list[dict], machine: dict) -> str:
    lines = ["# Gavel's policies end to end: `oasis-opt generate` + `solve` vs Gavel's driver",
             "", f"Machine: {machine['cpus']} CPUs (shared with other work), "
             f"{machine['platform']}, Python {machine['python']}, load average at the end "
             f"{tuple(round(x, 2) for x in machine['load_average'] or ())}, "
             f"{machine['when']}. Measured in one run by `benchmarks/bench_gavel.py`: per trace "
             "and policy, Gavel's whole driver process, then our two whole processes "
             "(`python -m oasis_opt generate --trace gavel ...` and `python -m oasis_opt "
             "solve ...`), wall seconds; ratio = Gavel / ours (wall, the measure asked); CPU "
             "ratio = the same of the processes' CPU seconds (user + system), which the load "
             "inflates less; load: the 1-minute load average after the row. Shares: one more process timing "
             "the same work stage by stage (start-up = interpreter + imports of both commands, "
             "then generate, read, policy, validation, writing), as % of its sum.", "",
             "| trace | cluster | policy | Gavel's | Gavel s | ours s (generate + solve) | "
             "ratio | >= 10x | CPU ratio | start-up % | generate % | read % | policy % | "
             "validation % | writing % | load |",
             "|---|---|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        s = r["stages_s"]
        total = sum(s.values())
        pct = {k: 100 * v / total for k, v in s.items()}
        ratio = r["ratio"]
        lines.append(
            f"| `{r['trace']}` | {r['cluster']} | `{r['policy']}` | `{r['gavel']}` | "
            + (f"{r['gavel_s']:.2f}" if r["gavel_s"] else "-")
            + f" | {r['ours_s']:.2f} ({r['generate_s']:.2f} + {r['solve_s']:.2f}) | "
            + (f"{ratio:.1f}x | {'✅' if ratio >= 10 else '❌'} | "
               f"{r['gavel_cpu_s'] / r['ours_cpu_s']:.1f}x" if ratio else "- | - | -")
            + f" | {pct['interpreter'] + pct['imports']:.0f} | {pct['generate']:.0f} | "
            f"{pct['read']:.0f} | {pct['policy']:.0f} | {pct['validation']:.0f} | "
            f"{pct['writing']:.0f} | "
            + (f"{r['load_1min']:.1f}" if r.get("load_1min") is not None else "-") + " |")
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    if ratios:
        low = [f"`{r['trace']}` `{r['policy']}` ({r['ratio']:.1f}x)" for r in rows
               if r["ratio"] and r["ratio"] < 10]
        lines += ["", f"Ratio {min(ratios):.1f}x - {max(ratios):.1f}x over {len(ratios)} "
                  f"trace-policy pairs; >= 10x on {len(ratios) - len(low)} of {len(ratios)}."
                  + (f" Below 10x: {', '.join(low)}." if low else "")]
        pct = {k: sorted(100 * r["stages_s"][k] / sum(r["stages_s"].values()) for r in rows)
               for k in ("interpreter", "imports", "policy")}
        med = {k: v[len(v) // 2] for k, v in pct.items()}
        lines += ["", f"Where our time goes (median over the pairs): start-up "
                  f"{med['interpreter'] + med['imports']:.0f}% (interpreter "
                  f"{med['interpreter']:.0f}%, imports {med['imports']:.0f}%: numpy and "
                  "highspy; no scipy, JAX, Ray or matplotlib, `tests/test_import_weight.py`), "
                  f"the policy's simulation {med['policy']:.0f}% (stopped after the last "
                  "completion), the rest (generate, read, validation, writing) "
                  f"{100 - med['interpreter'] - med['imports'] - med['policy']:.0f}%."]
        floor = [r for r in rows if r["ratio"] and r["ratio"] < 10
                 and r["gavel_s"] < 10 * r["ours_s"] * stages_share(r, ("interpreter",
                                                                        "imports"))]
        if floor:
            lines += ["", f"On {len(floor)} of the pairs below 10x, Gavel's whole run is shorter "
                      "than ten times our start-up alone (interpreter + imports of the two "
                      "processes, scaled to the timed run): there no faster policy can reach "
                      "10x; " + ", ".join(f"`{r['trace']}` `{r['policy']}`" for r in floor)
                      + "."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
