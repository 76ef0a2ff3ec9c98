"""Speed of Gavel's policies on Gavel's dev trace (60 jobs, 8:8:8), against Gavel's reported times.

For each policy: the simulation in this process (median of ``--repeat`` runs of ``solve``, the
instance already built), and the whole command as Gavel's times count it (a fresh Python process
that imports the package, reads the trace and the throughput table, builds the instance,
simulates and validates). Gavel's ``wall_s`` (``results.csv``: its whole driver process, about
3 s of which are imports, on a shared 2-core machine) was *not* measured in this run or on this
machine, so its ratio is indicative only. As a reference measured in the same run, the
simulator's slot loop alone: the ``greedy`` policy on the same instance.

    .venv/bin/python benchmarks/bench_gavel.py [--repeat 3]

Writes benchmarks/results/gavel.md (and .json).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from oasis_opt.experiments.gavel import read_gavel_results
from oasis_opt.model import validate
from oasis_opt.policies import solve
from oasis_opt.workloads.gavel import gavel_files, gavel_instance

RESULTS = Path(__file__).parent / "results"
POLICIES = {"gavel-fifo": ("fifo", {"variant": "gavel"}),
            "gavel-las": ("max_min_fairness_perf", {}),
            "gavel-ftf": ("finish_time_fairness_perf", {}),
            "gavel-makespan": ("min_total_duration_perf", {}),
            "max-min-fairness": ("max_min_fairness", {})}
COMMAND = """
import sys, json
from oasis_opt import solve, validate
from oasis_opt.workloads.gavel import gavel_files, gavel_instance
f = gavel_files()
inst = gavel_instance(f["trace"], f["throughputs"])
s = solve(inst, sys.argv[1], **json.loads(sys.argv[2]))
assert validate(inst, s).ok
"""


def timed(fn, repeat: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``fn()`` (CPU time is what a loaded machine distorts
    least: the shared cores run other work too)."""
    wall, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    files = gavel_files()
    gavel = read_gavel_results(files["results"])
    inst = gavel_instance(files["trace"], files["throughputs"])
    greedy_s, greedy_cpu = timed(lambda: solve(inst, "greedy"), args.repeat)
    rows = []
    for name, (gname, opts) in POLICIES.items():
        sched = solve(inst, name, **opts)
        assert validate(inst, sched).ok
        sim_s, sim_cpu = timed(lambda: solve(inst, name, **opts), args.repeat)
        t0, c0 = time.perf_counter(), child_cpu()
        subprocess.run([sys.executable, "-c", COMMAND, name, json.dumps(opts)], check=True,
                       capture_output=True)
        process_s, process_cpu = time.perf_counter() - t0, child_cpu() - c0
        ref = gavel[gname]["wall_s"]
        rows.append({"policy": name, "gavel": gname, "simulation_s": sim_s,
                     "simulation_cpu_s": sim_cpu, "process_s": process_s,
                     "process_cpu_s": process_cpu, "gavel_wall_s": ref,
                     "gavel_over_process_cpu": ref / process_cpu,
                     "gavel_over_simulation_cpu": ref / sim_cpu,
                     "simulation_over_greedy_cpu": sim_cpu / greedy_cpu})
        print(rows[-1], flush=True)
    machine = {"cpus": os.cpu_count(), "platform": platform.platform(),
               "python": platform.python_version(),
               "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
               "when": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    lines = ["# Gavel's policies on the dev trace: simulation speed", "",
             f"Machine: {machine['cpus']} CPUs, {machine['platform']}, Python "
             f"{machine['python']}, load average at the end {machine['load_average']}.", "",
             "simulation: `solve` in-process, median of "
             f"{args.repeat}; process: a fresh `python` that imports, builds, simulates and "
             "validates (what Gavel's wall time counts); Gavel: `results.csv` wall_s (its whole "
             "driver, another machine and day: indicative). Ratios use CPU seconds (wall seconds "
             "shown too: they swell with the machine's load). Same-run reference: the `greedy` "
             f"policy's slot loop on the same instance, {greedy_cpu:.3f} s CPU "
             f"({greedy_s:.3f} s wall).", "",
             "| policy | Gavel's | simulation s CPU (wall) | process s CPU (wall) | Gavel wall s "
             "| Gavel / process CPU | Gavel / simulation CPU | simulation / greedy |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| `{r['policy']}` | `{r['gavel']}` | {r['simulation_cpu_s']:.3f} "
                     f"({r['simulation_s']:.3f}) | {r['process_cpu_s']:.2f} "
                     f"({r['process_s']:.2f}) | {r['gavel_wall_s']:.2f} | "
                     f"{r['gavel_over_process_cpu']:.1f}x | "
                     f"{r['gavel_over_simulation_cpu']:.1f}x | "
                     f"{r['simulation_over_greedy_cpu']:.1f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gavel.md").write_text(text)
    (out / "gavel.json").write_text(json.dumps({"rows": rows, "greedy_s": greedy_s,
                                                "greedy_cpu_s": greedy_cpu,
                                                "machine": machine}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
