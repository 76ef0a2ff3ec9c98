"""The OASiS dual subroutine (Alg. 2): a job's best schedule at given resource prices.

For job i (arrival a, N_i chunks, per-worker demand w, per-PS demand s, b_i / B_i) and unit
prices p_h^r(t), q_k^r(t), ``best_schedule`` maximises the payoff (27)

    f_i(t_hat - a) - sum_t [ sum_h sum_r p_h^r(t) w^r y_h(t) + sum_k sum_r q_k^r(t) s^r z_k(t) ]

over schedules with integer k_t = sum_h y_h(t) <= N_i workers in slots a..t_hat, enough work
(constraint (2)), ceil(k_t b_i / B_i) PSs (the fewest constraint (6) allows; more never cost
less at non-negative prices), never more PSs than workers (7), and never more than the free
capacity (30)-(31). Given k_t, the cheapest placement is greedy (Theorem 1): fill servers in
increasing order of the unit price u_h(t) = sum_r p_h^r(t) w^r (ties by server index), each up
to ``min_r floor(free / w^r)`` containers. So the slot cost is a function C_t(k) of k alone,
non-decreasing in k, and the schedule is a DP over slots (section 7 / 7.1 of the reference)

    F_t(D) = min_{k=0..N_i} C_t(k) + F_{t-1}(max(0, D - delta(k))),   F_{a-1}(D) = 0 if D = 0 else inf

with payoff(t_hat) = f(t_hat - a) - F_{t_hat}(target), scanned for t_hat = a..T keeping a
strictly larger payoff (ties keep the earliest t_hat, Alg. 2 line 5).

Granularity (A10):
* ``"worker-slot"`` (default): target = W_i = ceil(E_i N_i x_i) whole worker-slots, delta(k) = k.
  This is constraint (2) exactly, in the unit the validator and the offline MILP use.
* ``"chunk"``: the paper's literal Alg. 2: target = E_i N_i data chunks, d chunks in a slot need
  ceil(d x_i) workers. Since cost depends on d only through k = ceil(d x_i), the DP only needs,
  for each k, the most chunks k workers train in one slot, delta(k) = floor(k / x_i) (the
  k-enumeration speed-up of section 7.1, exactly equivalent to Alg. 2's loop over d). It differs
  from the worker-slot DP only in where the ceiling falls: the per-slot ceil(d x_i) can buy up
  to one worker-slot more per slot than needed, so its plans cost at least as much, may finish
  later, and may carry surplus worker-slots (more than W_i in total).

Float ties: payoffs are compared with a relative margin ``PAYOFF_RTOL`` (a later t_hat must
beat the best so far by more than float noise), so that backends which sum in different orders
pick the same t_hat. Prices must be non-negative (the greedy and the monotone DP rely on it);
they are for OASiS (eq. 22) and for LP duals of the packing constraints (column generation).

Backends: ``"reference"`` (plain loops, the definition others are tested against), ``"numpy"``
(vectorised, with exact pruning of later t_hat), ``"jax"`` (jit-compiled, shapes bucketed).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from typing import TYPE_CHECKING, Sequence

import numpy as np

from .._extras import require
from ..sim.placement import EPS, fill

if TYPE_CHECKING:
    from ..model import Instance

BACKENDS = ("numpy", "jax", "reference")
GRANULARITIES = ("worker-slot", "chunk")
# a later completion slot must beat the best payoff by more than this (relative) to replace it
PAYOFF_RTOL = 1e-12
# float slack in ceil(d x) and floor(k / x) for the chunk granularity (reference section 7.1.6)
CHUNK_EPS = 1e-9


@dataclass(frozen=True)
class Plan:
    """A job's best schedule at given prices (``best_schedule``)."""

    job: int
    completion: int | None  # t_hat; None when no feasible schedule exists in a_i..T
    utility: float  # f_i(t_hat - a_i) (0.0 when infeasible)
    cost: float  # resource cost at the given prices (eq. 28); inf when infeasible
    payoff: float  # utility - cost (eq. 27); -inf when infeasible
    workers: np.ndarray  # (T+1,) int64 workers per slot (index 0 unused)
    rows: np.ndarray  # (n, 5) int64 allocation rows (job, slot, global server, role, count)

    @property
    def feasible(self) -> bool:
        return self.completion is not None


