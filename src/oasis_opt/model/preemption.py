"""Preemption events and their cost accounting: one ledger, driven online by the simulator and
replayed from a schedule by the validator.

A schedule may record **events** ``(job, slot, kind, by)``: in slot t, before that slot's
progress, the job was stopped. ``kind`` is

* ``"preempt"``: stopped and requeued (a kill, Tiresias's preemption, RRH's pause);
* ``"suspend"``: stopped and requeued after writing a checkpoint (a kill with
  checkpoint-restart): it loses no work, and pays the restart when it runs again;
* ``"degrade"``: stopped and restarted in CPU mode; until a ``"promote"`` its workers sit only on
  CPU-mode servers (accelerator type ``"cpu"``);
* ``"promote"``: a degraded job stopped on CPU to restart on accelerators. The scheduler
  promotes a job when accelerators free up, not to evict it, so the job first writes a
  checkpoint at the slot boundary (a graceful migration): it loses no work, and its restart on
  the accelerators takes the write too, rho_i + w_i slots;
* ``"resize"``: stopped to restart with another worker count.

``by`` names the job whose admission caused the stop (None: the policy's own decision). Every
event costs the same (``costmodel.preemption``) but for the saving kinds (``SAVES``: suspend and
promote): the job loses the work units credited since its last checkpoint (it checkpoints at the
end of every c_i-th slot with workers since its last (re)start; a suspend or a promote saves
them), and in the n-th slot with workers after the stop it is credited only
floor(progress x clip(n + 1 - r, 0, 1)) units (the restart), r = rho_i, or rho_i + w_i after a
promote (the write before the restart; a suspend's write happens while its preemptor's
containers start). A job completes when its credited units, net of lost work, reach W_i.
Schedules without events are accounted as before.

In a schedule the record lives in ``stats["preemption"]``: ``events`` (``[job id, slot, kind,
by id or null]``) and ``jobs`` (per-job counters in instance order: ``preemptions``,
``degradations``, ``promotions``, ``resizes``, ``lost_work``, ``restart_slots``; a suspend
counts as a preemption). The record is
written only when there is an event, so schedules without preemption are unchanged.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .numerics import WORK_EPS
from .registry import PLACEMENT_PROGRESS, PREEMPTION_COSTS, RESTART_SHARE, resolve
from .schedule import WORKER

if TYPE_CHECKING:
    from .instance import Instance
    from .schedule import Allocations

KINDS = ("preempt", "degrade", "promote", "resize", "suspend")
STOPS = ("preempt", "degrade", "suspend")  # the kinds that stop a job for another one
SAVES = ("suspend", "promote")  # the kinds that write a checkpoint before the stop: nothing lost
COUNTERS = ("preemptions", "degradations", "promotions", "resizes", "lost_work", "restart_slots")
_COUNTER_OF = {"preempt": "preemptions", "degrade": "degradations", "promote": "promotions",
               "resize": "resizes", "suspend": "preemptions"}
CPU_MODE = "cpu"  # the accelerator type name of CPU-mode servers


@dataclass(frozen=True)
class Event:
    job: int
    slot: int
    kind: str
    by: int | None = None


def cpu_servers(instance: Instance) -> np.ndarray:
    """(H,) bool: worker servers of the CPU-mode type (none without accelerator types)."""
    if not instance.typed:
        return np.zeros(instance.H, dtype=bool)
    return np.array([instance.types[g] == CPU_MODE for g in instance.worker_type.tolist()],
                    dtype=bool)


def stacked(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """A per-job array of the old jobs followed by the new jobs' (``new``: the array a fresh
    object has for an instance of the new jobs alone): what it becomes when jobs are appended."""
    return np.concatenate([old, new.astype(old.dtype, copy=False)])


class PreemptionLedger:
    """Per-job progress net of lost work, checkpoints, restarts and counters (module docstring).

    ``whole_units``: credit whole work units (chunk-time progress); False for the fractional
    placement-aware progress."""

    def __init__(self, instance: Instance, whole_units: bool = True):
        costs = resolve(PREEMPTION_COSTS)(instance)
        self.checkpoint_slots = costs.checkpoint_slots
        self.restart_slots_needed = costs.restart_slots
        self.write_slots = costs.write_slots
        self.whole = whole_units
        I = instance.I
        self.progress = np.zeros(I)  # credited units net of lost work
        self.unsaved = np.zeros(I)  # units credited since the last checkpoint
        self.since_checkpoint = np.zeros(I, dtype=np.int64)  # slots with workers since then
        self.restart_n = np.full(I, -1, dtype=np.int64)  # slots with workers since a stop; -1: none
        self.restart_need = np.zeros(I)  # slots the restart under way takes (rho, + w after a promote)
        self.withheld = np.zeros(I)  # units not credited because of restarts
        self.degraded = np.zeros(I, dtype=bool)
        self.counts = {c: np.zeros(I, dtype=np.int64 if c not in ("lost_work",) else float)
                       for c in COUNTERS}
        self.events: list[Event] = []

    def extend(self, instance: Instance) -> None:
        """Take the jobs appended to the instance (``instance``: the old jobs first, unchanged,
        then new ones): their costs and zeroed counters join, the old jobs' entries stay."""
        n = len(self.progress)
        fresh = PreemptionLedger(instance.with_jobs(instance.jobs[n:]), self.whole)
        for name in ("checkpoint_slots", "restart_slots_needed", "write_slots", "progress",
                     "unsaved", "since_checkpoint", "restart_n", "restart_need", "withheld",
                     "degraded"):
            setattr(self, name, stacked(np.asarray(getattr(self, name)),
                                        np.asarray(getattr(fresh, name))))
        self.counts = {c: stacked(self.counts[c], fresh.counts[c]) for c in COUNTERS}

    def stop(self, job: int, slot: int, kind: str, by: int | None = None) -> float:
        """Record an event; return the work units lost. ValueError on an impossible event (a
        promote of a job that is not degraded, a degrade of one that is)."""
        if kind not in KINDS:
            raise ValueError(f"kind: unknown event {kind!r} (known: {', '.join(KINDS)})")
        if kind == "promote" and not self.degraded[job]:
            raise ValueError("promote: the job is not degraded")
        if kind == "degrade" and self.degraded[job]:
            raise ValueError("degrade: the job is already degraded")
        lost = 0.0 if kind in SAVES else float(self.unsaved[job])
        self.progress[job] -= lost
        self.counts["lost_work"][job] += lost
        self.counts[_COUNTER_OF[kind]][job] += 1
        self.unsaved[job] = 0.0
        self.since_checkpoint[job] = 0
        self.restart_n[job] = 0
        self.restart_need[job] = self.restart_slots_needed[job] + (
            self.write_slots[job] if kind == "promote" else 0.0)
        if kind in ("degrade", "promote"):
            self.degraded[job] = kind == "degrade"
        self.events.append(Event(job, slot, kind, by))
        return lost

    def credit(self, job: int, gross: float) -> float:
        """Credit a slot with workers whose progress is ``gross`` units; return what counts."""
        got = gross
        n = int(self.restart_n[job])
        if n >= 0:
            share = resolve(RESTART_SHARE)(n, float(self.restart_need[job]))
            got = math.floor(gross * share + WORK_EPS) if self.whole else gross * share
            if share < 1.0:
                self.counts["restart_slots"][job] += 1
                self.restart_n[job] = n + 1
            else:
                self.restart_n[job] = -1
            self.withheld[job] += gross - got
        self.progress[job] += got
        self.unsaved[job] += got
        self.since_checkpoint[job] += 1
        if self.since_checkpoint[job] >= self.checkpoint_slots[job]:
            self.unsaved[job] = 0.0
            self.since_checkpoint[job] = 0
        return got

    def record(self, instance: Instance) -> dict[str, Any]:
        """The ``stats["preemption"]`` document (module docstring)."""
        ids = [j.id for j in instance.jobs]
        return {"events": [[ids[e.job], e.slot, e.kind, None if e.by is None else ids[e.by]]
                           for e in self.events],
                "jobs": {c: [v.item() for v in self.counts[c]] for c in COUNTERS}}


