"""Fig. 5's sensitivity to the generator, drawn: the table per variant and server count, the
pooled ratio bars.

The variants and their diagnosis rows are the study ``oasis_opt.experiments.fig5_sensitivity``;
:func:`main` is ``experiments/fig5_sensitivity.py`` (writes ``--out``, markdown, and the figure
as PNG and PDF beside it).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ..fig5 import SERVERS
from ..fig5_diagnosis import DIAGNOSIS_PRICINGS, summarize
from ..fig5_sensitivity import compute
from .common import REPO_ROOT
from .fig5_diagnosis import ratio_bars


def table(results: list[tuple[str, list[dict]]]) -> str:
    """One line per variant and per (variant, servers): mean OPT/OASiS [95% CI] per pricing,
    admitted counts, load and largest container."""
    def ci(t) -> str:
        return f"{t[0]:.2f} [{t[1]:.2f}, {t[2]:.2f}]"

    head = (["variant", "servers", "seeds"] + [f"{p} mean [CI]" for p in DIAGNOSIS_PRICINGS]
            + ["median plugin / hindsight", "admitted OPT / plugin / hindsight", "load",
               "largest container"])
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for label, rows in results:
        pooled = summarize([{**r, "servers": "all"} for r in rows])
        for s in pooled + summarize(rows):
            seeds = str(s["seeds"]) + (f" ({s['unproven']} unproven left out)"
                                       if s["unproven"] else "")
            lines.append("| " + " | ".join(
                [label if s["servers"] == "all" else "", f"{s['servers']}", seeds]
                + [ci(s[p]["mean"]) for p in DIAGNOSIS_PRICINGS]
                + [f"{s['plugin']['median']:.2f} / {s['hindsight']['median']:.2f}",
                   f"{s['opt_admitted']:.1f} / {s['plugin']['admitted']:.1f} / "
                   f"{s['hindsight']['admitted']:.1f}",
                   f"{s['load']:.2f}", f"{s['largest_container']:.2f}"]) + " |")
    return "\n".join(lines) + "\n"


def plot(results: list[tuple[str, list[dict]]], stem: Path) -> list[Path]:
    pooled = [summarize([{**r, "servers": "all"} for r in rows])[0] for _, rows in results]
    servers = "/".join(str(n) for n in sorted({r["servers"] for r in results[0][1]}))
    return ratio_bars(pooled, [f"{label}\nload {s['load']:.2f}"
                               for (label, _), s in zip(results, pooled)], stem, figsize=(11, 4),
                      title=f"Fig. 5 generator sensitivity: γ₁ in [1,100], servers {servers}, "
                            f"{pooled[0]['seeds']} instances per variant")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    ap.add_argument("--servers", type=int, nargs="+", default=list(SERVERS))
    ap.add_argument("--priority", type=float, nargs=2, default=[1.0, 100.0],
                    metavar=("LO", "HI"), help="the gamma1 range (default: the paper's 1-100)")
    ap.add_argument("--workers", type=int, default=1, help="processes computing rows")
    ap.add_argument("--rows", type=Path, default=REPO_ROOT / "paper_figs" / "fig5_sensitivity.jsonl")
    ap.add_argument("--preset-rows", type=Path,
                    default=REPO_ROOT / "paper_figs" / "fig5_diagnosis.jsonl")
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "paper_figs" / "fig5_sensitivity.md")
    args = ap.parse_args(argv)

    pr = (args.priority[0], args.priority[1])
    results = compute(args.seeds, args.servers, pr, args.rows, args.preset_rows, args.workers)
    command = " ".join(["nice -n 10 .venv/bin/python experiments/fig5_sensitivity.py",
                        "--seeds", *map(str, args.seeds), "--servers", *map(str, args.servers),
                        "--priority", *(f"{p:g}" for p in pr)])
    text = (f"# Fig. 5: sensitivity to the generator\n\nMade by `{command}` (rows in "
            f"`{args.rows.name}` and, for the preset, `{args.preset_rows.name}`; reused when "
            "rerun).\n\n`paper_fig5(seed, servers=n, priority=γ₁ range, **options)`: "
            "`e_max_scale` s draws E_i from 1..floor(s E_max_i) (E_max_i: the most epochs job i "
            "can finish alone on the empty cluster by T), `target_range` draws γ₃ from it "
            "(preset: [1, 15] against T = 10). Per variant, the pooled line (all servers) then "
            "one line per server count: OPT / OASiS as mean [95% bootstrap CI over instances], "
            "the medians, admitted counts (means), load sum(W)/(capacity x T) on the bottleneck "
            "resource and the largest container relative to its server (means). Every OPT is a "
            "MILP proven optimal (rows that are not are left out and counted). Pricings as in "
            "`fig5_diagnosis.md`, the plug-in and searched ones estimated on each variant's own "
            "history.\n\n" + table(results))
    args.out.write_text(text)
    plot(results, args.out.with_suffix(""))
    print(text)
    return 0
