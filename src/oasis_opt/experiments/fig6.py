"""Fig. 6: OASiS's total utility when U/L is estimated at 20%-1000% of its true value, T = 300.

Same instances as Fig. 3, and the same OASiS pricing: U and L estimated on a history
(``fig3.estimate``), which is the "100%" (true) estimate here. The paper does not say which of
U and L it scaled (A6), so both readings are drawn:

* ``both`` (the headline): the estimates of U and of L are both off by the factor kappa, so every
  price is kappa times the true one (an estimate in the wrong utility scale);
* ``u-only``: U' = kappa U with the floor L unchanged (the reference's A6 choice; only the price
  near full capacity moves).

The 100% bar is Fig. 3's OASiS run (the same run key), so it is shared.
"""
from __future__ import annotations

from . import fig3
from .calibration import scaled_document
from .figures.common import estimated_pricing
from .spec import RunSpec

PERCENTS = (20, 50, 100, 300, 500, 1000)
SCALINGS = {"both": "U and L scaled", "u-only": "U scaled, L unchanged"}


def spec(jobs: int, seed: int, pct: int, scaling: str, quick: bool, estimated) -> RunSpec:
    doc = estimated_pricing(estimated, fig3.estimate(jobs, quick))
    if pct != 100:
        kappa = pct / 100
        doc = scaled_document(doc, kappa, kappa if scaling == "both" else 1.0)
    return RunSpec("paper_sim", fig3.sim_params(jobs, seed, quick), "oasis", {"pricing": doc},
                   tags={"jobs": jobs, "seed": seed, "pct": pct, "scaling": scaling})


def runs(quick: bool, estimated=None) -> list[RunSpec]:
    s = fig3.settings(quick)
    return [spec(n, seed, pct, scaling, quick, estimated) for scaling in SCALINGS
            for n in s["jobs"] for seed in s["seeds"] for pct in PERCENTS]
