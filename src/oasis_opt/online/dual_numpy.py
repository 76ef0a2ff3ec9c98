"""Fast exact dual subroutine in numpy (the default backend).

Same maths and the same tie rule as ``dual_reference`` (see ``dual``'s module docstring),
organised for speed:

1. **Cost curves, vectorised over slots** (``_dp.slot_costs``, shared by every backend): C_t(k)
   for k = 0..N_i from the sorted unit prices. Only the N_i cheapest usable servers can matter
   (each holds at least one), so a partial sort (argpartition) replaces a full sort when
   H >> N_i.
2. **DP over remaining work** F_t(D) = C_t(k*) + F_{t-1}(max(0, D - delta(k*))), k* the tie
   rule's choice (the argmin of the tie costs), one vectorised step per slot: a (D, k) table for
   small problems (in worker-slot granularity a strided window of F, no gather), a loop over k
   of in-place vector updates for large ones (literal-calibration jobs with W in the tens of
   thousands). Only k up to the slot's capacity (C_t is infinite beyond it) and D up to the work
   reachable so far are computed.
3. **Exact pruning of the completion scan.** Costs are non-negative and f is non-increasing, so a
   later t_hat' has payoff <= f(t_hat' - a) - LB where LB (``_dp.cost_lower_bound``) bounds the
   cost of any schedule from below. Once f(t + 1 - a) - LB falls below the best payoff (by more
   than the float margin) no later slot can win and the scan stops. Slots are processed in
   blocks of growing size so that curves are only built for slots the scan reaches.
"""
from __future__ import annotations

import math

import numpy as np

from ._dp import (CompletionScan, JobSpec, Plan, finite_prefix, infeasible, range_costs,
                  scan_result, tie_costs)

FIRST_BLOCK, MAX_BLOCK = 8, 128
LOOP_ABOVE = 100_000  # (D, k) table size above which dp_step loops over k instead


def dp_step(F: np.ndarray, c: np.ndarray, ct: np.ndarray, rows: int, delta: np.ndarray,
            unit_delta: bool, loop: bool | None = None):
    """One DP step: (F_t over D = 0..rows-1, chosen k) from F_{t-1}, the slot's costs ``c`` and
    tie costs ``ct`` (options k = 0..len(c)-1 doing delta(k) units, ``_dp.tie_costs``; k
    workers without accelerator types). The choice is the smallest k
    minimising ct[k] + F[max(0, D - delta(k))]; F_t(D) is c[k] + F[max(0, D - delta(k))].

    Small tables build the whole (D, k) candidate table at once (a strided view of F for
    delta(k) = k, a gather for chunks); large ones loop over k with in-place vector updates,
    which keeps the working set at a few vectors of length ``rows`` (3-5x faster there);
    ``loop`` forces one or the other (the same results).

    A batch of independent DPs of one job (``online.pricing_batch``: one per price floor) passes
    F (B, n), c and ct (B, kf): every member gets the floats its own 1-D call gives (the same
    element-wise additions and first-minimum choices; a member's options beyond its own finite
    prefix cost inf and are never chosen over a finite candidate).
    """
    kf = c.shape[-1]
    dtype = _index_dtype(kf)
    lead = F.shape[:-1]
    shift = int(delta[kf - 1])  # the largest delta among the candidates
    Fp = np.empty(lead + (rows + shift,))  # Fp[shift + D - delta] = F[max(0, D - delta)]
    Fp[..., :shift] = F[..., :1]
    Fp[..., shift:] = F[..., :rows]
    if loop if loop is not None else rows * kf > LOOP_ABOVE:
        best = Fp[..., shift:] + ct[..., :1]
        arg = np.zeros(lead + (rows,), dtype=dtype)
        v, better = np.empty(lead + (rows,)), np.empty(lead + (rows,), dtype=bool)
        for k in range(1, kf):
            d = shift - int(delta[k])
            np.add(Fp[..., d:d + rows], ct[..., k:k + 1], out=v)
            np.less(v, best, out=better)
            np.copyto(best, v, where=better)
            np.copyto(arg, k, where=better)
    elif unit_delta:  # delta(k) = k: cand[D, k] = Fp[shift + D - k], a strided view, no copy
        cand = np.ndarray(lead + (rows, kf), np.float64, Fp, shift * Fp.itemsize,
                          Fp.strides[:-1] + (Fp.itemsize, -Fp.itemsize)) + ct[..., None, :]
        arg = cand.argmin(axis=-1).astype(dtype)
    else:
        cand = Fp[..., shift + np.arange(rows)[:, None] - delta[None, :kf]] + ct[..., None, :]
        arg = cand.argmin(axis=-1).astype(dtype)
    at = shift + np.arange(rows) - delta[arg]
    if not lead:
        return Fp[at] + c[arg], arg
    return np.take_along_axis(Fp, at, axis=-1) + np.take_along_axis(c, arg, axis=-1), arg


def _index_dtype(n: int):
    """Smallest unsigned dtype for 0..n-1: the backtrack table is T x W, keep it small."""
    return np.uint8 if n <= 256 else np.uint16 if n <= 65536 else np.int64


def best_schedule_numpy(spec: JobSpec, wprice, pprice, wfree, pfree,
                        lower_bound: float = 0.0) -> Plan:
    a, T, target = spec.arrival, spec.horizon, spec.target
    n_slots = T - a + 1
    if int(spec.delta[spec.ok].max()) * n_slots < target:  # N_i workers every slot: too little
        return infeasible(spec)
    # F_{t-1} and F_t alternate between two buffers: entries beyond the reach stay inf, and
    # the reach never shrinks, so each step overwrites all that the older buffer held
    F, Fn = np.full(target + 1, math.inf), np.full(target + 1, math.inf)
    F[0] = 0.0
    most = np.maximum.accumulate(spec.delta).tolist()  # most[k]: max delta over options 0..k
    choices: list[np.ndarray] = []
    nothing = np.zeros(target + 1, dtype=np.uint8)  # the choices of a slot where nothing fits
    scan = CompletionScan(spec, lower_bound)
    reach = 0  # most work units reachable within the slots so far
    s, block, done = 0, FIRST_BLOCK, False
    while not done:
        e = min(n_slots, s + block)
        C = range_costs(spec, a + s, a + e, wprice, pprice, wfree, pfree)
        for c, ct, kf in zip(C, tie_costs(C), finite_prefix(C).tolist()):
            if kf == 1:  # nothing fits: F_t = C_t(0) + F_{t-1} = 0 + F_{t-1}, option 0
                choices.append(nothing)
            else:
                reach = min(target, reach + int(most[kf - 1]))
                Fn[:reach + 1], ch = dp_step(F, c[:kf], ct[:kf], reach + 1, spec.delta,
                                             spec.unit_delta)
                F, Fn = Fn, F
                choices.append(ch)
            done = scan.update(a + len(choices) - 1, float(F[target]))
            if done:
                break
        s, block = e, min(2 * block, MAX_BLOCK)
    return scan_result(spec, scan, choices, wprice, pprice, wfree, pfree)
