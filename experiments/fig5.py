"""Reproduce Fig. 5: OPT / OASiS for 10 jobs, T = 10, 3/6/9/12 servers, four gamma1 ranges.

Every OPT is the exact optimum of problem (1) (linearised MILP, HiGHS), proven optimal. OASiS
runs under each pricing of --pricing, as `reproduce fig5` does: plugin (eqs. 23-26 on the
group's history, seeds 1000-1009), searched (the floor tuned on the same history, default grid)
and oracle (eqs. 23-26 on the evaluated instance). One table per pricing prints our mean ratio
over the seeds beside the paper's bar (paper_figs/reference/fig5_performance_ratio.csv), with
alpha and 2 alpha of the constants used and the admitted counts of OPT and OASiS.

    .venv/bin/python experiments/fig5.py                 # 5 seeds (80 MILPs, a few minutes)
    .venv/bin/python experiments/fig5.py --seeds 0 1     # fewer seeds
    .venv/bin/python experiments/fig5.py --quick         # 1 seed
    .venv/bin/python experiments/fig5.py --pricing plugin --out paper_figs/fig5_table.md

Per-instance rows (utilities, ratio and alpha per pricing, MILP status, build / hand-off / solve
times) go to --json.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from oasis_opt.experiments.fig5 import (PRICINGS, PRIORITIES, SERVERS, fig5_rows, markdown,
                                        paper_ratios, settings, summarize, with_pricing)

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one seed")
    ap.add_argument("--seeds", type=int, nargs="+", help="seeds (default: 0..4, --quick: 0)")
    ap.add_argument("--servers", type=int, nargs="+", default=list(SERVERS))
    ap.add_argument("--backend", choices=("highs", "cpsat"), default="highs")
    ap.add_argument("--time-limit", type=float, default=None,
                    help="seconds per MILP (default: none, every MILP proven optimal)")
    ap.add_argument("--pricing", nargs="+", choices=PRICINGS, default=list(PRICINGS),
                    help="OASiS's pricings, one table each (default: all)")
    ap.add_argument("--reference", type=Path, default=REPO / "paper_figs" / "reference")
    ap.add_argument("--out", type=Path, help="also write the markdown table here")
    ap.add_argument("--json", type=Path, help="write the per-instance rows here")
    args = ap.parse_args(argv)

    seeds = args.seeds if args.seeds is not None else settings(args.quick)["seeds"]
    rows = fig5_rows(seeds, args.servers, PRIORITIES, backend=args.backend,
                     time_limit=args.time_limit, progress=True,
                     pricings=tuple(dict.fromkeys(args.pricing)), quick=args.quick)
    paper = paper_ratios(args.reference)
    table = ""
    for name in dict.fromkeys(args.pricing):
        table += (f"## OASiS priced by {name}: OPT / OASiS, seeds {list(seeds)}, MILP backend "
                  f"{args.backend}\n\n" + markdown(summarize(with_pricing(rows, name)), paper)
                  + "\n")
    print(table)
    unproven = [r for r in rows if not r["proven_optimal"]]
    if unproven:
        print(f"WARNING: {len(unproven)} MILP(s) not proven optimal (time limit): their ratios "
              "are lower bounds on the true ones", file=sys.stderr)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
