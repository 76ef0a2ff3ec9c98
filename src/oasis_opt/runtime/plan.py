"""What a schedule asks of real training: jobs' tasks checked, worker-slots turned into mini-batches.

**From worker-slots to training steps.** Job i's train set (its task's ``split(data_seed)``) is
cut into its N_i data chunks (``Split.chunk(c, N_i)``, contiguous, sizes differing by at most one).
A pass over a chunk is M_i = floor(len(train) / (N_i * batch_size)) mini-batches of the config's
``batch_size`` (at least 1; the remainder of a chunk is left out of that pass, a different part in
every epoch). The instance's E_i epochs are E_i passes over every chunk: E_i N_i M_i mini-batches.
x_i worker-slots train one chunk (the paper's definition of ``chunk_time``), so **one
worker-slot is M_i / x_i mini-batches** and the job's ceil(E_i N_i x_i) worker-slots cover all
E_i N_i M_i of them. After slots 1..t with w_1 + ... + w_t = c worker-slots the executor has run
exactly

    B_i(t) = E_i N_i M_i                          if c >= ceil(E_i N_i x_i) (the job is done)
             min(E_i N_i M_i, floor(c M_i / x_i))   otherwise

mini-batches, and slot t runs the q = B_i(t) - B_i(t-1) new ones in synchronous iterations of
the slot's k workers: floor(q / k) iterations in which every worker computes one mini-batch's
gradient, then one with the q mod k remaining workers. Real time never changes this count: a
slot whose work takes longer than its length stretches (``executor``).

**Which mini-batch.** Mini-batch n = 0, 1, ... of the job is batch m of chunk c in epoch e, with
e = n // (N_i M_i), r = n mod (N_i M_i), c = r mod N_i, m = r // N_i: consecutive mini-batches
go to consecutive chunks, so the k <= N_i workers of an iteration train k different chunks
(data parallelism). Batch m of chunk c in epoch e holds the chunk's examples at positions
``perm[m b:(m+1) b]`` of the permutation ``default_rng([seed, e, c]).permutation(len(chunk))``.
The whole training run is thus a function of the schedule's worker counts and the task's seeds,
whatever the placement, the PS count, the timing or a restart.

**Server types and preemption** (``SlotProgress``). With accelerator types a slot's progress is
counted as the simulator counts it: each worker credits its server type's speed s_ig in work
units (u_i per worker-slot; a CPU-mode server its CPU speed), and the job's W_i = ceil(E_i N_i
x_i u_i) units cover its E_i N_i M_i mini-batches, M_i / (x_i u_i) per unit. A schedule's
preemption events (``model.preemption``: degrade, promote, preempt, ...) go through the
simulator's own ledger: a stop at the start of slot t rolls the job back to its last checkpoint
(the end of every c_i-th slot with workers since its last (re)start; a suspend or a promote
writes one at the stop), losing the mini-batches trained since, and the slots after it are
credited only the part after the restart (after a promote, the write too). So after
each slot the job has exactly

    B_i = min(E_i N_i M_i, floor(P_i M_i / (x_i u_i)))   (E_i N_i M_i once P_i >= W_i)

mini-batches, P_i the ledger's credited units net of lost work: the simulated progress. Without
types and events P_i is the cumulative worker-slots, the formula above.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np

from ..training.shards import shard_bounds
from ..model.checks import FormatError
from ..model.numerics import CHUNK_EPS
from ..model.schedule import PS, WORKER, Schedule


class ExecutionRefused(FormatError):
    """The executor will not start: a job's task is missing or unknown, a config is outside the
    task's space, a schedule is invalid, ... ``field`` names the culprit (``jobs[3].task.name``)."""


@dataclass(frozen=True)
class JobPlan:
    """One job's real training: task spec and the worker-slot -> mini-batch mapping."""

    index: int
    id: str
    task: Mapping[str, Any]  # name, config (checked), seed, data_seed
    chunks: int  # N_i
    minibatches: int  # M_i, mini-batches per pass over one chunk
    batch_size: int
    chunk_time: float  # x_i
    work: int  # ceil(E_i N_i x_i) worker-slots
    total_minibatches: int  # E_i N_i M_i
    train_size: int
    unit: int = 1  # u_i, work units per worker-slot (the job's V100-equivalent speed)

    @property
    def minibatches_per_worker_slot(self) -> float:
        return self.minibatches / self.chunk_time

    def planned_minibatches(self, worker_slots: float) -> int:
        """B_i after ``worker_slots`` cumulative worker-slots (module docstring)."""
        if worker_slots >= self.work:
            return self.total_minibatches
        return min(self.total_minibatches,
                   int(math.floor(worker_slots * self.minibatches / self.chunk_time + CHUNK_EPS)))

    def minibatches_after(self, units: float) -> int:
        """B_i after ``units`` credited work units, net of lost work (module docstring)."""
        if units >= self.work:
            return self.total_minibatches
        return min(self.total_minibatches, max(0, int(math.floor(
            units * self.minibatches / (self.chunk_time * self.unit) + CHUNK_EPS))))

    def spec(self, ps: int) -> dict:
        """What a container needs to act for this job with ``ps`` PSs (plain data, picklable)."""
        return {"job": self.id, **self.task, "chunks": self.chunks,
                "minibatches": self.minibatches, "ps": ps}


