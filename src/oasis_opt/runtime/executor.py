"""Run a schedule for real: parameter-server training on Ray, slot by slot in wall-clock time.

``execute(instance, schedule, slot_seconds=S, address=None) -> ExecutionReport`` refuses what
cannot run before anything starts (``plan.plan_execution``: the validator must accept the
schedule; every job it runs names a known task with a valid config), starts Ray (a local one whose
node declares every logical server as a custom resource ``server:<id>``, or joins the cluster at
``address``, whose nodes must provide them), creates and warms the containers the schedule needs
on each server, then feeds an ``Executor`` one slot at a time. ``Executor.run_slot(t, rows)``
is the whole interface, so a service can drive it with allocations decided as jobs arrive.

**A slot** (rows ``(job, server, role, count)``):
1. a job whose allocation (servers, roles, counts) differs from its previous slot's is
   *restarted*: its containers go back to their servers' pools and it gets the slot's containers,
   workers assigned to it and PSs loaded with its checkpoint re-sharded for the new PS count
   (``split_state``); a job without rows in the slot is *paused* (containers released, its
   checkpoint kept); a job whose allocation is unchanged keeps its containers;
2. every running job trains the slot's planned mini-batches (``plan``) in synchronous PS
   iterations, all jobs concurrently (a few iterations of each in flight);
3. each job is *checkpointed*: the PSs' shards and optimiser states gathered and joined; a job
   whose mini-batches are all done completes (its validation accuracy is measured).

**What ran.** A slot's record reports what the containers did, not what the allocation asked:
``workers``, ``ps`` and ``servers`` count the containers that held the job, each on the server it
reported when it was assigned (the ``server:<id>`` resource Ray gave it) and on the Ray node it
reported (``servers``' ``node``: on a cluster, the machine); ``assigned`` the
containers assigned to it at the slot's start (0 when it kept its containers); ``iterations`` the
optimiser steps its PSs acknowledged, ``gradients`` the gradients they averaged in each of them
(the workers that took part) and ``real_minibatches`` their sum.

**Time.** Slot t is due at ``(t - 1) S`` seconds after slot 1 began and ends at ``max(t S, the end
of its work)``: real time paces slots but never cuts planned work, so the real progress of every
slot is exactly what the schedule planned, and a slot whose work takes longer than S *overruns*
(reported; the next slot starts late and may catch up). A job's real completion is the wall time
its last iteration ended; its real utility is f_i(ceil(completion_s / S) - a_i), the utility of the
slot of the wall-clock grid it really finished in. With ``catch_up=False`` (a service, whose
clients act between slots) a slot that is due when the previous one ended late starts then and
the grid moves with it: no slot is shortened to make up for an overrun.

**Failures.** A container that dies (``ray.kill``, a lost node) makes the job's slot fail; the
executor replaces the dead containers (new ones on the same servers), reloads the job from its last
checkpoint (the end of its previous slot) and runs the slot again, up to ``max_restarts`` times per
job and slot; the report lists every restart. The slot's mini-batches are the same, so the model
trained is the same as without the failure.

**Preemption.** Progress is counted as the simulator counts it (``plan.SlotProgress``): each
worker credits its server type's speed (a CPU-mode server its CPU speed), and the schedule's
preemption events (``stats.preemption``: degrade to CPU, promote, preempt, suspend, resize) go
through the simulator's ledger. An event of slot t, before the slot's work, rolls the job back
to the ledger's last checkpoint (the executor keeps the parameters of the end of every slot at
which the ledger checkpoints; a suspend or a promote writes one first, ``model.preemption.SAVES``),
loses the mini-batches trained since, and releases its containers (it restarts); the slots
after it run only the mini-batches left after the restart.
The job's slot record then holds ``event`` (the kind), ``lost_minibatches``, ``degraded``
(whether the job is in CPU mode), ``cpu_workers`` (its workers on CPU-mode servers),
``gross_units`` and ``credited_units`` (the ledger's); every record holds ``val_loss`` beside
``val_accuracy`` (a stop's rollback shows in them). So a degraded job trains on its CPU
servers at the CPU speed of the cost model, and the real progress of every slot is the
simulated one; ``runtime.replay`` follows the same rollbacks.

**Cost model.** For every (job, slot) the report puts the job's busy time (its first iteration
submitted to its last one done) beside the chunk-time model's prediction ``iterations x_i S /
M_i`` (x_i S seconds per M_i-batch chunk: the time per iteration the schedule assumed) and, when
the job's provenance holds a fitted speed model (``costmodel.profile``), ``iterations t(w, p)``.
"""
from __future__ import annotations

