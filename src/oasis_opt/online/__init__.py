"""OASiS, the online primal-dual scheduler (Bao et al., INFOCOM 2018).

``pricing``: price functions (22) and constants (23)-(26), the ``oasis-opt/pricing@1`` file.
``dual``: the dual subroutine (Alg. 2) and its ``Plan``: ``best_schedule_arrays`` (a ``DualJob``,
a ``Market`` of prices and free capacities and optional ``Hints``, no ``Instance``; the three
defined in ``dual_inputs``) and ``best_schedule`` (a job of an instance); backends in
``dual_reference`` (plain loops), ``dual_numpy`` (default) and ``dual_jax`` (imports jax),
sharing ``_dp``; one tie rule, so identical plans.
``oasis``: the policy ``OasisPolicy`` (Alg. 1), registered as ``"oasis"``.
``plugin``: U and L estimated from past instances by eqs. (23)-(26) (``plugin_pricing``: a
pricing document with its intermediate values, ``PluginPricing``).
``estimate``: U and L tuned on past instances, the floor searched on utility (``estimate_pricing``:
a pricing document with its calibration, ``EstimatedPricing``); ``pricing_batch``: OASiS under
several pricings in one lockstep pass (``solve_pricings``, the search's whole grid at once).
"""
from .dual import (BACKENDS, GRANULARITIES, DualJob, Hints, Market, Plan, best_schedule,
                   best_schedule_arrays)
from .estimate import (DEFAULT_FLOOR_GRID, EstimatedPricing, FloorCalibration, estimate_pricing,
                       history_u, pricing_document)
from .oasis import OasisPolicy
from .plugin import DEFAULT_QUANTILE, PluginPricing, plugin_pricing
from .pricing import (PRICING_FORMAT, Pricing, oracle_pricing, price_function,
                      read_pricing_file, resolve_pricing, save_pricing)

__all__ = ["BACKENDS", "DEFAULT_FLOOR_GRID", "DEFAULT_QUANTILE", "PluginPricing", "plugin_pricing", "GRANULARITIES", "PRICING_FORMAT",
           "DualJob", "EstimatedPricing", "FloorCalibration", "Hints", "Market", "OasisPolicy",
           "Plan", "Pricing",
           "best_schedule", "best_schedule_arrays", "estimate_pricing", "history_u",
           "oracle_pricing", "price_function", "pricing_document", "read_pricing_file",
           "resolve_pricing", "save_pricing"]
