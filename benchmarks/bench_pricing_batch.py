"""The floor search (``estimate_pricing``, ``estimate-pricing --method search``): the whole grid
at once (``batch=True``, ``online.pricing_batch``) against one floor at a time (``batch=False``).

For each history (the workloads the package's experiments and figures estimate on, and larger
paper-sim ones) it runs ``estimate_pricing`` on the default grid (15 floors) both ways in the same
process, one after the other, and reports both times and their ratio; it also checks that both
give the same calibration table and chosen L (the tests hold them equal too).

    .venv/bin/python benchmarks/bench_pricing_batch.py           # a few minutes
    .venv/bin/python benchmarks/bench_pricing_batch.py --quick   # the small histories only

Writes benchmarks/results/pricing_batch.md (and the raw numbers to pricing_batch.json).
"""
from __future__ import annotations

import argparse
import json
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

from tqdm import tqdm

from oasis_opt.online.estimate import DEFAULT_FLOOR_GRID, estimate_pricing
from oasis_opt.workloads import paper_fig5, paper_sim

RESULTS = Path(__file__).parent / "results"
SEEDS = (1000, 1001, 1002)  # experiments.calibration.HISTORY_SEEDS
# (name, generator, params, seeds, quick)
CASES = [
    ("fig5 testbed, 3 servers, I=10 T=10", paper_fig5, {"servers": 3}, tuple(range(1000, 1010)),
     True),
    ("paper-sim I=12 T=40, 6+6 typed (hetero quick)", paper_sim,
     {"jobs": 12, "horizon": 40, "worker_servers": 6, "ps_servers": 6,
      "cluster_mix": "v100:p100:k80"}, (1000,), True),
    ("paper-sim I=40 T=60, 12+12 typed (hetero)", paper_sim,
     {"jobs": 40, "horizon": 60, "worker_servers": 12, "ps_servers": 12,
      "cluster_mix": "v100:p100:k80"}, SEEDS, False),
    ("paper-sim I=30 T=50, 10+10", paper_sim,
     {"jobs": 30, "horizon": 50, "worker_servers": 10, "ps_servers": 10}, SEEDS, True),
    ("paper-sim I=100 T=100, 20+20", paper_sim,
     {"jobs": 100, "horizon": 100, "worker_servers": 20, "ps_servers": 20}, SEEDS, False),
    ("paper-sim I=100 T=300, 50+50 (defaults)", paper_sim, {}, (1000,), False),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="only the small histories")
    args = ap.parse_args()
    cases = [c for c in CASES if c[4] or not args.quick]
    rows = []
    for name, gen, params, seeds, _ in tqdm(cases, desc="histories"):
        history = [gen(s, **params) for s in seeds]
        times, results = {}, {}
        for batch in (False, True):
            t0 = time.perf_counter()
            results[batch] = estimate_pricing(history, DEFAULT_FLOOR_GRID, batch=batch)
            times[batch] = time.perf_counter() - t0
        same = (results[True].calibration == results[False].calibration
                and dict(results[True]) == dict(results[False]))
        if not same:
            raise SystemExit(f"{name}: the batched search differs from the sequential one")
        rows.append({"history": name, "instances": len(history),
                     "jobs": sum(h.I for h in history), "grid": len(DEFAULT_FLOOR_GRID),
                     "sequential_s": times[False], "batch_s": times[True],
                     "ratio": times[False] / times[True],
                     "chosen_L": results[True].calibration.chosen, "same": same})
        tqdm.write(f"{name}: sequential {times[False]:.2f} s, batch {times[True]:.2f} s, "
                   f"{times[False] / times[True]:.2f}x")
    RESULTS.mkdir(exist_ok=True)
    meta = {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "python": platform.python_version(), "machine": platform.machine(),
            "command": "benchmarks/bench_pricing_batch.py" + (" --quick" if args.quick else "")}
    (RESULTS / "pricing_batch.json").write_text(json.dumps({"meta": meta, "rows": rows},
                                                           indent=1) + "\n")
    lines = ["# Floor search: the whole grid at once vs one floor at a time", "",
             f"`{meta['command']}`, {meta['when']}, Python {meta['python']} on "
             f"{meta['machine']}. `estimate_pricing(history, DEFAULT_FLOOR_GRID, batch=...)`, "
             "default grid (15 floors), both runs in the same process; every schedule is "
             "validated in both. Ratio = sequential / batch. Both give the same calibration "
             "table and chosen L on every history (checked here and by "
             "`tests/test_online_pricing_batch.py`).", "",
             "| history | instances | jobs | sequential s | batch s | ratio | chosen L |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['history']} | {r['instances']} | {r['jobs']} | "
                     f"{r['sequential_s']:.2f} | {r['batch_s']:.2f} | {r['ratio']:.2f}x | "
                     f"{r['chosen_L']:.3g} |")
    (RESULTS / "pricing_batch.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
