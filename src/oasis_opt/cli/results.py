"""``validate`` (one result against its instance) and ``summary`` (results side by side)."""
from __future__ import annotations

import argparse
from pathlib import Path

from .args import adder, arg
from .common import EXIT_INVALID, EXIT_OK, load_instance, load_result

add_validate = adder(arg("instance", metavar="INSTANCE", help="instance JSON"),
                     arg("result", metavar="RESULT", help="result JSON"))
add_summary = adder(arg("instance", metavar="INSTANCE", help="instance JSON"),
                    arg("results", nargs="+", metavar="RESULT", help="result JSON files"))


def validate(args: argparse.Namespace) -> int:
    from ..model.validate import validate

    inst = load_instance(args.instance)
    report = validate(inst, load_result(inst, args.result, args.instance))
    print(report)
    return EXIT_OK if report.ok else EXIT_INVALID


def summary(args: argparse.Namespace) -> int:
    from ..sim.metrics import compare

    inst = load_instance(args.instance)
    schedules = [load_result(inst, path, args.instance) for path in args.results]
    table = compare(inst, schedules, [Path(path).name for path in args.results])
    print(table)
    return EXIT_OK if table.ok else EXIT_INVALID


COMMANDS = {"validate": (add_validate, validate), "summary": (add_summary, summary)}
