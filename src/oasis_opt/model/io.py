"""JSON formats ``oasis-opt/instance@1`` / ``@2`` and ``oasis-opt/result@1``: strict readers, exact
writers.

``instance@2`` is ``instance@1`` plus accelerator types (``Server.accelerator``; a job's
``unit``, ``types`` and ``span_types``, ``model.instance``). The writer writes ``@2`` exactly when
the worker servers carry types and ``@1`` otherwise, so every instance without types writes the
bytes (and the fingerprint) it always did; the reader takes both, and refuses the new fields in an
``@1`` document and an ``@2`` document without types (each has one canonical form).

Readers check everything once at the edge and raise ``FormatError`` naming the offending field
(e.g. ``jobs[3].worker.bw``); inside the package, data is trusted. The instance reader checks the
document's structure (objects, lists, missing and unknown fields) and builds the instance through
``Instance(...)``, whose checks (``model.checks``) are the same for files and for instances built
in code. Writers emit keys in a fixed order with ``repr``-exact floats, so a round trip is
byte-identical; a result names its instance by ``instance_sha256`` (``Instance.fingerprint``).
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from .checks import FormatError, free_form, integer, number, text, within
from .instance import PROGRESS_MODES, Instance, Job, JobType, Server
from .schedule import ROLES, Allocations, Schedule
from .topology import Topology
from .utility import PARAMETERS, Utility

INSTANCE_FORMAT = "oasis-opt/instance@1"
TYPED_INSTANCE_FORMAT = "oasis-opt/instance@2"  # @1 + accelerator types
INSTANCE_FORMATS = (INSTANCE_FORMAT, TYPED_INSTANCE_FORMAT)
RESULT_FORMAT = "oasis-opt/result@1"
_FINGERPRINT = "instance_sha256"

# kept importable from here: the error every reader and constructor raises
__all__ = ["INSTANCE_FORMAT", "TYPED_INSTANCE_FORMAT", "INSTANCE_FORMATS", "RESULT_FORMAT", "PROGRESS_MODES", "FormatError", "InstanceMismatch",
           "instance_from_dict", "instance_to_dict", "job_from_dict", "job_to_dict",
           "result_from_dict", "result_to_dict",
           "dumps", "read_json", "write_json_atomic", "load_instance", "save_instance",
           "load_result", "save_result"]


# ---- structure: the document's shape; the values are checked by the model's constructors -------
def _get(d: dict, key: str, path: str, default: Any = ...) -> Any:
    if not isinstance(d, dict):
        raise FormatError(path, "expected an object")
    if key not in d:
        if default is ...:
            raise FormatError(f"{path}.{key}" if path else key, "missing field")
        return default
    return d[key]


def _no_extra(d: dict, allowed: set[str], path: str,
              typed: set[str] | frozenset[str] = frozenset()) -> None:
    """Unknown fields are errors; ``typed`` are the ``instance@2`` fields allowed in ``allowed``
    only when the document is ``@2`` (the message then says so)."""
    if not isinstance(d, dict):
        raise FormatError(path, "expected an object")
    extra = sorted(set(d) - allowed)
    if extra:
        name = f"{path}.{extra[0]}" if path else extra[0]
        if extra[0] in typed:
            raise FormatError(name, f"accelerator types need format {TYPED_INSTANCE_FORMAT!r}")
        raise FormatError(name, "unknown field")


def _list(v: Any, path: str) -> list:
    if not isinstance(v, list):
        raise FormatError(path, "expected a list")
    return v


# ---- instance ---------------------------------------------------------------------------------
def _utility(d: Any, path: str) -> Utility:
    kind = _get(d, "kind", path)
    with within(path):
        if not isinstance(kind, str) or kind not in PARAMETERS:
            return Utility(kind)  # raises: unknown kind
        _no_extra(d, {"kind", *PARAMETERS[kind]}, "")
        return Utility(kind, **{name: _get(d, name, "") for name in PARAMETERS[kind]})


_SERVER_FIELDS = {"id", "capacity", "rack", "kind"}
_TYPED_SERVER_FIELDS = {"accelerator"}


def _servers(v: Any, path: str, typed: bool) -> list[Server]:
    out = []
    for n, s in enumerate(_list(v, path)):
        p = f"{path}[{n}]"
        _no_extra(s, _SERVER_FIELDS | (_TYPED_SERVER_FIELDS if typed else set()), p,
                  _TYPED_SERVER_FIELDS)
        out.append(Server(_get(s, "id", p), _get(s, "capacity", p), s.get("rack"), s.get("kind"),
                          s.get("accelerator")))
    return out


def _topology(d: Any, path: str) -> Topology:
    """The graph as written; ``Instance`` checks it (``Topology.check``)."""
    import networkx as nx  # only instances with a topology need it

    _no_extra(d, {"nodes", "links"}, path)
    g = nx.Graph()
    for n, node in enumerate(_list(_get(d, "nodes", path), f"{path}.nodes")):
        p = f"{path}.nodes[{n}]"
        _no_extra(node, {"id", "kind"}, p)
        nid = text(_get(node, "id", p), f"{p}.id")
        if nid in g:
            raise FormatError(f"{p}.id", f"duplicate node id {nid!r}")
        g.add_node(nid, kind=_get(node, "kind", p))
    for n, link in enumerate(_list(_get(d, "links", path), f"{path}.links")):
        p = f"{path}.links[{n}]"
        _no_extra(link, {"a", "b", "bandwidth"}, p)
        a, b = text(_get(link, "a", p), f"{p}.a"), text(_get(link, "b", p), f"{p}.b")
        for end, name in ((a, "a"), (b, "b")):
            if end not in g:
                raise FormatError(f"{p}.{name}", f"unknown node {end!r}")
        # named here by its place in the file (the graph does not keep the links' order)
        g.add_edge(a, b, bandwidth=number(_get(link, "bandwidth", p), f"{p}.bandwidth", strict=True))
    roots = [n for n, k in g.nodes(data="kind") if k == "core"]
    return Topology(g, roots[0] if len(roots) == 1 else "core")


_JOB_FIELDS = ("id", "arrival", "epochs", "chunks", "chunk_time", "worker", "ps")
_TYPED_JOB_FIELDS = {"unit", "types", "span_types"}


def _job_types(v: Any, path: str) -> dict[str, JobType]:
    """``{type: {"speed", "worker"?}}`` as written; ``Instance`` checks the values."""
    if not isinstance(v, dict):
        raise FormatError(path, "expected an object {accelerator type: {speed, worker?}}")
    out = {}
    for name, t in v.items():
        _no_extra(t, {"speed", "worker"}, f"{path}.{name}")
        out[name] = JobType(_get(t, "speed", f"{path}.{name}"), t.get("worker"))
    return out


def _job(d: Any, n: int, typed: bool) -> Job:
    p = f"jobs[{n}]"
    _no_extra(d, {*_JOB_FIELDS, "utility", "class", "provenance", "task",
                  *(_TYPED_JOB_FIELDS if typed else ())}, p, _TYPED_JOB_FIELDS)
    values = {key: _get(d, key, p) for key in _JOB_FIELDS}
    types = d.get("types")
    return Job(**values, utility=_utility(_get(d, "utility", p), f"{p}.utility"),
               job_class=d.get("class"), provenance=d.get("provenance"), task=d.get("task"),
               unit=d.get("unit", 1), span_types=d.get("span_types", False),
               types=None if types is None else _job_types(types, f"{p}.types"))


def job_from_dict(doc: Any, cluster: Instance) -> Instance:
    """``cluster`` with the one job of ``doc`` (a job of the instance format), read as a file's
    job is: its structure here, its values by ``Instance``'s checks against the cluster's
    resources, horizon and accelerator types. ``FormatError`` fields start ``jobs[0]``. The
    scheduling service checks each job it accepts so, without the cluster's document."""
    if not isinstance(doc, dict):
        raise FormatError("jobs[0]", "a job must be a JSON object")
    return cluster.with_jobs([_job(doc, 0, cluster.typed)])


