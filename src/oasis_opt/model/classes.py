"""A job's user class: who it runs for, read from its provenance (``provenance.user_class``).

The class is the job's priority **band** (high 2, mid 1, low 0, as Borg's bands) and its user term
in the priority of ``cluster.priority``; the preemption metrics of ``sim.preemption`` report per
class. A job without a class takes it from its utility class (time-critical high, time-sensitive
mid, time-insensitive low; none: mid).
"""
from __future__ import annotations

from typing import Any

USER_CLASSES: dict[str, tuple[int, float]] = {"high": (2, 1.0), "mid": (1, 0.5), "low": (0, 0.0)}
"""user class -> (band, user priority)."""
CLASS_OF_UTILITY = {"time-critical": "high", "time-sensitive": "mid", "time-insensitive": "low"}
"""The class of a job that names none, by its utility class (``Job.job_class``)."""


def user_class(job: Any) -> str:
    """The job's user class (module docstring); ValueError naming the field if unknown."""
    cls = (job.provenance or {}).get("user_class")
    if cls is None:
        return CLASS_OF_UTILITY.get(job.job_class or "", "mid")
    if cls not in USER_CLASSES:
        raise ValueError(f"jobs[{job.id}].provenance.user_class: unknown class {cls!r} "
                         f"(known: {', '.join(USER_CLASSES)})")
    return str(cls)
