"""FIFO: the default of Hadoop and Spark (paper §V baseline 1).

Documented choices (A8):

* every job is admitted; jobs queue in arrival order, ties in instance order;
* job i runs with a fixed k_i ~ U{1..30} workers (``fixed_workers``: seeded, capped at N_i, at
  its workload in worker-slots and at what fits on the empty cluster) and ceil(k_i b_i / B_i)
  PSs (constraint (6));
* strict head-of-line order, no backfilling: at each event (an arrival, or the slot after a
  completion) jobs start from the head of the queue while the head's k_i workers and PSs can be
  placed; the first that cannot blocks every job behind it;
* a started job keeps the same containers on the same servers until it completes;
* a job with k_i = 0 (it cannot run even alone on the empty cluster) is admitted but leaves the
  queue at once (it would block it forever); it earns 0 like every unfinished job (A7);
* placement round-robin by default, as the paper says for FIFO.
"""
from __future__ import annotations

from collections import deque

from ..sim.placement import Placement, apply
from .common import EventPolicy, fixed_workers


class FifoPolicy(EventPolicy):
    name = "fifo"

    def __init__(self, *, seed: int = 0, placement: str | Placement = "round-robin",
                 max_workers: int = 30):
        super().__init__(seed=seed, placement=placement)
        if max_workers < 1:
            raise ValueError(f"max_workers: must be >= 1, got {max_workers}")
        self.max_workers = int(max_workers)

    def start(self, instance, state) -> None:
        super().start(instance, state)
        self.k = fixed_workers(instance, self.seed, self.max_workers)
        self.queue: deque[int] = deque()
        self.never_runnable = 0
        self.blocked_events = 0  # events at which the head could not start

    def admit(self, job, t, state) -> bool:
        if self.k[job] > 0:
            self.queue.append(job)
        else:
            self.never_runnable += 1
        return True

    def decide(self, t, state) -> None:
        free = self.free_after_held()
        while self.queue:
            head = self.queue[0]
            rows = self.placement.place(self.instance, head, int(self.k[head]), free)
            if rows is None:
                self.blocked_events += 1
                break  # head-of-line blocking: nobody behind the head may start
            apply(self.instance, head, rows, free)
            self.held[head] = rows
            self.queue.popleft()

    def stats(self) -> dict:
        return {**super().stats(), "never_runnable": self.never_runnable,
                "blocked_events": self.blocked_events, "workers": self.k.tolist()}
