"""Placement of a job's workers and PSs on servers, as a pluggable component.

A placement turns "job i gets k workers" into per-server counts, given the free capacity of
every server (global index: worker servers 0..H-1, PS servers H..H+K-1). Policies decide *how
many*; placements decide *where*. ``ceil(k b_i / B_i)`` PSs accompany k workers (constraint (6)).
"""
from __future__ import annotations

import importlib

import numpy as np

from ..model.numerics import fill, fit_count


class Placement:
    """Base: subclasses give the server orders; ``place`` fills them greedily."""

    name = "base"

    def reset(self, instance) -> None:  # noqa: B027 - optional hook
        pass

    def worker_order(self, instance, job: int, free: np.ndarray) -> np.ndarray:
        return np.arange(instance.H)

    def ps_order(self, instance, job: int, free: np.ndarray) -> np.ndarray:
        return np.arange(instance.K)

    def place(self, instance, job: int, k: int, free: np.ndarray):
        """Rows ``(server, role, count)`` for k workers and their PSs, or None if they don't fit.

        ``free`` is not modified; ``apply`` subtracts a placement from it.
        """
        if k <= 0:
            return []
        return self.place_counts(instance, job, k, instance.ps_needed(job, k), free)

    def place_counts(self, instance, job: int, workers: int, ps: int, free: np.ndarray):
        """Rows for exactly ``workers`` workers and ``ps`` PSs (either may be 0), or None.

        Used by policies that grow a job's allocation one worker (plus the PSs constraint (6)
        then needs) at a time; ``place`` is this with ``ps = ceil(k b_i / B_i)``.
        """
        H = instance.H
        w: list[tuple[int, int]] = []
        if workers > 0:
            wfit = fit_count(free[:H], instance.worker_demand[job])
            w = fill(self.worker_order(instance, job, free), wfit, workers)
            if w is None:
                return None
        p: list[tuple[int, int]] = []
        if ps > 0:
            pfit = fit_count(free[H:], instance.ps_demand[job])
            p = fill(self.ps_order(instance, job, free), pfit, ps)
            if p is None:
                return None
        return [(s, 0, n) for s, n in w] + [(H + s, 1, n) for s, n in p]

    def place_most(self, instance, job: int, k_max: int, free: np.ndarray):
        """The largest k <= k_max that fits, with its rows (k = 0 and [] if none)."""
        H = instance.H
        wcap = int(fit_count(free[:H], instance.worker_demand[job]).sum())
        pcap = int(fit_count(free[H:], instance.ps_demand[job]).sum())
        k = min(k_max, wcap)
        while k > 0 and instance.ps_needed(job, k) > pcap:
            k -= 1
        while k > 0:
            rows = self.place(instance, job, k, free)
            if rows is not None:
                return k, rows
            k -= 1
        return 0, []


def apply(instance, job: int, rows, free: np.ndarray) -> None:
    """Subtract placed containers from ``free`` in place."""
    for s, role, n in rows:
        free[s] -= n * (instance.worker_demand[job] if role == 0 else instance.ps_demand[job])


def free_after(instance, held) -> np.ndarray:
    """Capacity minus every container of ``held`` (job -> rows), a fresh array."""
    free = instance.capacity.copy()
    for job, rows in held.items():
        apply(instance, job, rows, free)
    return free


class FirstFit(Placement):
    """Servers in instance order."""

    name = "first-fit"


class RoundRobin(Placement):
    """Start each placement at the server after the one the previous placement started at.

    The paper places FIFO, DRF and RRH containers "round-robin" on available servers.
    """

    name = "round-robin"

    def reset(self, instance) -> None:
        self._next_w = 0
        self._next_p = 0

    def worker_order(self, instance, job, free):
        start = getattr(self, "_next_w", 0) % instance.H
        self._next_w = start + 1
        return np.roll(np.arange(instance.H), -start)

    def ps_order(self, instance, job, free):
        start = getattr(self, "_next_p", 0) % instance.K
        self._next_p = start + 1
        return np.roll(np.arange(instance.K), -start)


class Random(Placement):
    """Servers in a fresh random order for every placement (seeded; ``reset`` restarts the stream).

    Tiresias's simulator ``random`` scheme; a baseline for how much a smarter order matters.
    """

    name = "random"
    seeded = True  # get_placement passes the policy's seed

    def __init__(self, seed: int = 0):
        self.seed = int(seed)
        self._rng = np.random.default_rng(self.seed)

    def reset(self, instance) -> None:
        self._rng = np.random.default_rng(self.seed)

    def worker_order(self, instance, job, free):
        return self._rng.permutation(instance.H)

    def ps_order(self, instance, job, free):
        return self._rng.permutation(instance.K)


class Packing(Placement):
    """Best fit: the fullest server that still fits a container of the job first.

    Fullness of server s for job i = sum over the resources the container needs (d^r > 0) of
    free_s^r / c_s^r (lower = fuller); servers that fit no container go last; ties by index.
    Packing keeps whole servers free for large containers (Gandiva/HiveD-style packing).
    """

    name = "packing"

    @staticmethod
    def _order(free: np.ndarray, capacity: np.ndarray, demand: np.ndarray) -> np.ndarray:
        need = demand > 0
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = np.where(capacity[:, need] > 0, free[:, need] / capacity[:, need], 0.0)
        score = rel.sum(axis=1) if need.any() else np.zeros(len(free))
        fits = fit_count(free, demand) > 0
        return np.lexsort((np.arange(len(free)), score, ~fits))

    def worker_order(self, instance, job, free):
        H = instance.H
        return self._order(free[:H], instance.capacity[:H], instance.worker_demand[job])

    def ps_order(self, instance, job, free):
        H = instance.H
        return self._order(free[H:], instance.capacity[H:], instance.ps_demand[job])


# name -> "module:Class", resolved on use (a lower layer names what lives above it by string:
# the topology-aware tree placement is in oasis_opt.cluster, built on this module)
PLACEMENTS = {"first-fit": "oasis_opt.sim.placement:FirstFit",
              "round-robin": "oasis_opt.sim.placement:RoundRobin",
              "random": "oasis_opt.sim.placement:Random",
              "packing": "oasis_opt.sim.placement:Packing",
              "tree": "oasis_opt.cluster.tree:TreePlacement"}


def placement_class(name: str) -> type[Placement]:
    """The placement class registered as ``name`` (imported on first use)."""
    if name not in PLACEMENTS:
        raise ValueError(f"unknown placement {name!r} (known: {', '.join(sorted(PLACEMENTS))})")
    module, attr = PLACEMENTS[name].split(":")
    return getattr(importlib.import_module(module), attr)


def get_placement(name: str, *, seed: int = 0) -> Placement:
    """A fresh placement by name; ``seed`` goes to the seeded ones (``random``)."""
    cls = placement_class(name)
    return cls(seed=seed) if getattr(cls, "seeded", False) else cls()
