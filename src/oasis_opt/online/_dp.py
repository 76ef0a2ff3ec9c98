"""What the dual subroutine's backends share (``dual`` dispatches to them; none imports another).

* ``JobSpec`` / ``job_spec``: one job reduced to arrays.
* ``slot_costs``: the per-slot cost curves C_t(k), built by this one function for every backend,
  so that all of them minimise over the same floats.
* ``tie_costs``: C_t(k) + k eta_t, the costs the DP compares (the tie rule, see ``dual``).
* ``CompletionScan``, ``cost_lower_bound``, ``backtrack``, ``plan_rows``, ``make_plan``: the scan
  over completion slots, the plan's workers per slot and its allocation rows.

The tie rule these pieces implement is stated in ``dual``'s module docstring.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model.numerics import (CHUNK_EPS, COST_RTOL, PAYOFF_RTOL, fill, fit_count,
                              unit_prices)

GRANULARITIES = ("worker-slot", "chunk")


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

    ``need[k]`` PSs for k = 0..N workers; ``ok[k]``: k workers allowed by (7) (need <= k).
    ``delta[k]``: work units k workers do in one slot; ``target``: units to reach (see ``dual``).
    ``utility[t]`` = f(t - a) for t = 0..T (only t >= a is read). ``rho``: the fewest PSs per
    worker, min over allowed k >= 1 of need[k] / k (constraint (6): b / B rounded up).
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
    rho: float
    utility: np.ndarray
    granularity: str = "worker-slot"


def job_spec(*, job: int, arrival: int, horizon: int, chunks: int, work: int,
             worker_demand: np.ndarray, ps_demand: np.ndarray, ps_need: np.ndarray,
             utility: np.ndarray,
             granularity: str = "worker-slot", epochs: int | None = None,
             chunk_time: float | None = None) -> JobSpec:
    """The job's arrays; arguments are already checked (``dual.best_schedule_arrays``).

    Worker-slot granularity: target = W_i work units, delta(k) = k. Chunk granularity: target =
    E_i N_i chunks (0 for a job without work), delta(k) = floor(k / x_i) chunks (``dual``).
    """
    N = int(chunks)
    k = np.arange(N + 1)
    need = np.asarray(ps_need, dtype=np.int64)
    ok = need <= k
    if granularity == "worker-slot":
        delta, target = k.astype(np.int64), int(work)
    else:
        assert epochs is not None and chunk_time is not None  # checked by the entry point
        target = 0 if work == 0 else int(epochs) * N
        delta = (np.floor(k / float(chunk_time) + CHUNK_EPS).astype(np.int64) if target
                 else k.astype(np.int64))
        delta = np.minimum(delta, target)
    allowed = ok[1:]
    rho = float((need[1:][allowed] / k[1:][allowed]).min()) if allowed.any() else 0.0
    return JobSpec(int(job), int(arrival), int(horizon), N,
                   np.asarray(worker_demand, dtype=float), np.asarray(ps_demand, dtype=float),
                   need, ok, delta, target, int(work), rho, np.asarray(utility, dtype=float),
                   granularity)


def job_arguments(instance: Any, job: int) -> dict[str, Any]:
    """Job ``job`` of an ``Instance`` as the keyword arguments of ``dual.best_schedule_arrays``
    (and of ``job_spec``), PS counts by the instance's rule ceil(k b_i / B_i)."""
    N = int(instance.chunks[job])
    return {"job": int(job), "arrival": int(instance.arrival[job]), "chunks": N,
            "work": int(instance.work[job]), "worker_demand": instance.worker_demand[job],
            "ps_demand": instance.ps_demand[job], "utility": instance.utility_table[job],
            "ps_need": instance.ps_needed(job, np.arange(N + 1)),
            "epochs": int(instance.epochs[job]), "chunk_time": float(instance.chunk_time[job])}


