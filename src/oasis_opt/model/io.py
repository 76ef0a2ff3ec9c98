"""JSON formats ``oasis-opt/instance@1`` and ``oasis-opt/result@1``: strict readers, exact writers.

Readers check everything once at the edge and raise ``FormatError`` naming the offending field
(e.g. ``jobs[3].worker.bw``); inside the package, data is trusted. Writers emit keys in a fixed
order with ``repr``-exact floats, so a round trip is byte-identical.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from .instance import BANDWIDTH, JOB_CLASSES, Instance, Job, Server
from .schedule import ROLES, Allocations, Schedule
from .topology import NODE_KINDS, Topology
from .utility import KINDS, Utility

INSTANCE_FORMAT = "oasis-opt/instance@1"
RESULT_FORMAT = "oasis-opt/result@1"
PROGRESS_MODES = ("chunk-time", "placement")


class FormatError(ValueError):
    """Bad input: ``field`` is a dotted path into the document."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field


# ---- primitive checks -----------------------------------------------------------------------
def _get(d: dict, key: str, path: str, default: Any = ...):
    if not isinstance(d, dict):
        raise FormatError(path, "expected an object")
    if key not in d:
        if default is ...:
            raise FormatError(f"{path}.{key}" if path else key, "missing field")
        return default
    return d[key]


def _no_extra(d: dict, allowed: set[str], path: str) -> None:
    extra = sorted(set(d) - allowed)
    if extra:
        raise FormatError(f"{path}.{extra[0]}" if path else extra[0], "unknown field")


