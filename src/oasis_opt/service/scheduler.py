"""The service's scheduler core: jobs in, one slot decided per ``advance()``; no clock inside.

The service runs the simulator's own loop (``sim.core.SlotLoop``) over an instance made of the
cluster and every job accepted so far, in acceptance order. ``advance()`` decides the next slot
t: jobs whose arrival is t are handed to the policy, which admits or rejects them and allocates
the slot's containers; all of it is written to the store (``store.Store.record_slot``) *before* it
is returned to whoever runs the slot (an ``Executor``, or nobody in a policy-only service). So a
run of the service and ``simulate`` of the same jobs take the same decisions.

**Jobs that arrive while the loop runs.** An ``OnlinePolicy`` is built for one instance
(``start(instance, state)``). When jobs were accepted since the last slot, ``advance`` extends the
loop with them (``SlotLoop.extend``): a policy that can take jobs mid-run (``OnlinePolicy.extend``:
OASiS and OASiS-topo with a pricing fixed in advance) goes on, so a slot's cost does not grow with
the jobs seen before it. A policy that cannot (the baselines, whose start reads all jobs at once)
is built afresh for the larger instance, and the slots decided so far are *replayed*, each
replayed decision and allocation checked against the stored one (an online policy decides slot t
from the jobs arrived by t, so it must: a policy that does not raises ``ReplayMismatch``);
``replays`` counts them. The same replay resumes a state file after a restart: decisions are never
taken twice, they are re-derived and compared.

**The closed loop** (``closed_loop=True``, what ``oasis-opt serve`` runs with an executor unless
``--open-loop``). ``advance`` decides slot t without crediting it (``SlotLoop.decide``); the slot
runs, time-boxed; ``finish(t, ..., left=...)`` credits each job the progress the executor
measured (``runtime.closed_loop.measured_credit``: a job that completed gets all it had left),
settles the slot (``SlotLoop.settle``: completions, the policy's slot end) and re-plans every job
that fell behind its model (``replan_behind``: OASiS re-prices its remaining work over the slots
after t; the baselines re-decide at their next slot), as ``runtime.closed_loop.ClosedLoop`` does
for ``execute``. The credits, the jobs behind and the re-plans are written with the slot's record
(``closed_loop``), and a restart replays each slot that ran with its stored credit, so the
replayed decisions are the ones taken. A job's completion is known only once its slot ran: a
cancellation asked while that slot runs is accepted and void if the job completes in it. A
state is resumed only with the loop it was written with (``Store.bind``).

**Cost of a request.** A submission is checked on an instance of the cluster and that job alone,
and the views read per-job indexes kept as slots are decided and finished, so neither grows with
the number of jobs accepted before (``benchmarks/bench_service.py`` measures it).

**Time.** Slot boundaries are the caller's (``runner.ServiceRunner`` paces them in wall-clock
time; tests call ``advance`` / ``finish`` directly). A job submitted between boundaries waits for
the next one: its arrival is at least ``next_slot``. A cancellation takes effect at the next
boundary (``SlotLoop.cancel``); a job whose completing slot is decided already (the slot may be
running) cannot be cancelled any more (409): it completes.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

import numpy as np

from ..model import Instance, Job
from ..model.checks import FormatError
from ..model.numerics import fit_count
from ..model.io import instance_from_dict, instance_to_dict, job_from_dict, job_to_dict
from ..model.schedule import ROLES, WORKER, Schedule, ScheduleBuilder
from ..model.policy import OnlinePolicy
from ..sim.core import SlotLoop
from ..sim.state import ClusterState
from .store import Store


class BadRequest(ValueError):
    """A request the service refuses, whole: ``field`` names the culprit, ``status`` is the HTTP
    status (400 bad job, 404 unknown job, 409 conflict with the service's state)."""

    def __init__(self, field: str, message: str, status: int = 400):
        super().__init__(f"{field}: {message}")
        self.field, self.message, self.status = field, message, status


class ReplayMismatch(RuntimeError):
    """Replaying the stored slots gave other decisions than those stored (a policy that is not
    online or not deterministic, or a state written by other code)."""


@dataclass(frozen=True)
class DecidedSlot:
    """Slot ``t`` as decided: ``decisions`` ``{job: admitted}`` taken in it, ``rows``
    ``[(job, server, role, count)]`` its containers, ``finished`` the jobs it completes."""

    t: int
    decisions: dict
    rows: list
    finished: tuple


class Scheduler:
    """The clock-free core of ``oasis-opt serve`` (module docstring). Thread-safe.

    ``cluster``: an instance whose servers, resources, horizon, topology and progress model are
    the cluster (its jobs are not used). ``make_policy()`` returns a fresh ``OnlinePolicy``
    (e.g. ``lambda: get_policy("oasis", pricing=...)``); ``policy`` and ``options`` name it in the
    state. ``executes``: jobs must name a runnable training task (the service runs them).
    ``closed_loop`` (with ``executes``): a slot is credited the progress the executor measured
    (``finish(..., left=...)``), not the model's, and a job that fell behind is re-planned
    (module docstring, "The closed loop").
    """

    def __init__(self, cluster: Instance, make_policy: Callable[[], OnlinePolicy], *, store: Store,
                 policy: str, options: dict | None = None, executes: bool = False,
                 closed_loop: bool = False):
        if closed_loop and not executes:
            raise ValueError("closed_loop: a closed loop credits the executor's measured "
                             "progress; it needs executes=True")
        self.cluster = cluster.with_jobs(())
        self._cluster_doc = instance_to_dict(self.cluster)
        self.make_policy, self.policy_name, self.executes = make_policy, policy, executes
        self.closed_loop = closed_loop
        self.store = store
        # two locks, always taken in this order: ``_slots`` while a slot is decided or the
        # loop is read (views, cancels), ``_lock`` for the jobs and the store. A submission takes
        # ``_lock`` alone, so it never waits for the policy deciding a slot.
        self._slots = threading.RLock()
        self._lock = threading.RLock()
        self._deciding: int | None = None  # the slot being decided (no ``_lock`` held)
        self._docs: list[dict] = []  # accepted jobs' instance-format documents, by seq
        self._jobs: list[Job] = []  # the same jobs, checked
        self._ids: dict[str, int] = {}  # job id -> seq
        self._built: Instance = self.cluster  # the instance of the jobs accepted (``instance``)
        self._cancels: dict[int, int] = {}  # seq -> slot boundary it takes effect at
        self._decided: list[DecidedSlot] = []
        self._decision: dict[int, tuple[int, bool]] = {}  # seq -> (slot decided, admitted)
        self._work_done: dict[int, float] = {}  # seq -> worker-slots in the slots that ran
        self._used = np.zeros(self.cluster.R)  # resources used, summed over the slots that ran
        self._now_rows: tuple[int, dict[int, dict]] = (0, {})  # the last decided slot, by job
        self._finished = 0  # last slot that ran
        self._progress: dict[int, list[dict]] = {}  # executor records per job
        self._loop: SlotLoop | None = None
        # closed loop: slot -> {seq: work units credited} and slot -> the jobs behind in it
        self._measured: dict[int, dict[int, float]] = {}
        self._behind: dict[int, list[dict]] = {}
        self.replans: list[dict] = []  # closed loop: every re-plan, in order (replays included)
        self.replays = 0  # times the policy was rebuilt and replayed (module docstring)
        self.resumed = store.bind(self._cluster_doc, policy, options or {},
                                  "closed" if closed_loop else "open")
        if self.resumed:
            self._resume()

    # ---- the state file ------------------------------------------------------------------
    def _resume(self) -> None:
        store = self.store
        self._docs = [doc for _, _, _, doc, _ in store.jobs()]
        # checked as a whole, then on this cluster's own objects (its topology is one object)
        self._jobs = list(self._instance(self._docs).jobs)
        self._built = self.cluster.with_jobs(self._jobs)
        self._ids = {job.id: seq for seq, job in enumerate(self._jobs)}
        self._cancels = store.cancels()
        self._progress = store.progress()
        decisions = store.decisions()
        for t, rec in store.slot_records().items():
            loop_rec = rec.get("closed_loop")
            if loop_rec is not None:
                self._measured[t] = {int(j): float(c) for j, c in loop_rec["credit"].items()}
                self._behind[t] = list(loop_rec["behind"])
        for slot, _, finished_at in store.slots():
            stored = DecidedSlot(slot, {s: a for s, (t, a) in decisions.items() if t == slot},
                                 [tuple(r) for r in store.slot_rows(slot)], ())
            self._decided.append(stored)
            if finished_at is not None:
                self._finished = slot
        self._rebuild(self.instance)
        assert self._loop is not None
        for stored in self._decided[:self._finished]:
            self._credit(self._loop, stored)

    # ---- jobs ----------------------------------------------------------------------------
    @property
    def instance(self) -> Instance:
        """The cluster with every job accepted so far, in acceptance order (built when asked
        for after a submission, then kept)."""
        with self._lock:
            built, more = self._built, self._jobs[self._built.I:]
        if more:  # outside the lock: a submission does not wait for it
            built = built.extended(more)
            with self._lock:
                if built.I > self._built.I:
                    self._built = built
        return built

    @property
    def next_slot(self) -> int:
        """The next slot boundary: the earliest arrival a job submitted now can have."""
        with self._lock:
            return len(self._decided) + 1 + (self._deciding is not None)

    @property
    def finished_slots(self) -> int:
        """Slots run to their end (a restart goes on after them)."""
        return self._finished

    @property
    def decided_slots(self) -> int:
        """Slots decided: ``finished_slots``, or one more while the slot decided last runs."""
        return len(self._decided)

    def submit(self, doc: Any) -> dict:
        """Accept job ``doc`` (an instance-format job; ``id`` and ``arrival`` optional: a fresh
        id, the next slot) or raise ``BadRequest`` naming the field; written before it counts."""
        with self._lock:
            doc, job = self._check(doc)
            seq = len(self._docs)
            self.store.record_job(seq, doc["id"], doc["arrival"], doc)
            self._docs.append(doc)
            self._jobs.append(job)
            self._ids[job.id] = seq
            return self._view(seq)

    def _check(self, doc: Any) -> tuple[dict, Job]:
        """The job's document in canonical form and the job, checked on an instance of the
        cluster and this job alone (what a job is checked against does not depend on the
        others: its fields, the cluster's pools, the policy's start and the task's plan)."""
        if not isinstance(doc, dict):
            raise BadRequest("job", "expected a JSON object (a job in the instance format)")
        doc = dict(doc)
        seq, t = len(self._docs), self.next_slot
        if "id" not in doc:
            taken = self._ids
            doc["id"] = next(f"job-{n}" for n in range(seq + 1, seq + len(taken) + 2)
                             if f"job-{n}" not in taken)
        elif isinstance(doc["id"], str) and doc["id"] in self._ids:
            raise BadRequest("id", f"a job {doc['id']!r} was already submitted", 409)
        if t > self.cluster.horizon:
            raise BadRequest("arrival", f"the cluster's horizon ended with slot "
                             f"{self.cluster.horizon}; no job can arrive any more", 409)
        arrival = doc.setdefault("arrival", t)
        if isinstance(arrival, int) and not isinstance(arrival, bool) and arrival < t:
            raise BadRequest("arrival", f"slot {arrival} is in the past (the next slot is {t})")
        if self.executes and doc.get("task") is None:
            raise BadRequest("task", "missing: the service runs every job ({\"name\", "
                             "\"config\"}; see `oasis-opt automl tasks`)")
        try:
            alone = job_from_dict(doc, self.cluster)
        except FormatError as e:
            raise _job_field(e, 0) from None
        job = alone.jobs[0]
        self._check_fits(alone, 0)
        try:  # the policy takes the job (e.g. a U for every resource it demands)
            self.make_policy().check(alone, ClusterState(alone))
        except (ValueError, TypeError) as e:
            raise BadRequest(*_split(str(e), "job")) from None
        if job.task is not None:
            from ..runtime.plan import job_plan

            try:
                job_plan(alone, 0)
            except FormatError as e:
                raise _job_field(e, 0) from None
        return job_to_dict(job), job

    def _check_fits(self, inst: Instance, seq: int) -> None:
        """A job the cluster can never run: one container larger than every server of its pool.
        (A job that cannot finish by the horizon is the policy's to reject, as in simulation.)"""
        job = inst.jobs[seq]
        for role, servers, demand in (("worker", inst.worker_servers, job.worker),
                                      ("ps", inst.ps_servers, job.ps)):
            need = [float(demand.get(r, 0.0)) for r in inst.resources]
            capacity = np.array([[float(s.capacity.get(r, 0.0)) for r in inst.resources]
                                 for s in servers]).reshape(len(servers), len(inst.resources))
            if not (fit_count(capacity, need) >= 1).any():
                raise BadRequest(role, f"one {role} container ({_amounts(demand)}) is larger "
                                 f"than every {role} server of the cluster")

    def cancel(self, job_id: str) -> dict:
        """Withdraw a job at the next slot boundary; ``BadRequest`` 404 (no such job) or 409 (it
        ended, or the slot it completes in is decided already) otherwise."""
        with self._slots, self._lock:
            seq = self._seq(job_id)
            view = self._view(seq)
            if view["state"] in ("cancelled", "completed", "rejected"):
                raise BadRequest("id", f"job {job_id!r} is {view['state']} already", 409)
            if seq in self._cancels:  # a second DELETE (a client retrying): said, not stored
                raise BadRequest("id", f"job {job_id!r} is cancelled already, from slot "
                                 f"{self._cancels[seq]} on", 409)
            loop = self._loop
            if (loop is not None and seq < loop.instance.I
                    and loop.state.completion[seq] >= 0):
                # its last slot is decided (and maybe running): it completes before any
                # boundary a cancellation could take effect at
                raise BadRequest("id", f"job {job_id!r} completes in slot "
                                 f"{int(loop.state.completion[seq])}, which is decided "
                                 "already", 409)
            slot = self.next_slot
            self.store.record_cancel(seq, slot)
            self._cancels[seq] = slot
            return self._view(seq)

    def _seq(self, job_id: str) -> int:
        seq = self._ids.get(job_id)
        if seq is None:
            raise BadRequest("id", f"no job {job_id!r}", 404)
        return seq

    def _instance(self, docs: list[dict]) -> Instance:
        return instance_from_dict({**self._cluster_doc, "jobs": docs})

    # ---- slots ---------------------------------------------------------------------------
    def _rebuild(self, instance: Instance) -> None:
        """A fresh policy and loop for ``instance``, replaying the decided slots."""
        loop = SlotLoop(instance, self.make_policy())
        decided, self._decided = self._decided, []
        self._decision = {}
        self.replans = []
        for stored in decided:
            got = self._step(loop)
            if (got.decisions != stored.decisions
                    or sorted(got.rows) != sorted(stored.rows)):
                raise ReplayMismatch(
                    f"slot {stored.t}: replaying the policy gave decisions {got.decisions} and "
                    f"{len(got.rows)} allocations, the state holds {stored.decisions} and "
                    f"{len(stored.rows)}")
            if self.closed_loop and stored.t <= self._finished:
                if stored.t not in self._measured:
                    raise ReplayMismatch(f"slot {stored.t}: it ran, and the state holds no "
                                         "measured progress for it (written open loop?)")
                got = self._settle(loop, got, self._measured[stored.t], self._behind[stored.t])
            self._append(got)
        self._loop = loop

    def _settle(self, loop: SlotLoop, slot: DecidedSlot, credit: dict[int, float],
                behind: list[dict]) -> DecidedSlot:
        """Closed loop: settle the loop's decided ``slot`` with ``credit`` and re-plan the jobs
        ``behind``; the slot with the jobs it completed."""
        from ..runtime.closed_loop import replan_behind

        out = loop.settle(credit)
        self.replans.extend(replan_behind(loop.policy, loop.state, slot.t, behind))
        return replace(slot, finished=out.finished)

    def _append(self, slot: DecidedSlot) -> None:
        self._decided.append(slot)
        for seq, admitted in slot.decisions.items():
            self._decision[seq] = (slot.t, admitted)

    def _credit(self, loop: SlotLoop, slot: DecidedSlot) -> None:
        """Add the worker-slots of progress slot ``slot`` gave its jobs (the loop credits a
        slot when it decides it; the views count it once it ran)."""
        by_job: dict[int, list] = {}
        inst = loop.instance
        for j, s, r, c in slot.rows:
            by_job.setdefault(j, []).append((s, r, c))
            self._used += c * (inst.worker_demand[j] if r == WORKER else inst.ps_demand[j])
        measured = self._measured.get(slot.t)
        for j, rows in by_job.items():
            got = (measured[j] if measured is not None and j in measured
                   else loop.progress_fn(loop.instance, j, rows, slot.t))
            self._work_done[j] = self._work_done.get(j, 0.0) + got

    def _step(self, loop: SlotLoop) -> DecidedSlot:
        state = loop.state
        t = loop.t + 1
        for seq, slot in self._cancels.items():
            # closed loop: a job cancelled while the slot it completed in ran has completed;
            # the cancellation is void (open loop, such a cancellation is refused with 409)
            if slot == t and not (self.closed_loop and state.completion[seq] >= 0):
                loop.cancel(seq)
        before = state.decided.copy()
        if self.closed_loop:  # settled by ``finish`` with the measured progress
            pending = loop.decide()
            rows, finished = list(pending.rows), ()
        else:
            out = loop.step()
            rows, finished = out.rows, out.finished
        new = np.flatnonzero(state.decided & ~before & ~state.cancelled)
        return DecidedSlot(t, {int(i): bool(state.admitted[i]) for i in new}, rows, finished)

    def advance(self) -> DecidedSlot:
        """Decide the next slot and write it down (module docstring); the slot that was decided
        but did not finish (a service killed while running it) is returned again, as stored."""
        with self._slots:
            with self._lock:
                if self._decided and self._decided[-1].t > self._finished:
                    return self._decided[-1]
                t = self.next_slot
                if t > self.cluster.horizon:
                    raise ValueError(f"t: the horizon ends at slot {self.cluster.horizon}")
                self._deciding = t  # from here on, a submission arrives after t
            try:
                instance = self.instance  # the jobs accepted before
                if self._loop is None:
                    self._rebuild(instance)
                elif self._loop.instance.I != instance.I:
                    if not self._loop.extend(instance):
                        self.replays += 1
                        self._rebuild(instance)
                assert self._loop is not None
                slot = self._step(self._loop)
                with self._lock:
                    self.store.record_slot(t, slot.decisions, slot.rows)
                    self._append(slot)
            finally:
                with self._lock:
                    self._deciding = None
            return slot

    def finish(self, t: int, record: dict | None = None,
               progress: dict[int, dict] | None = None,
               checkpoints: dict[int, Any] | None = None,
               left: dict[int, float] | None = None) -> None:
        """Slot ``t`` ran: write what the executor reports (its slot ``record``, per-job
        ``progress`` records and ``checkpoints``). Closed loop: ``left`` ``{seq: work units
        left}`` after the slot for every job with containers in it (0: the executor completed
        it; ``runtime.closed_loop.executor_left``) is credited and written beside the record."""
        with self._slots, self._lock:
            if t != self._finished + 1 or t > len(self._decided):
                raise ValueError(f"t: slot {t} is not the slot running (slot "
                                 f"{self._finished + 1})")
            if self.closed_loop:
                record = self._measure(t, record, left)
            elif left is not None:
                raise ValueError("left: measured progress is credited only in a closed loop")
            self.store.record_finished(t, list(self._decided[t - 1].finished), record,
                                       progress or {}, checkpoints or {})
            for seq, rec in (progress or {}).items():
                self._progress.setdefault(seq, []).append(rec)
            assert self._loop is not None  # ``advance`` built it
            self._credit(self._loop, self._decided[t - 1])
            self._finished = t

    def _measure(self, t: int, record: dict | None, left: dict[int, float] | None) -> dict:
        """Closed loop, slot ``t`` ran: credit ``left`` (``finish``), re-plan, and return the
        slot's record with its ``closed_loop`` entry."""
        from ..runtime.closed_loop import measured_credit

        loop = self._loop
        assert loop is not None and loop.pending is not None and loop.pending.t == t
        if left is None:
            raise ValueError(f"left: slot {t} of a closed loop is finished with the progress "
                             "the executor measured")
        credit, behind = measured_credit(loop.state, t, loop.pending.model, left)
        done = len(self.replans)
        self._decided[t - 1] = self._settle(loop, self._decided[t - 1], credit, behind)
        self._measured[t], self._behind[t] = credit, behind
        return {**(record or {}), "closed_loop": {
            "credit": {str(j): c for j, c in credit.items()}, "behind": behind,
            "replans": self.replans[done:]}}

    def step(self) -> DecidedSlot:
        """``advance`` then ``finish`` with nothing run: a policy-only slot."""
        slot = self.advance()
        self.finish(slot.t)
        return slot

    def checkpoints(self) -> dict[int, Any]:
        return self.store.checkpoints()

    # ---- views (the API's JSON) --------------------------------------------------------------
    def job_view(self, seq: int) -> dict:
        """Job ``seq`` as the API shows it (``GET /jobs/{id}``)."""
        with self._slots, self._lock:
            return self._view(seq)

    def _view(self, seq: int) -> dict:
        with self._lock:
            doc = self._docs[seq]
            job = self._jobs[seq]
            loop = self._loop if self._loop is not None and seq < self._loop.instance.I else None
            decision = self._decision.get(seq)
            now = self._now(seq)
            state, completion = self._state(seq, loop, now["workers"])
            attained = self._work_done.get(seq, 0.0) if loop is not None else 0.0
            plan = (loop.policy.plan(seq) if loop is not None and decision and decision[1]
                    else None)
            utility = (loop.instance.utility_of(seq, completion)
                       if loop is not None and state == "completed" else 0.0)
            predicted = max((r[0] for r in plan), default=None) if plan else None
            records = self._progress.get(seq, [])
            servers = self.cluster.servers
            return {
                "id": job.id, "seq": seq, "state": state, "arrival": job.arrival,
                "admitted": None if decision is None else decision[1],
                "decided_slot": None if decision is None else decision[0],
                "task": doc.get("task"),
                "work": job.work, "worker_slots_done": attained,
                "progress": min(1.0, attained / job.work) if job.work else 1.0,
                "plan": None if plan is None else [
                    {"slot": t, "server": servers[s].id, "role": ROLES[r], "count": c}
                    for t, s, r, c in plan],
                "predicted_completion": predicted,
                "predicted_utility": None if predicted is None or loop is None
                else loop.instance.utility_of(seq, predicted),
                "completion": completion if state == "completed" else None,
                "utility": utility,
                "now": now,
                "real": _real(records),
                "job": doc,
            }

    def _state(self, seq: int, loop: SlotLoop | None, workers: int) -> tuple[str, int | None]:
        """Job ``seq``'s state (``pending`` .. ``cancelling``) and its completion slot, if one
        is decided; ``loop``: the loop when it holds the job, ``workers`` it has now."""
        state, completion = "pending", None
        if loop is not None:
            st = loop.state
            decision = self._decision.get(seq)
            completion = int(st.completion[seq]) if st.completion[seq] >= 0 else None
            if st.cancelled[seq]:
                state = "cancelled"
            elif completion is not None and completion <= self._finished:
                state = "completed"
            elif decision is not None and not decision[1]:
                state = "rejected"
            elif decision is not None:  # admitted: workers in the slot now, or later
                state = "running" if workers else "scheduled"
            elif st.arrived[seq]:
                state = "waiting"
        # a cancellation a job's completion made void (closed loop: asked while its last slot
        # ran) leaves it completed
        if state not in ("cancelled", "completed") and seq in self._cancels:
            state = "cancelling"
        return state, completion

    def _plans_ahead(self, ahead: list[list[dict]]) -> None:
        """Fill ``ahead[t][s]`` (job id -> containers) with the plans of the admitted jobs, not
        cancelled, for the slots after the last decided (a policy that plans ahead; others have
        no plans)."""
        loop, start = self._loop, len(self._decided) + 1
        assert loop is not None
        admitted = [seq for seq, (_, a) in self._decision.items() if a]
        for seq in sorted(admitted):
            if loop.state.cancelled[seq] or seq in self._cancels:
                continue
            job_id = self._jobs[seq].id
            for t, s, _, c in loop.policy.plan(seq) or []:
                if t >= start:
                    cell = ahead[t][s]
                    cell[job_id] = cell.get(job_id, 0) + c

    def _now_by_job(self) -> dict[int, dict]:
        """Workers and PSs of every job with containers in the last slot decided (one pass
        over that slot's rows, kept until the next slot is decided)."""
        if not self._decided:
            return {}
        last = self._decided[-1]
        if self._now_rows[0] != last.t:
            by_job: dict[int, dict] = {}
            for j, _, r, c in last.rows:
                counts = by_job.setdefault(j, {"slot": last.t, "workers": 0, "ps": 0})
                counts["workers" if r == WORKER else "ps"] += c
            self._now_rows = (last.t, by_job)
        return self._now_rows[1]

    def _now(self, seq: int) -> dict:
        """Workers and PSs of the job in the last slot decided."""
        slot = self._decided[-1].t if self._decided else 0
        return dict(self._now_by_job().get(seq) or {"slot": slot, "workers": 0, "ps": 0})

    def jobs_view(self) -> list[dict]:
        with self._slots, self._lock:
            return [self._view(seq) for seq in range(len(self._docs))]

    def job_seq(self, job_id: str) -> int:
        with self._lock:
            return self._seq(job_id)

    def cluster_view(self) -> dict:
        """Per server and slot: capacity, committed (what the policy reserved, for a policy that
        plans ahead) and used (the containers of decided slots), the jobs in each decided slot
        (``jobs``) and the plans of admitted jobs for the slots after (``planned``)."""
        with self._slots, self._lock:
            inst = self.cluster
            T, S = inst.horizon, len(inst.servers)
            used = np.zeros((T + 1, S, inst.R))
            jobs: list[list[dict]] = [[{} for _ in range(S)] for _ in range(T + 1)]
            full = self.instance
            demand = {0: full.worker_demand, 1: full.ps_demand}
            for slot in self._decided:
                for j, s, r, c in slot.rows:
                    used[slot.t, s] += c * demand[int(r != WORKER)][j]
                    cell = jobs[slot.t][s]
                    job_id = self._jobs[j].id
                    cell[job_id] = cell.get(job_id, 0) + c
            committed = None
            ahead: list[list[dict]] = [[{} for _ in range(S)] for _ in range(T + 1)]
            if self._loop is not None:
                committed = self._loop.policy.committed()
                self._plans_ahead(ahead)
            servers = []
            for s, server in enumerate(inst.servers):
                entry = {"id": server.id, "pool": "worker" if s < inst.H else "ps",
                         "capacity": dict(server.capacity),
                         "used": {r: used[1:, s, n].tolist() for n, r in enumerate(inst.resources)},
                         "jobs": [jobs[t][s] for t in range(1, T + 1)],
                         "planned": [ahead[t][s] for t in range(1, T + 1)]}
                if committed is not None:
                    entry["committed"] = {r: committed[1:, s, n].tolist()
                                          for n, r in enumerate(inst.resources)}
                servers.append(entry)
            return {"horizon": T, "slot": self._finished, "decided": len(self._decided),
                    "resources": list(inst.resources), "policy": self.policy_name,
                    "servers": servers}

    def summary(self) -> dict:
        """Counts, utility and utilisation (``/metrics``, the dashboard's history and the slot
        line): the states ``job_view`` gives, without building every view."""
        with self._slots, self._lock:
            loop = self._loop
            count = dict.fromkeys(("pending", "waiting", "running", "scheduled", "rejected",
                                   "completed", "cancelled", "cancelling"), 0)
            earned: dict[int, float] = {}  # slot -> utility of the jobs completed in it
            workers = {j: v["workers"] for j, v in self._now_by_job().items()}
            total = 0.0
            for seq in range(len(self._jobs)):
                holds = loop if loop is not None and seq < loop.instance.I else None
                state, completion = self._state(seq, holds, workers.get(seq, 0))
                count[state] += 1
                if state == "completed":
                    assert holds is not None and completion is not None
                    u = holds.instance.utility_of(seq, completion)
                    earned[completion] = earned.get(completion, 0.0) + u
                    total += u
            inst = self.cluster
            cap = inst.capacity.sum(axis=0) * max(self._finished, 1)
            with np.errstate(invalid="ignore", divide="ignore"):
                util = np.where(cap > 0, self._used / np.where(cap > 0, cap, 1), 0.0)
            history = []
            admitted = rejected = 0
            utility = 0.0
            for slot in self._decided[:self._finished]:
                admitted += sum(slot.decisions.values())
                rejected += sum(not a for a in slot.decisions.values())
                utility += earned.get(slot.t, 0.0)
                history.append({"slot": slot.t, "admitted": admitted, "rejected": rejected,
                                "utility": utility})
            return {"slot": self._finished, "horizon": inst.horizon, "jobs": len(self._jobs),
                    "admitted": sum(a for _, a in self._decision.values()),
                    "rejected": count["rejected"], "running": count["running"],
                    "scheduled": count["scheduled"], "decided": len(self._decided),
                    "completed": count["completed"], "cancelled": count["cancelled"],
                    "pending": count["pending"] + count["waiting"],
                    "utility": total,
                    "utilisation": {r: float(util[n]) for n, r in enumerate(inst.resources)},
                    "loop": "closed" if self.closed_loop else "open",
                    "behind": sum(len(b) for b in self._behind.values()),
                    "replans": len(self.replans),
                    "history": history}


def stored_schedule(store: Store) -> tuple[Instance, Schedule]:
    """What a state file says the service did, as the package's one schedule format: the
    instance of its cluster and accepted jobs, and the schedule of the slots that ran (admissions
    as decided, allocations as stored; completions and utilities derived from them by
    ``ScheduleBuilder``), for ``model.validate``. Read from the store alone, not the policy."""
    meta = store.meta()
    inst = instance_from_dict({**json.loads(meta["cluster"]),
                               "jobs": [doc for _, _, _, doc, _ in store.jobs()]})
    builder = ScheduleBuilder(inst)
    for seq, (_, admitted) in store.decisions().items():
        if admitted:
            builder.admit(seq)
    for slot, _, finished_at in store.slots():
        if finished_at is not None:
            for seq, server, role, count in store.slot_rows(slot):
                builder.add(seq, slot, server, role, count)
    return inst, builder.build(meta["policy"])


def _real(records: list[dict]) -> dict | None:
    """What the executor reported of a job: its slots, mini-batches, accuracy."""
    if not records:
        return None
    last = records[-1]
    return {"slots": len(records),
            "minibatches": sum(r.get("real_minibatches", 0) for r in records),
            "planned_minibatches": sum(r.get("planned_minibatches", 0) for r in records),
            "val_accuracy": last.get("val_accuracy"), "completion_s": last.get("completion_s"),
            "restarts": sum(r.get("restarts", 0) for r in records)}


def _amounts(d: Mapping[str, float]) -> str:
    return ", ".join(f"{r} {v:g}" for r, v in d.items() if v)


def _split(text: str, default: str) -> tuple[str, str]:
    field, sep, message = text.partition(": ")
    return (field, message) if sep and " " not in field else (default, text)


def _job_field(err: FormatError, seq: int) -> BadRequest:
    """``jobs[seq].worker.bw: ...`` of the candidate instance -> ``worker.bw: ...``."""
    prefix = f"jobs[{seq}]"
    field = err.field
    if field.startswith(prefix):
        field = field[len(prefix):].lstrip(".") or "job"
    return BadRequest(field, err.message)


__all__ = ["BadRequest", "DecidedSlot", "ReplayMismatch", "Scheduler", "stored_schedule"]
