"""The pricing study: which rule for OASiS's U and L wins, on seeds nobody chose it on
(``oasis-opt reproduce pricing``, drawn by ``figures.pricing``).

OASiS needs the constants U (the price of a full server) and L (the floor, the price of an empty
one) of its exponential prices (eq. 22). Three rules give them:

* **oracle**: eqs. (23)-(26) computed on the evaluated instance itself (``solve --policy oasis``
  without ``--pricing``). Exact, but it looks at the instance, and with the paper's sigmoid
  utilities its floor is about e^-750 (``online.estimate``'s docstring);
* **plug-in**: eqs. (23)-(26) applied to the history's jobs, L from a low percentile of the
  per-job terms (``online.plugin``, ``estimate-pricing --method plugin``); nothing tuned on
  utility;
* **searched floor**: U by eqs. (23)-(24) over the history, L1 = L2 = the floor of a grid under
  which OASiS earned most on the history (``online.estimate``, ``estimate-pricing --method
  search``);
* **adaptive floor**: the searched floor's U and, as its start, its L; then L follows the best
  of plain OASiS runs at every floor of the grid on the jobs decided so far, plus the history's
  expectation for the jobs still to come (``online.adaptive``, policy ``oasis-adaptive``, with
  the searched floor's calibration table as its prior, fading over the history's job count:
  ``figures.common.adaptive_options``). Its best shadow at the end is the grid's
  best floor in hindsight on the evaluated instance (series ``oasis-hindsight``: no rule could
  know it, it says how much a better floor alone would give).

Every workload is evaluated on ``EVAL_SEEDS`` (500-509), seeds no other figure and no design
decision used; the history of the two estimated rules is the figures' (``calibration``:
1000-1002, or 1000-1009 for workloads of about 10 jobs per instance), fixed before any evaluated
instance is seen. Workloads: paper-sim at Fig. 3's sizes (100-400 jobs, T = 300, 50 + 50 servers),
paper-fig5 (10 jobs, T = 10) at 3-12 servers with OPT (the exact MILP, proven optimal), the
testbed, and paper-sim on a mixed-accelerator cluster (V100 / P100 / K80, ``hetero``'s setting).
Every baseline solves the same instances: FIFO, DRF, RRH, Dorm, Tiresias, Optimus.

Runs are ``RunSpec``s through the runner (stored, validated, resumable); the searched floor's
calibration runs are the figure's ``estimates``. The quick variant keeps every workload family at
a smaller size over two seeds.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping

from .calibration import FloorEstimate, history_seeds
from .figures.common import ORACLE, adaptive_options, estimated_pricing
from .spec import RunSpec, canonical_json, resolve_generator

EVAL_SEEDS: tuple[int, ...] = tuple(range(500, 510))
QUICK_EVAL_SEEDS: tuple[int, ...] = (500, 501)
BASELINES: tuple[str, ...] = ("fifo", "drf", "rrh", "dorm", "tiresias", "optimus")
SEARCHED = "oasis"          # the searched floor: the series the paper's figures call "OASiS"
PLUGIN = "oasis-plugin"
ADAPTIVE = "oasis-adaptive"
RULES: tuple[str, ...] = (SEARCHED, ADAPTIVE, PLUGIN, ORACLE)
RULE_NAMES = {SEARCHED: "searched floor", ADAPTIVE: "adaptive floor", PLUGIN: "plug-in",
              ORACLE: "oracle"}
# not a rule: the best floor of the grid on the evaluated instance itself, in hindsight (the
# adaptive policy's best shadow, plain OASiS at that floor on the whole instance)
HINDSIGHT = "oasis-hindsight"
MIX = "v100:p100:k80"


@dataclass(frozen=True)
class Workload:
    """One evaluated workload: ``generator(**params, seed=s)`` for s in the study's seeds.

    ``family`` groups workloads in the figure (paper-sim, paper-fig5, testbed, mixed);
    ``small``: about 10 jobs per instance, so the history has 10 instances (``history_seeds``);
    ``opt``: also solve the exact offline MILP (small instances only)."""

    name: str
    family: str
    generator: str
    params: Mapping[str, Any] = field(default_factory=dict)
    small: bool = False
    opt: bool = False

    def estimate(self, quick: bool) -> FloorEstimate:
        return FloorEstimate(self.generator, dict(self.params), history_seeds(quick, self.small))

    def plugin(self, quick: bool) -> dict:
        """The plug-in pricing document on the history (deterministic, computed once)."""
        return dict(_plugin_document(self.generator, canonical_json(dict(self.params)),
                                     history_seeds(quick, self.small)))


@lru_cache(maxsize=None)
def _plugin_document(generator: str, params_json: str, seeds: tuple[int, ...]) -> dict:
    from ..online.plugin import plugin_pricing

    gen = resolve_generator(generator)
    return dict(plugin_pricing([gen(**json.loads(params_json), seed=s) for s in seeds]))


def _sim(jobs: int, servers: int, horizon: int) -> dict:
    return {"jobs": jobs, "horizon": horizon, "worker_servers": servers, "ps_servers": servers,
            "calibration": "calibrated", "arrivals": "uniform"}


FULL: dict[str, Any] = {
    "seeds": EVAL_SEEDS,
    # the history seeds of the estimated rules (of the ~10-job workloads: "small_history")
    "history": history_seeds(False), "small_history": history_seeds(False, small=True),
    "workloads": (
        *(Workload(f"paper-sim {n} jobs", "paper-sim", "paper_sim", _sim(n, 50, 300))
          for n in (100, 200, 300, 400)),
        *(Workload(f"paper-fig5 {n} servers", "paper-fig5", "paper_fig5", {"servers": n},
                   small=True, opt=True) for n in (3, 6, 9, 12)),
        Workload("testbed", "testbed", "testbed", {}, small=True),
        Workload("mixed cluster", "mixed", "paper_sim",
                 {"jobs": 40, "horizon": 60, "worker_servers": 12, "ps_servers": 12,
                  "cluster_mix": MIX}),
    )}
QUICK: dict[str, Any] = {
    "seeds": QUICK_EVAL_SEEDS,
    "history": history_seeds(True), "small_history": history_seeds(True, small=True),
    "workloads": (
        *(Workload(f"paper-sim {n} jobs", "paper-sim", "paper_sim", _sim(n, 5, 300))
          for n in (10, 20)),
        Workload("paper-fig5 3 servers", "paper-fig5", "paper_fig5", {"servers": 3},
                 small=True, opt=True),
        Workload("testbed", "testbed", "testbed", {}, small=True),
        Workload("mixed cluster", "mixed", "paper_sim",
                 {"jobs": 12, "horizon": 40, "worker_servers": 6, "ps_servers": 6,
                  "cluster_mix": MIX}),
    )}
# the Fig. 3 sizes, where the default rule must beat every baseline (issue #29)
FIG3_FAMILY = "paper-sim"


def settings(quick: bool) -> dict:
    return QUICK if quick else FULL


def estimates(quick: bool) -> list[FloorEstimate]:
    return [w.estimate(quick) for w in settings(quick)["workloads"]]


def runs(quick: bool, estimated=None) -> list[RunSpec]:
    """Every (workload, seed): the three OASiS rules, the baselines and (``opt``) the MILP.
    Largest workloads first, slow policies first (the pool starts the long runs early)."""
    s = settings(quick)
    out: list[RunSpec] = []
    for w in s["workloads"]:
        estimate = w.estimate(quick)
        searched = estimated_pricing(estimated, estimate)
        adaptive = adaptive_options(estimated, estimate)
        plugin = w.plugin(quick)
        for seed in s["seeds"]:
            params = {**w.params, "seed": seed}
            tags = {"workload": w.name, "seed": seed}
            policies = (("offline",) if w.opt else ()) + ("dorm", "drf", "optimus", "tiresias",
                                                          "rrh", "fifo")
            out += [RunSpec(w.generator, params, p, tags=tags) for p in policies]
            out += [RunSpec(w.generator, params, "oasis-adaptive", adaptive,
                            tags={**tags, "series": ADAPTIVE}),
                    RunSpec(w.generator, params, "oasis", {"pricing": dict(searched)}, tags=tags),
                    RunSpec(w.generator, params, "oasis", {"pricing": plugin},
                            tags={**tags, "series": PLUGIN}),
                    RunSpec(w.generator, params, "oasis", {}, tags={**tags, "series": ORACLE})]
    return out


def collect(specs, records) -> dict[tuple[str, str], dict[int, float]]:
    """(workload, series) -> {seed: total utility}; series "offline" is OPT (each MILP must be
    proven optimal: ``ValueError`` otherwise, an unproven incumbent is no OPT), series
    ``HINDSIGHT`` the adaptive run's best shadow."""
    from .figures.common import series

    out: dict[tuple[str, str], dict[int, float]] = {}
    for sp in specs:
        rec = records[sp.key]
        if sp.policy == "offline" and not rec["stats"].get("proven_optimal"):
            raise ValueError(f"{sp.tags['workload']} seed {sp.tags['seed']}: the MILP was not "
                             "proven optimal")
        out.setdefault((sp.tags["workload"], series(sp)), {})[sp.tags["seed"]] = \
            float(rec["metrics"]["total_utility"])
        if series(sp) == ADAPTIVE:
            out.setdefault((sp.tags["workload"], HINDSIGHT), {})[sp.tags["seed"]] = \
                max(rec["stats"]["adaptive"]["shadow_utility"])
    return out


