"""PEP 562 lazy exports: a package names what its submodules define, and imports them on use.

``__getattr__, __dir__ = lazy_exports(globals(), {"Instance": ".model", ...})`` in a package's
``__init__`` makes ``package.Instance`` import ``.model`` on first access (then caches it in the
package), so importing the package itself stays cheap: ``import oasis_opt`` loads neither numpy
nor networkx, and ``import oasis_opt.offline`` neither Pyomo nor OR-Tools. Type checkers and
readers see the same names in an ``if TYPE_CHECKING:`` block of that ``__init__``.
"""
from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any, Callable, Mapping


class _Package(ModuleType):
    """A package whose lazy names include one spelled like its submodule (``workloads.testbed``
    the function, in ``workloads/testbed.py``). Importing that submodule makes the import system
    set the package's attribute to the *module*, which would hide the name for good (the
    package's ``__getattr__`` is asked only for missing attributes); here the name is bound to the
    submodule's object of that name instead, as an eager ``from .testbed import testbed`` leaves
    it. ``sys.modules`` still holds the submodule."""

    _shadowed: frozenset[str] = frozenset()

    def __setattr__(self, name: str, value: Any) -> None:
        if (name in self._shadowed and isinstance(value, ModuleType)
                and value.__name__ == f"{self.__name__}.{name}" and hasattr(value, name)):
            value = getattr(value, name)
        super().__setattr__(name, value)


def lazy_exports(namespace: dict[str, Any], exports: Mapping[str, str]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for the package whose ``globals()`` is ``namespace``.

    ``exports`` maps each exported name to the module (relative to the package, e.g.
    ``".model.io"``) that defines it under the same name.
    """
    package = namespace["__name__"]
    shadowed = frozenset(name for name, module in exports.items() if module == f".{name}")
    if shadowed and package in sys.modules:
        module_obj = sys.modules[package]
        module_obj.__class__ = type("_Package", (_Package,), {"_shadowed": shadowed})

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name], package), name)
        namespace[name] = value  # later lookups find it without calling __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