import collections
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from ..model.preemption import SAVES, cpu_servers
from ..model.schedule import PS, WORKER, Schedule
from .plan import (Allocation, JobPlan, SlotProgress, container_demand, iteration_sizes,
                   job_plan, plan_execution, slot_events, slot_rows)
from .ray_pool import SINGLE_THREAD_ENV, init_ray

SERVER_UNITS = 1000  # units of ``server:<id>`` a local Ray declares; a container holds one
# the start-up phases ``Executor.phases`` times (``on_phase`` names): starting or joining Ray,
# creating the containers (their processes up), compiling the tasks in them (and in the driver)
STARTUP_PHASES = {"ray": "Ray started", "containers": "containers created",
                  "compile": "tasks compiled"}
WINDOW = 2  # synchronous iterations of one job in flight (hides the driver's round trip)


def server_resource(server_id: str) -> str:
    """The Ray custom resource of a logical server."""
    return f"server:{server_id}"


class ExecutionError(RuntimeError):
    """Execution could not go on (a job failed more than ``max_restarts`` times in a slot, a bug
    inside a container, a cluster without the servers' resources)."""


class ContainerPool:
    """Idle containers per logical server id, shared by the executors given it (an experiment
    running several schedules on one Ray keeps its containers warm across them). ``close()``
    kills them all; an executor with its own pool closes it when it closes."""

    def __init__(self):
        self.idle: dict[str, list] = collections.defaultdict(list)
        self.actors: list = []

    def close(self) -> None:
        import ray

        for actor in self.actors:
            try:
                ray.kill(actor)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.actors.clear()
        self.idle.clear()


def start_ray(address: str | None, server_ids) -> bool:
    """``ray.init``: join ``address``, or start a local Ray whose node declares
    ``SERVER_UNITS`` of ``server:<id>`` for every id; nothing when Ray already runs in this
    process. Returns whether it started one (the caller then shuts it down)."""
    import ray

    if ray.is_initialized():
        return False
    # Ray renices its workers by +15 (background tasks behind the driver); here they are the
    # training itself, so they keep the niceness of the process that starts Ray
    init_ray(address, resources=None if address else
             {server_resource(i): SERVER_UNITS for i in server_ids},
             system_config=None if address else {"worker_niceness": 0})
    return True


@dataclass
class _Job:
    plan: JobPlan
    flat: np.ndarray  # checkpoint: flat parameters
    state: Any  # checkpoint: optimiser state of the whole vector (numpy leaves)
    done: int = 0  # mini-batches in the checkpoint
    worker_slots: int = 0  # cumulative planned worker-slots
    target: int = 0  # mini-batches after the slot being run (plan.SlotProgress)
    saved: tuple | None = None  # (flat, state, done) of the last checkpoint a stop keeps
    alloc: Allocation | None = None
    workers: list = field(default_factory=list)  # (server, actor)
    pss: list = field(default_factory=list)
    placed: list = field(default_factory=list)  # (server id, role, node id) containers reported
    slots: list = field(default_factory=list)  # per-slot records (dicts)
    restarts: list = field(default_factory=list)
    completion_slot: int | None = None
    completion_s: float | None = None
    val_accuracy: float | None = None
    val_loss: float | None = None


class _Run:
    """One job's iterations within one slot attempt."""

    def __init__(self, job: _Job, sizes: list[int], shard_refs: list):
        self.job, self.sizes, self.shard_refs = job, sizes, shard_refs
        self.next = 0
        self.n = job.done
        self.inflight: collections.deque = collections.deque()
        self.gradients: list[int] = []  # per acknowledged iteration: gradients its PSs averaged
        self.first = self.last = None


def _is_container_failure(err: BaseException) -> bool:
    import ray

    return isinstance(err, (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError,
                            ray.exceptions.OwnerDiedError))