def floor_diagnostics(specs, records, estimated, quick: bool) -> list[dict]:
    """Why a rule misses OPT, per instance of every workload with OPT: the searched floor (one
    per workload, chosen on the history), the adaptive rule's last floor and switches, the
    hindsight floor (the grid floor whose plain OASiS run earned most on the instance: the
    adaptive run's best shadow), and the admitted jobs of OPT and of each rule."""
    from .figures.common import series

    s = settings(quick)
    by = {}
    for sp in specs:
        by.setdefault((sp.tags["workload"], sp.tags["seed"]), {})[series(sp)] = records[sp.key]
    out = []
    for w in s["workloads"]:
        if not w.opt:
            continue
        searched = estimated_pricing(estimated, w.estimate(quick))
        for seed in s["seeds"]:
            rec = by[(w.name, seed)]
            ad = rec[ADAPTIVE]["stats"]["adaptive"]
            shadow = ad["shadow_utility"]
            best = max(range(len(shadow)), key=lambda g: (shadow[g], -g))  # ties: smaller L
            out.append({"workload": w.name, "seed": seed,
                        "searched_floor": float(searched["L_worker"]),
                        "adaptive_floor": float(ad["final_floor"]),
                        "switches": int(ad["switches"]),
                        "hindsight_floor": float(ad["grid"][best]),
                        "admitted": {r: int(rec[r]["summary"]["admitted"])
                                     for r in RULES + ("offline",)}})
    return out
