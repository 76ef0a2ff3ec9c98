"""What one experiment run is: an instance recipe, a policy, the metrics to extract, and its key.

A ``RunSpec`` is plain JSON-able data, so it travels to Ray workers, is stored beside its result,
and hashes to a stable **run key**: the SHA-256 of its canonical JSON (sorted keys, no spaces,
tuples as lists, floats as ``repr``), prefixed by ``KEY_SCHEMA``. Two specs that differ only in
the order of their keyword arguments have the same key; any change in a value changes it.
``tags`` (labels for figures and progress bars) are not part of the key, so figures that need
the same run (Fig. 3's OASiS and Fig. 6's 100% bar) share one stored result.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

# Bump when the meaning of a stored result changes for the same spec (e.g. a metric's
# definition): every key changes and old results are simply not found.
# @2: OASiS's dual subroutine breaks ties by one canonical rule (oasis_opt.online.dual), which
# changes some of its decisions; stats' wall-clock entries moved under stats.timing.
KEY_SCHEMA = "oasis-opt/run-key@2"
KEY_LENGTH = 20  # hex digits kept from the digest (80 bits: no collisions in any sweep we run)


def canonical(value: Any, path: str = "spec") -> Any:
    """``value`` as canonical JSON data: dicts with string keys, lists, finite numbers, strings.

    Raises ``ValueError`` naming the offending field for anything that would not round-trip
    (sets, NaN, arbitrary objects), so a key never depends on ``repr`` of an object.
    """
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"{path}: keys must be strings, got {k!r}")
            out[k] = canonical(v, f"{path}.{k}")
        return out
    if isinstance(value, (list, tuple)):
        return [canonical(v, f"{path}[{n}]") for n, v in enumerate(value)]
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{path}: {value} is not a finite number")
        return float(value)
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        return canonical(value.item(), path)
    raise ValueError(f"{path}: {type(value).__name__} is not JSON data")


def canonical_json(value: Any) -> str:
    return json.dumps(canonical(value), sort_keys=True, separators=(",", ":"), allow_nan=False)


@dataclass(frozen=True)
class RunSpec:
    """One run: ``generator(**params)`` -> instance; ``policy(**options).solve(instance, **run_options)``.

    ``generator``: a name in ``oasis_opt.workloads`` (e.g. ``"paper_sim"``) or ``"module:function"``;
    ``policy``: a registered policy name or ``"module:Class"``.
    ``params``: its keyword arguments, including ``seed``.
    ``metrics``: names in ``METRICS`` extracted from the validated schedule.
    ``tags``: free labels for figures (jobs, seed, u_scale ...); not part of the key.
    """

    generator: str
    params: Mapping[str, Any]
    policy: str
    options: Mapping[str, Any] = field(default_factory=dict)
    metrics: tuple[str, ...] = ("total_utility",)
    run_options: Mapping[str, Any] = field(default_factory=dict)
    tags: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.generator, str) or not self.generator:
            raise ValueError("spec.generator: expected a non-empty string")
        if not isinstance(self.policy, str) or not self.policy:
            raise ValueError("spec.policy: expected a non-empty string")
        unknown = [m for m in self.metrics if m not in METRICS]
        if unknown:
            raise ValueError(f"spec.metrics: unknown metric {unknown[0]!r} "
                             f"(known: {', '.join(METRICS)})")
        object.__setattr__(self, "metrics", tuple(self.metrics))
        self.keyed()  # fail early on anything that is not JSON data
        canonical(self.tags, "spec.tags")

    def keyed(self) -> dict:
        """The part of the spec that defines the result (hashed into the key)."""
        return canonical({"generator": self.generator, "params": dict(self.params),
                          "policy": self.policy, "options": dict(self.options),
                          "metrics": list(self.metrics), "run_options": dict(self.run_options)})

    @property
    def key(self) -> str:
        digest = hashlib.sha256((KEY_SCHEMA + "\n" + canonical_json(self.keyed())).encode())
        return digest.hexdigest()[:KEY_LENGTH]

    def to_dict(self) -> dict:
        return {**self.keyed(), "tags": canonical(self.tags)}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> "RunSpec":
        allowed = {"generator", "params", "policy", "options", "metrics", "run_options", "tags"}
        extra = sorted(set(d) - allowed)
        if extra:
            raise ValueError(f"spec.{extra[0]}: unknown field")
        return RunSpec(d["generator"], dict(d["params"]), d["policy"], dict(d.get("options", {})),
                       tuple(d.get("metrics", ("total_utility",))), dict(d.get("run_options", {})),
                       dict(d.get("tags", {})))

    def label(self) -> str:
        opts = ",".join(f"{k}={v}" for k, v in sorted(self.options.items()))
        return f"{self.generator}{dict(self.params)} {self.policy}{f'[{opts}]' if opts else ''}"


def resolve_generator(name: str) -> Callable[..., Any]:
    """``"paper_sim"`` -> ``oasis_opt.workloads.paper_sim``; ``"pkg.mod:fn"`` -> that function."""
    if ":" in name:
        module, attr = name.split(":", 1)
    else:
        module, attr = "oasis_opt.workloads", name
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"spec.generator: cannot resolve {name!r} ({e})") from None
    if not callable(fn):
        raise ValueError(f"spec.generator: {name!r} is not callable")
    return fn


def resolve_policy(name: str) -> Callable[..., Any]:
    """A registered policy name (``oasis_opt.policies``), or ``"module:Class"`` for a policy
    outside the registry (an experiment's own variant); returns the class/factory, not called."""
    if ":" not in name:
        from ..policies import policy_factory

        return policy_factory(name)
    module, attr = name.split(":", 1)
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"spec.policy: cannot resolve {name!r} ({e})") from None


# ---- metrics extracted from a validated schedule ----------------------------------------------
def _total_utility(instance, schedule) -> float:
    """Sum of f_i(t_hat_i - a_i) over completed jobs (paper Figs. 3, 6, 8)."""
    return float(schedule.total_utility)


def _timeliness(instance, schedule) -> dict:
    """Per job class: (t_hat_i - a_i) - gamma3 of completed jobs (paper Figs. 4, 9), and, kept
    apart (A7), the same quantity for jobs that did not complete if they were counted as
    completing at T ("censored"), so a figure can show either convention."""
    from ..sim.metrics import completion_minus_target

    done = completion_minus_target(instance, schedule)
    censored: dict[str, list[float]] = {}
    T = instance.horizon
    for i, job in enumerate(instance.jobs):
        if schedule.completion[i] is None and job.utility.kind == "sigmoid":
            censored.setdefault(job.job_class or "unclassified", []).append(
                float(T - job.arrival - job.utility.target))
    return {"completed": done, "censored": censored}


def _per_job(instance, schedule) -> dict:
    """Per job (instance order): class, arrival, admitted, completion, utility."""
    return {"job_class": [j.job_class for j in instance.jobs],
            "arrival": instance.arrival.tolist(),
            "admitted": list(schedule.admitted), "completion": list(schedule.completion),
            "utility": [float(u) for u in schedule.utility]}


METRICS: dict[str, Callable[[Any, Any], Any]] = {
    "total_utility": _total_utility,
    "timeliness": _timeliness,
    "per_job": _per_job,
}
