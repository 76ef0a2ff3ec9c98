"""Priority preemption with degradation (not a paper figure): ``oasis-opt reproduce preemption``.

Draws, from ``experiments.preemption.compute``, ``preemption.{png,pdf}``: per saturation, the
high-class mean JCT over all jobs (unfinished ones at the horizon), the lost GPU-hours, the mean
chain length and the utility of every policy (bars: mean over the seeds, whiskers: 95 %
bootstrap interval over the seeds; a legend on every panel; linear axes, so a zero bar is a
zero); and ``preemption.md``: the tables per class and overall, the chain-length distribution,
and the claims checked ✅/❌ on bootstrap intervals.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from .. import preemption as exp
from ..fig5_diagnosis import bootstrap
from .common import Figure, checks_markdown, fmt, markdown_table, new_figure, save, whiskers, \
    write_markdown

COLOURS = {"priority-degrade": "#1f77b4", "priority-kill": "#d62728",
           "priority-checkpoint": "#9467bd", "priority-nopreempt": "#7f7f7f",
           "tiresias": "#ff7f0e", "fifo": "#8c564b", "priority-degrade+bands": "#aec7e8",
           "priority-kill+bands": "#ff9896"}
COMMAND = "oasis-opt reproduce preemption"
RESAMPLES, LEVEL = 2000, 0.95
Get = Callable[[dict], float]


def _high_jct(r: dict) -> float:
    return float(r["per_class"].get("high", {}).get("jct_all_mean_h") or np.nan)


PANELS: tuple[tuple[str, Get], ...] = (
    ("high-class mean JCT, h (all jobs)", _high_jct),
    ("lost GPU-hours", lambda r: float(r["lost_gpu_hours"])),
    ("mean chain length (0: no stops)", lambda r: float(r["chains"]["mean"])),
    ("utility", lambda r: float(r["utility"])))


def values(data, policy: str, load: float, get: Get) -> np.ndarray:
    """The metric of every seed (in seed order: seeds pair across policies)."""
    return np.array([get(r) for r in exp.records(data, policy, load)], dtype=float)


def ci(v: np.ndarray) -> tuple[float, float, float]:
    """Mean and 95 % bootstrap interval over the seeds (``fig5_diagnosis.bootstrap``)."""
    v = v[~np.isnan(v)]
    return bootstrap(v.tolist(), resamples=RESAMPLES, level=LEVEL)


def ci_text(c: tuple[float, float, float], digits: int = 2) -> str:
    return f"{fmt(c[0], digits)} [{fmt(c[1], digits)}, {fmt(c[2], digits)}]"


def draw(data, out_dir: Path) -> list[Path]:
    s = data["settings"]
    fig, axes = new_figure(2, 2, width=5.2, height=3.6)
    x = np.arange(len(s["loads"]))
    width = 0.8 / len(s["policies"])
    for ax, (label, get) in zip(axes.ravel(), PANELS):
        for k, p in enumerate(s["policies"]):
            m = np.array([ci(values(data, p, load, get)) for load in s["loads"]])
            bars = ax.bar(x - 0.4 + width * (k + 0.5), m[:, 0], width, color=COLOURS[p],
                          label=p, yerr=whiskers(m[:, 0], m[:, 1], m[:, 2]), capsize=2)
            if label.startswith("lost"):  # Tiresias's losses dwarf the others': the numbers
                ax.bar_label(bars, fmt="%.1f", fontsize=4.5, rotation=90, padding=2)
        ax.set_xticks(x, [f"saturation {load:g}" for load in s["loads"]])
        ax.set_ylabel(label)
        ax.grid(alpha=0.3, axis="y")
        ax.set_ylim(0, ax.get_ylim()[1] * 1.45)  # room for the legend above the bars
        ax.legend(fontsize=5.5, ncol=2, title="policy", title_fontsize=6, loc="upper left")
    axes[0][0].set_title("Tiresias: short jobs first; its mean JCT hides no job (unfinished "
                         "at the horizon)", fontsize=7)
    fig.suptitle(f"Chain workload (Philly jobs, priority waves); bars: mean over "
                 f"{len(s['seeds'])} seeds, whiskers: 95 % bootstrap CI", fontsize=8)
    return save(fig, out_dir, "preemption")


def _diff(data, a: str, b: str, load: float, get: Get) -> tuple[float, float, float]:
    """Mean of a - b over paired seeds, with its bootstrap interval."""
    return ci(values(data, a, load, get) - values(data, b, load, get))


def _ratio(data, a: str, b: str, load: float, get: Get) -> tuple[float, float, float]:
    """sum(a) / sum(b) over paired seeds, with its bootstrap interval."""
    va, vb = values(data, a, load, get), values(data, b, load, get)
    return bootstrap(va.tolist(), vb.tolist(), resamples=RESAMPLES, level=LEVEL)


def claims(data) -> list[tuple[str, bool, str]]:
    s = data["settings"]
    loads = s["loads"]
    chain, lost, jct = PANELS[2][1], PANELS[1][1], PANELS[0][1]
    util: Get = lambda r: float(r["gpu_utilisation"])  # noqa: E731
    out = []

    def per_load(fn, digits=2):
        return "; ".join(f"saturation {load:g}: {ci_text(fn(load), digits)}" for load in loads)

    d = {load: _diff(data, "priority-kill", "priority-degrade", load, chain) for load in loads}
    out.append(("degradation shortens chains against killing (kill - degrade mean chain "
                "length, 95 % CI above 0 at every saturation)",
                all(c[1] > 0 for c in d.values()), per_load(lambda load: d[load])))
    r = {load: _ratio(data, "priority-degrade", "priority-kill", load, jct) for load in loads}
    out.append(("high-priority JCT under degradation within 10 % of killing's (degrade / kill "
                "of the high class's mean JCT over all jobs, CI upper end <= 1.1)",
                all(c[2] <= 1.1 for c in r.values()), per_load(lambda load: r[load], 3)))
    n = {load: _diff(data, "priority-degrade", "priority-nopreempt", load, jct) for load in loads}
    out.append(("high-priority JCT under degradation better than no-preemption's (degrade - "
                "nopreempt, h, CI below 0)", all(c[2] < 0 for c in n.values()),
                per_load(lambda load: n[load])))
    lo = {load: _diff(data, "priority-degrade", "priority-kill", load, lost) for load in loads}
    ok = all(c[2] < 0 for c in lo.values())
    out.append(("lost GPU-hours below killing's (degrade - kill, CI below 0)", ok,
                per_load(lambda load: lo[load]) + ("" if ok else " — " + lost_why(
                    data, [load for load in loads if lo[load][2] >= 0]))))
    u = {load: _diff(data, "priority-degrade", "priority-nopreempt", load, util)
         for load in loads}
    ok = all(c[1] >= -0.005 for c in u.values())
    out.append(("GPU utilisation no lower than no-preemption's (degrade - nopreempt, CI lower "
                "end >= -0.005, half a point)", ok, per_load(lambda load: u[load], 4) + (
                    "" if ok else " — " + utilisation_why(
                        data, [load for load in loads if u[load][1] < -0.005]))))
    return out


def _sum(data, policy: str, load: float, get: Get) -> float:
    return float(values(data, policy, load, get).sum())


def lost_why(data, loads: list[float]) -> str:
    """Where the lost GPU-hours of degradation and killing come from, at ``loads`` (summed
    over the seeds): stops, the share of them that lost work, GPU-hours lost at the stops and
    withheld by restarts."""
    parts = []
    for load in loads:
        row = {}
        for p in ("priority-degrade", "priority-kill"):
            stops = _sum(data, p, load, lambda r: r["stops"]["preemptions"]
                         + r["stops"]["degradations"])
            losing = _sum(data, p, load, lambda r: r["stops_losing_work"])
            row[p] = (stops, losing / stops if stops else 0.0,
                      _sum(data, p, load, lambda r: r["lost_gpu_hours_at_stops"]),
                      _sum(data, p, load, lambda r: r["lost_gpu_hours_restarts"]))
        d, k = row["priority-degrade"], row["priority-kill"]
        why = (f"saturation {load:g}, over the seeds: priority-degrade {fmt(d[0], 0)} stops, "
               f"{fmt(100 * d[1], 0)} % of them losing work, {fmt(d[2], 2)} GPU-h lost at the "
               f"stops and {fmt(d[3], 2)} withheld by restarts; priority-kill {fmt(k[0], 0)} "
               f"stops, {fmt(100 * k[1], 0)} %, {fmt(k[2], 2)} and {fmt(k[3], 2)}")
        if d[0] < k[0] and d[1] > k[1] and d[2] > k[2]:
            why += (": degradation stops less often and restarts more cheaply, but more of the "
                    f"jobs it stops carry unsaved work ({fmt(100 * (1 - k[1]), 0)} % of "
                    f"killing's stops hit a job at its checkpoint, {fmt(100 * (1 - d[1]), 0)} % "
                    "of degradation's)")
        parts.append(why)
    return "; ".join(parts)


def utilisation_why(data, loads: list[float]) -> str:
    """What degradation's lower GPU utilisation is made of, at ``loads``: the GPU-hours it
    holds less than no-preemption, the work its degraded jobs did in CPU mode (at GPU rates),
    and the work done by the horizon on both counted together."""
    held: Get = lambda r: float(r["gpu_hours"])  # noqa: E731
    work: Get = lambda r: float(r["useful_gpu_hours"] + r["cpu_work_gpu_hours"])  # noqa: E731
    parts = []
    for load in loads:
        dh = _diff(data, "priority-degrade", "priority-nopreempt", load, held)
        dw = _diff(data, "priority-degrade", "priority-nopreempt", load, work)
        cpu = float(values(data, "priority-degrade", load,
                           lambda r: r["cpu_work_gpu_hours"]).mean())
        why = (f"saturation {load:g}: GPU-hours held, degrade - nopreempt, {ci_text(dh)} per "
               f"run, while degradation's victims do {fmt(cpu, 2)} GPU-h of their work in CPU "
               f"mode; the work done by the horizon, GPU and CPU mode together in GPU-h, "
               f"degrade - nopreempt, {ci_text(dw)}")
        if cpu >= -dh[0]:
            why += (" — the GPU-time it does not hold is work the CPU-mode servers did, not "
                    "work left undone")
        elif dw[2] < 0:
            why += (f" — the CPU-mode work covers {fmt(cpu, 2)} of the {fmt(-dh[0], 2)} GPU-h; "
                    "the rest is less work done by the horizon")
        else:
            why += (f" — the CPU-mode work covers {fmt(cpu, 2)} of the {fmt(-dh[0], 2)} GPU-h, "
                    "and the work done by the horizon does not differ beyond the seeds' spread "
                    "(which long jobs are left running at the end, gangs of fixed width that "
                    "cannot fill the drained cluster, differs from seed to seed)")
        parts.append(why)
    return "; ".join(parts)


def defaults_text(data) -> str:
    """Preemptions per hour and lost GPU-hours at the defaults (the study's settings)."""
    s = data["settings"]
    parts = []
    for load in s["loads"]:
        for p in ("priority-kill", "priority-degrade"):
            stops = values(data, p, load, lambda r: r["per_hour"]["preemptions"]
                           + r["per_hour"]["degradations"])
            lost = values(data, p, load, lambda r: r["lost_gpu_hours"])
            useful = values(data, p, load, lambda r: r["useful_gpu_hours"])
            parts.append(f"{p} at saturation {load:g}: {fmt(float(stops.mean()), 2)} stops / h, "
                         f"{fmt(float(lost.mean()), 2)} lost GPU-h "
                         f"({fmt(100 * float(lost.sum() / useful.sum()), 2)} % of the useful)")
    return ("**The defaults** (delta 0.1, cap 25 %, past-stop weight 0.3) are the ones this page "
            "uses, not tuned per figure: " + "; ".join(parts) + ". A stop every hour or two on "
            "a 32-GPU cluster, and lost GPU-time under 1 % of the useful, is a modest price for "
            "the high class's shorter JCT. With the former past-stop weight 0.05 a requeued victim "
            "never outranked a running job by delta: seed 0 at saturation 1.5 saw 9 stops, all "
            "chains of length 1 (measured when the defaults were chosen, not on this page).")


def tiresias_wins(data) -> list[str]:
    """The metrics on which Tiresias beats every priority policy (mean over the seeds)."""
    s = data["settings"]
    prio = [p for p in s["policies"] if p.startswith("priority-")]
    metrics: tuple[tuple[str, Get, bool], ...] = (
        ("utility", lambda r: float(r["utility"]), True),
        ("GPU utilisation", lambda r: float(r["gpu_utilisation"]), True),
        ("completed jobs", lambda r: float(r["completed"]), True),
        ("high-class mean JCT over all jobs", _high_jct, False),
        ("lost GPU-hours", lambda r: float(r["lost_gpu_hours"]), False))
    out = []
    for load in s["loads"]:
        for name, get, higher in metrics:
            t = float(np.nanmean(values(data, "tiresias", load, get)))
            others = [float(np.nanmean(values(data, p, load, get))) for p in prio]
            if all((t > o) if higher else (t < o) for o in others):
                out.append(f"saturation {load:g}: {name} ({fmt(t, 3)} against the best "
                           f"priority policy's {fmt(max(others) if higher else min(others), 3)})")
    return out


def _mean(v: list) -> str:
    v = [x for x in v if x is not None]
    return fmt(float(np.mean(v)), 2) if v else "—"


def markdown(data) -> str:
    s = data["settings"]
    valid = all(r["valid"] for r in data["runs"].values())
    lines = ["# Priority preemption where chains form: GPU -> CPU degradation against killing", "",
             f"Made by `{COMMAND}{' --quick' if data['quick'] else ''}` ({len(data['runs'])} "
             f"runs, {data['computed']} computed in the last call, the rest loaded). Workload: "
             f"`oasis_opt.workloads.priority.chain_instance(seed, saturation, max_jobs="
             f"{s['max_jobs']}, slot_s={exp.SLOT_S:g})` (preset `philly-chains`): the first "
             "Philly jobs of 2017-11-01/02 of at most 12 h, arrivals scaled so that the offered "
             "GPU-time is `saturation` x the 32 P100 GPUs (2 racks, one CPU-mode server per "
             "rack), user classes in waves (3-hour periods of a low, a mid and a high third, "
             "80 % of a wave's jobs of its class); seeds "
             f"{', '.join(map(str, s['seeds']))}. The priority policies at their defaults "
             "(the score alone, delta 0.1, at most 25 % of the GPUs preempted per slot, a 0.3 "
             "weight of past stops), tree placement; `+bands`: with the band rule; Tiresias "
             "with its defaults and its queue thresholds at this slot length; FIFO as the "
             "floor. Every stop pays the preemption costs (`costmodel.preemption`); "
             "`priority-checkpoint` saves its victims' work first; a promotion back to the "
             "GPUs writes a checkpoint first (nothing lost, its restart pays the write). Every "
             "schedule passed "
             f"`oasis_opt.validate`: {'yes' if valid else 'NO'}. Intervals: 95 % bootstrap "
             "over the seeds (`experiments.fig5_diagnosis.bootstrap`, 2000 resamples).", "",
             "![preemption](preemption.png)", ""]
    rows = []
    for load in s["loads"]:
        for p in s["policies"]:
            recs = exp.records(data, p, load)
            for cls in exp.CLASSES:
                cs = [r["per_class"][cls] for r in recs if cls in r["per_class"]]
                if not cs:
                    continue
                jct = ci(np.array([c["jct_all_mean_h"] for c in cs], dtype=float))
                rows.append([f"{load:g}", p, cls, _mean([c["jobs"] for c in cs]),
                             _mean([c["unfinished"] for c in cs]), ci_text(jct),
                             _mean([c["jct_all_p95_h"] for c in cs]),
                             _mean([c["slowdown_mean"] for c in cs]),
                             _mean([c["misses"] for c in cs])])
    lines += ["## Per class, over all jobs (means over the seeds)", "",
              "JCT = completion - arrival + 1 slot, an unfinished job counted at the horizon "
              "(T - arrival + 1; `unfinished` says how many); slowdown = that JCT over the "
              "job's isolated run time (its fastest run alone); misses = not completed, or "
              "after the utility's target.", "",
              markdown_table(["saturation", "policy", "class", "jobs", "unfinished",
                              "JCT mean, h [95 % CI]", "JCT p95, h", "slowdown", "misses"],
                             rows)]
    rows = []
    for load in s["loads"]:
        for p in s["policies"]:
            def v(get, p=p, load=load):
                return values(data, p, load, get)

            rows.append([f"{load:g}", p, ci_text(ci(v(lambda r: r["utility"])), 0),
                         _mean(v(lambda r: r["completed"]).tolist()),
                         fmt(float(np.mean(v(lambda r: r["gpu_utilisation"]))), 3),
                         _mean(v(lambda r: r["useful_gpu_hours"]).tolist()),
                         ci_text(ci(v(lambda r: r["lost_gpu_hours"]))),
                         _mean(v(lambda r: r["lost_cpu_hours"]).tolist()),
                         _mean(v(lambda r: r["cpu_work_gpu_hours"]).tolist()),
                         *(fmt(float(np.mean(v(lambda r, k=k: r["per_hour"][k]))), 3)
                           for k in ("preemptions", "degradations", "promotions"))])
    lines += ["## Overall (means over the seeds)", "",
              "useful / lost GPU-hours: `sim.preemption` (lost = the GPU-time of the work lost "
              "at stops and withheld by restarts: the share of the GPUs held in the slots that "
              "did it; useful = held - lost); lost CPU-h: the same on CPU-mode servers, in "
              "vCPU-hours (work lost or withheld in CPU mode costs CPU time, not GPU time); "
              "CPU-mode work: the work done and kept on CPU-mode servers (degraded jobs; Tiresias "
              "and FIFO place some jobs there), at the GPU-hours it takes on the jobs' GPUs; stops per hour of the horizon (Tiresias's preemptions "
              "are its queue's rotations).", "",
              markdown_table(["saturation", "policy", "utility [95 % CI]", "completed",
                              "GPU utilisation", "useful GPU-h", "lost GPU-h [95 % CI]",
                              "lost CPU-h", "CPU-mode work, GPU-h", "preemptions / h",
                              "degradations / h", "promotions / h"], rows)]
    rows = []
    for load in s["loads"]:
        for p in s["policies"]:
            recs = exp.records(data, p, load)
            pooled = [n for r in recs for n in r["chain_lengths"]]
            if not pooled:
                continue
            a = np.array(pooled, dtype=float)
            share = float(np.sum([r["chains"]["share_in_chains"] * r["chains"]["preemptions"]
                                  for r in recs]) / len(pooled))
            rows.append([f"{load:g}", p, len(pooled),
                         ci_text(ci(values(data, p, load, PANELS[2][1]))),
                         fmt(float(np.percentile(a, 95)), 1), int(a.max()), fmt(share, 3)])
    lines += ["## Chain lengths", "",
              "For every stop of a job caused by another (kill, suspend or degrade): 1 + the "
              "stops it triggered downstream (a victim that later preempts continues the "
              "chain). Pooled over the seeds but the mean (per seed, then its CI); share = "
              "stops that are part of a chain longer than 1. Tiresias's and FIFO's stops have "
              "no single cause and are not counted.", "",
              markdown_table(["saturation", "policy", "stops", "mean [95 % CI]", "p95", "max",
                              "share in chains > 1"], rows)]
    lines += [checks_markdown(claims(data), "The claims"), "", defaults_text(data), ""]
    wins = tiresias_wins(data)
    lines += ["**Where a baseline wins.** Tiresias beats every priority policy on: "
              + ("; ".join(wins) if wins else "nothing here") + ". Why: Tiresias ignores the "
              "classes and serves the jobs with the least attained GPU-time first, so the many "
              "short jobs of every class finish long before their utilities' targets (the "
              "utility rewards that whatever the class); it completes fewer jobs (the "
              "`unfinished` column: long jobs starve), its high class waits longer, and its "
              "queue rotations lose hundreds of GPU-hours. Among the others, compare "
              "no-preemption and FIFO in the tables: preemption buys the high class a shorter "
              "JCT at the low and mid classes' cost.", ""]
    kb = {load: _diff(data, "priority-kill", "priority-kill+bands", load, PANELS[2][1])
          for load in s["loads"]}
    kj = {load: _diff(data, "priority-kill", "priority-kill+bands", load, _high_jct)
          for load in s["loads"]}
    lines += ["**The band rule.** Killing without bands against with them: mean chain length "
              + "; ".join(f"saturation {load:g}: {ci_text(kb[load])}" for load in s["loads"])
              + "; high-class mean JCT (h) " + "; ".join(
                  f"saturation {load:g}: {ci_text(kj[load])}" for load in s["loads"])
              + " (differences, without - with).", ""]
    lines += ["## Commands", "", "```bash", f"{COMMAND}            # results/preemption/, "
              "paper_figs/preemption*", f"{COMMAND} --quick    # saturation 1.5, two seeds, "
              "60 jobs", "oasis-opt generate --preset philly-chains --seed 0 --out chains.json",
              "```", ""]
    return "\n".join(lines)


def render(data, out_dir: Path, reference_dir=None, quick: bool = False) -> list[Path]:
    out_dir = Path(out_dir)
    return draw(data, out_dir) + [write_markdown(out_dir, "preemption", markdown(data))]


FIGURE = Figure("preemption", "Priority preemption with GPU -> CPU degradation", None, render,
                compute=exp.compute)
