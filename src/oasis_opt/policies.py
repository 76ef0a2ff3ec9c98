"""Registry of scheduling policies by name, resolved lazily so that listing them imports nothing.

Each entry maps a name to ``"module:attribute"`` (a class or factory taking keyword options and
returning an object with ``solve(instance, **run_options) -> Schedule``) and a one-line summary.
Add a policy by adding a line here; the CLI and experiment runner pick it up.

One router for options (``build``, which ``solve`` uses): keywords are told apart by the
policy's signatures. Those its class or factory takes are **policy options** (``backend``,
``seed``, ``pricing`` ...), those its ``solve`` method takes are **run options** (``progress``;
``time_limit`` for the offline solvers; online policies take no time limit). A keyword both take
goes to the constructor. Anything wrong with the options raises ``OptionError`` naming the
parameter at fault (``.param``), so a caller with its own names for them (the command line's
flags, the service's fields) maps that one name.
"""
from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable, Protocol

if TYPE_CHECKING:
    from .model import Instance, Schedule

_REGISTRY: dict[str, tuple[str, str]] = {
    "oasis": ("oasis_opt.online.oasis:OasisPolicy",
              "OASiS (Alg. 1): primal-dual admission, exponential prices (22), best-schedule DP"),
    "oasis-adaptive": ("oasis_opt.online.adaptive:AdaptiveOasisPolicy",
                       "OASiS whose floor L follows the best of shadow OASiS runs over a grid "
                       "of floors, online (needs --pricing for U)"),
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
    "priority-degrade": ("oasis_opt.cluster.priority:PriorityDegradePolicy",
                         "multi-dimensional priority, delta preemption (bands optional), victims degraded to "
                         "CPU and re-promoted"),
    "priority-kill": ("oasis_opt.cluster.priority:PriorityKillPolicy",
                      "the same priority and rule, victims killed and requeued (Kubernetes)"),
    "priority-checkpoint": ("oasis_opt.cluster.priority:PriorityCheckpointPolicy",
                            "the same priority and rule, victims checkpoint then requeue "
                            "(kill with checkpoint-restart: no work lost)"),
    "priority-nopreempt": ("oasis_opt.cluster.priority:PriorityNoPreemptPolicy",
                           "the same priority as the queue order, no preemption"),
    "optimus": ("oasis_opt.baselines.optimus:OptimusPolicy",
                "Optimus: greedy marginal gain of workers per unit of dominant resource"),
    "gavel-las": ("oasis_opt.baselines.gavel:GavelLas",
                  "Gavel max_min_fairness_perf: max-min normalised throughput LP, Gavel's rounds"),
    "gavel-ftf": ("oasis_opt.baselines.gavel:GavelFtf",
                  "Gavel finish_time_fairness_perf: min max rho (bisected LPs), Gavel's rounds"),
    "gavel-makespan": ("oasis_opt.baselines.gavel:GavelMakespan",
                       "Gavel min_total_duration_perf: least-makespan LP, Gavel's rounds"),
    "max-min-fairness": ("oasis_opt.baselines.gavel:MaxMinFairness",
                         "Gavel max_min_fairness: type-blind max-min LP, Gavel's rounds"),
    "gavel-fifo": ("oasis_opt.baselines.gavel:GavelFifo",
                   "FIFO in Gavel's rounds: variant=textbook (default) or gavel (its type quirk)"),
    "greedy": ("oasis_opt.sim.greedy:GreedyPolicy",
               "earliest-arrival greedy: admit all, fill each job up to N_i workers, first fit"),
    "offline": ("oasis_opt.offline.exact:OfflinePolicy",
                "exact offline optimum of (1): linearised MILP solved by HiGHS"),
    "offline-cpsat": ("oasis_opt.offline.exact:CpsatPolicy",
                      "exact offline optimum of (1): the same MILP solved by OR-Tools CP-SAT"),
    "offline-topo": ("oasis_opt.offline.topo:TopoOfflinePolicy",
                     "placement-aware progress: best full-speed schedule (MILP + link rows), a "
                     "lower bound on OPT"),
    "offline-colgen": ("oasis_opt.offline.colgen:ColgenPolicy",
                       "column generation on (14)-(18): integer schedule + [lower, upper] bracket"),
}


