"""The slot loop: arrivals -> admission -> allocation -> progress -> completion.

The simulator owns time and the ``ClusterState``. Each slot t = 1..T it
1. hands the jobs arriving in t to ``policy.on_arrival`` in instance order (ties in arrival are
   already in instance order) and records admit / reject (``None`` = undecided, asked again
   through ``state.waiting()`` by policies that queue);
2. asks ``policy.allocate(t, state)`` for this slot's containers, rows ``(job, server, role,
   count)``, checking each against its own account of free capacity (a policy bug raises
   ``PolicyError``); ``state.free`` is a fresh copy of the capacities each slot that the policy may
   use as scratch space while it places jobs;
3. credits progress: by default each worker gives the job its server type's speed in work units
   (``Instance.type_speed``), so k workers give k worker-slots without accelerator types (the
   paper's model);
4. completes jobs whose remaining work reaches 0 (completion = t) and calls ``policy.on_slot_end``.

**Preemption costs.** A policy stops a running job with ``state.stop(job, kind, by)`` during
``allocate`` (``model.preemption``: preempt, degrade to CPU, promote, resize): the job loses its
work since its last checkpoint (a suspend and a promote write one first and lose nothing) and,
when it runs again, is credited only what is left of its slots after the restart
(``costmodel.preemption``). A degraded job's workers must sit on CPU-mode
servers. The events and per-job counters go to ``stats["preemption"]`` (only when there is one).

Besides capacity, the simulator holds every policy to the pools (workers on worker servers, PSs
on PS servers) and, with accelerator types, to the types (a job's workers only on types it can
use, and on one type per slot unless it allows ``span_types``): a breach raises ``PolicyError``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from ..model.numerics import DONE_EPS, capacity_slack
from ..model.policy import OnlinePolicy
from ..model.preemption import cpu_servers
from ..model.schedule import PS, WORKER, Schedule, ScheduleBuilder
from .state import ClusterState


class PolicyError(RuntimeError):
    """A policy asked for something impossible (over capacity, a finished or rejected job ...)."""


# progress(instance, job, rows of this job in this slot [(server, role, count)], t) -> work units
ProgressFn = Callable[[object, int, list, int], float]
# measure(t, rows of the slot [(job, server, role, count)], model {job: work units}) ->
# {job: work units the jobs really did} (a closed loop: ``runtime.closed_loop``)
MeasureFn = Callable[[int, list, dict], Mapping[int, float]]


def chunk_time_progress(instance, job: int, rows, t: int) -> float:
    """The paper's model, by accelerator type: each worker in a slot does its server type's
    speed s_ig in work units (one worker-slot without types)."""
    if not instance.typed:
        return float(sum(n for _, role, n in rows if role == WORKER))
    speed, kind = instance.type_speed[job], instance.worker_type
    return float(sum(n * int(speed[kind[s]]) for s, role, n in rows if role == WORKER))


def simulate(instance, policy: OnlinePolicy, *, progress_fn: ProgressFn | None = None,
             show_progress: bool = False) -> Schedule:
    """Run ``policy`` over slots 1..T and return its schedule; its ``stats`` are the policy's,
    with the wall-clock run time added under ``stats["timing"]["run_time_s"]``. A policy with
    ``stops_when_done`` is stopped after the slot in which the last job completes (every job
    arrived, decided, and done or rejected): the slots after it would be empty."""
    t0 = time.perf_counter()
    loop = SlotLoop(instance, policy, progress_fn=progress_fn)
    slots = range(1, instance.horizon + 1)
    if show_progress:
        from tqdm import tqdm

        slots = tqdm(slots, desc=f"{policy.name}", unit="slot", leave=False)
    state, last_arrival = loop.state, int(instance.arrival.max(initial=0))
    for _ in slots:
        loop.step()
        if (policy.stops_when_done and state.t >= last_arrival and state.decided.all()
                and (state.done | ~state.admitted).all()):
            break  # every job done or rejected: the slots left to the horizon are empty
    return loop.schedule({"run_time_s": time.perf_counter() - t0})


@dataclass(frozen=True)
class SlotOutcome:
    """What slot ``t`` decided and did: ``decisions`` ``{job: True/False/None}`` of the jobs
    handed over in t, ``rows`` ``[(job, server, role, count)]`` the containers the policy
    allocated, ``finished`` the jobs that completed in t."""

    t: int
    decisions: dict
    rows: list
    finished: tuple


@dataclass(frozen=True)
class PendingSlot:
    """A slot ``SlotLoop.decide`` decided and ``settle`` has not credited: ``t``, ``decisions``
    and ``rows`` as ``SlotOutcome``'s, ``per_job`` ``{job: [(server, role, count)]}`` and
    ``model`` ``{job: work units}`` the progress model gives each job with rows."""

    t: int
    decisions: dict
    rows: tuple
    per_job: dict
    model: dict


class SlotLoop:
    """The simulator's slot loop, one slot per ``step()``: what ``simulate`` runs, and what the
    scheduling service runs in wall-clock time (``oasis_opt.service``), so both take the same
    decisions for the same arrivals.

    ``cancel(job)`` withdraws a job before the next step (a cancelled job counts as ``done`` for
    the policy: never handed over if it has not arrived, never allocated again, no completion).

    ``measure(t, rows, model)``: measured progress (a closed loop runs the slot for real in it).
    It is called once per slot after allocation with the slot's rows and ``model`` ``{job: work
    units}``, the progress the progress model gives each job with rows, and returns the work
    units each of those jobs really did, which are credited instead (a job left out is credited
    its model progress). Default: none, the model's progress is credited.
    """

    def __init__(self, instance, policy: OnlinePolicy, *, progress_fn: ProgressFn | None = None,
                 measure: MeasureFn | None = None):
        self.instance, self.policy = instance, policy
        self.progress_fn = _progress_for(instance) if progress_fn is None else progress_fn
        self.measure = measure
        self.state = ClusterState(instance)
        self.builder = ScheduleBuilder(instance)
        self.by_slot: dict[int, list[int]] = {}
        for i, a in enumerate(instance.arrival.tolist()):
            self.by_slot.setdefault(a, []).append(i)
        self.typed = instance.typed
        self.cpu = cpu_servers(instance)
        # how far below zero a server's free capacity may go (element-wise, so the same floats
        # as computing it row by row)
        self.floor = -capacity_slack(instance.capacity)
        self._pending: PendingSlot | None = None
        policy.start(instance, self.state)

    def extend(self, instance) -> bool:
        """Go on with ``instance``: the same cluster, the loop's jobs first and unchanged, then
        new jobs, each arriving after the last slot stepped. True when the policy takes them
        (``OnlinePolicy.extend``): the loop then decides the next slots as a loop started on
        ``instance`` would have. False when it does not: the loop is spent (its state holds
        the new jobs, its policy does not) and the caller starts a fresh one and replays.
        ``ValueError`` when ``instance`` is not such an extension."""
        old, t = self.instance, self.state.t
        if self._pending is not None:
            raise ValueError(f"instance: slot {self._pending.t} is decided and not settled")
        if (instance.horizon != old.horizon or instance.resources != old.resources
                or instance.servers != old.servers or instance.progress != old.progress
                or instance.topology is not old.topology and instance.topology != old.topology):
            raise ValueError("instance: not the loop's cluster (servers, resources, horizon, "
                             "topology and progress model must stay)")
        if instance.jobs[:old.I] != old.jobs:
            raise ValueError(f"instance: its first {old.I} jobs are not the loop's jobs")
        late = [j for j in instance.jobs[old.I:] if j.arrival <= t]
        if late:
            raise ValueError(f"instance: job {late[0].id} arrives in slot {late[0].arrival}, "
                             f"which is decided already (the loop is at slot {t})")
        self.state.extend(instance)
        self.builder.extend(instance)
        for i in range(old.I, instance.I):
            self.by_slot.setdefault(int(instance.arrival[i]), []).append(i)
        self.instance = instance
        return self.policy.extend(instance, self.state)

    @property
    def t(self) -> int:
        """The last slot stepped (0 before the first)."""
        return self.state.t

    def cancel(self, job: int) -> None:
        """Withdraw ``job`` from the next slot on; a job that completed is refused (its
        completion and utility stand)."""
        state = self.state
        if state.completion[job] >= 0:
            raise ValueError(f"job {job}: it completed in slot {int(state.completion[job])}; "
                             "a completed job cannot be cancelled")
        state.cancelled[job] = True
        if not state.admitted[job]:  # not arrived yet, or still waiting: never decided now
            state.decided[job] = True
        else:  # from the next slot on: a policy that reserved ahead releases the rest
            self.policy.on_cancel(job, state.t + 1, state)

    def step(self) -> SlotOutcome:
        """Slot ``t + 1``: arrivals -> admission -> allocation -> progress -> completion
        (``decide`` then ``settle``, with ``measure``'s progress when the loop has one)."""
        pending = self.decide()
        measured = None
        if self.measure is not None:
            measured = self.measure(pending.t, list(pending.rows), dict(pending.model))
        return self.settle(measured)

    @property
    def pending(self) -> "PendingSlot | None":
        """The slot ``decide`` decided and ``settle`` has not settled yet (None: none)."""
        return self._pending

    def decide(self) -> "PendingSlot":
        """The first half of ``step``: slot ``t + 1``'s arrivals, admissions and allocation,
        checked; nothing is credited until ``settle``. A caller that runs the slot in between
        (the service's closed loop) settles it with the progress it measured. ``ValueError``
        while a decided slot is not settled."""
        instance, policy, state = self.instance, self.policy, self.state
        if self._pending is not None:
            raise ValueError(f"t: slot {self._pending.t} is decided and not settled")
        if state.t >= instance.horizon:
            raise ValueError(f"t: the horizon ends at slot {instance.horizon}")
        t = state.t = state.t + 1
        state.free = instance.capacity.copy()  # the policy's scratch copy
        free = instance.capacity.copy()  # the simulator's own account
        decisions: dict[int, bool | None] = {}
        for i in self.by_slot.get(t, ()):
            if state.cancelled[i]:
                continue
            state.arrived[i] = True
            decision = decisions[i] = policy.on_arrival(i, t, state)
            if decision is not None:
                state.decided[i] = True
                state.admitted[i] = bool(decision)
        H = instance.H
        per_job: dict[int, list] = {}
        rows = []
        admitted, arrived, completion = state.admitted, state.arrived, state.completion
        cancelled, degraded, floor = state.cancelled, state.ledger.degraded, self.floor
        for job, server, role, count in policy.allocate(t, state):
            if count <= 0 or cancelled[job]:  # a policy's own queue may still hold it
                continue
            # not cancelled here, so ``state.done[job]`` is ``completion[job] >= 0``
            if not admitted[job] or completion[job] >= 0 or not arrived[job]:
                raise PolicyError(f"{policy.name}: slot {t}: allocation for job "
                                  f"{instance.jobs[job].id} which is not running")
            if (role == WORKER) != (server < H):
                raise PolicyError(f"{policy.name}: slot {t}: job {instance.jobs[job].id}: "
                                  f"{('worker', 'PS')[role]} on server "
                                  f"{instance.servers[server].id} of the other pool")
            if role == WORKER and degraded[job] and not self.cpu[server]:
                raise PolicyError(f"{policy.name}: slot {t}: degraded job "
                                  f"{instance.jobs[job].id} on server "
                                  f"{instance.servers[server].id}, not a CPU-mode server")
            if (self.typed and role == WORKER
                    and not instance.usable[job, instance.worker_type[server]]):
                raise PolicyError(f"{policy.name}: slot {t}: job {instance.jobs[job].id} on "
                                  f"accelerator type {instance.types[instance.worker_type[server]]}"
                                  ", which it cannot use")
            free[server] -= count * instance.container_demand(job, server, role)
            if (free[server] < floor[server]).any():
                raise PolicyError(f"{policy.name}: slot {t}: server {instance.servers[server].id} "
                                  "over capacity")
            per_job.setdefault(job, []).append((server, role, count))
            self.builder.add(job, t, server, role, count)
            rows.append((int(job), int(server), int(role), int(count)))
        if self.typed:
            for job, job_rows in per_job.items():
                _check_span(instance, policy.name, t, job, job_rows)
        model = {job: self.progress_fn(instance, job, job_rows, t)
                 for job, job_rows in per_job.items()}
        self._pending = PendingSlot(t, decisions, tuple(rows), per_job, model)
        return self._pending

    def settle(self, measured: Mapping[int, float] | None = None) -> SlotOutcome:
        """The second half of ``step``: credit the decided slot's progress (``measured``
        ``{job: work units}`` in place of the model's for the jobs it names), complete the
        jobs done and tell the policy. ``ValueError`` when no slot is decided."""
        pending, state, policy = self._pending, self.state, self.policy
        if pending is None:
            raise ValueError("t: no decided slot to settle")
        t, per_job, model, rows = pending.t, pending.per_job, dict(pending.model), pending.rows
        decisions = pending.decisions
        if measured is not None:
            model = {job: float(measured.get(job, gross)) for job, gross in model.items()}
        self._pending = None
        for job, job_rows in per_job.items():
            gross = model[job]
            if any(role == WORKER for _, role, _ in job_rows):
                state.last_ran[job] = t
                state.remaining[job] -= state.ledger.credit(job, gross)
            state.attained[job] += gross
        finished = np.array([j for j in per_job if state.remaining[j] <= DONE_EPS], dtype=np.int64)
        state.completion[finished] = t
        policy.on_slot_end(t, state, finished)
        return SlotOutcome(t, decisions, list(rows), tuple(finished.tolist()))

    def schedule(self, timing: dict | None = None) -> Schedule:
        """The schedule of the slots stepped so far (every admitted job, its allocations); its
        ``stats`` are the policy's, with ``timing`` added under ``stats["timing"]``."""
        builder = self.builder
        for i in np.flatnonzero(self.state.admitted):
            builder.admit(int(i))
        stats = dict(self.policy.stats())
        events = self.state.ledger.events
        if events:
            stats["preemption"] = self.state.ledger.record(self.instance)
        if timing:
            stats["timing"] = {**timing, **stats.get("timing", {})}
        return builder.build(self.policy.name, stats, events)


def _check_span(instance, name: str, t: int, job: int, rows) -> None:
    """A job's workers on one type in a slot unless it may span types."""
    kinds = {int(instance.worker_type[s]) for s, role, _ in rows if role == WORKER}
    if len(kinds) > 1 and not instance.span_types[job]:
        raise PolicyError(f"{name}: slot {t}: job {instance.jobs[job].id} on types "
                          f"{', '.join(str(instance.types[g]) for g in sorted(kinds))} in one "
                          "slot (it does not allow span_types)")


def _progress_for(instance) -> ProgressFn:
    if instance.progress == "placement":
        from ..costmodel.placement import placement_progress  # issue: placement-aware cost model

        return placement_progress
    return chunk_time_progress


__all__ = ["OnlinePolicy", "PolicyError", "SlotLoop", "SlotOutcome", "simulate",
           "chunk_time_progress", "PS", "WORKER"]
