"""Optional dependencies: import one, or fail with one line naming the extra that provides it.

The core install (numpy, scipy, networkx, highspy, tqdm) runs the model, OASiS with the numpy
backend, the baselines, the simulator and the HiGHS MILP/LP. Everything else is an extra of
``pyproject.toml``; code that needs one imports it through :func:`require`, so a user without it
reads, e.g., ``the 'jax' backend needs jax: install oasis-opt[jax]`` instead of a traceback.
The CLI reports :class:`MissingExtra` as bad input (exit 2). Standard library only.
"""
from __future__ import annotations

import importlib
from types import ModuleType


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message names the extra that installs it."""

    def __init__(self, module: str, extra: str, feature: str, cause: str = ""):
        because = f" ({cause})" if cause else ""
        super().__init__(f"{feature} needs {module.split('.')[0]}{because}: "
                         f"install oasis-opt[{extra}]", name=module)
        self.module, self.extra, self.feature = module, extra, feature


def require(module: str, *, extra: str, feature: str | None = None) -> ModuleType:
    """``import module``, or raise :class:`MissingExtra` naming ``extra``.

    ``feature`` says what needed it ("the 'jax' backend", "policy offline-cpsat"); default: the
    module. Any ImportError while importing it counts (a broken install of the extra, e.g. an
    ortools whose protobuf is the wrong version, is fixed by the same install command).
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        # the module itself (or its package) is absent: say only that; anything else missing
        # underneath it (a broken install) is worth quoting
        itself = e.name is not None and (module + ".").startswith(e.name + ".")
        raise MissingExtra(module, extra, feature or module, "" if itself else str(e)) from None
