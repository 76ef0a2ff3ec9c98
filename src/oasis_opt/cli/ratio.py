"""``ratio``: the empirical competitive ratio OPT / OASiS per instance (``experiments.ratio``)."""
from __future__ import annotations

import argparse
from typing import Any

from .args import adder, arg, existing_file, positive_seconds
from .common import EXIT_OK, CliError, load_instance, located, write

add_ratio = adder(
    arg("instances", nargs="+", metavar="INSTANCE", help="instance JSON files"),
    arg("--pricing", type=existing_file, metavar="FILE",
        help="OASiS's pricing file (default: the oracle constants of each instance)"),
    arg("--time-limit", type=positive_seconds, metavar="S",
        help="seconds per solver run: the MILP, then (if it is not proven optimal in S) "
             "column generation for the bracket (default: until proven)"),
    arg("--opt", choices=("auto", "milp", "bracket"), default="auto",
        help="how OPT is found: auto (MILP, bracket if not proven), milp, bracket (column "
             "generation only)"),
    arg("--out", required=True, metavar="FILE", help="ratio report JSON to write"))


def ratio(args: argparse.Namespace) -> int:
    from ..experiments.ratio import ratio_report, ratio_row, table
    from ..model.io import FormatError, read_json, write_json_atomic
    from ..online.pricing import parse_pricing, resolve_pricing
    from ..sim.report import format_table

    instances = [load_instance(path) for path in args.instances]
    pricing: Any = "oracle"
    if args.pricing is not None:
        try:
            doc = read_json(args.pricing)
            parse_pricing(doc)
        except FormatError as e:
            raise located(e, args.pricing) from None
        for path, inst in zip(args.instances, instances):
            try:
                resolve_pricing(doc, inst)
            except FormatError as e:
                raise CliError("--pricing", f"{e} (for {path})") from None
        pricing = args.pricing
    rows = []
    for path, inst in zip(args.instances, instances):
        try:
            rows.append(ratio_row(inst, pricing, time_limit=args.time_limit, opt=args.opt,
                                  name=str(path)))
        except ValueError as e:  # e.g. the oracle's L is undefined for this instance
            raise CliError(str(path), str(e)) from None
    report = ratio_report(rows, "oracle" if args.pricing is None else str(args.pricing),
                          args.time_limit)
    write(args.out, lambda doc, out: write_json_atomic(out, doc), report)
    head, body = table(rows)
    print(format_table(head, body))
    if any(r["opt"]["method"] == "bracket" for r in rows):
        print("* OPT not proven: the bracket [lower, upper] and the ratio's interval")
    print(f"-> {args.out}")
    return EXIT_OK


COMMANDS = {"ratio": (add_ratio, ratio)}
