"""The one schedule format every policy returns, online or offline.

A ``Schedule`` holds, per job (instance order), whether it was admitted, and a sparse table of
allocations ``(job, slot, server, role, count)`` with servers in the instance's global index
(worker servers first). Completion slots and utilities are *derived* by ``ScheduleBuilder``
(completion = last slot with workers, when the worker-slots cover the workload); a schedule read
from a result file keeps what the file claims, and ``validate`` compares the two.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import numpy as np

from .numerics import DONE_EPS
from .registry import PLACEMENT_WORK_REMAINING, resolve

if TYPE_CHECKING:
    from .instance import Instance

WORKER, PS = 0, 1
ROLES = ("worker", "ps")


@dataclass(frozen=True)
class Allocations:
    """Column arrays of equal length: job index, slot (1..T), global server index, role, count."""

    job: np.ndarray
    slot: np.ndarray
    server: np.ndarray
    role: np.ndarray
    count: np.ndarray

    @staticmethod
    def empty() -> "Allocations":
        z = np.zeros(0, dtype=np.int64)
        return Allocations(z, z, z, z, z)

    @staticmethod
    def from_rows(rows: Iterable[tuple[int, int, int, int, int]]) -> "Allocations":
        """``rows``: iterable of (job, slot, server, role, count) integer tuples."""
        a = np.asarray(list(rows), dtype=np.int64).reshape(-1, 5)
        return Allocations(*(np.ascontiguousarray(a[:, c]) for c in range(5)))

    def __len__(self) -> int:
        return len(self.job)

    def rows(self) -> Iterator[tuple[int, int, int, int, int]]:
        return zip(self.job.tolist(), self.slot.tolist(), self.server.tolist(),
                   self.role.tolist(), self.count.tolist())

    def workers_per_job_slot(self, n_jobs: int, horizon: int) -> np.ndarray:
        """Dense ``[i, t]`` total workers (t = 0..T; column 0 stays 0 for in-range slots)."""
        out = np.zeros((n_jobs, horizon + 2), dtype=np.int64)
        m = (self.role == WORKER) & (self.slot >= 0) & (self.slot <= horizon + 1)
        np.add.at(out, (self.job[m], self.slot[m]), self.count[m])
        return out[:, : horizon + 1]

    def ps_per_job_slot(self, n_jobs: int, horizon: int) -> np.ndarray:
        out = np.zeros((n_jobs, horizon + 2), dtype=np.int64)
        m = (self.role == PS) & (self.slot >= 0) & (self.slot <= horizon + 1)
        np.add.at(out, (self.job[m], self.slot[m]), self.count[m])
        return out[:, : horizon + 1]


@dataclass(frozen=True)
class Schedule:
    """A policy's decisions on an instance.

    ``admitted[i]``: job i admitted. ``completion[i]``: completion slot or None.
    ``utility[i]``: f_i(completion - a_i), 0 if not completed. ``stats``: free-form
    (run time, solver status, bound, gap, per-job decision data ...).
    """

    policy: str
    admitted: tuple[bool, ...]
    allocations: Allocations
    completion: tuple[int | None, ...]
    utility: tuple[float, ...]
    total_utility: float
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def completed(self) -> np.ndarray:
        return np.array([c is not None for c in self.completion], dtype=bool)


def work_done(instance: Instance, allocations: Allocations) -> np.ndarray:
    """Work units each job's workers do in slots 0..T, shape (I,) int64: the sum over its worker
    rows of count x the speed of the server's accelerator type (``Instance.worker_credit``; one
    unit per worker-slot without types), the left-hand side of constraint (2)."""
    a = allocations
    m = (a.role == WORKER) & (a.slot >= 0) & (a.slot <= instance.horizon)
    out = np.zeros(instance.I, dtype=np.int64)
    if not instance.typed:  # one unit per worker-slot
        np.add.at(out, a.job[m], a.count[m])
    elif m.any():
        np.add.at(out, a.job[m], a.count[m] * instance.worker_credit(a.job[m], a.server[m]))
    return out


def derive_outcome(instance: Instance, allocations: Allocations, events: list | None = None
                   ) -> tuple[tuple[int | None, ...], tuple[float, ...]]:
    """Completion slot (last slot with workers, if the work units done cover ``work``) and
    utility.

    With preemption ``events`` (``model.preemption``; None or empty: none) the work units are
    those the preemption ledger credits: net of lost work and of restarts.

    Work units are ``work_done``'s (worker-slots without accelerator types). With
    ``instance.progress == "placement"`` they are the placement-aware worker-slots of
    ``oasis_opt.costmodel.placement`` (k T_ref / T_actual per slot), summed as the simulator does.
    """
    workers = allocations.workers_per_job_slot(instance.I, instance.horizon)
    done = work_done(instance, allocations) >= instance.work
    if instance.progress == "placement":  # placement-aware worker-slots (costmodel.placement)
        done = resolve(PLACEMENT_WORK_REMAINING)(instance, allocations)[1] <= DONE_EPS
    if events:
        from .preemption import replay

        done = replay(instance, allocations, events)[0].progress >= instance.work - DONE_EPS
    completion: list[int | None] = []
    for i in range(instance.I):
        if done[i] and workers[i].any():
            completion.append(int(np.flatnonzero(workers[i])[-1]))
        elif done[i] and instance.work[i] == 0:
            completion.append(int(instance.arrival[i]))  # nothing to train: done on arrival
        else:
            completion.append(None)
    utility = tuple(instance.utility_of(i, c) for i, c in enumerate(completion))
    return tuple(completion), utility


class ScheduleBuilder:
    """Collects allocations and admissions; ``build`` derives completions and utilities."""

    def __init__(self, instance: Instance):
        self.instance = instance
        self.admitted = np.zeros(instance.I, dtype=bool)
        self._chunks: list[np.ndarray] = []
        self._rows: list[tuple[int, int, int, int, int]] = []

    def extend(self, instance: Instance) -> None:
        """Take the jobs appended to the instance (the old jobs first, unchanged)."""
        grown = np.zeros(instance.I, dtype=bool)
        grown[:len(self.admitted)] = self.admitted
        self.instance, self.admitted = instance, grown

    def admit(self, job: int) -> None:
        self.admitted[job] = True

    def add(self, job: int, slot: int, server: int, role: int, count: int) -> None:
        if count:
            self._rows.append((job, slot, server, role, count))

    def add_array(self, rows: np.ndarray) -> None:
        """Add an (n, 5) integer array of (job, slot, server, role, count) rows."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1, 5)
        self._chunks.append(rows[rows[:, 4] != 0])

    def allocations(self) -> Allocations:
        parts = self._chunks + ([np.asarray(self._rows, dtype=np.int64).reshape(-1, 5)]
                                if self._rows else [])
        if not parts:
            return Allocations.empty()
        a = np.vstack(parts)
        a = a[np.lexsort((a[:, 3], a[:, 2], a[:, 1], a[:, 0]))]
        return Allocations(*(np.ascontiguousarray(a[:, c]) for c in range(5)))

    def build(self, policy: str, stats: dict | None = None, events: list | None = None
              ) -> Schedule:
        """``events``: preemption events (``model.preemption``) the outcome is accounted with."""
        alloc = self.allocations()
        completion, utility = derive_outcome(self.instance, alloc, events)
        return Schedule(policy, tuple(bool(x) for x in self.admitted), alloc, completion,
                        utility, float(sum(utility)), dict(stats or {}))
