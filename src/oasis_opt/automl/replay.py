"""Replaying a study on recorded learning curves: the engine and the controller interface.

A study is every trial of a curve set, in an order drawn by the seed (a random search visits
its configurations in a random order), run on ``workers`` identical units (GPUs). A running
trial holds a whole number of units; with u units an epoch of s recorded seconds takes s / u
of wall time and s unit-seconds (linear speed-up, the paper's k workers = k worker-slots), so
**GPU-seconds of an epoch do not depend on the units**, only on which epochs are run. The
engine advances time to the next end of an epoch (several ending together are handled in the
study's order), and at each such event

1. tells the controller the epoch's validation accuracy (``observe``), which answers
   ``CONTINUE``, ``STOP`` (the trial ends for good) or ``PAUSE`` (it leaves its units and may be
   resumed later, from where it was: ASHA's rungs); a trial's last epoch completes it;
2. asks the controller for a ``plan``: trials to start or resume, and the units of every
   running trial (each >= 1, all together <= ``workers``: the study's resource cap; the same
   controllers run inside a cluster, ``automl.cluster``, where the room can be smaller).

``budget`` caps the GPU-seconds spent (summed over units): when it runs out in the middle of
epochs the study ends there (the unfinished epochs are lost), so the spend never exceeds it.
A controller may set a cap of its own the same way (``spend_cap``, read after every plan; the
lower of the two binds): it cannot know an epoch's seconds before the epoch ends, so only the
engine can stop a study exactly at a number of GPU-seconds.
Controllers never see the curves: only the configurations and epoch counts up front, then each
epoch's value and seconds as it ends. Everything is deterministic for a seed.

``ReplayResult.to_json()`` is the ``oasis-opt automl replay`` document (format
``oasis-opt/automl-replay@1``): the best final accuracy among trials run to their last epoch,
the GPU-seconds and wall seconds spent, per trial (by number; ``position`` in the study's order)
the epoch it stopped at and why, and the anytime
trajectory (GPU-seconds, wall seconds, best) at every completion that raised the best.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..model.numerics import NOISE_RTOL
from ..training.curves import Curve

CONTINUE, STOP, PAUSE = "continue", "stop", "pause"
VERDICTS = (CONTINUE, STOP, PAUSE)
FORMAT = "oasis-opt/automl-replay@1"
# status of a trial at the end of a replay
COMPLETED, STOPPED, PAUSED, CUT, NOT_STARTED = ("completed", "stopped", "paused", "cut by budget",
                                                "not started")
_TIME_RTOL = NOISE_RTOL


class ControllerError(RuntimeError):
    """A controller asked for something impossible (over the cap, an ended trial ...)."""


@dataclass(frozen=True)
class TrialInfo:
    """What a controller knows of a trial before it runs: its number, configuration, epochs."""

    trial: int
    config: Mapping[str, Any]
    epochs: int


class Controller:
    """The base controller, ``no-stop``: trials start in the study's order, one unit each, and
    run to their last epoch. Subclasses override ``observe`` (and ``plan``, ``start_trial``)."""

    name = "no-stop"

    def reset(self, trials: Sequence[TrialInfo], workers: int, seed: int) -> None:
        """Called once before the study: ``trials`` in the study's order."""
        self.trials = {t.trial: t for t in trials}
        self.queue: deque[int] = deque(t.trial for t in trials)
        self.workers = workers
        self.seed = seed

    def observe(self, trial: int, epoch: int, value: float, seconds: float, now: float) -> str:
        """Epoch ``epoch`` of ``trial`` ended at wall time ``now`` with validation accuracy
        ``value`` after ``seconds`` GPU-seconds; answer CONTINUE, STOP or PAUSE (ignored after
        the last epoch, which completes the trial)."""
        return CONTINUE

    def start_trial(self, trial: int) -> None:
        """Hook: ``trial`` (new) starts now."""

    def plan(self, running: Mapping[int, int], capacity: int,
             now: float) -> tuple[list[int], dict[int, int]]:
        """(trials to start or resume, units of every trial running after that), given the
        running trials' units and the units the study may hold now (``capacity``: the cap
        ``workers`` in a replay, less when a shared cluster has less room).

        Default: fill the free units with new trials from the queue, one unit each."""
        starts = []
        free = capacity - len(running)
        while free > 0 and self.queue:
            t = self.queue.popleft()
            self.start_trial(t)
            starts.append(t)
            free -= 1
        return starts, {t: 1 for t in [*running, *starts]}

    def spend_cap(self) -> float | None:
        """The most GPU-seconds the controller lets the study spend, read after every plan;
        epochs that would cross it are cut there and the study ends, as with ``budget``
        (None: no cap of its own)."""
        return None

    def close(self) -> None:
        """Called once after the study."""

    def why_none_completed(self) -> str | None:
        """After a study in which no trial reached its last epoch: why, in the controller's
        terms, when its rule explains it (None otherwise)."""
        return None

    def stats(self) -> dict:
        return {}


