"""Metrics of a schedule: utility, timeliness per job class, admission counts, utilisation."""
from __future__ import annotations

import numpy as np

from ..model.schedule import WORKER
from .report import Summary, SummaryTable, policy_label, solver_stats


def completion_minus_target(instance, schedule) -> dict[str, list[float]]:
    """(t_hat - a) - gamma3 of every completed job, grouped by job class (paper Figs. 4 and 9)."""
    out: dict[str, list[float]] = {}
    for i, job in enumerate(instance.jobs):
        c = schedule.completion[i]
        if c is None or job.utility.kind != "sigmoid":
            continue
        out.setdefault(job.job_class or "unclassified", []).append(
            float(c - job.arrival - job.utility.target))
    return out


def utilisation(instance, schedule) -> dict[str, dict[str, float]]:
    """Allocated / available resource-slots over slots 1..T, per pool and resource."""
    a = schedule.allocations
    T, H = instance.horizon, instance.H
    demand = np.where(a.role[:, None] == WORKER, instance.worker_demand[a.job],
                      instance.ps_demand[a.job]) * a.count[:, None]
    used_w = demand[a.server < H].sum(axis=0)
    used_p = demand[a.server >= H].sum(axis=0)
    cap_w = instance.worker_capacity.sum(axis=0) * T
    cap_p = instance.ps_capacity.sum(axis=0) * T
    with np.errstate(invalid="ignore", divide="ignore"):
        uw, up = np.where(cap_w > 0, used_w / cap_w, 0.0), np.where(cap_p > 0, used_p / cap_p, 0.0)
    return {"worker": dict(zip(instance.resources, uw.tolist())),
            "ps": dict(zip(instance.resources, up.tolist()))}


def summarize(instance, schedule) -> Summary:
    """The metrics the paper reports, plus admission counts and utilisation, as a ``Summary``:
    a dict whose ``str`` is the one-row table ``oasis-opt summary`` prints.

    ``label`` is the policy with the options recorded in ``stats["options"]`` (by
    ``oasis_opt.solve`` and ``oasis-opt solve``); ``solver`` the solver's ``status``,
    ``proven_optimal``, ``objective``, ``bound``, ``gap`` and ``message`` for offline policies
    (None for the others).
    """
    admitted = np.array(schedule.admitted, dtype=bool)  # bool even with no jobs
    completed = schedule.completed
    cmt = completion_minus_target(instance, schedule)
    options = schedule.stats.get("options") or {}
    return Summary({
        "policy": schedule.policy,
        "options": options,
        "label": policy_label(schedule.policy, options),
        "total_utility": schedule.total_utility,
        "jobs": instance.I,
        "admitted": int(admitted.sum()),
        "rejected": int((~admitted).sum()),
        "completed": int(completed.sum()),
        "unfinished": int((admitted & ~completed).sum()),
        "completion_minus_target_median": {k: float(np.median(v)) for k, v in cmt.items()},
        "utilisation": utilisation(instance, schedule),
        "solver": solver_stats(schedule.stats),
    })


def compare(instance, schedules, names=None) -> SummaryTable:
    """Validate and summarise ``schedules`` of ``instance`` side by side (``oasis-opt summary``)."""
    from ..model.validate import validate

    return SummaryTable([summarize(instance, s) for s in schedules],
                        None if names is None else list(names),
                        [validate(instance, s) for s in schedules])
