"""The testbed for real: the simulator's fidelity, measured by training its schedules on Ray.

``reproduce testbed-real`` (not part of ``all``: it trains for about half an hour on this
machine; ``benchmarks/bench_fidelity.py`` runs the same study):

1. profiles the workload's task (``runtime.profile``: real PS iterations at (w, p) in
   {1, 2, 4} x {1, 2}; the Optimus model and the contention model fitted on them);
2. for each load (*quiet*: nothing started beside the runs; *busy*: ``BUSY`` busy-looping
   processes started before and stopped after, by their pids) and, within it, before each
   repetition (the machine is shared: its speed drifts over the minutes a load's runs take),
   calibrates the plan's speed (``runtime.calibrate``: short real runs under that load; the
   ``quantile`` of their busy / predicted ratios is the slowdown), generates the
   ``testbed-real`` instance with the profile (chunk times from the contention model at a full
   slot, the preset's default, times that slowdown) and prices OASiS with
   ``estimate_pricing``'s default rule on history instances of the same workload (other seeds,
   the same slowdown);
3. for each load, each repetition, each mode (*closed* loop first, nearest the calibration:
   the policy re-run slot by slot on the measured progress, ``runtime.closed_loop``; then *open*
   loop: the policy's schedule executed as it is, ``runtime.executor.execute``) and each
   policy (OASiS, DRF, FIFO, Dorm, greedy), trains the run for real while sampling the machine's
   1-minute load every half second;
4. reports per job the simulated completion (slot t, seconds t S) beside the real one (the wall
   clock's slot and seconds), the JCT error, real / simulated utility, slot overruns, start-up
   and checkpoint time, and per job-slot the cost models' error.

One Ray and one warm container pool serve every run. Every run is stored under
``results/testbed-real[-quick]/`` (the profile, each load and repetition's calibration and
instance, one ``run-*.json`` per run with its execution report ``execution-*.json`` and the
schedule it ran ``result-*.json``); a rerun reuses a stored run of the same instance, so a
killed study resumes and a finished one redraws without Ray. Drawn by
``oasis_opt.experiments.figures.testbed_real``.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from statistics import median

from ..runtime.calibrate import QUANTILE, describe_runs

POLICIES = ("oasis", "drf", "fifo", "dorm", "greedy")
MODES = ("open", "closed")
LOADS = ("quiet", "busy")
BUSY = 2  # busy-looping processes beside the busy runs (the "two busy processes")
FULL = {"seed": 1, "jobs": 3, "horizon": 8, "slot_s": 2.0, "tasks": ("digits-mlp",),
        "iterations": 10, "repeats": 1, "history": tuple(range(1000, 1005)), "reps": 3,
        "loads": LOADS, "quantile": QUANTILE}
QUICK = {"seed": 0, "jobs": 2, "horizon": 4, "slot_s": 1.0, "tasks": ("digits-mlp",),
         "iterations": 5, "repeats": 1, "history": (1000, 1001), "reps": 1,
         "loads": ("quiet",), "quantile": QUANTILE}
# the targets of the fidelity study (issue 30, part 3): (load, mode) -> (lowest real / simulated
# utility, highest median |JCT error| counted in slots); the busy open loop is shown, not checked
TARGETS = {("quiet", "closed"): (0.95, 0.10), ("quiet", "open"): (0.95, 0.10),
           ("busy", "closed"): (0.90, 0.15)}


def settings(quick: bool) -> dict:
    return QUICK if quick else FULL


def _folder(results: Path, quick: bool) -> Path:
    return Path(results) / ("testbed-real-quick" if quick else "testbed-real")


def _say(progress: bool, text: str) -> None:
    if progress:
        print(f"testbed-real: {text}", file=sys.stderr, flush=True)


class LoadSampler:
    """The machine's 1-minute load average every ``every`` seconds, in a thread, while inside
    the ``with`` block (``samples``: at least one, taken on entry)."""

    def __init__(self, every: float = 0.5):
        self.every, self.samples = every, [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> "LoadSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict:
        return {"min": min(self.samples), "median": median(self.samples),
                "max": max(self.samples), "samples": len(self.samples)}


def start_busy(n: int) -> list[subprocess.Popen]:
    """``n`` busy-looping Python processes (the busy load), stopped by ``stop_busy``."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def stop_busy(procs: list[subprocess.Popen]) -> None:
    for p in procs:  # by their pids: only the processes this study started
        p.kill()
        p.wait()


