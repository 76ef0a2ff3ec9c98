"""Instances built in code are checked like files: every bad value raises ``FormatError`` (a
``ValueError``) naming the field by its path in the instance document, and the JSON reader, which
builds instances through the same constructor, reports the same field and message."""
from __future__ import annotations

import dataclasses
import json

import networkx as nx
import numpy as np
import pytest

from oasis_opt import solve, validate
from oasis_opt.model import DEFAULT_RESOURCES, FormatError, Instance, Job, Server, Topology, Utility
from oasis_opt.model.io import dumps, instance_from_dict, instance_to_dict, load_instance, save_instance

CAP = {"gpu": 4.0, "cpu": 8.0, "mem": 32.0, "storage": 100.0, "bw": 20.0}


def _job(i: int, **change) -> Job:
    job = Job(f"j{i}", 1 + i % 3, 2, 2, 1.5, {"gpu": 1.0, "cpu": 2.0, "bw": 5.0},
              {"cpu": 1.0, "bw": 10.0}, Utility.sigmoid(10.0, 0.5, 3.0), "time-sensitive")
    return dataclasses.replace(job, **change)


def _servers(prefix="w", n=2, **change) -> tuple[Server, ...]:
    return tuple(dataclasses.replace(Server(f"{prefix}{h}", dict(CAP), rack="r0"), **change)
                 for h in range(n))


def _fields(**change) -> dict:
    base = {"horizon": 6, "resources": DEFAULT_RESOURCES, "worker_servers": _servers(),
            "ps_servers": _servers("p", 1), "jobs": tuple(_job(i) for i in range(4))}
    return {**base, **change}


def _jobs(n: int, **change) -> tuple[Job, ...]:
    """The base jobs with job ``n`` changed."""
    return tuple(_job(i, **change) if i == n else _job(i) for i in range(4))


def _unchecked(**fields) -> Instance:
    """An Instance object that skips the checks, to write its (bad) document."""
    inst = object.__new__(Instance)
    for f in dataclasses.fields(Instance):
        object.__setattr__(inst, f.name, fields.get(f.name, f.default if f.default is not
                                                    dataclasses.MISSING else {}))
    return inst


def _topology(server_ids, bandwidth=10.0) -> Topology:
    g = nx.Graph()
    g.add_node("core", kind="core")
    g.add_node("r0", kind="rack")
    g.add_edge("r0", "core", bandwidth=60.0)
    for s in server_ids:
        g.add_node(s, kind="server")
        g.add_edge(s, "r0", bandwidth=bandwidth)
    return Topology(g)