# ---- what the subroutine needs of one job ---------------------------------------------------------
@dataclass(frozen=True)
class JobSpec:
    """One job, reduced to arrays (built once per call by ``job_spec``).

    ``need[k]`` = ceil(k b / B) PSs for k = 0..N; ``ok[k]``: k workers allowed by (7) (need <= k).
    ``delta[k]``: work units k workers do in one slot; ``target``: units to reach (see module doc).
    ``utility[t]`` = f(t - a) for t = 0..T (-inf before arrival).
    """

    job: int
    arrival: int
    horizon: int
    N: int
    w: np.ndarray
    s: np.ndarray
    need: np.ndarray
    ok: np.ndarray
    delta: np.ndarray
    target: int
    work: int
    rho: float  # b / B
    utility: np.ndarray
    granularity: str = "worker-slot"
    chunk_time: float = 1.0  # x_i


def job_spec(instance: Instance, job: int, granularity: str = "worker-slot") -> JobSpec:
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity: expected one of {', '.join(GRANULARITIES)}, "
                         f"got {granularity!r}")
    N = int(instance.chunks[job])
    k = np.arange(N + 1)
    need = np.asarray(instance.ps_needed(job, k), dtype=np.int64)
    work = int(instance.work[job])
    if granularity == "worker-slot":
        delta, target = k.astype(np.int64), work
    else:
        x = float(instance.chunk_time[job])
        target = 0 if work == 0 else int(instance.epochs[job]) * N
        delta = (np.floor(k / x + CHUNK_EPS).astype(np.int64) if target else k.astype(np.int64))
        delta = np.minimum(delta, target)
    return JobSpec(job, int(instance.arrival[job]), int(instance.horizon), N,
                   instance.worker_demand[job], instance.ps_demand[job], need, need <= k,
                   delta, target, work, float(instance.worker_bw[job] / instance.ps_bw[job]),
                   instance.utility_table[job], granularity, float(instance.chunk_time[job]))


# ---- per-slot cost curves C_t(k) (numpy; the reference recomputes them with loops) ------------------
def unit_prices(price: np.ndarray, demand: np.ndarray) -> np.ndarray:
    """u[t, h] = sum_r price[t, h, r] demand[r] (prices are finite, checked at the entry)."""
    return price @ demand


def fit_counts(free: np.ndarray, demand: np.ndarray, cap: int) -> np.ndarray:
    """min(cap, min_{r: demand>0} floor((free + EPS) / demand)) per server (same rule as
    ``sim.placement.fit_count``), shape free.shape[:-1]."""
    fits = None
    for r in np.flatnonzero(demand > 0).tolist():  # a loop over R beats a reduce over a short axis
        f = np.floor((free[..., r] + EPS) / demand[r])
        fits = f if fits is None else np.minimum(fits, f, out=fits)
    if fits is None:
        return np.full(free.shape[:-1], cap, dtype=np.int64)
    return np.clip(fits, 0, cap).astype(np.int64)


def cheapest_marginals(u: np.ndarray, fit: np.ndarray, n: int) -> np.ndarray:
    """m[t, j-1] = unit price of the j-th cheapest container (j = 1..n) in slot t, inf beyond
    the slot's capacity. Servers sorted by u, each repeated ``fit`` times (cheapest first)."""
    S, H = u.shape
    if n == 0 or H == 0:
        return np.full((S, n), np.inf)
    u = np.where(fit > 0, u, np.inf)
    if H > n:  # only the n cheapest usable servers can matter (each holds >= 1 container)
        part = np.argpartition(u, n - 1, axis=1)[:, :n]
        u = np.take_along_axis(u, part, axis=1)
        fit = np.take_along_axis(fit, part, axis=1)
    order = np.argsort(u, axis=1, kind="stable")
    u = np.take_along_axis(u, order, axis=1)
    m = u.shape[1]
    cum = np.minimum(np.cumsum(np.take_along_axis(fit, order, axis=1), axis=1), n + 1)
    # position of the j-th container: first server whose cumulative fit reaches j (rows are
    # made globally sorted by an offset so that one searchsorted serves every slot)
    off = (np.arange(S) * (n + 2))[:, None]
    pos = np.searchsorted((cum + off).ravel(), (np.arange(1, n + 1)[None, :] + off).ravel(),
                          side="left").reshape(S, n) - np.arange(S)[:, None] * m
    inside = pos < m
    return np.where(inside, np.take_along_axis(u, np.minimum(pos, m - 1), axis=1), np.inf)