def plan(s: dict, profiles, slowdown: float = 1.0) -> tuple:
    """The instance of settings ``s`` (generated with ``profiles``, chunk times multiplied by
    ``slowdown``: ``runtime.calibrate``), OASiS's pricing (the default rule of
    ``estimate_pricing`` on the history seeds of ``s``, planned with the same slowdown) and
    every policy's validated open-loop schedule: ``(instance, pricing, {policy: schedule})``.
    Needs no Ray."""
    from .. import solve, validate
    from ..online.estimate import DEFAULT_FLOOR_GRID, estimate_pricing, history_u
    from ..workloads.testbed_real import testbed_real

    kw = dict(profiles=profiles, jobs=s["jobs"], horizon=s["horizon"], slot_s=s["slot_s"],
              slowdown=slowdown)
    inst = testbed_real(s["seed"], **kw)
    history = [testbed_real(h, **kw) for h in s["history"]]
    # the default grid's floors up to the history's smallest U: a large slowdown (a loaded
    # machine) lengthens the chunk times and lowers U below the grid's top floors
    top = min(v for key in ("U_worker", "U_ps") for v in history_u(history)[key].values())
    pricing = estimate_pricing(history, [f for f in DEFAULT_FLOOR_GRID if f <= top])
    schedules = {}
    for policy in POLICIES:
        sched = solve(inst, policy, **policy_options(policy, pricing))
        check = validate(inst, sched)
        if not check.ok:
            raise RuntimeError(f"testbed-real: the {policy} schedule is invalid: {check}")
        schedules[policy] = sched
    return inst, pricing, schedules


def policy_options(policy: str, pricing) -> dict:
    """The options every run of ``policy`` gets: OASiS its estimated pricing, the others none."""
    return {"pricing": pricing} if policy == "oasis" else {}


def job_rows(inst, planned, report, S: float) -> list[dict]:
    """Per job of ``report``: the simulated completion (``planned``'s slot t and t S seconds)
    and the real one (the wall clock's slot and seconds since slot 1 began), and the JCT error
    real / simulated - 1 with the JCT from the start of the arrival slot, in seconds
    (``jct_error``, against the simulated slot's end) and in slots of the grid
    (``jct_slot_error``, the simulator's unit); None for a job not completed in both."""
    out = []
    for j, job in enumerate(report.doc["jobs"]):
        sim_slot = planned.completion[j]
        real = job["real"]
        a = int(inst.arrival[j])
        row = {"job": job["id"], "sim_slot": sim_slot,
               "sim_s": None if sim_slot is None else sim_slot * S,
               "real_slot": real["wall_slot"], "real_s": real["completion_s"], "jct_error": None,
               "jct_slot_error": None}
        if sim_slot is not None and real["completion_s"] is not None:
            start = (a - 1) * S
            row["jct_error"] = (real["completion_s"] - start) / (sim_slot * S - start) - 1
            row["jct_slot_error"] = (real["wall_slot"] - a + 1) / (sim_slot - a + 1) - 1
        out.append(row)
    return out


def cost_ratios(report) -> dict[str, list[float]]:
    """Real busy time / prediction of every executed job-slot, per cost model of the report."""
    from ..runtime.report import COSTMODELS

    return {model: report.ratios(model) for model in COSTMODELS}


def run_one(inst, planned, policy: str, mode: str, S: float, pool, pricing,
            address: str | None = None) -> tuple[dict, object, object]:
    """Execute one run (``mode`` open or closed) of ``policy`` for real; returns its row (the
    numbers of the page), its execution report and the schedule it ran (``planned`` in the open
    loop, the one the closed loop decided)."""
    from .. import get_policy, validate
    from ..runtime.closed_loop import run_closed_loop
    from ..runtime.executor import execute

    t0 = time.perf_counter()
    with LoadSampler() as load:
        if mode == "open":
            report = execute(inst, planned, slot_seconds=S, pool=pool, address=address)
            replans, schedule = None, planned
        else:
            run = run_closed_loop(inst, get_policy(policy, **policy_options(policy, pricing)),
                                  slot_seconds=S, pool=pool, address=address)
            check = validate(inst, run.schedule)
            if not check.ok:
                raise RuntimeError(f"testbed-real: the {policy} closed loop's schedule is "
                                   f"invalid: {check}")
            report, replans, schedule = run.report, len(run.replans), run.schedule
    wall = time.perf_counter() - t0
    d = report.doc
    jobs = job_rows(inst, planned, report, S)
    sim_u = float(planned.total_utility)
    real_u = float(d["total_utility"]["real"])
    over = [s["overrun_s"] for s in d["slots"]]
    errors = [abs(r["jct_error"]) for r in jobs if r["jct_error"] is not None]
    slot_errors = [abs(r["jct_slot_error"]) for r in jobs if r["jct_slot_error"] is not None]
    row = {"policy": policy, "mode": mode, "wall_s": wall, "jobs": jobs,
           "sim_utility": sim_u, "real_utility": real_u,
           "utility_ratio": real_u / sim_u if sim_u > 0 else None,
           "median_abs_jct_error": median(errors) if errors else None,
           "median_abs_slot_error": median(slot_errors) if slot_errors else None,
           "jobs_sim_done": sum(r["sim_slot"] is not None for r in jobs),
           "jobs_real_done": sum(r["real_s"] is not None for r in jobs),
           "overruns": sum(o > 0 for o in over), "slots": len(over),
           "max_overrun_s": max(over, default=0.0),
           "startup_s": d["startup_s"], "startup_phases": d.get("meta", {}).get("startup_phases", {}),
           "checkpoint_s": sum(j.get("checkpoint_s") or 0.0 for j in d["jobs"]),
           "restart_s": sum(j.get("restart_s") or 0.0 for j in d["jobs"]),
           "replans": replans, "load": load.summary(), "costmodel": cost_ratios(report)}
    return row, report, schedule


