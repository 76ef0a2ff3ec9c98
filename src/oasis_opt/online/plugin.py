"""Plug-in estimate of OASiS's U1, U2, L1, L2 from past instances: eqs. (23)-(26), no search.

The paper prices OASiS with U and L "estimated from past experience" (p.6). This estimator
applies the definitions (23)-(26) to the jobs of history instances (other traces of the same
workload, never the instance being evaluated), with three changes that make them usable as
estimates; it never runs OASiS and never looks at utility earned:

* **Capacity-normalised demands.** The sum over r in (25)-(26) adds raw amounts (GPUs, vCPUs,
  GB, Gbps). Here every demand is divided by its resource's mean server capacity in the pool,
  c_bar^r (over the servers of every history instance, zero capacities included), so
  ``w~_i^r = w_i^r / c_bar^r`` and the sum counts "servers' worth" of each resource.
* **A low percentile instead of the minimum.** The minimum of f_i(T - a_i) / (W_i sum_r w~_i^r)
  is set by the most delayed time-critical job, whose sigmoid has underflowed (about e^-750 on
  paper-sim); it says nothing about typical jobs. The floor uses the ``quantile`` (default
  0.1, i.e. the 10th percentile, linear interpolation) of the per-job terms instead, and eta the
  same percentile of job sizes.
* **L1 and L2 separately**, each from its own pool's demands and capacities.
* **Underflow**: a job whose f(T - a) is exactly 0.0 in float64 is left out of the terms and
  sizes, as ``oracle_pricing`` leaves it out of the minimum (counted in ``details[pool]
  ["excluded"]``). On workloads where most jobs are worth almost nothing at the horizon (the
  paper's T = 300 simulation: the median f(T - a) is about 1e-38) every low percentile is tiny
  too, and so is the floor: the estimate is faithful to (25)-(26), not a cure for them there.

With ``phi_i = f_i(T - a_i) / (W_i sum_r w~_i^r)`` (W_i = ceil(E_i N_i x_i) worker-slots) over
every history job with W_i > 0 and some demand on the pool, and
``C~ = sum_h sum_r c_h^r / c_bar^r`` per history instance (= H x priced resources):

    L~1  = q-quantile(phi) / (4 eta1)                                             (25')
    eta1 = max(1, max_n T_n C~_n / q-quantile(W_i sum_r w~_i^r))                  (eta of 25)
    L1^r = L~1 / c_bar^r          (the floor per raw unit of r, for eq. (22))

and likewise L2 with the PS demands s and PS capacities (26'). U is eqs. (23)-(24) over every
history job (``estimate.history_u``): in normalised units U~^r = c_bar^r U^r, so U^r / L^r =
U~^r / L~ and alpha (Theorem 4) is the same whichever unit is used.

The result, ``PluginPricing``, is the ``oasis-opt/pricing@1`` document (per-resource floors) for
``OasisPolicy(pricing=...)``, ``save_pricing`` or ``json.dump``, with the intermediate values as
its ``details``.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from .estimate import history_u
from .pricing import PRICING_FORMAT, worst_case_utility

DEFAULT_QUANTILE = 0.1
_POOLS = (("worker", "worker_demand", "worker_capacity"), ("ps", "ps_demand", "ps_capacity"))


class PluginPricing(dict):
    """An ``oasis-opt/pricing@1`` document (this dict) and ``details``: per pool the quantile,
    eta, the normalised floor L~, the capacity scale c_bar^r and the number of terms."""

    def __init__(self, document: dict, details: dict):
        super().__init__(document)
        self.details = details

    def __repr__(self) -> str:
        return (f"PluginPricing(L~_worker={self.details['worker']['L_normalised']:.3g}, "
                f"L~_ps={self.details['ps']['L_normalised']:.3g}, "
                f"q={self.details['quantile']:g})")


def check_quantile(q: Any) -> float:
    if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 <= q <= 1:
        raise ValueError(f"quantile: must be a number in [0, 1], got {q!r}")
    return float(q)


def _pool_floor(history: Sequence[Any], demand_attr: str, capacity_attr: str,
                priced: dict[str, float], q: float) -> dict:
    """L~, eta and c_bar^r of one pool (module docstring); ``priced``: that pool's U."""
    resources = tuple(history[0].resources)
    caps = np.concatenate([getattr(inst, capacity_attr) for inst in history])  # (S, R)
    scale = caps.mean(axis=0) if len(caps) else np.zeros(len(resources))
    for r, c in zip(resources, scale):
        if r in priced and not c > 0:
            raise ValueError(f"history: jobs demand {r!r} but no server of the pool has any")
    use = np.array([r in priced for r in resources])
    inv = np.where(use, 1.0 / np.where(scale > 0, scale, 1.0), 0.0)
    terms, sizes, totals, excluded = [], [], [], 0
    for inst in history:
        if inst.I == 0:
            continue
        per_slot = getattr(inst, demand_attr) @ inv          # sum_r w_i^r / c_bar^r
        size = inst.work.astype(float) * per_slot           # W_i sum_r w~_i^r
        worst = worst_case_utility(inst)
        excluded += int(np.count_nonzero((size > 0) & ~(worst > 0)))
        keep = (size > 0) & (worst > 0)  # f(T - a) = 0: underflowed, left out as by the oracle
        terms.append(worst[keep] / size[keep])
        sizes.append(size[keep])
        totals.append(inst.horizon * float((getattr(inst, capacity_attr) @ inv).sum()))
    terms_all = np.concatenate(terms) if terms else np.zeros(0)
    if terms_all.size == 0:
        raise ValueError("history: no job has work, a demand on the pool and f(T - a) > 0")
    phi = float(np.quantile(terms_all, q))
    eta = max(1.0, max(totals) / float(np.quantile(np.concatenate(sizes), q)))
    floor = phi / (4.0 * eta)
    if not floor > 0:
        raise ValueError(f"quantile: the floor from the {q:g}-quantile of f(T - a) / (W sum_r w) "
                         "underflows to 0; choose a higher quantile")
    return {"L_normalised": floor, "eta": eta, "term_quantile": phi, "terms": int(terms_all.size),
            "excluded": excluded,
            "capacity_scale": {r: float(c) for r, c, u in zip(resources, scale, use) if u},
            "L": {r: floor / float(c) for r, c, u in zip(resources, scale, use) if u}}


