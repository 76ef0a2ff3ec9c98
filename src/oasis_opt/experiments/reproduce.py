"""``reproduce``: run the paper's figures (all runs in one sweep) and draw them.

Two sweeps: first the calibration runs of every figure that prices OASiS with estimated U and L
(``Figure.estimates``), then the runs of every requested figure in one ``run_sweep`` (so the
runs shared by Figs. 3 and 6 are computed once). Each figure is drawn into ``out`` as PNG, PDF
and a markdown table, and ``out/reproduce.md`` records what was run and how long it took (not
for a run of extra experiments (``EXTRA_NAMES``) only: their page records it, and the paper
figures' log stays).
"""
from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from .._extras import require
from .calibration import calibration_specs, resolve_all
from .figures import EXTRA_NAMES, FIGURE_NAMES, get_figure
from .figures.common import fmt, markdown_table
from .runner import run_sweep, unique_specs

DEFAULT_RESULTS = Path("results")
DEFAULT_OUT = Path("paper_figs")


def figure_names(requested: Iterable[str]) -> list[str]:
    """Expand ``all`` (the paper's figures; extras such as ``automl`` only by name); keep the
    canonical order; reject unknown names."""
    requested = list(requested) or ["all"]
    known = FIGURE_NAMES + EXTRA_NAMES
    unknown = [n for n in requested if n != "all" and n not in known]
    if unknown:
        raise ValueError(f"figure: unknown figure {unknown[0]!r} "
                         f"(known: {', '.join(known)}, all)")
    return [n for n in known if n in requested or ("all" in requested and n in FIGURE_NAMES)]


def default_out(quick: bool) -> Path:
    return DEFAULT_OUT / "quick" if quick else DEFAULT_OUT


def reproduce(figures: Sequence[str] = ("all",), *, quick: bool = False,
              workers: int | None = None, address: str | None = None,
              results: str | Path = DEFAULT_RESULTS, out: str | Path | None = None,
              reference_dir: str | Path | None = None,
              progress: bool = True) -> dict[str, list[Path]]:
    """Compute (or load) and draw ``figures``; return the files written per figure."""
    t0 = time.perf_counter()
    names = figure_names(figures)
    require("matplotlib", extra="plots", feature="reproduce (figures)")  # before hours of runs
    out = Path(out) if out is not None else default_out(quick)
    figs = [get_figure(n) for n in names]
    suffix = " (quick)" if quick else ""
    estimates = {e.key: e for f in figs if f.estimates is not None for e in f.estimates(quick)}
    calibration = run_sweep(calibration_specs(estimates.values()), results, workers=workers,
                            address=address, progress=progress,
                            desc=f"calibration{suffix}") if estimates else None
    estimated = resolve_all(estimates.values(), calibration.records) if estimates else {}
    specs = {f.name: (f.runs(quick, estimated) if f.estimates is not None else f.runs(quick))
             for f in figs if f.runs is not None}
    sweep = run_sweep([s for v in specs.values() for s in v], results, workers=workers,
                      address=address, progress=progress,
                      desc=f"{'+'.join(specs)}{suffix}") if specs else None
    written: dict[str, list[Path]] = {}
    for f in figs:
        if f.compute is not None:
            data = f.compute(quick=quick, results=Path(results), workers=workers,
                             address=address, progress=progress)
            written[f.name] = f.render(data, out, reference_dir, quick)
        elif f.estimates is not None:
            written[f.name] = f.render(specs[f.name], sweep.records, out, reference_dir, quick,
                                       estimated=estimated)
        else:
            written[f.name] = f.render(specs[f.name], sweep.records, out, reference_dir, quick)
    if any(n in FIGURE_NAMES for n in names):  # an extra experiment's own page is its log
        written["reproduce"] = [write_log(out, names, specs, sweep, quick,
                                          time.perf_counter() - t0, calibration)]
    return written


def lpt_makespan(durations: Sequence[float], workers: int) -> float:
    """Makespan of the longest-processing-time-first schedule of ``durations`` on ``workers``
    identical machines (within 4/3 of the optimum; the order the figures submit runs in)."""
    loads = [0.0] * workers
    for d in sorted(durations, reverse=True):
        loads[loads.index(min(loads))] += d
    return max(loads)


def write_log(out: Path, names, specs, sweep, quick: bool, wall_s: float,
              calibration=None) -> Path:
    """``out/reproduce.md``: figures, runs computed / reused, wall time, solve time per policy."""
    from .runner import versions

    v = versions()
    lines = [f"# oasis-opt reproduce{' --quick' if quick else ''}", "",
             f"Figures: {', '.join(names)}. Total wall time {wall_s:.1f} s. Code: oasis-opt "
             f"{v.get('oasis-opt', '?')}, git {v.get('git', 'unknown')} (drawing)."]
    if calibration is not None:
        lines += ["", f"Calibration of OASiS's estimated U and L: {len(calibration.records)} "
                  f"runs, {len(calibration.computed)} computed now, {len(calibration.skipped)} "
                  f"loaded; wall time {calibration.wall_s:.1f} s."]
    if sweep is not None:
        runs = unique_specs(s for v in specs.values() for s in v)
        lines += ["", f"Runner: {len(runs)} runs, {len(sweep.computed)} computed now, "
                  f"{len(sweep.skipped)} loaded from the results folder; sweep wall time "
                  f"{sweep.wall_s:.1f} s.", ""]
        per: dict[str, list[float]] = defaultdict(list)
        cpu: dict[str, list[float]] = defaultdict(list)
        for s in runs:
            timing = sweep.records[s.key]["timing"]
            per[s.policy].append(timing["solve_s"])
            cpu[s.policy].append(timing.get("cpu_s", math.nan))  # absent in older records
        rows = [[p, len(v), f"{np.mean(v):.2f}", f"{np.max(v):.2f}", f"{np.sum(v):.1f}",
                 fmt(float(np.sum(cpu[p])), 1)] for p, v in per.items()]
        code = Counter(sweep.records[s.key]["env"]["versions"].get("git", "unknown") for s in runs)
        lines += ["Runs computed by code (git): "
                  + ", ".join(f"{c} ({n} runs)" for c, n in code.most_common()) + ".", ""]
        lines.append("Time per run, as stored (runs loaded from earlier sweeps keep their own "
                     "times; wall times grow on a loaded machine, CPU times much less):")
        lines += ["", markdown_table(["policy", "runs", "mean solve s", "max solve s",
                                      "total solve s", "total CPU s"], rows)]
        all_cpu = [c for v in cpu.values() for c in v]
        if all_cpu and not any(math.isnan(c) for c in all_cpu):
            lines.append(
                f"Total CPU {sum(all_cpu):.0f} s; on 2 dedicated cores the runs would take about "
                f"{lpt_makespan(all_cpu, 2):.0f} s (longest-first schedule of the CPU times).")
    out.mkdir(parents=True, exist_ok=True)
    path = out / "reproduce.md"
    path.write_text("\n".join(lines) + "\n")
    return path