def _number(v: Any, path: str, *, minimum: float | None = 0.0, strict: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise FormatError(path, f"expected a number, got {json.dumps(v)[:40]}")
    if not math.isfinite(v):
        raise FormatError(path, f"must be finite, got {v}")
    if minimum is not None and (v <= minimum if strict else v < minimum):
        raise FormatError(path, f"must be {'>' if strict else '>='} {minimum:g}, got {v}")
    return float(v)


def _int(v: Any, path: str, *, minimum: int | None = 0) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        else:
            raise FormatError(path, f"expected an integer, got {json.dumps(v)[:40]}")
    if minimum is not None and v < minimum:
        raise FormatError(path, f"must be >= {minimum}, got {v}")
    return int(v)


def _str(v: Any, path: str) -> str:
    if not isinstance(v, str) or not v:
        raise FormatError(path, "expected a non-empty string")
    return v


def _amounts(d: Any, resources: tuple[str, ...], path: str) -> dict[str, float]:
    if not isinstance(d, dict):
        raise FormatError(path, "expected an object {resource: amount}")
    out = {}
    for r, v in d.items():
        if r not in resources:
            raise FormatError(f"{path}.{r}", f"unknown resource (known: {', '.join(resources)})")
        out[r] = _number(v, f"{path}.{r}")
    return out


def _free_form(v: Any, path: str) -> dict:
    """A free-form object (provenance, meta, stats): any JSON, but numbers must be finite."""
    if not isinstance(v, dict):
        raise FormatError(path, "expected an object")

    def check(x: Any, p: str) -> None:
        if isinstance(x, float) and not math.isfinite(x):
            raise FormatError(p, f"must be finite, got {x}")
        if isinstance(x, dict):
            for k, y in x.items():
                check(y, f"{p}.{k}")
        elif isinstance(x, list):
            for n, y in enumerate(x):
                check(y, f"{p}[{n}]")

    check(v, path)
    return v


def _list(v: Any, path: str) -> list:
    if not isinstance(v, list):
        raise FormatError(path, "expected a list")
    return v


# ---- instance ---------------------------------------------------------------------------------
def _utility(d: Any, path: str) -> Utility:
    kind = _get(d, "kind", path)
    if kind not in KINDS:
        raise FormatError(f"{path}.kind", f"unknown utility kind {kind!r} (known: {', '.join(KINDS)})")
    if kind == "constant":
        _no_extra(d, {"kind", "value"}, path)
        return Utility.constant(_number(_get(d, "value", path), f"{path}.value"))
    _no_extra(d, {"kind", "priority", "decay", "target"}, path)
    return Utility.sigmoid(_number(_get(d, "priority", path), f"{path}.priority"),
                           _number(_get(d, "decay", path), f"{path}.decay"),
                           _number(_get(d, "target", path), f"{path}.target", minimum=None))


def _servers(v: Any, resources, path: str, seen: set[str]) -> tuple[Server, ...]:
    out = []
    for n, s in enumerate(_list(v, path)):
        p = f"{path}[{n}]"
        _no_extra(s, {"id", "capacity", "rack", "kind"}, p)
        sid = _str(_get(s, "id", p), f"{p}.id")
        if sid in seen:
            raise FormatError(f"{p}.id", f"duplicate server id {sid!r}")
        seen.add(sid)
        rack = s.get("rack")
        out.append(Server(sid, _amounts(_get(s, "capacity", p), resources, f"{p}.capacity"),
                          None if rack is None else _str(rack, f"{p}.rack"),
                          None if s.get("kind") is None else _str(s["kind"], f"{p}.kind")))
    return tuple(out)


def _topology(d: Any, server_ids: set[str], path: str) -> Topology:
    _no_extra(d, {"nodes", "links"}, path)
    g = nx.Graph()
    for n, node in enumerate(_list(_get(d, "nodes", path), f"{path}.nodes")):
        p = f"{path}.nodes[{n}]"
        _no_extra(node, {"id", "kind"}, p)
        nid, kind = _str(_get(node, "id", p), f"{p}.id"), _get(node, "kind", p)
        if kind not in NODE_KINDS:
            raise FormatError(f"{p}.kind", f"unknown node kind {kind!r}")
        if kind == "server" and nid not in server_ids:
            raise FormatError(f"{p}.id", f"unknown server id {nid!r}")
        g.add_node(nid, kind=kind)
    for n, link in enumerate(_list(_get(d, "links", path), f"{path}.links")):
        p = f"{path}.links[{n}]"
        _no_extra(link, {"a", "b", "bandwidth"}, p)
        a, b = _str(_get(link, "a", p), f"{p}.a"), _str(_get(link, "b", p), f"{p}.b")
        for end, name in ((a, "a"), (b, "b")):
            if end not in g:
                raise FormatError(f"{p}.{name}", f"unknown node {end!r}")
        g.add_edge(a, b, bandwidth=_number(_get(link, "bandwidth", p), f"{p}.bandwidth", strict=True))
    roots = [n for n, k in g.nodes(data="kind") if k == "core"]
    if len(roots) != 1:
        raise FormatError(f"{path}.nodes", f"need exactly one core node, found {len(roots)}")
    if not nx.is_tree(g):
        raise FormatError(f"{path}.links", "the topology must be a connected tree")
    missing = server_ids - set(g)
    if missing:
        raise FormatError(f"{path}.nodes", f"server {sorted(missing)[0]!r} is not in the topology")
    return Topology(g, roots[0])


def _job(d: Any, n: int, resources, horizon: int) -> Job:
    p = f"jobs[{n}]"
    _no_extra(d, {"id", "arrival", "epochs", "chunks", "chunk_time", "worker", "ps", "utility",
                  "class", "provenance"}, p)
    arrival = _int(_get(d, "arrival", p), f"{p}.arrival", minimum=1)
    if arrival > horizon:
        raise FormatError(f"{p}.arrival", f"must lie in 1..{horizon}, got {arrival}")
    worker = _amounts(_get(d, "worker", p), resources, f"{p}.worker")
    ps = _amounts(_get(d, "ps", p), resources, f"{p}.ps")
    for dem, name in ((worker, "worker"), (ps, "ps")):
        if dem.get(BANDWIDTH, 0.0) <= 0:
            raise FormatError(f"{p}.{name}.{BANDWIDTH}", "bandwidth must be > 0")
    cls = d.get("class")
    if cls is not None and cls not in JOB_CLASSES:
        raise FormatError(f"{p}.class", f"unknown job class {cls!r} (known: {', '.join(JOB_CLASSES)})")
    prov = d.get("provenance")
    if prov is not None:
        _free_form(prov, f"{p}.provenance")
    return Job(
        id=_str(_get(d, "id", p), f"{p}.id"),
        arrival=arrival,
        epochs=_int(_get(d, "epochs", p), f"{p}.epochs", minimum=1),
        chunks=_int(_get(d, "chunks", p), f"{p}.chunks", minimum=1),
        chunk_time=_number(_get(d, "chunk_time", p), f"{p}.chunk_time", strict=True),
        worker=worker, ps=ps,
        utility=_utility(_get(d, "utility", p), f"{p}.utility"),
        job_class=cls, provenance=prov,
    )


def instance_from_dict(doc: Any) -> Instance:
    if not isinstance(doc, dict):
        raise FormatError("", "an instance must be a JSON object")
    fmt = _get(doc, "format", "")
    if fmt != INSTANCE_FORMAT:
        raise FormatError("format", f"expected {INSTANCE_FORMAT!r}, got {fmt!r}")
    _no_extra(doc, {"format", "horizon", "resources", "worker_servers", "ps_servers", "topology",
                    "jobs", "progress", "meta"}, "")
    horizon = _int(_get(doc, "horizon", ""), "horizon", minimum=1)
    resources = tuple(_str(r, f"resources[{n}]")
                      for n, r in enumerate(_list(_get(doc, "resources", ""), "resources")))
    if len(set(resources)) != len(resources):
        raise FormatError("resources", "duplicate resource name")
    if BANDWIDTH not in resources:
        raise FormatError("resources", f"must include the bandwidth resource {BANDWIDTH!r}")
    seen: set[str] = set()
    workers = _servers(_get(doc, "worker_servers", ""), resources, "worker_servers", seen)
    pss = _servers(_get(doc, "ps_servers", ""), resources, "ps_servers", seen)
    if not workers:
        raise FormatError("worker_servers", "need at least one worker server")
    if not pss:
        raise FormatError("ps_servers", "need at least one PS server")
    jobs = tuple(_job(j, n, resources, horizon) for n, j in enumerate(_list(_get(doc, "jobs", ""), "jobs")))
    ids = [j.id for j in jobs]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise FormatError(f"jobs[{ids.index(dup, ids.index(dup) + 1)}].id", f"duplicate job id {dup!r}")
    topo = doc.get("topology")
    topology = None if topo is None else _topology(topo, seen, "topology")
    progress = doc.get("progress", "chunk-time")
    if progress not in PROGRESS_MODES:
        raise FormatError("progress", f"unknown progress mode {progress!r} (known: {', '.join(PROGRESS_MODES)})")
    meta = _free_form(doc.get("meta", {}), "meta")
    return Instance(horizon, resources, workers, pss, jobs, topology, progress, meta)


def _server_json(s: Server) -> dict:
    d: dict[str, Any] = {"id": s.id, "capacity": dict(s.capacity)}
    if s.rack is not None:
        d["rack"] = s.rack
    if s.kind is not None:
        d["kind"] = s.kind
    return d


def _job_json(j: Job) -> dict:
    d: dict[str, Any] = {"id": j.id, "arrival": j.arrival, "epochs": j.epochs, "chunks": j.chunks,
                         "chunk_time": j.chunk_time, "worker": dict(j.worker), "ps": dict(j.ps),
                         "utility": j.utility.to_json()}
    if j.job_class is not None:
        d["class"] = j.job_class
    if j.provenance is not None:
        d["provenance"] = dict(j.provenance)
    return d


def instance_to_dict(inst: Instance) -> dict:
    d: dict[str, Any] = {"format": INSTANCE_FORMAT, "horizon": inst.horizon,
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
def result_to_dict(inst: Instance, sched: Schedule) -> dict:
    sid = [s.id for s in inst.servers]
    return {
        "format": RESULT_FORMAT,
        "policy": sched.policy,
        "total_utility": sched.total_utility,
        "jobs": [{"id": j.id, "admitted": sched.admitted[n], "completion": sched.completion[n],
                  "utility": sched.utility[n]} for n, j in enumerate(inst.jobs)],
        "allocations": [{"job": inst.jobs[j].id, "slot": t, "server": sid[s], "role": ROLES[r],
                         "count": c} for j, t, s, r, c in sched.allocations.rows()],
        "stats": _jsonable(sched.stats),
    }


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def result_from_dict(inst: Instance, doc: Any) -> Schedule:
    """Read a result against its instance; ids must resolve, structure must be sound.

    Semantic problems (capacity, bandwidth, arrival, wrong pool, utility claims ...) are left to
    ``validate``, so that they are reported as violations rather than parse errors.
    """
    if not isinstance(doc, dict):
        raise FormatError("", "a result must be a JSON object")
    fmt = _get(doc, "format", "")
    if fmt != RESULT_FORMAT:
        raise FormatError("format", f"expected {RESULT_FORMAT!r}, got {fmt!r}")
    _no_extra(doc, {"format", "policy", "total_utility", "jobs", "allocations", "stats"}, "")
    policy = _str(_get(doc, "policy", ""), "policy")
    total = _number(_get(doc, "total_utility", ""), "total_utility", minimum=None)
    jobs = _list(_get(doc, "jobs", ""), "jobs")
    by_id: dict[str, tuple] = {}
    for n, j in enumerate(jobs):
        p = f"jobs[{n}]"
        _no_extra(j, {"id", "admitted", "completion", "utility"}, p)
        jid = _str(_get(j, "id", p), f"{p}.id")
        if jid not in inst.job_index:
            raise FormatError(f"{p}.id", f"unknown job id {jid!r}")
        if jid in by_id:
            raise FormatError(f"{p}.id", f"duplicate job id {jid!r}")
        adm = _get(j, "admitted", p)
        if not isinstance(adm, bool):
            raise FormatError(f"{p}.admitted", "expected true or false")
        comp = _get(j, "completion", p)
        comp = None if comp is None else _int(comp, f"{p}.completion", minimum=None)
        by_id[jid] = (adm, comp, _number(_get(j, "utility", p), f"{p}.utility", minimum=None))
    missing = [j.id for j in inst.jobs if j.id not in by_id]
    if missing:
        raise FormatError("jobs", f"no entry for job {missing[0]!r}")
    rows = []
    for n, al in enumerate(_list(_get(doc, "allocations", ""), "allocations")):
        p = f"allocations[{n}]"
        _no_extra(al, {"job", "slot", "server", "role", "count"}, p)
        jid = _str(_get(al, "job", p), f"{p}.job")
        if jid not in inst.job_index:
            raise FormatError(f"{p}.job", f"unknown job id {jid!r}")
        srv = _str(_get(al, "server", p), f"{p}.server")
        if srv not in inst.server_index:
            raise FormatError(f"{p}.server", f"unknown server id {srv!r}")
        role = _get(al, "role", p)
        if role not in ROLES:
            raise FormatError(f"{p}.role", f"expected 'worker' or 'ps', got {role!r}")
        rows.append((inst.job_index[jid], _int(_get(al, "slot", p), f"{p}.slot", minimum=None),
                     inst.server_index[srv], ROLES.index(role),
                     _int(_get(al, "count", p), f"{p}.count", minimum=None)))
    stats = _free_form(doc.get("stats", {}), "stats")
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
