"""Placement of a job's workers and PSs on servers, as a pluggable component.

A placement turns "job i gets k workers" into per-server counts, given the free capacity of
every server (global index: worker servers 0..H-1, PS servers H..H+K-1). Policies decide *how
many*; placements decide *where*. ``ceil(k b_i / B_i)`` PSs accompany k workers (constraint (6)).
"""
from __future__ import annotations

import numpy as np

EPS = 1e-9


def fit_count(free: np.ndarray, demand: np.ndarray) -> np.ndarray:
    """How many containers of ``demand`` (R,) fit on each server of ``free`` (S, R)."""
    need = demand > 0
    if not need.any():
        return np.full(len(free), np.iinfo(np.int64).max // 4, dtype=np.int64)
    return np.floor((free[:, need] + EPS) / demand[need]).min(axis=1).astype(np.int64).clip(0)


def fill(order: np.ndarray, fits: np.ndarray, count: int) -> list[tuple[int, int]] | None:
    """Fill servers in ``order`` up to their fit counts until ``count`` are placed (None if not)."""
    out = []
    for s in order:
        if count <= 0:
            break
        n = int(min(fits[s], count))
        if n > 0:
            out.append((int(s), n))
            count -= n
    return out if count <= 0 else None


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
        H = instance.H
        wfit = fit_count(free[:H], instance.worker_demand[job])
        w = fill(self.worker_order(instance, job, free), wfit, k)
        if w is None:
            return None
        pfit = fit_count(free[H:], instance.ps_demand[job])
        p = fill(self.ps_order(instance, job, free), pfit, instance.ps_needed(job, k))
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


PLACEMENTS = {"first-fit": FirstFit, "round-robin": RoundRobin}


def get_placement(name: str) -> Placement:
    if name not in PLACEMENTS:
        raise ValueError(f"unknown placement {name!r} (known: {', '.join(sorted(PLACEMENTS))})")
    return PLACEMENTS[name]()
