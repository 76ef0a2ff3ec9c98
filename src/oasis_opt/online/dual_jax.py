"""The dual subroutine in JAX: the DP over remaining work as one jit-compiled kernel per block of
slots (CPU here, GPU where present). Same maths, tie rule and plans as ``dual_numpy`` (see
``dual``'s module docstring).

The per-slot cost curves C_t(k) come from ``_dp.slot_costs`` (the one function every backend
uses, so all minimise over the same floats), built on the host for a block of ``BLOCK`` slots.
Kernel ``_block`` (pure, jitted) runs the DP step of ``dual_numpy.dp_step`` over them with
``lax.scan`` over slots and two ``fori_loop``s over worker counts (the minimum, then the smallest
tied k from the top down), returning the new F, F_t(target) per slot and the choice table for
backtracking. The completion scan, its exact pruning and the backtrack are shared with numpy
(``_dp.CompletionScan``, ``_dp.backtrack``, ``_dp.make_plan``), between blocks.

Shapes are bucketed so that a new job almost never recompiles: the work table to a power of two
>= target + 1 and worker counts to a power of two >= max(N_i + 1, 128) (the loops over k stop
at the slot's last affordable count, a dynamic bound; padded counts cost inf); the last block of
slots is padded with slots where only k = 0 is possible (F unchanged). So an instance compiles
one kernel per work bucket (about log2(max W / min W) of them), and then never again.
Float64 is enabled inside this module's calls only (``jax.enable_x64``); each candidate is one
float64 addition and each tie test one multiplication and one comparison, as in numpy, so the
kernel's F and choices are numpy's bit for bit.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._dp import (TIE_FACTOR, CompletionScan, JobSpec, Plan, infeasible, job_arguments,
                  job_spec, scan_result, slot_costs)

BLOCK = 32
# worker-count axis of the cost curves: one bucket covers the paper's N_i <= 100 (the DP loops
# stop at the last affordable count, so the padding costs only curve entries)
MIN_WORKERS = 128


def bucket(n: int, low: int = 8) -> int:
    """Smallest power of two >= max(n, low)."""
    return max(low, 1 << max(0, int(n) - 1).bit_length())


@jax.jit
def _block(F, C, delta, target):
    """The DP over a block of slots with cost curves C (BLOCK, Kb) (see module docstring)."""
    Wb = F.shape[0]
    Kb = C.shape[1]

    def step(F, c):
        # candidates c[k] + F[max(0, D - delta[k])]: shifted copies of F, no (D, k) gather
        # table (XLA runs this ~10x faster on CPU)
        Fp = jnp.concatenate([jnp.full(Wb, F[0]), F])

        def cand(k):
            return lax.dynamic_slice(Fp, (Wb - delta[k],), (Wb,)) + c[k]

        # k = 0..(last affordable count): C is infinite beyond the slot's capacity
        kf = jnp.max(jnp.where(jnp.isfinite(c), jnp.arange(Kb) + 1, 0))
        low = lax.fori_loop(1, kf, lambda k, m: jnp.minimum(m, cand(k)), cand(0)) * TIE_FACTOR

        def pick(j, best_arg):  # from the largest k down: the last write is the smallest tied k
            best, arg = best_arg
            k = kf - 1 - j
            v = cand(k)
            tied = v <= low
            return jnp.where(tied, v, best), jnp.where(tied, k.astype(jnp.int32), arg)

        init = (jnp.full(Wb, jnp.inf), jnp.zeros(Wb, dtype=jnp.int32))
        Fn, ch = lax.fori_loop(0, kf, pick, init)
        return Fn, (Fn[target], ch)

    F, (f_target, choices) = lax.scan(step, F, C)
    return F, f_target, choices


def _curves(spec: JobSpec, wprice, pprice, wfree, pfree, start: int, n: int, Kb: int):
    """C for slots a+start .. a+start+n-1, padded to (BLOCK, Kb): inf beyond N_i, and padding
    slots where only k = 0 is possible."""
    a = spec.arrival + start
    out = np.full((BLOCK, Kb), np.inf)
    out[:, 0] = 0.0
    out[:n, :spec.N + 1] = slot_costs(spec, wprice[a:a + n], pprice[a:a + n], wfree[a:a + n],
                                      pfree[a:a + n])
    return out


def best_schedule_jax(spec: JobSpec, wprice, pprice, wfree, pfree,
                      lower_bound: float = 0.0) -> Plan:
    a, T, target, N = spec.arrival, spec.horizon, spec.target, spec.N
    n_slots = T - a + 1
    if int(spec.delta[spec.ok].max()) * n_slots < target:
        return infeasible(spec)
    Wb, Kb = bucket(target + 1), bucket(N + 1, low=MIN_WORKERS)
    delta = np.zeros(Kb, dtype=np.int64)
    delta[:N + 1] = spec.delta
    scan = CompletionScan(spec, lower_bound)
    choices = []
    F = np.full(Wb, math.inf)
    F[0] = 0.0
    with jax.enable_x64(True):
        F = jnp.asarray(F)
        for start in range(0, n_slots, BLOCK):
            n = min(BLOCK, n_slots - start)
            C = _curves(spec, wprice, pprice, wfree, pfree, start, n, Kb)
            F, f_target, ch = _block(F, C, delta, target)
            choices.append(np.asarray(ch)[:n])  # slice on the host: no per-n compile
            done = False
            for j, cost in enumerate(np.asarray(f_target)[:n].tolist()):
                done = scan.update(a + start + j, cost)
                if done:
                    break
            if done:
                break
    return scan_result(spec, scan, np.concatenate(choices), wprice, pprice, wfree, pfree)


def warmup(instance, granularity: str = "worker-slot") -> int:
    """Compile the kernels every job of ``instance`` will need (one per work bucket), so that
    timed decisions exclude compilation; returns the number of distinct kernels."""
    shapes = set()
    for i in range(instance.I):
        spec = job_spec(horizon=instance.horizon, granularity=granularity,
                        **job_arguments(instance, i))
        if spec.target:
            shapes.add((bucket(spec.target + 1), bucket(spec.N + 1, low=MIN_WORKERS)))
    with jax.enable_x64(True):
        for Wb, Kb in sorted(shapes):
            F = np.full(Wb, math.inf)
            F[0] = 0.0
            C = np.full((BLOCK, Kb), np.inf)
            C[:, 0] = 0.0
            jax.block_until_ready(_block(jnp.asarray(F), C, np.arange(Kb), 1))
    return len(shapes)
