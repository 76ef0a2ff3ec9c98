"""OASiS's floor price L drawn: utility against L, the calibrated L against hindsight.

The runs and their numbers are the study ``oasis_opt.experiments.oasis_floor_price``;
:func:`main` is ``experiments/oasis_floor_price.py`` (writes
``<out>/oasis_floor_price.{png,pdf,md}``).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from .. import fig3
from ..oasis_floor_price import compute
from ..reproduce import default_out
from .common import ORACLE, display, markdown_table, mean_sd, new_figure, save, write_markdown


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--results", default="results")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    quick = args.quick
    out = Path(args.out) if args.out else default_out(quick)
    data = compute(quick, args.results, args.workers)
    estimates, estimated, ev, ours, best_base = (data[k] for k in (
        "estimates", "estimated", "evaluated", "ours", "best_baseline"))
    jobs = sorted(fig3.settings(quick)["jobs"])
    grid = estimates[0].grid

    fig, ax = new_figure(1, 1, width=7.0, height=4.4)
    a = ax[0, 0]
    cmap = __import__("matplotlib").colormaps["viridis"]
    rows = []
    for k, n in enumerate(jobs):
        colour = cmap(k / max(1, len(jobs) - 1))
        calibration = estimated[fig3.estimate(n, quick).key].calibration
        a.plot(grid, [ev[(n, L)] for L in grid], marker="o", color=colour,
               label=f"{n} jobs, evaluated seeds")
        a.plot(grid, calibration.mean, ls="--", color=colour, alpha=0.7,
               label=f"{n} jobs, history seeds")
        a.plot([calibration.chosen], [ev[(n, calibration.chosen)]], marker="*", markersize=14,
               color=colour, markeredgecolor="black", linestyle="none")
        hindsight = max(grid, key=lambda L: ev[(n, L)])
        oracle = mean_sd(ours[(n, ORACLE)])[0]
        base_value = mean_sd(ours[(n, best_base[n])])[0]
        rows.append([n, f"{calibration.chosen:.2g}", f"{ev[(n, calibration.chosen)]:.0f}",
                     f"{hindsight:.2g}", f"{ev[(n, hindsight)]:.0f}",
                     f"{ev[(n, calibration.chosen)] / ev[(n, hindsight)]:.3f}", f"{oracle:.0f}",
                     f"{display(best_base[n])} {base_value:.0f}"])
    a.set(xscale="log", xlabel="floor price L (L1 = L2)", ylabel="OASiS total utility (mean)",
          title="OASiS vs its floor price L on Fig. 3's instances (★ = calibrated L)")
    a.legend(fontsize=6, ncols=2)
    paths = save(fig, out, "oasis_floor_price")
    text = ("# OASiS's calibrated floor price L against hindsight (diagnostic)\n\n"
            f"Fig. 3's instances{' (quick)' if quick else ''} (seeds "
            f"{list(fig3.settings(quick)['seeds'])}), U estimated on the history (eqs. 23-24 over "
            f"seeds {list(estimates[0].seeds)}), L1 = L2 = L over the calibration grid. "
            "\"calibrated\" is the L chosen on the history (what Fig. 3 uses); \"hindsight\" the "
            "L that is best on the evaluated instances themselves, which no online scheduler "
            "could know.\n\n"
            + markdown_table(["jobs", "calibrated L", "utility", "hindsight L", "utility",
                              "calibrated / hindsight", "OASiS, oracle U and L",
                              "best baseline"], rows)
            + "\nMean utility on the evaluated instances at every floor:\n\n"
            + markdown_table(["L"] + [f"{n} jobs" for n in jobs],
                             [[f"{L:.2g}"] + [f"{ev[(n, L)]:.0f}" for n in jobs] for L in grid]))
    paths.append(write_markdown(out, "oasis_floor_price", text))
    print("\n".join(str(p) for p in paths))