NAN, INF = float("nan"), float("inf")
# name: (fields of Instance(...), the field the error must name)
CASES = {
    "duplicate-job-id": (_fields(jobs=_jobs(2, id="j0")), "jobs[2].id"),
    "duplicate-server-id": (_fields(worker_servers=(Server("w0", CAP), Server("w0", CAP))),
                            "worker_servers[1].id"),
    "server-id-in-both-pools": (_fields(ps_servers=(Server("w1", CAP),)), "ps_servers[0].id"),
    "empty-job-id": (_fields(jobs=_jobs(0, id="")), "jobs[0].id"),
    "zero-worker-bandwidth": (_fields(jobs=_jobs(3, worker={"gpu": 1.0, "bw": 0.0})),
                              "jobs[3].worker.bw"),
    "missing-ps-bandwidth": (_fields(jobs=_jobs(1, ps={"cpu": 1.0})), "jobs[1].ps.bw"),
    "negative-demand": (_fields(jobs=_jobs(0, worker={"cpu": -1.0, "bw": 1.0})),
                        "jobs[0].worker.cpu"),
    "unknown-resource-in-demand": (_fields(jobs=_jobs(0, worker={"tpu": 1.0, "bw": 1.0})),
                                   "jobs[0].worker.tpu"),
    "unknown-resource-in-capacity": (_fields(ps_servers=(Server("p0", {**CAP, "fpga": 1.0}),)),
                                     "ps_servers[0].capacity.fpga"),
    "string-epochs": (_fields(jobs=_jobs(0, epochs="2")), "jobs[0].epochs"),
    "bool-chunks": (_fields(jobs=_jobs(0, chunks=True)), "jobs[0].chunks"),
    "fractional-epochs": (_fields(jobs=_jobs(1, epochs=1.5)), "jobs[1].epochs"),
    "zero-chunks": (_fields(jobs=_jobs(2, chunks=0)), "jobs[2].chunks"),
    "zero-epochs": (_fields(jobs=_jobs(2, epochs=0)), "jobs[2].epochs"),
    "zero-chunk-time": (_fields(jobs=_jobs(0, chunk_time=0.0)), "jobs[0].chunk_time"),
    "nan-chunk-time": (_fields(jobs=_jobs(0, chunk_time=NAN)), "jobs[0].chunk_time"),
    "infinite-capacity": (_fields(worker_servers=_servers(capacity={**CAP, "cpu": INF})),
                          "worker_servers[0].capacity.cpu"),
    "string-capacity": (_fields(worker_servers=_servers(capacity={**CAP, "cpu": "8"})),
                        "worker_servers[0].capacity.cpu"),
    "arrival-zero": (_fields(jobs=_jobs(0, arrival=0)), "jobs[0].arrival"),
    "arrival-after-horizon": (_fields(jobs=_jobs(3, arrival=7)), "jobs[3].arrival"),
    "zero-horizon": (_fields(horizon=0), "horizon"),
    "string-horizon": (_fields(horizon="6"), "horizon"),
    "no-bandwidth-resource": (_fields(resources=("gpu", "cpu", "mem", "storage")), "resources"),
    "duplicate-resource": (_fields(resources=("bw", "cpu", "bw")), "resources"),
    "no-worker-servers": (_fields(worker_servers=()), "worker_servers"),
    "no-ps-servers": (_fields(ps_servers=()), "ps_servers"),
    "every-worker-server-without-bandwidth": (
        _fields(worker_servers=_servers(capacity={**CAP, "bw": 0.0})), "worker_servers"),
    "every-ps-server-without-bandwidth": (
        _fields(ps_servers=_servers("p", 2, capacity={"cpu": 8.0})), "ps_servers"),
    "unknown-job-class": (_fields(jobs=_jobs(1, job_class="urgent")), "jobs[1].class"),
    "non-finite-provenance": (_fields(jobs=_jobs(0, provenance={"minibatches": NAN})),
                              "jobs[0].provenance.minibatches"),
    "non-finite-meta": (_fields(meta={"note": [1, INF]}), "meta.note[1]"),
    "unknown-progress-mode": (_fields(progress="fast"), "progress"),
    "unknown-server-in-topology": (_fields(topology=_topology(["w0", "w1", "p0", "w9"])),
                                   "topology.nodes[5].id"),
    "server-missing-from-topology": (_fields(topology=_topology(["w0", "p0"])), "topology.nodes"),
    "zero-link-bandwidth": (_fields(topology=_topology(["w0", "w1", "p0"], bandwidth=0.0)),
                            "topology.links[1].bandwidth"),
}
# built in code only: not expressible in a JSON document
CODE_ONLY = {
    "job-not-a-job": (_fields(jobs=({"id": "j0"},)), "jobs[0]"),
    "utility-not-a-utility": (_fields(jobs=_jobs(0, utility=0.5)), "jobs[0].utility"),
    "server-not-a-server": (_fields(ps_servers=("p0",)), "ps_servers[0]"),
    "meta-not-json": (_fields(meta={"when": object()}), "meta.when"),
    "topology-not-a-topology": (_fields(topology={"nodes": []}), "topology"),
}


def test_the_base_instance_is_valid_and_solves():
    inst = Instance(**_fields())
    assert validate(inst, solve(inst, "greedy")).ok


@pytest.mark.parametrize("case", sorted({**CASES, **CODE_ONLY}))
def test_bad_instance_in_code_raises_naming_the_field(case):
    fields, field = {**CASES, **CODE_ONLY}[case]
    with pytest.raises(FormatError) as err:
        Instance(**fields)
    assert isinstance(err.value, ValueError)
    assert err.value.field == field, str(err.value)
    assert str(err.value).startswith(f"{field}: ") and err.value.message


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_file_reader_reports_the_same_field_and_message(case):
    """The reader builds instances through ``Instance``: a file with the same bad value fails
    with the same field and message as the code."""
    assert_file_reports_as_code(*CASES[case])


