"""Fidelity of the simulator against real runs: the study of ``reproduce testbed-real``.

For each policy (OASiS with its default pricing, DRF, FIFO, Dorm, greedy), each mode (open loop:
the planned schedule as it is; closed loop: the policy re-run on the measured progress), each
load (quiet: nothing started by the benchmark; busy: two busy-looping processes it starts and
stops by their pids) and each repetition, the testbed-real instance is planned and trained for
real on Ray (``oasis_opt.experiments.testbed_real``: what is measured and how), and the page with
the targets of issue 30 checked is drawn (``oasis_opt.experiments.figures.testbed_real``).

    python benchmarks/bench_fidelity.py [--quick] [--reps N] [--results DIR] [--out DIR]

writes ``OUT/testbed-real.md`` (default ``OUT``: ``paper_figs``, ``paper_figs/quick`` with
``--quick``, as ``reproduce``; the tables, the targets checked), ``OUT/testbed-real.png`` and
``.pdf`` (simulated vs real completion per job, per load; the JCT error per policy), and keeps
every run under ``RESULTS/testbed-real[-quick]/`` (a rerun reuses them: ``reproduce
testbed-real`` with the same ``--results`` redraws the same runs into ``paper_figs``).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="2 jobs, 4 slots of 1 s, quiet only, one repetition")
    ap.add_argument("--reps", type=int, default=None,
                    help="repetitions per row (default: 3, quick 1)")
    ap.add_argument("--results", type=Path, default=Path("results"),
                    help="where every run is stored and reused (default: results)")
    ap.add_argument("--out", type=Path, default=None,
                    help="the page and figure (default: paper_figs, where reproduce "
                         "testbed-real draws it, or paper_figs/quick with --quick)")
    args = ap.parse_args(argv)
    if args.reps is not None and args.reps < 1:
        ap.error(f"--reps: must be >= 1, got {args.reps}")
    from oasis_opt.experiments.figures.testbed_real import render
    from oasis_opt.experiments.testbed_real import compute

    data = compute(quick=args.quick, results=args.results, reps=args.reps, progress=True)
    out = args.out or Path("paper_figs/quick" if args.quick else "paper_figs")
    paths = render(data, out, quick=args.quick)
    print(f"-> {', '.join(str(p) for p in paths)} ({data['wall_s']:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
