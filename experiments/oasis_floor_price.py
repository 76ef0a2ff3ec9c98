"""How good is OASiS's estimated floor price L? The calibrated L against hindsight (a diagnostic).

Fig. 3 prices OASiS with U and L estimated on history instances (seeds 1000-1002,
``oasis_opt.experiments.calibration``): L is the floor of a grid with the best mean utility on
the history. This script runs OASiS on Fig. 3's *evaluated* instances (seeds 0-2) at every floor
of the same grid, with the same history U, and compares the calibrated choice with the floor
that would have been best in hindsight on those instances, and with the literal oracle
constants of eqs. (23)-(26). The run at the calibrated L is Fig. 3's own OASiS run (same key).

Runs go through the experiment runner into the same results folder as ``oasis-opt reproduce``.
Writes ``<out>/oasis_floor_price.{png,pdf,md}``.

    .venv/bin/python experiments/oasis_floor_price.py [--quick] [--workers N] [--results DIR] [--out DIR]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from oasis_opt.experiments.calibration import calibration_specs, resolve_all
from oasis_opt.experiments.figures import fig3
from oasis_opt.experiments.figures.common import (ORACLE, PAPER_POLICIES, display, markdown_table,
                                                  mean_sd, new_figure, save, write_markdown)
from oasis_opt.experiments.reproduce import default_out
from oasis_opt.experiments.runner import run_sweep
from oasis_opt.experiments.spec import RunSpec
from oasis_opt.online.estimate import pricing_document


def sweep_specs(quick: bool, estimates) -> list[RunSpec]:
    """OASiS on every evaluated instance at every floor of the grid, with the history U
    (``estimates``: Fig. 3's, one per size, whose U is computed once)."""
    s = fig3.settings(quick)
    out = []
    for est in estimates:
        n = est.params["jobs"]
        for L in est.grid:
            for seed in s["seeds"]:
                out.append(RunSpec("paper_sim", fig3.sim_params(n, seed, quick), "oasis",
                                   {"pricing": pricing_document(est.u, L)},
                                   tags={"jobs": n, "seed": seed, "L": L}))
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--results", default="results")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    quick = args.quick
    out = Path(args.out) if args.out else default_out(quick)
    estimates = fig3.estimates(quick)
    cal = run_sweep(calibration_specs(estimates), args.results, workers=args.workers,
                    desc="calibration")
    estimated = resolve_all(estimates, cal.records)
    base, grid_runs = fig3.runs(quick, estimated), sweep_specs(quick, estimates)
    rep = run_sweep(base + grid_runs, args.results, workers=args.workers, desc="floor sweep")
    jobs = sorted(fig3.settings(quick)["jobs"])
    grid = estimates[0].grid

    evaluated: dict[tuple[int, float], list[float]] = {}
    for s in grid_runs:
        evaluated.setdefault((s.tags["jobs"], s.tags["L"]), []).append(
            rep.record(s)["metrics"]["total_utility"])
    ev = {k: float(np.mean(v)) for k, v in evaluated.items()}
    ours = fig3.collect(base, rep.records)
    best_base = {n: max((p for p in PAPER_POLICIES if p != "oasis"),
                        key=lambda p: mean_sd(ours[(n, p)])[0]) for n in jobs}

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


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
