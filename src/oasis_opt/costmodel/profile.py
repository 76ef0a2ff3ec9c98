"""Measured training speed: the Optimus synchronous parameter-server model, fitted to a profile.

A profile (``oasis-opt profile``, measured by ``oasis_opt.runtime.profile``) times synchronous
PS iterations of one training task with w workers and p PSs: in one iteration every worker
computes the gradient of one mini-batch of ``batch_size`` examples, pushes it to the PSs (shard
j to PS j), each PS averages and steps its shard, and the workers pull the new parameters.

**Speed model** (Optimus, EuroSys'18; reference ``cluster-scheduler.md`` section 3.5). Optimus
writes the speed of synchronous training as f(w, p) = 1 / (θ0 M/w + θ1 + θ2 w/p + θ3 w + θ4 p),
M the global batch. Here each worker's batch M/w is the task's fixed ``batch_size``, so θ0 M/w
is a constant and is part of θ1; the seconds per iteration are

    t(w, p) = θ1 + θ2 w/p + θ3 w + θ4 p,        f(w, p) = 1 / t(w, p) iterations/s,

with θ1 the compute, update and fixed overhead, θ2 w/p the transfer at a PS (each of the p PSs
serves w workers), θ3 w and θ4 p per-connection costs. All θ >= 0.

**Fit.** Bounded linear least squares (``scipy.optimize.lsq_linear``, θ >= 0) on relative
residuals, i.e. minimising sum over samples of ((t(w, p) - t_measured) / t_measured)^2, so a
fast and a slow configuration weigh alike. Four parameters need at least four distinct (w, p)
points. The fit error is reported as the RMS and the largest relative error over the samples.

**Chunk time from a profile.** A job of this task whose data chunks hold ``minibatches`` mini-
batches, run with w workers and p PSs, trains a chunk in ``minibatches * t(w, p)`` seconds, so
x_i = minibatches * t(w, p) / slot_s worker-slots per chunk (``chunk_time``); the paper's model
(each worker progresses at one speed whatever w and p) is this at one reference (w, p).

**Contention-aware speed** (``"optimus-shared"``). The jobs of a slot share the machine's C
cores, so a job's iteration slows with every container of the slot, not only its own. The same
Optimus form, with its per-connection terms made a sharing term over the slot's total load:

    t(w, p | W, P, C) = θ1 + θ2 w/p + (θ5 W + θ6 P) / C,

w and p the job's own workers and PSs (its critical path: θ1 the fixed overhead, θ2 w/p the
transfer at its PSs), W >= w and P >= p the workers and PSs of **all** jobs of the slot on the
machine, C its cores; θ5 and θ6 are the core-seconds one worker and one PS container take per
iteration, shared by the C cores. Fitted (``fit_contention_model``, bounded relative least
squares as above) on samples that carry the slot's totals (``SharedSample``): a profile's runs
(one job per slot, so W = w, P = p, C = the profiling machine's cores, ``meta.cores``) and the
job-slots of an execution (``samples_from_report``), where W > w tells sharing from own cost.
On a profile alone θ5 = C θ3 and θ6 = C θ4, so the model differs from t(w, p) where it predicts:
at the slot's totals and on a machine with other cores.

**File** ``"format": "oasis-opt/profile@1"``: ``task`` (the job ``task`` object: name, config,
seed, data_seed), ``chunks`` (data chunks of the train set while profiling), ``train_size``
(training examples of the task's split, so a generator can cut chunks without the task), ``samples`` (one
per (w, p): ``workers``, ``ps``, ``iterations`` timed, ``seconds`` of them), ``model`` (``kind``
``"optimus-sync"`` and ``theta`` ``{const, ps_load, per_worker, per_ps}`` = θ1..θ4 in seconds),
``fit`` (``rms_rel_error``, ``max_rel_error``), ``meta`` (free-form: machine, versions, wall
time). The reader is strict and recomputes nothing: ``refit`` checks a file's θ against its
samples.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..model.checks import FormatError, free_form, integer, number, task

PROFILE_FORMAT = "oasis-opt/profile@1"
SPEED_MODEL = "optimus-sync"
THETA = ("const", "ps_load", "per_worker", "per_ps")  # θ1, θ2, θ3, θ4
MIN_POINTS = len(THETA)


class _Timed:
    """A sample's seconds per iteration (``seconds`` / ``iterations``)."""

    seconds: float
    iterations: int

    @property
    def iteration_s(self) -> float:
        return self.seconds / self.iterations