@dataclass
class ReplayResult:
    """What a replay did (see the module docstring)."""

    policy: str
    study: str
    seed: int
    workers: int
    budget_s: float | None
    best: float | None
    best_trial: int | None
    gpu_seconds: float
    wall_seconds: float
    total_gpu_seconds: float  # every trial to its last epoch: what no stopping would spend
    trials: list[dict]
    trajectory: list[tuple[float, float, float]]  # (GPU-seconds, wall seconds, best) on a rise
    stats: dict = field(default_factory=dict)

    def best_at(self, gpu_seconds: float) -> float | None:
        """Best final accuracy found within ``gpu_seconds`` (the anytime curve)."""
        out = None
        for spent, _, best in self.trajectory:
            if spent > gpu_seconds * (1 + _TIME_RTOL):
                break
            out = best
        return out

    def time_to(self, target: float, wall: bool = False) -> float:
        """GPU-seconds (or wall seconds) until the best reached ``target``; inf if never."""
        for spent, now, best in self.trajectory:
            if best >= target:
                return now if wall else spent
        return math.inf

    def to_json(self) -> dict:
        return {"format": FORMAT, "policy": self.policy, "study": self.study, "seed": self.seed,
                "workers": self.workers, "budget_s": self.budget_s,
                "best_val_accuracy": self.best, "best_trial": self.best_trial,
                "seconds_spent": self.gpu_seconds, "wall_seconds": self.wall_seconds,
                "seconds_without_stopping": self.total_gpu_seconds,
                "completed": sum(t["status"] == COMPLETED for t in self.trials),
                "trials": self.trials,
                "trajectory": [list(p) for p in self.trajectory], "stats": self.stats}


def study_order(n: int, seed: int) -> list[int]:
    """Positions 0..n-1 in the order the study with ``seed`` visits them."""
    return np.random.default_rng(np.random.SeedSequence([seed, 0x5EED])).permutation(n).tolist()


def one_study(curves: Sequence[Curve], study: str | None = None) -> list[Curve]:
    """The curves of one study: ``study``, or the only one present (ValueError otherwise)."""
    names = sorted({c.study for c in curves})
    if study is None:
        if len(names) != 1:
            raise ValueError(f"study: the curves hold {len(names)} studies "
                             f"({', '.join(names) or 'none'}); name one")
        study = names[0]
    chosen = [c for c in curves if c.study == study]
    if not chosen:
        raise ValueError(f"study: no study {study!r} in the curves (present: {', '.join(names)})")
    return chosen


