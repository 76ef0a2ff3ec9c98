"""Fast exact dual subroutine in numpy (the default backend).

Same maths as ``dual_reference`` (see ``dual``'s module docstring), organised for speed:

1. **Cost curves, vectorised over slots.** C_t(k) for k = 0..N_i comes from the sorted unit
   prices: the j-th cheapest worker costs the unit price of the server where the cumulative fit
   count first reaches j, so C_t is a cumulative sum of marginal prices (plus the PS curve at
   ceil(k b/B)). Only the N_i cheapest usable servers can matter (each holds at least one), so a
   partial sort (argpartition) replaces a full sort when H >> N_i.
2. **DP over remaining work** F_t(D) = min_k C_t(k) + F_{t-1}(max(0, D - delta(k))), one
   vectorised min-plus step per slot: a (D, k) table for small problems (in worker-slot
   granularity a strided window of F, no gather), a loop over k of in-place vector updates for
   large ones (literal-calibration jobs with W in the tens of thousands). Only k up to the
   slot's capacity (C_t is non-decreasing and infinite beyond it) and D up to the work reachable
   so far are computed.
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
LOOP_ABOVE = 100_000  # (D, k) table size above which dp_step loops over k instead


def dp_step(F: np.ndarray, c: np.ndarray, rows: int, delta: np.ndarray, chunk: bool):
    """One min-plus step: (F_t over D = 0..rows-1, argmin k) from F_{t-1} and the slot's finite
    costs ``c`` (k = 0..len(c)-1); ties keep the smallest k.

    Small tables build the whole (D, k) candidate table at once (a strided view of F for
    delta(k) = k, a gather for chunks); large ones loop over k with in-place vector updates,
    which keeps the working set at a few vectors of length ``rows`` (3-5x faster there).
    """
    kf = len(c)
    dtype = _index_dtype(kf)
    shift = int(delta[kf - 1])  # the largest delta among the candidates
    Fp = np.empty(rows + shift)  # Fp[shift + D - delta] = F[max(0, D - delta)]
    Fp[:shift] = F[0]
    Fp[shift:] = F[:rows]
    if rows * kf > LOOP_ABOVE:
        best = Fp[shift:] + c[0]
        arg = np.zeros(rows, dtype=dtype)
        v, better = np.empty(rows), np.empty(rows, dtype=bool)
        for k in range(1, kf):
            d = shift - int(delta[k])
            np.add(Fp[d:d + rows], c[k], out=v)
            np.less(v, best, out=better)
            np.copyto(best, v, where=better)
            np.copyto(arg, k, where=better)
        return best, arg
    if not chunk:  # delta(k) = k: cand[D, k] = Fp[shift + D - k], a strided view, no copy
        cand = np.ndarray((rows, kf), np.float64, Fp, shift * Fp.itemsize,
                          (Fp.itemsize, -Fp.itemsize)) + c
    else:
        cand = Fp[shift + np.arange(rows)[:, None] - delta[None, :kf]] + c
    ch = cand.argmin(axis=1)
    return cand[np.arange(rows), ch], ch.astype(dtype)


def _index_dtype(n: int):
    """Smallest unsigned dtype for 0..n-1: the backtrack table is T x W, keep it small."""
    return np.uint8 if n <= 256 else np.uint16 if n <= 65536 else np.int64


def best_schedule_numpy(instance, spec: JobSpec, wprice, pprice, wfree, pfree,
                        lower_bound: float = 0.0) -> Plan:
    a, T, target = spec.arrival, spec.horizon, spec.target
    n_slots = T - a + 1
    if int(spec.delta[spec.ok].max()) * n_slots < target:  # N_i workers every slot: too little
        return make_plan(instance, spec, None, math.inf, wprice, pprice, wfree, pfree)
    chunk = spec.granularity == "chunk"
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
            Fn[:reach + 1], ch = dp_step(F, c[:kf], reach + 1, spec.delta, chunk)
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
