"""The testbed for real, drawn: simulated vs real completion per job (quiet and busy), the JCT
error per policy and loop, and the page with every run's numbers and the fidelity targets
checked (✅/❌).

The profiling and the runs are the study ``oasis_opt.experiments.testbed_real``.
"""
from __future__ import annotations

from pathlib import Path
from statistics import median

import numpy as np

from ..testbed_real import (BUSY, LOADS, MODES, POLICIES, TARGETS, compute, describe_runs, fmt,
                            group, target_checks)
from .common import COLOURS, Figure, display, markdown_table, new_figure, save, write_markdown

COST_MODELS = (("chunk-time", "plan's chunk times"), ("profile", "profile, own counts"),
               ("profile-shared", "profile, slot's counts"), ("contention", "contention model"),
               ("contention-online", "contention, refitted online"))
MARKERS = dict(zip(POLICIES, "osD^v"))


def spread(values) -> str:
    """Median [min, max] of the repetitions (the value alone for one)."""
    vals = [v for v in values if v is not None]
    if not vals:
        return "–"
    if len(vals) == 1:
        return f"{vals[0]:.2f}"
    return f"{median(vals):.2f} [{min(vals):.2f}, {max(vals):.2f}]"


def render(data: dict, out_dir: Path, reference_dir=None, quick: bool = False) -> list[Path]:
    rows = data["rows"]
    loads = [x for x in LOADS if any(r["load_kind"] == x for r in rows)]
    fig, ax = new_figure(len(loads) + 1, 1, width=4.8, height=4.4)
    for a, load in zip(ax[0], loads):
        top = 1.0
        for mode in MODES:
            for policy in POLICIES:
                rs = group(rows, load, mode, policy)
                pts = [(j["sim_s"], j["real_s"]) for r in rs for j in r["jobs"]
                       if j["sim_s"] is not None and j["real_s"] is not None]
                if not pts:
                    continue
                x, y = zip(*pts)
                top = max(top, *x, *y)
                a.scatter(x, y, marker=MARKERS[policy], s=28, alpha=0.7,
                          facecolors=COLOURS[policy] if mode == "closed" else "none",
                          edgecolors=COLOURS[policy],
                          label=f"{display(policy)}, {mode} loop")
        a.plot([0, top * 1.05], [0, top * 1.05], "k--", lw=1, label="real = simulated")
        lo = min(r["load"]["min"] for r in rows if r["load_kind"] == load)
        hi = max(r["load"]["max"] for r in rows if r["load_kind"] == load)
        a.set(xlabel="simulated completion (s since slot 1: slot t ends at t S)",
              ylabel="real completion (s since slot 1)",
              title=f"{load}{f' (+{BUSY} busy processes)' if load == 'busy' else ''}\n"
                    f"1-minute load during the runs {lo:.1f}-{hi:.1f}")
        a.legend(fontsize=6, ncol=2)
    a = ax[0, -1]
    groups = [(load, mode) for load in loads for mode in MODES]
    width = 0.8 / len(groups)
    pos = np.arange(len(POLICIES))
    for k, (load, mode) in enumerate(groups):
        med, lo, hi = [], [], []
        for policy in POLICIES:
            errs = [100 * r["median_abs_slot_error"] for r in group(rows, load, mode, policy)
                    if r["median_abs_slot_error"] is not None]
            med.append(median(errs) if errs else np.nan)
            lo.append(min(errs) if errs else np.nan)
            hi.append(max(errs) if errs else np.nan)
        m = np.asarray(med)
        a.bar(pos - 0.4 + (k + 0.5) * width, m, width,
              yerr=np.nan_to_num(np.vstack([m - np.asarray(lo), np.asarray(hi) - m])),
              color=["#9ecae1", "#3182bd", "#fdae6b", "#e6550d"][k % 4], capsize=2,
              label=f"{load}, {mode} loop")
    for (load, mode), (_, err_max) in TARGETS.items():
        if load in loads and mode == "closed":
            a.axhline(100 * err_max, ls=":", lw=1, color="k" if load == "quiet" else "tab:red",
                      label=f"target, {load} ({100 * err_max:.0f} %)")
    a.set_xticks(pos, [display(p) for p in POLICIES])
    a.set(ylabel="median |JCT error| per run, in slots (%)",
          title="JCT error per policy, in slots\n(bar: median of repetitions; whisker: range)")
    a.legend(fontsize=7)
    s = data["settings"]
    fig.suptitle(f"Simulated vs real, testbed-real seed {s['seed']}: {s['jobs']} jobs, "
                 f"{s['horizon']} slots of {s['slot_s']:g} s, {s['reps']} repetition(s), "
                 f"{data['cores']} cores. Hollow: open loop; filled: closed loop", fontsize=9)
    paths = save(fig, out_dir, "testbed-real")
    return paths + [write_markdown(out_dir, "testbed-real", markdown(data, quick))]


