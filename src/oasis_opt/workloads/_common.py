"""Pieces shared by the workload generators: argument checks, racks, tie order, utilities, guards.

Generators draw from child streams of ``numpy.random.default_rng(seed)`` (``rng.spawn``), one per
concern (servers, arrivals, jobs, order), so e.g. asking for more jobs keeps the same cluster.
"""
from __future__ import annotations

import math
import numbers
from typing import Sequence, TypeVar

import numpy as np

from ..model import DEFAULT_RESOURCES, JOB_CLASSES, Server, Utility
from ..model.instance import required_work
from ..model.numerics import FIT_EPS, VALUE_EPS

RESOURCES = DEFAULT_RESOURCES  # ("gpu", "cpu", "mem", "storage", "bw")
BW = RESOURCES.index("bw")

# Paper section 10 (utility, p.8): gamma2 per job class, in the order of JOB_CLASSES.
CLASS_DECAY = {"time-insensitive": (0.0, 0.0), "time-sensitive": (0.01, 1.0),
               "time-critical": (4.0, 6.0)}
DEFAULT_CLASS_MIX = (0.10, 0.55, 0.35)
TARGET_RANGE = (1.0, 15.0)  # gamma3, slots after arrival
MAX_REDRAWS = 10_000  # rejection-sampling rounds before a generator gives up


# ---- argument checks (ValueError naming the argument) -------------------------------------------
_Obj = TypeVar("_Obj")


def check_int(name: str, v, minimum: int) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise ValueError(f"{name}: expected an integer, got {v!r}")
    if v < minimum:
        raise ValueError(f"{name}: must be >= {minimum}, got {v}")
    return int(v)


def check_seed(seed) -> int:
    return check_int("seed", seed, 0)


def check_choice(name: str, v, choices: Sequence[str]) -> str:
    if v not in choices:
        raise ValueError(f"{name}: expected one of {', '.join(map(repr, choices))}, got {v!r}")
    return v


def check_object(name: str, v: _Obj | None, cls: type[_Obj]) -> _Obj:
    """A parameter object: ``v`` if it is a ``cls``, ``cls()`` (its defaults) if it is None;
    anything else (a dict of its fields, say) is a ValueError naming the parameter."""
    if v is None:
        return cls()
    if not isinstance(v, cls):
        raise ValueError(f"{name}: expected {cls.__name__}, got {type(v).__name__}")
    return v


def check_positive(name: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name}: must be a finite number > 0, got {v!r}")
    return float(v)


def check_interval(name: str, v, *, minimum: float = 0.0) -> tuple[float, float]:
    """A closed interval ``(lo, hi)`` with ``minimum <= lo <= hi``, both finite."""
    try:
        lo, hi = v
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a pair (low, high), got {v!r}") from None
    for x in (lo, hi):
        if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(x):
            raise ValueError(f"{name}: bounds must be finite numbers, got {v!r}")
    if not minimum <= lo <= hi:
        raise ValueError(f"{name}: need {minimum:g} <= low <= high, got {v!r}")
    return float(lo), float(hi)


def check_class_mix(v) -> tuple[float, float, float]:
    """Probabilities of (time-insensitive, time-sensitive, time-critical), summing to 1."""
    try:
        mix = tuple(float(p) for p in v)
    except (TypeError, ValueError):
        raise ValueError(f"class_mix: expected three probabilities, got {v!r}") from None
    if len(mix) != len(JOB_CLASSES) or not all(math.isfinite(p) and p >= 0 for p in mix):
        raise ValueError(f"class_mix: expected three probabilities >= 0 "
                         f"({', '.join(JOB_CLASSES)}), got {v!r}")
    if abs(sum(mix) - 1.0) > VALUE_EPS:
        raise ValueError(f"class_mix: must sum to 1, got {v!r} (sum {sum(mix)})")
    return mix  # type: ignore[return-value]


# ---- servers ---------------------------------------------------------------------------------------
def rack_of(count: int, racks: int) -> list[str]:
    """Spread ``count`` servers over ``racks`` racks in contiguous blocks: server n -> rack n*racks//count."""
    return [f"rack-{n * racks // count}" for n in range(count)]