def compute(quick: bool = False, results: Path = Path("results"), workers=None, address=None,
            progress: bool = True, reps: int | None = None) -> dict:
    """Profile, plan, then every (load, repetition, mode, policy) run (module docstring; a run
    stored under ``results`` for the same instance is reused). ``reps`` overrides the settings'
    repetitions. Returns what ``figures.testbed_real.render`` draws. ``workers`` is unused (the
    runs share the machine one at a time: their timing is what is measured)."""
    from ..costmodel.profile import load_profile, save_profile
    from ..model.io import save_instance, save_result, write_json_atomic
    from ..runtime.calibrate import calibrate
    from ..runtime.profile import DEFAULT_CONFIGS, profile_task
    from ..runtime.report import save_report

    t0 = time.perf_counter()
    s = dict(settings(quick))
    if reps is not None:
        if reps < 1:
            raise ValueError(f"reps: must be >= 1, got {reps}")
        s["reps"] = reps
    folder = _folder(results, quick)
    folder.mkdir(parents=True, exist_ok=True)
    session = _Session(address)
    rows: list[dict] = []
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
        total = len(s["loads"]) * s["reps"] * len(MODES) * len(POLICIES)
        plans: dict[tuple[str, int], dict] = {}
        for load in s["loads"]:
            busy: list[subprocess.Popen] = []
            try:
                for rep in range(s["reps"]):
                    speed = _stored_calibration(folder / f"calibration-{load}-{rep}.json",
                                                profiles, s)
                    if speed is None:
                        pool, busy = _ready(session, load, busy)
                        _say(progress, f"{load} rep {rep}: calibrating the plan's speed ...")
                        speed = calibrate(profiles, slot_s=s["slot_s"], quantile=s["quantile"],
                                          pool=pool, address=address)
                        write_json_atomic(folder / f"calibration-{load}-{rep}.json",
                                          speed.to_json())
                        _say(progress, f"{load} rep {rep}: plan with slowdown "
                             f"{speed.slowdown:.2f} (the {s['quantile']:g} quantile of "
                             f"{len(speed.ratios)} job-slots' busy / predicted; median "
                             f"{median(speed.ratios):.2f})")
                    inst, pricing, schedules = plan(s, profiles, speed.slowdown)
                    save_instance(inst, folder / f"instance-{load}-{rep}.json")
                    plans[(load, rep)] = {"instance": inst, "pricing": pricing, "speed": speed,
                                          "sim": {k: float(v.total_utility)
                                                  for k, v in schedules.items()}}
                    # the closed loop first: the runs the busy targets check run nearest
                    # their calibration
                    keys = [(rep, mode, policy) for mode in reversed(MODES)
                            for policy in POLICIES]
                    stored = {k: _stored_row(folder / _run_name(load, *k), inst) for k in keys}
                    for k in keys:
                        row = stored[k]
                        if row is None:
                            pool, busy = _ready(session, load, busy)
                            _, mode, policy = k
                            row, report, ran = run_one(inst, schedules[policy], policy, mode,
                                                       s["slot_s"], pool, pricing, address)
                            row.update(load_kind=load, rep=rep)
                            save_report(report,
                                        folder / _run_name(load, *k, prefix="execution"))
                            save_result(inst, ran,
                                        folder / _run_name(load, *k, prefix="result"))
                            write_json_atomic(folder / _run_name(load, *k),
                                              {"instance_sha256": inst.fingerprint, "row": row})
                            _say(progress, f"[{len(rows) + 1}/{total}] {load} {mode} loop "
                                 f"{policy} rep {rep}: real / sim utility "
                                 f"{fmt(row['utility_ratio'])}, median |JCT error| "
                                 f"{fmt(row['median_abs_jct_error'])}, overruns "
                                 f"{row['overruns']}/{row['slots']}, load "
                                 f"{row['load']['median']:.1f}")
                        rows.append(row)
            finally:
                stop_busy(busy)
    finally:
        session.close()
    return {"settings": s, "profiles": profiles, "plans": plans, "rows": rows,
            "cores": os.cpu_count() or 1, "wall_s": time.perf_counter() - t0, "folder": folder}