def iteration_sizes(minibatches: int, workers: int) -> list[int]:
    """Workers per synchronous iteration for ``minibatches`` new mini-batches on ``workers``."""
    full, rest = divmod(minibatches, workers)
    return [workers] * full + ([rest] if rest else [])


def batch_position(n: int, chunks: int, minibatches: int) -> tuple[int, int, int]:
    """(epoch, chunk, batch within the chunk) of the job's mini-batch ``n``."""
    e, r = divmod(n, chunks * minibatches)
    m, c = divmod(r, chunks)
    return e, c, m


@functools.lru_cache(maxsize=4096)
def _permutation(seed: int, epoch: int, chunk: int, size: int) -> np.ndarray:
    p = np.random.default_rng([seed, epoch, chunk]).permutation(size)
    p.setflags(write=False)
    return p


def minibatch_indices(n: int, *, seed: int, chunks: int, minibatches: int, batch_size: int,
                      chunk_bounds: np.ndarray) -> np.ndarray:
    """Indices into the train set of the job's mini-batch ``n`` (module docstring)."""
    e, c, m = batch_position(n, chunks, minibatches)
    lo, hi = int(chunk_bounds[c]), int(chunk_bounds[c + 1])
    return lo + _permutation(seed, e, c, hi - lo)[m * batch_size:(m + 1) * batch_size]


@functools.lru_cache(maxsize=None)
def train_size(task_name: str, data_seed: int) -> int:
    from ..training.tasks import get_task

    return len(get_task(task_name).split(data_seed).y_train)


def job_plan(instance, i: int) -> JobPlan:
    """The job's plan; ``ExecutionRefused`` naming the field when its task cannot run."""
    from ..training.tasks import TASKS

    job = instance.jobs[i]
    where = f"jobs[{i}].task"
    if job.task is None:
        raise ExecutionRefused(where, f"job {job.id!r} names no training task (every job a "
                               "schedule runs needs one: {\"name\", \"config\"})")
    name = job.task["name"]
    if name not in TASKS:
        raise ExecutionRefused(f"{where}.name", f"unknown task {name!r} (known: "
                               f"{', '.join(TASKS)})")
    try:
        config = TASKS[name].space.check(job.task["config"])
    except ValueError as e:
        raise ExecutionRefused(f"{where}.{str(e).partition(': ')[0]}",
                               str(e).partition(": ")[2]) from None
    seed, data_seed = job.task.get("seed", 0), job.task.get("data_seed", 0)
    named = job.task.get("dataset")
    if named is not None:  # the preprocessing step's output (training.dataset)
        from ..training.dataset import dataset_digest

        want = dataset_digest(name, data_seed)
        if named != want:
            raise ExecutionRefused(f"{where}.dataset", f"names dataset {named!r}, but data "
                                   f"seed {data_seed} of task {name!r} gives {want!r} (`oasis-"
                                   f"opt automl dataset {name} --seed {data_seed}` describes it)")
    size = train_size(name, data_seed)
    batch = config["batch_size"]
    minibatches = size // (job.chunks * batch)
    if minibatches < 1:
        raise ExecutionRefused(f"{where}.config.batch_size",
                               f"{job.chunks} chunks of the {size} training examples of "
                               f"{name!r} hold fewer than one mini-batch of {batch}")
    spec = {"name": name, "config": config, "seed": seed, "data_seed": data_seed}
    return JobPlan(i, job.id, spec, job.chunks, minibatches, batch, job.chunk_time, job.work,
                   job.epochs * job.chunks * minibatches, size, job.unit)


@dataclass(frozen=True)
class Allocation:
    """A job's containers in one slot: ``(server index, role, count)`` sorted, counts > 0."""

    rows: tuple[tuple[int, int, int], ...]

    @staticmethod
    def of(rows: Iterable[tuple[int, int, int]]) -> "Allocation":
        merged: dict[tuple[int, int], int] = {}
        for server, role, count in rows:
            merged[(server, role)] = merged.get((server, role), 0) + int(count)
        return Allocation(tuple(sorted((s, r, c) for (s, r), c in merged.items() if c > 0)))

    def count(self, role: int) -> int:
        return sum(c for _, r, c in self.rows if r == role)

    @property
    def workers(self) -> int:
        return self.count(WORKER)

    @property
    def ps(self) -> int:
        return self.count(PS)

    def servers(self, role: int) -> list[int]:
        """One server index per container of ``role``, in server order."""
        return [s for s, r, c in self.rows if r == role for _ in range(c)]


