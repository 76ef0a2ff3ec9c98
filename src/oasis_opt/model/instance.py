"""The scheduling problem as immutable data: servers, jobs, horizon, topology.

Object views (``Job``, ``Server``) are for reading; solvers use the array properties of
``Instance`` (cached, read-only numpy arrays). Symbols follow Bao et al., INFOCOM 2018.

Building an ``Instance`` checks it, exactly as reading an instance file does (the reader builds
the instance through this constructor): a bad value raises ``FormatError`` (a ``ValueError``)
naming the field by its path in the instance document, e.g. ``jobs[3].worker.bw: bandwidth must
be > 0``. ``Job`` and ``Server`` are checked there, where their index and the resource names are
known; a ``Utility`` checks itself when built.

**Accelerator types** (heterogeneous clusters). Worker servers may name an accelerator type
(``Server.accelerator``: ``"v100"``, ``"k80"``, ``"cpu"`` ...; all of them or none). A job then
says, per type it can run on, how fast one of its workers trains there and what it demands
(``Job.types``: type -> ``JobType(speed, worker)``); a type it cannot use is absent, and a job
without ``types`` runs on every type at its reference speed. Work is counted in whole **work
units**: job i needs

    W_i = ceil(E_i N_i x_i u_i)                                                     [units]

where x_i (``chunk_time``) is measured on the job's reference accelerator and u_i (``unit``,
default 1) is the number of units one reference worker does per slot; a worker on type g does
s_ig (``JobType.speed``, an integer >= 1) units per slot. Without types u_i = s_ig = 1 and
W_i = ceil(E_i N_i x_i) worker-slots: the paper's model, unchanged. Unless the job allows it
(``span_types``), its workers in one slot all sit on servers of one type. The arrays solvers use
are ``types``, ``worker_type``, ``type_speed``, ``type_demand``, ``span_types``, ``unit``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

from . import checks
from .checks import FormatError
from .numerics import fit_count, ps_count, required_work
from .utility import Utility, utility_table

if TYPE_CHECKING:
    from .topology import Topology

DEFAULT_RESOURCES = ("gpu", "cpu", "mem", "storage", "bw")
BANDWIDTH = "bw"

JOB_CLASSES = ("time-insensitive", "time-sensitive", "time-critical")
PROGRESS_MODES = ("chunk-time", "placement")


class UnsupportedInstance(ValueError):
    """A solver asked to handle an instance feature it does not support (one line, no field)."""


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class Server:
    """A physical server of one pool. ``capacity`` maps resource -> amount (missing = 0).
    Checked by the ``Instance`` it is put in (``worker_servers[n]`` / ``ps_servers[n]``)."""

    id: str
    capacity: Mapping[str, float]
    rack: str | None = None
    kind: str | None = None  # catalogue type (e.g. "p2.8xlarge"), informational
    accelerator: str | None = None  # accelerator type of a worker server ("v100", "cpu" ...)


@dataclass(frozen=True)
class JobType:
    """How a job runs on one accelerator type: ``speed`` = s_ig, the whole work units one of its
    workers does per slot there (an integer >= 1); ``worker`` its per-worker demand there (None:
    the job's own ``worker``; if given, its bandwidth must be the job's b_i, since constraint (6)
    counts PSs per worker)."""

    speed: int
    worker: Mapping[str, float] | None = None


@dataclass(frozen=True)
class Job:
    """A training job (paper Table I).

    ``chunk_time``: x_i = M_i (tau_i + 2 e_i / b_i), worker-slots to train one data chunk.
    ``chunks``: N_i, data chunks, also the cap on concurrent workers (constraint (3)).
    ``worker`` / ``ps``: per-container demands w_i^r / s_i^r; their "bw" are b_i / B_i.
    ``unit``: u_i, work units one worker on the reference accelerator (the one ``chunk_time`` is
    measured on) does per slot. ``types``: accelerator type -> ``JobType`` for each type the job
    can use (None: every type, at speed u_i with demand ``worker``). ``span_types``: whether its
    workers in one slot may sit on servers of different types. The last three need a cluster
    whose worker servers carry accelerator types (module docstring).
    ``task`` (optional): the real training task the job runs when a schedule is executed
    (``oasis_opt.runtime.executor``): ``{"name", "config", "seed"?, "data_seed"?, "dataset"?}``
    (``dataset``: the digest of the preprocessed split it trains on, ``training.dataset``);
    only its shape is checked here, the name, config and dataset by the executor.
    Checked (and made canonical) by the ``Instance`` it is put in, where ``jobs[n]`` names it.
    """

    id: str
    arrival: int
    epochs: int
    chunks: int
    chunk_time: float
    worker: Mapping[str, float]
    ps: Mapping[str, float]
    utility: Utility
    job_class: str | None = None
    provenance: Mapping[str, Any] | None = None
    unit: int = 1
    types: Mapping[str, JobType] | None = None
    span_types: bool = False
    task: Mapping[str, Any] | None = None

    @property
    def workload(self) -> float:
        """E_i N_i x_i u_i: work units needed (right-hand side of constraint (2)); worker-slots
        when u_i = 1 (no accelerator types)."""
        return self.epochs * self.chunks * self.chunk_time * self.unit

    @property
    def work(self) -> int:
        """Whole work units needed: W_i = ceil(E_i N_i x_i u_i)."""
        return required_work(self.workload)

    @property
    def max_speed(self) -> int:
        """The most units one worker does per slot: max_g s_ig (u_i without types)."""
        return max(t.speed for t in self.types.values()) if self.types else self.unit

    @property
    def min_duration(self) -> int:
        """Fewest slots that can hold the work with N_i workers per slot on the fastest type:
        ceil(W_i / (N_i max_g s_ig)) (ceil(W_i / N_i) without types)."""
        return -(-self.work // (self.chunks * self.max_speed))


@dataclass(frozen=True)
class Instance:
    """An immutable problem instance: ``horizon`` slots 1..T, two server pools, jobs, topology.

    Servers are indexed globally: worker servers 0..H-1 then PS servers H..H+K-1 (this is the
    index schedules use). Jobs are indexed in instance order, which breaks arrival ties.
    """

    horizon: int
    resources: tuple[str, ...]
    worker_servers: tuple[Server, ...]
    ps_servers: tuple[Server, ...]
    jobs: tuple[Job, ...]
    topology: Any = None  # oasis_opt.model.topology.Topology or None (default built on demand)
    progress: str = "chunk-time"  # or "placement" (placement-aware cost model, see costmodel)
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, value in _checked(self).items():
            object.__setattr__(self, name, value)

    # ---- sizes and lookups -------------------------------------------------------------
    @property
    def H(self) -> int:
        return len(self.worker_servers)

    @property
    def K(self) -> int:
        return len(self.ps_servers)

    @property
    def I(self) -> int:  # noqa: E743 - the paper's symbol
        return len(self.jobs)

    @property
    def R(self) -> int:
        return len(self.resources)

    @cached_property
    def servers(self) -> tuple[Server, ...]:
        """All servers in global index order (workers first)."""
        return self.worker_servers + self.ps_servers

    @cached_property
    def server_index(self) -> dict[str, int]:
        return {s.id: n for n, s in enumerate(self.servers)}

    @cached_property
    def job_index(self) -> dict[str, int]:
        return {j.id: n for n, j in enumerate(self.jobs)}

    @cached_property
    def bw_index(self) -> int:
        return self.resources.index(BANDWIDTH)

    # ---- arrays --------------------------------------------------------------------------
    def _matrix(self, maps: Sequence[Mapping[str, float]]) -> np.ndarray:
        return _frozen(np.array([[float(m.get(r, 0.0)) for r in self.resources] for m in maps],
                                dtype=float).reshape(len(maps), self.R))

    @cached_property
    def worker_capacity(self) -> np.ndarray:
        """c_h^r, shape (H, R)."""
        return self._matrix([s.capacity for s in self.worker_servers])

    @cached_property
    def ps_capacity(self) -> np.ndarray:
        """c_k^r, shape (K, R)."""
        return self._matrix([s.capacity for s in self.ps_servers])

    @cached_property
    def capacity(self) -> np.ndarray:
        """Capacities of all servers in global index order, shape (H + K, R)."""
        return _frozen(np.vstack([self.worker_capacity, self.ps_capacity]))

    @cached_property
    def worker_demand(self) -> np.ndarray:
        """w_i^r, shape (I, R)."""
        return self._matrix([j.worker for j in self.jobs])

    @cached_property
    def ps_demand(self) -> np.ndarray:
        """s_i^r, shape (I, R)."""
        return self._matrix([j.ps for j in self.jobs])

    @cached_property
    def arrival(self) -> np.ndarray:
        return _frozen(np.array([j.arrival for j in self.jobs], dtype=np.int64))

    @cached_property
    def epochs(self) -> np.ndarray:
        return _frozen(np.array([j.epochs for j in self.jobs], dtype=np.int64))

    @cached_property
    def chunks(self) -> np.ndarray:
        """N_i: also the cap on concurrent workers."""
        return _frozen(np.array([j.chunks for j in self.jobs], dtype=np.int64))

    @cached_property
    def chunk_time(self) -> np.ndarray:
        return _frozen(np.array([j.chunk_time for j in self.jobs], dtype=float))

    @cached_property
    def work(self) -> np.ndarray:
        """ceil(E_i N_i x_i): whole worker-slots each job needs (constraint (2))."""
        return _frozen(np.array([j.work for j in self.jobs], dtype=np.int64))

    @cached_property
    def min_duration(self) -> np.ndarray:
        """ceil(W_i / (N_i max_g s_ig)): fewest slots with N_i workers on the fastest type."""
        return _frozen(-(-self.work // (self.chunks * self.max_speed)))

    # ---- accelerator types (module docstring); an untyped instance has one type, None ------
    @cached_property
    def types(self) -> tuple[str | None, ...]:
        """The G accelerator types of the worker servers, in order of first appearance;
        ``(None,)`` when the servers carry none (one implicit type)."""
        return tuple(dict.fromkeys(s.accelerator for s in self.worker_servers))

    @property
    def typed(self) -> bool:
        """Whether the worker servers carry accelerator types (the ``instance@2`` model)."""
        return self.types != (None,)

    @cached_property
    def worker_type(self) -> np.ndarray:
        """Type index (into ``types``) of each worker server, shape (H,)."""
        index = {t: g for g, t in enumerate(self.types)}
        return _frozen(np.array([index[s.accelerator] for s in self.worker_servers],
                                dtype=np.int64))

    @cached_property
    def type_mask(self) -> np.ndarray:
        """``[g, h]``: worker server h is of type g, shape (G, H)."""
        return _frozen(self.worker_type[None, :] == np.arange(len(self.types))[:, None])

    @cached_property
    def type_speed(self) -> np.ndarray:
        """s_ig: work units one worker of job i does per slot on type g, shape (I, G) int64;
        0 where the job cannot use the type (u_i on every type for a job without ``types``)."""
        out = np.zeros((self.I, len(self.types)), dtype=np.int64)
        for i, j in enumerate(self.jobs):
            if j.types is None:
                out[i] = j.unit
            else:
                for g, t in enumerate(self.types):
                    if t is not None and t in j.types:
                        out[i, g] = j.types[t].speed
        return _frozen(out)

    @cached_property
    def type_demand(self) -> np.ndarray:
        """w_ig^r: per-worker demand of job i on type g, shape (I, G, R); the job's ``worker``
        where its ``types`` give none (read it only where ``type_speed > 0``)."""
        out = np.repeat(self.worker_demand[:, None, :], len(self.types), axis=1)
        for i, j in enumerate(self.jobs):
            for g, t in enumerate(self.types):
                jt = j.types.get(t) if j.types and t is not None else None
                if jt is not None and jt.worker is not None:
                    out[i, g] = [float(jt.worker.get(r, 0.0)) for r in self.resources]
        return _frozen(out)

    @cached_property
    def usable(self) -> np.ndarray:
        """``[i, g]``: job i can run on type g (``type_speed > 0``), shape (I, G)."""
        return _frozen(self.type_speed > 0)

    @cached_property
    def span_types(self) -> np.ndarray:
        """Whether job i's workers in one slot may sit on servers of several types, (I,)."""
        return _frozen(np.array([j.span_types for j in self.jobs], dtype=bool))

    @cached_property
    def unit(self) -> np.ndarray:
        """u_i: units per slot of one worker on the reference accelerator, (I,) int64."""
        return _frozen(np.array([j.unit for j in self.jobs], dtype=np.int64))

    @cached_property
    def max_speed(self) -> np.ndarray:
        """max_g s_ig over the types the job can use, (I,) int64."""
        return _frozen(self.type_speed.max(axis=1) if self.I else np.zeros(0, dtype=np.int64))

    @cached_property
    def min_speed(self) -> np.ndarray:
        """min_g s_ig over the types the job can use, (I,) int64 (every job can use one)."""
        masked = np.where(self.usable, self.type_speed, np.iinfo(np.int64).max)
        return _frozen(masked.min(axis=1) if self.I else np.zeros(0, dtype=np.int64))

    def server_speed(self, job: int) -> np.ndarray:
        """s_{i, type(h)} for every worker server h, shape (H,) (0 where the job cannot run)."""
        return self.type_speed[job][self.worker_type]

    def server_demand(self, job: int) -> np.ndarray:
        """The job's per-worker demand on every worker server (its type's), shape (H, R)."""
        return self.type_demand[job][self.worker_type]

    def container_demand(self, job: int, server: int, role: int) -> np.ndarray:
        """Demand (R,) of one container of ``job`` with ``role`` (0 worker, 1 PS) on ``server``
        (global index): a worker's is its server type's (the job's ``worker`` on a PS server)."""
        if role != 0:
            return self.ps_demand[job]
        if not self.typed or server >= self.H:
            return self.worker_demand[job]
        return self.type_demand[job, self.worker_type[server]]

    def row_demand(self, job: np.ndarray, server: np.ndarray, role: np.ndarray) -> np.ndarray:
        """``container_demand`` of many rows at once: arrays (n,) -> (n, R)."""
        out = np.where((role == 0)[:, None], self.worker_demand[job], self.ps_demand[job])
        if self.typed:
            m = (role == 0) & (server < self.H)
            out[m] = self.type_demand[job[m], self.worker_type[server[m]]]
        return out

    def worker_credit(self, job: np.ndarray, server: np.ndarray) -> np.ndarray:
        """Units one worker of ``job`` does per slot on ``server`` (arrays (n,) -> (n,) int64):
        s_{i, type(h)} on a worker server; u_i on a PS server (a pool violation, credited at the
        reference speed so that the validator reports only that)."""
        H = self.H
        on_worker = server < H
        out = self.unit[job].copy()
        out[on_worker] = self.type_speed[job[on_worker], self.worker_type[server[on_worker]]]
        return out

    def worker_fits(self, job: int, free: np.ndarray, cap: int | None = None) -> np.ndarray:
        """Workers of ``job`` that fit on each worker server, per type: ``[g, h]`` =
        ``fit_count`` of its type-g demand on server h if h is of type g and the job can use g,
        else 0; ``free`` (H, R). Shape (G, H) int64 (one row, all servers, when untyped)."""
        if not self.typed:
            return fit_count(free, self.worker_demand[job], cap)[None, :]
        out = np.zeros((len(self.types), self.H), dtype=np.int64)
        for g in np.flatnonzero(self.usable[job]).tolist():
            mask = self.type_mask[g]
            out[g, mask] = fit_count(free[mask], self.type_demand[job, g], cap)
        return out

    def type_order(self, job: int) -> list[int]:
        """The types job ``job`` can use, fastest first (ties: the type listed first)."""
        usable = np.flatnonzero(self.usable[job])
        return usable[np.lexsort((usable, -self.type_speed[job, usable]))].tolist()

    @property
    def worker_bw(self) -> np.ndarray:
        """b_i."""
        return self.worker_demand[:, self.bw_index]

    @property
    def ps_bw(self) -> np.ndarray:
        """B_i."""
        return self.ps_demand[:, self.bw_index]

    @cached_property
    def utility_table(self) -> np.ndarray:
        """``[i, t]`` = f_i(t - a_i) for t in 0..T (-inf for t < a_i)."""
        return _frozen(utility_table([j.utility for j in self.jobs], self.arrival, self.horizon))

    def utility_of(self, job: int, completion: int | None) -> float:
        """f_i(completion - a_i), or 0 for a job that never completes."""
        if completion is None:
            return 0.0
        return float(self.jobs[job].utility(completion - self.jobs[job].arrival))

    def ps_needed(self, job: int, workers: np.ndarray | int) -> np.ndarray | int:
        """ceil(k b_i / B_i): the fewest PSs constraint (6) allows for k workers (0 for k = 0)."""
        return ps_count(workers, self.worker_bw[job], self.ps_bw[job])

    def get_topology(self) -> Topology:
        """The topology graph: the instance's own, or the default built from the racks."""
        if self.topology is not None:
            return self.topology
        from .topology import Topology

        return Topology.from_racks(self)

    @cached_property
    def fingerprint(self) -> str:
        """sha256 of the canonical instance JSON, as 64 hex digits: the document
        ``save_instance`` writes (fixed key order, exact floats), with compact separators.

        Results carry it (``instance_sha256``) so that a result is never checked against
        another instance. Two instances have the same fingerprint iff they write the same file.
        """
        import hashlib
        import json

        from .io import instance_to_dict

        text = json.dumps(instance_to_dict(self), separators=(",", ":"), allow_nan=False)
        return hashlib.sha256(text.encode()).hexdigest()

    def require_untyped(self, what: str) -> None:
        """Raise ``UnsupportedInstance`` when the instance has accelerator types that ``what``
        (e.g. "policy 'oasis'") does not handle yet."""
        if self.typed:
            raise UnsupportedInstance(
                f"{what} does not support accelerator types yet (this instance's worker servers "
                f"are of types {', '.join(str(t) for t in self.types)})")

    def with_jobs(self, jobs: Iterable[Job]) -> "Instance":
        """A copy with another job list (used by experiments that sub-sample jobs)."""
        return Instance(self.horizon, self.resources, self.worker_servers, self.ps_servers,
                        tuple(jobs), self.topology, self.progress, dict(self.meta))

    def extended(self, jobs: Iterable[Job]) -> "Instance":
        """``with_jobs(self.jobs + jobs)``, equal field for field and array for array, at the
        cost of the new jobs alone: only they are checked (the old ones were, by this
        instance), and the per-job arrays this instance has computed are extended, not
        recomputed (the scheduling service's instance grows by a few jobs a slot)."""
        new = self.with_jobs(jobs)  # the new jobs checked against the cluster
        index = self.job_index
        for n, j in enumerate(new.jobs):
            if j.id in index:
                raise FormatError(f"jobs[{self.I + n}].id",
                                  f"duplicate job id {j.id!r} (also jobs[{index[j.id]}])")
        out = _replace_unchecked(self, jobs=self.jobs + new.jobs)
        cached = self.__dict__
        for name in _CLUSTER_CACHED:
            if name in cached:
                out.__dict__[name] = cached[name]
        for name in _PER_JOB_CACHED:
            if name in cached:
                out.__dict__[name] = _frozen(np.concatenate([cached[name], getattr(new, name)]))
        if "job_index" in cached:
            out.__dict__["job_index"] = {**index, **{j.id: self.I + n
                                                     for n, j in enumerate(new.jobs)}}
        return out


