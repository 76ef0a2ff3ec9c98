"""Figs. 8-9 for real: the testbed scheduled by OASiS, DRF, FIFO and Dorm, each schedule trained.

``reproduce testbed-real`` (not part of ``all``: it trains for minutes on this machine):
1. profiles every task of the workload (``runtime.profile``: real PS iterations at (w, p) in
   {1, 2, 4} x {1, 2}, the Optimus speed model fitted);
2. generates the ``testbed-real`` instance with those profiles (chunk times from measured speed);
3. prices OASiS with U and L estimated on history instances of the same workload (other seeds),
   and solves the instance with OASiS, DRF, FIFO and Dorm (every schedule validated);
4. executes each schedule for real (``runtime.executor``: PS actors and worker actors on a local
   Ray whose node declares the instance's servers as resources, slots of a few seconds);
5. repeats 2-4 with chunk times corrected by round 1's median real / predicted busy time (the
   cost model's error drives the correction: ``testbed_real(slowdown=...)``);
6. draws, per round and policy, the simulated utility (the schedule's) beside the real one (from
   the real completion times), the completion minus target planned and real, and the cost
   models' error.

Everything measured is stored under ``results/testbed-real[-quick]/`` (profiles, instance,
schedules, execution reports); a rerun reuses what is there (a report is reused only for the same
instance and schedule).
"""
from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from .common import (COLOURS, Figure, box_stats, display, fmt, markdown_table, new_figure, save,
                     write_markdown)

POLICIES = ("oasis", "drf", "fifo", "dorm")
TASKS = ("digits-mlp", "breast-cancer-mlp", "wine-mlp")
FULL = {"seed": 0, "jobs": 8, "horizon": 10, "slot_s": 4.0, "tasks": TASKS,
        "iterations": 40, "repeats": 3, "history": tuple(range(1000, 1005))}
QUICK = {"seed": 0, "jobs": 4, "horizon": 6, "slot_s": 3.0, "tasks": ("digits-mlp",),
         "iterations": 20, "repeats": 2, "history": (1000, 1001)}


def settings(quick: bool) -> dict:
    return QUICK if quick else FULL


def _folder(results: Path, quick: bool) -> Path:
    return Path(results) / ("testbed-real-quick" if quick else "testbed-real")


def _say(progress: bool, text: str) -> None:
    if progress:
        import sys

        print(f"testbed-real: {text}", file=sys.stderr, flush=True)


ROUNDS = ("profile", "corrected")


def compute(quick: bool = False, results: Path = Path("results"), workers=None, address=None,
            progress: bool = True) -> dict:
    """Profile, then two rounds of generate, solve, execute (module docstring): the first plans
    with the profiles' speed, the second with it corrected by the first round's median real /
    predicted ratio. Returns what ``render`` draws."""
    from ...costmodel.profile import load_profile, save_profile
    from ...runtime.profile import DEFAULT_CONFIGS, profile_task

    t0 = time.perf_counter()
    s = settings(quick)
    folder = _folder(results, quick)
    folder.mkdir(parents=True, exist_ok=True)
    session = _Session(address)
    rounds = {}
    try:
        profiles = []
        for task in s["tasks"]:
            path = folder / f"profile-{task}.json"
            if not path.is_file():
                _say(progress, f"profiling {task} ...")
                prof = profile_task({"name": task, "config": DEFAULT_CONFIGS[task]},
                                    iterations=s["iterations"], repeats=s["repeats"],
                                    address=address, pool=session.pool())
                save_profile(prof, path)
            profiles.append(load_profile(path))
        rounds["profile"] = _round(folder, "", s, profiles, 1.0, session, progress)
        ratios = [x for rep in rounds["profile"]["reports"].values()
                  for x in _ratios(rep, "chunk-time")]
        slowdown = round(float(np.median(ratios)), 2)
        rounds["corrected"] = _round(folder, "corrected-", s, profiles, slowdown, session,
                                     progress)
    finally:
        session.close()
    return {"settings": s, "profiles": profiles, "rounds": rounds,
            "wall_s": time.perf_counter() - t0, "folder": folder}


class _Session:
    """Ray and the shared containers, started when something first has to run (a rerun that
    finds every result stored redraws without Ray)."""

    def __init__(self, address: str | None):
        self.address = address
        self._pool = None
        self._owned = False

    def pool(self):
        from ...runtime.executor import ContainerPool, start_ray
        from ...runtime.profile import PS_SERVER, WORKER_SERVER
        from ...workloads.testbed_real import testbed_real_servers

        if self._pool is None:
            w, p = testbed_real_servers()
            self._owned = start_ray(self.address,
                                    [WORKER_SERVER, PS_SERVER] + [x.id for x in w + p])
            self._pool = ContainerPool()
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            import ray

            self._pool.close()
            if self._owned:
                ray.shutdown()
        self._pool = None


