"""Placement of a job's workers and PSs on servers, as a pluggable component.

A placement turns "job i gets k workers" into per-server counts, given the free capacity of
every server (global index: worker servers 0..H-1, PS servers H..H+K-1). Policies decide *how
many*; placements decide *where*. ``ceil(k b_i / B_i)`` PSs accompany k workers (constraint (6)).

**Accelerator types** (the rule every type-agnostic policy inherits). A job's workers go on one
accelerator type it can use: the types are tried fastest first for the job (ties: the type
listed first), and the first on which all of them fit is taken, so k workers land where they make
the most progress; ``place_most`` takes the type on which the most progress fits (workers x
speed, capped at the work left). A job that allows ``span_types`` is placed over all its types at once, faster servers
first. ``on_type`` pins a placement to one type (a job growing one worker at a time stays on the
type of its first). Without types there is one type and nothing changes.
"""
from __future__ import annotations

import importlib

import numpy as np

from ..model.numerics import fill, fit_count, useful_workers


def worker_fit_options(instance, job: int, free: np.ndarray, on_type: int | None = None
                       ) -> list[tuple[int | None, np.ndarray]]:
    """Where the job's workers may go, in the order to try: ``(type, fits)`` pairs, ``fits``
    (H,) the job's worker fit count per worker server restricted to that type (module
    docstring); one pair ``(None, fits over all its types)`` for a job that may span types."""
    H = instance.H
    fits = instance.worker_fits(job, free[:H])
    if on_type is not None:
        return [(on_type, fits[on_type])]
    if not instance.typed:
        return [(0, fits[0])]
    if instance.span_types[job]:
        return [(None, fits.sum(axis=0))]
    return [(g, fits[g]) for g in instance.type_order(job)]


def most_progress(instance, job: int, k_max: int, free: np.ndarray, remaining: float | None
                  ) -> tuple[int, int | None, np.ndarray] | None:
    """``(k, type, fits)``: the type where the most progress fits in total (k x speed, at most
    ``remaining`` when given; ties to the faster type), counting workers and PSs per server but
    not how they pack (``Placement.place_most``); None if nothing fits."""
    H = instance.H
    pcap = int(fit_count(free[H:], instance.ps_demand[job]).sum())
    best: tuple[float, int, int | None, np.ndarray] | None = None  # (progress, k, type, fits)
    for g, wfit in worker_fit_options(instance, job, free):
        speed = int(instance.max_speed[job] if g is None else instance.type_speed[job, g])
        cap = k_max if remaining is None else min(k_max, useful_workers(remaining, speed))
        k = min(cap, int(wfit.sum()))
        while k > 0 and instance.ps_needed(job, k) > pcap:
            k -= 1
        gain = k * speed if remaining is None else min(k * speed, remaining)
        if k > 0 and (best is None or gain > best[0]):
            best = (gain, k, g, wfit)
    return None if best is None else best[1:]


def by_speed(instance, job: int, order: np.ndarray) -> np.ndarray:
    """``order`` (worker servers) stably re-sorted with the job's faster types first."""
    order = np.asarray(order)
    if not instance.typed:
        return order
    return order[np.argsort(-instance.server_speed(job)[order], kind="stable")]


class Placement:
    """The greedy base of ``model.policy.Placement``: subclasses give the server orders;
    ``place`` fills them greedily."""

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

    def place_counts(self, instance, job: int, workers: int, ps: int, free: np.ndarray, *,
                     on_type: int | None = None):
        """Rows for exactly ``workers`` workers and ``ps`` PSs (either may be 0), or None.

        Used by policies that grow a job's allocation one worker (plus the PSs constraint (6)
        then needs) at a time; ``place`` is this with ``ps = ceil(k b_i / B_i)``. The workers go
        on one type (module docstring), ``on_type`` if given.
        """
        H = instance.H
        w: list[tuple[int, int]] | None = []
        if workers > 0:
            w = None
            order = self.worker_order(instance, job, free)
            for g, wfit in worker_fit_options(instance, job, free, on_type):
                w = fill(order if g is not None else by_speed(instance, job, order), wfit,
                         workers)
                if w is not None:
                    break
            if w is None:
                return None
        p: list[tuple[int, int]] = []
        if ps > 0:
            pfit = fit_count(free[H:], instance.ps_demand[job])
            p = fill(self.ps_order(instance, job, free), pfit, ps)
            if p is None:
                return None
        return [(s, 0, n) for s, n in w] + [(H + s, 1, n) for s, n in p]

    def place_most(self, instance, job: int, k_max: int, free: np.ndarray, *,
                   remaining: float | None = None):
        """The largest k <= k_max that fits, with its rows (k = 0 and [] if none).

        With accelerator types: on the type where the most progress fits (k x speed; ties: the
        faster type, then the type listed first), and with ``remaining`` work units given, at
        most the workers that still help there, ceil(remaining / speed)."""
        best = most_progress(instance, job, k_max, free, remaining)
        if best is None:
            return 0, []
        k, g, _ = best
        return self._place_down(instance, job, k, free, g)

    def _place_down(self, instance, job: int, k: int, free: np.ndarray, on_type: int | None):
        """The largest k' <= k whose rows the greedy fill finds (on ``on_type``: None spans)."""
        while k > 0:
            rows = self.place_counts(instance, job, k, instance.ps_needed(job, k), free,
                                     on_type=on_type)
            if rows is not None:
                return k, rows
            k -= 1
        return 0, []


def apply(instance, job: int, rows, free: np.ndarray) -> None:
    """Subtract placed containers from ``free`` in place (a worker's demand is its server type's)."""
    for s, role, n in rows:
        free[s] -= n * instance.container_demand(job, s, role)


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
        return _rotated(instance.H, start)

    def ps_order(self, instance, job, free):
        start = getattr(self, "_next_p", 0) % instance.K
        self._next_p = start + 1
        return _rotated(instance.K, start)


def _rotated(n: int, start: int) -> np.ndarray:
    """0..n-1 starting at ``start`` (``np.roll(np.arange(n), -start)``, without its overhead)."""
    return np.concatenate((np.arange(start, n), np.arange(start)))


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
    def _order(free: np.ndarray, capacity: np.ndarray, demand: np.ndarray,
               fits: np.ndarray) -> np.ndarray:
        """``demand``: (R,) or per server (S, R); ``fits``: does one container fit, (S,)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            if demand.ndim == 1:
                need = demand > 0
                rel = np.where(capacity[:, need] > 0, free[:, need] / capacity[:, need], 0.0)
            else:  # accelerator types: each server scored on its own type's demand
                rel = np.where((demand > 0) & (capacity > 0), free / capacity, 0.0)
        score = rel.sum(axis=1)
        return np.lexsort((np.arange(len(free)), score, ~fits))

    def worker_order(self, instance, job, free):
        H = instance.H
        fits = instance.worker_fits(job, free[:H]).sum(axis=0) > 0
        demand = instance.server_demand(job) if instance.typed else instance.worker_demand[job]
        return self._order(free[:H], instance.capacity[:H], demand, fits)

    def ps_order(self, instance, job, free):
        H = instance.H
        demand = instance.ps_demand[job]
        return self._order(free[H:], instance.capacity[H:], demand,
                           fit_count(free[H:], demand) > 0)


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