# what ``Instance.extended`` does with each cached property: the cluster's are the same, the
# per-job arrays (first axis: the jobs; row i reads job i and the cluster only) are stacked;
# ``job_index`` is merged and ``fingerprint`` computed again when asked for
_CLUSTER_CACHED = ("servers", "server_index", "bw_index", "worker_capacity", "ps_capacity",
                   "capacity", "types", "worker_type", "type_mask")
_PER_JOB_CACHED = ("worker_demand", "ps_demand", "arrival", "epochs", "chunks", "chunk_time",
                   "work", "min_duration", "type_speed", "type_demand", "usable", "span_types",
                   "unit", "max_speed", "min_speed", "utility_table")


def _replace_unchecked(inst: Instance, **changes: Any) -> Instance:
    """``inst`` with ``changes`` to its fields, without ``Instance``'s checks: for values
    checked already (``Instance.extended``), never for a caller's."""
    out = object.__new__(Instance)
    for f in fields(Instance):
        object.__setattr__(out, f.name, changes.get(f.name, getattr(inst, f.name)))
    return out


# ---- the checks run by Instance(...) ------------------------------------------------------------
def _checked(inst: Instance) -> dict[str, Any]:
    """Every field of ``inst`` checked and in canonical form; ``FormatError`` names the first bad
    one by its path in the instance document."""
    horizon = checks.integer(inst.horizon, "horizon", minimum=1)
    if isinstance(inst.resources, (str, bytes)) or not isinstance(inst.resources, (list, tuple)):
        raise FormatError("resources", "expected a list of resource names")
    resources = tuple(checks.text(r, f"resources[{n}]") for n, r in enumerate(inst.resources))
    if len(set(resources)) != len(resources):
        raise FormatError("resources", "duplicate resource name")
    if BANDWIDTH not in resources:
        raise FormatError("resources", f"must include the bandwidth resource {BANDWIDTH!r}")
    pools, seen, types = _pools(inst, resources)
    jobs = _sequence(inst.jobs, "jobs")
    jobs = tuple(_job(j, f"jobs[{n}]", resources, horizon, types) for n, j in enumerate(jobs))
    first: dict[str, int] = {}
    for n, j in enumerate(jobs):
        if first.setdefault(j.id, n) != n:
            raise FormatError(f"jobs[{n}].id", f"duplicate job id {j.id!r} (also jobs[{first[j.id]}])")
    if inst.topology is not None:
        from .topology import Topology

        if not isinstance(inst.topology, Topology):
            raise FormatError("topology", f"expected a Topology, got {type(inst.topology).__name__}")
        inst.topology.check(seen, "topology")
    progress = checks.choice(inst.progress, PROGRESS_MODES, "progress", "progress mode")
    if progress == "placement" and types:
        raise FormatError("progress", "the placement-aware progress mode does not take "
                          "accelerator types (the worker servers name some)")
    return {"horizon": horizon, "resources": resources, **pools, "jobs": jobs,
            "progress": progress, "meta": checks.free_form(inst.meta, "meta")}


