"""Figs. 8-9 drawn: the simulated testbed's utility and completion minus target beside the paper.

The setting and the runs are the study ``oasis_opt.experiments.testbed``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..testbed import collect, estimates, runs, settings
from .common import (BOX_CAPTION, COLOURS, PAPER_MARKER, PAPER_POLICIES, SERIES, Figure,
                     bars_caption, box_stats, calibration_markdown, checks_markdown, display, fmt,
                     markdown_table, mean_range, mean_sd, new_figure, number, read_reference,
                     save, whiskers, write_markdown)


def paper_values(reference_dir=None) -> dict[str, dict[str, float]]:
    names = {display(p): p for p in PAPER_POLICIES}
    return {names[r["policy"]]: {"utility": number(r["total_utility_x1e2"]) * 1e2,
                                 "median": number(r["ct_median_slots"]),
                                 "q1": number(r["ct_box_low_slots"]),
                                 "q3": number(r["ct_box_high_slots"])}
            for r in read_reference("testbed_fig8_fig9", reference_dir)}


def claims(util, done, unf) -> list[tuple[str, bool, str]]:
    means = {p: mean_sd(util[p])[0] for p in PAPER_POLICIES}
    med = {p: abs(box_stats(done[p] + unf[p])["median"]) for p in PAPER_POLICIES}
    return [
        ("OASiS has the highest total utility on the testbed", max(means, key=means.get) == "oasis",
         ", ".join(f"{display(p)} {m:.0f}" for p, m in means.items())),
        ("OASiS is closest to its targets (unfinished counted at T)",
         min(med, key=lambda p: (np.nan_to_num(med[p], nan=np.inf), p)) == "oasis",
         "|median|: " + ", ".join(f"{display(p)} {fmt(m, 1)}" for p, m in med.items())),
    ]


def render(specs, records, out_dir: Path, reference_dir=None, quick: bool = False,
           estimated=None) -> list[Path]:
    util, done, unf = collect(specs, records)
    paper = paper_values(reference_dir)
    paper = {p: paper.get(p, dict.fromkeys(("utility", "median", "q1", "q3"), np.nan))
             for p in SERIES}
    seeds = settings(quick)["seeds"]
    pos = np.arange(len(SERIES))
    names = [display(p).replace(" (oracle U, L)", "\n(oracle)") for p in SERIES]
    fig, ax = new_figure(2, 1, width=5.6)
    m, lo, hi = (np.array(v) / 100 for v in zip(*(mean_range(util[p]) for p in SERIES)))
    ax[0, 0].bar(pos, m, 0.6, yerr=whiskers(m, lo, hi), color=[COLOURS[p] for p in SERIES],
                 capsize=3)
    ax[0, 0].plot(pos, [paper[p]["utility"] / 100 for p in SERIES], **PAPER_MARKER,
                  label="paper")
    ax[0, 0].set_xticks(pos, names, fontsize=7)
    ax[0, 0].set(ylabel="total utility (×10²)",
                 title=f"Fig. 8 — total utility\n{bars_caption(len(seeds))}")
    ax[0, 0].title.set_fontsize(9)
    ax[0, 0].legend(fontsize=7)
    a = ax[0, 1]
    for k, (data, hatch, shift) in enumerate(((done, None, -0.18), ({p: done[p] + unf[p] for p in
                                              SERIES}, "//", 0.18))):
        bp = a.boxplot([data[p] or [np.nan] for p in SERIES], positions=pos + shift,
                       widths=0.3, patch_artist=True, flierprops={"markersize": 2})
        for patch, p in zip(bp["boxes"], SERIES):
            patch.set_facecolor(COLOURS[p])
            patch.set_alpha(0.6)
            patch.set_hatch(hatch)
    a.plot(pos + 0.4, [paper[p]["median"] for p in SERIES], **PAPER_MARKER,
           label="paper median")
    a.vlines(pos + 0.4, [paper[p]["q1"] for p in SERIES],
             [paper[p]["q3"] for p in SERIES], color="black", lw=1.5, label="paper box")
    a.axhline(0, color="grey", lw=0.6, ls=":")
    a.set_xticks(pos, names, fontsize=7)
    a.set(ylabel="actual − target (slots)",
          title="Fig. 9 — actual − target (hatched: unfinished at T)\n"
                + BOX_CAPTION.replace(", whiskers", ",\nwhiskers"))
    a.title.set_fontsize(9)
    a.legend(fontsize=6, loc="lower left")
    fig.suptitle(f"Testbed scenario, simulated — {len(seeds)} seed(s); ◆ = paper")
    paths = save(fig, out_dir, "testbed")

    rows = []
    for p in SERIES:
        m, sd = mean_sd(util[p])
        b, bu = box_stats(done[p]), box_stats(done[p] + unf[p])
        rows.append([display(p), f"{m:.0f} ± {sd:.0f}", fmt(paper[p]["utility"], 0), len(done[p]),
                     len(unf[p]), fmt(b["median"], 1), f"{fmt(b['q1'], 1)} … {fmt(b['q3'], 1)}",
                     fmt(bu["median"], 1), fmt(paper[p]["median"], 1)])
    text = (f"# Figs. 8–9 — testbed scenario, simulated{' (quick)' if quick else ''}\n\n"
            f"`testbed(seed)` for seeds {list(seeds)}; utility mean ± sd over seeds; completion "
            "minus target pooled over seeds and job classes (slots of 20 min).\n\n"
            + markdown_table(["policy", "utility", "paper utility", "completed", "unfinished",
                              "median", "box (q1…q3)", "median, unfinished at T", "paper median"],
                             rows)
            + "\n" + checks_markdown(claims(util, done, unf))
            + "\n" + calibration_markdown(
                [("testbed", estimated[e.key].calibration) for e in estimates(quick)] if estimated else []))
    return paths + [write_markdown(out_dir, "testbed", text)]


FIGURE = Figure("testbed", "Testbed scenario, simulated (Figs. 8-9)", runs, render,
                estimates=estimates)
