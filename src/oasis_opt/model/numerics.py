"""Container-fit arithmetic and every float tolerance of the package, in one leaf module.

Every layer (model, online, offline, baselines, cluster, sim ...) takes these from here, so that a
container the simulator places is one the dual subroutine priced, the validator accepts and the
MILP allows. The module imports only numpy.

Tolerances, what each guards:

=================  =======  ========================================================================
name               value    guards
=================  =======  ========================================================================
``FIT_EPS``        1e-9     absolute slack when counting containers that fit: free capacity is
                            ``c - sum(count * demand)`` in floats, so an exact fit can come out a
                            hair below ``demand``
``CAPACITY_RTOL``  1e-9     capacity checks ``used <= c + CAPACITY_RTOL * max(1, c)`` (validator,
                            simulator, column generation, Dorm's MILP rows)
``FEAS_TOL``       1e-9     HiGHS primal / MIP feasibility tolerance: a solver point then passes
                            the validator's capacity check (= ``CAPACITY_RTOL``)
``ROW_TOL``        1e-9     relative row tolerance of CP-SAT's integer scaling (= ``CAPACITY_RTOL``)
``WORK_EPS``       1e-9     ceilings of float products that should be integers: W_i =
                            ceil(E_i N_i x_i - WORK_EPS), PSs ceil(k b_i / B_i - WORK_EPS)
``DONE_EPS``       1e-9     completion: a job with at most ``DONE_EPS`` worker-slots left is done
                            (simulator, placement-aware cost model); workers still useful:
                            ceil(remaining - DONE_EPS)
``CHUNK_EPS``      1e-9     chunk granularity of Alg. 2: floor(k / x_i + CHUNK_EPS) chunks for k
                            workers, ceil(d x_i - CHUNK_EPS) workers for d chunks; the executor's
                            mini-batches after c worker-slots, floor(c M_i / x_i + CHUNK_EPS)
``COST_RTOL``      1e-12    dual subroutine DP: one more worker in a slot must save more than this
                            share of the slot's cost range (tie rule in ``online.dual``)
``PAYOFF_RTOL``    1e-12    dual subroutine: a later completion slot replaces the best only if its
                            payoff is larger by more than ``PAYOFF_RTOL * max(1, |best|)``;
                            OASiS admits a plan only if its payoff f - cost exceeds
                            ``PAYOFF_RTOL * max(|f|, cost)`` (``payoff_positive``)
``UTILITY_RTOL``   1e-9     validator: claimed utilities equal f_i(completion - a_i) to this
``RC_TOL``         1e-9     column generation: reduced costs at or below this (relative to the
                            largest utility) count as "no improving column"
``BOUND_RTOL``     1e-6     offline solvers: a proven bound on the wrong side of a feasible value
                            by at most this (relative to max(1, |value|)) is float noise and is
                            moved onto the value; a larger inversion raises (``solver.ordered_bound``)
``INTEGER_RTOL``   1e-9     a float within this share of an integer counts as that integer
                            (accelerator speed units, Dorm's rounding to a grid, CP-SAT's
                            decimal scaling)
``VALUE_EPS``      1e-9     absolute slack between utilities and objective values: a candidate must
                            beat another by more than this (column generation's improvements),
                            an LP entry above it counts as nonzero, class mixes sum to 1 within it
``NOISE_RTOL``     1e-12    two floats that should be equal (one computed in another order, a
                            threshold met exactly) may differ by this share of their size; the
                            comparison gives the tie to equality
``DIVISOR_FLOOR``  1e-12    the smallest divisor of a ratio (a zero cost, spread or share does not
                            divide by zero)
=================  =======  ========================================================================
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from numpy.typing import ArrayLike

FIT_EPS = 1e-9
"""Absolute slack in ``floor((free + FIT_EPS) / demand)`` (container fit)."""
CAPACITY_RTOL = 1e-9
"""Relative slack of every capacity check: ``used <= c + CAPACITY_RTOL * max(1, c)``."""
FEAS_TOL = CAPACITY_RTOL
"""HiGHS primal / MIP feasibility tolerance (solutions must pass the validator's capacity check)."""
ROW_TOL = CAPACITY_RTOL
"""Relative row tolerance of the CP-SAT integer scaling (as HiGHS's and the validator's)."""
WORK_EPS = 1e-9
"""Slack in ceilings of float products that should be integers (W_i, PS counts)."""
DONE_EPS = 1e-9
"""A job with at most this many worker-slots left is complete."""
CHUNK_EPS = 1e-9
"""Slack in floor(k / x) and ceil(d x) of the chunk granularity (Alg. 2 as written)."""
COST_RTOL = 1e-12
"""Dual subroutine DP: an extra worker in a slot must save more than this share of the slot's
cost range, else the fewer workers win (the tie rule of ``online.dual``)."""
PAYOFF_RTOL = 1e-12
"""Dual subroutine: a later completion slot must beat the best payoff by more than this (relative)."""
UTILITY_RTOL = 1e-9
"""Validator: relative tolerance of the utility accounting."""
RC_TOL = 1e-9
"""Column generation: reduced costs at or below this (relative) do not enter."""
BOUND_RTOL = 1e-6
"""Offline solvers: a bound below a feasible value (max) by at most this, relative to
max(1, |value|), is float noise (HiGHS's 1e-9 tolerances, rounded integer columns)."""
INTEGER_RTOL = 1e-9
"""A float within this share of an integer counts as that integer."""
VALUE_EPS = 1e-9
"""Absolute slack between utilities and objective values (an improvement must exceed it)."""
NOISE_RTOL = 1e-12
"""Relative float noise: floats that should be equal may differ by this share of their size."""
DIVISOR_FLOOR = 1e-12
"""The smallest divisor of a ratio."""

UNLIMITED = 1 << 40
"""Fit count of a container that demands nothing (no resource limits it)."""


def fit_one_resource(free: ArrayLike, demand: float) -> np.ndarray:
    """Containers that resource r alone admits: ``floor((free + FIT_EPS) / demand)`` for a
    demand > 0 of r (the one container-fit formula; ``fit_count`` takes its minimum over the
    resources a container demands)."""
    return np.floor((np.asarray(free, dtype=float) + FIT_EPS) / demand)


def fit_count(free: ArrayLike, demand: ArrayLike, cap: int | None = None) -> np.ndarray:
    """Containers of ``demand`` (R,) that fit on each server: ``free`` (..., R) -> (...,) int64.

    min over resources r with d^r > 0 of floor((free^r + FIT_EPS) / d^r), clipped to [0, cap]
    (``UNLIMITED`` when the container demands nothing and ``cap`` is None).
    """
    free = np.asarray(free, dtype=float)
    return fit_count_columns(lambda r: free[..., r], free.shape[:-1], demand, cap)


def fit_count_columns(column: Callable[[int], np.ndarray], shape: tuple[int, ...],
                      demand: ArrayLike, cap: int | None = None) -> np.ndarray:
    """``fit_count`` from one array per resource: ``column(r)`` gives the free amount of
    resource r (``shape``), asked only for the r that ``demand`` demands (a caller that stores
    resources apart reads each contiguously, and only those)."""
    demand = np.asarray(demand, dtype=float)
    fits = None
    for r in np.flatnonzero(demand > 0).tolist():  # a loop over R beats a reduce over a short axis
        f = fit_one_resource(column(r), demand[r])
        fits = f if fits is None else np.minimum(fits, f, out=fits)
    top = UNLIMITED if cap is None else cap
    if fits is None:
        return np.full(shape, top, dtype=np.int64)
    # np.clip's values, without its wrapper's overhead (this runs once per placement attempt)
    return np.minimum(np.maximum(fits, 0, out=fits), top, out=fits).astype(np.int64)


def fill(order: ArrayLike, fits: np.ndarray, count: int) -> list[tuple[int, int]] | None:
    """Greedy fill: servers in ``order``, each up to ``fits[server]`` containers, until ``count``
    are placed; ``[(server, n), ...]`` or None when they do not fit."""
    out = []
    for s in np.asarray(order).tolist():
        if count <= 0:
            break
        n = int(min(fits[s], count))
        if n > 0:
            out.append((int(s), n))
            count -= n
    return out if count <= 0 else None


def payoff_positive(payoff: float, cost: float) -> bool:
    """Alg. 1's admission test, payoff f - cost > 0, made robust to float noise: the payoff must
    exceed ``PAYOFF_RTOL * max(|f|, |cost|)`` (f = payoff + cost, the plan's utility).

    f and the cost are each computed to a few ulp, and on another CPU (numpy's SIMD kernels for
    exp and log differ in the last place between AVX2 and AVX-512) they come out a few ulp
    apart: a payoff within that noise of 0 (a job whose utility the prices match exactly) would
    be admitted on one machine and refused on another, and every later decision would differ.
    The margin is relative to the terms, not absolute, so a job whose utility has decayed to
    1e-30 at prices of 1e-300 is still admitted (its payoff is 1e-30, far above the noise).
    """
    scale = max(abs(payoff + cost), abs(cost))
    return payoff > PAYOFF_RTOL * scale


def unit_prices(price: ArrayLike, demand: ArrayLike) -> np.ndarray:
    """u[..., h] = sum_r price[..., h, r] demand[r]: the price of one container on each server.

    Summed resource by resource in index order (not a BLAS dot product), so that a server's unit
    price is the same float whatever array it sits in: backends and tie rules rely on it.
    """
    price = np.asarray(price, dtype=float)
    return unit_prices_columns(lambda r: price[..., r], price.shape[:-1], demand)


def unit_prices_columns(column: Callable[[int], np.ndarray], shape: tuple[int, ...],
                        demand: ArrayLike) -> np.ndarray:
    """``unit_prices`` from one array per resource: ``column(r)`` gives resource r's prices
    (``shape``), asked only for the r that ``demand`` demands; the same sums in the same order,
    so the same floats."""
    u, term = np.zeros(shape), np.empty(shape)
    for r, d in enumerate(np.asarray(demand, dtype=float).tolist()):
        if d != 0.0:
            np.add(u, np.multiply(column(r), d, out=term), out=u)
    return u


def required_work(workload: float) -> int:
    """W_i = ceil(E_i N_i x_i): whole worker-slots of a workload (constraint (2))."""
    return int(math.ceil(workload - WORK_EPS))


def ps_count(workers: ArrayLike, worker_bw: float, ps_bw: float) -> Any:
    """ceil(k b_i / B_i): the fewest PSs constraint (6) allows for k workers (at least 1 for
    k >= 1, 0 for k = 0); scalar in, int out; array in, int64 array out."""
    k = np.asarray(workers)
    out = np.ceil(k * worker_bw / ps_bw - WORK_EPS).astype(np.int64)
    out = np.maximum(out, np.where(k > 0, 1, 0))
    return out if out.ndim else int(out)


def useful_workers(remaining: Any, speed: Any) -> Any:
    """Workers that still help a job with ``remaining`` work units at ``speed`` units per worker
    and slot: ceil(remaining / speed - DONE_EPS) (>= 0); scalar or array."""
    out = np.maximum(np.ceil(np.asarray(remaining, dtype=float) / speed - DONE_EPS), 0)
    return out.astype(np.int64) if out.ndim else int(out)


def workers_alone(instance: Any, job: int) -> int:
    """The most workers (<= N_i) job ``job`` can run at once with its PSs on the empty cluster:
    k workers fit when the worker servers hold k of its containers and the PS servers
    ceil(k b_i / B_i) <= k (constraints (6), (7)), counted per server (fragmentation counts).
    With accelerator types the workers sit on one type it can use (the best), or on all of them
    if it may span types."""
    H = instance.H
    fits = instance.worker_fits(job, instance.capacity[:H]).sum(axis=1)
    wcap = int(fits.sum() if instance.span_types[job] else fits.max())
    pcap = int(fit_count(instance.capacity[H:], instance.ps_demand[job]).sum())
    k = min(int(instance.chunks[job]), wcap)
    while k > 0 and not instance.ps_needed(job, k) <= min(pcap, k):
        k -= 1
    return k


def capacity_slack(capacity: ArrayLike) -> Any:
    """How far a capacity check lets usage exceed ``capacity``: CAPACITY_RTOL * max(1, c)."""
    return CAPACITY_RTOL * np.maximum(1.0, capacity)