def job_to_dict(job: Job) -> dict:
    """One job as ``instance_to_dict`` writes it."""
    return _job_json(job)


def instance_from_dict(doc: Any) -> Instance:
    """Read an instance document: its structure here (objects, lists, missing and unknown
    fields), its values by ``Instance``'s own checks, so files and code are checked alike."""
    if not isinstance(doc, dict):
        raise FormatError("", "an instance must be a JSON object")
    fmt = _get(doc, "format", "")
    if fmt not in INSTANCE_FORMATS:
        raise FormatError("format", f"expected {' or '.join(map(repr, INSTANCE_FORMATS))}, "
                          f"got {fmt!r}")
    typed = fmt == TYPED_INSTANCE_FORMAT
    _no_extra(doc, {"format", "horizon", "resources", "worker_servers", "ps_servers", "topology",
                    "jobs", "progress", "meta"}, "")
    horizon = _get(doc, "horizon", "")
    resources = _list(_get(doc, "resources", ""), "resources")
    workers = _servers(_get(doc, "worker_servers", ""), "worker_servers", typed)
    pss = _servers(_get(doc, "ps_servers", ""), "ps_servers", typed)
    jobs = [_job(j, n, typed) for n, j in enumerate(_list(_get(doc, "jobs", ""), "jobs"))]
    topo = doc.get("topology")
    topology = None if topo is None else _topology(topo, "topology")
    inst = Instance(horizon, tuple(resources), tuple(workers), tuple(pss), tuple(jobs), topology,
                    doc.get("progress", "chunk-time"), doc.get("meta", {}))
    if typed and not inst.typed:
        raise FormatError("format", f"{TYPED_INSTANCE_FORMAT!r} is for clusters with accelerator "
                          f"types and no worker server names one (write {INSTANCE_FORMAT!r})")
    return inst