def replay(curves: Sequence[Curve], controller: Controller, *, workers: int = 4,
           budget: float | None = None, seed: int = 0) -> ReplayResult:
    """Run ``controller`` on the study of ``curves`` (one study) with ``workers`` units."""
    curves = one_study(curves)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers: expected an integer >= 1, got {workers!r}")
    if budget is not None and not (budget >= 0 and math.isfinite(budget)):
        raise ValueError(f"budget: expected a finite number of seconds >= 0, got {budget!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed: expected an integer >= 0, got {seed!r}")
    by_id = {c.trial: c for c in curves}
    if len(by_id) != len(curves):
        raise ValueError("curves: a trial number appears twice in the study")
    order = [curves[p].trial for p in study_order(len(curves), seed)]
    rank = {t: n for n, t in enumerate(order)}
    done = dict.fromkeys(by_id, 0)  # epochs completed
    into = dict.fromkeys(by_id, 0.0)  # GPU-seconds into the current epoch
    status = dict.fromkeys(by_id, NOT_STARTED)
    running: dict[int, int] = {}
    now = spent = 0.0
    best: float | None = None
    best_trial: int | None = None
    trajectory: list[tuple[float, float, float]] = []
    controller.reset([TrialInfo(t, by_id[t].config, by_id[t].epochs) for t in order], workers,
                     seed)

    def apply(plan) -> None:
        starts, units = plan
        for t in starts:
            if t not in by_id:
                raise ControllerError(f"{controller.name}: start of unknown trial {t}")
            if t in running or status[t] not in (NOT_STARTED, PAUSED):
                raise ControllerError(f"{controller.name}: start of trial {t}, which is "
                                      f"{'running' if t in running else status[t]}")
            running[t] = 0
            status[t] = "running"
        if set(units) != set(running):
            raise ControllerError(f"{controller.name}: units given for trials "
                                  f"{sorted(units, key=rank.get)}, running are "
                                  f"{sorted(running, key=rank.get)}")
        if any(isinstance(u, bool) or not isinstance(u, int) or u < 1 for u in units.values()):
            raise ControllerError(f"{controller.name}: every running trial needs a whole "
                                  f"number >= 1 of units, got {units}")
        if sum(units.values()) > workers:
            raise ControllerError(f"{controller.name}: {sum(units.values())} units asked, the "
                                  f"cap is {workers}")
        running.update(units)

    def limit() -> float | None:
        """The binding cap on the spend: the budget or the controller's, the lower."""
        own = controller.spend_cap()
        return own if budget is None else budget if own is None else min(budget, own)

    apply(controller.plan(dict(running), workers, now))
    cut = capped = False
    while running:
        # next end of an epoch: trial t needs (s - into) GPU-seconds at running[t] per second
        left = {t: (by_id[t].seconds[done[t]] - into[t]) / u for t, u in running.items()}
        dt = max(min(left.values()), 0.0)
        rate = sum(running.values())
        cap = limit()
        if cap is not None and spent + dt * rate > cap * (1 + _TIME_RTOL):
            dt = max((cap - spent) / rate, 0.0)
            for t, u in running.items():
                into[t] += dt * u
            spent, now = max(cap, spent), now + dt
            cut = budget is not None and cap >= budget
            capped = not cut
            break
        now += dt
        spent += dt * rate
        ended = sorted((t for t in running if left[t] <= dt + _TIME_RTOL * max(dt, 1.0)),
                       key=rank.get)
        for t, u in running.items():
            into[t] += dt * u
        for t in ended:
            into[t] = 0.0
            done[t] += 1
            c = by_id[t]
            verdict = controller.observe(t, done[t], c.val_accuracy[done[t] - 1],
                                         c.seconds[done[t] - 1], now)
            if verdict not in VERDICTS:
                raise ControllerError(f"{controller.name}: observe returned {verdict!r} "
                                      f"(expected one of {', '.join(VERDICTS)})")
            if done[t] == c.epochs:
                del running[t]
                status[t] = COMPLETED
                final = c.val_accuracy[-1]
                if best is None or final > best:
                    best, best_trial = final, t
                    trajectory.append((spent, now, final))
            elif verdict != CONTINUE:
                del running[t]
                status[t] = STOPPED if verdict == STOP else PAUSED
        apply(controller.plan(dict(running), workers, now))
    for t in running:
        status[t] = CUT
    controller.close()
    trials = [{"trial": t, "position": rank[t], "epochs": by_id[t].epochs,
               "stopped_at_epoch": done[t], "status": status[t]} for t in sorted(by_id)]
    return ReplayResult(controller.name, curves[0].study, seed, workers, budget, best,
                        best_trial, spent, now, float(sum(math.fsum(c.seconds) for c in curves)),
                        trials, trajectory, {"budget_exhausted": cut,
                                             **({"spend_cap_reached": True} if capped else {}),
                                             **controller.stats()})