def parse_events(instance: Instance, record: Any) -> tuple[list[Event], list[str]]:
    """Events from a ``stats["preemption"]`` record, in slot order (stable), and the problems
    found in its structure (unknown job, kind, bad slot ...), one line each."""
    problems: list[str] = []
    events: list[Event] = []
    raw = record.get("events") if isinstance(record, dict) else None
    if not isinstance(raw, list):
        return [], ["stats.preemption.events: expected a list"]
    index = instance.job_index
    for n, e in enumerate(raw):
        where = f"stats.preemption.events[{n}]"
        if not (isinstance(e, (list, tuple)) and len(e) == 4):
            problems.append(f"{where}: expected [job, slot, kind, by]")
            continue
        job, slot, kind, by = e
        if job not in index or (by is not None and by not in index):
            problems.append(f"{where}: unknown job {job if job not in index else by!r}")
        elif not isinstance(slot, int) or isinstance(slot, bool):
            problems.append(f"{where}: slot {slot!r} is not an integer")
        elif kind not in KINDS:
            problems.append(f"{where}: unknown kind {kind!r} (known: {', '.join(KINDS)})")
        else:
            events.append(Event(index[job], slot, kind, None if by is None else index[by]))
    events.sort(key=lambda ev: ev.slot)
    return events, problems


