"""Registry of the study controllers (early-stopping policies) by name, resolved lazily.

Each entry maps a name to ``"module:attribute"`` (a class or factory taking keyword options and
returning a ``replay.Controller``) and a one-line summary. The replay engine, the cluster study
and ``oasis-opt automl replay --policy NAME`` take their controllers from here.
"""
from __future__ import annotations

from typing import Any

from ..model.registry import resolve

_REGISTRY: dict[str, tuple[str, str]] = {
    "automl-thesis": ("oasis_opt.automl.thesis:ThesisController",
                      "predict final accuracy and time, classify, stop poor trials, water-fill "
                      "spare units to promising ones (reference 6.2)"),
    "automl-thesis-lean": ("oasis_opt.automl.thesis:lean",
                           "automl-thesis that stops sooner: delta 0.4, first rung at 5 % of "
                           "training (chosen on digits-mlp and digits-cnn, seeds 0-1)"),
    "automl-thesis-rank": ("oasis_opt.automl.rank:rank",
                           "ASHA's rungs (grace 1, eta 4, stopping) ranked by the predicted "
                           "final, plus the thesis's poor rule (delta 0.2) and allocation (up "
                           "to 2 units; chosen on digits-mlp and digits-cnn, seeds 0-1)"),
    "automl-thesis-rank-value": ("oasis_opt.automl.rank:rank_by_value",
                                 "automl-thesis-rank with its rungs ranked by the current value "
                                 "(the ablation of the predicted-final ranking)"),
    "automl-thesis-second-chance": ("oasis_opt.automl.second_chance:second_chance",
                                    "asha exactly, then the paused trials ranked by the "
                                    "predicted final resumed within 0.2 x ASHA's spend: spend "
                                    "<= 1.2x and final regret <= ASHA's by construction"),
    "automl-thesis-elastic": ("oasis_opt.automl.elastic:ElasticThesisController",
                              "automl-thesis whose classes set the workers: promising trials "
                              "grow (up to 4), uncertain ones shrink to 1, poor ones stop"),
    "optuna-median": ("oasis_opt.automl.pruners:optuna_median",
                      "Optuna MedianPruner (defaults), through trial.report / should_prune"),
    "optuna-sh": ("oasis_opt.automl.pruners:optuna_sh",
                  "Optuna SuccessiveHalvingPruner (defaults: reduction factor 4)"),
    "optuna-hyperband": ("oasis_opt.automl.pruners:optuna_hyperband",
                         "Optuna HyperbandPruner (defaults: reduction factor 3)"),
    "asha": ("oasis_opt.automl.pruners:AshaController",
             "asynchronous successive halving, promotion-based (Li et al. 2020, Alg. 2), "
             "grace 1, eta 4"),
    "tune-asha": ("oasis_opt.automl.tune:tune_asha",
                  "Ray Tune ASHAScheduler (defaults: grace 1, eta 4; stopping variant), through "
                  "on_trial_result / choose_trial_to_run"),
    "tune-hyperband": ("oasis_opt.automl.tune:tune_hyperband",
                       "Ray Tune HyperBandScheduler (defaults: eta 3; synchronous, pauses at "
                       "milestones)"),
    "no-stop": ("oasis_opt.automl.replay:Controller", "every trial runs to its last epoch"),
}
CONTROLLER_NAMES = tuple(_REGISTRY)


def available_controllers() -> dict[str, str]:
    """Name -> one-line summary, in registration order."""
    return {name: summary for name, (_, summary) in _REGISTRY.items()}


def controller_factory(name: str):
    """The class or factory registered as ``name``, imported but not called (ValueError naming
    ``policy`` if unknown)."""
    if name not in _REGISTRY:
        raise ValueError(f"policy: unknown policy {name!r} (known: {', '.join(_REGISTRY)})")
    return resolve(_REGISTRY[name][0])


def get_controller(name: str, **options: Any):
    """A fresh controller ``name`` with its options."""
    return controller_factory(name)(**options)