@dataclass(frozen=True)
class Sample(_Timed):
    """``iterations`` synchronous iterations with ``workers`` workers and ``ps`` PSs took
    ``seconds``."""

    workers: int
    ps: int
    iterations: int
    seconds: float


def _relative_fit(a: np.ndarray, t: np.ndarray) -> np.ndarray:
    """θ >= 0 minimising sum ((A θ - t) / t)^2 (bounded least squares on A/t θ - 1)."""
    from scipy.optimize import lsq_linear

    fit = lsq_linear(a / t[:, None], np.ones_like(t), bounds=(0.0, np.inf), method="bvls")
    # BVLS can end a hair below a bound it holds (-1e-19): θ >= 0 is what the format promises
    return np.maximum(fit.x, 0.0)


def _relative_errors(predicted, t: np.ndarray) -> dict[str, float]:
    rel = np.asarray(predicted) / t - 1
    return {"rms_rel_error": float(np.sqrt(np.mean(rel ** 2))),
            "max_rel_error": float(np.max(np.abs(rel)))}


def _features(workers, ps) -> np.ndarray:
    """Columns of t(w, p) = θ1 + θ2 w/p + θ3 w + θ4 p, one row per (w, p)."""
    w = np.asarray(workers, dtype=float)
    p = np.asarray(ps, dtype=float)
    return np.column_stack([np.ones_like(w), w / p, w, p])


def iteration_time(theta: Mapping[str, float], workers, ps):
    """t(w, p) = θ1 + θ2 w/p + θ3 w + θ4 p in seconds (scalars, or arrays that broadcast)."""
    w, p = np.asarray(workers, dtype=float), np.asarray(ps, dtype=float)
    out = theta["const"] + theta["ps_load"] * w / p + theta["per_worker"] * w + theta["per_ps"] * p
    return float(out) if out.ndim == 0 else out


def fit_speed_model(samples: Sequence[Sample]) -> tuple[dict[str, float], dict[str, float]]:
    """θ >= 0 minimising the relative squared error of t(w, p) over ``samples``; returns
    ``(theta, {"rms_rel_error", "max_rel_error"})``. ``ValueError("samples: ...")`` with fewer
    than four distinct (w, p) points."""
    points = {(s.workers, s.ps) for s in samples}
    if len(points) < MIN_POINTS:
        raise ValueError(f"samples: the speed model has {MIN_POINTS} parameters and needs at "
                         f"least {MIN_POINTS} distinct (workers, ps) points, got {len(points)}")
    w = np.array([s.workers for s in samples], dtype=float)
    p = np.array([s.ps for s in samples], dtype=float)
    t = np.array([s.iteration_s for s in samples], dtype=float)
    theta = {k: float(v) for k, v in zip(THETA, _relative_fit(_features(w, p), t))}
    return theta, fit_errors(theta, samples)


def fit_errors(theta: Mapping[str, float], samples: Sequence[Sample]) -> dict[str, float]:
    """RMS and largest |t(w, p) / t_measured - 1| over ``samples``."""
    t = np.array([s.iteration_s for s in samples], dtype=float)
    return _relative_errors(
        iteration_time(theta, [s.workers for s in samples], [s.ps for s in samples]), t)


# ---- the contention-aware model ---------------------------------------------------------------
CONTENTION_MODEL = "optimus-shared"
SHARED_THETA = ("const", "ps_load", "worker_core_s", "ps_core_s")  # θ1, θ2, θ5, θ6


@dataclass(frozen=True)
class SharedSample(_Timed):
    """``iterations`` iterations of a job with ``workers`` workers and ``ps`` PSs took
    ``seconds`` while its slot ran ``slot_workers`` workers and ``slot_ps`` PSs in all (its own
    included) on ``cores`` cores."""

    workers: int
    ps: int
    slot_workers: int
    slot_ps: int
    cores: float
    iterations: int
    seconds: float


