"""The dual subroutine in JAX: the DP over remaining work as one jit-compiled kernel per block of
slots (CPU here, GPU where present). Same maths, tie rule and plans as ``dual_numpy`` (see
``dual``'s module docstring).

The per-slot cost curves C_t(k) come from ``_dp.slot_costs`` (the one function every backend
uses, so all minimise over the same floats), built on the host for a block of ``BLOCK`` slots.
Kernel ``_block`` (pure, jitted) runs the DP step of ``dual_numpy.dp_step`` over them with
``lax.scan`` over slots and a ``fori_loop`` over worker counts (the argmin of the tie costs,
then the chosen k's own cost), returning the new F, F_t(target) per slot and the choice table
for backtracking. The completion scan, its exact pruning and the backtrack are shared with numpy
(``_dp.CompletionScan``, ``_dp.backtrack``, ``_dp.make_plan``), between blocks.

Shapes are bucketed so that a new job almost never recompiles: the work table to a power of two
>= target + 1 and worker counts to a power of two >= max(N_i + 1, 128) (the loops over k stop
at the slot's last affordable count, a dynamic bound; padded counts cost inf); the last block of
slots is padded with slots where only k = 0 is possible (F unchanged). So an instance compiles
one kernel per work bucket (about log2(max W / min W) of them), and then never again.
Float64 is enabled inside this module's calls only (``jax.enable_x64``); each candidate and each
F entry is one float64 addition of numbers built by the shared code, as in numpy, so the
kernel's F and choices are numpy's bit for bit.

**Subnormal costs.** XLA on CPU runs with flush-to-zero and denormals-are-zero: a subnormal
input (|x| < 2^-1022, about 2.2e-308) reads as 0 and a subnormal result is written as 0. Prices
near an underflowed floor L (the calibrated pricing of jobs whose utility decays below 1e-300)
give such slot costs, and numpy keeps them: the kernel then saw ties where numpy saw a cheaper
count, and chose other plans (``paper_sim(2, jobs=400, horizon=300)``, job 6: cost 2.7e-310 in
numpy, 0.0 in JAX). So the curves enter the kernel multiplied by ``SCALE`` = 2^64 and its costs
leave divided by it. Multiplying by a power of two is exact, and the kernel only adds and
compares non-negative numbers: a sum of two multiples of 2^-1074 is exact while it is
subnormal, and rounds to 53 bits relative once it is normal, in either scale. So the scaled
kernel computes numpy's floats times 2^64 exactly, with no subnormal left for XLA to flush
(2^-1074 * 2^64 = 2^-1010 is normal). A slot cost above ``MAX_COST`` (2^900) would overflow
when scaled and summed, and raises ``ValueError`` (the numpy backend takes it).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._dp import (CompletionScan, JobSpec, Plan, infeasible, job_spec, scan_result, range_costs,
                  tie_costs)
from .dual_inputs import DualJob

BLOCK = 32
SCALE = 2.0 ** 64
"""Exact power-of-two scale of the kernel's costs (module docstring: subnormal costs)."""
MAX_COST = 2.0 ** 900
"""Largest finite slot cost the scaled kernel takes (2^900 * 2^64 * 2^59 slots < 2^1024)."""
# worker-count axis of the cost curves: one bucket covers the paper's N_i <= 100 (the DP loops
# stop at the last affordable count, so the padding costs only curve entries)
MIN_WORKERS = 128


def bucket(n: int, low: int = 8) -> int:
    """Smallest power of two >= max(n, low)."""
    return max(low, 1 << max(0, int(n) - 1).bit_length())


