"""Fig. 6: OASiS's total utility when U/L is estimated at 20%-1000% of its true value, T = 300.

Same instances as Fig. 3. The estimate error is the ``u_scale`` option of the ``oasis`` policy
(choice A6: U' = kappa U with the initial price L unchanged, so the price at full capacity is
kappa U). The 100% bar is the plain ``oasis`` run of Fig. 3 (no option), so it is shared.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..spec import RunSpec
from . import fig3
from .common import (Figure, checks_markdown, fmt, grouped_bars, markdown_table, mean_sd,
                     new_figure, number, ratio, read_reference, save, write_markdown)

PERCENTS = (20, 50, 100, 300, 500, 1000)
UNDER, OVER = (20, 50), (300, 500, 1000)
MATERIAL = 0.02  # a difference in mean relative utility smaller than this is not a finding


def spec(jobs: int, seed: int, pct: int, quick: bool) -> RunSpec:
    options = {} if pct == 100 else {"u_scale": pct / 100}
    return RunSpec("paper_sim", fig3.sim_params(jobs, seed, quick), "oasis", options,
                   tags={"jobs": jobs, "seed": seed, "pct": pct})


def runs(quick: bool) -> list[RunSpec]:
    s = fig3.settings(quick)
    return [spec(n, seed, pct, quick) for n in s["jobs"] for seed in s["seeds"] for pct in PERCENTS]


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


def render(specs, records, out_dir: Path, reference_dir=None, quick: bool = False) -> list[Path]:
    from matplotlib import colormaps

    s = fig3.settings(quick)
    jobs = list(s["jobs"])
    values: dict[tuple[int, int], list[float]] = {}
    for sp in specs:
        values.setdefault((sp.tags["jobs"], sp.tags["pct"]),
                          []).append(records[sp.key]["metrics"]["total_utility"])
    ours = {k: mean_sd(v) for k, v in values.items()}
    paper = paper_values(reference_dir)
    paper_at = {(n, p): paper.get((pn, p), np.nan) for n, pn in zip(jobs, fig3.PAPER_JOBS)
                for p in PERCENTS}
    cmap = colormaps["viridis"]
    colours = {p: cmap(k / (len(PERCENTS) - 1)) for k, p in enumerate(PERCENTS)}
    labels = {p: f"{p}%" for p in PERCENTS}
    rel_ours = {(n, p): (ratio(ours[(n, p)][0], ours[(n, 100)][0]),
                         ratio(ours[(n, p)][1], ours[(n, 100)][0]))
                for n in jobs for p in PERCENTS}
    rel_paper = {(n, p): ratio(paper_at[(n, p)], paper_at[(n, 100)]) for n in jobs for p in PERCENTS}

    fig, ax = new_figure(2, 1, width=6.2)
    grouped_bars(ax[0, 0], jobs, PERCENTS, ours, {} if quick else paper_at, colours, labels, 1e4)
    ax[0, 0].set(xlabel="number of jobs", ylabel="total utility (×10⁴)",
                 title="(a) OASiS total utility by U/L estimate")
    ax[0, 0].legend(fontsize=7, ncols=4, title="U/L estimate", title_fontsize=7)
    grouped_bars(ax[0, 1], jobs, PERCENTS, rel_ours, rel_paper, colours, labels)
    ax[0, 1].axhline(1, color="grey", lw=0.6, ls=":")
    ax[0, 1].set(xlabel="number of jobs", ylabel="utility / utility at 100%",
                 title="(b) relative to the exact estimate; ◆ = paper")
    fig.suptitle(f"Fig. 6 — U/L estimation error, T = {s['horizon']}, "
                 f"{s['servers']}+{s['servers']} servers, {len(s['seeds'])} seed(s)")
    paths = save(fig, out_dir, "fig6")

    rows = []
    for n, pn in zip(jobs, fig3.PAPER_JOBS):
        rows.append([n] + [f"{ours[(n, p)][0]:.0f} ({rel_ours[(n, p)][0]:.2f})" for p in PERCENTS])
        rows.append([f"paper {pn}"] + [f"{fmt(paper[(pn, p)], 0)} ({rel_paper[(n, p)]:.2f})"
                                       for p in PERCENTS])
    text = (f"# Fig. 6 — total utility under U/L estimation error{' (quick)' if quick else ''}\n\n"
            f"OASiS with U scaled to the given percentage (A6); value (relative to 100%), mean over "
            f"seeds {list(s['seeds'])}; T = {s['horizon']}, {s['servers']}+{s['servers']} servers."
            "\n\n" + markdown_table(["jobs"] + [f"{p}%" for p in PERCENTS], rows)
            + "\n" + checks_markdown(claims({k: v[0] for k, v in rel_ours.items()}, jobs)))
    return paths + [write_markdown(out_dir, "fig6", text)]


FIGURE = Figure("fig6", "Total utility under U/L estimation error", runs, render)
