"""The OASiS dual subroutine (Alg. 2): a job's best schedule at given resource prices.

For job i (arrival a, N_i chunks, per-worker demand w, per-PS demand s, b_i / B_i) and unit
prices p_h^r(t), q_k^r(t), the subroutine maximises the payoff (27)

    f_i(t_hat - a) - sum_t [ sum_h sum_r p_h^r(t) w^r y_h(t) + sum_k sum_r q_k^r(t) s^r z_k(t) ]

over schedules with integer k_t = sum_h y_h(t) <= N_i workers in slots a..t_hat, enough work
(constraint (2)), ceil(k_t b_i / B_i) PSs (the fewest constraint (6) allows; more never cost
less at non-negative prices), never more PSs than workers (7), and never more than the free
capacity (30)-(31). Given k_t, the cheapest placement is greedy (Theorem 1): fill servers in
increasing order of the unit price u_h(t) = sum_r p_h^r(t) w^r (ties by server index), each up
to ``min_r floor(free / w^r)`` containers. So the slot cost is a function C_t(k) of k alone,
non-decreasing in k, and the schedule is a DP over slots (section 7 / 7.1 of the reference)

    F_t(D) = min_{k=0..N_i} C_t(k) + F_{t-1}(max(0, D - delta(k))),   F_{a-1}(D) = 0 if D = 0 else inf

with payoff(t_hat) = f(t_hat - a) - F_{t_hat}(target), scanned for t_hat = a..T.

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

**The tie rule (one plan, whatever the backend).** Equal-cost plans are the normal case (idle
capacity is priced exactly at L), so which one is returned is fixed by this rule, and every
backend returns the same plan, allocation row for allocation row:

1. *Shared cost curves.* C_t(k) is built by one function (``_dp.slot_costs``) for every backend:
   unit prices summed resource by resource, the cheapest containers found by a per-slot sort,
   their prices summed cumulatively. Every float the DP adds is built by that shared code, and
   each DP candidate is one float64 addition, so numpy, JAX and Python compute the same bits.
2. *Fewest workers, up to a relative tolerance.* Each slot's candidates are compared on the tie
   costs C~_t(k) = C_t(k) + k eta_t, eta_t = ``COST_RTOL`` * C_t(k_max) / k_max (k_max: the
   slot's largest affordable count; ``COST_RTOL`` = 1e-12, ``model.numerics``): in each DP step
   the chosen k minimises C~_t(k) + F_{t-1}(max(0, D - delta(k))), the smallest k on exact
   equality, and F_t(D) is that k's own cost C_t(k) + F_{t-1}(...). So a plan with one more
   worker in a slot must be cheaper by more than eta_t (a 1e-12 share of the slot's cost range)
   to be chosen: costs equal up to float noise are ties, and read backwards from the completion
   slot the plan puts as little work as possible in late slots: **work goes to the earliest
   slots**.
3. *Earliest completion.* Over t_hat = a..T a later completion slot replaces the best only if its
   payoff is larger by more than ``PAYOFF_RTOL * max(1, |best|)`` (``PAYOFF_RTOL`` = 1e-12;
   Alg. 2 line 5 keeps the earliest on exact ties).
4. *Placement.* Within a slot, containers go to servers in increasing unit price, ties by the
   **lowest server index** (Theorem 1's greedy, ``_dp.plan_rows``); rows are sorted by (slot,
   server).

The rule moves the payoff away from the exact optimum by float-noise amounts only (the tests
hold it to a brute-force enumeration within 1e-9, relative).

**Accelerator types: pricing work, not workers.** On a cluster whose worker servers carry types
(``model.instance``), a worker of job i on a server of type g does s_ig work units per slot and
demands w_ig; the job needs W_i units and may use only types with s_ig > 0, all on one type in a
slot unless it spans types. A slot now buys *work*: its options are (k workers on type g, doing
k s_ig units) for a job that does not span, or (P units from any mix of its types) for one that
does, and the DP over remaining work is the one above with delta(o) = the option's units:

    F_t(D) = min_o C_t(o) + F_{t-1}(max(0, D - delta(o))).

C_t(o) is exact, not the fractional greedy by price per unit of progress across types (with
integer workers, the cap N_i and PSs counted per worker, that greedy can overpay): within a type
every worker does the same s_ig units, so Theorem 1's greedy (servers by unit price u_h(t) =
sum_r p_h^r(t) w_ig^r, ties by index) gives the cheapest k workers there, C_tg(k); a
non-spanning option costs C_tg(k) + the cheapest ceil(k b_i / B_i) PSs, and across types the
DP takes, for every amount of work, the cheapest way to do it, which orders the types by price
per unit of progress u_h(t) / s_ig where that is what pays. A spanning option's worker cost is a
knapsack over the types, min over k_1 + ... + k_G = k with sum_g k_g s_ig = P of sum_g
C_tg(k_g), plus the PSs of k (``_dp.span_table``; O(N^2 P G) a slot, for small speeds). Options
are ordered by units, then workers, then type, and the tie rule applies to that order (the
least work in late slots; the fewest workers and lowest type for equal work; within a type the
lowest server index). Without types there is one type of speed 1 and the options are k = 0..N_i:
the DP and its plans are the untyped ones, bit for bit. Chunk granularity takes no types.

Prices must be non-negative (the greedy and the monotone DP rely on it); they are for OASiS
(eq. 22) and for LP duals of the packing constraints (column generation).

Entry points: ``best_schedule_arrays`` takes prices, free capacities and one job's parameters
as arrays and scalars (no ``Instance``); ``best_schedule(instance, job, ...)`` reads the job
from an instance and calls it. Backends: ``"reference"`` (plain loops, the definition others
are tested against), ``"numpy"`` (vectorised, with exact pruning of later t_hat), ``"jax"``
(jit-compiled DP, shapes bucketed); all three share the ``_dp`` module and none imports another.
"""
from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
from numpy.typing import ArrayLike

