"""``"module:attr"`` names, resolved on use: how a lower layer names something that lives above
it (the policy registry, placements, the simulator behind ``OnlinePolicy.solve``) without
importing it, so that imports go down the layers only and listing names imports nothing."""
from __future__ import annotations

import importlib
from typing import Any


def resolve(name: str) -> Any:
    """``"package.module:attr"`` -> that attribute, importing the module on first use."""
    module, sep, attr = name.partition(":")
    if not (sep and module and attr):
        raise ValueError(f"expected 'package.module:attr', got {name!r}")
    return getattr(importlib.import_module(module), attr)