def plan(s: dict, profiles, slowdown: float) -> tuple:
    """The round's instance (generated with ``slowdown``), OASiS's pricing (estimated on the
    history seeds of ``s``) and every policy's validated schedule: ``(instance, pricing,
    {policy: schedule})``. Needs no Ray (the executor runs afterwards, in ``_round``)."""
    from ... import solve, validate
    from ...online.estimate import estimate_pricing
    from ...workloads.testbed_real import testbed_real

    kw = dict(profiles=profiles, jobs=s["jobs"], horizon=s["horizon"], slot_s=s["slot_s"],
              slowdown=slowdown)
    inst = testbed_real(s["seed"], **kw)
    pricing = estimate_pricing([testbed_real(h, **kw) for h in s["history"]])
    schedules = {}
    for policy in POLICIES:
        sched = solve(inst, policy, **({"pricing": pricing} if policy == "oasis" else {}))
        check = validate(inst, sched)
        if not check.ok:
            raise RuntimeError(f"testbed-real: the {policy} schedule is invalid: {check}")
        schedules[policy] = sched
    return inst, pricing, schedules


def _round(folder: Path, prefix: str, s: dict, profiles, slowdown: float, session: _Session,
           progress: bool) -> dict:
    """Plan (``plan``), then execute each policy's schedule (a stored report of the same
    instance and schedule is reused)."""
    from ...model.io import save_instance, save_result
    from ...runtime.executor import execute
    from ...runtime.report import save_report

    inst, pricing, schedules = plan(s, profiles, slowdown)
    save_instance(inst, folder / f"{prefix}instance.json")
    reports = {}
    for policy, sched in schedules.items():
        result = folder / f"{prefix}result-{policy}.json"
        report = folder / f"{prefix}execution-{policy}.json"
        same = _stored_schedule_is(inst, result, sched)
        save_result(inst, sched, result)
        stored = _stored_report(inst, report) if same else None
        if stored is not None:
            reports[policy] = stored
            continue
        _say(progress, f"executing the {policy} schedule (slowdown {slowdown:g}) for real ...")
        reports[policy] = execute(inst, sched, slot_seconds=s["slot_s"],
                                  address=session.address, pool=session.pool())
        save_report(reports[policy], report)
        _say(progress, reports[policy].summary())
    return {"instance": inst, "schedules": schedules, "reports": reports, "slowdown": slowdown,
            "calibration": pricing.calibration}


def _stored_schedule_is(inst, path: Path, sched) -> bool:
    """Whether ``path`` holds ``sched``'s allocations for ``inst`` (then its report is reused)."""
    from ...model.io import FormatError, load_result

    try:
        stored = load_result(inst, path)
    except (FormatError, OSError):
        return False
    return list(stored.allocations.rows()) == list(sched.allocations.rows())


def _stored_report(inst, path: Path):
    """The report at ``path`` when it is one of this instance (in this format), else None."""
    from ...model.io import FormatError
    from ...runtime.report import load_report

    try:
        report = load_report(path)
    except (FormatError, OSError):
        return None
    return report if report.doc["instance_sha256"] == inst.fingerprint else None


# ---- drawing ------------------------------------------------------------------------------------
def _minus_target(inst, jobs, key: str) -> list[float]:
    """(completion - arrival) - gamma3 of completed sigmoid jobs: planned or real (wall slot)."""
    out = []
    for job, j in zip(inst.jobs, jobs):
        c = j["planned"]["completion"] if key == "planned" else j["real"]["wall_slot"]
        if c is not None and job.utility.kind == "sigmoid":
            out.append(float(c - job.arrival - job.utility.target))
    return out


def _ratios(report, model: str) -> list[float]:
    """busy / predicted of every executed job-slot, for a cost model of the report."""
    from ...runtime.report import COSTMODELS

    key = COSTMODELS[model]
    return [s["busy_s"] / s[key] for j in report.jobs for s in j["slots"]
            if s["iterations"] and s[key]]