def plugin_pricing(history: Sequence[Any], quantile: float = DEFAULT_QUANTILE) -> PluginPricing:
    """U1, U2, L1, L2 from ``history`` by eqs. (23)-(26) as the module docstring adapts them.

    Deterministic: the same history gives the same document. ``ValueError`` on an empty history,
    histories whose resource names differ, or a quantile whose floor is 0.
    """
    q = check_quantile(quantile)
    history = list(history)
    u = history_u(history)  # raises on an empty history
    names = tuple(history[0].resources)
    for n, inst in enumerate(history[1:], 1):
        if tuple(inst.resources) != names:
            raise ValueError(f"history[{n}]: resources {', '.join(inst.resources)} differ from "
                             f"history[0]'s ({', '.join(names)})")
    doc: dict[str, Any] = {"format": PRICING_FORMAT, "U_worker": dict(u["U_worker"]),
                           "U_ps": dict(u["U_ps"])}
    details: dict[str, Any] = {"method": "plugin", "quantile": q, "instances": len(history),
                               "jobs": int(sum(inst.I for inst in history))}
    for pool, demand_attr, capacity_attr in _POOLS:
        priced = u[f"U_{pool}"]
        if not priced:  # nobody demands anything on this pool: its floor is never used
            doc[f"L_{pool}"] = 1.0
            details[pool] = {"L_normalised": math.nan, "L": {}}
            continue
        pool_floor = _pool_floor(history, demand_attr, capacity_attr, priced, q)
        for r, L in pool_floor["L"].items():
            if L > priced[r]:
                raise ValueError(f"quantile: floor L_{pool}.{r} = {L:g} exceeds U_{pool}.{r} = "
                                 f"{priced[r]:g}; choose a lower quantile")
        doc[f"L_{pool}"] = pool_floor["L"]
        details[pool] = pool_floor
    # alpha of Theorem 4 for these constants: max_r ln(U^r / L^r) (the unit cancels)
    details["alpha"] = max([1.0] + [math.log(doc[f"U_{pool}"][r] / L)
                                    for pool in ("worker", "ps")
                                    for r, L in details[pool]["L"].items()])
    return PluginPricing(doc, details)
