"""The execution report, ``"format": "oasis-opt/execution@1"``: what ran, beside what was planned.

Top level:

| field | meaning |
|---|---|
| ``instance_sha256`` | the instance's fingerprint (as in results) |
| ``policy`` | the schedule's policy |
| ``slot_seconds`` | S, the wall-clock length of a slot |
| ``ray`` | ``{"address": "local" or the cluster's, "nodes": its nodes alive at the end}`` |
| ``startup_s`` | seconds to create and warm the containers before slot 1 |
| ``wall_s`` | seconds from the start of slot 1 to the end of the last slot |
| ``total_utility`` | ``{"planned": schedule's total, "real": sum of the real utilities}`` |
| ``costmodel`` | the cost models' error over executed (job, slot)s (below) |
| ``slots`` | per slot: ``slot``, ``start_s``, ``work_end_s``, ``end_s`` (seconds since slot 1 began), ``overrun_s`` = max(0, work_end_s - t S), ``jobs``, ``workers``, ``ps`` |
| ``jobs`` | one entry per instance job (below) |
| ``meta`` | free-form: version, end time, the machine's load averages (1, 5, 15 min) at the end, the 1-minute load as each slot ended (``loadavg_slots``), start-up seconds by phase (``startup_phases``), the machine's cores (``cores``) |

A job: ``id``, ``task`` (its task name or null), ``arrival``, ``admitted``; ``planned``
``{"completion": slot or null, "utility"}`` from the schedule; ``real`` ``{"completion_slot"``
(the slot whose work finished it), ``"completion_s"`` (seconds since slot 1 began),
``"wall_slot"`` (ceil(completion_s / S): the slot of the wall-clock grid it finished in),
``"utility"`` (f_i(wall_slot - a_i)), ``"val_accuracy"``, ``"val_loss"`` (of the final model on
the task's validation split)``}``, all null for a job that did not complete; ``minibatches``
``{"planned": E_i N_i M_i, "real": done}``; ``minibatches_per_chunk`` (M_i); ``checkpoint_s``
and ``restart_s`` (sums over its slots); ``restarts`` (``[{"slot", "cause"}]``, one per failed
attempt); ``slots``: per slot it ran, ``slot``, ``workers``, ``ps``, ``servers``
(``[{"server", "role", "count", "node"}]``: the containers that held the job, each on the server
it reported, and the id of the Ray node they ran on, ``node``: absent from reports written before
it), ``assigned`` (containers assigned to it at the slot's start, 0 when it kept its
containers), ``planned_worker_slots`` (its workers in the schedule), ``planned_minibatches`` /
``real_minibatches`` (gradients its PSs averaged), ``planned_iterations`` / ``iterations`` (steps
its PSs acknowledged), ``gradients`` (per acknowledged iteration, the gradients its PSs averaged:
the workers that took part; absent from reports written before it), ``real_chunks`` (cumulative
chunk passes, real minibatches / M_i), ``busy_s`` (first iteration submitted to last one done),
``predicted_s`` (the chunk-time model: iterations x_i S / M_i), ``profile_predicted_s`` (the
job's fitted speed model when its provenance has one: iterations t(w, p) at the job's own
counts, else null), ``shared_predicted_s`` (the same model at the slot's total counts over all
jobs, iterations t(W, P): the jobs of a slot share one machine's cores, as on this testbed; on a
cluster of several machines it overstates the sharing), ``contention_predicted_s`` (the
contention-aware model, ``costmodel.profile`` ``optimus-shared``, from the job's provenance
``contention_model``: iterations t(w, p | W, P, C), the job's own counts, the slot's totals and
C = ``meta.cores``; null without one, absent from reports written before it),
``online_predicted_s`` (the same model refitted online, ``costmodel.profile.online_predictions``:
what it predicted before the slot ran, refitted on its θ at the profiling points and the
job-slots of earlier slots of the jobs planned with the same model; null and absent likewise),
``restart_s``, ``checkpoint_s``, ``restarts`` (failed attempts in this slot), ``val_accuracy``
after the slot; and (absent from reports written before them) the preemption fields
(``runtime.executor``, **Preemption**): ``event`` (the kind of the schedule's preemption event of
the job at the slot's start, or null), ``lost_minibatches`` (rolled back to the last checkpoint
by it), ``degraded`` (the job runs in CPU mode), ``cpu_workers`` (its workers on CPU-mode
servers), ``gross_units`` / ``credited_units`` (work units of the slot's workers at their
servers' speeds, and those credited net of a restart), and ``val_loss`` after the slot.

``costmodel``: ``{"chunk-time": stats, "profile": stats or null, "profile-shared": stats or
null, "contention": stats or null, "contention-online": stats or null}`` (the last two absent
from reports before them) where stats over the (job,
slot)s with iterations are ``{"job_slots", "median_ratio", "p10_ratio", "p90_ratio",
"mean_abs_rel_error"}`` of ratio = busy_s / predicted_s (1 is a perfect prediction; > 1: the
slot's work took longer than the model said).
"""
from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..model.checks import FormatError
from ..model.numerics import WORK_EPS