class Executor:
    """Slot-by-slot execution on Ray (module docstring). Use as a context manager.

    ``on_iteration(executor, job, slot, iteration)`` is called before each synchronous iteration
    is submitted (``job`` the instance index, ``iteration`` counted from 0 within the slot);
    ``on_slot(record)`` after each slot with the slot's record. ``plans`` (``plan_execution``)
    are checked up front; a job without one gets it (and is checked) when it first runs.
    ``pool``: containers shared with other executors (default: its own, killed on close).
    ``catch_up``: whether slots after an overrun are shortened to regain the time grid (module
    docstring, **Time**). ``on_phase(name, seconds)`` is called as each start-up phase ends
    (``STARTUP_PHASES``: Ray started or joined, containers created, tasks compiled in them);
    ``phases`` holds their seconds (summed over ``warm`` calls). ``time_box``: no iteration is
    submitted after the slot's end on the time grid (``t S``), so a slot never overruns by more
    than its iterations in flight and a job that is slower than planned does fewer mini-batches
    than planned (its record's ``real_minibatches`` < ``planned_minibatches``); the backlog is
    carried to the job's next slot (its target is cumulative). What a closed loop runs
    (``runtime.closed_loop``); default False: every planned mini-batch runs (module docstring).
    """

    def __init__(self, instance, *, slot_seconds: float, address: str | None = None,
                 plans: Mapping[int, JobPlan] | None = None,
                 on_iteration: Callable | None = None, on_slot: Callable | None = None,
                 max_restarts: int = 3, window: int = WINDOW,
                 pool: ContainerPool | None = None, catch_up: bool = True,
                 on_phase: Callable[[str, float], None] | None = None,
                 time_box: bool = False):
        if not (isinstance(slot_seconds, (int, float)) and np.isfinite(slot_seconds)
                and slot_seconds > 0):
            raise ValueError(f"slot_seconds: expected a number > 0, got {slot_seconds!r}")
        self.instance = instance
        self.slot_seconds = float(slot_seconds)
        self.address = address
        self.on_iteration, self.on_slot, self.on_phase = on_iteration, on_slot, on_phase
        self.phases: dict[str, float] = {}
        self.slot_loads: list[float] = []  # 1-minute load average as each slot ended
        self.max_restarts, self.window = max_restarts, window
        self.catch_up = catch_up
        self.time_box = time_box
        self._slot_end = float("inf")  # the time-boxed slot's end (perf_counter seconds)
        self._plans = dict(plans or {})
        self._jobs: dict[int, _Job] = {}
        self._progress = SlotProgress(instance)
        self._cpu = cpu_servers(instance)
        self._own_pool = pool is None
        self._pool = ContainerPool() if pool is None else pool
        self._ray = None
        self._owned = False
        self._origin: float | None = None
        self._last_slot = 0
        self.slots: list[dict] = []
        self.startup_s = 0.0
        self._data: dict[int, Any] = {}

    # ---- Ray and the containers ------------------------------------------------------------
    def __enter__(self) -> "Executor":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        """Start (or join) Ray; a Ray already running in this process is used as it is."""
        from .._extras import require

        t0 = time.perf_counter()
        self._ray = require("ray", extra="ray", feature="executing schedules")
        self._owned = start_ray(self.address, [s.id for s in self.instance.servers])
        self._phase("ray", time.perf_counter() - t0)

    def _phase(self, name: str, seconds: float) -> None:
        self.phases[name] = self.phases.get(name, 0.0) + seconds
        if self.on_phase is not None:
            self.on_phase(name, seconds)

    def close(self) -> None:
        """Give the containers back (kill them, with its own pool); shut Ray down if this
        executor started it."""
        if self._ray is None:
            return
        for job in self._jobs.values():
            self._release(job)
        if self._own_pool:
            self._pool.close()
        if self._owned:
            self._ray.shutdown()
        self._ray, self._owned = None, False

    def check_resources(self, demand: np.ndarray) -> None:
        """``ExecutionError`` unless the cluster provides ``demand[s]`` units of every server's
        resource (containers the schedule ever puts on it at once)."""
        have = self._ray.cluster_resources()
        for s, need in enumerate(np.asarray(demand).tolist()):
            name = server_resource(self.instance.servers[s].id)
            if need and have.get(name, 0) < need:
                raise ExecutionError(
                    f"the Ray cluster provides {have.get(name, 0):g} of the resource {name!r}, "
                    f"the schedule needs {need} (start the node of that server with "
                    f"ray start --resources='{{\"{name}\": {max(need, 64)}}}')")

    def _new_container(self, server: int):
        from .containers import Container

        actor = self._ray.remote(Container).options(
            resources={server_resource(self.instance.servers[server].id): 1}, num_cpus=0,
            max_restarts=0, runtime_env={"env_vars": dict(SINGLE_THREAD_ENV)}).remote()
        self._pool.actors.append(actor)
        return actor

    def _idle(self, server: int) -> list:
        return self._pool.idle[self.instance.servers[server].id]

    def warm(self, demand: np.ndarray, ps_counts: Mapping[int, list[int]] | None = None) -> float:
        """Create ``demand[s]`` containers on every server s and load and compile the tasks of
        the jobs planned so far in them (before slot 1, so slots do not pay for it): a gradient
        on worker servers, the optimiser step of each PS count ``ps_counts[job]`` (default 1)
        on PS servers. Returns the seconds it took."""
        ray = self._ray
        t0 = time.perf_counter()
        self.check_resources(demand)
        plans = list(self._plans.values())
        specs = [p.spec(ps=1) for p in plans]
        ps_counts = dict(ps_counts or {})
        created = []
        for s, n in enumerate(np.asarray(demand).tolist()):
            idle = self._idle(s)
            new = [self._new_container(s) for _ in range(n - len(idle))]
            idle += new
            created += new
        ray.get([actor.ping.remote() for actor in created])  # the containers' processes are up
        t1 = time.perf_counter()
        self._phase("containers", t1 - t0)
        refs = []
        for s, n in enumerate(np.asarray(demand).tolist()):
            sizes = [ps_counts.get(p.index, [1]) if s >= self.instance.H else [] for p in plans]
            refs += [actor.warm.remote(specs, sizes) for actor in self._idle(s)[:max(n, 0)]]
        for p in plans:  # the driver evaluates every checkpoint: compile that too
            data = self._driver_data(p)
            data.model.evaluate(data.model.init(0), data.split.x_val, data.split.y_val)
        ray.get(refs)
        self._phase("compile", time.perf_counter() - t1)
        self.startup_s += time.perf_counter() - t0
        return time.perf_counter() - t0

    def _acquire(self, server: int):
        idle = self._idle(server)
        return (server, idle.pop() if idle else self._new_container(server))

    def _release(self, job: _Job) -> None:
        for server, actor in job.workers + job.pss:
            self._idle(server).append(actor)
        job.workers, job.pss, job.alloc, job.placed = [], [], None, []

    def _discard(self, job: _Job) -> None:
        """After a failure: kill the job's dead containers, return the live ones to the pools."""
        ray = self._ray
        for server, actor in job.workers + job.pss:
            try:
                ray.get(actor.ping.remote(), timeout=60)
                self._idle(server).append(actor)
            except Exception:  # noqa: BLE001 - dead (or unreachable): never reuse it
                try:
                    ray.kill(actor)
                except Exception:  # noqa: BLE001
                    pass
        job.workers, job.pss, job.alloc, job.placed = [], [], None, []

    def containers(self, job: int) -> dict[str, list]:
        """The actors serving job ``job`` now: ``{"workers": [...], "ps": [...]}``."""
        j = self._jobs.get(job)
        return {"workers": [a for _, a in j.workers] if j else [],
                "ps": [a for _, a in j.pss] if j else []}

    # ---- jobs ------------------------------------------------------------------------------
    def _driver_data(self, plan: JobPlan):
        from .containers import _JobData

        if plan.index not in self._data:
            self._data[plan.index] = _JobData(plan.spec(ps=1))
        return self._data[plan.index]

    def _job(self, i: int) -> _Job:
        if i not in self._jobs:
            import jax

            from ..training.tasks import ravel

            plan = self._plans.get(i) or job_plan(self.instance, i)
            self._plans[i] = plan
            data = self._driver_data(plan)
            flat = ravel(data.model.init(plan.task["seed"]))[0]
            state = jax.tree.map(np.asarray, data.model.optimizer.init(flat))
            self._jobs[i] = _Job(plan, np.asarray(flat), state)
            self._jobs[i].saved = (self._jobs[i].flat, state, 0)
        return self._jobs[i]

    def extend(self, instance) -> None:
        """Go on with ``instance``: the same servers, and the jobs so far as its first jobs (a
        service adds the jobs that arrived); ``ValueError("instance: ...")`` otherwise."""
        if instance.servers != self.instance.servers:
            raise ValueError("instance: the servers differ from the executor's")
        if tuple(instance.jobs[:self.instance.I]) != tuple(self.instance.jobs):
            raise ValueError(f"instance: its first {self.instance.I} jobs are not the "
                             "executor's jobs")
        self._progress.extend(instance)
        self.instance = instance

    @property
    def jobs(self) -> Mapping[int, _Job]:
        """The jobs that have run so far, by instance index (their checkpoints and records)."""
        return self._jobs

    def job_records(self, job: int) -> list[dict]:
        """The per-slot records of job ``job`` so far (the report's ``jobs[].slots`` rows)."""
        return list(self._jobs[job].slots) if job in self._jobs else []

    def snapshot(self, job: int) -> dict:
        """Job ``job``'s checkpoint and counters as plain data (numpy arrays, numbers, lists):
        what ``restore`` needs to train on from here in another executor (a service restarted
        from its state file)."""
        j = self._jobs[job]
        return {"flat": j.flat, "state": j.state, "done": j.done, "worker_slots": j.worker_slots,
                "slots": list(j.slots), "restarts": list(j.restarts),
                "completion_slot": j.completion_slot, "completion_s": j.completion_s,
                "val_accuracy": j.val_accuracy, "val_loss": j.val_loss,
                "units": self._progress.units(job)}

    def restore(self, job: int, snapshot: Mapping[str, Any]) -> None:
        """Take job ``job`` up where ``snapshot`` (``Executor.snapshot``) left it."""
        plan = self._plans.get(job) or job_plan(self.instance, job)
        self._plans[job] = plan
        self._jobs[job] = _Job(plan, **{k: snapshot[k] for k in (
            "flat", "state", "done", "worker_slots", "slots", "restarts", "completion_slot",
            "completion_s", "val_accuracy", "val_loss")})
        self._jobs[job].saved = (snapshot["flat"], snapshot["state"], snapshot["done"])
        # a snapshot written before ``units``: worker-slots at the job's speed (no events then)
        self._progress.set_units(job, snapshot.get("units", snapshot["worker_slots"] * plan.unit))

    def final_params(self, job: int) -> np.ndarray:
        """The flat parameters of job ``job``'s last checkpoint."""
        return self._jobs[job].flat

    # ---- one slot --------------------------------------------------------------------------
    def run_slot(self, t: int, rows, events=()) -> dict:
        """Run slot ``t`` with allocations ``rows`` = ``[(job, server, role, count)]``; returns
        the slot's record (and appends it to ``self.slots``). Slots must increase.

        ``events``: ``[(job, kind)]``, the schedule's preemption events of slot ``t``
        (``model.preemption``; ``plan.slot_events``), applied before the slot's work: the job
        goes back to its last checkpoint (module docstring, **Preemption**)."""
        if t <= self._last_slot:
            raise ValueError(f"t: slots run in increasing order (slot {self._last_slot} ran)")
        if self._ray is None:
            raise RuntimeError("Executor used outside its 'with' block (or before start())")
        if self._origin is None:
            self._origin = time.perf_counter() - (t - 1) * self.slot_seconds
        self._last_slot = t
        due = self._origin + (t - 1) * self.slot_seconds
        late = time.perf_counter() - due
        if not self.catch_up and late > 0:  # the grid moves: this slot gets its whole S
            self._origin += late
            due += late
        _sleep_until(due)
        begin = time.perf_counter()
        self._slot_end = self._origin + t * self.slot_seconds if self.time_box else float("inf")
        groups: dict[int, list] = collections.defaultdict(list)
        for job, server, role, count in rows:
            if count > 0:
                groups[int(job)].append((int(server), int(role), int(count)))
        allocs = {j: Allocation.of(r) for j, r in groups.items()}
        for j, job in self._jobs.items():  # paused jobs give their containers back
            if j not in allocs and job.alloc is not None:
                self._release(job)
        stopped = {int(j): (kind, self._stop(t, int(j), kind)) for j, kind in events}
        jobs = {j: self._job(j) for j in allocs}
        records = {}
        checkpointed = set()
        for j, alloc in allocs.items():
            job = jobs[j]
            if job.completion_slot is not None:
                raise ExecutionError(f"slot {t}: allocation for job {job.plan.id!r}, which "
                                     f"completed in slot {job.completion_slot}")
            job.worker_slots += alloc.workers
            credit = self._progress.credit(job.plan, alloc.rows, t)
            job.target = credit.target
            if credit.checkpointed:
                checkpointed.add(j)
            kind, lost = stopped.get(j, (None, 0))
            # workers, ps, servers, iterations, real_minibatches: filled from what ran
            records[j] = {"slot": t, "workers": 0, "ps": 0, "servers": [], "assigned": 0,
                          "planned_worker_slots": alloc.workers,
                          "planned_minibatches": job.target - job.done,
                          "planned_iterations": len(iteration_sizes(job.target - job.done,
                                                                    alloc.workers)),
                          "restart_s": 0.0, "restarts": 0,
                          "event": kind, "lost_minibatches": lost,
                          "degraded": bool(self._progress.ledger.degraded[j]),
                          "cpu_workers": sum(c for s, r, c in alloc.rows
                                             if r == WORKER and self._cpu[s]),
                          "gross_units": credit.gross, "credited_units": credit.credited}
        pending = dict(allocs)
        attempt = 0
        while pending:
            failed = self._attempt(t, {j: (jobs[j], a) for j, a in pending.items()}, records)
            for j, cause in failed.items():
                jobs[j].restarts.append({"slot": t, "cause": cause})
                records[j]["restarts"] += 1
                self._discard(jobs[j])
            attempt += 1
            if failed and attempt > self.max_restarts:
                j = next(iter(failed))
                raise ExecutionError(f"slot {t}: job {jobs[j].plan.id!r} failed "
                                     f"{attempt} times (last: {failed[j]})")
            pending = {j: allocs[j] for j in failed}
        work_end = time.perf_counter()
        for j, rec in records.items():
            job = jobs[j]
            rec["val_accuracy"], rec["val_loss"] = job.val_accuracy, job.val_loss
            if j in checkpointed:  # the ledger's checkpoint: what the next stop keeps
                job.saved = (job.flat, job.state, job.done)
            job.slots.append(rec)
        _sleep_until(self._origin + t * self.slot_seconds)
        end = time.perf_counter()
        record = {"slot": t, "start_s": begin - self._origin, "work_end_s": work_end - self._origin,
                  "end_s": end - self._origin,
                  "overrun_s": max(0.0, work_end - self._origin - t * self.slot_seconds),
                  "jobs": len(allocs), "workers": sum(r["workers"] for r in records.values()),
                  "ps": sum(r["ps"] for r in records.values())}
        self.slots.append(record)
        self.slot_loads.append(os.getloadavg()[0])  # the machine's load: real time depends on it
        if self.on_slot is not None:
            self.on_slot(record)
        return record

    def _attempt(self, t: int, pending: dict[int, tuple[_Job, Allocation]],
                 records: dict[int, dict]) -> dict[int, str]:
        """Assign, iterate, checkpoint the ``pending`` jobs once; ``{job: cause}`` of those
        whose containers failed."""
        from ..training.tasks import split_state

        ray = self._ray
        failed: dict[int, str] = {}
        # 1. (re)assign containers where the allocation changed: release them all first, so a
        # job can take over a container another job leaves on the same server
        changed = [j for j, (job, alloc) in pending.items()
                   if not (job.alloc == alloc and job.workers)]
        for j in changed:
            self._release(pending[j][0])
        assign: dict[int, list] = {}
        for j in changed:
            job, alloc = pending[j]
            job.workers = [self._acquire(s) for s in alloc.servers(WORKER)]
            job.pss = [self._acquire(s) for s in alloc.servers(PS)]
            job.alloc = alloc
            spec = job.plan.spec(ps=alloc.ps)
            bounds = _bounds(job.flat.size, alloc.ps)
            states = split_state(job.state, bounds)
            assign[j] = ([a.assign_worker.remote(spec) for _, a in job.workers]
                         + [a.assign_ps.remote(spec, job.flat[lo:hi], st)
                            for (_, a), lo, hi, st in zip(job.pss, bounds[:-1], bounds[1:],
                                                          states)])
        for j, seconds, err in _wait_groups(ray, assign):
            records[j]["restart_s"] += seconds
            if err is not None:
                failed[j] = _cause(err, "restarting its containers")
                continue
            job = pending[j][0]
            where = ray.get(assign[j])  # (the server it holds, its node) of each container
            job.placed = ([(w, "worker", n) for w, n in where[:len(job.workers)]]
                          + [(w, "ps", n) for w, n in where[len(job.workers):]])
            records[j]["assigned"] = len(where)
        # 2. the slot's iterations, all jobs at once
        runs = {}
        for j, (job, alloc) in pending.items():
            if j in failed:
                continue
            bounds = _bounds(job.flat.size, alloc.ps)
            shard_refs = [ray.put(job.flat[lo:hi]) for lo, hi in zip(bounds[:-1], bounds[1:])]
            runs[j] = _Run(job, iteration_sizes(job.target - job.done, alloc.workers),
                           shard_refs)
        failed.update(self._iterate(t, runs))
        for j, run in runs.items():
            if j not in failed:
                rec = records[j]
                placed = collections.Counter(run.job.placed)
                rec["workers"] = sum(c for (_, role, _), c in placed.items() if role == "worker")
                rec["ps"] = sum(c for (_, role, _), c in placed.items() if role == "ps")
                rec["servers"] = [{"server": server, "role": role, "count": c, "node": node}
                                  for (server, role, node), c in placed.items()]
                rec["iterations"] = len(run.gradients)
                rec["gradients"] = list(run.gradients)
                rec["real_minibatches"] = sum(run.gradients)
                rec["busy_s"] = (run.last - run.first) if run.first is not None else 0.0
        # 3. checkpoint
        gather = {j: [a.checkpoint.remote() for _, a in runs[j].job.pss] for j in runs
                  if j not in failed}
        for j, seconds, err in _wait_groups(ray, gather):
            if err is not None:
                failed[j] = _cause(err, "checkpointing")
                continue
            self._checkpoint(t, runs[j], ray.get(gather[j]))
            records[j]["checkpoint_s"] = seconds
        return failed

    def _stop(self, t: int, j: int, kind: str) -> int:
        """A preemption event of job ``j`` at the start of slot ``t``: the ledger records it, the
        job goes back to its last checkpoint (its containers released: it restarts); returns
        the mini-batches lost. ``ExecutionError`` on an impossible event."""
        job = self._job(j)
        if kind in SAVES:  # the job writes a checkpoint before it stops (model.preemption)
            job.saved = (job.flat, job.state, job.done)
        try:
            keep = self._progress.stop(job.plan, t, kind)
        except ValueError as err:
            raise ExecutionError(f"slot {t}: event {kind!r} of job {job.plan.id!r}: "
                                 f"{err}") from None
        flat, state, done = job.saved
        if keep != done:  # the ledger and the executor's checkpoints disagree: a bug
            raise ExecutionError(f"slot {t}: job {job.plan.id!r} goes back to {keep} "
                                 f"mini-batches, its last checkpoint holds {done}")
        lost = job.done - done
        job.flat, job.state, job.done = flat, state, done
        self._release(job)
        return lost

    def _checkpoint(self, t: int, run: _Run, parts) -> None:
        import jax

        from ..training.tasks import join_states

        job = run.job
        job.flat = np.concatenate([shard for shard, _ in parts])
        job.state = jax.tree.map(np.asarray, join_states([state for _, state in parts]))
        job.done = run.n
        data = self._driver_data(job.plan)
        acc, loss = data.model.evaluate(data.unflatten(job.flat), data.split.x_val,
                                        data.split.y_val)
        job.val_accuracy, job.val_loss = float(acc), float(loss)
        if job.done >= job.plan.total_minibatches:
            job.completion_slot = t
            job.completion_s = (run.last if run.last is not None else time.perf_counter()) \
                - self._origin
            self._release(job)

    def _iterate(self, t: int, runs: dict[int, _Run]) -> dict[int, str]:
        ray = self._ray
        failed: dict[int, str] = {}

        def submit(j: int, run: _Run) -> None:
            while (len(run.inflight) < self.window and run.next < len(run.sizes)
                   and time.perf_counter() < self._slot_end):
                if self.on_iteration is not None:
                    self.on_iteration(self, j, t, run.next)
                size = run.sizes[run.next]
                p = len(run.job.pss)
                grads = [actor.gradient.options(num_returns=p).remote(run.n + rank,
                                                                      *run.shard_refs)
                         for rank, (_, actor) in enumerate(run.job.workers[:size])]
                if p == 1:
                    grads = [[g] for g in grads]
                outs = [actor.step.options(num_returns=2).remote(*[g[k] for g in grads])
                        for k, (_, actor) in enumerate(run.job.pss)]
                run.shard_refs = [o[0] for o in outs]
                run.inflight.append([o[1] for o in outs])
                if run.first is None:
                    run.first = time.perf_counter()
                run.n += size
                run.next += 1

        for j, run in runs.items():
            submit(j, run)
        while True:
            heads = {run.inflight[0][-1]: j for j, run in runs.items()
                     if run.inflight and j not in failed}
            if not heads:
                break
            ready, _ = ray.wait(list(heads), num_returns=1)
            for ref in ready:
                j = heads[ref]
                run = runs[j]
                acks = run.inflight.popleft()
                try:
                    averaged = ray.get(acks)  # per PS: the gradients it averaged
                except Exception as err:  # noqa: BLE001 - sorted out by _cause
                    failed[j] = _cause(err, "training")
                    continue
                run.gradients.append(min(averaged))
                run.last = time.perf_counter()
                submit(j, run)
        return failed

    # ---- the report ------------------------------------------------------------------------
    def report(self, schedule: Schedule | None = None, *, policy: str | None = None):
        """The ``oasis-opt/execution@1`` report of what ran (``report.build_report``)."""
        from .report import build_report

        return build_report(self, schedule, policy=policy)


