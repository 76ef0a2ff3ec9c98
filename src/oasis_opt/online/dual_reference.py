"""Plain reference implementation of the dual subroutine (Alg. 2), written for reading.

Everything is recomputed with explicit loops, straight from the paper: COST_t (the per-slot
greedy, Theorem 1) for every slot and worker count, a DP table over (slot, remaining work), a scan
over completion slots with a strict improvement test, and a backtrack. The fast backends are
tested against this one; it shares with them only the job's data (``JobSpec``) and the payoff
margin. Use it on small instances only: it is O(T * target * N * (H + K) R) Python operations.

Granularity "worker-slot": the DP runs over remaining worker-slots D = 0..W_i and k = 0..N_i
workers per slot. Granularity "chunk": the paper's literal DP_COST over remaining data chunks
D = 0..E_i N_i, trying every d = 0..D chunks in a slot at the cost COST_t(ceil(d x_i)).
"""
from __future__ import annotations

import math

import numpy as np

from ..sim.placement import EPS
from .dual import CHUNK_EPS, JobSpec, Plan, payoff_margin

INF = math.inf


def _fit(free_row, demand) -> int:
    """How many containers fit on a server: min over demanded resources of floor(free / demand)."""
    n = None
    for f, d in zip(free_row, demand):
        if d > 0:
            m = math.floor((f + EPS) / d)
            n = m if n is None else min(n, m)
    return max(0, n) if n is not None else 10**9


def _greedy(prices, free, demand, count):
    """Place ``count`` containers cheapest server first (ties by index): (cost, [(server, n)])
    or (inf, None) when they do not fit. ``prices`` / ``free``: (S, R) of one slot."""
    unit = [sum(p * d for p, d in zip(prices[h], demand)) for h in range(len(prices))]
    order = sorted(range(len(prices)), key=lambda h: (unit[h], h))
    cost, placed, left = 0.0, [], count
    for h in order:
        if left == 0:
            break
        n = min(_fit(free[h], demand), left)
        if n > 0:
            placed.append((h, n))
            cost += n * unit[h]
            left -= n
    return (cost, placed) if left == 0 else (INF, None)


def cost_t(spec: JobSpec, t, k, wprice, pprice, wfree, pfree):
    """COST_t of Alg. 2 for k workers in slot t: (cost, worker placement, PS placement)."""
    if k == 0:
        return 0.0, [], []
    if k > spec.N:
        return INF, None, None
    cw, y = _greedy(wprice[t], wfree[t], spec.w, k)
    if y is None:
        return INF, None, None
    m = int(spec.need[k])
    if m > k:  # constraint (7): never more PSs than workers
        return INF, None, None
    cp, z = _greedy(pprice[t], pfree[t], spec.s, m)
    if z is None:
        return INF, None, None
    return cw + cp, y, z


def best_schedule_reference(instance, spec: JobSpec, wprice, pprice, wfree, pfree,
                            lower_bound: float = 0.0) -> Plan:
    a, T, N = spec.arrival, spec.horizon, spec.N
    chunk = spec.granularity == "chunk"
    x = spec.chunk_time
    # COST_t table: slot -> k -> cost
    C = {t: [cost_t(spec, t, k, wprice, pprice, wfree, pfree)[0] for k in range(N + 1)]
         for t in range(a, T + 1)}

    def slot_cost(t, d):
        """Cost of d units of work in slot t (d chunks or d worker-slots) and the workers used."""
        if not chunk:
            return (C[t][d], d) if d <= N else (INF, d)
        k = math.ceil(d * x - CHUNK_EPS)
        return (C[t][k], k) if k <= N else (INF, k)

    target = spec.target
    # F[t][D]: cheapest cost of >= D units within slots a..t; choice[t][D]: units done in slot t
    F = {a - 1: [0.0] + [INF] * target}
    choice: dict[int, list[int]] = {}
    for t in range(a, T + 1):
        F[t], choice[t] = [], []
        for D in range(target + 1):
            best, arg = INF, 0
            for d in range(0, D + 1) if chunk else range(0, min(N, D) + 1):
                c = slot_cost(t, d)[0] + F[t - 1][D - d]
                if c < best:
                    best, arg = c, d
            F[t].append(best)
            choice[t].append(arg)
    # Alg. 2: scan completion slots, keep a strictly better payoff (earliest on ties)
    best_payoff, t_hat = -INF, None
    for t in range(a, T + 1):
        if F[t][target] == INF:
            continue
        payoff = float(spec.utility[t]) - F[t][target]
        if payoff > best_payoff + payoff_margin(best_payoff):
            best_payoff, t_hat = payoff, t
    if t_hat is None:
        return Plan(spec.job, None, 0.0, INF, -INF, np.zeros(T + 1, dtype=np.int64),
                    np.zeros((0, 5), dtype=np.int64))
    workers = np.zeros(T + 1, dtype=np.int64)
    rows = []
    D = target
    for t in range(t_hat, a - 1, -1):
        d = choice[t][D]
        D -= d
        k = slot_cost(t, d)[1]
        if k == 0:
            continue
        _, y, z = cost_t(spec, t, k, wprice, pprice, wfree, pfree)
        workers[t] = k
        rows += [(spec.job, t, h, 0, n) for h, n in y] + [(spec.job, t, instance.H + q, 1, n)
                                                          for q, n in z]
    completion = int(np.flatnonzero(workers)[-1])
    utility = float(spec.utility[completion])
    cost = F[t_hat][target]
    rows.sort()
    return Plan(spec.job, completion, utility, cost, utility - cost, workers,
                np.asarray(rows, dtype=np.int64).reshape(-1, 5))