def _ratio_stats(values) -> str:
    if not values:
        return "–"
    v = np.asarray(values)
    return f"{100 * np.mean(np.abs(v - 1)):.0f} % ({np.median(v):.2f})"


def profile_table(profiles, cores: int) -> str:
    """Per profiled task: the Optimus fit t(w, p) and the contention fit t(w, p | W, P, C)."""
    out = []
    for p in profiles:
        c = p.contention_model(cores)
        out.append([p.task["name"], len(p.samples), f"{1e3 * p.iteration_time(1, 1):.2f}",
                    f"{1e3 * p.iteration_time(4, 2):.2f}",
                    f"{100 * p.fit['rms_rel_error']:.1f} %",
                    f"{100 * c['fit']['rms_rel_error']:.1f} %",
                    fmt(p.meta.get("wall_s"), ".0f")])
    return markdown_table(["task", "samples", "t(1,1) ms", "t(4,2) ms",
                           "Optimus fit error (RMS)", "contention fit error (RMS)",
                           "profiling s"], out)


def run_table(rows: list[dict]) -> str:
    out = []
    for load in LOADS:
        for mode in MODES:
            for policy in POLICIES:
                rs = group(rows, load, mode, policy)
                if not rs:
                    continue
                lo = min(r["load"]["min"] for r in rs)
                me = median(r["load"]["median"] for r in rs)
                hi = max(r["load"]["max"] for r in rs)
                out.append([load, mode, display(policy), f"{lo:.1f}-{me:.1f}-{hi:.1f}",
                            spread([r["utility_ratio"] for r in rs]),
                            spread([r["median_abs_slot_error"] for r in rs]),
                            spread([r["median_abs_jct_error"] for r in rs]),
                            "/".join(str(r["jobs_sim_done"]) for r in rs) + " / "
                            + "/".join(str(r["jobs_real_done"]) for r in rs),
                            "/".join(str(r["overruns"]) for r in rs) + f" of {rs[0]['slots']}",
                            "/".join(fmt(r["replans"], "d") for r in rs),
                            spread([r["startup_s"] for r in rs]),
                            spread([r["checkpoint_s"] + r["restart_s"] for r in rs])])
    return markdown_table(["load", "loop", "policy", "1-min load min-median-max",
                           "real / sim utility", "median abs JCT error, slots", "in seconds",
                           "jobs done sim / real", "overrun slots", "re-plans", "start-up s",
                           "checkpoint + restart s"], out)


def cost_table(rows: list[dict]) -> str:
    out = []
    for load in LOADS:
        for mode in MODES:
            rs = [r for r in rows if (r["load_kind"], r["mode"]) == (load, mode)]
            if not rs:
                continue
            pooled = {m: [x for r in rs for x in r["costmodel"].get(m, [])]
                      for m, _ in COST_MODELS}
            out.append([load, mode, len(pooled["chunk-time"])]
                       + [_ratio_stats(pooled[m]) for m, _ in COST_MODELS])
    return markdown_table(["load", "loop", "job-slots"] + [name for _, name in COST_MODELS],
                          out)


def overheads(rows: list[dict], S: float) -> dict:
    """Checkpoint + restart seconds per executed job-slot as a share of the slot (the issue's
    "under 10 % of a slot"), and start-up seconds (before slot 1) of the runs."""
    shares = [(j_over / max(n, 1)) / S for r in rows
              for j_over, n in [(r["checkpoint_s"] + r["restart_s"],
                                 len(r["costmodel"].get("chunk-time", [])))]]
    return {"share_max": max(shares, default=0.0), "share_median": median(shares or [0.0]),
            "startup_median": median([r["startup_s"] for r in rows] or [0.0]),
            "startup_max": max((r["startup_s"] for r in rows), default=0.0)}


def speed_table(plans: dict) -> str:
    """Per load and repetition: the calibrated slowdown, the ratios it came from, the load
    while measuring, and what the plan made with it promises (utility in the simulation)."""
    lines = ["| load | rep | slowdown planned with | busy / predicted: median [min, max] | "
             "per calibration run: median (job-slots) | job-slots | 1-min load before / after | "
             "chosen L | simulated utility per policy |",
             "|---|---|---|---|---|---|---|---|---|"]
    for (load, rep), p in plans.items():
        sp = p["speed"]
        r = sorted(sp.ratios)
        sims = ", ".join(f"{display(k)} {p['sim'][k]:.1f}" for k in POLICIES if k in p["sim"])
        per_run = ", ".join(f"{display(run['policy'])} {median(run['ratios']):.2f} "
                            f"({run['job_slots']})" for run in sp.meta.get("runs", [])
                            if run["ratios"]) or "–"
        lines.append(f"| {load} | {rep} | {sp.slowdown:.2f} | "
                     f"{median(r):.2f} [{r[0]:.2f}, {r[-1]:.2f}] | {per_run} | {len(r)} | "
                     f"{sp.load[0]:.1f} / {sp.load[1]:.1f} | "
                     f"{p['pricing'].calibration.chosen:.2g} | {sims or '–'} |")
    return "\n".join(lines) + "\n"


