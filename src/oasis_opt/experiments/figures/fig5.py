"""Fig. 5: performance ratio OPT / OASiS, wired onto the runner.

The setting, the grid (servers x gamma1 ranges x seeds), the per-group summary and its markdown
table are the offline track's ``oasis_opt.experiments.fig5``. Here each instance becomes two
runs, the exact MILP (policy ``offline``) and ``oasis``, so they spread over the workers, are
stored and resumed like every other run, and both schedules pass the validator. ``rows``
rebuilds the rows ``fig5.fig5_row`` would return from the two stored records.

OASiS is priced with U and L estimated on history instances of each group (servers x gamma1
range; 10 instances of 10 jobs, seeds 1000-1009); the ratio with the oracle-priced OASiS is
reported beside it.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..._extras import require
from .. import fig5 as offline_fig5
from ..calibration import FloorEstimate, history_seeds
from ..spec import RunSpec
from .common import (ORACLE, PAPER_MARKER, Figure, calibration_markdown, checks_markdown,
                     new_figure, oasis_runs, save, series, write_markdown)

POLICIES = ("offline", "oasis")  # the MILP first: the longer runs start early
_STATS = ("proven_optimal", "status", "bound", "gap", "build_s", "handoff_s", "solve_s",
          "columns", "rows")


def estimate(servers: int, priority, quick: bool) -> FloorEstimate:
    return FloorEstimate("paper_fig5", {"servers": servers, "priority": list(priority)},
                         history_seeds(quick, small=True))


def estimates(quick: bool) -> list[FloorEstimate]:
    s = offline_fig5.settings(quick)
    return [estimate(n, pr, quick) for n in s["servers"] for pr in s["priorities"]]


def runs(quick: bool, estimated=None) -> list[RunSpec]:
    s = offline_fig5.settings(quick)
    out = []
    for policy in POLICIES:
        for n in s["servers"]:
            for pr in s["priorities"]:
                for seed in s["seeds"]:
                    params = {"seed": seed, "servers": n, "priority": list(pr)}
                    tags = {"servers": n, "priority": list(pr), "seed": seed}
                    if policy == "oasis":
                        out += oasis_runs(estimate(n, pr, quick), estimated, params, tags=tags)
                    else:
                        out.append(RunSpec("paper_fig5", params, policy, tags=tags))
    return out


def rows(specs, records, oasis: str = "oasis") -> list[dict]:
    """One row per instance, with the keys of ``offline_fig5.fig5_row``; ``oasis`` names the
    OASiS series the ratio is taken against ("oasis": estimated pricing, ``ORACLE``)."""
    by_instance: dict[tuple, dict[str, dict]] = {}
    for s in specs:
        inst = (s.tags["servers"], tuple(s.tags["priority"]), s.tags["seed"])
        by_instance.setdefault(inst, {})[series(s)] = records[s.key]
    out = []
    for (n, (lo, hi), seed), rec in by_instance.items():
        opt, oasis_rec = rec["offline"], rec[oasis]
        u_opt, u_oasis = opt["metrics"]["total_utility"], oasis_rec["metrics"]["total_utility"]
        ratio = offline_fig5.performance_ratio(u_opt, u_oasis)
        out.append({"servers": n, "priority_lo": lo, "priority_hi": hi, "seed": seed,
                    "jobs": opt["summary"]["jobs"], "opt": u_opt, "oasis": u_oasis,
                    "ratio": ratio, "opt_admitted": opt["summary"]["admitted"],
                    "oasis_admitted": oasis_rec["summary"]["admitted"],
                    **{k: opt["stats"].get(k) for k in _STATS},
                    "oasis_s": oasis_rec["timing"]["solve_s"],
                    "backend": opt["stats"].get("backend")})
    return out


def claims(summary) -> list[tuple[str, bool, str]]:
    means = [s["ratio_mean"] for s in summary]
    return [("Performance ratios are about 1.1-1.5 (every group mean within [1.0, 1.6])",
             all(1.0 <= m <= 1.6 for m in means),
             f"group means {min(means):.2f} … {max(means):.2f}"),
            ("Every OPT is a proven optimum (no MILP time limit hit)",
             all(s["all_proven"] for s in summary),
             f"longest MILP {max(s['max_solve_s'] for s in summary):.1f} s")]


def render(specs, records, out_dir: Path, reference_dir=None, quick: bool = False,
           estimated=None) -> list[Path]:
    colormaps = require("matplotlib", extra="plots", feature="figures").colormaps

    s = offline_fig5.settings(quick)
    summary = offline_fig5.summarize(rows(specs, records))
    oracle = offline_fig5.summarize(rows(specs, records, ORACLE))
    paper = offline_fig5.paper_ratios(reference_dir)
    by = {(x["servers"], (x["priority_lo"], x["priority_hi"])): x for x in summary}
    servers, prios = list(s["servers"]), [tuple(p) for p in s["priorities"]]
    fig, ax = new_figure(1, 1, width=8.0, height=4.0)
    a = ax[0, 0]
    width = 0.8 / len(prios)
    cmap = colormaps["tab10"]
    x = np.arange(len(servers))
    for k, pr in enumerate(prios):
        pos = x - 0.4 + width * (k + 0.5)
        mean = np.array([by[(n, pr)]["ratio_mean"] for n in servers])
        err = np.array([[m - by[(n, pr)]["ratio_min"], by[(n, pr)]["ratio_max"] - m]
                        for n, m in zip(servers, mean)]).T
        a.bar(pos, mean, width, yerr=err, capsize=2, color=cmap(k),
              label=f"γ₁ ∈ [{pr[0]:g}, {pr[1]:g}]")
        a.plot(pos, [paper.get((n, *pr), np.nan) for n in servers], **PAPER_MARKER,
               label="paper" if k == 0 else None)
    a.axhline(1, color="grey", lw=0.6, ls=":")
    a.set_xticks(x, [str(n) for n in servers])
    a.set(xlabel="servers in total (⌈n/2⌉ worker + ⌊n/2⌋ PS hosts)",
          ylabel="OPT / OASiS total utility",
          title=f"Fig. 5 — OPT / OASiS, 10 jobs, T = 10, {len(s['seeds'])} seed(s): mean, "
                "min … max; ◆ = paper")
    a.legend(fontsize=7, ncols=3)
    paths = save(fig, out_dir, "fig5")
    text = (f"# Fig. 5 — performance ratio OPT / OASiS{' (quick)' if quick else ''}\n\n"
            f"`paper_fig5(seed, servers=n, priority=γ₁ range)`, seeds {list(s['seeds'])}; OPT = "
            "exact MILP (policy `offline`), OASiS with U and L estimated on history instances of "
            "each group. Tables from `oasis_opt.experiments.fig5.markdown`.\n\n"
            + offline_fig5.markdown(summary, paper) + "\n" + checks_markdown(claims(summary))
            + "\n## OPT / OASiS with the oracle U, L (eqs. 23-26)\n\n"
            + offline_fig5.markdown(oracle, paper) + "\n"
            + calibration_markdown(
                [(f"{e.params['servers']} servers, γ₁ ∈ [{e.params['priority'][0]:g}, "
                  f"{e.params['priority'][1]:g}]", estimated[e.key].calibration)
                 for e in estimates(quick)] if estimated else []))
    return paths + [write_markdown(out_dir, "fig5", text)]


FIGURE = Figure("fig5", "Performance ratio OPT / OASiS (10 jobs, T = 10)", runs, render,
                estimates=estimates)
