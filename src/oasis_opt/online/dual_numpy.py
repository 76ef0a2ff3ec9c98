"""Fast exact dual subroutine in numpy (the default backend).

Same maths as ``dual_reference`` (see ``dual``'s module docstring), organised for speed:

1. **Cost curves, vectorised over slots.** C_t(k) for k = 0..N_i comes from the sorted unit
   prices: the j-th cheapest worker costs the unit price of the server where the cumulative fit
   count first reaches j, so C_t is a cumulative sum of marginal prices (plus the PS curve at
   ceil(k b/B)). Only the N_i cheapest usable servers can matter (each holds at least one), so a
   partial sort (argpartition) replaces a full sort when H >> N_i.
2. **DP over remaining work** F_t(D) = min_k C_t(k) + F_{t-1}(max(0, D - delta(k))), one
   vectorised min-plus step per slot over an (D, k) table; in worker-slot granularity the table is
   a strided window of F, no gather. Only k up to the slot's capacity (C_t is non-decreasing and
   infinite beyond it) and D up to the work reachable so far are computed.
3. **Exact pruning of the completion scan.** Costs are non-negative and f is non-increasing, so a
   later t_hat' has payoff <= f(t_hat' - a) - LB where LB (``dual.cost_lower_bound``) bounds the
   cost of any schedule from below. Once f(t + 1 - a) - LB falls below the best payoff (by more
   than the float margin) no later slot can win and the scan stops. Slots are processed in
   blocks of growing size so that curves are only built for slots the scan reaches.
"""
from __future__ import annotations

import math

import numpy as np

from .dual import CompletionScan, JobSpec, Plan, backtrack, make_plan, slot_costs

FIRST_BLOCK, MAX_BLOCK = 8, 128


def dp_step(F: np.ndarray, c: np.ndarray, rows: int, idx: np.ndarray | None):
    """One min-plus step: (F_t over D = 0..rows-1, argmin k) from F_{t-1} and the slot's finite
    costs ``c`` (k = 0..len(c)-1); ties keep the smallest k."""
    kf = len(c)
    if idx is None:  # worker-slot: delta(k) = k, cand[D, k] = Fp[kf-1 + D - k], a strided view
        Fp = np.empty(rows + kf - 1)
        Fp[:kf - 1] = F[0]
        Fp[kf - 1:] = F[:rows]
        cand = np.ndarray((rows, kf), np.float64, Fp, (kf - 1) * Fp.itemsize,
                          (Fp.itemsize, -Fp.itemsize)) + c
    else:
        cand = F[idx[:rows, :kf]] + c
    ch = cand.argmin(axis=1)
    return cand[np.arange(rows), ch], ch.astype(_index_dtype(kf))


def _index_dtype(n: int):
    """Smallest unsigned dtype for 0..n-1: the backtrack table is T x W, keep it small."""
    return np.uint8 if n <= 256 else np.uint16 if n <= 65536 else np.int64


def best_schedule_numpy(instance, spec: JobSpec, wprice, pprice, wfree, pfree,
                        lower_bound: float = 0.0) -> Plan:
    a, T, target = spec.arrival, spec.horizon, spec.target
    n_slots = T - a + 1
    if int(spec.delta[spec.ok].max()) * n_slots < target:  # N_i workers every slot: too little
        return make_plan(instance, spec, None, math.inf, wprice, pprice, wfree, pfree)
    idx = (None if spec.granularity == "worker-slot"
           else np.maximum(0, np.arange(target + 1)[:, None] - spec.delta[None, :]))
    F = np.full(target + 1, math.inf)
    F[0] = 0.0
    choices: list[np.ndarray] = []
    scan = CompletionScan(spec, lower_bound)
    reach = 0  # most work units reachable within the slots so far
    s, block, done = 0, FIRST_BLOCK, False
    while not done:
        e = min(n_slots, s + block)
        C = slot_costs(spec, wprice[a + s:a + e], pprice[a + s:a + e], wfree[a + s:a + e],
                       pfree[a + s:a + e])
        kfs = np.isfinite(C).sum(axis=1)  # finite entries form a prefix (capacity)
        for c, kf in zip(C, kfs.tolist()):
            reach = min(target, reach + int(spec.delta[kf - 1]))
            Fn = np.full(target + 1, math.inf)
            Fn[:reach + 1], ch = dp_step(F, c[:kf], reach + 1, idx)
            F = Fn
            choices.append(ch)
            done = scan.update(a + len(choices) - 1, float(F[target]))
            if done:
                break
        s, block = e, min(2 * block, MAX_BLOCK)
    if scan.stop is None:
        return make_plan(instance, spec, None, math.inf, wprice, pprice, wfree, pfree)
    return make_plan(instance, spec, backtrack(spec, choices, scan.stop - a), scan.cost,
                     wprice, pprice, wfree, pfree)