def measured_minutes(data: dict) -> float:
    """Minutes spent profiling and running, from the stored profile and runs (so a redraw from
    stored runs reports the study that made them)."""
    seconds = sum(p.meta.get("wall_s", 0.0) for p in data["profiles"])
    return (seconds + sum(r["wall_s"] for r in data["rows"])) / 60


def markdown(data: dict, quick: bool) -> str:
    s, rows = data["settings"], data["rows"]
    inst = next(iter(data["plans"].values()))["instance"]
    q = " --quick" if quick else ""
    checks = target_checks(rows)
    lines = [f"# Testbed, for real: the simulator's fidelity{' — quick' if quick else ''}", "",
             "Every run below was **trained for real**: parameter-server jobs on Ray actors "
             "(workers compute gradients on their data chunks, PSs average and step their shard "
             "of the parameters), with the worker and PS counts per slot and server that the "
             "policy decided, slots paced in wall-clock time. *Open loop*: the policy's "
             "schedule executed as it is (every planned mini-batch, however late: slots "
             "overrun). *Closed loop* (the default of `execute` and `serve`): the policy re-run "
             "slot by slot on the measured progress, each slot time-boxed, a job that fell "
             "behind re-planned. *Simulated* is the policy's open-loop schedule on the progress "
             "model (what the simulator and validator compute); *real* is recomputed from the "
             "real completion times: a job finishing t seconds after slot 1 began completes in "
             "slot ceil(t / S) of the wall-clock grid. *Load*: the machine's 1-minute load "
             "average sampled every 0.5 s during each run (min-median-max). *quiet*: the study "
             "started nothing beside the runs (the machine is shared: its measured load is "
             f"what the rows state); *busy*: {BUSY} busy-looping processes started before and "
             "stopped after the busy runs by the study itself.", "",
             "```bash",
             f"oasis-opt reproduce testbed-real{q}   # all of it: "
             f"{measured_minutes(data):.0f} min measured here (stored runs are reused)",
             f"python benchmarks/bench_fidelity.py{q}   # the same study, the same page",
             "# one run by hand:",
             f"oasis-opt profile --task digits-mlp --iterations {s['iterations']} "
             f"--repeats {s['repeats']} --out digits-mlp.json",
             f"oasis-opt generate --preset testbed-real --profile digits-mlp.json --jobs "
             f"{s['jobs']} --horizon {s['horizon']} --slot-s {s['slot_s']:g} --seed {s['seed']} "
             "--out inst.json",
             "oasis-opt solve inst.json --policy drf --out drf.json",
             f"oasis-opt execute inst.json drf.json --slot-s {s['slot_s']:g} --out "
             "drf-execution.json   # closed loop; --open-loop: the schedule as it is",
             "```", "",
             f"Instance: `testbed-real`, seed {s['seed']}: {inst.I} jobs ({', '.join(s['tasks'])})"
             f" on 2 worker + 1 PS servers, {inst.horizon} slots of {s['slot_s']:g} s, chunk "
             "times from the contention model at a full slot (the preset's default) times the "
             "slowdown calibrated for the load before each repetition (below); OASiS "
             f"priced by `estimate_pricing`'s default rule on {len(s['history'])} history "
             f"instances (seeds {s['history'][0]}…{s['history'][-1]}, planned with the same "
             f"slowdown). {s['reps']} repetition(s) per row: median "
             "[min, max] over them, and counts per repetition separated by /.", "",
             "## Plans at the machine's speed", "",
             "Before each repetition's runs (the busy processes already started: the machine "
             "is shared, its speed drifts over the minutes a load's runs take), short real runs "
             f"(`oasis_opt.runtime.calibrate`: {describe_runs()}, open loop: two jobs of 2 "
             "workers and 1 PS side by side, then one job of 4 workers and 2 PSs alone, the "
             "packings the policies give the preset's jobs) measure the "
             "real busy time / the chunk-time model's prediction per job-slot; the plan's "
             f"chunk times are multiplied by their {s['quantile']:g} quantile, so a slot is "
             "given the time its work takes now (work done early waits for the next slot; "
             "work done late moves the job's completion).", "",
             speed_table(data["plans"]),
             "JCT error per job: real JCT / simulated JCT − 1, the JCT from the start of the "
             "arrival slot. *In slots*: the real completion's slot of the wall-clock grid "
             "against the simulated completion slot (the simulator's own unit, the one the "
             "utility is paid on: the targets are checked on it). *In seconds*: the real "
             "completion time against the simulated slot's end t S (a job that finishes early "
             "in its last slot counts as an error there).", "",
             "## Speed profile", "", profile_table(data["profiles"], data["cores"]),
             "## Every run", "", run_table(rows),
             "## Cost models per executed job-slot", "",
             "Mean |real busy time / prediction − 1| (median ratio in brackets), pooled over "
             "the runs. *Plan's chunk times*: what the schedule assumed. *Profile, own "
             "counts*: the Optimus model t(w, p) at the job's own workers and PSs. *Slot's "
             "counts*: t(W, P) at the slot's totals. *Contention model*: t(w, p | W, P, C), the "
             "job's own counts on its critical path and the slot's totals sharing C cores "
             "(`oasis_opt.costmodel.profile`). *Refitted online*: the same model refitted "
             "before each slot on the slots that ran.", "", cost_table(rows)]
    ov = overheads(rows, s["slot_s"])
    lines += [f"Overheads: checkpoint + restart per executed job-slot {100 * ov['share_median']:.1f} "
              f"% of a slot (median over runs; at most {100 * ov['share_max']:.1f} %); start-up "
              f"before slot 1 (Ray, containers, compilation) median {ov['startup_median']:.1f} s "
              f"(at most {ov['startup_max']:.1f} s: one Ray and one warm container pool serve "
              "every run, so only the first execution pays for them: the first "
              f"calibration run, {next(iter(data['plans'].values()))['speed'].wall_s:.0f} s "
              "with them).", "",
              "## Targets, checked on the runs above", ""]
    missed = []
    for c in checks:
        loads = f"load {c['load_min']:.1f}-{c['load_max']:.1f}"
        lines.append(f"- {'✅' if c['ratio_ok'] else '❌'} {c['load']}, {c['mode']} loop, "
                     f"{display(c['policy'])}: real / sim utility {fmt(c['ratio'])} (target >= "
                     f"{c['ratio_min']:g}) at {loads}")
        lines.append(f"- {'✅' if c['error_ok'] else '❌'} {c['load']}, {c['mode']} loop, "
                     f"{display(c['policy'])}: median |JCT error| in slots "
                     f"{fmt(None if c['error'] is None else 100 * c['error'], '.1f')} % "
                     f"(target <= {100 * c['error_max']:.0f} %)")
        why = (f"{loads}, overrun slots {'/'.join(str(x) for x in c['overruns'])}, re-plans "
               f"{'/'.join(fmt(x, 'd') for x in c['replans'])}")
        if not c["ratio_ok"]:
            missed.append(f"- {c['load']}, {c['mode']} loop, {display(c['policy'])}: utility "
                          + (f"ratio {c['ratio']:.2f}, {c['ratio_min'] - c['ratio']:.2f} below "
                             f"{c['ratio_min']:g}" if c["ratio"] is not None else
                             "ratio not measured (nothing simulated or nothing completed)")
                          + f" ({why})")
        if not c["error_ok"]:
            missed.append(f"- {c['load']}, {c['mode']} loop, {display(c['policy'])}: median "
                          "|JCT error| in slots "
                          + (f"{100 * c['error']:.1f} %, {100 * (c['error'] - c['error_max']):.1f}"
                             f" points above {100 * c['error_max']:.0f} %"
                             if c["error"] is not None else "not measured (no job completed "
                             "in both)") + f" ({why})")
    shown = [r for r in rows if (r["load_kind"], r["mode"]) == ("busy", "open")]
    if shown:
        lines += ["", "The busy open loop beside them (no target): real / sim utility "
                  + ", ".join(f"{display(p)} {spread([r['utility_ratio'] for r in group(rows, 'busy', 'open', p)])}"
                              for p in POLICIES if group(rows, "busy", "open", p))
                  + "; median |JCT error| in slots "
                  + ", ".join(f"{display(p)} {spread([r['median_abs_slot_error'] for r in group(rows, 'busy', 'open', p)])}"
                              for p in POLICIES if group(rows, "busy", "open", p)) + "."]
    lines += ["", "## Missed targets", ""] + (missed or ["- none"])
    lines += ["", "![simulated vs real completion per job, and the JCT error per policy]"
              "(testbed-real.png)", ""]
    return "\n".join(lines)


FIGURE = Figure("testbed-real", "Testbed, for real: the simulator's fidelity on Ray", None,
                render, compute=compute)
