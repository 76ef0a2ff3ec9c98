"""The paper's per-chunk training time, with units explicit.

A worker trains one data chunk of M_i mini-batches; each mini-batch costs tau_i of gradient
computation, then a push of e_i (gradients) and a pull of e_i (parameters) over the worker's
link b_i (paper p.3-4, asynchronous PS training; the PS side is never the bottleneck because
of constraint (6)). So

    x_i = M_i (tau_i + 2 e_i / b_i)                                            (paper p.4)

is the time to train one chunk; divided by the slot length it is the number of **worker-slots
per chunk**, ``Job.chunk_time``, and W_i = E_i N_i x_i is the right-hand side of constraint (2).

Units (reference section 15.1): ``gradient_mb`` in MB (10^6 bytes, so 1 MB = 8 Mbit),
``worker_bw_gbps`` in Gbps (1 Gbps = 1000 Mbps), times in seconds, ``slot_s`` in seconds. Hence
2 e_i / b_i [s] = 2 * (8 e_i [Mbit]) / (1000 b_i [Mbps]).
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

MBIT_PER_MB = 8.0  # 1 MB = 10^6 bytes = 8 * 10^6 bits
MBPS_PER_GBPS = 1000.0

# The keys a job's ``provenance`` carries to reproduce its chunk_time.
PROVENANCE_KEYS = ("minibatches", "minibatch_time_s", "gradient_mb", "worker_bw_gbps", "slot_s")


def megabytes_to_megabits(mb):
    """MB -> Mbit (x 8)."""
    return np.asarray(mb, dtype=float) * MBIT_PER_MB if np.ndim(mb) else float(mb) * MBIT_PER_MB


def gbps_to_mbps(gbps):
    """Gbps -> Mbps (x 1000)."""
    return np.asarray(gbps, dtype=float) * MBPS_PER_GBPS if np.ndim(gbps) else float(gbps) * MBPS_PER_GBPS


def _check(name: str, v, *, positive: bool) -> np.ndarray:
    a = np.asarray(v, dtype=float)
    if not np.isfinite(a).all():
        raise ValueError(f"{name}: must be finite, got {v!r}")
    if (a <= 0).any() if positive else (a < 0).any():
        raise ValueError(f"{name}: must be {'> 0' if positive else '>= 0'}, got {v!r}")
    return a


def comm_time_s(gradient_mb, worker_bw_gbps):
    """Push + pull time of one mini-batch, in seconds: 2 e_i / b_i = 2 * 8 e [Mbit] / (1000 b [Mbps]).

    Scalars in, float out; arrays in, array out.
    """
    e = _check("gradient_mb", gradient_mb, positive=False)
    b = _check("worker_bw_gbps", worker_bw_gbps, positive=True)
    out = 2.0 * megabytes_to_megabits(e) / gbps_to_mbps(b)
    return out if np.ndim(out) else float(out)


def chunk_time(minibatches, minibatch_time_s, gradient_mb, worker_bw_gbps, slot_s=3600.0):
    """Worker-slots to train one data chunk: x_i = M_i (tau_i + 2 e_i / b_i) / slot length.

    minibatches: M_i, mini-batches per chunk (integer >= 1).
    minibatch_time_s: tau_i, gradient computation per mini-batch, seconds (>= 0).
    gradient_mb: e_i, gradient (= parameter) size per mini-batch, MB (>= 0).
    worker_bw_gbps: b_i, bandwidth of one worker, Gbps (> 0).
    slot_s: slot length, seconds (> 0; the paper's default is 1 hour, its testbed 20 minutes).

    Broadcasts over numpy arrays. Raises ValueError naming the argument on bad input or when the
    result is not > 0 (a chunk must take some time).
    """
    m = _check("minibatches", minibatches, positive=True)
    if (m != np.round(m)).any():
        raise ValueError(f"minibatches: must be an integer, got {minibatches!r}")
    tau = _check("minibatch_time_s", minibatch_time_s, positive=False)
    slot = _check("slot_s", slot_s, positive=True)
    x = m * (tau + comm_time_s(gradient_mb, worker_bw_gbps)) / slot
    if (np.asarray(x) <= 0).any():
        raise ValueError("chunk_time: must be > 0 (minibatch_time_s and gradient_mb are both 0)")
    return x if np.ndim(x) else float(x)


def chunk_time_from_provenance(provenance: Mapping[str, Any]) -> float:
    """Recompute ``chunk_time`` from a job's recorded provenance (keys ``PROVENANCE_KEYS``)."""
    missing = [k for k in PROVENANCE_KEYS if k not in provenance]
    if missing:
        raise ValueError(f"provenance.{missing[0]}: missing field")
    return chunk_time(*(provenance[k] for k in PROVENANCE_KEYS))


def provenance(minibatches: int, minibatch_time_s: float, gradient_mb: float,
               worker_bw_gbps: float, slot_s: float) -> dict[str, Any]:
    """The provenance record of a chunk time (plain JSON types, keys in ``PROVENANCE_KEYS``)."""
    return {"minibatches": int(minibatches), "minibatch_time_s": float(minibatch_time_s),
            "gradient_mb": float(gradient_mb), "worker_bw_gbps": float(worker_bw_gbps),
            "slot_s": float(slot_s)}
