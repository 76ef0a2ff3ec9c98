"""``reproduce``: the paper's experiments and figures (``experiments.reproduce``)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .args import adder, arg, positive_int
from .common import EXIT_FAILURE, EXIT_OK, PROG, CliError, sigterm_as_interrupt

add_reproduce = adder(
    arg("figures", nargs="*", default=["all"], metavar="FIGURE",
        help="fig3, fig4, fig5, fig6, testbed or all (default: all, the paper's "
             "figures); by name only: automl (early stopping on real learning curves), "
             "testbed-real (trains for real for minutes), preemption (priority preemption "
             "with degradation), hetero (Gavel's policies), ratio (OPT / OASiS vs size, "
             "load and 2 alpha; worst-case search), pricing (OASiS's pricing rules against "
             "the baselines on ten workloads)"),
    arg("--quick", action="store_true",
        help="small variant of each figure (all of them in a minute or two)"),
    arg("--workers", type=positive_int, metavar="N",
        help="parallel runs: 1 = in this process without Ray; N = a local Ray with N CPUs "
             "(default: all CPUs)"),
    arg("--address", metavar="ADDR", help="join this running Ray cluster instead"),
    arg("--results", default="results", metavar="DIR",
        help="one JSON per run; runs stored there are reused, so a killed sweep resumes "
             "(default: results)"),
    arg("--out", metavar="DIR",
        help="figures (PNG, PDF, markdown) go here (default: paper_figs, or "
             "paper_figs/quick with --quick)"))


def reproduce(args: argparse.Namespace) -> int:
    from ..experiments.reproduce import figure_names, reproduce
    from ..experiments.runner import SweepError

    try:
        names = figure_names(args.figures)
    except ValueError as e:
        raise CliError("FIGURE", str(e).partition(": ")[2]) from None

    # a `kill`/`timeout` ends the sweep like Ctrl-C: Ray shut down, every finished run stored
    try:
        with sigterm_as_interrupt():
            written = reproduce(names, quick=args.quick, workers=args.workers,
                                address=args.address, results=args.results, out=args.out)
    except SweepError as e:  # runs failed (their schedules are never written): a failure, not 1
        print(f"{PROG}: failure: {e}\n(tracebacks in {Path(args.results) / 'failed'})",
              file=sys.stderr)
        return EXIT_FAILURE
    for name, paths in written.items():
        print(f"{name}: {', '.join(str(p) for p in paths)}")
    return EXIT_OK


COMMANDS = {"reproduce": (add_reproduce, reproduce)}
