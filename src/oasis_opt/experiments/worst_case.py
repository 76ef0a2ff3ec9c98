"""Worst cases of OPT / OASiS: a seeded hill-climb over small, MILP-exact instances.

Theorem 4 bounds OPT / OASiS by 2 alpha for every instance; what a theory reader asks first is
how close any instance comes. :func:`hill_climb` starts from an instance and, for ``steps``
steps, applies one random local change (:func:`mutate`), evaluates the change by
``experiments.ratio.ratio_row`` (the exact MILP, no time limit, so every OPT is proven; OASiS
under a fixed ``pricing``) and keeps it when the ratio does not decrease. Hence the returned
instance's ratio is at least the start's, and the same (start, pricing, steps, seed) gives the
same instance (``numpy.random.default_rng(seed)``; the MILP's optimum and OASiS are
deterministic). A ratio of ``inf`` (OASiS earns 0, OPT does not) cannot be beaten: the climb
stops there.

The changes stay inside the ranges of the generator the start came from (``paper_fig5``):

* ``arrival``: one job's arrival slot redrawn in 1..T;
* ``size``: one job's epochs doubled or halved (rounded up), within 1..``max_epochs``;
* ``utility``: one job's gamma1 redrawn in the instance's priority range, or its target gamma3
  in the generator's [1, 15] (a constant utility: its value redrawn in the priority range);
* ``order``: two jobs exchange their arrival slots and their places in the instance (the
  instance order breaks ties between jobs arriving in the same slot).

The pricing is fixed before the search (e.g. the plug-in estimate on the workload's history):
the search plays an adversary against a rule, not against constants fitted to its instance.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

MUTATIONS = ("arrival", "size", "utility", "order")


def ratio_key(row: dict) -> float:
    """The exact ratio of a ``ratio_row`` (``inf`` when OASiS earns 0 and OPT does not)."""
    if row["opt"]["method"] != "milp":
        raise ValueError(f"instance {row['instance']!r}: OPT not proven, the search needs an "
                         "exact MILP (use smaller instances)")
    value = row["ratio"]["value"]
    return math.inf if value is None else float(value)


def mutate(instance: Any, rng: np.random.Generator, *, max_epochs: int = 200,
           priority: Sequence[float] | None = None) -> tuple[Any, str]:
    """One random change of the module docstring: (new instance, its description).

    ``priority``: the gamma1 range (default the instance's ``meta["priority"]``).
    """
    from ..workloads.paper import TARGET_RANGE

    jobs = list(instance.jobs)
    lo, hi = priority if priority is not None else instance.meta["priority"]
    kind = MUTATIONS[int(rng.integers(len(MUTATIONS)))]
    n = int(rng.integers(len(jobs)))
    job = jobs[n]
    if kind == "arrival":
        a = int(rng.integers(1, instance.horizon + 1))
        jobs[n] = dataclasses.replace(job, arrival=a)
        what = f"{job.id} arrives at {a} (was {job.arrival})"
    elif kind == "size":
        e = min(max_epochs, job.epochs * 2) if rng.random() < 0.5 else -(-job.epochs // 2)
        jobs[n] = dataclasses.replace(job, epochs=e)
        what = f"{job.id} epochs {e} (was {job.epochs})"
    elif kind == "utility":
        u = job.utility
        if u.kind == "constant":  # its one parameter, drawn in the priority range
            rng.random()  # the draw a sigmoid spends on choosing gamma1 or gamma3
            new = dataclasses.replace(u, value=float(rng.uniform(lo, hi)))
            what = f"{job.id} value {new.value:.4g} (was {u.value:.4g})"
        elif rng.random() < 0.5:
            new = dataclasses.replace(u, priority=float(rng.uniform(lo, hi)))
            what = f"{job.id} gamma1 {new.priority:.4g} (was {u.priority:.4g})"
        else:
            new = dataclasses.replace(u, target=float(rng.uniform(*TARGET_RANGE)))
            what = f"{job.id} gamma3 {new.target:.4g} (was {u.target:.4g})"
        jobs[n] = dataclasses.replace(job, utility=new)
    else:
        m = (n + 1 + int(rng.integers(max(1, len(jobs) - 1)))) % len(jobs)  # m != n
        other = jobs[m]
        jobs[n] = dataclasses.replace(other, arrival=job.arrival)
        jobs[m] = dataclasses.replace(job, arrival=other.arrival)
        what = f"{job.id} and {other.id} swap arrivals and places"
    return dataclasses.replace(instance, jobs=tuple(jobs)), f"{kind}: {what}"


@dataclass(frozen=True)
class SearchResult:
    """The start, the worst instance found and their ``ratio_row``s; ``trace``: the current
    ratio after each step (non-decreasing); ``accepted``: the changes kept, in order."""

    start: Any
    start_row: dict
    best: Any
    best_row: dict
    seed: int
    steps: int
    trace: tuple[float, ...]
    accepted: tuple[str, ...]

    @property
    def ratio(self) -> float:
        return ratio_key(self.best_row)


def hill_climb(start: Any, pricing: Any, *, steps: int, seed: int, max_epochs: int = 200,
               priority: Sequence[float] | None = None, name: str = "",
               progress: bool = False) -> SearchResult:
    """Maximise OPT / OASiS from ``start`` under the fixed ``pricing`` (module docstring).

    Every instance tried is solved exactly (``ratio_row(opt="milp")`` without a time limit):
    keep ``start`` small enough for that. ``priority``: the utility range of :func:`mutate`.
    """
    from tqdm import tqdm

    from .ratio import ratio_row

    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps: must be an integer >= 0, got {steps!r}")
    rng = np.random.default_rng(seed)
    current = start
    first = row = ratio_row(start, pricing, opt="milp", name=name)
    best = ratio_key(row)
    trace, accepted = [], []
    with tqdm(range(steps), desc=f"worst case {name or ''}".strip(), unit="step",
              disable=not progress, leave=False) as bar:
        for _ in bar:
            if best == math.inf:
                break
            cand, what = mutate(current, rng, max_epochs=max_epochs, priority=priority)
            cand_row = ratio_row(cand, pricing, opt="milp", name=name)
            if ratio_key(cand_row) >= best:
                current, row, best = cand, cand_row, ratio_key(cand_row)
                accepted.append(what)
            trace.append(best)
            bar.set_postfix(ratio=f"{best:.3f}")
    return SearchResult(start, first, current, row, seed, steps, tuple(trace), tuple(accepted))
