"""JSON formats instance@1 and result@1: exact round trips, byte-identical write-read-write."""
from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from hypothesis import given

from oasis_opt import solve
from oasis_opt.model import (PS, WORKER, Instance, Job, ScheduleBuilder, Server, Topology,
                             Utility, validate)
from oasis_opt.model.io import (INSTANCE_FORMAT, RESULT_FORMAT, FormatError, dumps,
                                instance_from_dict, instance_to_dict, load_instance, load_result,
                                result_from_dict, result_to_dict, save_instance, save_result)
from oasis_opt.testing import instances


def _same_schedule(a, b):
    assert (a.policy, a.admitted, a.completion, a.utility, a.total_utility) == \
        (b.policy, b.admitted, b.completion, b.utility, b.total_utility)
    for col in ("job", "slot", "server", "role", "count"):
        assert np.array_equal(getattr(a.allocations, col), getattr(b.allocations, col)), col


@given(instances())
def test_instance_round_trip_is_exact(inst):
    doc = instance_to_dict(inst)
    assert doc["format"] == INSTANCE_FORMAT
    back = instance_from_dict(json.loads(dumps(doc)))
    assert back == inst  # every field, floats bit for bit
    for name in ("capacity", "worker_demand", "ps_demand", "chunk_time", "work", "utility_table"):
        assert np.array_equal(getattr(back, name), getattr(inst, name)), name
    assert dumps(instance_to_dict(back)) == dumps(doc)


@given(instances())
def test_result_round_trip_is_exact(inst):
    sched = solve(inst, "greedy")
    doc = result_to_dict(inst, sched)
    assert doc["format"] == RESULT_FORMAT
    back = result_from_dict(inst, json.loads(dumps(doc)))
    _same_schedule(back, sched)
    assert validate(inst, back).ok
    assert dumps(result_to_dict(inst, back)) == dumps(doc)


@given(instances(max_jobs=3))
def test_files_write_read_write_byte_identical(tmp_path_factory, inst):
    d = tmp_path_factory.mktemp("io")
    save_instance(inst, d / "a.json")
    again = load_instance(d / "a.json")
    save_instance(again, d / "b.json")
    assert (d / "a.json").read_bytes() == (d / "b.json").read_bytes()
    sched = solve(again, "greedy")
    save_result(again, sched, d / "r1.json")
    save_result(again, load_result(again, d / "r1.json"), d / "r2.json")
    assert (d / "r1.json").read_bytes() == (d / "r2.json").read_bytes()
    assert not list(d.glob(".*.tmp"))  # atomic writes leave no temporary behind


def _rich_instance() -> Instance:
    """Every optional field: racks, kinds, explicit topology, constant utility, class,
    provenance, training task, progress mode, meta; floats that do not print short."""
    ws = (Server("w0", {"gpu": 4.0, "cpu": 32.0, "mem": 488.0, "storage": 1000.0, "bw": 20.1},
                 rack="r0", kind="p2.8xlarge"),
          Server("w1", {"gpu": 2.0, "cpu": 32.0, "bw": 33.3}, rack="r1"))
    ps = (Server("p0", {"cpu": 36.0, "mem": 60.0, "bw": 47.123456789012345}, kind="c4.8xlarge"),)
    jobs = (Job("resnet-1", 3, 7, 11, 0.1 + 0.2, {"gpu": 1.0, "cpu": 2.5, "bw": 1 / 3},
                {"cpu": 3.0, "bw": 2 / 3}, Utility.sigmoid(37.5, 5.25, 7.0), "time-critical",
                {"minibatches": 40, "minibatch_time_s": 0.0123, "gradient_mb": [1.5, 2.5]}),
            Job("vgg", 1, 1, 1, 1e-3, {"bw": 1e-6}, {"bw": 5.0}, Utility.constant(2.0),
                task={"name": "digits-mlp", "config": {"width": 64, "optimizer": "adam"},
                      "seed": 3, "data_seed": 1}))
    base = Instance(9, ("gpu", "cpu", "mem", "storage", "bw"), ws, ps, jobs,
                    progress="placement", meta={"preset": "hand", "seed": 7, "note": [1, None]})
    return Instance(base.horizon, base.resources, ws, ps, jobs, Topology.from_racks(base),
                    base.progress, dict(base.meta))


