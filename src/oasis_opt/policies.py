"""Registry of scheduling policies by name, resolved lazily so that listing them imports nothing.

Each entry maps a name to ``"module:attribute"`` (a class or factory taking keyword options and
returning an object with ``solve(instance, **run_options) -> Schedule``) and a one-line summary.
Add a policy by adding a line here; the CLI and experiment runner pick it up.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Callable, Protocol

if TYPE_CHECKING:
    from .model import Instance, Schedule

_REGISTRY: dict[str, tuple[str, str]] = {
    "oasis": ("oasis_opt.online.oasis:OasisPolicy",
              "OASiS (Alg. 1): primal-dual admission, exponential prices (22), best-schedule DP"),
    "oasis-topo": ("oasis_opt.cluster.oasis_topo:TopoOasisPolicy",
                   "OASiS with topology-aware prices p/eta and payoff (placement cost model)"),
    "fifo": ("oasis_opt.baselines.fifo:FifoPolicy",
             "FIFO: fixed k_i ~ U{1..30}, strict head-of-line, round-robin"),
    "drf": ("oasis_opt.baselines.drf:DrfPolicy",
            "DRF: progressive filling of dominant shares at every event, round-robin"),
    "rrh": ("oasis_opt.baselines.rrh:RrhPolicy",
            "RRH: risk-reward admission (gain - delay cost > 0), pause/keep, fixed k_i"),
    "dorm": ("oasis_opt.baselines.dorm:DormPolicy",
             "Dorm: utilisation MILP with fairness and M_adj = 2 at every event"),
    "tiresias": ("oasis_opt.baselines.tiresias:TiresiasPolicy",
                 "Tiresias: discretised 2D-LAS queues, preemptive, starvation promotion"),
    "optimus": ("oasis_opt.baselines.optimus:OptimusPolicy",
                "Optimus: greedy marginal gain of workers per unit of dominant resource"),
    "greedy": ("oasis_opt.sim.greedy:GreedyPolicy",
               "earliest-arrival greedy: admit all, fill each job up to N_i workers, first fit"),
    "offline": ("oasis_opt.offline.exact:OfflinePolicy",
                "exact offline optimum of (1): linearised MILP solved by HiGHS"),
    "offline-cpsat": ("oasis_opt.offline.exact:CpsatPolicy",
                      "exact offline optimum of (1): the same MILP solved by OR-Tools CP-SAT"),
    "offline-colgen": ("oasis_opt.offline.colgen:ColgenPolicy",
                       "column generation on (14)-(18): integer schedule + [lower, upper] bracket"),
}


class Policy(Protocol):
    """What a registered factory returns: ``solve(instance, **run_options) -> Schedule``
    (run options: ``time_limit`` in seconds or None, ``progress``)."""

    def solve(self, instance: Instance, **run_options: Any) -> Schedule: ...


class UnknownPolicy(KeyError):
    def __str__(self) -> str:
        return f"unknown policy {self.args[0]!r} (known: {', '.join(sorted(_REGISTRY))})"


def available_policies() -> dict[str, str]:
    """Name -> one-line summary, in registration order."""
    return {name: summary for name, (_, summary) in _REGISTRY.items()}


def policy_factory(name: str) -> Callable[..., Policy]:
    """The class or factory registered as ``name``, imported but not called.

    Lets callers inspect the options a policy accepts (``inspect.signature``) before building it.
    """
    if name not in _REGISTRY:
        raise UnknownPolicy(name)
    module, attr = _REGISTRY[name][0].split(":")
    return getattr(importlib.import_module(module), attr)


def get_policy(name: str, **options: Any) -> Policy:
    """Instantiate the policy ``name`` with its options (e.g. ``backend="jax"``)."""
    return policy_factory(name)(**options)


def solve(instance: Instance, policy: str = "oasis", *, options: dict[str, Any] | None = None,
          max_work: float | None = None, **run_options: Any) -> Schedule:
    """Run ``policy`` on ``instance`` and return its ``Schedule``, with ``options`` recorded in
    ``stats["options"]`` (``summarize`` labels the schedule by them).

    Refuses (``oasis_opt.sizing.TooMuchWork``, a ``ValueError``) an instance whose estimated work
    exceeds ``max_work`` (default ``sizing.DEFAULT_MAX_WORK``; ``math.inf`` for no limit) or whose
    tables would not fit in memory.
    """
    from .sizing import DEFAULT_MAX_WORK, check_work, estimate_work

    check_work(estimate_work(instance, policy), DEFAULT_MAX_WORK if max_work is None else max_work)
    options = dict(options or {})
    return record_options(get_policy(policy, **options).solve(instance, **run_options), options)


def record_options(schedule: Schedule, options: dict[str, Any]) -> Schedule:
    """``schedule`` with ``stats["options"]`` = the policy's options as JSON data (a pricing
    object as its document, a path as a string)."""
    from dataclasses import replace

    return replace(schedule, stats={**schedule.stats,
                                    "options": {k: _json_value(v) for k, v in options.items()}})


def _json_value(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, dict):
        return {str(k): _json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    if hasattr(v, "to_dict"):  # e.g. online.pricing.Pricing
        return _json_value(v.to_dict())
    if hasattr(v, "item"):  # numpy scalar
        return v.item()
    return str(v)  # a path, an enum ...
