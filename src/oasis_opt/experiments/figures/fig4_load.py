"""Fig. 4 diagnosed, drawn: the baselines' lateness against the load, beside the paper's medians.

The variants, their runs and rows are the study ``oasis_opt.experiments.fig4_load``; :func:`main`
is ``experiments/fig4_load.py`` (writes ``--out``, markdown, and the figure as PNG and PDF beside
it).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from ..fig4_load import CLASSES, POLICIES, compute
from .common import DEFAULT_REFERENCE, REPO_ROOT, display, save
from .fig4 import paper_values


def fmt(x) -> str:
    return "-" if x is None else f"{x:.1f}"


def markdown(table: list[dict], paper: dict, command: str, seeds) -> str:
    lines = ["# Fig. 4 diagnosed: the baselines' lateness against the load", "",
             f"Made by `{command}`. Seeds {', '.join(map(str, seeds))} pooled; T = 100, 50 + 50 "
             "servers, uniform arrivals, half time-sensitive, half time-critical (Fig. 4's "
             "generator). Per class: median of (t_hat - a) - gamma3 with jobs that did not "
             "complete counted as completing at T (\"at T\"), median of the completed jobs, and "
             "completed / all jobs. \"nothing completes\": the median of T - a - gamma3 over all "
             "jobs, the score of a policy that completes no job.", ""]
    for c in CLASSES:
        lines += [f"## {c}", "",
                  "| workload | load factor | nothing completes | " + " | ".join(
                      f"{display(p)} at T / completed / done" for p in POLICIES) + " |",
                  "|---|---|---|" + "---|" * len(POLICIES)]
        for row in table:
            cells = [f"{fmt(row[p][c]['median_at_T'])} / {fmt(row[p][c]['median_completed'])}"
                     f" / {row[p][c]['completed']} of {row[p][c]['jobs']}" for p in POLICIES]
            lines.append(f"| {row['label']} | {row['load']:.1f} | {row['never'][c]:.1f} | "
                         + " | ".join(cells) + " |")
        lines.append("| paper (Fig. 4) | | | " + " | ".join(
            fmt(paper.get((c, p), {}).get("median")) for p in POLICIES) + " |")
        lines.append("")
    return "\n".join(lines)


def plot(table: list[dict], paper: dict, out: Path) -> list[Path]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    width = 0.8 / len(table)
    for a, c in zip(axes, CLASSES):
        for k, row in enumerate(table):
            pos = [n - 0.4 + width * (k + 0.5) for n in range(len(POLICIES))]
            a.bar(pos, [row[p][c]["median_at_T"] for p in POLICIES], width,
                  label=f"{row['label']} (load {row['load']:.1f})")
        a.scatter(range(len(POLICIES)), [paper.get((c, p), {}).get("median", np.nan)
                                         for p in POLICIES],
                  marker="D", color="black", zorder=3, label="paper")
        a.axhline(table[0]["never"][c], color="grey", ls="--", lw=0.8,
                  label="nothing completes (Fig. 4 workload)")
        a.set_xticks(range(len(POLICIES)), [display(p) for p in POLICIES])
        a.set(title=c, xlabel="policy")
    axes[0].set_ylabel("median (t̂ - a) - γ₃, unfinished at T (slots)")
    axes[1].legend(fontsize=7)
    return save(fig, out.parent, out.stem)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--workers", type=int, default=1,
                    help="1: in this process; N: a local Ray with N CPUs")
    ap.add_argument("--results", type=Path, default=REPO_ROOT / "results" / "fig4-load")
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "paper_figs" / "fig4_load.md")
    args = ap.parse_args(argv)
    table = compute(args.seeds, args.results, args.workers)
    paper = paper_values(DEFAULT_REFERENCE)
    command = ("nice -n 10 .venv/bin/python experiments/fig4_load.py --seeds "
               + " ".join(map(str, args.seeds)))
    text = markdown(table, paper, command, args.seeds)
    args.out.write_text(text)
    plot(table, paper, args.out.with_suffix(""))
    print(text)
    return 0
