"""The study inside a shared cluster: its trials are jobs of the simulator beside other jobs.

**Trials as jobs** (``study_instance``). Trial t of the curve set becomes a job of E_t epochs
(its curve's) of the paper's model: N = ``max_units`` data chunks per epoch (so at most that many
workers, constraint (3)), each chunk M = ceil(``minibatches_per_epoch`` / N) mini-batches, and a
chunk time from the cost model (``costmodel.chunktime``), x = M (tau_t + 2 e / b) / slot, with e
and tau of the model the study stands for (``model``, default ResNet-18 on CIFAR-10 as
``costmodel.models`` has it: 44.7 MB, 0.06 s per mini-batch), tau_t scaled by the trial's
recorded mean epoch seconds over the study's median (wider, deeper, smaller batches cost
more), and b the worker bandwidth of the trace jobs. A worker is one GPU with the trace jobs'
demands (``workloads.traces.WORKER_DEMAND``), one PS serves 4 workers. Every trial arrives with
the study in slot ``arrival`` and is admitted; the controller decides when it runs. An epoch is
N x worker-slots; a trial whose controller stops it is an admitted job that never completes
(utility 0: trials carry the constant utility 0, the study is judged by its own metrics).
Trials carry ``provenance.job_type`` = ``automl`` (``cluster.priority``'s job types: a priority
scheduler preempts them before production jobs; ``experiments.automl_priority``).

**The policy** (``StudyInCluster``), each slot:

1. background jobs (everything that is not a trial) start in arrival order on the room left,
   each with all its N_i workers at once and its PSs, first fit; one that does not fit waits
   while later ones may start (backfilling); a started job holds its containers until it
   completes (rigid trace jobs, no preemption);
2. the study's controller (any of ``automl.controllers``) plans with ``capacity`` = the units
   it holds plus the one-GPU trials that still fit, at most the study's ``cap`` of GPUs; new
   trials are placed first fit with one worker, a trial whose units change is re-placed; a
   trial that finds no room waits (0 units) and is tried again next slot;
3. after the slot, each trial's epochs done are its worker-slots / (N x) (its last epoch when
   the simulator completes it); each newly ended epoch is told to the controller (``now`` =
   slot x slot length); a stopped or paused trial gives its containers back at once, so the
   next slot's background jobs can use them. A trial is completed when the controller has been
   told its last epoch: one that the controller paused or stopped at a rung in the slot in
   which it also ran to its end (several epochs can end in one slot) is paused or stopped, and
   a paused one resumed later is told its remaining epochs at once (its job is done).

``StudyDriver`` is the study's side of this (controller, epochs, best), shared with the study
under the priority scheduler (``experiments.automl_priority``).

So background jobs have priority on free servers but never preempt a trial, and the cap is what
keeps a study from filling the cluster before later jobs arrive. ``run_study`` returns the
validated schedule and the metrics: the best final accuracy found against the study's
GPU-hours (at every completion that raised it), the background jobs' completion times.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np

from ..costmodel.chunktime import chunk_time, provenance
from ..costmodel.models import get_model
from ..model import Instance, Job, Utility
from ..model.policy import OnlinePolicy
from ..sim.core import simulate
from ..sim.placement import FirstFit, apply, free_after
from ..workloads.traces import PS_DEMAND, WORKER_DEMAND, WORKERS_PER_PS
from ..model.numerics import DIVISOR_FLOOR, NOISE_RTOL, WORK_EPS
from ..training.curves import Curve
from .replay import CONTINUE, STOP, VERDICTS, Controller, ControllerError, TrialInfo, \
    one_study, study_order

TRIAL_PREFIX = "trial-"
EPOCH_EPS = WORK_EPS


@dataclass(frozen=True)
class TrialJobs:
    """Which jobs of an instance are the study's trials (``first`` .. end), and per trial its
    curve's trial number and the worker-slots of one epoch."""

    first: int
    trials: tuple[int, ...]
    epoch_work: tuple[float, ...]


