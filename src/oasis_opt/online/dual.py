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

Entry points: ``best_schedule_arrays(job, market, hints)`` takes the job, the prices and free
capacities, and optional caching hints as three small frozen objects (``dual_inputs``:
``DualJob``, ``Market``, ``Hints``; no ``Instance``); ``best_schedule(instance, job, market,
hints)`` reads the job from an instance and solves the same way. Backends: ``"reference"``
(plain loops, the definition others are tested against), ``"numpy"`` (vectorised, with exact
pruning of later t_hat), ``"jax"`` (jit-compiled DP, shapes bucketed); all three share the
``_dp`` module and none imports another.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, cast

import numpy as np

from .._extras import require
from ._dp import GRANULARITIES, Plan, cost_lower_bound, job_spec, make_plan
from .dual_inputs import (DualJob, Hints, Market, _integer, check_dims, check_hints,
                          check_job, check_market)

if TYPE_CHECKING:
    from ..model import Instance

BACKENDS = ("numpy", "jax", "reference")

__all__ = ["BACKENDS", "GRANULARITIES", "DualJob", "Hints", "Market", "Plan", "best_schedule",
           "best_schedule_arrays", "check_backend"]


def check_backend(backend: str) -> None:
    """ValueError naming ``backend`` if unknown; ``MissingExtra`` for "jax" without jax."""
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend == "jax":
        require("jax", extra="jax", feature="the 'jax' backend")


def _check_options(market: Market, backend: str, granularity: str) -> None:
    """ValueError naming ``market``, ``backend`` or ``granularity`` if it is not one of them."""
    check_market(market)
    check_backend(backend)
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity: expected one of {', '.join(GRANULARITIES)}, "
                         f"got {granularity!r}")


def best_schedule_arrays(job: DualJob, market: Market, hints: Hints | None = None, *,
                         backend: str = "numpy", granularity: str = "worker-slot") -> Plan:
    """The payoff-maximising schedule (21)/(27) of one job at the given prices, from arrays.

    * ``job``: a ``DualJob``, the job's parameters (arrival a_i, N_i, W_i of constraint (2),
      demands w_i and s_i, utility f_i, the PS rule of constraint (6) or a PS count table,
      E_i and x_i for chunk granularity, accelerator types), each field documented there.
    * ``market``: a ``Market``, the prices p_h^r(t), q_k^r(t) (finite, >= 0 from a_i on) and
      the free capacities (30)-(31), each (T+1, servers, R).
    * ``hints``: optional ``Hints`` of a caller that keeps its arrays (``price_min``,
      ``slot_class``, ``server_index``); the plan is the same as without them.
    * ``backend``: one of ``BACKENDS``; ``granularity``: ``"worker-slot"`` or ``"chunk"`` (the
      module docstring).

    Returns a ``Plan``: the best plan over completion slots a_i..T under the tie rule of the
    module docstring (it may have a negative payoff); an infeasible job gives completion None
    and payoff -inf. Rows number worker servers 0..H-1 and PS servers H..H+K-1. A wrong shape,
    type or value raises ``ValueError`` naming the field (the market's when it is built).
    """
    _check_options(market, backend, granularity)
    return _solve(check_job(job, market, granularity), market, hints, backend, granularity)


def best_schedule(instance: Instance, job: int, market: Market, hints: Hints | None = None, *,
                  backend: str = "numpy", granularity: str = "worker-slot") -> Plan:
    """The payoff-maximising schedule (21)/(27) of ``job`` of ``instance`` at the given prices:
    ``best_schedule_arrays`` with the job read from the instance (``DualJob.from_instance``:
    PS counts by its rule ceil(k b_i / B_i); its accelerator types, speeds and demands on a
    typed cluster). ``market`` as there, with T, H, K, R the instance's. The job's parameters
    were checked when the instance was built (``model.instance``), so only the market's shapes
    and the hints are checked here (the per-job checks were a tenth of a Philly replay)."""
    _check_options(market, backend, granularity)
    if granularity == "chunk" and instance.typed:
        raise ValueError("granularity: 'chunk' takes no accelerator types (server_type is given)")
    check_dims(market, (instance.horizon, instance.H, instance.K, instance.R))
    job = _integer("job", job, 0, instance.I - 1)
    return _solve(DualJob.from_instance(instance, job), market, hints, backend, granularity)


def _solve(job: DualJob, market: Market, hints: Hints | None, backend: str, granularity: str
           ) -> Plan:
    """The backend's plan for a checked job."""
    hints = check_hints(hints, market, int(job.arrival))
    spec = job_spec(job, market.horizon, granularity, hints)
    prices = market.arrays
    if spec.target == 0:  # nothing to train: complete on arrival at no cost
        return make_plan(spec, np.zeros(spec.horizon + 1, dtype=np.int64), 0.0, *prices)
    impl: Callable[..., Plan]
    if backend == "reference":
        from .dual_reference import best_schedule_reference as impl
    elif backend == "numpy":
        from .dual_numpy import best_schedule_numpy as impl
    else:
        from .dual_jax import best_schedule_jax as impl
    mins = cast("tuple[np.ndarray, np.ndarray]", hints.price_min)  # given by check_hints
    return impl(spec, *prices, cost_lower_bound(spec, *mins))