def shared_iteration_time(theta: Mapping[str, float], workers, ps, slot_workers, slot_ps,
                          cores):
    """t(w, p | W, P, C) = θ1 + θ2 w/p + (θ5 W + θ6 P) / C in seconds (scalars or arrays)."""
    w, p = np.asarray(workers, dtype=float), np.asarray(ps, dtype=float)
    W, P = np.asarray(slot_workers, dtype=float), np.asarray(slot_ps, dtype=float)
    c = np.asarray(cores, dtype=float)
    out = (theta["const"] + theta["ps_load"] * w / p
           + (theta["worker_core_s"] * W + theta["ps_core_s"] * P) / c)
    return float(out) if out.ndim == 0 else out


def _shared_rows(samples: Sequence[SharedSample]):
    cols = [np.array([getattr(s, k) for s in samples], dtype=float)
            for k in ("workers", "ps", "slot_workers", "slot_ps", "cores")]
    w, p, W, P, c = cols
    return np.column_stack([np.ones_like(w), w / p, W / c, P / c]), cols


def fit_contention_model(samples: Sequence[SharedSample]
                         ) -> tuple[dict[str, float], dict[str, float]]:
    """θ >= 0 minimising the relative squared error of t(w, p | W, P, C) over ``samples``;
    returns ``(theta, {"rms_rel_error", "max_rel_error"})``. ``ValueError("samples: ...")``
    when fewer than four distinct (w/p, W/C, P/C) points leave θ undetermined."""
    samples = list(samples)
    for n, s in enumerate(samples):
        if not (s.slot_workers >= s.workers >= 1 and s.slot_ps >= s.ps >= 1 and s.cores > 0
                and s.iterations >= 1 and s.seconds > 0):
            raise ValueError(f"samples[{n}]: expected W >= w >= 1, P >= p >= 1, cores > 0, "
                             f"iterations >= 1 and seconds > 0, got {s}")
    a, _ = _shared_rows(samples) if samples else (np.zeros((0, 4)), None)
    if len({tuple(np.round(r, 12)) for r in a}) < len(SHARED_THETA):
        raise ValueError(f"samples: the contention model has {len(SHARED_THETA)} parameters and "
                         f"needs at least {len(SHARED_THETA)} distinct (w/p, W/C, P/C) points")
    t = np.array([s.iteration_s for s in samples], dtype=float)
    theta = {k: float(v) for k, v in zip(SHARED_THETA, _relative_fit(a, t))}
    return theta, shared_fit_errors(theta, samples)


def shared_fit_errors(theta: Mapping[str, float], samples: Sequence[SharedSample]
                      ) -> dict[str, float]:
    """RMS and largest |t(w, p | W, P, C) / t_measured - 1| over ``samples``."""
    _, (w, p, W, P, c) = _shared_rows(samples)
    t = np.array([s.iteration_s for s in samples], dtype=float)
    return _relative_errors(shared_iteration_time(theta, w, p, W, P, c), t)


def profile_cores(meta: Mapping[str, Any], default: float) -> float:
    """The cores a profile was measured on (``meta.cores``), else ``default``."""
    cores = meta.get("cores")
    if isinstance(cores, (int, float)) and not isinstance(cores, bool) and cores > 0:
        return float(cores)
    return float(default)


def samples_from_report(doc: Mapping[str, Any], cores: float | None = None
                        ) -> list[SharedSample]:
    """The job-slots of an execution report (``oasis-opt/execution@1``) with iterations, as
    contention samples: the job's counts, the slot's totals, ``cores`` (default: the report's
    ``meta.cores``)."""
    c = cores if cores is not None else doc.get("meta", {}).get("cores")
    if not isinstance(c, (int, float)) or isinstance(c, bool) or c <= 0:
        raise ValueError("cores: the report records no cores (meta.cores); pass them")
    totals = {s["slot"]: (s["workers"], s["ps"]) for s in doc["slots"]}
    out = []
    for job in doc["jobs"]:
        for r in job["slots"]:
            if r.get("iterations") and r.get("busy_s") and r["workers"] and r["ps"]:
                out.append(SharedSample(r["workers"], r["ps"], *totals[r["slot"]], float(c),
                                        r["iterations"], r["busy_s"]))
    return out