# server pools checked before, by the identity of their (immutable, canonical) tuples: an
# instance made from a checked one (``with_jobs``, the scheduling service's growing instance)
# passes the same tuples on, and its servers need no second check. A few recent clusters only.
_CHECKED_POOLS: dict[tuple[int, int], tuple[Any, ...]] = {}
_CHECKED_POOLS_SIZE = 16


def _pools(inst: Instance, resources: tuple[str, ...]
           ) -> tuple[dict[str, tuple[Server, ...]], set[str], tuple[str, ...]]:
    """The two server pools checked and canonical, the server ids, and the accelerator types."""
    key = (id(inst.worker_servers), id(inst.ps_servers))
    hit = _CHECKED_POOLS.get(key)
    if (hit is not None and hit[0] is inst.worker_servers and hit[1] is inst.ps_servers
            and hit[2] == resources):
        return {"worker_servers": hit[0], "ps_servers": hit[1]}, set(hit[3]), hit[4]
    seen: set[str] = set()
    pools = {name: _servers(getattr(inst, name), resources, name, seen)
             for name in ("worker_servers", "ps_servers")}
    types = _accelerators(pools["worker_servers"], pools["ps_servers"])
    workers, pss = pools["worker_servers"], pools["ps_servers"]
    if len(_CHECKED_POOLS) >= _CHECKED_POOLS_SIZE:
        _CHECKED_POOLS.pop(next(iter(_CHECKED_POOLS)))
    _CHECKED_POOLS[(id(workers), id(pss))] = (workers, pss, resources, frozenset(seen), types)
    return pools, seen, types


