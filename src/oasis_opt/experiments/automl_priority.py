"""The study's trials as jobs of the priority scheduler, beside the other jobs of the cluster.

``automl.cluster`` builds the instance (the other jobs plus one job per trial, each trial of job
type ``automl``) and drives the study (``StudyDriver``: the controller, the epochs, the best);
``cluster.priority`` schedules every job. This module composes the two (``automl`` and
``cluster`` sit side by side in the import graph, so the composition lives here).

**The policy** (``StudyPriority``, ``priority-degrade`` at its defaults), each slot:

1. *Room.* The study may hold ``capacity`` = min(cap, GPUs its trials hold + one-GPU trials
   that still fit once the waiting other jobs are placed, first in arrival order at their
   fixed worker counts): the other jobs come first on free servers, as in ``automl.cluster``.
2. *Plan.* The controller's plan (``StudyDriver.plan``) sets each running trial's worker count
   k_trial (the priority scheduler's k_i; 0 for trials not running: never started, stopped,
   paused or completed). A fixed-size study (``size`` s) gives every trial s workers; the
   elastic controller (``automl.elastic``) sets them from the trials' classes. A trial holding
   more workers than planned, or fewer than planned where more would help, is **resized**: a
   ``"resize"`` stop (``model.preemption``: it loses its work since its last checkpoint and pays
   the restart) and it is placed again at its new size.
3. *Priority.* ``PriorityPolicy.allocate`` visits the jobs by priority: trials have job type
   ``automl`` (type term 0.3 against 1.0 for production jobs), so a production job that does not
   fit preempts (or degrades, on a cluster with a CPU mode) trials before production jobs, under
   the scheduler's delta rule and per-slot cap. Trials never preempt: the study takes free room
   only (its cap and its controller size it).
4. After the slot each running trial's workers are what it held; ``StudyDriver.slot_end`` tells
   the controller the epochs that ended, and stopped, paused and completed trials give their
   containers back.

So the study's GPUs never exceed its cap: the planned workers never do (a trial starts only into
spare room), a trial is placed at most at its planned size, and a degraded trial holds CPU-mode
servers only. ``run_priority_study`` validates the schedule (``oasis_opt.validate``) and adds
the trials' preemptions, degradations and resizes to the ``ClusterStudy``.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..automl.cluster import ClusterStudy, StudyDriver
from ..automl.replay import Controller
from ..cluster.priority import PriorityPolicy
from ..model import Instance
from ..model.numerics import useful_workers
from ..model.schedule import WORKER
from ..sim.core import simulate
from ..sim.placement import apply
from ..training.curves import Curve


def _workers(rows) -> int:
    return sum(n for _, role, n in rows if role == WORKER)


class StudyPriority(PriorityPolicy):
    """The priority scheduler with the study's trials sized by its controller (module
    docstring); ``cap`` is the study's cap in GPUs, ``preempt_cap`` the scheduler's per-slot
    preemption cap (``PriorityPolicy``'s ``cap``), ``options`` its other options."""

    name, mode = "automl-study-priority", "degrade"

    def __init__(self, controller: Controller, curves: Sequence[Curve], *, cap: int | None = None,
                 size: int = 1, seed: int = 0, preempt_cap: float = 0.25, **options):
        super().__init__(seed=seed, cap=preempt_cap, **options)
        self.study = StudyDriver(controller, curves, cap=cap, seed=seed, size=size)

    def start(self, instance, state) -> None:
        super().start(instance, state)
        self.study.start(instance)
        self.trial_job = np.zeros(instance.I, dtype=bool)
        self.trial_job[list(self.study.trial_of)] = True
        self.k[self.trial_job] = 0  # no trial runs until the controller starts it
        self.resizes = 0

    def may_preempt(self, a, b, prio, degraded) -> bool:
        return not self.trial_job[a] and super().may_preempt(a, b, prio, degraded)

    def _trial_gpus(self, degraded) -> int:
        return sum(_workers(self.held[j]) for j in self.study.trial_of
                   if j in self.held and not degraded[j])

    def _room(self, t, state, limit: int) -> int:
        """One-GPU trials that fit once the waiting other jobs are placed (arrival order)."""
        inst = self.instance
        free = self._released(inst.capacity, [])
        for j, rows in self.held.items():
            apply(inst, j, rows, free)
        for j in state.active().tolist():
            if self.trial_job[j] or j in self.held:
                continue
            k = min(int(self.k[j]), useful_workers(state.remaining[j], int(inst.max_speed[j])))
            rows = self.place_gpu(j, k, free) if k > 0 else None
            if rows is not None:
                apply(inst, j, rows, free)
        job, n = self.study.jobs.first, 0
        while n < limit:
            rows = self.place_gpu(job, 1, free)
            if rows is None:
                break
            apply(inst, job, rows, free)
            n += 1
        return n

    def allocate(self, t, state):
        inst, study = self.instance, self.study
        degraded = state.degraded
        held = self._trial_gpus(degraded)
        capacity = min(study.cap_units, held + self._room(t, state, study.cap_units - held))
        want = study.plan(capacity, t)
        for trial, w in want.items():
            j = study.job_of[trial]
            w = min(w, int(inst.chunks[j]))
            self.k[j] = w
            if j not in self.held or degraded[j]:
                continue
            have = _workers(self.held[j])
            useful = useful_workers(state.remaining[j], int(inst.max_speed[j]))
            if have > w or have < min(w, useful):
                if state.last_ran[j] == t - 1:
                    state.stop(j, "resize")
                    self.resizes += 1
                del self.held[j]
        yield from super().allocate(t, state)

    def on_slot_end(self, t, state, completed) -> None:
        super().on_slot_end(t, state, completed)
        study = self.study
        for trial in study.units:
            j = study.job_of[trial]
            study.units[trial] = _workers(self.held.get(j, []))
        for j in study.slot_end(t, state, set(completed.tolist())):
            self.held.pop(j, None)
            self.k[j] = 0

    def stats(self) -> dict:
        return {**super().stats(), **self.study.stats(), "resizes": self.resizes}


def trial_stops(instance: Instance, schedule, first: int) -> dict[str, int]:
    """The trials' preemptions, degradations and resizes, from the schedule's preemption
    record (jobs ``first`` .. end are the trials)."""
    counts = ((schedule.stats or {}).get("preemption") or {}).get("jobs") or {}
    return {k: int(sum(counts.get(k, [])[first:])) for k in ("preemptions", "degradations",
                                                             "resizes")}


def run_priority_study(instance: Instance, curves: Sequence[Curve], controller: Controller, *,
                       cap: int | None = None, size: int = 1, seed: int = 0,
                       **options) -> ClusterStudy:
    """Simulate ``instance`` (from ``automl.cluster.study_instance``) under ``StudyPriority``;
    the schedule is checked by ``model.validate`` (``InvalidSchedule`` if it fails); ``stats``
    carries the trials' stops (``trial_stops``) and the scheduler's."""
    from ..model.validate import assert_valid

    policy = StudyPriority(controller, curves, cap=cap, size=size, seed=seed, **options)
    schedule = simulate(instance, policy)
    assert_valid(instance, schedule)
    result = policy.study.result(instance, schedule, schedule.stats)
    result.stats = {**result.stats, "trial_stops": trial_stops(instance, schedule,
                                                                policy.study.jobs.first)}
    return result