def study_instance(curves: Sequence[Curve], background: Instance, *, model: str = "cifar10",
                   minibatches_per_epoch: int = 392, max_units: int = 4, arrival: int = 1,
                   horizon: int | None = None) -> Instance:
    """``background``'s servers and jobs plus one job per trial of ``curves`` (one study),
    appended in trial order (see the module docstring); ``meta["automl_study"]`` records them."""
    curves = sorted(one_study(curves), key=lambda c: c.trial)
    spec = get_model(model)
    slot_s = float(background.meta.get("slot_s", 3600.0))
    if isinstance(max_units, bool) or not isinstance(max_units, int) or max_units < 1:
        raise ValueError(f"max_units: expected an integer >= 1, got {max_units!r}")
    if not 1 <= arrival <= background.horizon:
        raise ValueError(f"arrival: must be in 1..{background.horizon}, got {arrival!r}")
    mean_s = np.array([math.fsum(c.seconds) / c.epochs for c in curves])
    median = float(np.median(mean_s)) or 1.0
    M = math.ceil(minibatches_per_epoch / max_units)
    bw = WORKER_DEMAND["bw"]
    jobs, work = [], []
    for c, s in zip(curves, mean_s):
        tau = spec.compute_s * max(s, DIVISOR_FLOOR) / median
        x = chunk_time(M, tau, spec.size_mb, bw, slot_s)
        prov = {**provenance(M, tau, spec.size_mb, bw, slot_s), "model": model,
                "automl_study": c.study, "automl_trial": c.trial, "job_type": "automl"}
        jobs.append(Job(f"{TRIAL_PREFIX}{c.study}-{c.trial}", arrival, c.epochs, max_units, x,
                        dict(WORKER_DEMAND), {**PS_DEMAND, "bw": bw * WORKERS_PER_PS},
                        Utility("constant", value=0.0), None, prov))
        work.append(max_units * x)
    meta = {**background.meta, "automl_study": {
        "study": curves[0].study, "first_job": background.I, "trials": [c.trial for c in curves],
        "epoch_work": work, "model": model, "minibatches_per_epoch": minibatches_per_epoch,
        "max_units": max_units}}
    return replace(background, jobs=background.jobs + tuple(jobs), meta=meta,
                   horizon=background.horizon if horizon is None else horizon)


def trial_jobs(instance: Instance) -> TrialJobs:
    s = instance.meta.get("automl_study")
    if not s:
        raise ValueError("instance: no AutoML study in it (build it with study_instance)")
    return TrialJobs(int(s["first_job"]), tuple(s["trials"]), tuple(s["epoch_work"]))


@dataclass
class ClusterStudy:
    """What a study did inside the cluster (``run_study``)."""

    policy: str
    cap: int | None
    schedule: object
    best: float | None
    gpu_hours: float  # the study's GPU-hours (worker-slots of its trials x slot length)
    trajectory: list[tuple[float, int, float]]  # (GPU-hours, slot, best) at every rise
    trials: dict[int, dict]
    background_jct_h: list[float]  # completed background jobs: (completion - arrival + 1) slots
    background_unfinished: int
    stats: dict = field(default_factory=dict)

    def best_at(self, gpu_hours: float) -> float | None:
        out = None
        for spent, _, best in self.trajectory:
            if spent > gpu_hours * (1 + NOISE_RTOL):
                break
            out = best
        return out

    def slot_reaching(self, target: float) -> float:
        """First slot in which the best reached ``target`` (inf if never)."""
        for _, slot, best in self.trajectory:
            if best >= target:
                return slot
        return math.inf