def assert_file_reports_as_code(fields: dict, field: str) -> None:
    """``Instance(**fields)`` and the reader of its document fail naming ``field``, alike."""
    with pytest.raises(FormatError) as in_code:
        Instance(**fields)
    doc = json.loads(json.dumps(instance_to_dict(_unchecked(**fields))))
    with pytest.raises(FormatError) as in_file:
        instance_from_dict(doc)
    assert (in_file.value.field, in_file.value.message) == (field, in_code.value.message)


@pytest.mark.parametrize("build, field", [
    (lambda: Utility("linear"), "kind"),
    (lambda: Utility("sigmoid", priority=-1.0), "priority"),
    (lambda: Utility("sigmoid", priority=10.0, decay=NAN), "decay"),
    (lambda: Utility("sigmoid", priority=10.0, target="3"), "target"),
    (lambda: Utility.constant(-2.0), "value"),
    (lambda: Utility("constant", value=1.0, decay=2.0), "decay"),
    (lambda: Utility("sigmoid", priority=1.0, value=3.0), "value"),
])
def test_a_utility_checks_itself_when_built(build, field):
    with pytest.raises(FormatError) as err:
        build()
    assert err.value.field == field


def test_unknown_utility_kind_in_a_file_is_named():
    doc = instance_to_dict(Instance(**_fields()))
    doc["jobs"][2]["utility"] = {"kind": "linear", "slope": 1.0}
    with pytest.raises(FormatError) as err:
        instance_from_dict(doc)
    assert err.value.field == "jobs[2].utility.kind" and "'linear'" in err.value.message


def test_numpy_and_integer_values_become_the_canonical_instance(tmp_path):
    """An instance built with numpy scalars and integer amounts equals, and writes the same
    bytes as, the one read back from its file."""
    jobs = tuple(_job(i, arrival=np.int64(1 + i), epochs=np.int32(2), chunk_time=np.float32(1.5),
                      worker={"gpu": 1, "bw": np.float64(5)}) for i in range(3))
    inst = Instance(np.int64(6), list(DEFAULT_RESOURCES), list(_servers(capacity={"gpu": 4, "bw": 20})),
                    _servers("p", 1), list(jobs), meta={"seed": 3, "mix": (0.5, 0.5)})
    assert type(inst.horizon) is int and isinstance(inst.jobs, tuple)
    assert type(inst.jobs[0].arrival) is int and type(inst.jobs[0].chunk_time) is float
    assert type(inst.worker_servers[0].capacity["gpu"]) is float
    save_instance(inst, tmp_path / "a.json")
    back = load_instance(tmp_path / "a.json")
    assert back.jobs == inst.jobs and back.servers == inst.servers
    assert back.fingerprint == inst.fingerprint
    assert dumps(instance_to_dict(back)) == dumps(instance_to_dict(inst))


def test_checked_objects_pass_through_unchanged():
    jobs = tuple(_job(i) for i in range(4))
    inst = Instance(**_fields(jobs=jobs))
    assert all(a is b for a, b in zip(inst.jobs, jobs))


def test_replace_and_with_jobs_are_checked_too():
    inst = Instance(**_fields())
    with pytest.raises(FormatError, match=r"^jobs\[0\]\.chunks: "):
        inst.with_jobs(_jobs(0, chunks=0))
    with pytest.raises(FormatError, match=r"^horizon: "):
        dataclasses.replace(inst, horizon=-1)
    # shrinking the horizon below an arrival is caught where it happens
    with pytest.raises(FormatError, match=r"^jobs\[2\]\.arrival: must lie in 1\.\.2, got 3"):
        dataclasses.replace(inst, horizon=2)


def test_fingerprint_is_the_hash_of_the_canonical_json(tmp_path):
    import hashlib

    inst = Instance(**_fields())
    save_instance(inst, tmp_path / "i.json")
    compact = json.dumps(json.loads((tmp_path / "i.json").read_text()), separators=(",", ":"))
    assert inst.fingerprint == hashlib.sha256(compact.encode()).hexdigest()
    assert load_instance(tmp_path / "i.json").fingerprint == inst.fingerprint
    other = inst.with_jobs(_jobs(1, chunk_time=2.0))
    assert other.fingerprint != inst.fingerprint
    assert len(inst.fingerprint) == 64 and int(inst.fingerprint, 16) >= 0
