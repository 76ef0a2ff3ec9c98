"""Mutable cluster state of one simulation, owned by the simulator (policies read it)."""
from __future__ import annotations

import numpy as np


class ClusterState:
    """What a policy may look at in slot ``t``.

    ``remaining[i]``: worker-slots job i still needs (float: placement-aware progress may charge
    fractions). ``free``: capacity of every server (global index), reset at the start of each slot, which
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
        self.attained = np.zeros(instance.I)  # worker-slots received so far (Tiresias's service)
        self.cancelled = np.zeros(instance.I, dtype=bool)  # withdrawn by their owner (a service)
        self.free = instance.capacity.copy()

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
