"""Fig. 6 drawn: OASiS's utility at each U/L estimate relative to the true one, both readings.

The setting and the runs are the study ``oasis_opt.experiments.fig6``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..._extras import require
from .. import fig3
from ..fig6 import PERCENTS, SCALINGS, runs
from .common import (Figure, bars_caption, checks_markdown, fmt, grouped_bars, markdown_table,
                     mean_range, new_figure, number, ratio, read_reference, save, write_markdown)

UNDER, OVER = (20, 50), (300, 500, 1000)
MATERIAL = 0.02  # a difference in mean relative utility smaller than this is not a finding


def paper_values(reference_dir=None) -> dict[tuple[int, int], float]:
    return {(int(r["num_jobs"]), int(r["ul_estimate_pct"])): number(r["total_utility_x1e4"]) * 1e4
            for r in read_reference("fig6_estimation_error", reference_dir)}


def claims(rel: dict[tuple[int, int], float], jobs) -> list[tuple[str, bool, str]]:
    """``rel[(jobs, pct)]``: mean utility relative to the 100% estimate."""
    loss_under = float(np.mean([1 - rel[(n, p)] for n in jobs for p in UNDER]))
    loss_over = float(np.mean([1 - rel[(n, p)] for n in jobs for p in OVER]))
    largest = jobs[-1]
    strict = min(rel[(largest, p)] for p in UNDER) > max(rel[(largest, p)] for p in OVER)
    return [
        ("Underestimating U/L hurts less than overestimating (mean loss vs 100% over all sizes; "
         f"the gap must exceed {MATERIAL:.0%} of the utility, else it is noise)",
         loss_over - loss_under > MATERIAL, f"under (20%, 50%): {loss_under:+.1%}; "
         f"over (300-1000%): {loss_over:+.1%}"),
        (f"At the largest size ({largest} jobs, scarcest resources) every underestimate beats "
         "every overestimate", strict,
         ", ".join(f"{p}%: {rel[(largest, p)]:.2f}" for p in PERCENTS)),
    ]


def render(specs, records, out_dir: Path, reference_dir=None, quick: bool = False,
           estimated=None) -> list[Path]:
    colormaps = require("matplotlib", extra="plots", feature="figures").colormaps

    s = fig3.settings(quick)
    jobs = list(s["jobs"])
    values: dict[tuple[str, int, int], list[float]] = {}
    for sp in specs:
        values.setdefault((sp.tags["scaling"], sp.tags["jobs"], sp.tags["pct"]),
                          []).append(records[sp.key]["metrics"]["total_utility"])
    paper = paper_values(reference_dir)
    paper_at = {(n, p): paper.get((pn, p), np.nan) for n, pn in zip(jobs, fig3.PAPER_JOBS)
                for p in PERCENTS}
    rel_paper = {(n, p): ratio(paper_at[(n, p)], paper_at[(n, 100)]) for n in jobs for p in PERCENTS}
    cmap = colormaps["viridis"]
    colours = {p: cmap(k / (len(PERCENTS) - 1)) for k, p in enumerate(PERCENTS)}
    labels = {p: f"{p}%" for p in PERCENTS}

    fig, ax = new_figure(2, 1, width=6.2)
    sections, rows_by = [], {}
    for col, (scaling, title) in enumerate(SCALINGS.items()):
        ours = {(n, p): mean_range(values[(scaling, n, p)]) for n in jobs for p in PERCENTS}
        # mean, min and max, each divided by the mean at 100%
        rel = {(n, p): tuple(ratio(v, ours[(n, 100)][0]) for v in ours[(n, p)])
               for n in jobs for p in PERCENTS}
        a = ax[0, col]
        grouped_bars(a, jobs, PERCENTS, rel, rel_paper, colours, labels)
        a.axhline(1, color="grey", lw=0.6, ls=":")
        a.set(xlabel="number of jobs", ylabel="utility / utility at 100%",
              title=f"({'ab'[col]}) {title}; ◆ = paper")
        a.legend(fontsize=7, ncols=4, title="U/L estimate", title_fontsize=7)
        rows = []
        for n, pn in zip(jobs, fig3.PAPER_JOBS):
            rows.append([n] + [f"{ours[(n, p)][0]:.0f} ({rel[(n, p)][0]:.2f})" for p in PERCENTS])
            if col == 0:
                rows.append([f"paper {pn}"] + [f"{fmt(paper[(pn, p)], 0)} ({rel_paper[(n, p)]:.2f})"
                                               for p in PERCENTS])
        sections.append(f"## {title}{' (headline)' if col == 0 else ''}\n\n"
                        + markdown_table(["jobs"] + [f"{p}%" for p in PERCENTS], rows) + "\n"
                        + checks_markdown(claims({k: v[0] for k, v in rel.items()}, jobs)))
    fig.suptitle(f"Fig. 6 — U/L estimation error, T = {s['horizon']}, "
                 f"{s['servers']}+{s['servers']} servers; {bars_caption(len(s['seeds']))}, "
                 "divided by the mean at 100%")
    paths = save(fig, out_dir, "fig6")
    text = (f"# Fig. 6 — total utility under U/L estimation error{' (quick)' if quick else ''}\n\n"
            "OASiS priced with U and L estimated on a history (Fig. 3's pricing, the 100% column) "
            "and then scaled to the given percentage; value (relative to 100%), mean over seeds "
            f"{list(s['seeds'])}; T = {s['horizon']}, {s['servers']}+{s['servers']} servers. The "
            "paper does not say whether U, L or both were scaled (A6): both readings are "
            "shown.\n\n" + "\n".join(sections))
    return paths + [write_markdown(out_dir, "fig6", text)]


FIGURE = Figure("fig6", "Total utility under U/L estimation error", runs, render,
                estimates=fig3.estimates)