def _server_json(s: Server) -> dict:
    d: dict[str, Any] = {"id": s.id, "capacity": dict(s.capacity)}
    if s.rack is not None:
        d["rack"] = s.rack
    if s.kind is not None:
        d["kind"] = s.kind
    if s.accelerator is not None:
        d["accelerator"] = s.accelerator
    return d


def _job_json(j: Job) -> dict:
    d: dict[str, Any] = {"id": j.id, "arrival": j.arrival, "epochs": j.epochs, "chunks": j.chunks,
                         "chunk_time": j.chunk_time, "worker": dict(j.worker), "ps": dict(j.ps)}
    if j.unit != 1:
        d["unit"] = j.unit
    if j.types is not None:
        d["types"] = {name: {"speed": t.speed, **({} if t.worker is None
                                                  else {"worker": dict(t.worker)})}
                      for name, t in j.types.items()}
    if j.span_types:
        d["span_types"] = j.span_types
    d["utility"] = j.utility.to_json()
    if j.job_class is not None:
        d["class"] = j.job_class
    if j.provenance is not None:
        d["provenance"] = dict(j.provenance)
    if j.task is not None:
        d["task"] = dict(j.task)
    return d


def instance_to_dict(inst: Instance) -> dict:
    d: dict[str, Any] = {"format": TYPED_INSTANCE_FORMAT if inst.typed else INSTANCE_FORMAT,
                         "horizon": inst.horizon,
                         "resources": list(inst.resources),
                         "worker_servers": [_server_json(s) for s in inst.worker_servers],
                         "ps_servers": [_server_json(s) for s in inst.ps_servers]}
    if inst.topology is not None:
        d["topology"] = inst.topology.to_json()
    if inst.progress != "chunk-time":
        d["progress"] = inst.progress
    if inst.meta:
        d["meta"] = dict(inst.meta)
    d["jobs"] = [_job_json(j) for j in inst.jobs]
    return d


# ---- result -----------------------------------------------------------------------------------
class InstanceMismatch(FormatError):
    """The result was written for another instance: its ``instance_sha256`` is ``theirs``, the
    instance's fingerprint ``ours``."""

    def __init__(self, theirs: str, ours: str):
        super().__init__(_FINGERPRINT, "this result belongs to another instance (written for "
                         f"sha256 {theirs[:12]}..., this instance is {ours[:12]}...)")
        self.theirs, self.ours = theirs, ours

    def within(self, prefix: str) -> "InstanceMismatch":
        return self


def result_to_dict(inst: Instance, sched: Schedule) -> dict:
    sid = [s.id for s in inst.servers]
    return {
        "format": RESULT_FORMAT,
        _FINGERPRINT: inst.fingerprint,
        "policy": sched.policy,
        "total_utility": sched.total_utility,
        "jobs": [{"id": j.id, "admitted": sched.admitted[n], "completion": sched.completion[n],
                  "utility": sched.utility[n]} for n, j in enumerate(inst.jobs)],
        "allocations": [{"job": inst.jobs[j].id, "slot": t, "server": sid[s], "role": ROLES[r],
                         "count": c} for j, t, s, r, c in sched.allocations.rows()],
        "stats": jsonable(sched.stats),
    }


