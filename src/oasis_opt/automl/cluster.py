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
   next slot's background jobs can use them.

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
                "automl_study": c.study, "automl_trial": c.trial}
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


class StudyInCluster(OnlinePolicy):
    """Background jobs first fit in arrival order, the study's trials by its controller under
    a cap of ``cap`` GPUs (None: no cap). See the module docstring."""

    name = "automl-study"

    def __init__(self, controller: Controller, curves: Sequence[Curve], *, cap: int | None = None,
                 seed: int = 0):
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise ValueError(f"cap: expected an integer >= 1 or None, got {cap!r}")
        self.controller, self.cap, self.seed = controller, cap, seed
        self.curves = {c.trial: c for c in one_study(curves)}

    def start(self, instance, state) -> None:
        self.instance = instance
        self.jobs = trial_jobs(instance)
        self.slot_s = float(instance.meta.get("slot_s", 3600.0))
        self.job_of = {t: self.jobs.first + n for n, t in enumerate(self.jobs.trials)}
        self.trial_of = {j: t for t, j in self.job_of.items()}
        missing = [t for t in self.jobs.trials if t not in self.curves]
        if missing:
            raise ValueError(f"curves: trial {missing[0]} of the instance's study is missing")
        self.placement = FirstFit()
        self.held: dict[int, list] = {}  # job -> rows
        self.queue: list[int] = []  # background jobs waiting, arrival order
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
                               for t in order], cap, self.seed)
        self.max_units_used = 0

    def on_arrival(self, job, t, state):
        if job not in self.trial_of:
            self.queue.append(job)
        return True

    # ---- one slot --------------------------------------------------------------------------------
    def _room(self, free: np.ndarray, limit: int) -> int:
        """One-worker trials (with a PS each) that still fit, at most ``limit``."""
        free = free.copy()
        job = self.jobs.first
        n = 0
        while n < limit:
            rows = self.placement.place(self.instance, job, 1, free)
            if rows is None:
                break
            apply(self.instance, job, rows, free)
            n += 1
        return n

    def allocate(self, t, state):
        inst = self.instance
        free = free_after(inst, self.held)
        for j in list(self.queue):  # background: arrival order, first fit, backfilling
            rows = self.placement.place(inst, j, int(inst.chunks[j]), free)
            if rows is not None:
                apply(inst, j, rows, free)
                self.held[j] = rows
                self.queue.remove(j)
        held = sum(self.units.values())
        capacity = min(self.cap_units, held + self._room(free, self.cap_units - held))
        starts, want = self.controller.plan(dict(self.units), capacity, t * self.slot_s)
        for trial in starts:
            if trial not in self.job_of or trial in self.units or trial in self.ended \
                    and self.ended[trial] != "paused":
                raise ControllerError(f"{self.controller.name}: cannot start trial {trial}")
            self.ended.pop(trial, None)
            self.units[trial] = 0
        if set(want) != set(self.units):
            raise ControllerError(f"{self.controller.name}: units for {sorted(want)}, running "
                                  f"are {sorted(self.units)}")
        for trial, u in sorted(want.items(), key=lambda kv: kv[1]):  # shrink before growing
            if u == self.units[trial]:
                continue
            j = self.job_of[trial]
            for s, role, n in self.held.pop(j, []):  # give back, re-place
                free[s] += n * inst.container_demand(j, s, role)
            k, rows = self.placement.place_most(inst, j, min(u, int(inst.chunks[j])), free)
            if k:
                apply(inst, j, rows, free)
                self.held[j] = rows
            self.units[trial] = k
        self.max_units_used = max(self.max_units_used, sum(self.units.values()))
        for j, rows in self.held.items():
            for s, role, n in rows:
                yield j, s, role, n

    def on_slot_end(self, t, state, completed) -> None:
        done = set(completed.tolist())
        for j in done:
            self.held.pop(j, None)
        work = self.jobs.epoch_work
        for trial in sorted(self.units, key=self.position.get):
            j = self.job_of[trial]
            E = self.curves[trial].epochs
            n = j - self.jobs.first
            reached = E if j in done else min(int(state.attained[j] / work[n] + EPOCH_EPS), E - 1)
            verdict = CONTINUE
            for e in range(self.epochs_done[trial] + 1, reached + 1):
                verdict = self.controller.observe(trial, e, self.curves[trial].val_accuracy[e - 1],
                                                  work[n] * self.slot_s, t * self.slot_s)
                if verdict not in VERDICTS:
                    raise ControllerError(f"{self.controller.name}: observe returned {verdict!r}")
                self.epochs_done[trial] = e
                if e < E and verdict != CONTINUE:
                    break
            if j in done:
                self.ended[trial] = "completed"
                final = self.curves[trial].val_accuracy[-1]
                if self.best is None or final > self.best:
                    self.best = final
                    self.trajectory.append((self.study_gpu_hours(state), t, final))
            elif verdict != CONTINUE:
                self.ended[trial] = "stopped" if verdict == STOP else "paused"
                self.held.pop(j, None)
            else:
                continue
            del self.units[trial]

    def study_gpu_hours(self, state) -> float:
        first = self.jobs.first
        return float(state.attained[first:first + len(self.jobs.trials)].sum()
                     * self.slot_s / 3600.0)

    def stats(self) -> dict:
        return {"controller": self.controller.name, "cap": self.cap,
                "most_gpus_held": self.max_units_used, **self.controller.stats()}


def run_study(instance: Instance, curves: Sequence[Curve], controller: Controller, *,
              cap: int | None = None, seed: int = 0) -> ClusterStudy:
    """Simulate ``instance`` (from ``study_instance``) with the study under ``controller``;
    the schedule is checked by ``model.validate`` (``InvalidSchedule`` if it fails)."""
    from ..model.validate import assert_valid

    policy = StudyInCluster(controller, curves, cap=cap, seed=seed)
    schedule = simulate(instance, policy)
    assert_valid(instance, schedule)
    controller.close()
    first = policy.jobs.first
    slot_h = policy.slot_s / 3600.0
    worker_slots = schedule.allocations.workers_per_job_slot(instance.I, instance.horizon).sum(1)
    jct, unfinished = [], 0
    for i in range(first):
        c = schedule.completion[i]
        if c is None:
            unfinished += 1
        else:
            jct.append((c - instance.jobs[i].arrival + 1) * slot_h)
    trials = {}
    for n, trial in enumerate(policy.jobs.trials):
        status = policy.ended.get(trial, "running" if trial in policy.units else "not started")
        trials[trial] = {"status": status, "stopped_at_epoch": policy.epochs_done[trial],
                         "gpu_hours": float(worker_slots[first + n] * slot_h)}
    return ClusterStudy(controller.name, cap, schedule, policy.best,
                        float(worker_slots[first:].sum() * slot_h), policy.trajectory, trials,
                        jct, unfinished, schedule.stats)
