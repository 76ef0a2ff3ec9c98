"""The scheduling problem as immutable data: servers, jobs, horizon, topology.

Object views (``Job``, ``Server``) are for reading; solvers use the array properties of
``Instance`` (cached, read-only numpy arrays). Symbols follow Bao et al., INFOCOM 2018.

Building an ``Instance`` checks it, exactly as reading an instance file does (the reader builds
the instance through this constructor): a bad value raises ``FormatError`` (a ``ValueError``)
naming the field by its path in the instance document, e.g. ``jobs[3].worker.bw: bandwidth must
be > 0``. ``Job`` and ``Server`` are checked there, where their index and the resource names are
known; a ``Utility`` checks itself when built.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

from . import checks
from .checks import FormatError
from .numerics import ps_count, required_work
from .utility import Utility, utility_table

if TYPE_CHECKING:
    from .topology import Topology

DEFAULT_RESOURCES = ("gpu", "cpu", "mem", "storage", "bw")
BANDWIDTH = "bw"

JOB_CLASSES = ("time-insensitive", "time-sensitive", "time-critical")
PROGRESS_MODES = ("chunk-time", "placement")


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


@dataclass(frozen=True)
class Job:
    """A training job (paper Table I).

    ``chunk_time``: x_i = M_i (tau_i + 2 e_i / b_i), worker-slots to train one data chunk.
    ``chunks``: N_i, data chunks, also the cap on concurrent workers (constraint (3)).
    ``worker`` / ``ps``: per-container demands w_i^r / s_i^r; their "bw" are b_i / B_i.
    ``task`` (optional): the real training task the job runs when a schedule is executed
    (``oasis_opt.runtime.executor``): ``{"name", "config", "seed"?, "data_seed"?}``; only its
    shape is checked here, the name and config by the executor against the task registry.
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
    task: Mapping[str, Any] | None = None

    @property
    def workload(self) -> float:
        """E_i N_i x_i: worker-slots needed (right-hand side of constraint (2))."""
        return self.epochs * self.chunks * self.chunk_time

    @property
    def work(self) -> int:
        """Whole worker-slots needed: ceil(E_i N_i x_i), since workers come in integers."""
        return required_work(self.workload)

    @property
    def min_duration(self) -> int:
        """Fewest slots that can hold the work with N_i workers per slot: ceil(work / N_i)."""
        return -(-self.work // self.chunks)


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
        return _frozen(-(-self.work // self.chunks))

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

    def with_jobs(self, jobs: Iterable[Job]) -> "Instance":
        """A copy with another job list (used by experiments that sub-sample jobs)."""
        return Instance(self.horizon, self.resources, self.worker_servers, self.ps_servers,
                        tuple(jobs), self.topology, self.progress, dict(self.meta))


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
    seen: set[str] = set()
    pools = {name: _servers(getattr(inst, name), resources, name, seen)
             for name in ("worker_servers", "ps_servers")}
    jobs = _sequence(inst.jobs, "jobs")
    jobs = tuple(_job(j, f"jobs[{n}]", resources, horizon) for n, j in enumerate(jobs))
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
    return {"horizon": horizon, "resources": resources, **pools, "jobs": jobs,
            "progress": progress, "meta": checks.free_form(inst.meta, "meta")}


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
                  "kind": checks.optional_text(s.kind, f"{p}.kind")}
        out.append(_canonical(s, fields))
    if not out:
        raise FormatError(path, f"need at least one {'worker' if path == 'worker_servers' else 'PS'}"
                          " server")
    if all(s.capacity.get(BANDWIDTH, 0.0) <= 0 for s in out):
        raise FormatError(path, f"every server has zero bandwidth ({BANDWIDTH!r}), so no job "
                          "could ever run (every job needs bandwidth > 0)")
    return tuple(out)


def _job(j: Any, p: str, resources: tuple[str, ...], horizon: int) -> Job:
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

