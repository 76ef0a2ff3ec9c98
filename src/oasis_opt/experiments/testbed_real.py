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
instance and schedule). Drawn by ``oasis_opt.experiments.figures.testbed_real``.
"""
from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

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
    predicted ratio. Returns what ``figures.testbed_real.render`` draws."""
    from ..costmodel.profile import load_profile, save_profile
    from ..runtime.profile import DEFAULT_CONFIGS, profile_task

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


def plan(s: dict, profiles, slowdown: float) -> tuple:
    """The round's instance (generated with ``slowdown``), OASiS's pricing (estimated on the
    history seeds of ``s``) and every policy's validated schedule: ``(instance, pricing,
    {policy: schedule})``. Needs no Ray (the executor runs afterwards, in ``_round``)."""
    from .. import solve, validate
    from ..online.estimate import estimate_pricing
    from ..workloads.testbed_real import testbed_real

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
    from ..model.io import save_instance, save_result
    from ..runtime.executor import execute
    from ..runtime.report import save_report

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
    from ..model.io import FormatError, load_result

    try:
        stored = load_result(inst, path)
    except (FormatError, OSError):
        return False
    return list(stored.allocations.rows()) == list(sched.allocations.rows())


def _stored_report(inst, path: Path):
    """The report at ``path`` when it is one of this instance (in this format), else None."""
    from ..model.io import FormatError
    from ..runtime.report import load_report

    try:
        report = load_report(path)
    except (FormatError, OSError):
        return None
    return report if report.doc["instance_sha256"] == inst.fingerprint else None


# ---- the numbers the figure draws -------------------------------------------------------------
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
    from ..runtime.report import COSTMODELS

    key = COSTMODELS[model]
    return [s["busy_s"] / s[key] for j in report.jobs for s in j["slots"]
            if s["iterations"] and s.get(key)]


def run_load(doc: dict) -> dict:
    """The machine's 1-minute load during an execution: median, min and max over its slots
    (``meta.loadavg_slots``, sampled as each slot ended), and at its end; NaN where a report
    written before the slots were sampled lacks them."""
    slots = doc["meta"].get("loadavg_slots") or []
    end = (doc["meta"].get("loadavg") or [math.nan])[0]
    if not slots:
        return {"median": math.nan, "min": math.nan, "max": math.nan, "end": end}
    return {"median": float(np.median(slots)), "min": float(min(slots)),
            "max": float(max(slots)), "end": end}


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
            "load": run_load(doc),
            "chunk": _ratios(rep, "chunk-time"), "profile": _ratios(rep, "profile"),
            "shared": _ratios(rep, "profile-shared"),
            "contention": _ratios(rep, "contention"),
            "online": _ratios(rep, "contention-online")})
    return out
