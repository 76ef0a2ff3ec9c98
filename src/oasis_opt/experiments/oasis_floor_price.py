"""How good is OASiS's estimated floor price L? The calibrated L against hindsight (a diagnostic).

Fig. 3 prices OASiS with U and L estimated on history instances (seeds 1000-1002,
``oasis_opt.experiments.calibration``): L is the floor of a grid with the best mean utility on
the history. The study runs OASiS on Fig. 3's *evaluated* instances (seeds 0-2) at every floor
of the same grid, with the same history U, and compares the calibrated choice with the floor
that would have been best in hindsight on those instances, and with the literal oracle
constants of eqs. (23)-(26). The run at the calibrated L is Fig. 3's own OASiS run (same key).

Runs go through the experiment runner into the same results folder as ``oasis-opt reproduce``
(:func:`compute`, run by ``experiments/oasis_floor_price.py``);
``oasis_opt.experiments.figures.oasis_floor_price`` draws ``<out>/oasis_floor_price.{png,pdf,md}``.
"""
from __future__ import annotations

import numpy as np

from ..online.estimate import pricing_document
from . import fig3
from .calibration import calibration_specs, resolve_all
from .figures.common import PAPER_POLICIES, mean_sd
from .runner import run_sweep
from .spec import RunSpec


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


def compute(quick: bool, results="results", workers: int | None = None) -> dict:
    """Fig. 3's calibration and runs, and OASiS at every floor of the grid (:func:`sweep_specs`),
    through the runner into ``results``: ``estimates`` (Fig. 3's), ``estimated`` (their
    pricings), ``evaluated`` ((jobs, L) -> mean utility on the evaluated instances), ``ours``
    (``fig3.collect`` of Fig. 3's runs) and ``best_baseline`` (jobs -> the baseline with the best
    mean utility)."""
    estimates = fig3.estimates(quick)
    cal = run_sweep(calibration_specs(estimates), results, workers=workers,
                    desc="calibration")
    estimated = resolve_all(estimates, cal.records)
    base, grid_runs = fig3.runs(quick, estimated), sweep_specs(quick, estimates)
    rep = run_sweep(base + grid_runs, results, workers=workers, desc="floor sweep")
    jobs = sorted(fig3.settings(quick)["jobs"])

    evaluated: dict[tuple[int, float], list[float]] = {}
    for s in grid_runs:
        evaluated.setdefault((s.tags["jobs"], s.tags["L"]), []).append(
            rep.record(s)["metrics"]["total_utility"])
    ev = {k: float(np.mean(v)) for k, v in evaluated.items()}
    ours = fig3.collect(base, rep.records)
    best_base = {n: max((p for p in PAPER_POLICIES if p != "oasis"),
                        key=lambda p: mean_sd(ours[(n, p)])[0]) for n in jobs}
    return {"estimates": estimates, "estimated": estimated, "evaluated": ev, "ours": ours,
            "best_baseline": best_base}
