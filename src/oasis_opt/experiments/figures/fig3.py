"""Fig. 3 drawn: total utility per number of jobs beside the paper's bars, the claims checked.

The setting and the runs are the study ``oasis_opt.experiments.fig3``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..fig3 import PAPER_JOBS, collect, estimate, estimates, runs, settings
from .common import (COLOURS, PAPER_POLICIES, SERIES, Figure, bars_caption, calibration_markdown,
                     checks_markdown, display, fmt, grouped_bars, markdown_table, mean_range,
                     mean_sd, new_figure, number, ratio, read_reference, save, write_markdown)

def paper_values(reference_dir=None) -> dict[tuple[int, str], float]:
    """(jobs, policy) -> the paper's total utility (not scaled)."""
    names = {display(p): p for p in PAPER_POLICIES}
    return {(int(r["num_jobs"]), names[r["policy"]]): number(r["total_utility_x1e4"]) * 1e4
            for r in read_reference("fig3_total_utility", reference_dir)}


def claims(ours: dict[tuple[int, str], tuple[float, float]], jobs) -> list[tuple[str, bool, str]]:
    """OASiS best at every size; its margin over the best baseline grows with the jobs."""
    best_base = {n: max(ours[(n, p)][0] for p in PAPER_POLICIES if p != "oasis") for n in jobs}
    margin = [ours[(n, "oasis")][0] - best_base[n] for n in jobs]
    highest = all(m > 0 for m in margin)
    grows = bool(np.all(np.diff(margin) > 0))
    return [
        ("OASiS has the highest total utility at every number of jobs", highest,
         "margins over the best baseline: " + ", ".join(f"{n}: {m:+.0f}" for n, m in zip(jobs, margin))),
        ("OASiS's margin grows with the number of jobs", grows,
         "margin at each size increases" if grows else "margin is not monotone in the jobs"),
    ]


def render(specs, records, out_dir: Path, reference_dir=None, quick: bool = False,
           estimated=None) -> list[Path]:
    s = settings(quick)
    jobs = list(s["jobs"])
    values = collect(specs, records)
    ours = {k: mean_sd(v) for k, v in values.items()}
    bars = {k: mean_range(v) for k, v in values.items()}
    paper = paper_values(reference_dir)
    # In the quick variant the job counts are scaled; the paper's bars sit at the same position.
    paper_at = {(n, p): paper.get((pn, p), np.nan)
                for n, pn in zip(jobs, PAPER_JOBS) for p in PAPER_POLICIES}
    labels = {p: display(p) for p in SERIES}

    fig, ax = new_figure(2, 1, width=6.2)
    # quick: our values are about a tenth of the paper's scale, so no paper markers in (a)
    grouped_bars(ax[0, 0], jobs, SERIES, bars, {} if quick else paper_at, COLOURS,
                 labels, scale=1 if quick else 1e4)
    ax[0, 0].set(xlabel="number of jobs",
                 ylabel="total utility" + ("" if quick else " (×10⁴)"),
                 title="(a) total utility" + (" (quick: paper values in (b) only)" if quick else ""))
    ax[0, 0].legend(fontsize=7, ncols=3)
    # the series' mean, min and max, each divided by OASiS's mean at that size
    rel_ours = {k: tuple(ratio(v, bars[(k[0], "oasis")][0]) for v in b) for k, b in bars.items()}
    rel_paper = {(n, p): ratio(paper_at[(n, p)], paper_at[(n, "oasis")])
                 for n in jobs for p in PAPER_POLICIES}
    grouped_bars(ax[0, 1], jobs, SERIES, rel_ours, rel_paper, COLOURS, labels)
    ax[0, 1].set(xlabel="number of jobs" + (" (paper: 100-400)" if quick else ""),
                 ylabel="utility / OASiS utility", title="(b) relative to OASiS; ◆ = paper")
    fig.suptitle(f"Fig. 3 — total utility vs jobs, T = {s['horizon']}, "
                 f"{s['servers']}+{s['servers']} servers; {bars_caption(len(s['seeds']))} "
                 "(in (b) divided by OASiS's mean)")
    paths = save(fig, out_dir, "fig3")

    rows = []
    for n, pn in zip(jobs, PAPER_JOBS):
        for p in SERIES:
            m, sd = ours[(n, p)]
            rows.append([n, display(p), f"{m:.0f} ± {sd:.0f}", fmt(paper.get((pn, p), np.nan), 0),
                         fmt(rel_ours[(n, p)][0], 2), fmt(rel_paper.get((n, p), np.nan), 2)])
    text = (f"# Fig. 3 — total utility vs number of jobs{' (quick)' if quick else ''}\n\n"
            f"T = {s['horizon']}, {s['servers']} worker + {s['servers']} PS servers, seeds "
            f"{list(s['seeds'])}; ours = mean ± sd over seeds."
            + (" Quick run: job counts scaled with the servers; the paper column is the paper's "
               "value at the corresponding size (100-400 jobs, 50+50 servers)." if quick else "")
            + "\n\n"
            + markdown_table(["jobs", "policy", "ours", "paper", "ours / OASiS", "paper / OASiS"],
                             rows)
            + "\n" + checks_markdown(claims(ours, jobs))
            + "\n" + calibration_markdown(
                [(f"{n} jobs", estimated[estimate(n, quick).key].calibration) for n in jobs]
                if estimated else []))
    return paths + [write_markdown(out_dir, "fig3", text)]


FIGURE = Figure("fig3", "Total utility vs number of jobs (T = 300)", runs, render,
                estimates=estimates)
