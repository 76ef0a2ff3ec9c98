"""Metrics of preemption: per priority class, useful and lost GPU-time, and chain lengths.

* **Per class** (a job's ``model.classes.user_class``): JCT = (completion - arrival + 1)
  slots in hours (mean, p50, p95 over its completed jobs), queueing delay = (first slot with
  workers - arrival) in hours (mean, over jobs that ran), misses = jobs not completed, or
  completed after their utility's target gamma3 (completion - arrival > gamma3).
* **GPU-time** (hours): ``gpu_hours`` held by the jobs' containers; ``lost_gpu_hours``: the
  GPU-time whose work the preemptions threw away, i.e. of the work units lost at stops and those
  withheld by restarts (``model.preemption``), the share of the GPUs the job held in the slot
  that produced (or withheld) them: a slot with g units on G GPU-hours that loses l of them
  wastes G l / g GPU-hours. Work done on CPU-mode servers costs CPU time, not GPU time: its
  losses are ``lost_cpu_hours`` (vCPU-hours of the job's workers there, the same shares).
  ``useful_gpu_hours`` = held - lost. ``cpu_work_gpu_hours``: the work units done on CPU-mode
  servers that count (credited, and not lost at a later stop), at the GPU-hours a unit takes on
  the job's fastest accelerator (GPUs per worker / units per worker-slot there): the GPU-time
  that degradation moved off the GPUs. ``lost_gpu_hours`` splits into ``_at_stops`` (work lost
  at stops) and ``_restarts`` (withheld by restarts); ``stops_losing_work``: the stops of a job
  for another (``STOPS``) that lost any work.
* **Over all jobs** (per class): ``jct_all_*`` counts an unfinished job at the horizon
  (T - arrival + 1 slots; ``unfinished`` says how many), ``slowdown_mean`` = that JCT over the
  job's isolated run time (``job.min_duration``: its fastest run alone on the cluster);
  ``per_hour``: preemptions, degradations and promotions per hour of the horizon.
* **Chains**: a preemption of B caused by A continues the chain of every earlier preemption of A
  (a victim that later preempts another job); the chain length of a preemption is 1 + the
  preemptions it triggered downstream (its descendants). ``chain_lengths`` lists it for every
  preemption with a known cause; ``chains`` sums them up (mean, p95, max, and the share of
  preemptions that are part of a chain longer than 1: with a descendant or an ancestor).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..model.classes import user_class
from ..model.preemption import (STOPS, PreemptionLedger, cpu_servers, parse_events,
                                record_of, slot_progress)
from ..model.schedule import WORKER

if TYPE_CHECKING:
    from ..model.instance import Instance
    from ..model.preemption import Event
    from ..model.schedule import Allocations


def chain_lengths(instance, schedule) -> list[int]:
    """1 + downstream preemptions, for every event caused by a job (module docstring)."""
    return chain_lengths_and_links(instance, schedule)[0]


def chain_summary(lengths: list[int], in_chain: list[bool]) -> dict[str, float | int]:
    """Mean, p95 and max chain length and the share of preemptions in a chain longer than 1
    (0 everywhere without preemptions)."""
    if not lengths:
        return {"preemptions": 0, "mean": 0.0, "p95": 0.0, "max": 0, "share_in_chains": 0.0}
    a = np.asarray(lengths, dtype=float)
    return {"preemptions": len(lengths), "mean": float(a.mean()),
            "p95": float(np.percentile(a, 95)), "max": int(a.max()),
            "share_in_chains": float(np.mean(in_chain))}


def chain_lengths_and_links(instance, schedule) -> tuple[list[int], list[bool]]:
    """Chain lengths and, per event with a cause, whether it is part of a chain longer than 1
    (module docstring)."""
    record = record_of(schedule.stats)
    if record is None:
        return [], []
    events = [e for e in parse_events(instance, record)[0]
              if e.by is not None and e.kind in STOPS]
    by_cause: dict[int, list[int]] = {}
    for n, e in enumerate(events):
        by_cause.setdefault(e.by, []).append(n)
    memo: dict[int, int] = {}

    def length(n: int) -> int:  # events are in slot order: children come later, no cycles
        if n not in memo:
            e = events[n]
            kids = [m for m in by_cause.get(e.job, ()) if events[m].slot >= e.slot and m != n]
            memo[n] = 1 + sum(length(m) for m in kids)
        return memo[n]

    lengths = [length(n) for n in range(len(events))]
    has_parent = [False] * len(events)
    for n, e in enumerate(events):
        for m in by_cause.get(e.job, ()):
            if events[m].slot >= e.slot and m != n:
                has_parent[m] = True
    return lengths, [ln > 1 or p for ln, p in zip(lengths, has_parent)]


def _gpu_per_unit(instance) -> np.ndarray:
    """GPUs x slots per work unit on each job's fastest accelerator type (0 if it has none)."""
    g = instance.resources.index("gpu")
    out = np.zeros(instance.I)
    for j in range(instance.I):
        best = 0.0
        for t in range(len(instance.types) if instance.typed else 1):
            usable = instance.usable[j, t] if instance.typed else True
            speed = int(instance.type_speed[j, t]) if instance.typed else 1
            gpus = float(instance.type_demand[j, t, g]) if instance.typed else \
                float(instance.worker_demand[j, g])
            if usable and gpus > 0 and (best == 0 or gpus / speed < best):
                best = gpus / speed
        out[j] = best
    return out