def rows(rnd: dict) -> list[dict]:
    """One dict of numbers per policy of one round (the tables and the figure use them)."""
    inst = rnd["instance"]
    out = []
    for policy in POLICIES:
        rep, sched = rnd["reports"][policy], rnd["schedules"][policy]
        doc = rep.doc
        done_real = [j for j in rep.jobs if j["real"]["completion_slot"] is not None]
        over = [x["overrun_s"] for x in rep.slots]
        acc = [j["real"]["val_accuracy"] for j in done_real]
        out.append({
            "policy": policy, "simulated": sched.total_utility, "real": rep.real_utility,
            "admitted": int(sum(sched.admitted)), "completed_planned": int(sched.completed.sum()),
            "completed_real": len(done_real),
            "late_jobs": sum(j["real"]["wall_slot"] > j["planned"]["completion"]
                             for j in done_real),
            "mt_planned": _minus_target(inst, rep.jobs, "planned"),
            "mt_real": _minus_target(inst, rep.jobs, "real"),
            "overrun_slots": sum(o > 0 for o in over), "max_overrun_s": max(over, default=0.0),
            "restarts": len(rep.restarts()), "accuracy": float(np.mean(acc)) if acc else math.nan,
            "startup_s": doc["startup_s"], "wall_s": doc["wall_s"],
            "load": (doc["meta"].get("loadavg") or [math.nan])[0],
            "chunk": _ratios(rep, "chunk-time"), "profile": _ratios(rep, "profile"),
            "shared": _ratios(rep, "profile-shared")})
    return out


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
        for shift, key, hatch in ((-0.26, "chunk", None), (0.0, "profile", "//"),
                                  (0.26, "shared", "..")):
            _boxes(a, [r[key] for r in table], shift, hatch, width=0.22)
        a.axhline(1, color="grey", lw=0.6, ls=":")
        a.set_yscale("log")
        a.set_xticks(pos, names)
        a.set(ylabel="real busy time / predicted, per job-slot",
              title="cost model: chunk time | profile own | all")
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
    return [f"## {title}", "",
            f"OASiS priced with U and L estimated on history instances (chosen L = "
            f"{rnd['calibration'].chosen:.2g}).", "",
            markdown_table(
                ["policy", "simulated utility", "real utility", "real / simulated", "admitted",
                 "completed (plan / real)", "finished later than planned",
                 "median compl.−target plan / real", "slots overrun (max s)", "restarts",
                 "mean final val. accuracy", "start-up s", "wall s", "machine load at end"],
                [[display(r["policy"]), f"{r['simulated']:.1f}", f"{r['real']:.1f}",
                  fmt(r["real"] / r["simulated"] if r["simulated"] else math.nan, 2),
                  r["admitted"], f"{r['completed_planned']} / {r['completed_real']}",
                  r["late_jobs"],
                  f"{fmt(box_stats(r['mt_planned'])['median'], 1)} / "
                  f"{fmt(box_stats(r['mt_real'])['median'], 1)}",
                  f"{r['overrun_slots']} ({r['max_overrun_s']:.2f})", r["restarts"],
                  fmt(r["accuracy"], 3), f"{r['startup_s']:.0f}", f"{r['wall_s']:.0f}",
                  fmt(r["load"], 1)]
                 for r in table]), "",
            "Cost model's error per executed (job, slot), real busy time / prediction: median "
            "(p10 … p90); mean |ratio − 1|. *Chunk-time model*: the plan's own, x_i S / M_i "
            "seconds per iteration whatever the counts. *Profile, own counts*: t(w, p) at the "
            "job's workers and PSs. *Profile, all counts*: t(W, P) at the slot's workers and PSs "
            "of all jobs, which share the machine's two cores.", "",
            markdown_table(["policy", "job-slots", "chunk-time model (the plan's)",
                            "profile, own counts", "profile, all counts"],
                           [[display(r["policy"]), len(r["chunk"]), _stats(r["chunk"]),
                             _stats(r["profile"]), _stats(r["shared"])] for r in table]
                           + [["all", len(all_chunk), _stats(all_chunk), _stats(all_prof),
                               _stats(all_shared)]]),
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
             "when the execution ended: the machine has 2 cores and other work on it slows the "
             "training down.", "",
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
        return np.asarray([x for r in tables[name] for x in r[key]])

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
            f"slot's total counts {summary(pooled(name, 'shared'))}.")
    lines += ["- A job loses utility only when overruns push its end into a later slot of the "
              "wall-clock grid; the overruns come from the machine's load (every process on its "
              "two cores, not only this run's), which neither model sees.", ""]
    return lines


FIGURE = Figure("testbed-real", "Testbed, for real (Figs. 8-9 executed on Ray)", None, render,
                compute=compute)