def refit_contention_model(prior: Sequence[SharedSample], executed: Sequence[SharedSample]
                           ) -> dict[str, Any]:
    """The contention model refitted online (Optimus refits its speed model as jobs run): on the
    profile's runs ``prior`` and the job-slots executed so far ``executed``
    (``samples_from_report``), each sample weighing alike. Executed slots where several jobs
    share the machine (W > w) are what separate a job's own cost from the sharing term; with
    none the fit is the profile's. Returns ``{"kind", "theta", "fit"}`` as
    ``SpeedProfile.contention_model``, its fit error over both sets of samples."""
    theta, errors = fit_contention_model(list(prior) + list(executed))
    return {"kind": CONTENTION_MODEL, "theta": theta, "fit": errors}


# ``oasis-opt profile``'s default points: where a model's θ stands in for the runs it came from
PRIOR_POINTS = ((1, 1), (2, 1), (2, 2), (4, 1), (4, 2))


def prior_samples(model: Mapping[str, Any]) -> list[SharedSample]:
    """A contention model (``{"theta", "cores"}``, as a job's provenance carries it) as samples:
    its own predictions at ``PRIOR_POINTS``, one job per slot on its ``cores``, standing for the
    profile's runs where only θ travelled. Refitting on them alone gives θ back."""
    theta, c = model["theta"], float(model["cores"])
    return [SharedSample(w, p, w, p, c, 1, shared_iteration_time(theta, w, p, w, p, c))
            for w, p in PRIOR_POINTS]


def online_predictions(model: Mapping[str, Any], rows: Sequence[SharedSample],
                       slots: Sequence[int]) -> list[float]:
    """Seconds per row predicted *before* its slot ran, the model refitted online: on
    ``prior_samples(model)`` and the ``rows`` of earlier ``slots`` (``refit_contention_model``),
    the model itself for the first slot. ``rows[n]`` ran in slot ``slots[n]``; the prediction is
    ``iterations`` t(w, p | W, P, C) at the row's counts."""
    prior = prior_samples(model)
    out = []
    cache: dict[int, Mapping[str, float]] = {}
    for row, slot in zip(rows, slots):
        if slot not in cache:
            past = [r for r, t in zip(rows, slots) if t < slot]
            cache[slot] = (refit_contention_model(prior, past)["theta"] if past
                           else model["theta"])
        out.append(row.iterations * shared_iteration_time(
            cache[slot], row.workers, row.ps, row.slot_workers, row.slot_ps, row.cores))
    return out


@dataclass(frozen=True)
class SpeedProfile:
    """A task's measured speed: its samples and the fitted θ (module docstring)."""

    task: Mapping[str, Any]
    chunks: int
    train_size: int
    samples: tuple[Sample, ...]
    theta: Mapping[str, float]
    fit: Mapping[str, float]
    meta: Mapping[str, Any] = field(default_factory=dict)

    def iteration_time(self, workers, ps):
        """t(w, p): seconds per synchronous iteration with w workers and p PSs."""
        return iteration_time(self.theta, workers, ps)

    @property
    def batch_size(self) -> int:
        return int(self.task["config"]["batch_size"])

    def minibatches(self, chunks: int) -> int:
        """M: mini-batches in one pass over each of ``chunks`` data chunks of the train set (as
        ``oasis_opt.runtime.plan`` cuts them), 0 when a chunk holds less than one."""
        return self.train_size // (chunks * self.batch_size)

    def shared_samples(self, default_cores: float) -> list[SharedSample]:
        """The profile's runs as contention samples: one job per slot (W = w, P = p) on the
        profiling machine's cores (``meta.cores``, else ``default_cores``)."""
        c = profile_cores(self.meta, default_cores)
        return [SharedSample(s.workers, s.ps, s.workers, s.ps, c, s.iterations, s.seconds)
                for s in self.samples]

    def contention_model(self, default_cores: float) -> dict[str, Any]:
        """The contention-aware model fitted on this profile's runs: ``{"kind":
        "optimus-shared", "theta": {θ1, θ2, θ5, θ6}, "fit": errors}`` (module docstring)."""
        theta, errors = fit_contention_model(self.shared_samples(default_cores))
        return {"kind": CONTENTION_MODEL, "theta": theta, "fit": errors}

    def chunk_time(self, minibatches: int, workers: int, ps: int, slot_s: float) -> float:
        """x = minibatches * t(w, p) / slot_s: worker-slots to train one chunk of
        ``minibatches`` mini-batches at (w, p)."""
        return minibatches * self.iteration_time(workers, ps) / slot_s