from .._extras import require
from ..model.numerics import NOISE_RTOL, ps_count
from ._dp import (GRANULARITIES, JobSpec, Plan, cost_lower_bound, job_arguments, job_spec,
                  make_plan)

if TYPE_CHECKING:
    from ..model import Instance

BACKENDS = ("numpy", "jax", "reference")

__all__ = ["BACKENDS", "GRANULARITIES", "Plan", "best_schedule", "best_schedule_arrays",
           "check_backend", "job_arguments"]


def check_backend(backend: str) -> None:
    """ValueError naming ``backend`` if unknown; ``MissingExtra`` for "jax" without jax."""
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend == "jax":
        require("jax", extra="jax", feature="the 'jax' backend")


def best_schedule_arrays(worker_price: ArrayLike, ps_price: ArrayLike, worker_free: ArrayLike,
                         ps_free: ArrayLike, *, arrival: int, chunks: int, work: int,
                         worker_demand: ArrayLike, ps_demand: ArrayLike, utility: ArrayLike,
                         worker_bw: float | None = None, ps_bw: float | None = None,
                         ps_need: ArrayLike | None = None, epochs: int | None = None,
                         chunk_time: float | None = None, job: int = 0,
                         server_type: ArrayLike | None = None,
                         type_speed: ArrayLike | None = None,
                         type_demand: ArrayLike | None = None, span_types: bool = False,
                         backend: str = "numpy", granularity: str = "worker-slot",
                         price_min: tuple[ArrayLike, ArrayLike] | None = None,
                         slot_class: ArrayLike | None = None,
                         server_index: tuple[Any, Any] | None = None) -> Plan:
    """The payoff-maximising schedule (21)/(27) of one job at the given prices, from arrays.

    Cluster, T slots, H worker servers, K PS servers, R resources (row 0 of the slot axis is
    unused; slots are 1..T):

    * ``worker_price`` (T+1, H, R): p_h^r(t); ``ps_price`` (T+1, K, R): q_k^r(t); finite and
      >= 0 from the arrival slot on.
    * ``worker_free`` (T+1, H, R), ``ps_free`` (T+1, K, R): free capacity c - g per slot.

    The job:

    * ``arrival`` a_i in 1..T; ``chunks`` N_i >= 1 (the most workers per slot); ``work`` W_i >= 0
      worker-slots to train (ceil(E_i N_i x_i), constraint (2)).
    * ``worker_demand`` w_i, ``ps_demand`` s_i: (R,), finite, >= 0.
    * ``utility`` (T+1,): ``utility[t]`` = f_i(t - a_i), the utility of completing in slot t;
      finite and non-increasing from slot a_i on (earlier entries are not read).
    * PSs for k workers: ``worker_bw`` b_i and ``ps_bw`` B_i (ceil(k b_i / B_i), at least one
      for k >= 1: constraint (6)), or ``ps_need`` (N_i + 1,) the PS count for k = 0..N_i
      directly (non-decreasing integers, ``ps_need[0] == 0``).
    * ``granularity="chunk"`` also needs ``epochs`` E_i and ``chunk_time`` x_i.
    * ``job``: the job index written in the allocation rows (column 0).
    * Accelerator types (module docstring), all or none of: ``server_type`` (H,) type index
      0..G-1 of each worker server, ``type_speed`` (G,) s_g >= 0 integers (0: the job cannot use
      type g; some s_g >= 1), ``type_demand`` (G, R) its per-worker demand on each type (used
      instead of ``worker_demand``); ``span_types``. ``work`` is then in work units.

    * ``price_min`` (a caller that keeps its prices): ``(wmin, pmin)``, each (R,), the smallest
      worker / PS price of each resource over slots a_i..T and all servers, which the call
      otherwise computes (and checks the prices with) from the whole arrays; the caller vouches
      that the prices are finite and >= 0. Used only to stop the completion scan early, so the
      plan is the same whatever valid bound is given.
    * ``slot_class`` (T+1,) integers (a caller that knows which slots it left alone): slots of
      one class hold the same prices and free capacities, so their cost curves are built once
      (e.g. every untouched slot in class 0); the plan is the same as without it.
    * ``server_index`` (a caller that keeps its arrays): ``(worker, PS)``
      ``online.server_index.ServerIndex`` over exactly these price and free arrays, told of
      every change; cost curves and the plan's placement then read a few certified servers
      per slot instead of all (jobs without accelerator types; the plan is the same as
      without it).

    Returns a ``Plan``: the best plan over completion slots a_i..T under the tie rule of the
    module docstring (it may have a negative payoff); an infeasible job gives completion None
    and payoff -inf. Rows number worker servers 0..H-1 and PS servers H..H+K-1. A wrong shape,
    type or value raises ``ValueError`` naming the argument.
    """
    check_backend(backend)
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity: expected one of {', '.join(GRANULARITIES)}, "
                         f"got {granularity!r}")
    shape = np.shape(worker_price)
    if len(shape) != 3 or shape[0] < 2:
        raise ValueError(f"worker_price: expected shape (T+1, H, R) with T >= 1, got {shape}")
    T, H, R = shape[0] - 1, shape[1], shape[2]
    K = np.shape(ps_price)[1] if np.ndim(ps_price) == 3 else -1
    for name, arr, n in (("ps_price", ps_price, K), ("worker_free", worker_free, H),
                         ("ps_free", ps_free, K)):
        if np.shape(arr) != (T + 1, n, R) or n < 0:
            want = (T + 1, "K" if n < 0 else n, R)
            raise ValueError(f"{name}: expected shape {want} (like worker_price "
                             f"{shape}), got {np.shape(arr)}")
    a = _integer("arrival", arrival, 1, T)
    N = _integer("chunks", chunks, 1)
    W = _integer("work", work, 0)
    w = _vector("worker_demand", worker_demand, R)
    s = _vector("ps_demand", ps_demand, R)
    u = np.asarray(utility, dtype=float) if _numeric(utility) else None
    if u is None or u.shape != (T + 1,):
        raise ValueError(f"utility: expected shape {(T + 1,)}, got {np.shape(utility)}")
    tail = u[a:]
    if not np.isfinite(tail).all():
        raise ValueError("utility: must be finite from the arrival slot on")
    if (np.diff(tail) > NOISE_RTOL * max(1.0, float(np.abs(tail).max()))).any():
        raise ValueError("utility: must be non-increasing from the arrival slot on")
    need = _ps_need(N, worker_bw, ps_bw, ps_need)
    types = _types(server_type, type_speed, type_demand, span_types, H, R)
    if types and granularity == "chunk":
        raise ValueError("granularity: 'chunk' takes no accelerator types (server_type is given)")
    if granularity == "chunk":
        epochs = _integer("epochs", epochs, 1)
        chunk_time = _positive("chunk_time", chunk_time, " in chunk granularity")
    mins = _mins(price_min, worker_price, ps_price, a, R)
    spec = job_spec(job=_integer("job", job, 0), arrival=a, horizon=T, chunks=N, work=W,
                    worker_demand=w, ps_demand=s, ps_need=need, utility=u,
                    slot_class=_slot_classes(slot_class, T), granularity=granularity,
                    epochs=epochs, chunk_time=chunk_time,
                    server_index=_server_index(server_index, T, H, K), **types)
    return _solve(spec, (worker_price, ps_price, worker_free, ps_free), mins, backend)


