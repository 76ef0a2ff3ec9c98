"""OASiS, the online primal-dual scheduler (Bao et al., INFOCOM 2018).

``pricing``: price functions (22) and constants (23)-(26), the ``oasis-opt/pricing@1`` file.
``dual``: the dual subroutine (Alg. 2) ``best_schedule`` and its ``Plan``; backends in
``dual_reference`` (plain loops), ``dual_numpy`` (default) and ``dual_jax`` (imports jax).
``oasis``: the policy ``OasisPolicy`` (Alg. 1), registered as ``"oasis"``.
``estimate``: U and L estimated from past instances (``estimate_pricing``: a pricing document
with its calibration, ``EstimatedPricing``).
"""
from .dual import BACKENDS, GRANULARITIES, Plan, best_schedule
from .estimate import (DEFAULT_FLOOR_GRID, EstimatedPricing, FloorCalibration, estimate_pricing,
                       history_u, pricing_document)
from .oasis import OasisPolicy
from .pricing import (PRICING_FORMAT, Pricing, oracle_pricing, price_function,
                      read_pricing_file, resolve_pricing, save_pricing)

__all__ = ["BACKENDS", "DEFAULT_FLOOR_GRID", "GRANULARITIES", "PRICING_FORMAT",
           "EstimatedPricing", "FloorCalibration", "OasisPolicy", "Plan", "Pricing", "best_schedule",
           "estimate_pricing", "history_u", "oracle_pricing", "price_function",
           "pricing_document", "read_pricing_file", "resolve_pricing", "save_pricing"]