@jax.jit
def _block(F, C, Ct, delta, target):
    """The DP over a block of slots with cost curves C and tie costs Ct (BLOCK, Kb) (see the
    module docstring)."""
    Wb = F.shape[0]
    Kb = C.shape[1]

    def step(F, curves):
        c, ct = curves
        # candidates ct[k] + F[max(0, D - delta[k])]: shifted copies of F, no (D, k) gather
        # table (XLA runs this ~10x faster on CPU); strict < keeps the smallest k on ties,
        # like numpy's argmin
        Fp = jnp.concatenate([jnp.full(Wb, F[0]), F])

        def try_k(k, best_arg):
            best, arg = best_arg
            v = lax.dynamic_slice(Fp, (Wb - delta[k],), (Wb,)) + ct[k]
            better = v < best
            return jnp.where(better, v, best), jnp.where(better, k, arg)

        # k = 0..(last affordable count): C is infinite beyond the slot's capacity
        kf = jnp.max(jnp.where(jnp.isfinite(c), jnp.arange(Kb) + 1, 0)).astype(jnp.int32)
        init = (jnp.full(Wb, jnp.inf), jnp.zeros(Wb, dtype=jnp.int32))
        _, ch = lax.fori_loop(jnp.int32(0), kf, try_k, init)
        Fn = Fp[Wb + jnp.arange(Wb) - delta[ch]] + c[ch]  # the chosen k's own cost
        return Fn, (Fn[target], ch)

    F, (f_target, choices) = lax.scan(step, F, (C, Ct))
    return F, f_target, choices


def _curves(spec: JobSpec, wprice, pprice, wfree, pfree, start: int, n: int, Kb: int):
    """C and the tie costs for slots a+start .. a+start+n-1, padded to (BLOCK, Kb): inf beyond
    the job's options (k = 0..N_i without types), and padding slots where only option 0 (no
    worker) is possible."""
    a = spec.arrival + start
    C = range_costs(spec, a, a + n, wprice, pprice, wfree, pfree)
    out = np.full((2, BLOCK, Kb), np.inf)
    out[:, :, 0] = 0.0
    out[0, :n, :spec.options] = C
    out[1, :n, :spec.options] = tie_costs(C)
    finite = out[np.isfinite(out)]
    if finite.size and finite.max() > MAX_COST:
        raise ValueError(f"backend 'jax': a slot cost of job {spec.job} is "
                         f"{finite.max():.3g} > 2^900, out of the scaled kernel's range; "
                         f"use backend='numpy'")
    return out * SCALE  # exact (module docstring: subnormal costs)


def best_schedule_jax(spec: JobSpec, wprice, pprice, wfree, pfree,
                      lower_bound: float = 0.0) -> Plan:
    a, T, target, n_opt = spec.arrival, spec.horizon, spec.target, spec.options
    n_slots = T - a + 1
    if int(spec.delta[spec.ok].max()) * n_slots < target:
        return infeasible(spec)
    Wb, Kb = bucket(target + 1), bucket(n_opt, low=MIN_WORKERS)
    delta = np.zeros(Kb, dtype=np.int64)
    delta[:n_opt] = spec.delta
    scan = CompletionScan(spec, lower_bound)
    choices = []
    F0 = np.full(Wb, math.inf)
    F0[0] = 0.0
    with jax.enable_x64(True):
        F = jnp.asarray(F0)
        for start in range(0, n_slots, BLOCK):
            n = min(BLOCK, n_slots - start)
            C, Ct = _curves(spec, wprice, pprice, wfree, pfree, start, n, Kb)
            F, f_target, ch = _block(F, C, Ct, delta, target)
            choices.append(np.asarray(ch)[:n])  # slice on the host: no per-n compile
            done = False
            for j, cost in enumerate((np.asarray(f_target)[:n] / SCALE).tolist()):
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
        spec = job_spec(DualJob.from_instance(instance, i), instance.horizon, granularity)
        if spec.target:
            shapes.add((bucket(spec.target + 1), bucket(spec.options, low=MIN_WORKERS)))
    with jax.enable_x64(True):
        for Wb, Kb in sorted(shapes):
            F = np.full(Wb, math.inf)
            F[0] = 0.0
            C = np.full((BLOCK, Kb), np.inf)
            C[:, 0] = 0.0
            jax.block_until_ready(_block(jnp.asarray(F), C, C, np.arange(Kb), 1))
    return len(shapes)
