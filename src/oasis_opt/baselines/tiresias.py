"""Tiresias (Gu et al., NSDI 2019): discretised two-dimensional least-attained-service (2D-LAS).

A modern peer, in the same slot model as the paper's baselines.

* **Job size.** Tiresias schedules rigid jobs (a fixed GPU count); here job i asks for the
  same fixed k_i ~ U{1..30} workers as FIFO and RRH (``fixed_workers``, same seed gives the
  same k_i), trimmed in its last slots to ceil(remaining worker-slots), with
  ceil(k b_i / B_i) PSs; all of them or nothing (gang).
* **Attained service** (the 2D of 2D-LAS) = workers x slots received, i.e. worker-slots
  (``state.attained``), counted since the job last entered the top queue.
* **Discretised priority queues** Q_0 (highest) .. Q_{K-1}. A new job enters Q_0; a job in Q_q
  whose attained service reaches ``limits[q]`` moves to the back of Q_{q+1}. Defaults follow
  Tiresias's simulator (``SymbioticLab/Tiresias``, ``jobs.py``: two queues, queue_limit
  [3250, 7200, 18000] GPU-seconds, the first K-1 used), converted to worker-slots with a slot of
  ``slot_seconds`` = 3600 s (the paper's "1 hour or longer"): K = 2 and one threshold of
  3250/3600 = 0.90 worker-slots. ``queue_limits`` overrides them (worker-slots, increasing).
* **Order.** Queues highest first; FIFO inside a queue by the slot the job entered it (ties by
  arrival, then instance order). Every slot the jobs are placed in that order, each if all its
  workers and PSs fit, else skipped (lower jobs may still run: the simulator's fit-first pass).
* **Preemptive at slot boundaries.** The order is recomputed every slot; a running job that no
  longer fits is preempted (its progress is kept: asynchronous training) and containers are
  placed afresh every slot.
* **Starvation avoidance** (the simulator's ``solve_starvation`` knob, run as ``dlas-gpu-2``):
  a job in a lower queue whose slots spent waiting since it last entered Q_0 (counted once it
  has run) reach ``promote_knob`` x the slots it ran since then moves to the back of Q_0, and
  its attained service and both counters restart from 0. ``promote_knob = 0`` disables
  promotion; default 2.
* every job is admitted; placement first-fit by default (round-robin, random, packing ...
  through ``placement``).
"""
from __future__ import annotations

import math

import numpy as np

from ..model.numerics import DONE_EPS
from ..sim.core import OnlinePolicy
from ..sim.placement import Placement, apply
from .common import fixed_workers, make_placement, work_cap

TIRESIAS_QUEUE_LIMITS_S = (3250.0, 7200.0, 18000.0)  # SymbioticLab/Tiresias simulator/jobs.py


class TiresiasPolicy(OnlinePolicy):
    name = "tiresias"

    def __init__(self, *, seed: int = 0, placement: str | Placement = "first-fit",
                 max_workers: int = 30, num_queues: int = 2,
                 queue_limits: tuple[float, ...] | list[float] | None = None,
                 slot_seconds: float = 3600.0, promote_knob: float = 2.0):
        if max_workers < 1:
            raise ValueError(f"max_workers: must be >= 1, got {max_workers}")
        if queue_limits is None:
            if not 1 <= num_queues <= len(TIRESIAS_QUEUE_LIMITS_S) + 1:
                raise ValueError(f"num_queues: must be in 1..{len(TIRESIAS_QUEUE_LIMITS_S) + 1} "
                                 f"with the default limits, got {num_queues}")
            if not slot_seconds > 0:
                raise ValueError(f"slot_seconds: must be > 0, got {slot_seconds}")
            queue_limits = [s / slot_seconds for s in TIRESIAS_QUEUE_LIMITS_S[:num_queues - 1]]
        limits = [float(x) for x in queue_limits]
        if any(not (x > 0 and math.isfinite(x)) for x in limits) or limits != sorted(set(limits)):
            raise ValueError(f"queue_limits: must be positive, finite and increasing, got {limits}")
        if not (promote_knob >= 0 and math.isfinite(promote_knob)):
            raise ValueError(f"promote_knob: must be >= 0, got {promote_knob}")
        self.seed = int(seed)
        self.placement_option = placement
        make_placement(placement, self.seed)
        self.max_workers = int(max_workers)
        self.limits = tuple(limits)
        self.promote_knob = float(promote_knob)

    def start(self, instance, state) -> None:
        self.instance = instance
        self.placement = make_placement(self.placement_option, self.seed)
        self.placement.reset(instance)
        self.k = fixed_workers(instance, self.seed, self.max_workers)
        I = instance.I
        self.queue = np.zeros(I, dtype=np.int64)
        self.entered = np.zeros(I, dtype=np.int64)  # slot the job entered its queue
        self.base = np.zeros(I)  # state.attained when the job last entered Q_0
        self.ran_slots = np.zeros(I, dtype=np.int64)  # slots run since entering Q_0
        self.waited = np.zeros(I, dtype=np.int64)  # waited since entering Q_0, once run
        self.ran_now = np.zeros(I, dtype=bool)
        self.demotions = 0
        self.promotions = 0
        self.preemptions = 0

    def on_arrival(self, job, t, state):
        self.entered[job] = t
        return True

    def service(self, job: int, state) -> float:
        """Attained service since the job last entered Q_0, in worker-slots."""
        return float(state.attained[job] - self.base[job])

    def _requeue(self, t: int, state, jobs: np.ndarray) -> None:
        for j in jobs.tolist():
            if (self.promote_knob > 0 and self.queue[j] > 0 and self.ran_slots[j] > 0
                    and self.waited[j] >= self.promote_knob * self.ran_slots[j]):
                self.queue[j], self.entered[j] = 0, t
                self.base[j] = state.attained[j]
                self.ran_slots[j] = self.waited[j] = 0
                self.promotions += 1
            while self.queue[j] < len(self.limits) and \
                    self.service(j, state) >= self.limits[self.queue[j]] - DONE_EPS:
                self.queue[j] += 1
                self.entered[j] = t
                self.demotions += 1

    def allocate(self, t, state):
        inst = self.instance
        jobs = state.active()  # arrival order, then instance order
        self._requeue(t, state, jobs)
        order = jobs[np.lexsort((np.arange(len(jobs)), self.entered[jobs], self.queue[jobs]))]
        was_running = self.ran_now.copy()
        self.ran_now[:] = False
        for j in order.tolist():
            k = min(int(self.k[j]), work_cap(state, j))
            if k <= 0:
                continue
            rows = self.placement.place(inst, j, k, state.free)
            if rows is None:
                self.preemptions += bool(was_running[j])
                continue
            apply(inst, j, rows, state.free)
            self.ran_now[j] = True
            for s, role, n in rows:
                yield j, s, role, n

    def on_slot_end(self, t, state, completed) -> None:
        jobs = state.active()
        ran = self.ran_now[jobs]
        self.ran_slots[jobs[ran]] += 1
        pending = jobs[~ran]
        self.waited[pending[self.ran_slots[pending] > 0]] += 1

    def stats(self) -> dict:
        return {"demotions": self.demotions, "promotions": self.promotions,
                "preemptions": self.preemptions, "queue_limits": list(self.limits),
                "workers": self.k.tolist()}