def _mins(price_min: tuple[ArrayLike, ArrayLike] | None, worker_price: ArrayLike,
          ps_price: ArrayLike, a: int, R: int) -> list[np.ndarray]:
    """The checked ``price_min``, or the minima computed (and the prices checked) from the
    arrays."""
    if price_min is None:
        return [_price_min(name, arr, a, R) for name, arr in (("worker_price", worker_price),
                                                              ("ps_price", ps_price))]
    if len(price_min) != 2:
        raise ValueError("price_min: expected (worker minimum, PS minimum)")
    return [_vector("price_min", m, R) for m in price_min]


def _slot_classes(slot_class: ArrayLike | None, T: int) -> np.ndarray | None:
    """The checked ``slot_class`` (T+1,) integers, or None."""
    if slot_class is None:
        return None
    classes = np.asarray(slot_class) if _numeric(slot_class) else None
    if classes is None or classes.shape != (T + 1,) or classes.dtype.kind not in "iu":
        raise ValueError(f"slot_class: expected shape {(T + 1,)} of integers, "
                         f"got {np.shape(slot_class)}")
    return classes


def _server_index(index: Any, T: int, H: int, K: int) -> tuple[Any, Any] | None:
    """The checked ``server_index`` (its pools' shapes match the arrays'), or None."""
    if index is None:
        return None
    from .server_index import ServerIndex
    if not (isinstance(index, tuple) and len(index) == 2
            and all(isinstance(x, ServerIndex) for x in index)):
        raise ValueError("server_index: expected (worker ServerIndex, PS ServerIndex)")
    for name, ix, n in (("worker", index[0], H), ("PS", index[1], K)):
        if ix.price.shape[:2] != (T + 1, n):
            raise ValueError(f"server_index: the {name} index covers {ix.price.shape[:2]} "
                             f"(slots, servers), the arrays {(T + 1, n)}")
    return index