def fitted_profile(task_spec: Mapping[str, Any], chunks: int, train_size: int,
                   samples: Sequence[Sample], meta: Mapping[str, Any] | None = None
                   ) -> SpeedProfile:
    """A profile of ``samples`` with θ fitted by ``fit_speed_model``."""
    theta, errors = fit_speed_model(samples)
    return SpeedProfile(dict(task_spec), int(chunks), int(train_size), tuple(samples), theta,
                        errors, dict(meta or {}))


# ---- the file ---------------------------------------------------------------------------------
def profile_to_dict(prof: SpeedProfile) -> dict:
    return {"format": PROFILE_FORMAT, "task": dict(prof.task), "chunks": prof.chunks,
            "train_size": prof.train_size,
            "samples": [{"workers": s.workers, "ps": s.ps, "iterations": s.iterations,
                         "seconds": s.seconds} for s in prof.samples],
            "model": {"kind": SPEED_MODEL, "theta": {k: prof.theta[k] for k in THETA}},
            "fit": {"rms_rel_error": prof.fit["rms_rel_error"],
                    "max_rel_error": prof.fit["max_rel_error"]},
            "meta": dict(prof.meta)}


def _object(v: Any, keys: Sequence[str], path: str, optional: Sequence[str] = ()) -> dict:
    if not isinstance(v, dict):
        raise FormatError(path, "expected an object")
    for k in v:
        if k not in keys and k not in optional:
            raise FormatError(f"{path}.{k}" if path else k, "unknown field")
    for k in keys:
        if k not in v:
            raise FormatError(f"{path}.{k}" if path else k, "missing field")
    return v


def profile_from_dict(doc: Any) -> SpeedProfile:
    """Read a profile document strictly: unknown or missing fields, wrong types, negative θ,
    samples with p > w or a non-positive time are errors naming the field."""
    d = _object(doc, ("format", "task", "chunks", "train_size", "samples", "model", "fit"), "",
                ("meta",))
    if d["format"] != PROFILE_FORMAT:
        raise FormatError("format", f"expected {PROFILE_FORMAT!r}, got {d['format']!r}")
    spec = task(d["task"], "task")
    chunks = integer(d["chunks"], "chunks", minimum=1)
    train_size = integer(d["train_size"], "train_size", minimum=1)
    if "batch_size" not in spec["config"]:
        raise FormatError("task.config.batch_size", "missing field")
    integer(spec["config"]["batch_size"], "task.config.batch_size", minimum=1)
    if not isinstance(d["samples"], list) or not d["samples"]:
        raise FormatError("samples", "expected a non-empty list")
    samples = []
    for n, s in enumerate(d["samples"]):
        p = f"samples[{n}]"
        _object(s, ("workers", "ps", "iterations", "seconds"), p)
        w, ps = integer(s["workers"], f"{p}.workers", minimum=1), integer(s["ps"], f"{p}.ps",
                                                                             minimum=1)
        if ps > w:
            raise FormatError(f"{p}.ps", f"{ps} PSs for {w} workers (at most one PS per worker)")
        samples.append(Sample(w, ps, integer(s["iterations"], f"{p}.iterations", minimum=1),
                              number(s["seconds"], f"{p}.seconds", strict=True)))
    model = _object(d["model"], ("kind", "theta"), "model")
    if model["kind"] != SPEED_MODEL:
        raise FormatError("model.kind", f"expected {SPEED_MODEL!r}, got {model['kind']!r}")
    th = _object(model["theta"], THETA, "model.theta")
    theta = {k: number(th[k], f"model.theta.{k}") for k in THETA}
    fit = _object(d["fit"], ("rms_rel_error", "max_rel_error"), "fit")
    errors = {k: number(fit[k], f"fit.{k}") for k in ("rms_rel_error", "max_rel_error")}
    meta = free_form(d.get("meta", {}), "meta")
    return SpeedProfile(spec, chunks, train_size, tuple(samples), theta, errors, meta)


def load_profile(path: str | Path) -> SpeedProfile:
    from ..model.io import read_json

    return profile_from_dict(read_json(path))


def save_profile(prof: SpeedProfile, path: str | Path) -> None:
    from ..model.io import write_json_atomic

    write_json_atomic(path, profile_to_dict(prof))

