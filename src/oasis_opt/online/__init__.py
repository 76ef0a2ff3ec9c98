"""OASiS, the online primal-dual scheduler (Bao et al., INFOCOM 2018).

``pricing``: price functions (22) and constants (23)-(26), the ``oasis-opt/pricing@1`` file.
``dual``: the dual subroutine (Alg. 2) ``best_schedule`` and its ``Plan``; backends in
``dual_reference`` (plain loops), ``dual_numpy`` (default) and ``dual_jax`` (imports jax).
``oasis``: the policy ``OasisPolicy`` (Alg. 1), registered as ``"oasis"``.
"""
from .dual import BACKENDS, GRANULARITIES, Plan, best_schedule
from .oasis import OasisPolicy
from .pricing import (PRICING_FORMAT, Pricing, oracle_pricing, price_function,
                      read_pricing_file, resolve_pricing, save_pricing)

__all__ = ["BACKENDS", "GRANULARITIES", "PRICING_FORMAT", "OasisPolicy", "Plan", "Pricing",
           "best_schedule", "oracle_pricing", "price_function", "read_pricing_file",
           "resolve_pricing", "save_pricing"]