def _sequence(v: Any, path: str) -> tuple:
    if isinstance(v, (str, bytes, Mapping)) or not hasattr(v, "__iter__"):
        raise FormatError(path, "expected a list")
    return tuple(v)


def _servers(v: Any, resources: tuple[str, ...], path: str, seen: set[str]) -> tuple[Server, ...]:
    out = []
    for n, s in enumerate(_sequence(v, path)):
        p = f"{path}[{n}]"
        if not isinstance(s, Server):
            raise FormatError(p, f"expected a Server, got {type(s).__name__}")
        sid = checks.text(s.id, f"{p}.id")
        if sid in seen:
            raise FormatError(f"{p}.id", f"duplicate server id {sid!r}")
        seen.add(sid)
        fields = {"capacity": checks.amounts(s.capacity, resources, f"{p}.capacity"),
                  "rack": checks.optional_text(s.rack, f"{p}.rack"),
                  "kind": checks.optional_text(s.kind, f"{p}.kind"),
                  "accelerator": checks.optional_text(s.accelerator, f"{p}.accelerator")}
        out.append(_canonical(s, fields))
    if not out:
        raise FormatError(path, f"need at least one {'worker' if path == 'worker_servers' else 'PS'}"
                          " server")
    if all(s.capacity.get(BANDWIDTH, 0.0) <= 0 for s in out):
        raise FormatError(path, f"every server has zero bandwidth ({BANDWIDTH!r}), so no job "
                          "could ever run (every job needs bandwidth > 0)")
    return tuple(out)


