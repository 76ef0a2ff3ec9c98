"""How well ``oasis_opt.sizing``'s work estimate T x (H + K) x max(I, 1) predicts run time.

For a few paper-sim instances (and, with ``--trace``, a month of the Philly trace) it times
``greedy`` and ``oasis`` end to end and reports the throughput in slot-server-jobs per second,
i.e. the seconds ``DEFAULT_MAX_WORK`` (the limit of ``oasis_opt.solve`` and the CLI) would take
at that rate. The spread of the throughput across instances is the estimate's error: it bounds
the work, it does not predict the time to better than an order of magnitude.

    .venv/bin/python benchmarks/bench_work_estimate.py           # paper-sim sizes (a minute)
    .venv/bin/python benchmarks/bench_work_estimate.py --trace   # plus the Philly month (2 min)

Writes benchmarks/results/work_estimate.md (and the raw numbers to work_estimate.json).
"""
from __future__ import annotations

import argparse
import json
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

from tqdm import tqdm

from oasis_opt import solve
from oasis_opt.sizing import DEFAULT_MAX_WORK, estimate_work
from oasis_opt.workloads import generate

RESULTS = Path(__file__).parent / "results"
SIZES = [{"jobs": 100, "horizon": 300}, {"jobs": 400, "horizon": 300},
         {"jobs": 100, "horizon": 3000}, {"jobs": 1000, "horizon": 3000}]
POLICIES = ("greedy", "oasis")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", action="store_true", help="also the Philly month (2017-11)")
    args = ap.parse_args()
    cases = [(f"paper-sim I={s['jobs']} T={s['horizon']}",
              lambda s=s: generate("paper-sim", seed=1, **s)) for s in SIZES]
    if args.trace:
        from oasis_opt.workloads.traces import philly_instance

        cases.append(("philly 2017-11, 30 days", lambda: philly_instance("2017-11-01", 30, 0)))
    rows = []
    for name, make in tqdm(cases, desc="instances"):
        inst = make()
        work = estimate_work(inst).work
        for policy in POLICIES:
            t0 = time.perf_counter()
            solve(inst, policy, max_work=float("inf"))
            seconds = time.perf_counter() - t0
            rows.append({"instance": name, "policy": policy, "work": work, "seconds": seconds,
                         "work_per_s": work / seconds,
                         "limit_s": DEFAULT_MAX_WORK / (work / seconds)})
    RESULTS.mkdir(exist_ok=True)
    meta = {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "python": platform.python_version(), "machine": platform.machine()}
    (RESULTS / "work_estimate.json").write_text(json.dumps({"meta": meta, "rows": rows},
                                                           indent=1) + "\n")
    lines = ["# Work estimate vs run time", "",
             f"{meta['when']}, Python {meta['python']}, {meta['machine']}; "
             "`.venv/bin/python benchmarks/bench_work_estimate.py"
             + (" --trace" if args.trace else "") + "`", "",
             "| instance | policy | work (slot-server-jobs) | seconds | work / s | "
             f"time of the limit {DEFAULT_MAX_WORK:.0e} |", "|---|---|---:|---:|---:|---:|"]
    lines += [f"| {r['instance']} | {r['policy']} | {r['work']:.3g} | {r['seconds']:.2f} | "
              f"{r['work_per_s']:.2g} | {r['limit_s'] / 60:.0f} min |" for r in rows]
    for policy in POLICIES:
        rates = [r["work_per_s"] for r in rows if r["policy"] == policy]
        lines.append("")
        lines.append(f"{policy}: {min(rates):.2g} to {max(rates):.2g} slot-server-jobs per "
                     f"second (max / min = {max(rates) / min(rates):.1f})")
    text = "\n".join(lines) + "\n"
    (RESULTS / "work_estimate.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
