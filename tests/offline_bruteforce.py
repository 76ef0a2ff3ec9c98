"""Brute-force optimum of problem (1) on tiny instances, written independently of the MILP.

Per job, enumerate every minimal plan: a completion slot t_hat and integer workers k_t <= N_i per
slot in a_i..t_hat with k_{t_hat} >= 1 and sum k_t = work_i exactly (any feasible plan contains
one of these slot-wise, and fewer workers never make a slot less feasible: they need no more PSs,
ceil(k b / B)). Then search over one option per job (or rejection), checking each slot by trying
every placement of the workers on the worker servers and of the fewest PSs on the PS servers.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np


def _compositions(total: int, parts: int, cap: int):
    """Tuples of ``parts`` integers in 0..cap summing to ``total``."""
    if parts == 0:
        if total == 0:
            yield ()
        return
    for first in range(min(cap, total) + 1):
        for rest in _compositions(total - first, parts - 1, cap):
            yield (first,) + rest


def job_options(inst, i: int) -> list[tuple[float, dict[int, int]]]:
    """(utility, {slot: workers}) for every minimal plan of job i, best utility first."""
    a, T, N, work = int(inst.arrival[i]), inst.horizon, int(inst.chunks[i]), int(inst.work[i])
    out = []
    for t_hat in range(a, T + 1):
        n = t_hat - a + 1
        for ks in _compositions(work, n, N):
            if ks[-1] >= 1:
                out.append((float(inst.utility_table[i, t_hat]),
                            {a + s: k for s, k in enumerate(ks) if k}))
    return sorted(out, key=lambda o: -o[0])


def _fits(demands: list[tuple[np.ndarray, int]], capacity: np.ndarray) -> bool:
    """Can containers (demand vector, count) be placed on servers with ``capacity`` (S, R)?"""
    S = capacity.shape[0]

    def place(n: int, free: np.ndarray) -> bool:
        if n == len(demands):
            return True
        d, count = demands[n]
        for split in _compositions(count, S, count):
            use = np.outer(split, d)
            if np.all(use <= free + 1e-9):
                if place(n + 1, free - use):
                    return True
        return False

    return place(0, capacity.astype(float))


def brute_force(inst) -> float:
    """The optimal total utility of ``inst`` by exhaustive search (tiny instances only)."""
    b, B = inst.worker_bw, inst.ps_bw

    @lru_cache(maxsize=None)
    def slot_ok(load: tuple[tuple[int, int], ...]) -> bool:
        workers, pss = [], []
        for i, k in load:
            z = max(1, math.ceil(k * b[i] / B[i] - 1e-9))
            if z > k:
                return False
            workers.append((inst.worker_demand[i], k))
            pss.append((inst.ps_demand[i], z))
        return _fits(workers, inst.worker_capacity) and _fits(pss, inst.ps_capacity)

    options = [job_options(inst, i) for i in range(inst.I)]
    best_left = [0.0] * (inst.I + 1)  # optimistic utility of jobs i.. (for pruning)
    for i in reversed(range(inst.I)):
        best_left[i] = best_left[i + 1] + (options[i][0][0] if options[i] else 0.0)
    best = 0.0
    load: dict[int, list[tuple[int, int]]] = {}

    def search(i: int, value: float) -> None:
        nonlocal best
        if value + best_left[i] <= best + 1e-12:
            return
        if i == inst.I:
            best = value
            return
        for util, plan in options[i]:
            if value + util + best_left[i + 1] <= best + 1e-12:
                break  # options are sorted by utility
            ok = True
            for t, k in plan.items():
                if not slot_ok(tuple(sorted(load.get(t, []) + [(i, k)]))):
                    ok = False
                    break
            if ok:
                for t, k in plan.items():
                    load.setdefault(t, []).append((i, k))
                search(i + 1, value + util)
                for t in plan:
                    load[t].pop()
        search(i + 1, value)  # reject job i

    search(0, 0.0)
    return best