def _accelerators(workers: tuple[Server, ...], pss: tuple[Server, ...]) -> tuple[str, ...]:
    """The worker servers' accelerator types (empty: none), checked: all servers name one or none
    does, and PS servers name none."""
    for n, s in enumerate(pss):
        if s.accelerator is not None:
            raise FormatError(f"ps_servers[{n}].accelerator", "PS servers carry no accelerator "
                              "type (only worker servers run on accelerators)")
    named = [n for n, s in enumerate(workers) if s.accelerator is not None]
    if named and len(named) != len(workers):
        first = named[0]
        missing = next(n for n, s in enumerate(workers) if s.accelerator is None)
        raise FormatError(f"worker_servers[{missing}].accelerator",
                          f"missing: once a worker server names its accelerator type (worker_servers"
                          f"[{first}] is {workers[first].accelerator!r}), every one does")
    return tuple(dict.fromkeys(s.accelerator for s in workers if s.accelerator is not None))


def _job_types(j: Job, p: str, resources: tuple[str, ...], types: tuple[str, ...],
               worker: dict[str, float]) -> dict[str, Any]:
    """``unit``, ``types`` and ``span_types`` of a job, checked against the cluster's types."""
    fields: dict[str, Any] = {"unit": checks.integer(j.unit, f"{p}.unit", minimum=1),
                              "span_types": checks.boolean(j.span_types, f"{p}.span_types")}
    if not types:
        for name, default in (("unit", 1), ("span_types", False)):
            if fields[name] != default:
                raise FormatError(f"{p}.{name}", "only for clusters with accelerator types "
                                  "(no worker server names one)")
        if j.types is not None:
            raise FormatError(f"{p}.types", "only for clusters with accelerator types "
                              "(no worker server names one)")
        return fields
    if j.types is None:
        return fields
    if type(j.types) is not dict and not isinstance(j.types, Mapping):
        raise FormatError(f"{p}.types", "expected an object {accelerator type: {speed, worker?}}")
    if not j.types:
        raise FormatError(f"{p}.types", "expected at least one accelerator type (omit the field "
                          "for a job that runs on every type)")
    out = {}
    for name, jt in j.types.items():
        q = f"{p}.types.{name}"
        if name not in types:
            raise FormatError(q, f"unknown accelerator type (the worker servers have: "
                              f"{', '.join(types)})")
        if not isinstance(jt, JobType):
            raise FormatError(q, f"expected a JobType, got {type(jt).__name__}")
        tf: dict[str, Any] = {"speed": checks.integer(jt.speed, f"{q}.speed", minimum=1)}
        if jt.worker is not None:
            dem = tf["worker"] = checks.amounts(jt.worker, resources, f"{q}.worker")
            if dem.get(BANDWIDTH, 0.0) != worker.get(BANDWIDTH, 0.0):
                raise FormatError(f"{q}.worker.{BANDWIDTH}", f"must equal the job's worker "
                                  f"bandwidth b_i = {worker.get(BANDWIDTH, 0.0):g} (constraint "
                                  "(6) counts PSs per worker)")
        out[name] = _canonical(jt, tf)
    fields["types"] = out
    return fields


