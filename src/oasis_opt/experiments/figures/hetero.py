"""OASiS against Gavel's policies on heterogeneous clusters (not a paper figure):
``oasis-opt reproduce hetero``.

Draws, from ``experiments.hetero.compute``, ``hetero.{png,pdf}``: per workload (Gavel's dev
trace, paper-sim with a mixed cluster) the total utility, average JCT and makespan of every
policy (bars: mean over the seeds, whiskers min … max); and ``hetero.md``: the table of means, what
each side gains, and the commands.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import hetero as exp
from .common import (Figure, fmt, mean_range, markdown_table, new_figure, save, whiskers,
                     write_markdown)

COMMAND = "oasis-opt reproduce hetero"
METRICS = (("total_utility", "total utility"), ("avg_jct_h", "average JCT, h"),
           ("makespan_h", "makespan, h"))
OASIS_COLOUR, GAVEL_COLOUR = "#1f77b4", "#999999"
# what the bars and whiskers are (the dev trace is one instance: its whiskers span the policy
# seeds of the policies that draw at random, and are absent for the others)
LEGEND_TITLE = ("bars: mean over the runs; whiskers: min … max (Gavel dev trace: {gavel} policy "
                "seed(s) for the randomised policies, one run for the others; paper-sim: {sim} "
                "instance seed(s))")
# metrics over each policy's *completed* jobs only: the sets differ between policies
COMPLETED_ONLY = ("avg_jct_h", "makespan_h")
COMPLETED_NOTE = ("average JCT and makespan are over each policy's completed jobs only (n on the "
                  "bars: mean completed), so they compare different job sets; total utility "
                  "is like for like (a job not completed adds 0)")
TITLES = {"gavel": "Gavel dev trace (8 V100 + 8 P100 + 8 K80)",
          "paper-sim": "paper-sim, mixed cluster"}


def names(data, workload: str) -> list[str]:
    return list(dict.fromkeys(r["policy"] for r in data["rows"] if r["workload"] == workload))


def cell(data, workload: str, name: str, key: str) -> tuple[float, float, float]:
    vals = [r[key] for r in data["rows"]
            if r["workload"] == workload and r["policy"] == name and r[key] is not None]
    return mean_range(vals)


def table_rows(data) -> list[list]:
    """One row per (workload, policy): means over its seeds (the markdown table)."""
    out = []
    for w in exp.WORKLOADS:
        for n in names(data, w):
            recs = [r for r in data["rows"] if r["workload"] == w and r["policy"] == n]
            out.append([w, n, len(recs), recs[0]["jobs"],
                        fmt(cell(data, w, n, "admitted")[0], 1),
                        fmt(cell(data, w, n, "completed")[0], 1),
                        fmt(cell(data, w, n, "total_utility")[0], 2),
                        fmt(cell(data, w, n, "avg_jct_h")[0], 2),
                        fmt(cell(data, w, n, "makespan_h")[0], 2)])
    return out


def draw(data, out_dir: Path) -> list[Path]:
    fig, axes = new_figure(len(METRICS), len(exp.WORKLOADS), width=4.0, height=3.0)
    for row, w in zip(axes, exp.WORKLOADS):
        ns = names(data, w)
        x = np.arange(len(ns))
        for ax, (key, title) in zip(row, METRICS):
            m = np.array([cell(data, w, n, key) for n in ns])
            ax.bar(x, m[:, 0], 0.7, yerr=whiskers(m[:, 0], m[:, 1], m[:, 2]), capsize=2,
                   color=[OASIS_COLOUR if n.startswith("oasis") else GAVEL_COLOUR for n in ns])
            ax.set_xticks(x, [n.replace(" (", "\n(") for n in ns], fontsize=6, rotation=45)
            ax.set_title(f"{TITLES[w]}: {title}", fontsize=7)
            ax.grid(alpha=0.3, axis="y")
            if key in COMPLETED_ONLY:  # say on the bars which jobs each value is over
                done = [cell(data, w, n, "completed")[0] for n in ns]
                for xi, top, c in zip(x, m[:, 2], done):
                    ax.annotate(f"n={c:.0f}" if c == int(c) else f"n={c:.1f}", (xi, top),
                                xytext=(0, 2), textcoords="offset points", ha="center",
                                fontsize=5)
                ax.margins(y=0.12)
    from matplotlib.patches import Patch

    seeds = data["settings"]
    fig.legend(handles=[Patch(color=OASIS_COLOUR, label="OASiS (oasis: estimated U, L; "
                              "oasis-oracle: eqs. 23-26)"),
                        Patch(color=GAVEL_COLOUR, label="Gavel's policies")],
               loc="outside lower center", ncols=2, fontsize=7,
               title=LEGEND_TITLE.format(gavel=len(seeds["gavel_seeds"]),
                                         sim=len(seeds["sim_seeds"])) + "\n" + COMPLETED_NOTE,
               title_fontsize=7)
    return save(fig, out_dir, "hetero")


def best(data, workload: str, key: str, high: bool) -> str:
    """The policy with the best mean of ``key``, with its value and completed jobs."""
    ns = names(data, workload)
    vals = [cell(data, workload, n, key)[0] for n in ns]
    i = int(np.nanargmax(vals) if high else np.nanargmin(vals))
    jobs = next(r["jobs"] for r in data["rows"] if r["workload"] == workload)
    return (f"`{ns[i]}` ({fmt(vals[i], 2)}; {fmt(cell(data, workload, ns[i], 'completed')[0], 1)}"
            f" of {jobs} jobs completed)")


def oasis_vs_gavel(data, workload: str) -> str:
    """OASiS's admissions and utility against the best Gavel policy's utility."""
    ns = names(data, workload)
    ours = [n for n in ns if n.startswith("oasis")]
    top = max((n for n in ns if n not in ours),
              key=lambda n: cell(data, workload, n, "total_utility")[0])
    u = cell(data, workload, top, "total_utility")[0]
    jobs = next(r["jobs"] for r in data["rows"] if r["workload"] == workload)
    return "; ".join(
        f"`{n}` admits {fmt(cell(data, workload, n, 'admitted')[0], 1)} of {jobs} jobs, "
        f"utility {fmt(cell(data, workload, n, 'total_utility')[0] / u, 2)} x `{top}`'s"
        for n in ours)


def markdown(data) -> str:
    s = data["settings"]
    q = " --quick" if data["quick"] else ""
    f = data["floor"]
    lines = [
        "# OASiS against Gavel's policies on heterogeneous clusters", "",
        f"Made by `{COMMAND}{q}` ({len(data['rows'])} runs). Workloads: Gavel's dev trace "
        "(`oasis-opt generate --trace gavel`, 60 jobs, 8 V100 + 8 P100 + 8 K80, 360-s slots; "
        f"policy seeds {', '.join(map(str, s['gavel_seeds']))} for the policies that draw at "
        "random, one run for the others) and `paper_sim(seed, "
        + ", ".join(f"{k}={v!r}" for k, v in s["sim"].items())
        + f")` over seeds {', '.join(map(str, s['sim_seeds']))} (policy seed = instance seed). "
        "Every schedule passed `oasis_opt.validate`: "
        f"{'yes' if all(r['valid'] for r in data['rows']) else 'NO'}.", "",
        "**OASiS's pricing**, by the rule of the paper's figures: `oasis` with U and L estimated "
        f"on history instances of the same workload (seeds {', '.join(map(str, s['history']))}; "
        f"chosen floor L = {f['chosen']:.2g} on a grid of {len(f['grid'])}), `oasis-oracle` with "
        "eqs. (23)-(26) on the evaluated instance. The dev trace is one trace with no history to "
        "estimate on, so there only `oasis-oracle` runs.", "",
        "![hetero](hetero.png)", "",
        "## Means over the seeds", "",
        "Utility: the paper's sigmoid utilities (the Gavel import gives each job gamma1 = its "
        "priority weight and its target = its isolated run time). Average JCT and makespan: Gavel's "
        "definitions (`sim.metrics.jct_metrics`) over the **completed** jobs, so a policy that "
        "rejects jobs (OASiS) or leaves them unfinished at the horizon is measured on the jobs it "
        "completed (`completed`).", "",
        markdown_table(["workload", "policy", "runs", "jobs", "admitted", "completed",
                        "total utility", "avg JCT, h", "makespan, h"], table_rows(data)),
        "## What each side gains", "",
        *[f"- **{TITLES[w]}**: highest utility {best(data, w, 'total_utility', True)}; lowest "
          f"average JCT {best(data, w, 'avg_jct_h', False)}; lowest makespan "
          f"{best(data, w, 'makespan_h', False)}. {oasis_vs_gavel(data, w)}."
          for w in exp.WORKLOADS],
        "- JCT and makespan are over the completed jobs, which differ between policies: on "
        "paper-sim jobs arrive until the last slot of the horizon and a schedule ends there, so "
        "every policy leaves jobs unfinished and a short makespan can mean few completions. "
        "Utility (completed jobs only, by their completion time) is the comparable number there.",
        "- **OASiS** decides admission online, job by job, against resource prices that rise "
        "with use: it rejects the jobs whose utility does not pay for what they would take "
        "(its JCT and makespan count only the admitted jobs), and buys work on the type that "
        "is cheapest per unit of progress (pricing per type, `online.dual`), with no fairness "
        "between jobs. Where the load lets it admit everything (the dev trace), it has no "
        "admission to gain from and competes on placement alone.",
        "- **Gavel's policies** admit every job and share the types by effective throughput "
        "(max-min fairness over normalised throughputs, finish-time fairness, makespan): they "
        "target JCT, fairness or makespan and never look at utility, so a job past its target keeps "
        "its GPUs.",
        "- Neither has both: OASiS has no fairness objective across types, Gavel has no admission "
        "control nor utility. The numbers above show the trade on these instances, not a "
        "winner.", "",
        "## Commands", "", "```bash",
        f"{COMMAND}            # paper_figs/hetero.{{png,pdf,md}} (a few minutes on 2 cores)",
        f"{COMMAND} --quick    # one seed, small paper-sim instances, a coarse floor grid",
        "# runs by hand: the dev trace (OASiS with the oracle constants)",
        "oasis-opt generate --trace gavel --cluster 8:8:8 --seed 0 --out dev.json",
        "oasis-opt solve dev.json --policy oasis --out oasis.json",
        "oasis-opt solve dev.json --policy gavel-las --out las.json",
        "# paper-sim mixed, seed 0 (full settings), OASiS priced on the history seeds",
        *[f"oasis-opt generate --preset paper-sim --seed {seed} --jobs 40 --horizon 60 "
          f"--servers 12 --cluster-mix {exp.MIX} --out {name}.json"
          for seed, name in ((0, "mixed"), (1000, "h1000"), (1001, "h1001"), (1002, "h1002"))],
        "oasis-opt estimate-pricing --method search --out pricing.json h1000.json h1001.json "
        "h1002.json",
        "oasis-opt solve mixed.json --policy oasis --pricing pricing.json --out oasis.json",
        "oasis-opt solve mixed.json --policy gavel-las --out las.json",
        "oasis-opt summary mixed.json oasis.json las.json",
        "```", ""]
    return "\n".join(lines)


def render(data, out_dir: Path, reference_dir=None, quick: bool = False) -> list[Path]:
    out_dir = Path(out_dir)
    return draw(data, out_dir) + [write_markdown(out_dir, "hetero", markdown(data))]


FIGURE = Figure("hetero", "OASiS against Gavel's policies on heterogeneous clusters", None, render,
                compute=exp.compute)