def lost_resource_hours(instance: Instance, allocations: Allocations, events: list[Event],
                        slot_s: float = 3600.0) -> dict[str, float]:
    """``lost_gpu_hours`` (split into ``lost_gpu_hours_at_stops`` and
    ``lost_gpu_hours_restarts``), ``lost_cpu_hours``, ``cpu_work_gpu_hours`` and
    ``stops_losing_work`` of a schedule's allocations under its preemption ``events`` (module
    docstring)."""
    return _replay_hours(instance, allocations, events, slot_s)[1]


def _replay_hours(instance: Instance, allocations: Allocations, events: list[Event],
                  slot_s: float) -> tuple[PreemptionLedger, dict[str, float]]:
    """The ledger replayed slot by slot as ``model.preemption.replay`` does (events refused
    there are skipped here too), each job's unsaved work carrying the GPU- and CPU-hours that
    produced it, spent when a stop loses it; ``(ledger, hours)``."""
    h = slot_s / 3600.0
    a = allocations
    H = instance.H
    cpu = cpu_servers(instance)
    g = instance.resources.index("gpu")
    c = instance.resources.index("cpu") if "cpu" in instance.resources else None
    demand = instance.row_demand(a.job, a.server, a.role) * a.count[:, None]
    gpu_h: dict[tuple[int, int], float] = {}
    cpu_h: dict[tuple[int, int], float] = {}
    cpu_gross: dict[tuple[int, int], float] = {}  # work units of the slot's CPU-mode workers
    inside = (a.slot >= 1) & (a.slot <= instance.horizon)
    on_cpu = inside & (a.role == WORKER) & (a.server < H)
    on_cpu[on_cpu] = cpu[a.server[on_cpu]]
    credit = np.zeros(len(a.job))
    if on_cpu.any():
        credit[on_cpu] = instance.worker_credit(a.job[on_cpu], a.server[on_cpu]) * a.count[on_cpu]
    for n in np.flatnonzero(inside):
        key = (int(a.job[n]), int(a.slot[n]))
        gpu_h[key] = gpu_h.get(key, 0.0) + float(demand[n, g]) * h
        if on_cpu[n]:
            cpu_h[key] = cpu_h.get(key, 0.0) + (0.0 if c is None else float(demand[n, c]) * h)
            cpu_gross[key] = cpu_gross.get(key, 0.0) + float(credit[n])
    ledger = PreemptionLedger(instance, whole_units=instance.progress != "placement")
    by_slot: dict[int, list[tuple[int, float]]] = {}
    for (j, t), x in slot_progress(instance, a).items():
        by_slot.setdefault(t, []).append((j, x))
    ev_slot: dict[int, list[Event]] = {}
    for e in events:
        ev_slot.setdefault(e.slot, []).append(e)
    unsaved_gpu, unsaved_cpu = np.zeros(instance.I), np.zeros(instance.I)
    cpu_units, unsaved_cpu_units = np.zeros(instance.I), np.zeros(instance.I)
    lost_gpu = lost_cpu = at_stops = 0.0
    losing = 0
    for t in range(1, instance.horizon + 1):
        for e in ev_slot.get(t, ()):
            try:
                lost = ledger.stop(e.job, e.slot, e.kind, e.by)
            except ValueError:  # an impossible event: the validator reports it
                continue
            if lost > 0:
                losing += e.kind in STOPS
                lost_gpu += unsaved_gpu[e.job]
                at_stops += unsaved_gpu[e.job]
                lost_cpu += unsaved_cpu[e.job]
                cpu_units[e.job] -= unsaved_cpu_units[e.job]
            unsaved_gpu[e.job] = unsaved_cpu[e.job] = unsaved_cpu_units[e.job] = 0.0
        for j, x in sorted(by_slot.get(t, ())):
            got = ledger.credit(j, x)
            if x <= 0:
                continue
            kept = got / x  # the share of the slot's work credited; the rest is withheld
            G, C = gpu_h.get((j, t), 0.0), cpu_h.get((j, t), 0.0)
            lost_gpu += (1.0 - kept) * G
            lost_cpu += (1.0 - kept) * C
            on_cpu = kept * cpu_gross.get((j, t), 0.0)
            cpu_units[j] += on_cpu
            if ledger.since_checkpoint[j] == 0:  # it checkpointed at the end of the slot
                unsaved_gpu[j] = unsaved_cpu[j] = unsaved_cpu_units[j] = 0.0
            else:
                unsaved_gpu[j] += kept * G
                unsaved_cpu[j] += kept * C
                unsaved_cpu_units[j] += on_cpu
    return ledger, {"lost_gpu_hours": float(lost_gpu),
                    "lost_gpu_hours_at_stops": float(at_stops),
                    "lost_gpu_hours_restarts": float(lost_gpu - at_stops),
                    "lost_cpu_hours": float(lost_cpu),
                    "cpu_work_gpu_hours": float((cpu_units * _gpu_per_unit(instance)).sum()) * h,
                    "stops_losing_work": int(losing)}