def jsonable(v: Any) -> Any:
    """``v`` as plain JSON values: numpy scalars and arrays as Python numbers and lists, tuples as
    lists, keys as strings, NaN as null and infinities as "inf" / "-inf" (what ``dumps`` writes)."""
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def result_from_dict(inst: Instance, doc: Any) -> Schedule:
    """Read a result against its instance; ids must resolve, structure must be sound.

    A result that names the fingerprint of another instance (``instance_sha256``, written since
    results carry it; older files have none and are read as before) raises ``InstanceMismatch``
    before anything else is compared. Semantic problems (capacity, bandwidth, arrival, wrong pool, utility claims ...) are left to
    ``validate``, so that they are reported as violations rather than parse errors.
    """
    if not isinstance(doc, dict):
        raise FormatError("", "a result must be a JSON object")
    fmt = _get(doc, "format", "")
    if fmt != RESULT_FORMAT:
        raise FormatError("format", f"expected {RESULT_FORMAT!r}, got {fmt!r}")
    _no_extra(doc, {"format", _FINGERPRINT, "policy", "total_utility", "jobs", "allocations",
                    "stats"}, "")
    if _FINGERPRINT in doc:
        theirs = doc[_FINGERPRINT]
        if not isinstance(theirs, str) or len(theirs) != 64 or \
                any(c not in "0123456789abcdef" for c in theirs):
            raise FormatError(_FINGERPRINT, f"expected 64 lowercase hex digits, got {theirs!r}")
        if theirs != inst.fingerprint:
            raise InstanceMismatch(theirs, inst.fingerprint)
    policy = text(_get(doc, "policy", ""), "policy")
    total = number(_get(doc, "total_utility", ""), "total_utility", minimum=None)
    jobs = _list(_get(doc, "jobs", ""), "jobs")
    by_id: dict[str, tuple] = {}
    for n, j in enumerate(jobs):
        p = f"jobs[{n}]"
        _no_extra(j, {"id", "admitted", "completion", "utility"}, p)
        jid = text(_get(j, "id", p), f"{p}.id")
        if jid not in inst.job_index:
            raise FormatError(f"{p}.id", f"unknown job id {jid!r}")
        if jid in by_id:
            raise FormatError(f"{p}.id", f"duplicate job id {jid!r}")
        adm = _get(j, "admitted", p)
        if not isinstance(adm, bool):
            raise FormatError(f"{p}.admitted", "expected true or false")
        comp = _get(j, "completion", p)
        comp = None if comp is None else integer(comp, f"{p}.completion", minimum=None)
        by_id[jid] = (adm, comp, number(_get(j, "utility", p), f"{p}.utility", minimum=None))
    missing = [j.id for j in inst.jobs if j.id not in by_id]
    if missing:
        raise FormatError("jobs", f"no entry for job {missing[0]!r}")
    rows = []
    for n, al in enumerate(_list(_get(doc, "allocations", ""), "allocations")):
        p = f"allocations[{n}]"
        _no_extra(al, {"job", "slot", "server", "role", "count"}, p)
        jid = text(_get(al, "job", p), f"{p}.job")
        if jid not in inst.job_index:
            raise FormatError(f"{p}.job", f"unknown job id {jid!r}")
        srv = text(_get(al, "server", p), f"{p}.server")
        if srv not in inst.server_index:
            raise FormatError(f"{p}.server", f"unknown server id {srv!r}")
        role = _get(al, "role", p)
        if role not in ROLES:
            raise FormatError(f"{p}.role", f"expected 'worker' or 'ps', got {role!r}")
        rows.append((inst.job_index[jid], integer(_get(al, "slot", p), f"{p}.slot", minimum=None),
                     inst.server_index[srv], ROLES.index(role),
                     integer(_get(al, "count", p), f"{p}.count", minimum=None)))
    stats = free_form(doc.get("stats", {}), "stats")
    ordered = [by_id[j.id] for j in inst.jobs]
    return Schedule(policy, tuple(o[0] for o in ordered), Allocations.from_rows(rows),
                    tuple(o[1] for o in ordered), tuple(o[2] for o in ordered), total, stats)


# ---- files ------------------------------------------------------------------------------------
def dumps(doc: dict) -> str:
    return json.dumps(doc, indent=1, allow_nan=False) + "\n"


def read_json(path: str | Path) -> Any:
    """Parse a JSON file; errors name the file as the field.

    ``NaN`` / ``Infinity`` (not JSON, but Python writes them) are parsed as floats so that the
    field checks reject them by name (``jobs[0].chunk_time: must be finite``).
    """
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise FormatError(str(path), f"cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise FormatError(str(path), f"not valid JSON: not UTF-8 text ({e.reason})") from None
    try:
        return json.loads(text, parse_constant=float)
    except ValueError as e:
        raise FormatError(str(path), f"not valid JSON: {e}") from None


def write_json_atomic(path: str | Path, doc: dict) -> None:
    """Write via a temporary file and rename, so readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(dumps(doc))
    tmp.replace(path)


def load_instance(path: str | Path) -> Instance:
    return instance_from_dict(read_json(path))


def save_instance(inst: Instance, path: str | Path) -> None:
    write_json_atomic(path, instance_to_dict(inst))


def load_result(inst: Instance, path: str | Path) -> Schedule:
    return result_from_dict(inst, read_json(path))


def save_result(inst: Instance, sched: Schedule, path: str | Path) -> None:
    write_json_atomic(path, result_to_dict(inst, sched))
