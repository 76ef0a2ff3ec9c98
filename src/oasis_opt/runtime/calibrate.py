"""Plans at the speed the machine has now: a short real run that measures the slowdown to plan with.

A speed profile (``oasis-opt profile``) is measured once, at whatever load the machine had then,
and the contention model fitted on it (``costmodel.profile``) knows the slot's own containers
but nothing else that runs on the machine. A plan made from it is kept while the machine is as
it was when profiled; with other processes beside the jobs (on a shared cluster, always) every
chunk takes longer than planned, and a time-boxed closed loop cannot do a slot's planned work
(``paper_figs/testbed-real.md``: two busy processes on the 2 cores made the jobs 1.9-2.5x slower
than planned, and the closed loop earned 0-53 % of the plan).

``calibrate(profiles, slot_s=S)`` measures, just before planning, what the plan's chunk times
miss now:

1. small instances of the ``testbed-real`` preset from the same profiles (``CALIBRATION_RUNS``,
   not the fidelity study's seed 1), each scheduled by its policy and trained for real, open
   loop (every planned mini-batch), one after the other on the same pool. They cover the
   packings the policies give the preset's jobs: DRF on 4 jobs and 5 slots fills the cluster
   with two jobs of 2 workers and 1 PS side by side in every slot (10 job-slots, the full slot
   the chunk times are derived at); FIFO on 2 jobs and 4 slots runs one job of 4 workers and 2
   PSs alone in every slot (4 job-slots). The second packing is the one the model predicts
   worst: in the fidelity study's quiet runs a (4, 2) job alone took a median 1.16x the model's
   time (0.9 quantile 1.33) where a (2, 1) job in a full slot took 1.02x (1.19), so a
   calibration on full slots alone planned the first jobs of most schedules (alone on the
   cluster) too fast, and their completions moved a slot (``paper_figs/testbed-real.md``);
2. per executed job-slot, the real busy time over the chunk-time model's prediction (the
   report's ``chunk-time`` ratios, ``ExecutionReport``), pooled over the runs;
3. the slowdown to plan with is the ``quantile`` (default 0.9) of those ratios.

Planning with chunk times multiplied by it (``testbed_real(slowdown=c)``, ``oasis-opt generate
--slowdown C``) allots each slot the time its work takes in all but the slowest tenth of the
job-slots measured. Why a high quantile and not the median: a slot is paced (open loop: the
next one starts on the grid) or time-boxed (closed loop: no iteration starts after its end),
so work that takes *less* than planned costs nothing (the job waits for the next slot), while
work that takes more is late (open loop: the slot overruns; closed loop: the rest is carried
to the next slot, and a job's last slot moves). The margin is paid in the plan (fewer
mini-batches per slot, so the simulated utility is what the machine can deliver now), not in
broken promises. The external load enters as what it does to the chunk times, measured, not
modelled: two busy loops, a noisy neighbour or a slower machine all show in the ratios.

The runs are short (their 9 slots plus the warm-up of a pool that is not warm yet); a ``pool``
given is reused (its containers stay warm for the runs that follow).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

# (policy, seed, jobs, horizon) of each calibration run (module docstring, step 1)
CALIBRATION_RUNS = (("drf", 2, 4, 5),   # two (2, 1) jobs side by side in each of 5 slots
                    ("fifo", 2, 2, 4))  # one (4, 2) job alone in each of 4 slots
QUANTILE = 0.9


@dataclass(frozen=True)
class Calibration:
    """What ``calibrate`` measured: ``slowdown`` (the ``quantile`` of ``ratios``, the real
    busy time / the chunk-time model's prediction per executed job-slot), the 1-minute load
    average before and after the run, and the run's wall seconds."""

    slowdown: float
    quantile: float
    ratios: tuple[float, ...]
    load: tuple[float, float]
    wall_s: float
    meta: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"format": "oasis-opt/calibration@1", "slowdown": self.slowdown,
                "quantile": self.quantile, "ratios": list(self.ratios),
                "load": list(self.load), "wall_s": self.wall_s, "meta": dict(self.meta)}

    @classmethod
    def from_json(cls, doc) -> "Calibration":
        if not isinstance(doc, dict) or doc.get("format") != "oasis-opt/calibration@1":
            raise ValueError("calibration: not an oasis-opt/calibration@1 document")
        return cls(float(doc["slowdown"]), float(doc["quantile"]),
                   tuple(float(r) for r in doc["ratios"]),
                   (float(doc["load"][0]), float(doc["load"][1])), float(doc["wall_s"]),
                   dict(doc.get("meta", {})))


def slowdown_of(ratios: Sequence[float], quantile: float = QUANTILE) -> float:
    """The slowdown to plan with from busy / predicted ``ratios``: their ``quantile`` (linear
    interpolation, numpy's default). ``ValueError`` without a finite positive ratio or with a
    quantile outside (0, 1]."""
    if not (isinstance(quantile, (int, float)) and not isinstance(quantile, bool)
            and 0 < quantile <= 1):
        raise ValueError(f"quantile: expected a number in (0, 1], got {quantile!r}")
    r = np.asarray([x for x in ratios if x is not None and np.isfinite(x) and x > 0],
                   dtype=float)
    if not len(r):
        raise ValueError("ratios: no finite positive busy / predicted ratio to calibrate on "
                         "(the calibration run executed no job-slot)")
    return float(np.quantile(r, quantile))


def calibration_instances(profiles, *, slot_s: float) -> list[tuple[str, object]]:
    """The ``(policy, instance)`` runs ``calibrate`` trains (module docstring, step 1)."""
    from ..workloads.testbed_real import testbed_real

    return [(policy, testbed_real(seed, profiles=profiles, slot_s=slot_s, jobs=jobs,
                                  horizon=horizon))
            for policy, seed, jobs, horizon in CALIBRATION_RUNS]


def describe_runs() -> str:
    """The calibration runs in words, for progress lines: "DRF 4 jobs x 5 slots, ..."."""
    return ", ".join(f"{policy.upper()} {jobs} jobs x {horizon} slots"
                     for policy, _, jobs, horizon in CALIBRATION_RUNS)


def calibrate(profiles, *, slot_s: float, quantile: float = QUANTILE, pool=None,
              address: str | None = None) -> Calibration:
    """Measure the slowdown to plan the ``testbed-real`` preset with now (module docstring):
    a real open-loop run of each of ``calibration_instances`` under its policy, the ratios
    pooled; ``pool``/``address`` as ``execute``'s. ``meta["runs"]`` records per run its
    policy, instance fingerprint and job-slots measured."""
    from .. import solve
    from .executor import execute

    slowdown_of([1.0], quantile)  # the quantile checked before anything runs
    runs = calibration_instances(profiles, slot_s=slot_s)
    before = os.getloadavg()[0]
    t0 = time.perf_counter()
    ratios: list[float] = []
    done = []
    for (policy, inst), (_, seed, jobs, horizon) in zip(runs, CALIBRATION_RUNS):
        report = execute(inst, solve(inst, policy), slot_seconds=slot_s, pool=pool,
                         address=address)
        r = report.ratios("chunk-time")
        ratios += r
        done.append({"policy": policy, "seed": seed, "jobs": jobs, "horizon": horizon,
                     "instance_sha256": inst.fingerprint, "job_slots": len(r),
                     "ratios": list(r)})
    wall = time.perf_counter() - t0
    return Calibration(slowdown_of(ratios, quantile), float(quantile), tuple(ratios),
                       (before, os.getloadavg()[0]), wall,
                       {"instances_sha256": [d["instance_sha256"] for d in done],
                        "slot_s": slot_s, "runs": done})