def _stats(x: list[float]) -> dict[str, float | None]:
    if not x:
        return {"mean": None, "p50": None, "p95": None}
    a = np.asarray(x, dtype=float)
    return {"mean": float(a.mean()), "p50": float(np.percentile(a, 50)),
            "p95": float(np.percentile(a, 95))}


def preemption_metrics(instance, schedule, slot_s: float = 3600.0,
                       classes: list[str] | None = None) -> dict[str, Any]:
    """The metrics of the module docstring; ``classes[i]``: job i's class (default: its
    ``model.classes.user_class``); ``slot_s``: seconds per slot, for hours."""
    h = slot_s / 3600.0
    classes = classes or [user_class(j) for j in instance.jobs]
    a = schedule.allocations
    workers = a.workers_per_job_slot(instance.I, instance.horizon)
    per_class: dict[str, dict[str, Any]] = {}
    for cls in sorted(set(classes)):
        idx = [i for i, c in enumerate(classes) if c == cls]
        jct, wait, miss, jct_all, slowdown = [], [], 0, [], []
        for i in idx:
            job, c = instance.jobs[i], schedule.completion[i]
            ran = np.flatnonzero(workers[i])
            if len(ran):
                wait.append((int(ran[0]) - job.arrival) * h)
            end = instance.horizon if c is None else c
            jct_all.append((end - job.arrival + 1) * h)
            slowdown.append((end - job.arrival + 1) / max(job.min_duration, 1))
            if c is None:
                miss += 1
                continue
            jct.append((c - job.arrival + 1) * h)
            if job.utility.kind == "sigmoid" and c - job.arrival > job.utility.target:
                miss += 1
        per_class[cls] = {"jobs": len(idx), "completed": len(jct), **{
            f"jct_{k}_h": v for k, v in _stats(jct).items()},
            **{f"jct_all_{k}_h": v for k, v in _stats(jct_all).items()},
            "unfinished": len(idx) - len(jct),
            "slowdown_mean": float(np.mean(slowdown)) if slowdown else None,
            "queueing_mean_h": float(np.mean(wait)) if wait else None, "misses": miss}
    g = instance.resources.index("gpu")
    demand = instance.row_demand(a.job, a.server, a.role)[:, g] * a.count
    held = float(demand.sum()) * h
    counts: dict[str, int] = {}
    record = record_of(schedule.stats)
    events = [] if record is None else parse_events(instance, record)[0]
    ledger, resource_h = _replay_hours(instance, a, events, slot_s)
    if record is not None:
        counts = {k: int(ledger.counts[k].sum()) for k in ("preemptions", "degradations",
                                                          "promotions")}
    cap = float(instance.capacity[:instance.H, g].sum()) * instance.horizon * h
    chains, in_chain = chain_lengths_and_links(instance, schedule)
    hours = instance.horizon * h
    stops = {"preemptions": 0, "degradations": 0, "promotions": 0, **counts}
    return {"per_class": per_class, "utility": schedule.total_utility,
            "completed": int(sum(c is not None for c in schedule.completion)),
            "gpu_hours": held, **resource_h,
            "useful_gpu_hours": held - resource_h["lost_gpu_hours"],
            "gpu_utilisation": held / cap if cap else 0.0,
            "stops": stops, "per_hour": {k: v / hours for k, v in stops.items()},
            "chain_lengths": chains, "chains": chain_summary(chains, in_chain)}