def make_servers(prefix: str, kinds: Sequence[str], capacities: Sequence[dict],
                 racks: Sequence[str | None]) -> tuple[Server, ...]:
    width = max(2, len(str(len(kinds) - 1)))
    return tuple(Server(f"{prefix}-{n:0{width}d}", cap, rack, kind)
                 for n, (kind, cap, rack) in enumerate(zip(kinds, capacities, racks)))


def capacity_matrix(servers: Sequence[Server]) -> np.ndarray:
    return np.array([[float(s.capacity.get(r, 0.0)) for r in RESOURCES] for s in servers])


def cap_demands(demand: np.ndarray, capacity: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Guard: a container that fits on no server is shrunk to fit the largest server.

    ``demand`` (I, R), ``capacity`` (S, R). A row that fits on some server is unchanged; any other
    row is capped, resource by resource (bandwidth excepted, it feeds chunk_time), at the
    capacity of the largest server (largest sum of capacities normalised per resource by the pool
    maximum, ties by index). Returns the new demands and a mask of the rows that were capped.
    """
    fits = (demand[:, None, :] <= capacity[None, :, :] + FIT_EPS).all(axis=2).any(axis=1)
    if fits.all():
        return demand, ~fits
    top = capacity.max(axis=0)
    largest = int(np.argmax((capacity / np.where(top > 0, top, 1.0)).sum(axis=1)))
    ceiling = capacity[largest].copy()
    ceiling[BW] = np.inf
    out = np.where(fits[:, None], demand, np.minimum(demand, ceiling))
    if not (out[~fits] <= capacity[largest] + FIT_EPS).all():
        raise ValueError("a container's bandwidth exceeds every server's bandwidth")
    return out, ~fits


def demand_map(row: np.ndarray) -> dict[str, float]:
    return {r: float(v) for r, v in zip(RESOURCES, row)}


# ---- jobs ----------------------------------------------------------------------------------------
def sample_utilities(rng: np.random.Generator, n: int, class_mix, priority,
                     target=TARGET_RANGE):
    """Job class per job (``class_mix`` over JOB_CLASSES), gamma1 ~ U[priority], gamma2 by class,
    gamma3 ~ U[target] (the paper's U[1, 15], p.8, by default). Returns (class indices, list of
    Utility)."""
    cls = rng.choice(len(JOB_CLASSES), size=n, p=np.asarray(class_mix))
    gamma1 = rng.uniform(*priority, size=n)
    lo = np.array([CLASS_DECAY[c][0] for c in JOB_CLASSES])[cls]
    hi = np.array([CLASS_DECAY[c][1] for c in JOB_CLASSES])[cls]
    gamma2 = lo + (hi - lo) * rng.random(n)  # U[lo, hi]; exactly 0 for time-insensitive jobs
    gamma3 = rng.uniform(*target, size=n)
    return cls, [Utility.sigmoid(float(a), float(b), float(c)) for a, b, c in zip(gamma1, gamma2, gamma3)]


def tie_order(rng: np.random.Generator, arrival: np.ndarray) -> np.ndarray:
    """A4: shuffle (seeded), then sort stably by arrival; instance order then breaks arrival ties."""
    perm = rng.permutation(len(arrival))
    return perm[np.argsort(arrival[perm], kind="stable")]


def job_ids(n: int) -> list[str]:
    width = max(3, len(str(n - 1)))
    return [f"job-{i:0{width}d}" for i in range(n)]


def duration_alone(epochs, chunks, chunk_time, workers) -> np.ndarray:
    """Slots to finish W = ceil(E N x) worker-slots with ``workers`` per slot: ceil(W / workers)."""
    work = np.vectorize(required_work, otypes=[np.int64])(np.asarray(epochs) * np.asarray(chunks)
                                                          * np.asarray(chunk_time))
    workers = np.asarray(workers, dtype=np.int64)
    return np.where(workers > 0, -(-work // np.maximum(workers, 1)), np.iinfo(np.int64).max)