EXECUTION_FORMAT = "oasis-opt/execution@1"
TOP_FIELDS = ("format", "instance_sha256", "policy", "slot_seconds", "ray", "startup_s", "wall_s",
              "total_utility", "costmodel", "slots", "jobs", "meta")
JOB_FIELDS = ("id", "task", "arrival", "admitted", "planned", "real", "minibatches",
              "minibatches_per_chunk", "checkpoint_s", "restart_s", "restarts", "slots")
REAL_FIELDS = ("completion_slot", "completion_s", "wall_slot", "utility", "val_accuracy",
               "val_loss")
JOB_SLOT_FIELDS = ("slot", "workers", "ps", "servers", "assigned", "planned_worker_slots",
                   "planned_minibatches", "real_minibatches", "planned_iterations", "iterations",
                   "real_chunks", "busy_s", "predicted_s", "profile_predicted_s",
                   "shared_predicted_s", "restart_s",
                   "checkpoint_s", "restarts", "val_accuracy")
# written since the field was added; a report written before it is read without it
JOB_SLOT_OPTIONAL = ("gradients", "contention_predicted_s", "online_predicted_s", "event",
                     "lost_minibatches", "degraded", "cpu_workers", "gross_units",
                     "credited_units", "val_loss")
SLOT_FIELDS = ("slot", "start_s", "work_end_s", "end_s", "overrun_s", "jobs", "workers", "ps")
# cost model -> the job-slot field of its prediction
COSTMODELS = {"chunk-time": "predicted_s", "profile": "profile_predicted_s",
              "profile-shared": "shared_predicted_s", "contention": "contention_predicted_s",
              "contention-online": "online_predicted_s"}
COSTMODELS_OPTIONAL = ("contention", "contention-online")  # absent from reports written before it
STATS_FIELDS = ("job_slots", "median_ratio", "p10_ratio", "p90_ratio", "mean_abs_rel_error")


def ratio_stats(ratios) -> dict | None:
    """Summary of busy / predicted ratios (None when there are none)."""
    r = np.asarray([x for x in ratios if x is not None and math.isfinite(x)], dtype=float)
    if not len(r):
        return None
    return {"job_slots": int(len(r)), "median_ratio": float(np.median(r)),
            "p10_ratio": float(np.percentile(r, 10)), "p90_ratio": float(np.percentile(r, 90)),
            "mean_abs_rel_error": float(np.mean(np.abs(r - 1)))}


def _speed_model(job) -> Mapping[str, float] | None:
    prov = job.provenance or {}
    model = prov.get("speed_model")
    return model.get("theta") if isinstance(model, Mapping) else None


def _contention_model(job) -> Mapping[str, float] | None:
    model = (job.provenance or {}).get("contention_model")
    return model.get("theta") if isinstance(model, Mapping) else None


def _online(inst, jobs: list[dict], totals: Mapping[int, tuple[int, int]], cores: int) -> None:
    """Fill ``online_predicted_s`` of every job-slot whose job carries a contention model: one
    online refit per model, over the job-slots of its jobs (``online_predictions``)."""
    from ..costmodel.profile import SharedSample, online_predictions

    groups: dict[str, list[tuple[dict, dict]]] = {}
    models: dict[str, Mapping[str, Any]] = {}
    for job, entry in zip(inst.jobs, jobs):
        model = (job.provenance or {}).get("contention_model")
        for row in entry["slots"]:
            row["online_predicted_s"] = None
        if not isinstance(model, Mapping):
            continue
        key = repr(sorted(model["theta"].items())) + repr(model.get("cores"))
        models[key] = model
        groups.setdefault(key, []).extend(
            (entry, row) for row in entry["slots"]
            if row["iterations"] and row["busy_s"] and row["workers"] and row["ps"])
    for key, members in groups.items():
        samples = [SharedSample(r["workers"], r["ps"], *totals[r["slot"]], cores, r["iterations"],
                                r["busy_s"]) for _, r in members]
        predicted = online_predictions(models[key], samples, [r["slot"] for _, r in members])
        for (_, row), value in zip(members, predicted):
            row["online_predicted_s"] = float(value)