class Policy(Protocol):
    """What a registered factory returns: ``solve(instance, **run_options) -> Schedule``
    (run options: ``time_limit`` in seconds or None, ``progress``)."""

    def solve(self, instance: Instance, **run_options: Any) -> Schedule: ...


class OptionError(ValueError, TypeError):
    """An option refused: ``param`` names the parameter at fault and ``message`` says why.

    ``param`` is the option's keyword (``"time_limit"``, ``"backend"``, ``"memory_budget_gb"``),
    ``"policy"`` for the policy's name, or ``"options"`` when the policy rejects its options
    without naming one of them. ``str(err)`` is ``"<param>: <message>"``, the form of every
    library error. It is a ``ValueError`` (a bad value) and, as an unknown keyword always was, a
    ``TypeError``.
    """

    def __init__(self, param: str, message: str):
        super().__init__(f"{param}: {message}")
        self.param, self.message = param, message

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.param, self.message)


class UnknownPolicy(OptionError, KeyError):
    """No policy is registered under ``name`` (``param`` ``"policy"``; also a ``KeyError``)."""

    def __init__(self, name: str):
        super().__init__("policy", f"unknown policy {name!r} "
                                   f"(known: {', '.join(sorted(_REGISTRY))})")
        self.name = name

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.name,)


def available_policies() -> dict[str, str]:
    """Name -> one-line summary, in registration order."""
    return {name: summary for name, (_, summary) in _REGISTRY.items()}


def policy_factory(name: str) -> Callable[..., Policy]:
    """The class or factory registered as ``name``, imported but not called.

    Lets callers inspect the options a policy accepts (``inspect.signature``) before building it.
    """
    from .model.registry import resolve  # (the model loads numpy: not at import)

    if name not in _REGISTRY:
        raise UnknownPolicy(name)
    return resolve(_REGISTRY[name][0])


def keyword_names(fn: Any) -> set[str] | None:
    """Keyword arguments ``fn`` accepts (a class: its constructor's); None when it takes
    ``**kwargs`` or has no introspectable signature (anything goes)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def run_option_names(policy: Policy) -> set[str] | None:
    """Run options a built policy's ``solve`` takes (besides the instance)."""
    names = keyword_names(policy.solve)
    return None if names is None else names - {"instance"}


def get_policy(name: str, **options: Any) -> Policy:
    """Instantiate the policy ``name`` with its options (e.g. ``backend="jax"``)."""
    return policy_factory(name)(**options)


def construct(name: str, factory: Callable[..., Any], options: dict[str, Any]) -> Any:
    """``factory(**options)`` for the policy (or study controller) ``name``, every error about
    the options an ``OptionError``: a keyword ``factory`` does not take (``param`` that keyword),
    a value it rejects with a ``"<option>: ..."`` error (``param`` that option) or without
    naming one of them (``param`` ``"options"``). A ``FormatError`` (a file an option names is
    malformed: its ``field`` locates the fault inside the file) passes through."""
    from .model.checks import FormatError

    accepted = keyword_names(factory)
    if accepted is not None:
        for key in options:
            if key not in accepted:
                takes = (f"it takes: {', '.join(sorted(accepted))}" if accepted
                         else "it takes no options")
                raise OptionError(key, f"policy {name!r} does not accept option {key!r} "
                                       f"({takes})")
    try:
        return factory(**options)
    except FormatError:
        raise
    except (ValueError, TypeError) as e:
        raise _naming(e, options, "options") from None


def _naming(err: Exception, options: dict[str, Any], default: str) -> OptionError:
    """``err`` as an ``OptionError``: on the option its ``"<option>: ..."`` names, else on
    ``default`` with the whole message."""
    if isinstance(err, OptionError):
        return err
    param, sep, rest = str(err).partition(": ")
    if sep and param in options:
        return OptionError(param, rest)
    return OptionError(default, str(err))


