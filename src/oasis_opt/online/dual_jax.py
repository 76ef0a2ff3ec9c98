"""The dual subroutine in JAX: one jit-compiled kernel per block of slots (CPU here, GPU where
present). Same maths and same results as ``dual_numpy`` (see ``dual``'s module docstring).

Kernel ``_block`` (pure, jitted): for a block of ``BLOCK`` consecutive slots it builds the cost
curves C_t(k) (unit prices, fit counts, the cheapest containers by ``lax.top_k``, cumulative
fits located by a searchsorted ``vmap``-ped over slots) and runs the min-plus DP over them with
``lax.scan`` over slots and a ``fori_loop`` over worker counts, returning the new F, F_t(target) per slot and the argmin table for backtracking.
The completion scan, its exact pruning and the backtrack are shared with numpy
(``dual.CompletionScan``, ``dual.backtrack``, ``dual.make_plan``), between blocks.

Shapes are bucketed so that a new job almost never recompiles: servers H and K are padded to a
power of two (>= 8) with servers that have no free capacity (they can never be used), the work
table to a power of two >= target + 1 and worker counts to a power of two >= max(N_i + 1, 128)
(the DP loop over k stops at N_i, a dynamic bound); the last block of slots is padded with empty
slots. So an instance compiles one kernel per work bucket (about log2(max W / min W) of them,
1-2 s each on CPU), and then never again.
Float64 is enabled inside this module's calls only (``jax.enable_x64``), so results match numpy.
"""
from __future__ import annotations

import math
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..sim.placement import EPS
from .dual import CompletionScan, JobSpec, Plan, backtrack, make_plan

BLOCK = 32
# worker-count axis of the cost curves: one bucket covers the paper's N_i <= 100 (the DP loop
# itself stops at N_i, so the padding costs only curve entries)
MIN_WORKERS = 128
_BIG = 1 << 40


def bucket(n: int, low: int = 8) -> int:
    """Smallest power of two >= max(n, low)."""
    return max(low, 1 << max(0, int(n) - 1).bit_length())


def _fits(free, demand, cap, n_real):
    """min(cap, min_{r: demand > 0} floor((free + EPS) / demand)), shape free.shape[:-1]; 0 on
    the padding servers (index >= n_real)."""
    per = jnp.where(demand > 0, jnp.floor((free + EPS) / jnp.where(demand > 0, demand, 1.0)),
                    _BIG)
    real = jnp.arange(free.shape[1]) < n_real
    return jnp.where(real, jnp.clip(per.min(axis=-1), 0, cap), 0).astype(jnp.int64)


def _marginals(u, fit, n_out: int):
    """m[t, j-1]: unit price of the j-th cheapest container in slot t, j = 1..n_out (inf beyond
    capacity); ``u``, ``fit``: (S, servers)."""
    n_sel = min(u.shape[1], n_out)
    um = jnp.where(fit > 0, u, jnp.inf)
    neg, sel = lax.top_k(-um, n_sel)  # the n_sel cheapest usable servers, ascending price
    u_sorted = -neg
    cum = jnp.cumsum(jnp.take_along_axis(fit, sel, axis=1), axis=1)
    j = jnp.arange(1, n_out + 1)
    pos = jax.vmap(lambda c: jnp.searchsorted(c, j, side="left"))(cum)
    price = jnp.take_along_axis(u_sorted, jnp.minimum(pos, n_sel - 1), axis=1)
    return jnp.where(pos < n_sel, price, jnp.inf)


@jax.jit
def _block(F, wprice, pprice, wfree, pfree, w, s, need, ok, delta, n_max, m_max, target, H,
           K):
    """Cost curves for a block of slots, then the DP over them (see module docstring)."""
    Kb = need.shape[0]
    # per-slot cost curves C[t, k], k = 0..Kb-1
    uw = jnp.einsum("thr,r->th", wprice, w)
    mw = _marginals(uw, _fits(wfree, w, n_max, H), Kb - 1)
    up = jnp.einsum("thr,r->th", pprice, s)
    mp = _marginals(up, _fits(pfree, s, m_max, K), Kb - 1)
    zero = jnp.zeros((wprice.shape[0], 1))
    cw = jnp.concatenate([zero, jnp.cumsum(mw, axis=1)], axis=1)
    cp = jnp.concatenate([zero, jnp.cumsum(mp, axis=1)], axis=1)
    C = jnp.where(ok, cw + cp[:, jnp.minimum(need, Kb - 1)], jnp.inf)

    Wb = F.shape[0]

    def step(F, c):
        # min over k of c[k] + F[max(0, D - delta[k])]: a loop over k of shifted copies of F
        # (no (D, k) gather table: XLA runs this ~10x faster on CPU); strict < keeps the
        # smallest k on ties, like numpy's argmin
        Fp = jnp.concatenate([jnp.full(Wb, F[0]), F])

        def try_k(k, best_arg):
            best, arg = best_arg
            v = lax.dynamic_slice(Fp, (Wb - delta[k],), (Wb,)) + c[k]
            better = v < best
            return jnp.where(better, v, best), jnp.where(better, k, arg)

        init = (jnp.full(Wb, jnp.inf), jnp.zeros(Wb, dtype=jnp.int32))
        # k = 0..(last affordable count): C is finite on a prefix (the slot's capacity, <= N_i)
        Fn, ch = lax.fori_loop(0, jnp.sum(jnp.isfinite(c)), try_k, init)
        return Fn, (Fn[target], ch)

    F, (f_target, choices) = lax.scan(step, F, C)
    return F, f_target, choices