# ---- per-slot cost curves C_t(k), shared by every backend -------------------------------------------
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
    not fit or (7) forbids k), for k = 0..N. Inputs are (S, H, R) / (S, K, R) slices of
    consecutive slots; each slot's row depends on that slot's data only (element-wise sums, a
    per-row sort and cumulative sum), so any slicing gives the same floats."""
    S = wprice.shape[0]
    N = spec.N
    mw = cheapest_marginals(unit_prices(wprice, spec.w), fit_count(wfree, spec.w, N), N)
    M = int(spec.need[spec.ok].max()) if spec.ok.any() else 0
    mp = cheapest_marginals(unit_prices(pprice, spec.s), fit_count(pfree, spec.s, M), M)
    cw = np.concatenate([np.zeros((S, 1)), np.cumsum(mw, axis=1)], axis=1)
    cp = np.concatenate([np.zeros((S, 1)), np.cumsum(mp, axis=1)], axis=1)
    C = cw + cp[:, np.minimum(spec.need, M)]
    C[:, ~spec.ok] = np.inf
    return C


def finite_prefix(C: np.ndarray) -> np.ndarray:
    """Per row of C: 1 + the largest k with a finite cost (C[t, 0] = 0 is always finite)."""
    finite = np.isfinite(C)
    return C.shape[1] - np.argmax(finite[:, ::-1], axis=1)


def tie_costs(C: np.ndarray) -> np.ndarray:
    """The costs the DP compares (``dual``'s tie rule): C~_t(k) = C_t(k) + k eta_t with
    eta_t = COST_RTOL * C_t(k_max) / max(1, k_max), k_max the slot's largest affordable count.
    Each extra worker in a slot must save more than eta_t (a 1e-12 share of the slot's cost
    range), so float noise never decides and equal costs put work in the earliest slots.
    Per-row arithmetic: any slicing of the slots gives the same floats."""
    kmax = finite_prefix(C) - 1
    eta = COST_RTOL * C[np.arange(len(C)), kmax] / np.maximum(1, kmax)
    return C + np.arange(C.shape[1]) * eta[:, None]


# ---- placement of a plan ------------------------------------------------------------------------
def place_slot(u: np.ndarray, fit: np.ndarray, count: int) -> list[tuple[int, int]]:
    """Greedy placement of ``count`` containers: cheapest unit price first, ties by index (the
    DP only plans counts that fit)."""
    placed = fill(np.argsort(u, kind="stable"), fit, count)
    if placed is None:  # callers place counts the DP found to fit
        raise RuntimeError(f"cannot place {count} containers (fit counts {fit.tolist()})")
    return placed


def plan_rows(spec: JobSpec, workers: np.ndarray, wprice: np.ndarray, pprice: np.ndarray,
              wfree: np.ndarray, pfree: np.ndarray) -> np.ndarray:
    """Allocation rows of a plan with ``workers[t]`` workers per slot, placed greedily (Theorem
    1), sorted by (slot, global server); PS servers are numbered from H = wprice.shape[1]."""
    H = wprice.shape[1]
    rows = []
    for t in np.flatnonzero(workers):
        k = int(workers[t])
        for h, n in place_slot(unit_prices(wprice[t], spec.w), fit_count(wfree[t], spec.w, k), k):
            rows.append((spec.job, t, h, 0, n))
        m = int(spec.need[k])
        for q, n in place_slot(unit_prices(pprice[t], spec.s), fit_count(pfree[t], spec.s, m), m):
            rows.append((spec.job, t, H + q, 1, n))
    out = np.asarray(rows, dtype=np.int64).reshape(-1, 5)
    return out[np.lexsort((out[:, 2], out[:, 1]))]


# ---- the completion scan, pruning and backtrack ----------------------------------------------------
def payoff_margin(best: float) -> float:
    """How much a later completion slot must beat ``best`` by (0 while nothing is feasible)."""
    return PAYOFF_RTOL * max(1.0, abs(best)) if math.isfinite(best) else 0.0


class CompletionScan:
    """Alg. 2's scan over completion slots with exact pruning.

    Feed ``update(t, cost)`` with F_t(target) for t = a, a+1, ...; it keeps the first slot whose
    payoff f(t - a) - cost beats the best so far by more than the float margin, and returns True
    once no later slot can win: costs are >= ``lower_bound`` and f is non-increasing, so a later
    t' has payoff <= f(t + 1 - a) - lower_bound. ``prune=False`` scans every slot (reference).
    """

    def __init__(self, spec: JobSpec, lower_bound: float, prune: bool = True):
        self.utility = spec.utility
        self.horizon = spec.horizon
        self.lower_bound = lower_bound if prune else -math.inf
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


def backtrack(spec: JobSpec, choices: Any, stop: int) -> np.ndarray:
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


def make_plan(spec: JobSpec, workers: np.ndarray | None, cost: float, wprice: Any, pprice: Any,
              wfree: Any, pfree: Any) -> Plan:
    """Assemble a ``Plan`` (infeasible when ``workers`` is None)."""
    T = spec.horizon
    if workers is None:
        return Plan(spec.job, None, 0.0, math.inf, -math.inf, np.zeros(T + 1, dtype=np.int64),
                    np.zeros((0, 5), dtype=np.int64))
    used = np.flatnonzero(workers)
    completion = int(used[-1]) if len(used) else spec.arrival  # no work: done on arrival
    utility = float(spec.utility[completion])
    rows = plan_rows(spec, workers, wprice, pprice, wfree, pfree)
    return Plan(spec.job, completion, utility, float(cost), utility - float(cost), workers, rows)


def infeasible(spec: JobSpec) -> Plan:
    """The plan of a job with no feasible schedule in a..T."""
    return make_plan(spec, None, math.inf, None, None, None, None)


def scan_result(spec: JobSpec, scan: CompletionScan, choices: Any, wprice: np.ndarray,
                pprice: np.ndarray, wfree: np.ndarray, pfree: np.ndarray) -> Plan:
    """The plan a finished scan points at (the DP's ``choices`` per slot from the arrival)."""
    if scan.stop is None:
        return infeasible(spec)
    return make_plan(spec, backtrack(spec, choices, scan.stop - spec.arrival), scan.cost,
                     wprice, pprice, wfree, pfree)