def build(name: str, options: dict[str, Any]) -> tuple[Policy, dict[str, Any]]:
    """The policy ``name`` built from its options, and the run options for its ``solve``.

    ``options`` are split by the signatures (module docstring): the constructor's keywords build
    the policy (``construct``), those its ``solve`` takes are returned as run options. Raises
    ``OptionError``: ``param`` ``"policy"`` for an unknown name (an ``UnknownPolicy``), the
    keyword for an option neither takes (``time_limit`` on an online policy says why) or a value
    the constructor rejects (see ``construct``).
    """
    from .model.policy import ONLINE_NO_TIME_LIMIT, OnlinePolicy

    factory = policy_factory(name)
    takes = keyword_names(factory)
    given = {k: v for k, v in options.items() if takes is None or k in takes}
    built = construct(name, factory, given)
    run = {k: v for k, v in options.items() if k not in given}
    runs = run_option_names(built)
    unknown = [] if runs is None else sorted(set(run) - runs)
    if "time_limit" in unknown and isinstance(built, OnlinePolicy):
        raise OptionError("time_limit", f"policy {name!r}: {ONLINE_NO_TIME_LIMIT}")
    if unknown:
        raise OptionError(unknown[0], unknown_options_message(name, built, unknown, takes, runs))
    return built, run


def solve(instance: Instance, policy: str = "oasis", *, max_work: float | None = None,
          **options: Any) -> Schedule:
    """Run ``policy`` on ``instance`` and return its ``Schedule``, with its policy options
    recorded in ``stats["options"]`` (``summarize`` labels the schedule by them).

    ``options`` are split by ``build``: e.g. ``solve(inst, "oasis", backend="jax",
    progress=True)`` builds ``OasisPolicy(backend="jax")`` and runs ``.solve(inst,
    progress=True)``; ``solve(inst, "offline", time_limit=60)`` limits the solver. An option
    neither takes, or a value refused (by the constructor, or by the run with a
    ``"<option>: ..."`` error, e.g. a MILP above ``memory_budget_gb``), raises ``OptionError``
    naming it.

    Refuses (``oasis_opt.sizing.TooMuchWork``, a ``ValueError``) an instance whose estimated work
    exceeds ``max_work`` (default ``sizing.DEFAULT_MAX_WORK``; ``math.inf`` for no limit) or whose
    tables would not fit in memory.
    """
    from .model.checks import FormatError
    from .sizing import DEFAULT_MAX_WORK, check_work, estimate_work

    built, run = build(policy, options)
    check_work(estimate_work(instance, policy), DEFAULT_MAX_WORK if max_work is None else max_work)
    given = {k: v for k, v in options.items() if k not in run}
    try:
        schedule = built.solve(instance, **run)
    except FormatError:
        raise
    except ValueError as e:
        param, sep, _ = str(e).partition(": ")
        if sep and param in options:
            raise _naming(e, options, param) from None
        raise
    return record_options(schedule, given)


def unknown_options_message(name: str, policy: Policy, unknown: list[str], takes: set[str] | None,
                            runs: set[str] | None) -> str:
    """"policy 'oasis' takes no option 'time_limt' (policy options: ...; run options: ...)"."""
    from .model.policy import ONLINE_NO_TIME_LIMIT, OnlinePolicy

    names = ", ".join(repr(k) for k in unknown)
    out = (f"policy {name!r} takes no option{'s' if len(unknown) > 1 else ''} {names} "
           f"(policy options: {', '.join(sorted(takes or ())) or 'none'}; "
           f"run options: {', '.join(sorted(runs or ())) or 'none'})")
    if "time_limit" in unknown and isinstance(policy, OnlinePolicy):
        out += f"; {ONLINE_NO_TIME_LIMIT}"
    return out


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
