"""OASiS's estimated U and L for an experiment: ``online.estimate`` run through the runner.

A figure that prices OASiS "from past experience" declares a ``FloorEstimate``: the workload
(generator and its parameters, without the seed) and the history seeds, which are disjoint from
every seed a figure evaluates on (``HISTORY_SEEDS``). Its calibration runs (OASiS on each history
instance at each floor of the grid) are ordinary ``RunSpec``s, so they run in parallel on Ray,
are validated and stored like any run, and a killed sweep resumes. ``resolve`` then applies the
same selection rule as ``online.estimate.estimate_pricing`` (``FloorCalibration``) to the stored
utilities and returns what it returns: the pricing document the figure's OASiS runs use, with its
calibration (``EstimatedPricing``).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping

from ..online.estimate import (DEFAULT_FLOOR_GRID, EstimatedPricing, FloorCalibration, check_grid,
                               check_floors, history_u, pricing_document)
from .spec import RunSpec, canonical, canonical_json, resolve_generator

# Seeds of the "past" instances; every figure evaluates on seeds below 1000. A workload of about
# 10 jobs per instance (the testbed, Fig. 5) gets 10 history instances, so that every history
# holds at least about 100 past jobs.
HISTORY_SEEDS: tuple[int, ...] = (1000, 1001, 1002)
SMALL_HISTORY_SEEDS: tuple[int, ...] = tuple(range(1000, 1010))
QUICK_HISTORY_SEEDS: tuple[int, ...] = (1000,)


def history_seeds(quick: bool, small: bool = False) -> tuple[int, ...]:
    """The history of an estimate: ``small`` for workloads of about 10 jobs per instance."""
    if small:
        return HISTORY_SEEDS if quick else SMALL_HISTORY_SEEDS
    return QUICK_HISTORY_SEEDS if quick else HISTORY_SEEDS


@dataclass(frozen=True)
class FloorEstimate:
    """U and L for OASiS on ``generator(**params, seed=s)``, estimated on ``seeds``."""

    generator: str
    params: Mapping[str, Any]
    seeds: tuple[int, ...] = HISTORY_SEEDS
    grid: tuple[float, ...] = field(default=DEFAULT_FLOOR_GRID)

    def __post_init__(self):
        if "seed" in self.params:
            raise ValueError("params: give the workload without its seed (the history seeds "
                             "are the estimate's own)")
        if not self.seeds:
            raise ValueError("seeds: the history needs at least one seed")
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        object.__setattr__(self, "grid", check_grid(self.grid))
        canonical(self.params, "params")

    @property
    def key(self) -> str:
        doc = {"generator": self.generator, "params": dict(self.params),
               "seeds": list(self.seeds), "grid": list(self.grid)}
        return hashlib.sha256(canonical_json(doc).encode()).hexdigest()[:16]

    @cached_property
    def u(self) -> dict[str, dict[str, float]]:
        """U from the history's jobs (eqs. 23-24)."""
        gen = resolve_generator(self.generator)
        return history_u(gen(**self.params, seed=s) for s in self.seeds)

    def specs(self, tags: Mapping[str, Any] | None = None) -> list[RunSpec]:
        """One OASiS run per (floor, history seed)."""
        check_floors(self.u, self.grid)
        return [RunSpec(self.generator, {**self.params, "seed": s}, "oasis",
                        {"pricing": pricing_document(self.u, L)},
                        tags={**(tags or {}), "calibration": self.key, "L": L, "seed": s})
                for L in self.grid for s in self.seeds]

    def resolve(self, records: Mapping[str, dict]) -> EstimatedPricing:
        """The pricing document at the best floor, with its calibration table, from the stored
        records of ``specs()`` (``KeyError`` if one is missing)."""
        specs = self.specs()
        n = len(self.seeds)
        utility = [records[s.key]["metrics"]["total_utility"] for s in specs]
        scores = tuple(tuple(utility[j * n:(j + 1) * n]) for j in range(len(self.grid)))
        gen = resolve_generator(self.generator)
        jobs = tuple(gen(**self.params, seed=s).I for s in self.seeds)
        calibration = FloorCalibration(self.grid, scores, jobs)
        return EstimatedPricing(pricing_document(self.u, calibration.chosen), calibration)


def calibration_specs(estimates) -> list[RunSpec]:
    return [s for e in estimates for s in e.specs()]


def resolve_all(estimates, records) -> dict[str, EstimatedPricing]:
    """``estimate.key -> pricing document with its calibration`` for every estimate."""
    return {e.key: e.resolve(records) for e in estimates}


def scaled_document(doc: dict, u_factor: float = 1.0, l_factor: float = 1.0) -> dict:
    """``doc`` with every U times ``u_factor`` and both floors times ``l_factor`` (Fig. 6)."""
    return {**doc, "U_worker": {r: u * u_factor for r, u in doc["U_worker"].items()},
            "U_ps": {r: u * u_factor for r, u in doc["U_ps"].items()},
            "L_worker": doc["L_worker"] * l_factor, "L_ps": doc["L_ps"] * l_factor}