def machine_cores() -> int:
    """The cores of this machine, which the jobs of a slot share (the executor runs them here)."""
    return os.cpu_count() or 1


def build_report(executor, schedule=None, *, policy: str | None = None) -> "ExecutionReport":
    """The report of ``executor``'s run, beside ``schedule``'s plan when given."""
    from .. import __version__
    from ..costmodel.profile import iteration_time, shared_iteration_time

    inst = executor.instance
    S = executor.slot_seconds
    jobs = []
    totals = {rec["slot"]: (rec["workers"], rec["ps"]) for rec in executor.slots}
    ratios: dict[str, list[float]] = {name: [] for name in COSTMODELS}
    cores = machine_cores()
    for i, job in enumerate(inst.jobs):
        run = executor.jobs.get(i)
        planned_completion = schedule.completion[i] if schedule is not None else None
        planned = {"completion": planned_completion,
                   "utility": schedule.utility[i] if schedule is not None else None}
        real = dict.fromkeys(REAL_FIELDS)
        slots, restarts = [], []
        minibatches = {"planned": None, "real": 0}
        per_chunk = None
        if run is not None:
            plan = run.plan
            per_chunk = plan.minibatches
            minibatches = {"planned": plan.total_minibatches, "real": run.done}
            theta = _speed_model(job)
            shared_theta = _contention_model(job)
            cumulative = 0
            for rec in run.slots:
                cumulative += rec.get("real_minibatches", 0)
                iters = rec.get("iterations", 0)
                predicted = iters * plan.chunk_time * S / plan.minibatches
                own = shared = None
                if theta is not None:
                    own = float(iters * iteration_time(theta, rec["workers"], rec["ps"]))
                    shared = float(iters * iteration_time(theta, *totals[rec["slot"]]))
                contention = None
                if shared_theta is not None and rec["workers"] and rec["ps"]:
                    contention = float(iters * shared_iteration_time(
                        shared_theta, rec["workers"], rec["ps"], *totals[rec["slot"]], cores))
                row = {**rec, "real_chunks": cumulative / plan.minibatches,
                       "predicted_s": predicted, "profile_predicted_s": own,
                       "shared_predicted_s": shared, "contention_predicted_s": contention}
                row.setdefault("checkpoint_s", 0.0)
                slots.append({k: row.get(k) for k in JOB_SLOT_FIELDS + JOB_SLOT_OPTIONAL})

            restarts = list(run.restarts)
            if run.completion_slot is not None:
                wall_slot = max(1, math.ceil(run.completion_s / S - WORK_EPS))
                real = {"completion_slot": run.completion_slot, "completion_s": run.completion_s,
                        "wall_slot": wall_slot, "utility": inst.utility_of(i, wall_slot),
                        "val_accuracy": run.val_accuracy, "val_loss": run.val_loss}
        jobs.append({"id": job.id, "task": job.task["name"] if job.task else None,
                     "arrival": job.arrival,
                     "admitted": bool(schedule.admitted[i]) if schedule is not None else run is not None,
                     "planned": planned, "real": real, "minibatches": minibatches,
                     "minibatches_per_chunk": per_chunk,
                     "checkpoint_s": float(sum(s["checkpoint_s"] or 0.0 for s in slots)),
                     "restart_s": float(sum(s["restart_s"] or 0.0 for s in slots)),
                     "restarts": restarts, "slots": slots})
    _online(inst, jobs, totals, cores)
    for entry in jobs:
        for row in entry["slots"]:
            for name, key in COSTMODELS.items():
                if row["iterations"] and row.get(key):
                    ratios[name].append(row["busy_s"] / row[key])
    import ray

    doc = {"format": EXECUTION_FORMAT, "instance_sha256": inst.fingerprint,
           "policy": policy or (schedule.policy if schedule is not None else None),
           "slot_seconds": S,
           "ray": {"address": executor.address or "local",
                   "nodes": (sum(n["Alive"] for n in ray.nodes()) if ray.is_initialized()
                             else None)},
           "startup_s": executor.startup_s,
           "wall_s": executor.slots[-1]["end_s"] if executor.slots else 0.0,
           "total_utility": {"planned": schedule.total_utility if schedule is not None else None,
                             "real": float(sum(j["real"]["utility"] or 0.0 for j in jobs))},
           "costmodel": {name: ratio_stats(r) for name, r in ratios.items()},
           "slots": list(executor.slots), "jobs": jobs,
           "meta": {"oasis-opt": __version__, "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
                    # the machine's load when the run ended: real time depends on it
                    "loadavg": [round(x, 2) for x in os.getloadavg()],
                    # ... and during it: the 1-minute load average as each slot ended
                    "loadavg_slots": [round(x, 2) for x in executor.slot_loads],
                    # start-up by phase (Executor.phases: Ray, containers, compilation)
                    "startup_phases": {k: round(v, 3) for k, v in executor.phases.items()},
                    # C of the contention model's prediction: the cores the slot's jobs shared
                    "cores": cores}}
    return ExecutionReport(doc)


