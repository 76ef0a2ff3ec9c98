"""Figs. 8-9 for real, drawn: per round and policy the simulated and real utility, the completion
minus target planned and real, the cost models' error, and the markdown with its findings.

The profiling, the rounds and their numbers are the study ``oasis_opt.experiments.testbed_real``.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..testbed_real import POLICIES, ROUNDS, compute, rows
from .common import (COLOURS, Figure, box_stats, display, fmt, markdown_table, new_figure, save,
                     write_markdown)


def _boxes(a, values, shift, hatch, width: float = 0.3) -> None:
    pos = np.arange(len(POLICIES))
    bp = a.boxplot([v or [np.nan] for v in values], positions=pos + shift, widths=width,
                   patch_artist=True, flierprops={"markersize": 2})
    for patch, p in zip(bp["boxes"], POLICIES):
        patch.set_facecolor(COLOURS[p])
        patch.set_alpha(0.6)
        patch.set_hatch(hatch)


def render(data: dict, out_dir: Path, reference_dir=None, quick: bool = False) -> list[Path]:
    s = data["settings"]
    pos = np.arange(len(POLICIES))
    names = [display(p) for p in POLICIES]
    colours = [COLOURS[p] for p in POLICIES]
    fig, ax = new_figure(3, len(ROUNDS), width=4.6, height=3.6)
    tables = {}
    for k, name in enumerate(ROUNDS):
        rnd = data["rounds"][name]
        table = tables[name] = rows(rnd)
        label = ("speed as profiled" if name == "profile"
                 else f"speed corrected ×{rnd['slowdown']:g}")
        a = ax[k, 0]
        a.bar(pos - 0.2, [r["simulated"] for r in table], 0.4, color=colours, alpha=0.45,
              label="simulated (schedule)")
        a.bar(pos + 0.2, [r["real"] for r in table], 0.4, color=colours, hatch="//",
              edgecolor="black", linewidth=0.5, label="real (executed)")
        a.set_xticks(pos, names)
        a.set(ylabel="total utility", title=f"Fig. 8 — total utility ({label})")
        a.legend(fontsize=7)
        a = ax[k, 1]
        _boxes(a, [r["mt_planned"] for r in table], -0.18, None)
        _boxes(a, [r["mt_real"] for r in table], 0.18, "//")
        a.axhline(0, color="grey", lw=0.6, ls=":")
        a.set_xticks(pos, names)
        a.set(ylabel="completion − arrival − target (slots)",
              title="Fig. 9 — planned (plain) vs real (hatched)")
        a = ax[k, 2]
        for shift, key, hatch in ((-0.3, "chunk", None), (-0.1, "profile", "//"),
                                  (0.1, "shared", ".."), (0.3, "contention", "xx")):
            _boxes(a, [r.get(key, []) for r in table], shift, hatch, width=0.18)
        a.axhline(1, color="grey", lw=0.6, ls=":")
        a.set_yscale("log")
        a.set_xticks(pos, names)
        a.set(ylabel="real busy time / predicted, per job-slot",
              title="cost model: chunk time | profile own | all | contention")
    fig.suptitle(f"Testbed, for real — {s['jobs']} jobs, {s['horizon']} slots of "
                 f"{s['slot_s']:g} s, seed {s['seed']}. Bars: one run. Boxes: median and "
                 "quartiles over jobs (Fig. 9) or job-slots (cost model), whiskers: the furthest "
                 "points within 1.5 IQR, circles: beyond", fontsize=9)
    paths = save(fig, out_dir, "testbed-real")
    return paths + [write_markdown(out_dir, "testbed-real", markdown(data, tables, quick))]


def _stats(values) -> str:
    if not values:
        return "—"
    v = np.asarray(values)
    return (f"{np.median(v):.2f} ({np.percentile(v, 10):.2f} … {np.percentile(v, 90):.2f}); "
            f"{100 * np.mean(np.abs(v - 1)):.0f} %")


def _round_markdown(name: str, rnd: dict, table: list[dict]) -> list[str]:
    title = ("Round 1: planned with the profiled speed" if name == "profile" else
             f"Round 2: planned with the speed corrected by round 1 (chunk times ×"
             f"{rnd['slowdown']:g})")
    all_chunk = [x for r in table for x in r["chunk"]]
    all_prof = [x for r in table for x in r["profile"]]
    all_shared = [x for r in table for x in r["shared"]]
    all_contention = [x for r in table for x in r.get("contention", [])]
    all_online = [x for r in table for x in r.get("online", [])]
    return [f"## {title}", "",
            f"OASiS priced with U and L estimated on history instances (chosen L = "
            f"{rnd['calibration'].chosen:.2g}).", "",
            markdown_table(
                ["policy", "simulated utility", "real utility", "real / simulated", "admitted",
                 "completed (plan / real)", "finished later than planned",
                 "median compl.−target plan / real", "slots overrun (max s)", "restarts",
                 "mean final val. accuracy", "start-up s", "wall s",
                 "machine load during run: median (min … max) of slots; at end"],
                [[display(r["policy"]), f"{r['simulated']:.1f}", f"{r['real']:.1f}",
                  fmt(r["real"] / r["simulated"] if r["simulated"] else math.nan, 2),
                  r["admitted"], f"{r['completed_planned']} / {r['completed_real']}",
                  r["late_jobs"],
                  f"{fmt(box_stats(r['mt_planned'])['median'], 1)} / "
                  f"{fmt(box_stats(r['mt_real'])['median'], 1)}",
                  f"{r['overrun_slots']} ({r['max_overrun_s']:.2f})", r["restarts"],
                  fmt(r["accuracy"], 3), f"{r['startup_s']:.0f}", f"{r['wall_s']:.0f}",
                  f"{fmt(r['load']['median'], 1)} ({fmt(r['load']['min'], 1)} … "
                  f"{fmt(r['load']['max'], 1)}); {fmt(r['load']['end'], 1)}"]
                 for r in table]), "",
            "Cost model's error per executed (job, slot), real busy time / prediction: median "
            "(p10 … p90); mean |ratio − 1|. *Chunk-time model*: the plan's own, x_i S / M_i "
            "seconds per iteration whatever the counts. *Profile, own counts*: t(w, p) at the "
            "job's workers and PSs. *Profile, all counts*: t(W, P) at the slot's workers and PSs "
            "of all jobs, which share the machine's two cores. *Contention model*: "
            "t(w, p | W, P, C), the job's own counts on its critical path and the slot's totals "
            "sharing the C cores (`costmodel.profile`, fitted on the profile's runs); *refitted "
            "online*: the same model refitted before each slot on the slots that ran.", "",
            markdown_table(["policy", "job-slots", "chunk-time model (the plan's)",
                            "profile, own counts", "profile, all counts", "contention model",
                            "refitted online"],
                           [[display(r["policy"]), len(r["chunk"]), _stats(r["chunk"]),
                             _stats(r["profile"]), _stats(r["shared"]),
                             _stats(r.get("contention", [])), _stats(r.get("online", []))]
                            for r in table]
                           + [["all", len(all_chunk), _stats(all_chunk), _stats(all_prof),
                               _stats(all_shared), _stats(all_contention),
                               _stats(all_online)]]),
            ""]


def markdown(data: dict, tables: dict, quick: bool) -> str:
    s = data["settings"]
    inst = data["rounds"]["profile"]["instance"]
    quick_flag = " --quick" if quick else ""
    slowdown = data["rounds"]["corrected"]["slowdown"]
    lines = [f"# Testbed, for real (Figs. 8-9 executed){' — quick' if quick else ''}", "",
             "Every schedule below was **trained for real**: parameter-server jobs on Ray actors "
             "(workers compute gradients on their data chunks, PSs average and step their shard "
             "of the parameters), with the worker and PS counts per slot and server of the "
             "schedule, slots paced in wall-clock time (a slot whose work takes longer "
             "overruns; work is never cut). \"Simulated\" is the schedule's own utility (what "
             "the simulator and validator compute); \"real\" is recomputed from the real "
             "completion times: a job finishing t seconds after slot 1 began completes in slot "
             "ceil(t / S) of the wall-clock grid. \"Machine load\" is the 1-minute load average "
             "as each slot ended (median, min … max over the run's slots) and when the "
             "execution ended: the machine has 2 cores and other work on it slows the training "
             "down.", "",
             "```bash",
             f"nice -n 10 oasis-opt reproduce testbed-real{quick_flag}   # all of it: "
             f"{_measured_minutes(data):.0f} min measured here (results/ files are reused)",
             "# the same by hand:",
             f"oasis-opt profile --task digits-mlp --iterations {s['iterations']} "
             f"--repeats {s['repeats']} --out digits-mlp.json",
             f"oasis-opt generate --preset testbed-real --profile digits-mlp.json --jobs "
             f"{s['jobs']} --horizon {s['horizon']} --slot-s {s['slot_s']:g} --seed {s['seed']} "
             "--out inst.json          # --slowdown C: the corrected round",
             "oasis-opt solve inst.json --policy drf --out drf.json",
             f"oasis-opt execute inst.json drf.json --slot-s {s['slot_s']:g} --out "
             "drf-execution.json",
             "```", "",
             f"Instance: `testbed-real`, seed {s['seed']}: {inst.I} jobs on 2 worker + 1 PS "
             f"servers of 2 cores, {inst.horizon} slots of {s['slot_s']:g} s; tasks "
             f"{', '.join(s['tasks'])}; OASiS's U and L estimated on {len(s['history'])} "
             f"history instances (seeds {s['history'][0]}…{s['history'][-1]}).", "",
             "**Two rounds.** Round 1 plans chunk times from the speed profiles. Its "
             "executions give the cost model's error; their median real / predicted busy time "
             f"over all job-slots, {slowdown:g}, is the correction: round 2 plans the same jobs "
             f"with chunk times ×{slowdown:g} (`generate --slowdown {slowdown:g}`) and is "
             "executed again.", "",
             "## Speed profiles (Optimus model, bounded least squares)", "",
             markdown_table(
                 ["task", "samples", "t(1,1) ms", "t(4,2) ms", "θ1 const ms", "θ2 w/p ms",
                  "θ3 w ms", "θ4 p ms", "fit error RMS", "max"],
                 [[p.task["name"], len(p.samples), f"{1e3 * p.iteration_time(1, 1):.2f}",
                   f"{1e3 * p.iteration_time(4, 2):.2f}"]
                  + [f"{1e3 * p.theta[k]:.3f}" for k in ("const", "ps_load", "per_worker",
                                                          "per_ps")]
                  + [f"{100 * p.fit['rms_rel_error']:.1f} %",
                     f"{100 * p.fit['max_rel_error']:.1f} %"] for p in data["profiles"]]), ""]
    for name in ROUNDS:
        lines += _round_markdown(name, data["rounds"][name], tables[name])
    lines += _findings(data, tables)
    return "\n".join(lines)


def _measured_minutes(data: dict) -> float:
    """Minutes spent profiling and executing (start-up included), from the stored files, so a
    redraw from stored results reports the run that made them."""
    seconds = sum(p.meta.get("wall_s", 0.0) for p in data["profiles"])
    seconds += sum(r.doc["startup_s"] + r.doc["wall_s"] for rnd in data["rounds"].values()
                   for r in rnd["reports"].values())
    return seconds / 60


def _findings(data: dict, tables: dict) -> list[str]:
    """What the numbers say about the cost model, computed from them (no fixed verdicts)."""
    def pooled(name: str, key: str) -> np.ndarray:
        return np.asarray([x for r in tables[name] for x in r.get(key, [])])

    def summary(v: np.ndarray) -> str:
        return (f"median {np.median(v):.2f}, mean error {100 * np.mean(np.abs(v - 1)):.0f} %"
                if len(v) else "—")

    lines = ["## What it shows", ""]
    for name in ROUNDS:
        t = tables[name]
        ratio = [r["real"] / r["simulated"] for r in t if r["simulated"]]
        over = sum(r["overrun_slots"] for r in t)
        slots = sum(len(data["rounds"][name]["reports"][r["policy"]].slots) for r in t)
        lines.append(
            f"- {'Round 1' if name == 'profile' else 'Round 2'}: real / simulated utility "
            + (f"{min(ratio):.2f} … {max(ratio):.2f}" if ratio else "—")
            + f" over the policies; {over} of {slots} slots overran. Real busy time / "
            f"prediction per job-slot: chunk-time model {summary(pooled(name, 'chunk'))}; "
            f"profile at the job's own counts {summary(pooled(name, 'profile'))}; at the "
            f"slot's total counts {summary(pooled(name, 'shared'))}; contention model "
            f"{summary(pooled(name, 'contention'))}.")
    lines += ["- A job loses utility only when overruns push its end into a later slot of the "
              "wall-clock grid; the overruns come from the machine's load (every process on its "
              "two cores, not only this run's), which neither model sees.", ""]
    return lines


FIGURE = Figure("testbed-real", "Testbed, for real (Figs. 8-9 executed on Ray)", None, render,
                compute=compute)
