"""How the pricing study's adaptive floor was chosen (issue #29): its variants on design seeds.

The pricing study (``oasis_opt.experiments.pricing``, ``paper_figs/pricing.md``) evaluates on
seeds 500-509 with histories at seeds 1000-1009; every choice about the adaptive rule it runs was
made here first, on **design seeds 2000-2009** (never evaluated by any figure), with the study's
own workloads and histories (``pricing.FULL``; paper-sim at 100 jobs only, the larger sizes cost
minutes per run). Per workload and seed:

* ``searched``: plain OASiS at the searched floor (the default rule);
* ``plain``: ``oasis-adaptive`` from the searched floor, no prior (what the study ran first);
* ``prior w``: ``oasis-adaptive`` with the history's calibration table as its prior, weight w
  (``--weights``; the study runs w = 1, the policy's default);
* ``capacity``: a variant tried and not kept (``CapacityScoredAdaptive`` below): the leader is
  taken on each shadow's utility minus the value of the capacity it holds from the current slot
  on, priced by the starting floor's price functions (the integral of eq. (22) over the committed
  amount), so that a low floor that admits early jobs greedily pays for the capacity later jobs
  will miss.

The page gives each variant's mean total utility and its share of the hindsight floor's (the best
grid floor on the instance itself, the adaptive run's best shadow). Runs go through the runner
(validated, stored under ``--results``, reused when rerun).

    nice -n 10 .venv/bin/python benchmarks/design_adaptive_prior.py      # about 10 minutes on 2 cores

Writes benchmarks/results/adaptive_prior_design.json and .md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from oasis_opt.experiments import pricing as study
from oasis_opt.experiments.calibration import calibration_specs, resolve_all
from oasis_opt.experiments.runner import run_sweep
from oasis_opt.experiments.spec import RunSpec
from oasis_opt.online.adaptive import AdaptiveOasisPolicy
from oasis_opt.online.pricing import resolve_pricing

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
DESIGN_SEEDS = tuple(range(2000, 2010))
WORKLOADS = ("paper-sim 100 jobs", "paper-fig5 3 servers", "paper-fig5 6 servers",
             "paper-fig5 9 servers", "paper-fig5 12 servers", "testbed", "mixed cluster")


def _held_value(pricing, used: np.ndarray, capacity: np.ndarray, ps: bool) -> float:
    """Sum over (slot, server, resource) of the integral of eq. (22)'s price from 0 to the
    committed amount g: c / ln(U/L) * (P(g) - P(0)); unpriced resources (U = nan) count 0."""
    price = pricing.ps_prices if ps else pricing.worker_prices
    log_ratio = pricing._log_ratios[1 if ps else 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        v = capacity / log_ratio * (price(used, capacity) - price(np.zeros_like(capacity),
                                                                   capacity))
    return float(np.nansum(v))


class CapacityScoredAdaptive(AdaptiveOasisPolicy):
    """``oasis-adaptive`` whose leader is taken on utility minus ``capacity_weight`` times the
    value of the capacity each shadow holds from the current slot on (module docstring)."""

    name = "oasis-adaptive-capacity"

    def __init__(self, *args, capacity_weight: float = 1.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.capacity_weight = float(capacity_weight)

    def start(self, instance, state):
        super().start(instance, state)
        self.now = 1
        self.reference = resolve_pricing(self._documents()[self.start_index], instance)

    def held(self) -> np.ndarray:
        inst, t = self.instance, self.now
        return np.array([_held_value(self.reference, s.worker_used[t:], inst.worker_capacity,
                                     False)
                         + _held_value(self.reference, s.ps_used[t:], inst.ps_capacity, True)
                         for s in self.shadows])

    def leader(self) -> int:
        total = self.scores + self.prior_term() - self.capacity_weight * self.held()
        ahead = np.flatnonzero(total >= total.max() - 1e-9 * max(1.0, abs(total.max())))
        return self.current if self.current in ahead else int(ahead[0])

    def on_arrival(self, job, t, state):
        self.now = t
        return super().on_arrival(job, t, state)


def variants(weights) -> dict[str, tuple[str, dict]]:
    """label -> (policy, options beyond the pricing); ``prior`` marks where the prior goes."""
    out = {"plain": ("oasis-adaptive", {})}
    for w in weights:
        out[f"prior w={w:g}"] = ("oasis-adaptive", {"prior": True, "prior_weight": w})
    out["capacity"] = (f"{Path(__file__).stem}:CapacityScoredAdaptive", {"capacity_weight": 1.0})
    return out


def best_line(utility: dict, adaptive: list[str]) -> str:
    """Which adaptive variant has the largest mean on each workload (ties shared), counted,
    and on how many workloads each is at least the searched floor."""
    wins = {v: 0.0 for v in adaptive}
    at_least = {v: 0 for v in adaptive}
    for by_variant in utility.values():
        means = {v: float(np.mean(list(by_variant[v].values()))) for v in adaptive}
        top = [v for v in adaptive if means[v] >= max(means.values()) - 1e-9]
        for v in top:
            wins[v] += 1 / len(top)
        searched = float(np.mean(list(by_variant["searched"].values())))
        for v in adaptive:
            at_least[v] += means[v] >= searched - 1e-9
    n = len(utility)
    return ("Best adaptive variant (workloads where its mean is the largest of the adaptive "
            "variants, ties shared; workloads where it is at least the searched floor's): "
            + "; ".join(f"{v}: {wins[v]:g} of {n}, {at_least[v]} of {n}" for v in adaptive)
            + ".")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weights", type=float, nargs="+", default=[0.5, 1.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=list(DESIGN_SEEDS))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--results", default="results/design-adaptive-prior")
    args = ap.parse_args()
    if set(args.seeds) & (set(study.EVAL_SEEDS) | set(study.FULL["history"])
                          | set(study.FULL["small_history"])):
        raise SystemExit("--seeds: design seeds must be disjoint from the study's evaluated "
                         "and history seeds")
    # the runner's workers import this module for the capacity variant
    sys.path.insert(0, str(HERE))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE),
                                                             os.environ.get("PYTHONPATH")]))
    workloads = [w for w in study.FULL["workloads"] if w.name in WORKLOADS]
    estimates = [w.estimate(False) for w in workloads]
    t0 = time.perf_counter()
    cal = run_sweep(calibration_specs(estimates), args.results, workers=args.workers,
                    desc="calibration")
    estimated = resolve_all(estimates, cal.records)
    labels = variants(args.weights)
    specs = []
    for w in workloads:
        est = estimated[w.estimate(False).key]
        for seed in args.seeds:
            params = {**w.params, "seed": seed}
            tags = {"workload": w.name, "seed": seed}
            specs.append(RunSpec(w.generator, params, "oasis", {"pricing": dict(est)},
                                 tags={**tags, "variant": "searched"}))
            for label, (policy, extra) in labels.items():
                opts = {"pricing": dict(est), **extra}
                if opts.pop("prior", False):
                    opts["prior"] = est.calibration.prior()
                specs.append(RunSpec(w.generator, params, policy, opts,
                                     tags={**tags, "variant": label}))
    records = run_sweep(specs, args.results, workers=args.workers, desc="design runs").records
    seconds = time.perf_counter() - t0
    utility: dict[str, dict[str, dict[int, float]]] = {}
    hindsight: dict[str, dict[int, float]] = {}
    for s in specs:
        rec = records[s.key]
        name, seed, label = s.tags["workload"], s.tags["seed"], s.tags["variant"]
        utility.setdefault(name, {}).setdefault(label, {})[seed] = rec["metrics"]["total_utility"]
        if label == "plain":
            hindsight.setdefault(name, {})[seed] = max(rec["stats"]["adaptive"]["shadow_utility"])
    order = ["searched", *labels]
    meta = {"design_seeds": args.seeds, "weights": args.weights, "seconds": round(seconds, 1),
            "machine": f"{os.cpu_count()} CPUs, {platform.platform()}",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "adaptive_prior_design.json").write_text(json.dumps(
        {"meta": meta, "utility": utility, "hindsight": hindsight}, indent=1) + "\n")
    rows = []
    for name in WORKLOADS:
        h = sum(hindsight[name].values())
        cells = [f"{np.mean(list(utility[name][v].values())):.1f} "
                 f"({sum(utility[name][v].values()) / h:.3f})" for v in order]
        rows.append(f"| {name} | {h / len(args.seeds):.1f} | " + " | ".join(cells) + " |")
    lines = [
        "# The adaptive floor's variants on design seeds (issue #29)", "",
        f"Made by `benchmarks/design_adaptive_prior.py` ({meta['date']}, {meta['seconds']} s, "
        f"{meta['machine']}). Seeds {args.seeds[0]}-{args.seeds[-1]}, which no figure "
        "evaluates; the workloads and histories of `paper_figs/pricing.md`. Each cell: mean "
        "total utility over the seeds (its share of the hindsight floor's, ratio of sums). "
        "Variants: the module docstring.", "",
        "| workload | hindsight floor | " + " | ".join(order) + " |",
        "|---|---|" + "---|" * len(order), *rows, "",
        best_line(utility, list(labels)), "",
        "The study runs `prior w=1`, the policy's default weight; the prior comes from the same "
        "history as the searched floor, so nothing is read from an evaluated instance.", ""]
    (RESULTS / "adaptive_prior_design.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
