"""Fig. 4 drawn: box plots per class and policy beside the paper's medians, the claims checked.

The setting and the runs are the study ``oasis_opt.experiments.fig4``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..fig4 import CLASS_MIX, collect, estimates, runs, settings
from .common import (BOX_CAPTION, CLASSES, COLOURS, PAPER_MARKER, PAPER_POLICIES, SERIES, Figure,
                     box_stats, calibration_markdown, checks_markdown, display, fmt,
                     markdown_table, new_figure, number, read_reference, save, write_markdown)

CONVENTIONS = {"completed": "completed jobs only",
               "with_unfinished": "unfinished jobs counted as completing at T"}


def paper_values(reference_dir=None) -> dict[tuple[str, str], dict[str, float]]:
    names = {display(p): p for p in PAPER_POLICIES}
    return {(r["job_class"].replace("_", "-"), names[r["policy"]]):
            {"median": number(r["median_slots"]), "lo": number(r["whisker_low_slots"]),
             "hi": number(r["whisker_high_slots"])}
            for r in read_reference("fig4_completion_minus_target", reference_dir)}


def claims(values) -> list[tuple[str, bool, str]]:
    out = []
    for conv in ("with_unfinished", "completed"):
        for c in CLASSES:
            med = {p: abs(box_stats(values[(conv, c, p)])["median"]) for p in PAPER_POLICIES}
            best = min(med, key=lambda p: (np.nan_to_num(med[p], nan=np.inf), p))
            out.append((f"OASiS is closest to its targets ({c}, {CONVENTIONS[conv]})",
                        best == "oasis",
                        "|median|: " + ", ".join(f"{display(p)} {fmt(m, 1)}" for p, m in med.items())))
    for conv in ("with_unfinished", "completed"):
        spread = {(cl, p): (lambda b: b["q3"] - b["q1"])(box_stats(values[(conv, cl, p)]))
                  for cl in CLASSES for p in PAPER_POLICIES}
        smallest = all(min(PAPER_POLICIES, key=lambda p: (np.nan_to_num(spread[(cl, p)],
                                                                         nan=np.inf), p))
                       == "oasis" for cl in CLASSES)
        out.append((f"OASiS has the smallest spread (IQR, {CONVENTIONS[conv]})", smallest,
                    "; ".join(f"{cl}: " + ", ".join(f"{display(p)} {fmt(spread[(cl, p)], 1)}"
                                                  for p in PAPER_POLICIES) for cl in CLASSES)))
    return out


def render(specs, records, out_dir: Path, reference_dir=None, quick: bool = False,
           estimated=None) -> list[Path]:
    s = settings(quick)
    values = collect(specs, records)
    paper = paper_values(reference_dir)
    fig, axes = new_figure(2, 2, width=6.0, height=3.6)
    for row, conv in enumerate(CONVENTIONS):
        for col, c in enumerate(CLASSES):
            ax = axes[row, col]
            data = [values[(conv, c, p)] for p in SERIES]
            pos = np.arange(len(SERIES))
            bp = ax.boxplot([d if d else [np.nan] for d in data], positions=pos, widths=0.55,
                            patch_artist=True, showfliers=True, flierprops={"markersize": 2})
            for patch, p in zip(bp["boxes"], SERIES):
                patch.set_facecolor(COLOURS[p])
                patch.set_alpha(0.6)
            med = [paper.get((c, p), {}).get("median", np.nan) for p in SERIES]
            ax.plot(pos + 0.3, med, **PAPER_MARKER, label="paper median")
            lo, hi = paper.get((c, "oasis"), {}).get("lo"), paper.get((c, "oasis"), {}).get("hi")
            if lo is not None and np.isfinite(lo):
                ax.vlines(0.3, lo, hi, color="black", lw=0.8, label="paper OASiS whiskers")
            ax.axhline(0, color="grey", lw=0.6, ls=":")
            n_unf = [len(values[("unfinished", c, p)]) for p in SERIES]
            names = [display(p).replace(" (oracle U, L)", "\n(oracle)") for p in SERIES]
            ax.set_xticks(pos, [f"{d}\n({u} unf.)" if conv == "completed" else d
                                for d, u in zip(names, n_unf)], fontsize=7)
            ax.set(ylabel="actual − target (slots)", title=f"{c}: {CONVENTIONS[conv]}")
            if row == 0 and col == 0:
                ax.legend(fontsize=7)
    fig.suptitle(f"Fig. 4 — actual minus target completion time, T = {s['horizon']}, "
                 f"{s['jobs']} jobs, {s['servers']}+{s['servers']} servers, "
                 f"{len(s['seeds'])} seed(s); ◆ = paper\n{BOX_CAPTION}")
    paths = save(fig, out_dir, "fig4")

    rows = []
    for c in CLASSES:
        for p in SERIES:
            b = box_stats(values[("completed", c, p)])
            bu = box_stats(values[("with_unfinished", c, p)])
            rows.append([c, display(p), len(values[("completed", c, p)]),
                         len(values[("unfinished", c, p)]), fmt(b["median"], 1),
                         f"{fmt(b['q1'], 1)} … {fmt(b['q3'], 1)}",
                         f"{fmt(b['lo'], 1)} … {fmt(b['hi'], 1)}", fmt(bu["median"], 1),
                         fmt(paper.get((c, p), {}).get("median", np.nan), 0)])
    text = (f"# Fig. 4 — actual minus target completion time{' (quick)' if quick else ''}\n\n"
            f"T = {s['horizon']}, {s['jobs']} jobs (class mix {CLASS_MIX[1]:.0%} time-sensitive / "
            f"{CLASS_MIX[2]:.0%} time-critical), {s['servers']}+{s['servers']} servers, seeds "
            f"{list(s['seeds'])}, pooled. Slots; negative = earlier than the target.\n\n"
            + markdown_table(["class", "policy", "completed", "unfinished", "median", "box (q1…q3)",
                              "whiskers", "median, unfinished at T", "paper median"], rows)
            + "\n" + checks_markdown(claims(values))
            + "\n" + calibration_markdown(
                [(f"{s['jobs']} jobs, T = {s['horizon']}", estimated[e.key].calibration)
                 for e in estimates(quick)] if estimated else []))
    return paths + [write_markdown(out_dir, "fig4", text)]


FIGURE = Figure("fig4", "Actual minus target completion time (T = 100)", runs, render,
                estimates=estimates)