def _solve(spec: JobSpec, arrays: tuple[ArrayLike, ...], mins: list[np.ndarray], backend: str
           ) -> Plan:
    """The backend's plan for a checked job (``arrays``: prices and free capacities)."""
    prices = tuple(np.asarray(x, dtype=float) for x in arrays)
    if spec.target == 0:  # nothing to train: complete on arrival at no cost
        return make_plan(spec, np.zeros(spec.horizon + 1, dtype=np.int64), 0.0, *prices)
    impl: Callable[..., Plan]
    if backend == "reference":
        from .dual_reference import best_schedule_reference as impl
    elif backend == "numpy":
        from .dual_numpy import best_schedule_numpy as impl
    else:
        from .dual_jax import best_schedule_jax as impl
    return impl(spec, *prices, cost_lower_bound(spec, *mins))


def _price_min(name: str, prices: ArrayLike, a: int, R: int) -> np.ndarray:
    """Per-resource minimum price over slots a..T (lower bound for pruning); ValueError naming
    ``name`` unless every price there is finite and >= 0."""
    part = np.asarray(prices, dtype=float)[a:]
    m = np.array([part[..., r].min() for r in range(R)]) if part.size else np.zeros(R)
    if not ((m >= 0).all() and (part.size == 0 or np.isfinite(part.max()))):  # NaN fails
        raise ValueError(f"{name}: prices must be finite non-negative numbers")
    return m


def best_schedule(instance: Instance, job: int, worker_price: ArrayLike, ps_price: ArrayLike,
                  worker_free: ArrayLike, ps_free: ArrayLike, *, backend: str = "numpy",
                  granularity: str = "worker-slot",
                  price_min: tuple[ArrayLike, ArrayLike] | None = None,
                  slot_class: ArrayLike | None = None,
                  server_index: tuple[Any, Any] | None = None) -> Plan:
    """The payoff-maximising schedule (21)/(27) of ``job`` of ``instance`` at the given prices:
    ``best_schedule_arrays`` with the job's parameters read from the instance (PS counts by
    its rule ceil(k b_i / B_i); its accelerator types, speeds and demands on a typed cluster).
    Arrays as there, with T, H, K, R the instance's. The job's parameters were checked when the
    instance was built (``model.instance``), so only the arrays, ``price_min`` and
    ``slot_class`` are checked here (the per-job checks were a tenth of a Philly replay);
    ``server_index`` as there."""
    T, H, K, R = instance.horizon, instance.H, instance.K, instance.R
    check_backend(backend)
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity: expected one of {', '.join(GRANULARITIES)}, "
                         f"got {granularity!r}")
    if granularity == "chunk" and instance.typed:
        raise ValueError("granularity: 'chunk' takes no accelerator types (server_type is given)")
    for name, arr, n in (("worker_price", worker_price, H), ("ps_price", ps_price, K),
                         ("worker_free", worker_free, H), ("ps_free", ps_free, K)):
        if np.shape(arr) != (T + 1, n, R):
            raise ValueError(f"{name}: expected shape {(T + 1, n, R)}, got {np.shape(arr)}")
    job = _integer("job", job, 0, instance.I - 1)
    args = job_arguments(instance, job)
    mins = _mins(price_min, worker_price, ps_price, args["arrival"], R)
    spec = job_spec(horizon=T, granularity=granularity, slot_class=_slot_classes(slot_class, T),
                    server_index=_server_index(server_index, T, H, K), **args)
    return _solve(spec, (worker_price, ps_price, worker_free, ps_free), mins, backend)