class StudyDriver:
    """The study's side of a cluster policy, whatever schedules the other jobs: the controller,
    the epochs each trial has done, the best found and the trials' ends.

    A policy calls ``start`` once, ``plan`` each slot (the controller's ``plan``, checked), and
    ``slot_end`` after each slot with the workers each running trial held; ``slot_end`` tells
    the controller every newly ended epoch (step 3 of the module docstring) and returns the
    trials that ended in the slot (completed, stopped or paused), whose containers the policy
    gives back."""

    def __init__(self, controller: Controller, curves: Sequence[Curve], *, cap: int | None = None,
                 seed: int = 0, size: int = 1):
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise ValueError(f"cap: expected an integer >= 1 or None, got {cap!r}")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size: expected an integer >= 1, got {size!r}")
        self.controller, self.cap, self.seed, self.size = controller, cap, seed, size
        self.curves = {c.trial: c for c in one_study(curves)}

    def start(self, instance) -> None:
        self.jobs = trial_jobs(instance)
        self.slot_s = float(instance.meta.get("slot_s", 3600.0))
        self.job_of = {t: self.jobs.first + n for n, t in enumerate(self.jobs.trials)}
        self.trial_of = {j: t for t, j in self.job_of.items()}
        missing = [t for t in self.jobs.trials if t not in self.curves]
        if missing:
            raise ValueError(f"curves: trial {missing[0]} of the instance's study is missing")
        self.units: dict[int, int] = {}  # running trial -> workers placed
        self.epochs_done = dict.fromkeys(self.jobs.trials, 0)
        self.best: float | None = None
        self.trajectory: list[tuple[float, int, float]] = []
        self.ended: dict[int, str] = {}
        order = [self.jobs.trials[p] for p in study_order(len(self.jobs.trials), self.seed)]
        self.position = {t: n for n, t in enumerate(order)}
        cap = self.cap if self.cap is not None else int(instance.worker_capacity[:, 0].sum())
        self.cap_units = cap
        self.controller.reset([TrialInfo(t, self.curves[t].config, self.curves[t].epochs)
                               for t in order], max(cap // self.size, 1), self.seed)
        self.max_units_used = 0

    def plan(self, capacity: int, t: int) -> dict[int, int]:
        """The controller's plan for slot ``t`` given ``capacity`` workers: started trials join
        ``units`` (with 0), and the workers wanted for every running trial are returned. With
        ``size`` s > 1 the controller plans in units of s workers (a fixed-size study: it sees
        capacity // s units, a trial holding w workers as ceil(w / s) units)."""
        s = self.size
        running = {trial: -(-w // s) for trial, w in self.units.items()}
        starts, want = self.controller.plan(running, capacity // s, t * self.slot_s)
        want = {trial: u * s for trial, u in want.items()}
        for trial in starts:
            if trial not in self.job_of or trial in self.units or trial in self.ended \
                    and self.ended[trial] != "paused":
                raise ControllerError(f"{self.controller.name}: cannot start trial {trial}")
            self.ended.pop(trial, None)
            self.units[trial] = 0
        if set(want) != set(self.units):
            raise ControllerError(f"{self.controller.name}: units for {sorted(want)}, running "
                                  f"are {sorted(self.units)}")
        return want

    def slot_end(self, t, state, done: set) -> list[int]:
        """Epoch accounting after slot ``t`` (``done``: jobs completed in it); the trials that
        ended in it, in the study's order."""
        self.max_units_used = max(self.max_units_used, sum(self.units.values()))
        work = self.jobs.epoch_work
        ended = []
        for trial in sorted(self.units, key=self.position.get):
            j = self.job_of[trial]
            E = self.curves[trial].epochs
            n = j - self.jobs.first
            # a job the simulator completed (in this slot, or earlier while the controller
            # had paused it at a rung it overran within its last slot) has done every epoch
            finished = j in done or bool(state.done[j])
            reached = E if finished else min(int(state.attained[j] / work[n] + EPOCH_EPS),
                                             E - 1)
            verdict = CONTINUE
            for e in range(self.epochs_done[trial] + 1, reached + 1):
                verdict = self.controller.observe(trial, e, self.curves[trial].val_accuracy[e - 1],
                                                  work[n] * self.slot_s, t * self.slot_s)
                if verdict not in VERDICTS:
                    raise ControllerError(f"{self.controller.name}: observe returned {verdict!r}")
                self.epochs_done[trial] = e
                if e < E and verdict != CONTINUE:
                    break
            if self.epochs_done[trial] == E:
                self.ended[trial] = "completed"
                final = self.curves[trial].val_accuracy[-1]
                if self.best is None or final > self.best:
                    self.best = final
                    self.trajectory.append((self.study_gpu_hours(state), t, final))
            elif verdict != CONTINUE:
                self.ended[trial] = "stopped" if verdict == STOP else "paused"
            else:
                continue
            del self.units[trial]
            ended.append(j)
        return ended

    def study_gpu_hours(self, state) -> float:
        first = self.jobs.first
        return float(state.attained[first:first + len(self.jobs.trials)].sum()
                     * self.slot_s / 3600.0)

    def stats(self) -> dict:
        return {"controller": self.controller.name, "cap": self.cap,
                "most_gpus_held": self.max_units_used, **self.controller.stats()}

    def result(self, instance: Instance, schedule, policy_stats: dict) -> "ClusterStudy":
        """The ``ClusterStudy`` of a finished simulation (the schedule already validated)."""
        self.controller.close()
        first = self.jobs.first
        slot_h = self.slot_s / 3600.0
        worker_slots = schedule.allocations.workers_per_job_slot(instance.I,
                                                                 instance.horizon).sum(1)
        jct, unfinished = [], 0
        for i in range(first):
            c = schedule.completion[i]
            if c is None:
                unfinished += 1
            else:
                jct.append((c - instance.jobs[i].arrival + 1) * slot_h)
        trials = {}
        for n, trial in enumerate(self.jobs.trials):
            status = self.ended.get(trial, "running" if trial in self.units else "not started")
            trials[trial] = {"status": status, "stopped_at_epoch": self.epochs_done[trial],
                             "gpu_hours": float(worker_slots[first + n] * slot_h)}
        return ClusterStudy(self.controller.name, self.cap, schedule, self.best,
                            float(worker_slots[first:].sum() * slot_h), self.trajectory, trials,
                            jct, unfinished, policy_stats)


class StudyInCluster(OnlinePolicy):
    """Background jobs first fit in arrival order, the study's trials by its controller under
    a cap of ``cap`` GPUs (None: no cap). See the module docstring."""

    name = "automl-study"

    def __init__(self, controller: Controller, curves: Sequence[Curve], *, cap: int | None = None,
                 seed: int = 0):
        self.study = StudyDriver(controller, curves, cap=cap, seed=seed)

    def start(self, instance, state) -> None:
        self.instance = instance
        self.study.start(instance)
        self.placement = FirstFit()
        self.held: dict[int, list] = {}  # job -> rows
        self.queue: list[int] = []  # background jobs waiting, arrival order

    def on_arrival(self, job, t, state):
        if job not in self.study.trial_of:
            self.queue.append(job)
        return True

    # ---- one slot --------------------------------------------------------------------------------
    def _room(self, free: np.ndarray, limit: int) -> int:
        """One-worker trials (with a PS each) that still fit, at most ``limit``."""
        free = free.copy()
        job = self.study.jobs.first
        n = 0
        while n < limit:
            rows = self.placement.place(self.instance, job, 1, free)
            if rows is None:
                break
            apply(self.instance, job, rows, free)
            n += 1
        return n

    def allocate(self, t, state):
        inst, study = self.instance, self.study
        free = free_after(inst, self.held)
        for j in list(self.queue):  # background: arrival order, first fit, backfilling
            rows = self.placement.place(inst, j, int(inst.chunks[j]), free)
            if rows is not None:
                apply(inst, j, rows, free)
                self.held[j] = rows
                self.queue.remove(j)
        held = sum(study.units.values())
        capacity = min(study.cap_units, held + self._room(free, study.cap_units - held))
        want = study.plan(capacity, t)
        for trial, u in sorted(want.items(), key=lambda kv: kv[1]):  # shrink before growing
            j = study.job_of[trial]
            if u == study.units[trial] or state.done[j]:  # done: its epochs are told next
                continue
            for s, role, n in self.held.pop(j, []):  # give back, re-place
                free[s] += n * inst.container_demand(j, s, role)
            k, rows = self.placement.place_most(inst, j, min(u, int(inst.chunks[j])), free)
            if k:
                apply(inst, j, rows, free)
                self.held[j] = rows
            study.units[trial] = k
        for j, rows in self.held.items():
            for s, role, n in rows:
                yield j, s, role, n

    def on_slot_end(self, t, state, completed) -> None:
        done = set(completed.tolist())
        for j in done:
            self.held.pop(j, None)
        for j in self.study.slot_end(t, state, done):
            self.held.pop(j, None)

    def stats(self) -> dict:
        return self.study.stats()


def run_study(instance: Instance, curves: Sequence[Curve], controller: Controller, *,
              cap: int | None = None, seed: int = 0) -> ClusterStudy:
    """Simulate ``instance`` (from ``study_instance``) with the study under ``controller``;
    the schedule is checked by ``model.validate`` (``InvalidSchedule`` if it fails)."""
    from ..model.validate import assert_valid

    policy = StudyInCluster(controller, curves, cap=cap, seed=seed)
    schedule = simulate(instance, policy)
    assert_valid(instance, schedule)
    return policy.study.result(instance, schedule, schedule.stats)
