"""Fig. 5: performance ratio OPT / OASiS, wired onto the runner.

The setting, the grid (servers x gamma1 ranges x seeds), the per-group summary and its markdown
table are the offline track's ``oasis_opt.experiments.fig5``. Here each instance becomes two
runs, the exact MILP (policy ``offline``) and ``oasis``, so they spread over the workers, are
stored and resumed like every other run, and both schedules pass the validator. ``rows``
rebuilds the rows ``fig5.fig5_row`` would return from the two stored records.

OASiS runs under three pricings (``oasis_opt.experiments.fig5.PRICINGS``), each a series: the
plug-in estimate (eqs. 23-26 on history instances of each group: servers x gamma1 range, 10
instances of 10 jobs, seeds 1000-1009; series ``PLUGIN``), the floor searched on the same history
(tuning; series "oasis", the claims' headline as in the other figures) and the oracle (eqs. 23-26
on the evaluated instance; series ``ORACLE``). Every table prints alpha and 2 alpha of the
constants in use beside the ratio.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..._extras import require
from .. import fig5 as offline_fig5
from ..calibration import FloorEstimate, history_seeds
from ..spec import RunSpec
from .common import (ORACLE, PAPER_MARKER, Figure, calibration_markdown, checks_markdown,
                     new_figure, oasis_runs, save, series, write_markdown)

POLICIES = ("offline", "oasis")  # the MILP first: the longer runs start early
PLUGIN = "oasis-plugin"
# table and panel order: series, title
PANELS = ((PLUGIN, "plug-in U, L (eqs. 23-26 on the history)"),
          ("oasis", "searched floor L (tuned on the history)"),
          (ORACLE, "oracle U, L (eqs. 23-26 on the instance)"))
_STATS = ("proven_optimal", "status", "bound", "gap", "build_s", "handoff_s", "solve_s",
          "columns", "rows")


def estimate(servers: int, priority, quick: bool) -> FloorEstimate:
    return FloorEstimate("paper_fig5", {"servers": servers, "priority": list(priority)},
                         history_seeds(quick, small=True))


@lru_cache(maxsize=None)
def _plugin(servers: int, priority: tuple[float, float], quick: bool) -> str:
    doc = offline_fig5.group_pricings(servers, priority, quick, ("plugin",))["plugin"]["pricing"]
    return json.dumps(doc)


def plugin_document(servers: int, priority, quick: bool) -> dict:
    """The plug-in pricing of a group, from the same history seeds as its ``estimate``."""
    return json.loads(_plugin(servers, tuple(priority), quick))


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
                        out.append(RunSpec("paper_fig5", params, "oasis",
                                           {"pricing": plugin_document(n, pr, quick)},
                                           tags={**tags, "series": PLUGIN}))
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
                    "alpha": oasis_rec["stats"]["pricing"]["alpha"],
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
    summaries = {name: offline_fig5.summarize(rows(specs, records, name)) for name, _ in PANELS}
    summary = summaries["oasis"]
    paper = offline_fig5.paper_ratios(reference_dir)
    servers, prios = list(s["servers"]), [tuple(p) for p in s["priorities"]]
    fig, ax = new_figure(1, len(PANELS), width=8.0, height=3.6)
    width = 0.8 / len(prios)
    cmap = colormaps["tab10"]
    x = np.arange(len(servers))
    for (name, title), a in zip(PANELS, ax[:, 0]):
        by = {(v["servers"], (v["priority_lo"], v["priority_hi"])): v for v in summaries[name]}
        for k, pr in enumerate(prios):
            pos = x - 0.4 + width * (k + 0.5)
            mean = np.array([by[(n, pr)]["ratio_mean"] for n in servers])
            err = np.array([[m - by[(n, pr)]["ratio_min"], by[(n, pr)]["ratio_max"] - m]
                            for n, m in zip(servers, mean)]).T
            a.bar(pos, mean, width, yerr=err, capsize=2, color=cmap(k),
                  label=f"γ₁ ∈ [{pr[0]:g}, {pr[1]:g}]")
            a.plot(pos, [paper.get((n, *pr), np.nan) for n in servers], **PAPER_MARKER,
                   label="paper" if k == 0 else None)
            for px, n in zip(pos, servers):  # 2 alpha of the constants in use, over each bar
                a.annotate(f"{2 * by[(n, pr)]['alpha_mean']:.0f}", (px, 0), fontsize=5,
                           ha="center", va="bottom", xytext=(0, 1), textcoords="offset points")
        a.axhline(1, color="grey", lw=0.6, ls=":")
        a.set_xticks(x, [str(n) for n in servers])
        a.set(xlabel="servers in total (⌈n/2⌉ worker + ⌊n/2⌋ PS hosts)",
              ylabel="OPT / OASiS total utility",
              title=f"OASiS priced by {title}: mean, min … max; ◆ = paper; "
                    "2α at the foot of each bar")
        a.legend(fontsize=7, ncols=3)
    fig.suptitle(f"Fig. 5 — OPT / OASiS, 10 jobs, T = 10, {len(s['seeds'])} seed(s)")
    paths = save(fig, out_dir, "fig5")
    tables = "".join(f"\n## OPT / OASiS, OASiS priced by {title}\n\n"
                     + offline_fig5.markdown(summaries[name], paper) for name, title in PANELS)
    text = (f"# Fig. 5 — performance ratio OPT / OASiS{' (quick)' if quick else ''}\n\n"
            f"`paper_fig5(seed, servers=n, priority=γ₁ range)`, seeds {list(s['seeds'])}; OPT = "
            "exact MILP (policy `offline`); OASiS under three pricings, the first two fixed on "
            "history instances of each group before any evaluated instance is seen: the plug-in "
            "estimate (`oasis_opt.online.plugin`), the floor searched on utility "
            "(`oasis_opt.online.estimate`, tuning) and the oracle constants of the evaluated "
            "instance. alpha: mean over the seeds of Theorem 4's alpha of the constants used; "
            "OPT / OASiS <= 2 alpha. Tables from `oasis_opt.experiments.fig5.markdown`; the "
            "claims are checked on the searched pricing.\n"
            + tables + "\n" + checks_markdown(claims(summary)) + "\n"
            + calibration_markdown(
                [(f"{e.params['servers']} servers, γ₁ ∈ [{e.params['priority'][0]:g}, "
                  f"{e.params['priority'][1]:g}]", estimated[e.key].calibration)
                 for e in estimates(quick)] if estimated else []))
    return paths + [write_markdown(out_dir, "fig5", text)]


FIGURE = Figure("fig5", "Performance ratio OPT / OASiS (10 jobs, T = 10)", runs, render,
                estimates=estimates)