def slot_progress(instance: Instance, allocations: Allocations) -> dict[tuple[int, int], float]:
    """Gross progress per (job, slot) with workers, as the simulator credits it (work units by
    server type; placement-aware worker-slots when ``instance.progress == "placement"``)."""
    a = allocations
    m = (a.role == WORKER) & (a.slot >= 1) & (a.slot <= instance.horizon)
    out: dict[tuple[int, int], float] = {}
    if instance.progress == "placement":
        placement_progress = resolve(PLACEMENT_PROGRESS)
        rows: dict[tuple[int, int], list] = {}
        for j, t, s, r, c in a.rows():
            if 1 <= t <= instance.horizon:
                rows.setdefault((j, t), []).append((s, r, c))
        for (j, t), rr in rows.items():
            if any(r == WORKER for _, r, _ in rr):
                out[(j, t)] = float(placement_progress(instance, j, rr, t))
        return out
    credit = (instance.worker_credit(a.job[m], a.server[m]) if instance.typed
              else np.ones(int(m.sum()), dtype=np.int64)) * a.count[m]
    for j, t, g in zip(a.job[m].tolist(), a.slot[m].tolist(), credit.tolist()):
        out[(j, t)] = out.get((j, t), 0.0) + float(g)
    return out


def replay(instance: Instance, allocations: Allocations, events: list[Event]
           ) -> tuple[PreemptionLedger, list[tuple[Event, str]]]:
    """Run the ledger over a schedule: each slot its events, then its progress. Returns the
    ledger and the events it refused (with the reason)."""
    ledger = PreemptionLedger(instance, whole_units=instance.progress != "placement")
    gross = slot_progress(instance, allocations)
    by_slot: dict[int, list[tuple[int, float]]] = {}
    for (j, t), g in gross.items():
        by_slot.setdefault(t, []).append((j, g))
    ev_slot: dict[int, list[Event]] = {}
    for e in events:
        ev_slot.setdefault(e.slot, []).append(e)
    refused: list[tuple[Event, str]] = []
    for t in range(1, instance.horizon + 1):
        for e in ev_slot.get(t, ()):
            try:
                ledger.stop(e.job, e.slot, e.kind, e.by)
            except ValueError as err:
                refused.append((e, str(err)))
        for j, g in sorted(by_slot.get(t, ())):
            ledger.credit(j, g)
    return ledger, refused


def record_of(stats: dict[str, Any]) -> Any:
    """The preemption record of a schedule's stats, or None."""
    return stats.get("preemption") if isinstance(stats, dict) else None