def test_every_optional_field_round_trips(tmp_path):
    inst = _rich_instance()
    save_instance(inst, tmp_path / "a.json")
    back = load_instance(tmp_path / "a.json")
    assert back.topology is not None and back.topology.to_json() == inst.topology.to_json()
    assert (back.progress, dict(back.meta)) == ("placement", dict(inst.meta))
    assert back.jobs == inst.jobs and back.servers == inst.servers
    save_instance(back, tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_result_stats_become_plain_json(tmp_path):
    # the paper's progress model, so that the schedule's outcome needs no placement cost model
    inst = dataclasses.replace(_rich_instance(), progress="chunk-time")
    b = ScheduleBuilder(inst)
    b.admit(1)
    b.add(1, 1, 0, WORKER, 1)
    b.add(1, 1, 2, PS, 1)
    sched = b.build("hand", {"gap": math.inf, "bound": np.float64(1.5), "iters": np.int64(3),
                             "lost": math.nan, "per_slot": np.arange(3)})
    assert validate(inst, sched).ok
    save_result(inst, sched, tmp_path / "r.json")
    back = load_result(inst, tmp_path / "r.json")
    _same_schedule(back, sched)
    assert back.stats == {"gap": "inf", "bound": 1.5, "iters": 3, "lost": None,
                          "per_slot": [0, 1, 2]}
    save_result(inst, back, tmp_path / "r2.json")
    assert (tmp_path / "r.json").read_bytes() == (tmp_path / "r2.json").read_bytes()


@pytest.mark.parametrize("where, field", [
    (lambda d: d["jobs"][0].__setitem__("chunk_time", float("nan")), "jobs[0].chunk_time"),
    (lambda d: d["jobs"][0]["provenance"].__setitem__("minibatches", float("inf")),
     "jobs[0].provenance.minibatches"),
    (lambda d: d["meta"].__setitem__("note", [1, float("-inf")]), "meta.note[1]"),
])
def test_non_finite_numbers_are_named(tmp_path, where, field):
    doc = instance_to_dict(_rich_instance())
    where(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))  # Python writes NaN / Infinity, which is not JSON
    with pytest.raises(FormatError) as err:
        load_instance(path)
    assert err.value.field == field
    assert "finite" in str(err.value)


def test_task_is_optional_and_written_only_when_given():
    inst = _rich_instance()
    doc = instance_to_dict(inst)
    assert "task" not in doc["jobs"][0]  # files without tasks are written as before
    assert doc["jobs"][1]["task"] == {"name": "digits-mlp", "seed": 3, "data_seed": 1,
                                      "config": {"width": 64, "optimizer": "adam"}}
    plain = inst.with_jobs([dataclasses.replace(inst.jobs[1], task=None)])
    assert "task" not in instance_to_dict(plain)["jobs"][0]


@pytest.mark.parametrize("task, field, message", [
    ("digits-mlp", "jobs[1].task", "expected an object"),
    ({"config": {}}, "jobs[1].task.name", "missing field"),
    ({"name": "digits-mlp"}, "jobs[1].task.config", "missing field"),
    ({"name": "", "config": {}}, "jobs[1].task.name", "non-empty string"),
    ({"name": "digits-mlp", "config": []}, "jobs[1].task.config", "expected an object"),
    ({"name": "digits-mlp", "config": {}, "seed": -1}, "jobs[1].task.seed", ">= 0"),
    ({"name": "digits-mlp", "config": {}, "seed": 1.5}, "jobs[1].task.seed", "integer"),
    ({"name": "digits-mlp", "config": {}, "epochs": 3}, "jobs[1].task.epochs", "unknown field"),
    ({"name": "digits-mlp", "config": {"lr": float("nan")}}, "jobs[1].task.config.lr",
     "finite"),
])
def test_a_bad_task_is_named_in_files_and_in_code(tmp_path, task, field, message):
    doc = instance_to_dict(_rich_instance())
    doc["jobs"][1]["task"] = task
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match=message) as err:
        load_instance(path)
    assert err.value.field == field
    inst = _rich_instance()
    with pytest.raises(FormatError, match=message) as err:
        inst.with_jobs([inst.jobs[0], dataclasses.replace(inst.jobs[1], task=task)])
    assert err.value.field == field
