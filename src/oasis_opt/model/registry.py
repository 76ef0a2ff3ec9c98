"""``"module:attr"`` names, resolved on use: how a lower layer names something that lives above
it (the policy registry, placements, the simulator behind ``OnlinePolicy.solve``) without
importing it, so that imports go down the layers only and listing names imports nothing."""
from __future__ import annotations

import importlib
from typing import Any


# The cost model above the model (``oasis_opt.costmodel``): what the schedule, the validator and
# the preemption ledger read of it, by name, so that ``model`` imports nothing of the package.
PLACEMENT_PROGRESS = "oasis_opt.costmodel.placement:placement_progress"
"""Placement-aware progress per (job, slot) of an allocation (``instance.progress == "placement"``)."""
PLACEMENT_WORK_REMAINING = "oasis_opt.costmodel.placement:placement_work_remaining"
"""Placement-aware worker-slots done and left per job."""
PREEMPTION_COSTS = "oasis_opt.costmodel.preemption:preemption_costs"
"""Checkpoint and restart slots per job."""
RESTART_SHARE = "oasis_opt.costmodel.preemption:restart_share"
"""The share of a slot's progress a restarting job keeps."""


def resolve(name: str) -> Any:
    """``"package.module:attr"`` -> that attribute, importing the module on first use."""
    module, sep, attr = name.partition(":")
    if not (sep and module and attr):
        raise ValueError(f"expected 'package.module:attr', got {name!r}")
    return getattr(importlib.import_module(module), attr)
