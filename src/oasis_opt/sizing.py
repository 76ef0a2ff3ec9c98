"""The work an instance asks of a policy, estimated before running it, and the limits beyond which
``oasis_opt.solve`` and the command line refuse (instead of crashing or running for hours).

* **Work** = T x (H + K) x max(I, 1) slot-server-jobs per run: the slot loop visits every server
  for the running jobs, and OASiS's dual subroutine scans every slot after a job's arrival on
  every server. It bounds the time rather than predicts it: ``benchmarks/bench_work_estimate.py``
  measures greedy at about 10^7 to 10^8 of them a second and OASiS at 3 x 10^6 to 1.5 x 10^7
  (``benchmarks/results/work_estimate.md``), so the default limit ``DEFAULT_MAX_WORK`` = 10^10
  is minutes to about an hour of one core. A larger ``max_work`` runs anyway.
* **Memory**: every (T + 1)-row table a run holds, 8 bytes a cell: the validator's
  (T+1) x (H+K) x R capacity account and three (T+1) x I job tables, and the policy family's own
  (OASiS keeps ``DENSE_TABLES["oasis"]`` = 6 price, use and free tables of (T+1) x (H+K) x R).
  A run that needs more than the machine's physical memory is refused whatever ``max_work``
  says: it would be killed by the system, not finish late.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from .model.checks import FormatError

if TYPE_CHECKING:
    from .model import Instance

DEFAULT_MAX_WORK = 1e10
# (T+1) x (H+K) x R float tables a policy family keeps besides the validator's one
DENSE_TABLES = {"oasis": 6, "oasis-topo": 6}


class TooMuchWork(FormatError):
    """The estimate exceeds a limit: ``field`` is ``max_work`` or ``memory``."""


@dataclass(frozen=True)
class WorkEstimate:
    """Sizes of the instances a job runs on and what they ask: ``work`` slot-server-jobs over all
    ``runs`` (e.g. every floor of a calibration grid), ``memory_bytes`` for the largest run."""

    sizes: tuple[tuple[int, int, int, int], ...]  # (T, H + K, I, R) per instance
    tables: int = 0
    runs: int = 1

    @property
    def work(self) -> float:
        return float(self.runs * sum(T * S * max(I, 1) for T, S, I, _ in self.sizes))

    @property
    def memory_bytes(self) -> float:
        return float(max((8 * (T + 1) * (S * R * (1 + self.tables) + 3 * I)
                          for T, S, I, R in self.sizes), default=0))

    def describe(self) -> str:
        if len(self.sizes) == 1 and self.runs == 1:
            T, S, I, _ = self.sizes[0]
            return f"T x (H + K) x I = {T} x {S} x {max(I, 1)} = {self.work:.3g} slot-server-jobs"
        return (f"{self.runs} run(s) on each of {len(self.sizes)} instance(s): "
                f"{self.work:.3g} slot-server-jobs")


def estimate_work(instances: Instance | Iterable[Instance], policy: str | None = None,
                  runs: int = 1) -> WorkEstimate:
    """The estimate for ``runs`` runs of ``policy`` (None: any policy; the validator's tables
    only) on each of ``instances`` (one ``Instance`` or several)."""
    if not isinstance(instances, Iterable):
        instances = [instances]
    sizes = tuple((i.horizon, i.H + i.K, i.I, i.R) for i in instances)
    return WorkEstimate(sizes, DENSE_TABLES.get(policy or "", 0), runs)


def physical_memory() -> float | None:
    """Bytes of physical memory, or None where the system does not say."""
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def check_work(estimate: WorkEstimate, max_work: float | None = DEFAULT_MAX_WORK) -> None:
    """Raise ``TooMuchWork`` when ``estimate`` exceeds ``max_work`` (None: no limit) or the
    machine's memory."""
    if max_work is not None and estimate.work > max_work:
        raise TooMuchWork("max_work", f"{estimate.describe()} exceeds the limit {max_work:.3g}"
                          f"{' (minutes to an hour of computing)' if max_work == DEFAULT_MAX_WORK else ''}"
                          "; raise the limit to run it anyway")
    memory = physical_memory()
    if memory is not None and estimate.memory_bytes > memory:
        raise TooMuchWork("memory", f"needs about {estimate.memory_bytes / 2**30:.3g} GiB for its "
                          "(T + 1)-slot tables, more than this machine's "
                          f"{memory / 2**30:.3g} GiB; shorten the horizon or use fewer servers")