def slot_units(instance, job: int, rows, t: int) -> float:
    """Gross work units of job ``job``'s ``rows`` ``[(server, role, count)]`` in slot ``t``, as
    the simulator credits them (server types' speeds; placement-aware progress when
    ``instance.progress == "placement"``)."""
    if instance.progress == "placement":
        from ..model.registry import PLACEMENT_PROGRESS, resolve

        return float(resolve(PLACEMENT_PROGRESS)(instance, job, list(rows), t))
    workers = [(server, count) for server, role, count in rows if role == WORKER]
    if not workers:
        return 0.0
    servers, counts = (np.array(v, dtype=np.int64) for v in zip(*workers))
    return float((instance.worker_credit(np.full(len(servers), job), servers) * counts).sum())


@dataclass(frozen=True)
class SlotCredit:
    """What one slot with workers gives a job: ``gross`` units, the ``credited`` ones (less
    during a restart), the mini-batch ``target`` after the slot and whether the job
    ``checkpointed`` at its end (the state to roll back to at the next stop)."""

    gross: float
    credited: float
    target: int
    checkpointed: bool


class SlotProgress:
    """The jobs' mini-batch targets under the simulator's preemption ledger (module docstring):
    ``stop`` at a slot's start returns the mini-batches kept (the last checkpoint's), ``credit``
    a slot's rows returns its ``SlotCredit``. The executor and the replay share it."""

    def __init__(self, instance):
        from ..model.preemption import PreemptionLedger

        self.ledger = PreemptionLedger(instance, whole_units=instance.progress != "placement")
        self.instance = instance

    def extend(self, instance) -> None:
        """Take the jobs appended to the instance (``PreemptionLedger.extend``)."""
        self.ledger.extend(instance)
        self.instance = instance

    def units(self, job: int) -> float:
        """Credited units of ``job`` net of lost work."""
        return float(self.ledger.progress[job])

    def set_units(self, job: int, units: float) -> None:
        """Start ``job`` at ``units`` credited units, all saved (a restored snapshot)."""
        self.ledger.progress[job] = units

    def stop(self, plan: JobPlan, t: int, kind: str) -> int:
        """Record a ``kind`` event of the job at the start of slot ``t``; the mini-batches of
        the checkpoint it goes back to (for a suspend or a promote, the one it writes now: all
        it has). ValueError on an impossible event."""
        self.ledger.stop(plan.index, t, kind)
        return plan.minibatches_after(self.units(plan.index))

    def credit(self, plan: JobPlan, rows, t: int) -> SlotCredit:
        """Credit the job's ``rows`` ``[(server, role, count)]`` of slot ``t``."""
        gross = slot_units(self.instance, plan.index, rows, t)
        got = self.ledger.credit(plan.index, gross)
        return SlotCredit(gross, float(got), plan.minibatches_after(self.units(plan.index)),
                          bool(self.ledger.since_checkpoint[plan.index] == 0))


def slot_events(schedule: Schedule, instance) -> dict[int, list[tuple[int, str]]]:
    """``{slot: [(job, kind)]}`` of the schedule's preemption events (none without a record)."""
    from ..model.preemption import parse_events, record_of

    record = record_of(schedule.stats)
    if record is None:
        return {}
    events, problems = parse_events(instance, record)
    if problems:
        raise ExecutionRefused("schedule.stats.preemption", problems[0])
    out: dict[int, list[tuple[int, str]]] = {}
    for e in events:
        out.setdefault(e.slot, []).append((e.job, e.kind))
    return out


def slot_rows(schedule: Schedule) -> dict[int, list[tuple[int, int, int, int]]]:
    """``{slot: [(job, server, role, count)]}`` of a schedule's allocations."""
    out: dict[int, list] = {}
    for j, t, s, r, c in schedule.allocations.rows():
        out.setdefault(t, []).append((j, s, r, c))
    return out


def plan_execution(instance, schedule: Schedule) -> dict[int, JobPlan]:
    """Refuse what cannot run, before anything starts; the plans of the jobs the schedule runs.

    ``ExecutionRefused``: the validator rejects the schedule (field ``schedule``, the first
    violation and their number), or a job with allocations names no task, an unknown task, a
    config outside the task's space, or chunks smaller than one mini-batch.
    """
    from ..model.validate import validate

    report = validate(instance, schedule)
    if not report.ok:
        raise ExecutionRefused("schedule", f"the validator rejects it ({len(report.violations)} "
                               f"violations; first: {report.violations[0]})")
    jobs = sorted(set(schedule.allocations.job.tolist()))
    return {i: job_plan(instance, i) for i in jobs}


def container_demand(schedule: Schedule, n_servers: int) -> np.ndarray:
    """Most containers (workers + PSs, all jobs) any slot puts on each server."""
    a = schedule.allocations
    if not len(a):
        return np.zeros(n_servers, dtype=np.int64)
    per = np.zeros((int(a.slot.max()) + 1, n_servers), dtype=np.int64)
    np.add.at(per, (a.slot, a.server), a.count)
    return per.max(axis=0)

