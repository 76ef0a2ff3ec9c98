"""The traces an instance is built from by name (``oasis-opt generate --trace NAME``), resolved
lazily so that listing them imports nothing.

``TRACES`` maps each name to ``"module:attribute"`` of its loader (a function returning an
``Instance``) and a one-line summary. A new trace is its own module in ``workloads`` and one line
here.
"""
from __future__ import annotations

from typing import Any, Callable

TRACES: dict[str, tuple[str, str]] = {
    "philly": ("oasis_opt.workloads.philly:philly_instance",
               "Microsoft Philly (2017): the jobs of a submission window, one worker per GPU"),
    "gavel": ("oasis_opt.workloads.gavel:gavel_instance",
              "a Gavel trace (its dev trace shipped) on a V100/P100/K80 cluster"),
}


def available_traces() -> dict[str, str]:
    """Name -> one-line summary, in registration order."""
    return {name: summary for name, (_, summary) in TRACES.items()}


def trace_loader(name: str) -> Callable[..., Any]:
    """The loader registered as ``name``, imported but not called."""
    from ..model.registry import resolve

    if name not in TRACES:
        raise ValueError(f"trace: unknown trace {name!r} (known: {', '.join(TRACES)})")
    return resolve(TRACES[name][0])
