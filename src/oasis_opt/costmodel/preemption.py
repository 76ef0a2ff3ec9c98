"""What a preemption costs: checkpoint interval and restart time per job, in slots.

A training job saves a checkpoint periodically; when it is stopped (preempted, degraded to CPU,
resized) it loses what it trained since its last checkpoint (a job promoted back to
accelerators, or suspended, writes one first and loses nothing) and, when it runs again, first
restarts (container start plus reading the checkpoint) before it progresses.

* **Checkpoint size** (MB) = ``CHECKPOINT_STATE_FACTOR`` x the model size S (the job's
  ``provenance.gradient_mb``, else its ``provenance.model``'s ``costmodel.models`` size, else the
  default model's): the weights plus the two Adam moments [choice].
* **Write / read time** delta_i = size / ``STORAGE_GBPS`` (seconds; 1 MB = 8 Mbit): the per-job
  share of a shared network file system [choice].
* **Checkpoint interval** tau_i = sqrt(2 delta_i M) seconds, Young's first-order optimum for a
  mean time between interruptions M = ``MEAN_TIME_BETWEEN_INTERRUPTIONS_S`` [choice: a week],
  turned into slots as c_i = max(1, round(tau_i / slot_s)): the job checkpoints at the end of every
  c_i-th slot it runs since its last (re)start.
* **Restart time** rho_i = (``CONTAINER_START_S`` + delta_i) / slot_s, in slots (a real number):
  in the n-th slot (n = 0, 1, ...) with workers after a stop, the job is credited
  floor(progress x clip(n + 1 - rho_i, 0, 1)) work units, i.e. only the part of the slot after the
  restart, rounded down to whole units (``restart_share``).
* **Checkpoint write** w_i = delta_i / slot_s, in slots: what a stop that saves the job's work
  first costs besides the restart. A promotion back to accelerators (``model.preemption``) is the
  scheduler's own move when accelerators free up, not an eviction: the job writes a checkpoint at
  the slot boundary, then restarts on the accelerators, a restart of rho_i + w_i slots [choice:
  the write and the new containers' start taken one after the other, the conservative order; the
  start could hide the write].

``slot_s`` is the job's ``provenance.slot_s`` (the generators record it), else 3600 s (the paper's
hour). ``instance.meta["preemption"]`` may override per instance ``checkpoint_slots``,
``restart_slots`` and ``write_slots`` (numbers for every job), e.g. to study costlier preemption.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .chunktime import MBIT_PER_MB, MBPS_PER_GBPS
from .models import DEFAULT_MODEL, MODELS

CHECKPOINT_STATE_FACTOR = 3.0  # weights + 2 Adam moments [choice]
STORAGE_GBPS = 1.0  # per-job share of shared storage bandwidth [choice]
MEAN_TIME_BETWEEN_INTERRUPTIONS_S = 7 * 24 * 3600.0  # Young's M [choice]
CONTAINER_START_S = 60.0  # scheduling + container start before the checkpoint is read [choice]
DEFAULT_SLOT_S = 3600.0
OVERRIDES = ("checkpoint_slots", "restart_slots", "write_slots")


@dataclass(frozen=True)
class PreemptionCosts:
    """Per job: ``checkpoint_slots`` c_i (int >= 1), ``restart_slots`` rho_i (float >= 0) and
    ``write_slots`` w_i (float >= 0)."""

    checkpoint_slots: np.ndarray
    restart_slots: np.ndarray
    write_slots: np.ndarray


def checkpoint_mb(job) -> float:
    """Checkpoint size of a job (MB): ``CHECKPOINT_STATE_FACTOR`` x its model size."""
    prov = job.provenance or {}
    if "gradient_mb" in prov:
        size = float(prov["gradient_mb"])
    else:
        size = MODELS.get(str(prov.get("model", DEFAULT_MODEL)), MODELS[DEFAULT_MODEL]).size_mb
    return CHECKPOINT_STATE_FACTOR * size


def transfer_seconds(size_mb: float, gbps: float = STORAGE_GBPS) -> float:
    """Seconds to write or read ``size_mb`` MB at ``gbps``."""
    return size_mb * MBIT_PER_MB / (gbps * MBPS_PER_GBPS)


def _slot_s(job) -> float:
    return float((job.provenance or {}).get("slot_s", DEFAULT_SLOT_S))


def job_costs(job) -> tuple[int, float]:
    """``(c_i, rho_i)`` of one job (module docstring)."""
    slot_s = _slot_s(job)
    delta = transfer_seconds(checkpoint_mb(job))
    tau = math.sqrt(2.0 * delta * MEAN_TIME_BETWEEN_INTERRUPTIONS_S)
    return max(1, round(tau / slot_s)), (CONTAINER_START_S + delta) / slot_s


def write_slots(job) -> float:
    """w_i of one job: writing its checkpoint, in slots (module docstring)."""
    return transfer_seconds(checkpoint_mb(job)) / _slot_s(job)


def preemption_costs(instance) -> PreemptionCosts:
    """Costs of every job of ``instance``; ``meta["preemption"]`` overrides (module docstring)."""
    c, rho = zip(*(job_costs(j) for j in instance.jobs)) if instance.I else ((), ())
    c_arr, rho_arr = np.array(c, dtype=np.int64), np.array(rho, dtype=float)
    w_arr = np.array([write_slots(j) for j in instance.jobs], dtype=float)
    over = dict((instance.meta or {}).get("preemption", {}))
    unknown = sorted(set(over) - set(OVERRIDES))
    if unknown:
        raise ValueError(f"meta.preemption.{unknown[0]}: unknown field (known: "
                         f"{', '.join(OVERRIDES)})")
    if "checkpoint_slots" in over:
        v = over["checkpoint_slots"]
        if not (isinstance(v, int) and v >= 1):
            raise ValueError(f"meta.preemption.checkpoint_slots: must be an integer >= 1, got {v!r}")
        c_arr = np.full(instance.I, v, dtype=np.int64)
    for name in ("restart_slots", "write_slots"):
        if name in over:
            v = over[name]
            if not (isinstance(v, (int, float)) and not isinstance(v, bool)
                    and math.isfinite(v) and v >= 0):
                raise ValueError(f"meta.preemption.{name}: must be a number >= 0, got {v!r}")
            if name == "restart_slots":
                rho_arr = np.full(instance.I, float(v))
            else:
                w_arr = np.full(instance.I, float(v))
    return PreemptionCosts(c_arr, rho_arr, w_arr)


def restart_share(n: int, rho: float) -> float:
    """Share of the n-th slot with workers after a stop (n = 0, 1, ...) left after a restart of
    rho slots: clip(n + 1 - rho, 0, 1)."""
    return min(1.0, max(0.0, n + 1.0 - rho))
