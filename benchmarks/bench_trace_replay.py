"""Replay a month of the Philly trace (about 21,000 jobs) with OASiS, end to end.

Builds the instance from the packaged Philly digest (``workloads.traces.philly_instance``: 1-hour
slots, the Philly-like cluster of 80 8-GPU servers and 40 PS servers in 10 racks), runs OASiS
(numpy backend) through the simulator with a progress bar over slots, and validates the
schedule. As a reference measured in the same run, the simulator's greedy policy replays the
same instance; the table gives both times and their ratio. Target: the OASiS replay
(build + solve) in under 30 s of wall clock on 2 cores (it was 115 s; a shared machine's load
counts in this number: ``benchmarks/bench_philly.py`` gives the CPU-time ratio to a baseline).

    .venv/bin/python benchmarks/bench_trace_replay.py            # November 2017, 30 days
    .venv/bin/python benchmarks/bench_trace_replay.py --days 3   # a quick look

Writes benchmarks/results/trace_replay.md (and .json).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402

from oasis_opt.model import validate  # noqa: E402
from oasis_opt.policies import get_policy  # noqa: E402
from oasis_opt.workloads.traces import philly_instance  # noqa: E402

RESULTS = Path(__file__).parent / "results"
TARGET_S = 30.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--start", default="2017-11-01")
    ap.add_argument("--days", type=float, default=30)
    ap.add_argument("--slot-s", type=float, default=3600.0)
    ap.add_argument("--backend", default="numpy", choices=("numpy", "jax", "reference"))
    ap.add_argument("--no-reference", action="store_true", help="skip the greedy replay")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    inst = philly_instance(args.start, args.days, seed=0, slot_s=args.slot_s)
    build_s = time.perf_counter() - t0
    print(f"instance: {inst.I} jobs, T = {inst.horizon} slots of {args.slot_s:g} s, "
          f"H = {inst.H}, K = {inst.K} ({build_s:.1f} s)", flush=True)

    t0 = time.perf_counter()
    sched = get_policy("oasis", backend=args.backend).solve(inst, progress=True)
    solve_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    report = validate(inst, sched)
    validate_s = time.perf_counter() - t0
    dec = sched.stats.get("timing", {}).get("decision_s", {})
    row = {"jobs": inst.I, "horizon": inst.horizon, "servers": inst.H + inst.K,
           "build_s": build_s, "oasis_s": solve_s, "replay_s": build_s + solve_s,
           "validate_s": validate_s, "valid": report.ok,
           "admitted": int(sum(sched.admitted)), "completed": int(sched.completed.sum()),
           "total_utility": sched.total_utility,
           "decision_median_ms": 1e3 * dec.get("median", float("nan")),
           "decision_p95_ms": 1e3 * dec.get("p95", float("nan")),
           "decision_max_ms": 1e3 * dec.get("max", float("nan"))}
    if not args.no_reference:
        t0 = time.perf_counter()
        greedy = get_policy("greedy").solve(inst, progress=True)
        row["greedy_s"] = time.perf_counter() - t0
        row["oasis_over_greedy"] = solve_s / row["greedy_s"]
        row["greedy_completed"] = int(greedy.completed.sum())
    row["target_met"] = row["replay_s"] <= TARGET_S
    machine = {"cpus": os.cpu_count(), "platform": platform.platform(),
               "python": platform.python_version(), "backend": args.backend,
               "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
               "when": datetime.now(timezone.utc).isoformat(timespec="seconds")}

    lines = [f"# Philly trace replay with OASiS ({args.start}, {args.days:g} days)", "",
             f"Machine: {machine['cpus']} CPUs, {machine['platform']}, Python "
             f"{machine['python']}, load average at the end {machine['load_average']}.", "",
             "| quantity | value |", "|---|---:|"]
    for k, v in row.items():
        lines.append(f"| {k} | {v:.3f} |" if isinstance(v, float) else f"| {k} | {v} |")
    lines += ["", f"Target: build + OASiS <= {TARGET_S:.0f} s on 2 cores: "
              f"{'met' if row['target_met'] else 'NOT met'} ({row['replay_s']:.0f} s)."]
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    suffix = "" if args.days == 30 else f"_{args.days:g}d"
    (out / f"trace_replay{suffix}.md").write_text(text)
    (out / f"trace_replay{suffix}.json").write_text(json.dumps(
        {"row": {k: (v if not isinstance(v, (np.generic,)) else v.item()) for k, v in row.items()},
         "machine": machine}, indent=1, default=str) + "\n")
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
