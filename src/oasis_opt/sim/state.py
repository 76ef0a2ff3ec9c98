"""Mutable cluster state of one simulation, owned by the simulator (policies read it)."""
from __future__ import annotations

import numpy as np


class ClusterState:
    """What a policy may look at in slot ``t``.

    ``remaining[i]``: work units job i still needs (worker-slots without accelerator types; float:
    placement-aware progress may charge fractions). ``free``: capacity of every server (global index), reset at the start of each slot, which
    the policy may decrement as it places containers (the simulator keeps its own account). ``completion[i]``: slot or -1.
    """

    def __init__(self, instance):
        self.instance = instance
        self.t = 0
        self.arrived = np.zeros(instance.I, dtype=bool)
        self.admitted = np.zeros(instance.I, dtype=bool)
        self.decided = np.zeros(instance.I, dtype=bool)
        self.remaining = instance.work.astype(float)
        self.completion = np.full(instance.I, -1, dtype=np.int64)
        self.attained = np.zeros(instance.I)  # work units received so far (Tiresias's service)
        self.cancelled = np.zeros(instance.I, dtype=bool)  # withdrawn by their owner (a service)
        self.free = instance.capacity.copy()
        self.last_ran = np.zeros(instance.I, dtype=np.int64)  # last slot with workers (0: never)
        from ..model.preemption import PreemptionLedger

        self.ledger = PreemptionLedger(instance, whole_units=instance.progress != "placement")

    def extend(self, instance) -> None:
        """Take the jobs appended to the instance (``instance``: the same cluster, the old jobs
        first and unchanged, then new ones, arriving after slot ``t``): the new jobs start as
        a fresh state has them (not arrived, nothing done), the old jobs keep everything."""
        from ..model.preemption import stacked

        new = instance.jobs[self.instance.I:]
        fresh = ClusterState(instance.with_jobs(new))  # the new jobs' entries, as a start has
        for name in ("arrived", "admitted", "decided", "remaining", "completion", "attained",
                     "cancelled", "last_ran"):
            setattr(self, name, stacked(getattr(self, name), getattr(fresh, name)))
        self.ledger.extend(instance)
        self.instance = instance

    def stop(self, job: int, kind: str = "preempt", by: int | None = None) -> float:
        """Stop a running job in slot ``t`` (before its progress): ``kind`` ``"preempt"``,
        ``"suspend"``, ``"degrade"``, ``"promote"`` or ``"resize"`` (``model.preemption``), caused
        by job ``by`` (None: the policy's own decision). It loses its work since its last
        checkpoint (none for a suspend or a promote, which write one first; added back to
        ``remaining``, returned) and restarts when it next runs. ValueError when the job
        is not running (all but promote: it had workers in slot t - 1)."""
        if not self.admitted[job] or self.done[job] or not self.arrived[job]:
            raise ValueError(f"slot {self.t}: stop of job {self.instance.jobs[job].id}, "
                             "which is not active")
        if kind != "promote" and self.last_ran[job] != self.t - 1:
            raise ValueError(f"slot {self.t}: {kind} of job {self.instance.jobs[job].id}, "
                             "which did not run in the previous slot")
        lost = self.ledger.stop(job, self.t, kind, by)
        self.remaining[job] += lost
        return lost

    @property
    def degraded(self) -> np.ndarray:
        """Jobs degraded to CPU mode (not promoted since)."""
        return self.ledger.degraded

    @property
    def done(self) -> np.ndarray:
        """Completed or cancelled: nothing more to allocate."""
        return (self.completion >= 0) | self.cancelled

    def active(self) -> np.ndarray:
        """Indices of admitted, unfinished jobs that have arrived, in arrival then instance order."""
        idx = np.flatnonzero(self.admitted & ~self.done & self.arrived)
        return idx[np.argsort(self.instance.arrival[idx], kind="stable")]

    def waiting(self) -> np.ndarray:
        """Arrived jobs whose admission is still undecided (policies that queue jobs)."""
        idx = np.flatnonzero(self.arrived & ~self.decided)
        return idx[np.argsort(self.instance.arrival[idx], kind="stable")]
