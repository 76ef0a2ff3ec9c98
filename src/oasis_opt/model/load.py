"""How much of a cluster a workload needs: the load factor and the largest container.

* **load** = max over resources r and both pools of  sum_i D_i s_i^r / (T sum_servers c^r), with
  D_i = W_i worker-slots on the worker pool and W_i b_i / B_i PS-slots (the fewest constraint (6)
  allows) on the PS pool: the fraction of the bottleneck resource the whole workload needs over
  the horizon (> 1: not every job can run).
* **largest container** = max over jobs, pools and resources of demand / the largest capacity of
  that resource in the pool: Theorem 4 assumes every container is small against its server.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np


def load_factor(instance: Any, work: np.ndarray | None = None) -> tuple[float, str]:
    """(max_r load, its resource and pool as "resource (pool)"), see the module docstring;
    ``work``: worker-slots per job in place of ``instance.work`` (e.g. while sizing jobs)."""
    work = (instance.work if work is None else np.asarray(work)).astype(float)
    ps_slots = work * np.divide(instance.worker_bw, instance.ps_bw,
                                out=np.zeros(instance.I), where=instance.ps_bw > 0)
    best, where = 0.0, "-"
    for pool, slots, demand, capacity in (
            ("worker", work, instance.worker_demand, instance.worker_capacity),
            ("ps", ps_slots, instance.ps_demand, instance.ps_capacity)):
        need = slots @ demand                                    # (R,)
        have = instance.horizon * capacity.sum(axis=0)           # (R,)
        for r, n, h in zip(instance.resources, need, have):
            load = n / h if h > 0 else (math.inf if n > 0 else 0.0)
            if load > best:
                best, where = float(load), f"{r} ({pool})"
    return best, where


def largest_container(instance: Any) -> float:
    """max over jobs, pools, resources of demand / the pool's largest capacity of it."""
    out = 0.0
    for demand, capacity in ((instance.worker_demand, instance.worker_capacity),
                             (instance.ps_demand, instance.ps_capacity)):
        if demand.size == 0:
            continue
        top = capacity.max(axis=0) if len(capacity) else np.zeros(demand.shape[1])
        share = np.divide(demand, top, out=np.where(demand > 0, np.inf, 0.0), where=top > 0)
        out = max(out, float(share.max()))
    return out