# ---- argument checks ----------------------------------------------------------------------------
def _numeric(x: Any) -> bool:
    try:
        return np.asarray(x).dtype.kind in "biuf"
    except (TypeError, ValueError):
        return False


def _real(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _integer(name: str, x: Any, low: int, high: int | None = None) -> int:
    ok = isinstance(x, numbers.Integral) and not isinstance(x, bool)
    if not ok or x < low or (high is not None and x > high):
        span = f"in {low}..{high}" if high is not None else f">= {low}"
        raise ValueError(f"{name}: expected an integer {span}, got {x!r}")
    return int(x)


def _vector(name: str, x: Any, R: int) -> np.ndarray:
    v = np.asarray(x, dtype=float) if _numeric(x) else None
    if v is None or v.shape != (R,):
        raise ValueError(f"{name}: expected shape {(R,)} (one entry per resource), "
                         f"got {np.shape(x)}")
    if not (np.isfinite(v).all() and (v >= 0).all()):
        raise ValueError(f"{name}: demands must be finite numbers >= 0")
    return v


def _ps_need(N: int, worker_bw: float | None, ps_bw: float | None, ps_need: ArrayLike | None
             ) -> np.ndarray:
    """PS count for k = 0..N workers, from b_i / B_i or given (see ``best_schedule_arrays``)."""
    if ps_need is not None:
        if worker_bw is not None or ps_bw is not None:
            raise ValueError("ps_need: give either ps_need or worker_bw and ps_bw, not both")
        need = np.asarray(ps_need) if _numeric(ps_need) else None
        if need is None or need.shape != (N + 1,):
            raise ValueError(f"ps_need: expected shape {(N + 1,)} (k = 0..chunks), "
                             f"got {np.shape(ps_need)}")
        if not (np.all(need == np.round(need)) and need[0] == 0 and (np.diff(need) >= 0).all()):
            raise ValueError("ps_need: expected non-decreasing integers starting at 0")
        return need.astype(np.int64)
    b = _positive("worker_bw", worker_bw, " (or give ps_need)")
    B = _positive("ps_bw", ps_bw, " (or give ps_need)")
    return ps_count(np.arange(N + 1), b, B)


def _types(server_type: Any, type_speed: Any, type_demand: Any, span_types: Any, H: int,
           R: int) -> dict[str, Any]:
    """The checked accelerator-type arguments for ``job_spec`` ({} without types)."""
    given = [x is not None for x in (server_type, type_speed, type_demand)]
    if not any(given):
        if span_types:
            raise ValueError("span_types: only with accelerator types (give server_type)")
        return {}
    if not all(given):
        missing = [n for n, g in zip(("server_type", "type_speed", "type_demand"), given) if not g]
        raise ValueError(f"{missing[0]}: needed with the other accelerator-type arguments")
    st = np.asarray(server_type) if _numeric(server_type) else None
    sp = np.asarray(type_speed) if _numeric(type_speed) else None
    if sp is None or sp.ndim != 1 or len(sp) == 0 or not (np.all(sp == np.round(sp))
                                                         and (sp >= 0).all() and sp.max() >= 1):
        raise ValueError("type_speed: expected (G,) integers >= 0, at least one >= 1")
    G = len(sp)
    if st is None or st.shape != (H,) or not (np.all(st == np.round(st)) and (st >= 0).all()
                                              and (st < G).all()):
        raise ValueError(f"server_type: expected shape {(H,)}, type indices 0..{G - 1}")
    dem = np.asarray(type_demand, dtype=float) if _numeric(type_demand) else None
    if dem is None or dem.shape != (G, R) or not (np.isfinite(dem).all() and (dem >= 0).all()):
        raise ValueError(f"type_demand: expected shape {(G, R)} of finite demands >= 0")
    if not isinstance(span_types, (bool, np.bool_)):
        raise ValueError(f"span_types: expected a bool, got {span_types!r}")
    return {"server_type": st.astype(np.int64), "type_speed": sp.astype(np.int64),
            "type_demand": dem, "span_types": bool(span_types)}


def _positive(name: str, x: Any, hint: str = "") -> float:
    if not (_real(x) and math.isfinite(x) and x > 0):
        raise ValueError(f"{name}: a finite number > 0 is needed{hint}, got {x!r}")
    return float(x)
