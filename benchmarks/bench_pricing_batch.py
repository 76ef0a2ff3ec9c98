"""The floor search (``estimate_pricing``, ``estimate-pricing --method search``): the whole grid
at once (``batch=True``, ``online.pricing_batch``) against one floor at a time (``batch=False``).

For each history (the workloads the package's experiments and figures estimate on, and larger
paper-sim ones) it runs ``estimate_pricing`` on the default grid (15 floors) both ways in the same
process, alternating, ``--repeat`` times each (the fastest of each is kept), and reports both
times and their ratio; it also checks that both give the same calibration table and chosen L (the
tests hold them equal too). Times are CPU seconds of this process (``time.process_time``; the
computation is single-threaded numpy), which a machine shared with other work does not inflate;
wall-clock seconds are reported beside them.

    .venv/bin/python benchmarks/bench_pricing_batch.py           # a few minutes
    .venv/bin/python benchmarks/bench_pricing_batch.py --quick   # the small histories only
    .venv/bin/python benchmarks/bench_pricing_batch.py --full    # plus the hetero history

Writes benchmarks/results/pricing_batch.md (and the raw numbers to pricing_batch.json).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

from tqdm import tqdm

from oasis_opt.online.estimate import DEFAULT_FLOOR_GRID, estimate_pricing
from oasis_opt.workloads import paper_fig5, paper_sim

RESULTS = Path(__file__).parent / "results"
SEEDS = (1000, 1001, 1002)  # experiments.calibration.HISTORY_SEEDS
# (name, generator, params, seeds, in: True every run, False without --quick, None with --full)
CASES = [
    ("fig5 testbed, 3 servers, I=10 T=10", paper_fig5, {"servers": 3}, tuple(range(1000, 1010)),
     True),
    ("paper-sim I=12 T=40, 6+6 typed (hetero quick)", paper_sim,
     {"jobs": 12, "horizon": 40, "worker_servers": 6, "ps_servers": 6,
      "cluster_mix": "v100:p100:k80"}, (1000,), True),
    ("paper-sim I=40 T=60, 12+12 typed (hetero)", paper_sim,
     {"jobs": 40, "horizon": 60, "worker_servers": 12, "ps_servers": 12,
      "cluster_mix": "v100:p100:k80"}, SEEDS, None),
    ("paper-sim I=30 T=50, 10+10", paper_sim,
     {"jobs": 30, "horizon": 50, "worker_servers": 10, "ps_servers": 10}, SEEDS, True),
    ("paper-sim I=100 T=100, 20+20", paper_sim,
     {"jobs": 100, "horizon": 100, "worker_servers": 20, "ps_servers": 20}, (1000,), False),
    ("paper-sim I=100 T=300, 50+50 (defaults)", paper_sim, {}, (1000,), False),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="only the small histories")
    ap.add_argument("--full", action="store_true", help="also the hetero history (long)")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each way (default 2)")
    args = ap.parse_args()
    cases = [c for c in CASES
             if c[4] or (c[4] is False and not args.quick) or (c[4] is None and args.full)]
    rows = []
    for name, gen, params, seeds, _ in tqdm(cases, desc="histories"):
        history = [gen(s, **params) for s in seeds]
        cpu, wall, results = {False: [], True: []}, {False: [], True: []}, {}
        for _ in range(args.repeat):
            for batch in (False, True):
                c0, w0 = time.process_time(), time.perf_counter()
                results[batch] = estimate_pricing(history, DEFAULT_FLOOR_GRID, batch=batch)
                cpu[batch].append(time.process_time() - c0)
                wall[batch].append(time.perf_counter() - w0)
        times = {b: min(v) for b, v in cpu.items()}
        same = (results[True].calibration == results[False].calibration
                and dict(results[True]) == dict(results[False]))
        if not same:
            raise SystemExit(f"{name}: the batched search differs from the sequential one")
        rows.append({"history": name, "instances": len(history),
                     "jobs": sum(h.I for h in history), "grid": len(DEFAULT_FLOOR_GRID),
                     "sequential_cpu_s": times[False], "batch_cpu_s": times[True],
                     "ratio": times[False] / times[True],
                     "sequential_wall_s": min(wall[False]), "batch_wall_s": min(wall[True]),
                     "wall_ratio": min(wall[False]) / min(wall[True]),
                     "chosen_L": results[True].calibration.chosen, "same": same})
        tqdm.write(f"{name}: sequential {times[False]:.2f} s, batch {times[True]:.2f} s CPU, "
                   f"{times[False] / times[True]:.2f}x")
    RESULTS.mkdir(exist_ok=True)
    meta = {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "python": platform.python_version(), "machine": platform.machine(),
            "repeat": args.repeat, "load_average": list(os.getloadavg()),
            "command": "benchmarks/bench_pricing_batch.py" + (" --quick" if args.quick else "")
            + (" --full" if args.full else "")}
    (RESULTS / "pricing_batch.json").write_text(json.dumps({"meta": meta, "rows": rows},
                                                           indent=1) + "\n")
    lines = ["# Floor search: the whole grid at once vs one floor at a time", "",
             f"`{meta['command']}`, {meta['when']}, Python {meta['python']} on "
             f"{meta['machine']}, load average {meta['load_average'][0]:.1f}. "
             "`estimate_pricing(history, DEFAULT_FLOOR_GRID, batch=...)`, default grid (15 "
             "floors), both ways in the same process, alternating, the fastest of "
             f"{args.repeat} runs each; every schedule is validated in both. CPU seconds of the "
             "process (wall-clock beside them: inflated when the machine is shared). Ratio = "
             "sequential / batch. Both give the same calibration table and chosen L on every "
             "history (checked here and by `tests/test_online_pricing_batch.py`).", "",
             "| history | instances | jobs | sequential CPU s | batch CPU s | ratio | "
             "wall s (seq / batch) | chosen L |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['history']} | {r['instances']} | {r['jobs']} | "
                     f"{r['sequential_cpu_s']:.2f} | {r['batch_cpu_s']:.2f} | "
                     f"{r['ratio']:.2f}x | {r['sequential_wall_s']:.1f} / "
                     f"{r['batch_wall_s']:.1f} | {r['chosen_L']:.3g} |")
    (RESULTS / "pricing_batch.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
