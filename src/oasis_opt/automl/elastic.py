"""``automl-thesis-elastic``: resources follow the prediction (the thesis's "give promising
combinations more resources").

Trials are elastic jobs: the controller of ``automl.thesis`` (predict, calibrate, classify at
the rungs, stop the poor) sets each running trial's worker count from its class, within the
study's cap. **The rule** (``elastic_units``) sizes a trial when it starts and again at each of
its rung decisions (its class is new then); between them the trial keeps its size, so sizes
change only where the prediction does (a resize costs work in a cluster, see below). At each
plan (every slot in a cluster, every event in a replay) the trials due a size share
``capacity`` workers (at most the study's cap) less what the other running trials hold:

1. every running trial holds at least one worker (a trial is never starved while it runs);
2. **poor** trials are stopped by the controller at the rung that judged them (0 workers);
3. **promising** trials grow first: the workers above one per trial go to them by water-filling
   on expected improvement per predicted remaining second (``classify.water_fill``), each up to
   ``max_units`` (the trial job's data chunks N, constraint (3): more would add nothing);
4. trials not yet judged (before their first rung, or with no best to judge against) then grow
   to ``base`` workers, the size a fixed-size study gives every trial;
5. **uncertain** trials stay at one worker: lowered from ``base``, so the workers go to
   promising trials and to new ones;
6. what is left starts new trials in the study's order, ``base`` workers each (fewer when less
   is left).

So a promising trial never holds fewer workers than an uncertain one (both hold >= 1, uncertain
exactly 1), and the units planned never exceed ``capacity`` unless the running trials alone
(their kept sizes, one worker for each trial due a size) do, which a cluster study prevents: a
trial starts only into spare room under the cap, and a trial due a size gives back what it held
before it is sized again.

**Speed with w workers.** No free speed-up: the trial's speed comes from the cost model the
cluster study uses (``automl.cluster``: the paper's chunk-time model). An epoch is N x
worker-slots whatever w, so w workers finish it in N x / w slots and its GPU-hours do not
change: giving a trial more workers buys wall time, never GPU time, and nothing beyond N
workers. Changing a running trial's workers inside the cluster is a ``"resize"`` stop
(``model.preemption``): the trial loses its work since its last checkpoint and pays the
restart, so growing or shrinking a trial has the cost the preemption model charges. In a
replay (``automl.replay``: linear speed-up, an epoch's GPU-seconds independent of the units)
the same rule applies with no resize cost.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from .classify import POOR, PROMISING, UNCERTAIN, water_fill
from .thesis import ThesisController


def elastic_units(running: Sequence[int], classes: Mapping[int, str], gain: Mapping[int, float],
                  capacity: int, *, base: int, max_units: int) -> dict[int, int]:
    """Workers per running trial (rules 1-5 of the module docstring); ``classes`` holds the
    judged trials' classes (``promising`` / ``uncertain``; poor trials are no longer running),
    ``gain`` the promising trials' expected improvement per remaining second."""
    if base < 1 or max_units < base:
        raise ValueError(f"base: expected 1 <= base <= max_units ({max_units}), got {base!r}")
    if any(classes.get(t) == POOR for t in running):
        raise ValueError("running: a poor trial must be stopped, not given workers")
    units = {t: 1 for t in running}
    spare = capacity - len(units)
    promising = [t for t in running if classes.get(t) == PROMISING]
    extra = water_fill([gain[t] for t in promising], max(spare, 0),
                       [max_units - 1] * len(promising))
    for t, x in zip(promising, extra):
        units[t] += x
    spare -= sum(extra)
    for t in running:  # not yet judged: up to the fixed size
        if spare <= 0:
            break
        if classes.get(t) not in (PROMISING, UNCERTAIN):
            add = min(base - units[t], spare)
            units[t] += add
            spare -= add
    return units


class ElasticThesisController(ThesisController):
    """``automl-thesis`` whose classes set the trials' worker counts (module docstring);
    ``base`` is the size of a trial not yet judged and of a new one."""

    name = "automl-thesis-elastic"

    def __init__(self, base: int = 2, **options):
        super().__init__(**options)
        if isinstance(base, bool) or not isinstance(base, int) or not 1 <= base <= self.max_units:
            raise ValueError(f"base: expected an integer in 1..max_units ({self.max_units}), "
                             f"got {base!r}")
        self.base = base

    def reset(self, trials, workers, seed) -> None:
        super().reset(trials, workers, seed)
        self.size: dict[int, int] = {}  # running trial -> workers it was given
        self.due: set[int] = set()  # trials judged at a rung since they were sized
        self.counts["sized"] = 0

    def observe(self, trial, epoch, value, seconds, now) -> str:
        decisions = self.counts["decisions"]
        verdict = super().observe(trial, epoch, value, seconds, now)
        if self.counts["decisions"] > decisions:  # judged at a rung: size it again
            self.due.add(trial)
        return verdict

    def plan(self, running: Mapping[int, int], capacity: int, now: float):
        order = list(running)
        keep = {t: self.size[t] for t in order if t in self.size and t not in self.due}
        due = [t for t in order if t not in keep]
        classes = {t: self.cls[t] for t in due if t in self.cls and self.best is not None}
        gain = {t: self.gain_rate(t) for t, c in classes.items() if c == PROMISING}
        units = elastic_units(due, classes, gain, capacity - sum(keep.values()),
                              base=self.base, max_units=self.max_units)
        self.counts["sized"] += len(due)
        self.due.clear()
        units.update(keep)
        spare = capacity - sum(units.values())
        starts = []
        while spare > 0 and self.queue:
            t = self.queue.popleft()
            self.start_trial(t)
            starts.append(t)
            units[t] = min(self.base, spare)
            spare -= units[t]
        self.size = dict(units)
        self.counts["most_units"] = max(self.counts["most_units"], *units.values(), 1)
        seen = self.counts.setdefault("sized_by_class", {PROMISING: 0, UNCERTAIN: 0})
        for c in classes.values():
            seen[c] += 1
        return starts, units

    def stats(self) -> dict:
        return {**super().stats(), "base": self.base}
