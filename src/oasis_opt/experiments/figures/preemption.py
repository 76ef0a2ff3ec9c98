"""Priority preemption with degradation (not a paper figure): ``oasis-opt reproduce preemption``.

Draws, from ``experiments.preemption.compute``, ``preemption.{png,pdf}``: per load, the
high-class mean JCT, the lost GPU-hours, and the mean chain length of the four policies (bars:
mean over the seeds, whiskers min … max); and ``preemption.md``: the tables per class and
overall, the chain-length distribution, and the claims checked pass/fail.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from .. import preemption as exp
from .common import (Figure, bars_caption, checks_markdown, fmt, mean_range, markdown_table,
                     new_figure, save, whiskers, write_markdown)

COLOURS = {"priority-degrade": "#1f77b4", "priority-kill": "#d62728",
           "priority-nopreempt": "#7f7f7f", "tiresias": "#ff7f0e"}
COMMAND = "oasis-opt reproduce preemption"
PANELS = (("high-class mean JCT, h", lambda r: r["per_class"].get("high", {}).get("jct_mean_h")),
          ("lost GPU-hours", lambda r: r["lost_gpu_hours"]),
          ("mean chain length", lambda r: float(np.mean(r["chain_lengths"]))
           if r["chain_lengths"] else float("nan")))


def _cell(data, policy, load, get):
    vals = [get(r) for r in exp.records(data, policy, load)]
    return mean_range([v for v in vals if v is not None and not np.isnan(v)])


def draw(data, out_dir: Path) -> list[Path]:
    s = data["settings"]
    fig, axes = new_figure(len(PANELS), 1, width=4.2, height=3.4)
    x = np.arange(len(s["loads"]))
    width = 0.8 / len(s["policies"])
    for ax, (label, get) in zip(axes[0], PANELS):
        for k, p in enumerate(s["policies"]):
            m = np.array([_cell(data, p, load, get) for load in s["loads"]])
            ax.bar(x - 0.4 + width * (k + 0.5), m[:, 0], width, color=COLOURS[p], label=p,
                   yerr=whiskers(m[:, 0], m[:, 1], m[:, 2]), capsize=2)
        if label.startswith("lost"):
            ax.set_yscale("symlog", linthresh=1.0)  # Tiresias's losses dwarf the others'
        ax.set_xticks(x, [f"load {load:g}" for load in s["loads"]])
        ax.set_ylabel(label)
        ax.grid(alpha=0.3, axis="y")
    axes[0][0].legend(fontsize=7)
    axes[0][1].set_title(f"Philly-derived workload with priority classes; "
                         f"{bars_caption(len(s['seeds']))}", fontsize=8)
    return save(fig, out_dir, "preemption")


def claims(data) -> list[tuple[str, bool, str]]:
    s = data["settings"]

    def mean(p, load, get):
        return _cell(data, p, load, get)[0]

    chain = PANELS[2][1]
    jct = PANELS[0][1]
    lost = PANELS[1][1]
    out = []
    d = [mean("priority-degrade", load, chain) for load in s["loads"]]
    k = [mean("priority-kill", load, chain) for load in s["loads"]]
    ok = all(a <= 1.1 for a in d)  # no preemption at a load (NaN): not shown, so not passed
    out.append(("degradation shortens chains to ~1 (mean chain length <= 1.1 at every load)", ok,
                "degrade " + ", ".join(fmt(a, 2) for a in d) + "; kill "
                + ", ".join(fmt(b, 2) for b in k)))
    out.append(("killing makes longer chains than degradation (priority-kill's mean chain "
                "length above priority-degrade's at some load)",
                any(b > a for a, b in zip(d, k)),
                "equal here: victims sit in lower bands, and the band rule alone ends every "
                "chain" if all(a == b for a, b in zip(d, k)) else
                ", ".join(f"load {load:g}: {fmt(a, 2)} vs {fmt(b, 2)}"
                          for load, a, b in zip(s["loads"], d, k))))
    r = [mean("priority-degrade", load, jct) / mean("priority-kill", load, jct)
         for load in s["loads"]]
    out.append(("degradation keeps high-priority JCT near priority-kill's (within 10 % at every "
                "load)", all(x <= 1.1 for x in r),
                "degrade / kill: " + ", ".join(fmt(x, 3) for x in r)))
    ld = [mean("priority-degrade", load, lost) for load in s["loads"]]
    lk = [mean("priority-kill", load, lost) for load in s["loads"]]
    out.append(("degradation loses less work than killing (lost GPU-hours, every load)",
                all(a < b for a, b in zip(ld, lk)),
                "degrade " + ", ".join(fmt(a, 2) for a in ld) + "; kill "
                + ", ".join(fmt(b, 2) for b in lk)))
    return out


def markdown(data) -> str:
    s = data["settings"]
    lines = ["# Priority preemption with GPU -> CPU degradation", "",
             f"Made by `{COMMAND}{' --quick' if data['quick'] else ''}` ({len(data['runs'])} "
             f"runs, {data['computed']} computed in the last call, the rest loaded). Workload: `oasis_opt.workloads.priority.priority_instance(load, seed, "
             f"max_jobs={s['max_jobs']}, slot_s={exp.SLOT_S:g})`: the first Philly jobs of "
             "2017-11-01/02 of at most 12 h, a user class drawn per job (20/50/30 %), job "
             "types by shape, 32 P100 GPUs in 2 racks plus one CPU-mode server per rack; loads divide "
             f"the arrival times; seeds {', '.join(map(str, s['seeds']))}. The priority policies "
             f"with delta {s['options']['delta']:g} and a cap of {100 * s['options']['cap']:g} % "
             "of the GPUs per slot (looser than their defaults 0.2 and 10 %, under which this "
             "workload sees a handful of preemptions), tree placement; Tiresias with its "
             "defaults (first-fit) and its queue thresholds at this slot length. Every stop pays the preemption costs (`costmodel.preemption`). Every "
             "schedule passed `oasis_opt.validate`: "
             f"{'yes' if all(r['valid'] for r in data['runs'].values()) else 'NO'}.", ""]
    rows = []
    for load in s["loads"]:
        for p in s["policies"]:
            recs = exp.records(data, p, load)
            for cls in exp.CLASSES:
                cs = [r["per_class"][cls] for r in recs if cls in r["per_class"]]
                if not cs:
                    continue

                def m(name, cs=cs):
                    v = [c[name] for c in cs if c[name] is not None]
                    return fmt(float(np.mean(v)), 2) if v else "—"

                rows.append([f"{load:g}", p, cls, sum(c["jobs"] for c in cs) // len(cs),
                             m("completed"), m("jct_mean_h"), m("jct_p50_h"), m("jct_p95_h"),
                             m("queueing_mean_h"), m("misses")])
    lines += ["## Per class (means over the seeds)", "",
              "JCT = completion - arrival + 1 slot, over the completed jobs (a policy that "
              "completes fewer jobs, as Tiresias here, shows the JCT of the shorter ones); "
              "queueing = first slot with workers - arrival; misses = not completed, or after "
              "the utility's target.", "",
              markdown_table(["load", "policy", "class", "jobs", "completed", "JCT mean, h",
                              "JCT p50, h",
                              "JCT p95, h", "queueing, h", "misses"], rows)]
    rows = []
    for load in s["loads"]:
        for p in s["policies"]:
            recs = exp.records(data, p, load)

            def m(get, recs=recs, digits=2):
                v = [get(r) for r in recs]
                return fmt(float(np.mean(v)), digits)

            rows.append([f"{load:g}", p, m(lambda r: r["utility"], digits=1),
                         m(lambda r: r["completed"], digits=1),
                         m(lambda r: r["gpu_utilisation"], digits=3),
                         m(lambda r: r["useful_gpu_hours"], digits=1),
                         m(lambda r: r["lost_gpu_hours"]),
                         m(lambda r: r["stops"]["preemptions"], digits=1),
                         m(lambda r: r["stops"]["degradations"], digits=1),
                         m(lambda r: r["stops"]["promotions"], digits=1)])
    lines += ["## Overall (means over the seeds)", "",
              "useful / lost GPU-hours: `sim.preemption` (lost = work lost at stops plus work "
              "withheld by restarts, at the GPUs a unit takes on the job's accelerator).", "",
              markdown_table(["load", "policy", "utility", "completed", "GPU utilisation",
                              "useful GPU-h", "lost GPU-h", "preemptions", "degradations",
                              "promotions"], rows)]
    rows = []
    for load in s["loads"]:
        for p in s["policies"]:
            c = Counter(n for r in exp.records(data, p, load) for n in r["chain_lengths"])
            if c:
                rows.append([f"{load:g}", p, sum(c.values()),
                             ", ".join(f"{n}: {c[n]}" for n in sorted(c))])
    lines += ["## Chain lengths", "",
              "For every preemption caused by a job: 1 + the preemptions it triggered downstream "
              "(a victim that later preempts continues the chain), pooled over the seeds "
              "(length: count). Tiresias's preemptions have no single cause and are not "
              "counted.", "",
              markdown_table(["load", "policy", "preemptions", "chain length: count"], rows)]
    lines += [checks_markdown(claims(data)).replace("The paper's claims", "The claims"), "",
              "## Commands", "", "```bash", f"{COMMAND}            # results/preemption/, "
              "paper_figs/preemption*", f"{COMMAND} --quick    # load 2, two seeds, 60 jobs",
              "```", ""]
    return "\n".join(lines)


def render(data, out_dir: Path, reference_dir=None, quick: bool = False) -> list[Path]:
    out_dir = Path(out_dir)
    return draw(data, out_dir) + [write_markdown(out_dir, "preemption", markdown(data))]


FIGURE = Figure("preemption", "Priority preemption with GPU -> CPU degradation", None, render,
                compute=exp.compute)
