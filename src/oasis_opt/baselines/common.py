"""Pieces the baseline policies share: fixed worker counts, dominant shares, held allocations.

* ``fixed_workers``: the paper's fixed per-job worker number for FIFO and RRH (A8),
  k_i ~ U{1..30} drawn once per job from a seeded stream, capped at N_i, at the job's workload
  ceil(E_i N_i x_i) (more workers than worker-slots of work only waste) and at what fits on the
  empty cluster (with ceil(k b_i / B_i) <= k PSs, constraints (6)-(7)); 0 marks a job that can
  never run.
* ``DominantShare``: dominant shares over the *pooled* cluster, C^r = sum over all H + K servers
  of c^r (DRF, Dorm): share_i(k, p) = max_r (k w_i^r + p s_i^r) / C^r.
* ``EventPolicy``: base of policies that decide only at events - a slot in which a job arrives,
  or the slot after one completes - and between events keep every job's containers on the
  same servers (A8: FIFO, DRF, RRH and Dorm hold their allocations between events).
"""
from __future__ import annotations

import heapq
import math
from collections import defaultdict
from typing import Callable, Sequence

import numpy as np

from ..model.numerics import DONE_EPS, workers_alone
from ..sim.core import OnlinePolicy
from ..sim.placement import Placement, apply, free_after, get_placement

Rows = list[tuple[int, int, int]]  # (global server, role, count)


def max_workers_alone(instance) -> np.ndarray:
    """Per job, the most workers (<= N_i) that fit with their PSs on the empty cluster.

    k workers need ceil(k b_i / B_i) PSs (6) and at most k PSs (7); both pools are checked
    with per-server fit counts, so the answer respects fragmentation (``numerics.workers_alone``).
    """
    return np.array([workers_alone(instance, i) for i in range(instance.I)], dtype=np.int64)


def ps_table(instance) -> list[list[int]]:
    """``[j][k]`` = ceil(k b_j / B_j) PSs (``Instance.ps_needed``) for k = 0..N_j + 1, as ints:
    the policies ask this in their inner loops, where the array call would dominate."""
    return [instance.ps_needed(j, np.arange(int(instance.chunks[j]) + 2)).tolist()
            for j in range(instance.I)]


def fixed_workers(instance, seed: int, high: int = 30) -> np.ndarray:
    """k_i ~ U{1..high} (one draw per job, instance order, ``numpy.random.default_rng(seed)``),
    capped at N_i, at ceil(E_i N_i x_i) worker-slots of work and at ``max_workers_alone``."""
    if high < 1:
        raise ValueError(f"max_workers: must be >= 1, got {high}")
    draw = np.random.default_rng(seed).integers(1, high + 1, size=instance.I)
    work = np.maximum(instance.work, 1)
    return np.minimum.reduce([draw, instance.chunks, work, max_workers_alone(instance)])


class DominantShare:
    """Dominant shares over the pooled cluster resources C^r = sum_s c_s^r (resources with
    C^r = 0 are ignored): share_i(k, p) = max_r (k w_i^r + p s_i^r) / C^r."""

    def __init__(self, instance):
        total = instance.capacity.sum(axis=0)
        self.inv = np.where(total > 0, 1.0 / np.where(total > 0, total, 1.0), 0.0)
        self.w = instance.worker_demand * self.inv
        self.s = instance.ps_demand * self.inv
        # mu_i: share of one worker plus its fractional PSs b_i / B_i (linear in k; Dorm's MILP)
        ratio = np.divide(instance.worker_bw, instance.ps_bw,
                          out=np.zeros(instance.I), where=instance.ps_bw > 0)
        self.per_worker = (self.w + ratio[:, None] * self.s).max(axis=1)

    def __call__(self, job: int, k: int, p: int) -> float:
        return float((k * self.w[job] + p * self.s[job]).max())

    def with_ps(self, ps: list[list[int]]):
        """share_i(k) of k workers with their ceil(k b_i / B_i) PSs, from ``ps_table``."""
        return lambda job, k: self(job, k, ps[job][k])