def slot_costs(spec: JobSpec, wprice: np.ndarray, pprice: np.ndarray, wfree: np.ndarray,
               pfree: np.ndarray) -> np.ndarray:
    """C[t, k]: cheapest cost of k workers plus need[k] PSs in each given slot (inf if they do
    not fit), for k = 0..N. Inputs are (S, H, R) / (S, K, R) slices of consecutive slots."""
    S = wprice.shape[0]
    N = spec.N
    mw = cheapest_marginals(unit_prices(wprice, spec.w), fit_counts(wfree, spec.w, N), N)
    M = int(spec.need[spec.ok].max()) if spec.ok.any() else 0
    mp = cheapest_marginals(unit_prices(pprice, spec.s), fit_counts(pfree, spec.s, M), M)
    cw = np.concatenate([np.zeros((S, 1)), np.cumsum(mw, axis=1)], axis=1)
    cp = np.concatenate([np.zeros((S, 1)), np.cumsum(mp, axis=1)], axis=1)
    C = cw + cp[:, np.minimum(spec.need, M)]
    C[:, ~spec.ok] = np.inf
    return C


def place_slot(u: np.ndarray, fit: np.ndarray, count: int) -> list[tuple[int, int]]:
    """Greedy placement of ``count`` containers: cheapest unit price first, ties by index."""
    placed = fill(np.argsort(u, kind="stable"), fit, count)
    if placed is None:  # callers place counts the DP found to fit
        raise RuntimeError(f"cannot place {count} containers (fit counts {fit.tolist()})")
    return placed


def plan_rows(spec: JobSpec, workers: np.ndarray, wprice: np.ndarray, pprice: np.ndarray,
              wfree: np.ndarray, pfree: np.ndarray, H: int) -> np.ndarray:
    """Allocation rows of a plan with ``workers[t]`` workers per slot, placed greedily."""
    rows = []
    for t in np.flatnonzero(workers):
        k = int(workers[t])
        for h, n in place_slot(unit_prices(wprice[t], spec.w), fit_counts(wfree[t], spec.w, k), k):
            rows.append((spec.job, t, h, 0, n))
        m = int(spec.need[k])
        for q, n in place_slot(unit_prices(pprice[t], spec.s), fit_counts(pfree[t], spec.s, m), m):
            rows.append((spec.job, t, H + q, 1, n))
    return np.asarray(rows, dtype=np.int64).reshape(-1, 5)


# ---- DP pieces shared by the numpy and JAX backends --------------------------------------------------
def payoff_margin(best: float) -> float:
    """How much a later completion slot must beat ``best`` by (0 while nothing is feasible)."""
    return PAYOFF_RTOL * max(1.0, abs(best)) if math.isfinite(best) else 0.0


class CompletionScan:
    """Alg. 2's scan over completion slots with exact pruning (numpy and JAX backends).

    Feed ``update(t, cost)`` with F_t(target) for t = a, a+1, ...; it keeps the first slot whose
    payoff f(t - a) - cost beats the best so far by more than the float margin, and returns True
    once no later slot can win: costs are >= ``lower_bound`` and f is non-increasing, so a later
    t' has payoff <= f(t + 1 - a) - lower_bound.
    """

    def __init__(self, spec: JobSpec, lower_bound: float):
        self.utility = spec.utility
        self.horizon = spec.horizon
        self.lower_bound = lower_bound
        self.best, self.cost = -math.inf, math.inf
        self.stop: int | None = None

    def update(self, t: int, cost: float) -> bool:
        if cost < math.inf:
            payoff = float(self.utility[t]) - cost
            if payoff > self.best + payoff_margin(self.best):
                self.best, self.cost, self.stop = payoff, cost, t
        return t >= self.horizon or (float(self.utility[t + 1]) - self.lower_bound
                                      < self.best - payoff_margin(self.best))


def cost_lower_bound(spec: JobSpec, wmin: np.ndarray, pmin: np.ndarray) -> float:
    """A lower bound on the cost of any feasible schedule of the job in slots a..T.

    Every schedule has >= W_i worker-slots (also in chunk granularity, where sum ceil(d x) >=
    E N x) and >= rho W_i PS-slots (constraint (6)); each costs at least the smallest unit price.
    Used to stop the t_hat scan once f(t_hat - a) - bound cannot beat the best payoff.
    ``wmin`` / ``pmin`` (R,): smallest price of each resource over slots a..T and servers.
    """
    lw, lp = float(wmin @ spec.w), float(pmin @ spec.s)
    return max(0.0, spec.work * lw + spec.rho * spec.work * (1.0 - 1e-9) * lp)


