"""Metrics of a schedule: utility, timeliness per job class, admission counts, utilisation."""
from __future__ import annotations

from typing import Any

import numpy as np

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
    demand = instance.row_demand(a.job, a.server, a.role) * a.count[:, None]
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

    ``jct`` holds Gavel's metrics (``jct_metrics``: average JCT, makespan, GPU utilisation,
    finish-time fairness), None for an instance without a slot length.
    ``preemption`` (None without a preemption record, ``model.preemption``): the stops
    (``preemptions``, suspends included, ``degradations``, ``promotions``), the ``lost_work``
    units and ``restart_slots`` summed over the jobs, and the ``chains`` of
    ``sim.preemption.chain_summary`` (mean, p95, max length, share in chains longer than 1).
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
        "jct": jct_metrics(instance, schedule),
        "solver": solver_stats(schedule.stats),
        "preemption": preemption_summary(instance, schedule),
    })


def preemption_summary(instance, schedule) -> dict | None:
    """The ``preemption`` entry of ``summarize`` (its docstring), or None."""
    from ..model.preemption import COUNTERS, record_of
    from .preemption import chain_lengths_and_links, chain_summary

    record = record_of(schedule.stats)
    jobs = record.get("jobs") if isinstance(record, dict) else None
    if not isinstance(jobs, dict):
        return None
    out: dict[str, Any] = {c: float(sum(jobs.get(c) or [])) for c in COUNTERS
                           if c not in ("resizes",)}
    for c in ("preemptions", "degradations", "promotions", "restart_slots"):
        out[c] = int(out[c])
    out["chains"] = chain_summary(*chain_lengths_and_links(instance, schedule))
    return out


def compare(instance, schedules, names=None) -> SummaryTable:
    """Validate and summarise ``schedules`` of ``instance`` side by side (``oasis-opt summary``)."""
    from ..model.validate import validate

    return SummaryTable([summarize(instance, s) for s in schedules],
                        None if names is None else list(names),
                        [validate(instance, s) for s in schedules])


def job_jcts(instance, schedule) -> np.ndarray | None:
    """Each job's JCT in seconds as :func:`jct_metrics` counts it (NaN for a job that did not
    complete), indexed like ``instance.jobs``; None when the instance has no ``slot_s``."""
    out = np.full(instance.I, np.nan)
    return None if jct_metrics(instance, schedule, per_job=out) is None else out


def jct_metrics(instance, schedule, *, per_job: np.ndarray | None = None
                ) -> dict[str, float | None] | None:
    """Gavel's metrics (Narayanan et al., OSDI 2020), in seconds of the instance's ``slot_s``
    (None when its ``meta`` has none):

    * a job's end E_i = (c_i - 1 + f_i) L: slot c_i = its completion slot of length L, f_i the
      share of that slot its last work units needed (remaining work / work done in the slot),
      as Gavel ends a job with the micro-task that runs its last step;
    * JCT_i = E_i - A_i with A_i its submission time (``provenance.arrival_s`` of a Gavel
      import, else (a_i - 1) L), so queueing before the first slot counts;
    * ``avg_jct_s`` (and ``_h``): the mean JCT over completed jobs; ``makespan_s`` (``_h``):
      max_i E_i (time starts at 0);
    * ``utilisation``: busy GPU-seconds / (GPUs x makespan), a GPU busy for whole slots except
      in a job's last slot (f_i of it);
    * finish-time fairness rho_i = JCT_i / t_i with t_i = W_i L / (N_i max_g s_ig), the job's
      isolated run time (alone, all N_i workers, its fastest type): ``rho_max``, ``rho_mean``.

    Counts ``completed`` jobs; the others are left out as Gavel leaves out failed jobs.
    ``per_job`` (length I), when given, receives each completed job's JCT (``job_jcts``).
    """
    slot_s = (instance.meta or {}).get("slot_s")
    if not isinstance(slot_s, (int, float)) or not slot_s > 0 or instance.progress != "chunk-time":
        return None
    a = schedule.allocations
    w = (a.role == 0) & (a.server < instance.H)
    job, slot, count = a.job[w], a.slot[w], a.count[w]
    credit = count * (instance.worker_credit(job, a.server[w]) if instance.typed else 1)
    if "gpu" in instance.resources:  # GPUs held per worker row (a worker without GPUs: none)
        g = instance.resources.index("gpu")
        gpus = count * instance.row_demand(job, a.server[w], a.role[w])[:, g]
        total = float(instance.worker_capacity[:, g].sum())
    else:
        gpus, total = count.astype(float), float(instance.H)
    ends, jcts, rhos, busy = [], [], [], float(gpus.sum()) * slot_s
    for i, c in enumerate(schedule.completion):
        mine = job == i
        if c is None or not mine.any():
            continue
        last = mine & (slot == c)
        before = int(credit[mine & (slot < c)].sum())
        in_last = int(credit[last].sum())
        f = min(1.0, max(0.0, (int(instance.work[i]) - before) / in_last)) if in_last else 1.0
        busy -= float(gpus[last].sum()) * (1.0 - f) * slot_s
        end = (c - 1 + f) * slot_s
        prov = instance.jobs[i].provenance or {}
        arrival = float(prov.get("arrival_s", (instance.arrival[i] - 1) * slot_s))
        alone = instance.work[i] * slot_s / (instance.chunks[i] * instance.max_speed[i])
        ends.append(end)
        jcts.append(end - arrival)
        rhos.append((end - arrival) / alone if alone > 0 else 1.0)
        if per_job is not None:
            per_job[i] = end - arrival
    if not jcts:
        return {"avg_jct_s": None, "avg_jct_h": None, "makespan_s": None, "makespan_h": None,
                "utilisation": None, "rho_max": None, "rho_mean": None}
    makespan = max(ends)
    avg = float(np.mean(jcts))
    return {"avg_jct_s": avg, "avg_jct_h": avg / 3600.0, "makespan_s": makespan,
            "makespan_h": makespan / 3600.0,
            "utilisation": busy / (total * makespan) if total and makespan > 0 else None,
            "rho_max": float(max(rhos)), "rho_mean": float(np.mean(rhos))}