def _ready(session, load: str, busy: list) -> tuple:
    """Before something runs for real: Ray and the pool up, then (``busy`` load) the busy
    processes started once; returns ``(pool, busy processes)``."""
    pool = session.pool()  # Ray up before the busy load starts
    if load == "busy" and not busy:
        busy = start_busy(BUSY)
    return pool, busy


def fmt(x, spec: str = ".2f") -> str:
    """``x`` formatted with ``spec``, or "–" for a value not measured (None)."""
    return "–" if x is None else format(x, spec)


def _run_name(load: str, rep: int, mode: str, policy: str, prefix: str = "run") -> str:
    return f"{prefix}-{load}-{mode}-{policy}-{rep}.json"


def _stored_calibration(path: Path, profiles, s: dict):
    """The speed calibration stored at ``path`` when it was measured on the calibration runs of
    these profiles and slot length (``runtime.calibrate.CALIBRATION_RUNS``) with this quantile,
    else None (calibrate again)."""
    from ..model.io import FormatError, read_json
    from ..runtime.calibrate import Calibration, calibration_instances

    try:
        cal = Calibration.from_json(read_json(path))
    except (FormatError, OSError, ValueError, KeyError, TypeError):
        return None
    want = [inst.fingerprint for _, inst in calibration_instances(profiles, slot_s=s["slot_s"])]
    if cal.meta.get("instances_sha256") != want or cal.quantile != s["quantile"]:
        return None
    return cal


def _stored_row(path: Path, inst) -> dict | None:
    """The row stored at ``path`` when it is one of this instance, else None (run it again)."""
    from ..model.io import FormatError, read_json

    try:
        doc = read_json(path)
    except (FormatError, OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("instance_sha256") != inst.fingerprint:
        return None
    return doc.get("row")


class _Session:
    """Ray and the shared containers, started when something first has to run (a rerun that
    finds every run stored redraws without Ray)."""

    def __init__(self, address: str | None):
        self.address = address
        self._pool = None
        self._owned = False

    def pool(self):
        from ..runtime.executor import ContainerPool, start_ray
        from ..runtime.profile import PS_SERVER, WORKER_SERVER
        from ..workloads.testbed_real import testbed_real_servers

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


# ---- the numbers the page reports -------------------------------------------------------------
def group(rows: list[dict], load: str, mode: str, policy: str) -> list[dict]:
    """The repetitions of one (load, mode, policy)."""
    return [r for r in rows if (r["load_kind"], r["mode"], r["policy"]) == (load, mode, policy)]


def target_checks(rows: list[dict]) -> list[dict]:
    """Every target of ``TARGETS`` on every policy with runs: the median over repetitions of
    real / simulated utility and of the median |JCT error| in slots, each against its bar."""
    out = []
    for (load, mode), (ratio_min, err_max) in TARGETS.items():
        for policy in POLICIES:
            rs = group(rows, load, mode, policy)
            if not rs:
                continue
            ratios = [r["utility_ratio"] for r in rs if r["utility_ratio"] is not None]
            errs = [r["median_abs_slot_error"] for r in rs
                    if r["median_abs_slot_error"] is not None]
            q = median(ratios) if ratios else None
            e = median(errs) if errs else None
            out.append({"load": load, "mode": mode, "policy": policy,
                        "ratio": q, "ratio_min": ratio_min, "ratio_ok": q is not None
                        and q >= ratio_min, "error": e, "error_max": err_max,
                        "error_ok": e is not None and e <= err_max,
                        "load_min": min(r["load"]["min"] for r in rs),
                        "load_max": max(r["load"]["max"] for r in rs),
                        "overruns": [r["overruns"] for r in rs],
                        "replans": [r["replans"] for r in rs]})
    return out