def backtrack(spec: JobSpec, choices: Sequence[Sequence[int] | np.ndarray] | np.ndarray,
              stop: int) -> np.ndarray:
    """Workers per slot (T+1,) of the DP's plan completing at slot a + stop (choices[s][D] =
    chosen k in slot a + s for remaining units D; ``choices`` a list of rows or a 2-D array)."""
    workers = np.zeros(spec.horizon + 1, dtype=np.int64)
    D = spec.target
    for s in range(stop, -1, -1):
        if D <= 0:
            break
        k = int(choices[s][D])
        workers[spec.arrival + s] = k
        D = max(0, D - int(spec.delta[k]))
    return workers


def make_plan(instance: Instance, spec: JobSpec, workers: np.ndarray | None, cost: float,
              wprice: np.ndarray, pprice: np.ndarray, wfree: np.ndarray, pfree: np.ndarray
              ) -> Plan:
    """Assemble a ``Plan`` (infeasible when ``workers`` is None)."""
    T = spec.horizon
    if workers is None:
        return Plan(spec.job, None, 0.0, math.inf, -math.inf, np.zeros(T + 1, dtype=np.int64),
                    np.zeros((0, 5), dtype=np.int64))
    used = np.flatnonzero(workers)
    completion = int(used[-1]) if len(used) else spec.arrival  # no work: done on arrival
    utility = float(spec.utility[completion])
    rows = plan_rows(spec, workers, wprice, pprice, wfree, pfree, instance.H)
    return Plan(spec.job, completion, utility, float(cost), utility - float(cost), workers, rows)


def trivial_plan(instance: Instance, spec: JobSpec, wprice: np.ndarray, pprice: np.ndarray,
                 wfree: np.ndarray, pfree: np.ndarray) -> Plan:
    """A job with nothing to train completes on arrival at no cost."""
    return make_plan(instance, spec, np.zeros(spec.horizon + 1, dtype=np.int64), 0.0,
                     wprice, pprice, wfree, pfree)


# ---- the public entry point -----------------------------------------------------------------------
def check_backend(backend: str) -> None:
    """ValueError naming ``backend`` if unknown; ``MissingExtra`` for "jax" without jax."""
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend == "jax":
        require("jax", extra="jax", feature="the 'jax' backend")


def best_schedule(instance: Instance, job: int, worker_price: np.ndarray, ps_price: np.ndarray,
                  worker_free: np.ndarray, ps_free: np.ndarray, *,
                  backend: str = "numpy", granularity: str = "worker-slot") -> Plan:
    """The payoff-maximising schedule (21)/(27) of ``job`` at the given prices.

    ``worker_price`` (T+1, H, R): p_h^r(t); ``ps_price`` (T+1, K, R): q_k^r(t) (row 0 unused;
    finite and >= 0 from the arrival slot on, else ``ValueError``). ``worker_free`` / ``ps_free``: remaining capacity c - g per slot (same shapes).
    Returns the best plan over completion slots a_i..T (strict improvement, earliest on ties),
    which may have a negative payoff; an infeasible job gives completion None, payoff -inf.
    """
    check_backend(backend)
    T, H, K, R = instance.horizon, instance.H, instance.K, instance.R
    for name, arr, n in (("worker_price", worker_price, H), ("ps_price", ps_price, K),
                         ("worker_free", worker_free, H), ("ps_free", ps_free, K)):
        if np.shape(arr) != (T + 1, n, R):
            raise ValueError(f"{name}: expected shape {(T + 1, n, R)}, got {np.shape(arr)}")
    spec = job_spec(instance, job, granularity)
    a = spec.arrival
    mins = []  # per-resource minimum price over slots a..T (lower bound for pruning)
    for name, arr in (("worker_price", worker_price), ("ps_price", ps_price)):
        part = arr[a:]
        m = np.array([part[..., r].min() for r in range(R)]) if part.size else np.zeros(R)
        if not ((m >= 0).all() and (part.size == 0 or np.isfinite(part.max()))):  # NaN fails
            raise ValueError(f"{name}: prices must be finite non-negative numbers")
        mins.append(m)
    if spec.target == 0:
        return trivial_plan(instance, spec, worker_price, ps_price, worker_free, ps_free)
    if backend == "reference":
        from .dual_reference import best_schedule_reference as impl
    elif backend == "numpy":
        from .dual_numpy import best_schedule_numpy as impl
    else:
        from .dual_jax import best_schedule_jax as impl
    return impl(instance, spec, worker_price, ps_price, worker_free, ps_free,
                cost_lower_bound(spec, *mins))