def _bounds(size: int, ps: int) -> np.ndarray:
    from ..training.shards import shard_bounds

    return shard_bounds(size, ps)


def _cause(err: BaseException, during: str) -> str:
    if not _is_container_failure(err):
        raise ExecutionError(f"a container failed while {during}: {type(err).__name__}: "
                             f"{' '.join(str(err).split())[:400]}") from err
    return f"a container died while {during} ({type(err).__name__})"


def _wait_groups(ray, groups: dict[int, list]):
    """Yield ``(key, seconds until all its refs were ready, error or None)`` as groups finish."""
    t0 = time.perf_counter()
    left = {k: set(refs) for k, refs in groups.items()}
    owner = {ref: k for k, refs in groups.items() for ref in refs}
    for k in [k for k, refs in left.items() if not refs]:
        del left[k]
        yield k, 0.0, None
    pending = list(owner)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        for ref in ready:
            k = owner[ref]
            left[k].discard(ref)
            if not left[k]:
                err = None
                try:
                    ray.get(groups[k])
                except Exception as e:  # noqa: BLE001
                    err = e
                yield k, time.perf_counter() - t0, err


def _sleep_until(deadline: float) -> None:
    delay = deadline - time.perf_counter()
    if delay > 0:
        time.sleep(delay)


def execute(instance, schedule: Schedule, *, slot_seconds: float, address: str | None = None,
            on_iteration: Callable | None = None, on_slot: Callable | None = None,
            max_restarts: int = 3, pool: ContainerPool | None = None,
            on_phase: Callable[[str, float], None] | None = None):
    """Run ``schedule`` for real and return its ``ExecutionReport`` (module docstring).
    ``on_phase(name, seconds)``: as each start-up phase ends (``Executor``).

    ``ExecutionRefused`` (a ``FormatError`` naming the field) before anything starts when the
    schedule or a job's task cannot run; ``ExecutionError`` when execution cannot go on.
    """
    plans = plan_execution(instance, schedule)
    rows = slot_rows(schedule)
    events = slot_events(schedule, instance)
    ps = schedule.allocations.ps_per_job_slot(instance.I, instance.horizon)
    ps_counts = {j: sorted(set(ps[j][ps[j] > 0].tolist())) for j in plans}
    with Executor(instance, slot_seconds=slot_seconds, address=address, plans=plans,
                  on_iteration=on_iteration, on_slot=on_slot,
                  max_restarts=max_restarts, pool=pool, on_phase=on_phase) as ex:
        ex.warm(container_demand(schedule, len(instance.servers)), ps_counts)
        last = max([*rows, *events]) if rows or events else 0
        for t in range(1, last + 1):
            ex.run_slot(t, rows.get(t, []), events.get(t, ()))
        return ex.report(schedule)
