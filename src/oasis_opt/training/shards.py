"""Contiguous, near-equal shards of a range: data chunks of a training set, parameter shards of a
flat parameter vector. Light module (numpy only), so executors can plan shards without JAX."""
from __future__ import annotations

import numpy as np


def shard_bounds(size: int, shards: int) -> np.ndarray:
    """Offsets ``b`` (``shards + 1`` ints, ``b[0] = 0``, ``b[-1] = size``): shard k is
    ``[b[k], b[k+1])``. The first ``size % shards`` shards hold one element more than the others
    (``numpy.array_split``'s rule), so sizes differ by at most one and cover ``size`` exactly."""
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
        raise ValueError(f"size: expected an integer >= 0, got {size!r}")
    if isinstance(shards, bool) or not isinstance(shards, (int, np.integer)) or shards < 1:
        raise ValueError(f"shards: expected an integer >= 1, got {shards!r}")
    if shards > size:
        raise ValueError(f"shards: {shards} shards of {size} elements would leave some empty")
    base, extra = divmod(int(size), int(shards))
    sizes = np.full(int(shards), base, dtype=np.int64)
    sizes[:extra] += 1
    return np.concatenate([[0], np.cumsum(sizes)])
