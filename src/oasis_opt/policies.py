"""Registry of scheduling policies by name, resolved lazily so that listing them imports nothing.

Each entry maps a name to ``"module:attribute"`` (a class or factory taking keyword options and
returning an object with ``solve(instance, **run_options) -> Schedule``) and a one-line summary.
Add a policy by adding a line here; the CLI and experiment runner pick it up.
"""
from __future__ import annotations

import importlib
from typing import Any

_REGISTRY: dict[str, tuple[str, str]] = {
    "greedy": ("oasis_opt.sim.greedy:GreedyPolicy",
               "earliest-arrival greedy: admit all, fill each job up to N_i workers, first fit"),
}


class UnknownPolicy(KeyError):
    def __str__(self) -> str:
        return f"unknown policy {self.args[0]!r} (known: {', '.join(sorted(_REGISTRY))})"


def available_policies() -> dict[str, str]:
    """Name -> one-line summary, in registration order."""
    return {name: summary for name, (_, summary) in _REGISTRY.items()}


def get_policy(name: str, **options: Any):
    """Instantiate the policy ``name`` with its options (e.g. ``backend="jax"``)."""
    if name not in _REGISTRY:
        raise UnknownPolicy(name)
    module, attr = _REGISTRY[name][0].split(":")
    return getattr(importlib.import_module(module), attr)(**options)


def solve(instance, policy: str = "oasis", *, options: dict | None = None, **run_options):
    """Run ``policy`` on ``instance`` and return its ``Schedule``."""
    return get_policy(policy, **(options or {})).solve(instance, **run_options)