def _job(j: Any, p: str, resources: tuple[str, ...], horizon: int, types: tuple[str, ...]) -> Job:
    if not isinstance(j, Job):
        raise FormatError(p, f"expected a Job, got {type(j).__name__}")
    fields: dict[str, Any] = {"id": checks.text(j.id, f"{p}.id"),
                              "arrival": checks.integer(j.arrival, f"{p}.arrival", minimum=1)}
    if fields["arrival"] > horizon:
        raise FormatError(f"{p}.arrival", f"must lie in 1..{horizon}, got {fields['arrival']}")
    fields["epochs"] = checks.integer(j.epochs, f"{p}.epochs", minimum=1)
    fields["chunks"] = checks.integer(j.chunks, f"{p}.chunks", minimum=1)
    fields["chunk_time"] = checks.number(j.chunk_time, f"{p}.chunk_time", strict=True)
    for name in ("worker", "ps"):
        dem = fields[name] = checks.amounts(getattr(j, name), resources, f"{p}.{name}")
        if dem.get(BANDWIDTH, 0.0) <= 0:
            raise FormatError(f"{p}.{name}.{BANDWIDTH}", "bandwidth must be > 0")
    if not isinstance(j.utility, Utility):
        raise FormatError(f"{p}.utility", f"expected a Utility, got {type(j.utility).__name__}")
    if j.job_class is not None:
        checks.choice(j.job_class, JOB_CLASSES, f"{p}.class", "job class")
    if j.provenance is not None:
        fields["provenance"] = checks.free_form(j.provenance, f"{p}.provenance")
    fields.update(_job_types(j, p, resources, types, fields["worker"]))
    if j.task is not None:
        fields["task"] = checks.task(j.task, f"{p}.task")
    return _canonical(j, fields)


def _canonical(obj: Any, fields: dict[str, Any]) -> Any:
    """``obj`` itself when its fields already are ``fields`` (same values and types), else a copy
    with them: the reader's objects pass through, code's numpy scalars become plain numbers."""
    def same(a: Any, b: Any) -> bool:
        if type(a) is not type(b):
            return False
        if type(a) is dict:
            return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
        return a == b

    if all(same(getattr(obj, k), v) for k, v in fields.items()):
        return obj
    return replace(obj, **fields)