def progressive_fill(jobs: Sequence[int], cap: dict[int, int],
                     share: Callable[[int, int], float],
                     try_grow: Callable[[int, int], bool]) -> dict[int, int]:
    """DRF progressive filling in whole workers.

    Repeatedly pick the job with the lowest dominant share ``share(j, k_j)`` (ties: earlier in
    ``jobs``) and ask ``try_grow(j, k_j + 1)`` to add one worker (with the PSs it needs; it
    commits the resources on success). A job leaves the filling when it reaches ``cap[j]`` or
    its next worker does not fit: resources only shrink, so it never fits later in this round.
    """
    k = {j: 0 for j in jobs}
    heap = [(0.0, pos, j) for pos, j in enumerate(jobs) if cap[j] > 0]
    heapq.heapify(heap)
    while heap:
        _, pos, j = heapq.heappop(heap)
        if not try_grow(j, k[j] + 1):
            continue
        k[j] += 1
        if k[j] < cap[j]:
            heapq.heappush(heap, (share(j, k[j]), pos, j))
    return k


def grow_one(placement: Placement, instance, ps: list[list[int]], job: int, k: int,
             free: np.ndarray, rows: Rows) -> bool:
    """Place the k-th worker of ``job`` and the PSs it adds, ceil(k b/B) - ceil((k-1) b/B)
    (constraint (6); ``ps`` = ``ps_table``), on ``free``; on success subtract them from
    ``free``, append them to ``rows`` and return True. Refuses when ceil(k b/B) > k (7)."""
    if ps[job][k] > k:
        return False
    placed = placement.place_counts(instance, job, 1, ps[job][k] - ps[job][k - 1], free)
    if placed is None:
        return False
    apply(instance, job, placed, free)
    rows.extend(placed)
    return True


def merge_rows(rows: Rows) -> Rows:
    """Combine rows on the same (server, role); deterministic order."""
    acc: dict[tuple[int, int], int] = defaultdict(int)
    for s, role, n in rows:
        acc[(int(s), int(role))] += int(n)
    return [(s, role, n) for (s, role), n in sorted(acc.items()) if n > 0]


def make_placement(placement: str | Placement, seed: int) -> Placement:
    """A placement component from a name in ``PLACEMENTS`` (seeded ones get ``seed``) or as is."""
    if isinstance(placement, Placement):
        return placement
    return get_placement(placement, seed=seed)


def work_cap(state, job: int) -> int:
    """Workers that still help: ceil(remaining worker-slots)."""
    return max(0, math.ceil(state.remaining[job] - DONE_EPS))


class EventPolicy(OnlinePolicy):
    """Decide at events, hold containers between them.

    An event is a slot in which a job arrives or the slot after a job completed (its containers
    are released then). ``decide(t, state)`` rewrites ``self.held`` (job -> rows); every slot
    ``allocate`` emits the held rows unchanged, so a job keeps its servers between events.
    """

    def __init__(self, *, seed: int = 0, placement: str | Placement = "round-robin"):
        self.seed = int(seed)
        self.placement_option = placement
        make_placement(placement, self.seed)  # fail fast on an unknown name

    def start(self, instance, state) -> None:
        self.instance = instance
        self.placement = make_placement(self.placement_option, self.seed)
        self.placement.reset(instance)
        self.held: dict[int, Rows] = {}
        self._event = False
        self.events = 0

    def on_arrival(self, job, t, state):
        self._event = True
        return self.admit(job, t, state)

    def admit(self, job: int, t: int, state) -> bool:
        return True

    def on_slot_end(self, t, state, completed) -> None:
        for j in completed.tolist():
            self.held.pop(int(j), None)
        if len(completed):
            self._event = True

    def decide(self, t: int, state) -> None:
        raise NotImplementedError

    def free_after_held(self) -> np.ndarray:
        """Capacity minus every held container."""
        return free_after(self.instance, self.held)

    def allocate(self, t, state):
        if self._event:
            self._event = False
            self.events += 1
            self.decide(t, state)
        for job, rows in list(self.held.items()):
            apply(self.instance, job, rows, state.free)
            for s, role, n in rows:
                yield job, s, role, n

    def stats(self) -> dict:
        return {"events": self.events}
