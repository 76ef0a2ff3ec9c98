"""Fig. 5 drawn: OPT / OASiS per group under each pricing beside the paper's bars, the claims
checked.

The setting, the runs (:func:`oasis_opt.experiments.fig5.runs`), the per-group summary and its
markdown table are the study ``oasis_opt.experiments.fig5``. Every table prints alpha and
2 alpha of the constants in use beside the ratio. :func:`main` is ``experiments/fig5.py``: the
offline track's tables, one per pricing, without the runner.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from ..._extras import require
from .. import fig5
from ..fig5 import ADAPTIVE, PLUGIN, estimates, rows, runs
from .common import (DEFAULT_REFERENCE, ORACLE, PAPER_MARKER, Figure, calibration_markdown,
                     checks_markdown, new_figure, save, write_markdown)

# table and panel order: series, title
PANELS = ((PLUGIN, "plug-in U, L (eqs. 23-26 on the history)"),
          ("oasis", "searched floor L (tuned on the history)"),
          (ADAPTIVE, "adaptive floor L (from the searched floor, learnt online)"),
          (ORACLE, "oracle U, L (eqs. 23-26 on the instance)"))


def claims(summary) -> list[tuple[str, bool, str]]:
    means = [s["ratio_mean"] for s in summary]
    return [("Performance ratios are about 1.1-1.5 (every group mean within [1.0, 1.6])",
             all(1.0 <= m <= 1.6 for m in means),
             f"group means {min(means):.2f} … {max(means):.2f}"),
            ("Every OPT is a proven optimum (no MILP time limit hit)",
             all(s["all_proven"] for s in summary),
             f"longest MILP {max(s['max_solve_s'] for s in summary):.1f} s")]


def render(specs, records, out_dir: Path, reference_dir=None, quick: bool = False,
           estimated=None) -> list[Path]:
    colormaps = require("matplotlib", extra="plots", feature="figures").colormaps

    s = fig5.settings(quick)
    summaries = {name: fig5.summarize(rows(specs, records, name)) for name, _ in PANELS}
    summary = summaries["oasis"]
    paper = fig5.paper_ratios(reference_dir)
    servers, prios = list(s["servers"]), [tuple(p) for p in s["priorities"]]
    fig, ax = new_figure(1, len(PANELS), width=8.0, height=3.6)
    width = 0.8 / len(prios)
    cmap = colormaps["tab10"]
    x = np.arange(len(servers))
    for (name, title), a in zip(PANELS, ax[:, 0]):
        by = {(v["servers"], (v["priority_lo"], v["priority_hi"])): v for v in summaries[name]}
        for k, pr in enumerate(prios):
            pos = x - 0.4 + width * (k + 0.5)
            mean = np.array([by[(n, pr)]["ratio_mean"] for n in servers])
            err = np.array([[m - by[(n, pr)]["ratio_min"], by[(n, pr)]["ratio_max"] - m]
                            for n, m in zip(servers, mean)]).T
            a.bar(pos, mean, width, yerr=err, capsize=2, color=cmap(k),
                  label=f"γ₁ ∈ [{pr[0]:g}, {pr[1]:g}]")
            a.plot(pos, [paper.get((n, *pr), np.nan) for n in servers], **PAPER_MARKER,
                   label="paper" if k == 0 else None)
            for px, n in zip(pos, servers):  # 2 alpha of the constants in use, over each bar
                a.annotate(f"{2 * by[(n, pr)]['alpha_mean']:.0f}", (px, 0), fontsize=5,
                           ha="center", va="bottom", xytext=(0, 1), textcoords="offset points")
        a.axhline(1, color="grey", lw=0.6, ls=":")
        a.set_xticks(x, [str(n) for n in servers])
        a.set(xlabel="servers in total (⌈n/2⌉ worker + ⌊n/2⌋ PS hosts)",
              ylabel="OPT / OASiS total utility",
              title=f"OASiS priced by {title}\nbars: mean, min … max over the seeds; "
                    "◆ = paper; 2α at the foot of each bar")
        a.title.set_fontsize(9)
        a.legend(fontsize=7, ncols=3)
    fig.suptitle(f"Fig. 5 — OPT / OASiS, 10 jobs, T = 10, {len(s['seeds'])} seed(s)")
    paths = save(fig, out_dir, "fig5")
    tables = "".join(f"\n## OPT / OASiS, OASiS priced by {title}\n\n"
                     + fig5.markdown(summaries[name], paper) for name, title in PANELS)
    text = (f"# Fig. 5 — performance ratio OPT / OASiS{' (quick)' if quick else ''}\n\n"
            f"`paper_fig5(seed, servers=n, priority=γ₁ range)`, seeds {list(s['seeds'])}; OPT = "
            "exact MILP (policy `offline`); OASiS under four pricings, the first three fixed on "
            "history instances of each group before any evaluated instance is seen: the plug-in "
            "estimate (`oasis_opt.online.plugin`), the floor searched on utility "
            "(`oasis_opt.online.estimate`, tuning), the adaptive floor (policy `oasis-adaptive`, "
            "`oasis_opt.online.adaptive`: U and the starting L of the searched floor, then L "
            "follows the best of plain OASiS runs over the grid on the jobs decided so far, with "
            "the history's calibration table as its prior; its "
            "alpha is that of its last floor) and the oracle constants of the evaluated "
            "instance. alpha: mean over the seeds of Theorem 4's alpha of the constants used; "
            "OPT / OASiS <= 2 alpha. Tables from `oasis_opt.experiments.fig5.markdown`; the "
            "claims are checked on the searched pricing.\n"
            + tables + "\n" + checks_markdown(claims(summary)) + "\n"
            + calibration_markdown(
                [(f"{e.params['servers']} servers, γ₁ ∈ [{e.params['priority'][0]:g}, "
                  f"{e.params['priority'][1]:g}]", estimated[e.key].calibration)
                 for e in estimates(quick)] if estimated else []))
    return paths + [write_markdown(out_dir, "fig5", text)]


FIGURE = Figure("fig5", "Performance ratio OPT / OASiS (10 jobs, T = 10)", runs, render,
                estimates=estimates)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one seed")
    ap.add_argument("--seeds", type=int, nargs="+", help="seeds (default: 0..4, --quick: 0)")
    ap.add_argument("--servers", type=int, nargs="+", default=list(fig5.SERVERS))
    ap.add_argument("--backend", choices=("highs", "cpsat"), default="highs")
    ap.add_argument("--time-limit", type=float, default=None,
                    help="seconds per MILP (default: none, every MILP proven optimal)")
    ap.add_argument("--pricing", nargs="+", choices=fig5.PRICINGS, default=list(fig5.PRICINGS),
                    help="OASiS's pricings, one table each (default: all)")
    ap.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE)
    ap.add_argument("--out", type=Path, help="also write the markdown table here")
    ap.add_argument("--json", type=Path, help="write the per-instance rows here")
    args = ap.parse_args(argv)

    seeds = args.seeds if args.seeds is not None else fig5.settings(args.quick)["seeds"]
    table_rows = fig5.fig5_rows(seeds, args.servers, fig5.PRIORITIES, backend=args.backend,
                                time_limit=args.time_limit, progress=True,
                                pricings=tuple(dict.fromkeys(args.pricing)), quick=args.quick)
    paper = fig5.paper_ratios(args.reference)
    table = ""
    for name in dict.fromkeys(args.pricing):
        table += (f"## OASiS priced by {name}: OPT / OASiS, seeds {list(seeds)}, MILP backend "
                  f"{args.backend}\n\n"
                  + fig5.markdown(fig5.summarize(fig5.with_pricing(table_rows, name)), paper)
                  + "\n")
    print(table)
    unproven = [r for r in table_rows if not r["proven_optimal"]]
    if unproven:
        print(f"WARNING: {len(unproven)} MILP(s) not proven optimal (time limit): their ratios "
              "are lower bounds on the true ones", file=sys.stderr)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(table_rows, indent=1) + "\n")
    return 0
