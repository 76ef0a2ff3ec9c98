"""Fig. 4 diagnosed: why the baselines land 8-31 slots past their targets here and 43-98 in the paper.

Fig. 4's median of (t_hat_i - a_i) - gamma3 over a class mixes two kinds of job. A completed job
contributes its real lateness. A job that never completes contributes T - a_i - gamma3 (the
convention the paper's RRH median of about 98 at T = 100 implies, A7). That second value does
not depend on the policy. Its median over the instance (column "nothing completes") is what a
policy that completes no job would score. So how far a baseline's median sits from the paper's
is mostly a question of how many jobs it completes, i.e. of the load.

The study reruns Fig. 4's baselines (same generator, 200 jobs, T = 100, 50 + 50 servers,
uniform arrivals, 50/50 time-sensitive/time-critical) on heavier variants of the workload:
more jobs (400, 800), and the paper's job sizes taken literally (A2, ``calibration="literal"``:
d_min median about 250 slots, so on T = 100 almost nothing can finish). For each it reports the
load factor (``model.load``), the completed share and both medians per class and policy.

:func:`compute` runs it (``experiments/fig4_load.py``; runs stored in ``results`` and reused when
rerun, ``experiments.runner``); ``oasis_opt.experiments.figures.fig4_load`` draws it.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..model.load import load_factor
from ..workloads import paper_sim
from .fig4 import workload
from .runner import run_sweep
from .spec import RunSpec

POLICIES = ("fifo", "drf", "rrh", "dorm")
CLASSES = ("time-critical", "time-sensitive")
# (label, calibration, jobs): Fig. 4 itself first, then heavier variants of its workload
VARIANTS = (("Fig. 4 (200 jobs)", "calibrated", 200), ("400 jobs", "calibrated", 400),
            ("800 jobs", "calibrated", 800), ("literal sizes, 200 jobs", "literal", 200))


def params(calibration: str, jobs: int, seed: int) -> dict:
    return {**workload(False), "calibration": calibration, "jobs": jobs, "seed": seed}


def instance_row(calibration: str, jobs: int, seeds) -> dict:
    """Load factor (mean over seeds) and, per class, the median of T - a_i - gamma3."""
    loads, never = [], {c: [] for c in CLASSES}
    for s in seeds:
        inst = paper_sim(**params(calibration, jobs, s))
        loads.append(load_factor(inst)[0])
        for job in inst.jobs:
            never[job.job_class].append(inst.horizon - job.arrival - job.utility.target)
    return {"load": float(np.mean(loads)),
            "never": {c: float(np.median(v)) for c, v in never.items()}}


def policy_row(records: list[dict]) -> dict:
    """Per class: completed count and total, median of completed jobs, median with the
    unfinished ones counted at T."""
    out = {}
    for c in CLASSES:
        done = [v for r in records for v in r["metrics"]["timeliness"]["completed"].get(c, [])]
        cens = [v for r in records for v in r["metrics"]["timeliness"]["censored"].get(c, [])]
        out[c] = {"completed": len(done), "jobs": len(done) + len(cens),
                  "median_completed": float(np.median(done)) if done else None,
                  "median_at_T": float(np.median(done + cens))}
    return out


def compute(seeds, results: Path, workers: int = 1) -> list[dict]:
    """One row per variant of :data:`VARIANTS`: its label, :func:`instance_row` and, per policy,
    :func:`policy_row` of its runs over ``seeds`` (stored in ``results`` and reused)."""
    specs = {(cal, jobs, p): [RunSpec("paper_sim", params(cal, jobs, s), p,
                                      metrics=("timeliness",), tags={"seed": s})
                              for s in seeds]
             for _, cal, jobs in VARIANTS for p in POLICIES}
    sweep = run_sweep([s for v in specs.values() for s in v], results,
                      workers=workers, desc="Fig. 4 load")
    table = []
    for label, cal, jobs in VARIANTS:
        row = {"label": label, **instance_row(cal, jobs, seeds)}
        for p in POLICIES:
            row[p] = policy_row([sweep.records[s.key] for s in specs[(cal, jobs, p)]])
        table.append(row)
    return table