class ExecutionReport:
    """An ``oasis-opt/execution@1`` document (``doc``) with readable accessors."""

    def __init__(self, doc: dict):
        self.doc = doc

    @property
    def jobs(self) -> list[dict]:
        return self.doc["jobs"]

    @property
    def slots(self) -> list[dict]:
        return self.doc["slots"]

    @property
    def planned_utility(self) -> float | None:
        return self.doc["total_utility"]["planned"]

    @property
    def real_utility(self) -> float:
        return self.doc["total_utility"]["real"]

    def slowdown(self, model: str = "chunk-time") -> float | None:
        """The correction this run suggests for ``model``'s predictions: the median busy /
        predicted ratio over its job-slots (None without any); planning with chunk times
        multiplied by it (``testbed_real(slowdown=...)``, ``generate --slowdown``) allots the
        time the work really took."""
        stats = self.doc["costmodel"].get(model)
        return None if stats is None else stats["median_ratio"]

    def ratios(self, model: str = "chunk-time") -> list[float]:
        """Real busy time / ``model``'s prediction of every executed job-slot that has one."""
        key = COSTMODELS[model]
        return [s["busy_s"] / s[key] for j in self.jobs for s in j["slots"]
                if s["iterations"] and s.get(key)]

    def job(self, job_id: str) -> dict:
        for j in self.jobs:
            if j["id"] == job_id:
                return j
        raise KeyError(job_id)

    def restarts(self) -> list[dict]:
        """Every restart, with its job: ``[{"job", "slot", "cause"}]``."""
        return [{"job": j["id"], **r} for j in self.jobs for r in j["restarts"]]

    def overhead_shares(self) -> dict[int, float]:
        """Per executed slot, the share of the slot S its jobs spent loading into new containers
        and checkpointing: sum over the slot's jobs of (``restart_s`` + ``checkpoint_s``) / S (a
        sum, though the jobs run side by side: an upper bound). Start-up (Ray, containers,
        compilation) happens before slot 1 and is in no slot (``startup_s``)."""
        S = self.doc["slot_seconds"]
        out: dict[int, float] = {}
        for j in self.jobs:
            for r in j["slots"]:
                spent = (r["restart_s"] or 0.0) + (r["checkpoint_s"] or 0.0)
                out[r["slot"]] = out.get(r["slot"], 0.0) + spent / S
        return dict(sorted(out.items()))

    def summary(self) -> str:
        """A few lines: utilities, overruns, the cost model's error, restarts, and per job its
        preemption events and the slots it ran degraded to CPU mode."""
        d = self.doc
        done = [j for j in self.jobs if j["real"]["completion_slot"] is not None]
        over = [s["overrun_s"] for s in self.slots]
        lines = [f"{d['policy']}: {len(d['slots'])} slots of {d['slot_seconds']:g} s in "
                 f"{d['wall_s']:.1f} s (start-up {d['startup_s']:.1f} s); {len(done)} jobs "
                 f"completed; utility planned {_num(d['total_utility']['planned'])}, real "
                 f"{d['total_utility']['real']:.4f}",
                 f"slots over their length: {sum(o > 0 for o in over)} (largest overrun "
                 f"{max(over, default=0.0):.2f} s)"]
        for name, stats in d["costmodel"].items():
            if stats:
                lines.append(f"cost model {name}: busy / predicted median "
                             f"{stats['median_ratio']:.2f} (p10 {stats['p10_ratio']:.2f}, p90 "
                             f"{stats['p90_ratio']:.2f}) over {stats['job_slots']} job-slots")
        restarts = self.restarts()
        if restarts:
            lines.append(f"restarts: {len(restarts)} ("
                         + "; ".join(f"{r['job']} slot {r['slot']}: {r['cause']}"
                                     for r in restarts[:5]) + ")")
        for j in self.jobs:  # preemption: the events and the slots run in CPU mode
            events = [f"{r['event']} in slot {r['slot']} (lost {r.get('lost_minibatches', 0)} "
                      "mini-batches)" for r in j["slots"] if r.get("event")]
            degraded = [r["slot"] for r in j["slots"] if r.get("degraded")]
            if events or degraded:
                lines.append(f"{j['id']}: {'; '.join(events) or 'no events'}; degraded (CPU "
                             f"mode) in slots {', '.join(map(str, degraded)) or 'none'}")
        return "\n".join(lines)