def _padded(arr, a: int, start: int, n: int, servers: int):
    """Slots a+start .. a+start+n-1 of ``arr`` (T+1, S, R), padded to (BLOCK, servers, R) with
    zeros (no free capacity, price 0: never usable)."""
    out = np.zeros((BLOCK, servers, arr.shape[2]))
    out[:n, :arr.shape[1]] = arr[a + start:a + start + n]
    return out


def best_schedule_jax(instance, spec: JobSpec, wprice, pprice, wfree, pfree,
                      lower_bound: float = 0.0) -> Plan:
    a, T, target, N = spec.arrival, spec.horizon, spec.target, spec.N
    n_slots = T - a + 1
    if int(spec.delta[spec.ok].max()) * n_slots < target:
        return make_plan(instance, spec, None, math.inf, wprice, pprice, wfree, pfree)
    Hb, Kb_srv = bucket(instance.H), bucket(instance.K)
    Wb, Kb = bucket(target + 1), bucket(N + 1, low=MIN_WORKERS)
    need = np.full(Kb, Kb - 1, dtype=np.int64)
    need[:N + 1] = spec.need
    ok = np.zeros(Kb, dtype=bool)
    ok[:N + 1] = spec.ok
    delta = np.zeros(Kb, dtype=np.int64)
    delta[:N + 1] = spec.delta
    m_max = int(spec.need[spec.ok].max())
    scan = CompletionScan(spec, lower_bound)
    choices = []
    F0 = np.full(Wb, math.inf)
    F0[0] = 0.0
    with jax.enable_x64(True):
        F = jnp.asarray(F0)
        consts = (np.asarray(spec.w), np.asarray(spec.s), need, ok, delta)  # as in ``warmup``
        for start in range(0, n_slots, BLOCK):
            n = min(BLOCK, n_slots - start)
            F, f_target, ch = _block(
                F, _padded(wprice, a, start, n, Hb), _padded(pprice, a, start, n, Kb_srv),
                _padded(wfree, a, start, n, Hb), _padded(pfree, a, start, n, Kb_srv),
                *consts, N, m_max, target, instance.H, instance.K)
            choices.append(np.asarray(ch)[:n])  # slice on the host: no per-n compile
            done = False
            for j, cost in enumerate(np.asarray(f_target)[:n].tolist()):
                done = scan.update(a + start + j, cost)
                if done:
                    break
            if done:
                break
    if scan.stop is None:
        return make_plan(instance, spec, None, math.inf, wprice, pprice, wfree, pfree)
    workers = backtrack(spec, np.concatenate(choices), scan.stop - a)
    return make_plan(instance, spec, workers, scan.cost, wprice, pprice, wfree, pfree)


def warmup(instance, granularity: str = "worker-slot") -> int:
    """Compile the kernels every job of ``instance`` will need (one per work bucket), so that
    timed decisions exclude compilation; returns the number of distinct kernels."""
    from .dual import job_spec

    Hb, Kb_srv, R = bucket(instance.H), bucket(instance.K), instance.R
    shapes = set()
    for i in range(instance.I):
        spec = job_spec(instance, i, granularity)
        if spec.target:
            shapes.add((bucket(spec.target + 1), bucket(spec.N + 1, low=MIN_WORKERS)))
    with jax.enable_x64(True):
        for Wb, Kb in sorted(shapes):
            F = np.full(Wb, math.inf)
            F[0] = 0.0
            jax.block_until_ready(_block(
                jnp.asarray(F), np.zeros((BLOCK, Hb, R)), np.zeros((BLOCK, Kb_srv, R)),
                np.zeros((BLOCK, Hb, R)), np.zeros((BLOCK, Kb_srv, R)), np.ones(R), np.ones(R),
                np.arange(Kb), np.ones(Kb, dtype=bool), np.arange(Kb), 1, 1, 1, instance.H,
                instance.K))
    return len(shapes)
