"""Field checks shared by the JSON readers and the constructors of the model's dataclasses.

One validation path for input however it arrives: ``Instance(...)`` built in code and
``load_instance`` of a file run the same checks, and a bad value raises ``FormatError`` naming
the field by its path in the instance document (``jobs[3].worker.bw``, ``ps_servers[0].id``).
Each check returns the value in canonical form (``int``, ``float``, ``dict``), so that an
instance built with numpy scalars or integer capacities writes the same bytes as one read back.
"""
from __future__ import annotations

import json
import math
from contextlib import contextmanager
from numbers import Integral, Real
from collections.abc import Mapping
from typing import Any, Iterator


class FormatError(ValueError):
    """Bad input: ``field`` is a dotted path into the document (``""`` for the whole of it)."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}" if field else message)
        self.field, self.message = field, message

    def within(self, prefix: str) -> "FormatError":
        """The same error, with its field read relative to ``prefix`` (``jobs[0].utility``)."""
        if not prefix:
            return self
        field = f"{prefix}.{self.field}" if self.field else prefix
        return type(self)(field, self.message)


@contextmanager
def within(prefix: str) -> Iterator[None]:
    """Re-raise a ``FormatError`` raised inside with its field under ``prefix``."""
    try:
        yield
    except FormatError as e:
        raise e.within(prefix) from None


def _shown(v: Any) -> str:
    try:
        return json.dumps(v)[:40]
    except (TypeError, ValueError):
        return f"{type(v).__name__} {v!r}"[:40]


def number(v: Any, path: str, *, minimum: float | None = 0.0, strict: bool = False) -> float:
    """A finite real number (not a bool), ``>= minimum`` (``> minimum`` if ``strict``)."""
    if type(v) is not float and (isinstance(v, bool) or not isinstance(v, Real)):
        raise FormatError(path, f"expected a number, got {_shown(v)}")
    v = float(v)
    if not math.isfinite(v):
        raise FormatError(path, f"must be finite, got {v}")
    if minimum is not None and (v <= minimum if strict else v < minimum):
        raise FormatError(path, f"must be {'>' if strict else '>='} {minimum:g}, got {v}")
    return v


def integer(v: Any, path: str, *, minimum: int | None = 0) -> int:
    """An integer (an integral float such as ``2.0`` counts; a bool does not), ``>= minimum``."""
    if type(v) is not int and (isinstance(v, bool) or not isinstance(v, Integral)):
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        else:
            raise FormatError(path, f"expected an integer, got {_shown(v)}")
    v = int(v)
    if minimum is not None and v < minimum:
        raise FormatError(path, f"must be >= {minimum}, got {v}")
    return v


def boolean(v: Any, path: str) -> bool:
    """``true`` or ``false`` (not 0 / 1)."""
    if not isinstance(v, bool):
        raise FormatError(path, f"expected true or false, got {_shown(v)}")
    return v


def text(v: Any, path: str) -> str:
    if not isinstance(v, str) or not v:
        raise FormatError(path, f"expected a non-empty string, got {_shown(v)}")
    return v


def optional_text(v: Any, path: str) -> str | None:
    return None if v is None else text(v, path)


def amounts(d: Any, resources: tuple[str, ...], path: str) -> dict[str, float]:
    """``{resource: amount >= 0}`` over known resources."""
    if type(d) is not dict and not isinstance(d, Mapping):
        raise FormatError(path, "expected an object {resource: amount}")
    out = {}
    for r, v in d.items():
        if r not in resources:
            raise FormatError(f"{path}.{r}", f"unknown resource (known: {', '.join(resources)})")
        out[r] = number(v, f"{path}.{r}")
    return out


def free_form(v: Any, path: str) -> dict:
    """A free-form object (provenance, meta, stats): JSON data whose numbers are finite."""
    if not isinstance(v, Mapping):
        raise FormatError(path, "expected an object")

    def check(x: Any, p: str) -> None:
        if x is None or type(x) in (str, bool, int):
            return
        if isinstance(x, float) and not math.isfinite(x):
            raise FormatError(p, f"must be finite, got {x}")
        if isinstance(x, Mapping):
            for k, y in x.items():
                if not isinstance(k, str):
                    raise FormatError(p, f"keys must be strings, got {k!r}")
                check(y, f"{p}.{k}")
        elif isinstance(x, (list, tuple)):
            for n, y in enumerate(x):
                check(y, f"{p}[{n}]")
        elif not (x is None or isinstance(x, (str, bool, int, float))):
            raise FormatError(p, f"expected JSON data, got {type(x).__name__}")

    check(v, path)
    return dict(v)


TASK_FIELDS = ("name", "config", "seed", "data_seed", "dataset")


def task(v: Any, path: str) -> dict:
    """A job's training task ``{"name", "config", "seed"?, "data_seed"?, "dataset"?}``: a
    non-empty name, a free-form config object, integer seeds >= 0, the digest of the dataset
    it trains on (``training.dataset``; text); the task registry checks name and config, the
    executor the dataset."""
    if not isinstance(v, Mapping):
        raise FormatError(path, "expected an object {\"name\", \"config\", \"seed\"?, "
                          "\"data_seed\"?, \"dataset\"?}")
    for key in v:
        if key not in TASK_FIELDS:
            raise FormatError(f"{path}.{key}", f"unknown field (known: {', '.join(TASK_FIELDS)})")
    for key in ("name", "config"):
        if key not in v:
            raise FormatError(f"{path}.{key}", "missing field")
    out: dict[str, Any] = {"name": text(v["name"], f"{path}.name"),
                           "config": free_form(v["config"], f"{path}.config")}
    for key in ("seed", "data_seed"):
        if key in v:
            out[key] = integer(v[key], f"{path}.{key}")
    if "dataset" in v:
        out["dataset"] = text(v["dataset"], f"{path}.dataset")
    return out


def choice(v: Any, options: tuple[str, ...], path: str, what: str) -> str:
    if v not in options:
        raise FormatError(path, f"unknown {what} {v!r} (known: {', '.join(options)})")
    return v