def _num(v) -> str:
    return "-" if v is None else f"{v:.4f}"


# ---- the file: writer and strict reader --------------------------------------------------------
def report_to_dict(report: ExecutionReport) -> dict:
    return report.doc


def _fields(d: Any, keys, path: str, optional=()) -> dict:
    if not isinstance(d, dict):
        raise FormatError(path, "expected an object")
    for k in d:
        if k not in keys and k not in optional:
            raise FormatError(f"{path}.{k}" if path else k, "unknown field")
    for k in keys:
        if k not in d:
            raise FormatError(f"{path}.{k}" if path else k, "missing field")
    return d


def _list(v: Any, path: str) -> list:
    if not isinstance(v, list):
        raise FormatError(path, "expected a list")
    return v


def report_from_dict(doc: Any) -> ExecutionReport:
    """Read a report: every object has exactly its documented fields (unknown or missing ones
    are errors naming them); values are kept as written."""
    d = _fields(doc, TOP_FIELDS, "")
    if d["format"] != EXECUTION_FORMAT:
        raise FormatError("format", f"expected {EXECUTION_FORMAT!r}, got {d['format']!r}")
    _fields(d["total_utility"], ("planned", "real"), "total_utility")
    _fields(d["ray"], ("address", "nodes"), "ray")
    _fields(d["costmodel"], tuple(m for m in COSTMODELS if m not in COSTMODELS_OPTIONAL),
            "costmodel", COSTMODELS_OPTIONAL)
    for name, stats in d["costmodel"].items():
        if stats is not None:
            _fields(stats, STATS_FIELDS, f"costmodel.{name}")
    for n, s in enumerate(_list(d["slots"], "slots")):
        _fields(s, SLOT_FIELDS, f"slots[{n}]")
    for n, j in enumerate(_list(d["jobs"], "jobs")):
        p = f"jobs[{n}]"
        _fields(j, JOB_FIELDS, p)
        _fields(j["planned"], ("completion", "utility"), f"{p}.planned")
        _fields(j["real"], REAL_FIELDS, f"{p}.real")
        _fields(j["minibatches"], ("planned", "real"), f"{p}.minibatches")
        for m, r in enumerate(_list(j["restarts"], f"{p}.restarts")):
            _fields(r, ("slot", "cause"), f"{p}.restarts[{m}]")
        for m, s in enumerate(_list(j["slots"], f"{p}.slots")):
            _fields(s, JOB_SLOT_FIELDS, f"{p}.slots[{m}]", JOB_SLOT_OPTIONAL)
    return ExecutionReport(d)


def save_report(report: ExecutionReport, path: str | Path) -> None:
    from ..model.io import write_json_atomic

    write_json_atomic(path, report_to_dict(report))


def load_report(path: str | Path) -> ExecutionReport:
    from ..model.io import read_json

    return report_from_dict(read_json(path))
