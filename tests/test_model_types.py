"""Accelerator types in the model (``oasis-opt/instance@2``): the fields, their strict checks (one
path for code and files, errors naming the field), byte-exact round trips, and the array API the
solvers use (per job x type speeds and demands, integer work units)."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given

from oasis_opt import solve, validate
from oasis_opt.model import (DEFAULT_RESOURCES, FormatError, Instance, Job, JobType, Server,
                             UnsupportedInstance, Utility)
from oasis_opt.model.io import (INSTANCE_FORMAT, TYPED_INSTANCE_FORMAT, dumps, instance_from_dict,
                                instance_to_dict, load_instance, save_instance)
from oasis_opt.model.schedule import Allocations, work_done
from oasis_opt.testing import hetero_instances
from test_model_checks import assert_file_reports_as_code

GPU_CAP = {"gpu": 4.0, "cpu": 16.0, "mem": 64.0, "storage": 100.0, "bw": 20.0}
CPU_CAP = {"gpu": 0.0, "cpu": 64.0, "mem": 128.0, "storage": 100.0, "bw": 20.0}
WORKER = {"gpu": 1.0, "cpu": 2.0, "mem": 8.0, "bw": 5.0}
CPU_MODE = {"cpu": 16.0, "mem": 8.0, "bw": 5.0}


def _job(i: int, **change) -> Job:
    # E 2 x N 2 x x 1.5 x u 4 = 24 work units
    job = Job(f"j{i}", 1, 2, 2, 1.5, dict(WORKER), {"cpu": 1.0, "bw": 10.0},
              Utility.sigmoid(10.0, 0.5, 3.0), "time-sensitive", unit=4,
              types={"v100": JobType(6), "k80": JobType(2), "cpu": JobType(1, dict(CPU_MODE))})
    return dataclasses.replace(job, **change)


def _workers(**change) -> tuple[Server, ...]:
    servers = (Server("v0", dict(GPU_CAP), rack="r0", accelerator="v100"),
               Server("k0", dict(GPU_CAP), rack="r0", accelerator="k80"),
               Server("v1", dict(GPU_CAP), rack="r1", accelerator="v100"),
               Server("c0", dict(CPU_CAP), rack="r1", accelerator="cpu"))
    return tuple(dataclasses.replace(s, **change) for s in servers)


def _fields(**change) -> dict:
    jobs = (_job(0), _job(1, types=None, unit=1), _job(2, span_types=True),
            _job(3, types={"k80": JobType(3)}, unit=1))
    base = {"horizon": 6, "resources": DEFAULT_RESOURCES, "worker_servers": _workers(),
            "ps_servers": (Server("p0", {"cpu": 16.0, "mem": 64.0, "bw": 40.0}),), "jobs": jobs}
    return {**base, **change}


INST = Instance(**_fields())


def _jobs(n: int, **change) -> tuple[Job, ...]:
    return tuple(dataclasses.replace(j, **change) if i == n else j
                 for i, j in enumerate(_fields()["jobs"]))


# ---- the array API -------------------------------------------------------------------------------
def test_types_and_per_job_arrays():
    inst = INST
    assert inst.typed and inst.types == ("v100", "k80", "cpu")
    assert inst.worker_type.tolist() == [0, 1, 0, 2]
    assert inst.type_mask.tolist() == [[True, False, True, False], [False, True, False, False],
                                       [False, False, False, True]]
    # s_ig: listed speeds, 0 where the job cannot run, u_i everywhere for a job without types
    assert inst.type_speed.tolist() == [[6, 2, 1], [1, 1, 1], [6, 2, 1], [0, 3, 0]]
    assert inst.usable.tolist() == [[True] * 3, [True] * 3, [True] * 3, [False, True, False]]
    assert inst.unit.tolist() == [4, 1, 4, 1]
    assert inst.span_types.tolist() == [False, False, True, False]
    assert inst.max_speed.tolist() == [6, 1, 6, 3] and inst.min_speed.tolist() == [1, 1, 1, 3]
    # W_i = ceil(E N x u): 2 * 2 * 1.5 * 4 = 24 units; the untyped job 6 worker-slots
    assert inst.work.tolist() == [24, 6, 24, 6] and inst.jobs[0].workload == 24.0
    # fewest slots with N workers on the fastest type: ceil(24 / (2 * 6)) = 2; ceil(6 / (2 * 3))
    assert inst.min_duration.tolist() == [2, 3, 2, 1]
    assert inst.min_duration.tolist() == [j.min_duration for j in inst.jobs]
    cpu = inst.resources.index("cpu")
    assert inst.type_demand.shape == (4, 3, inst.R)
    assert inst.type_demand[0, 2, cpu] == 16.0 and inst.type_demand[0, 0, cpu] == 2.0
    assert np.array_equal(inst.type_demand[1], np.repeat(inst.worker_demand[1:2], 3, axis=0))
    assert inst.server_speed(0).tolist() == [6, 2, 6, 1]
    assert inst.server_demand(0)[3, cpu] == 16.0 and inst.server_demand(0)[0, cpu] == 2.0
    assert inst.type_order(0) == [0, 1, 2] and inst.type_order(3) == [1]


def test_row_demand_credit_and_fits_by_type():
    inst, cpu = INST, INST.resources.index("cpu")
    job, server, role = np.array([0, 0, 0, 1]), np.array([0, 3, 4, 3]), np.array([0, 0, 1, 0])
    dem = inst.row_demand(job, server, role)
    assert dem[:, cpu].tolist() == [2.0, 16.0, 1.0, 2.0]  # V100 worker, CPU mode, PS, no types
    for n in range(4):
        assert np.array_equal(dem[n], inst.container_demand(job[n], server[n], role[n]))
    # a worker on a PS server (a pool violation) is credited at u_i
    assert inst.worker_credit(np.array([0, 0, 0, 0]), np.array([0, 1, 3, 4])).tolist() == [6, 2, 1, 4]
    fits = inst.worker_fits(0, inst.worker_capacity)
    assert fits.shape == (3, 4)
    assert fits.tolist() == [[4, 0, 4, 0], [0, 4, 0, 0], [0, 0, 0, 4]]  # cpu: 64 / 16 vCPUs
    assert inst.worker_fits(3, inst.worker_capacity).tolist() == [[0] * 4, [0, 4, 0, 0], [0] * 4]


def test_work_done_counts_units_by_type():
    rows = [(0, 1, 0, 0, 2), (0, 2, 3, 0, 3), (0, 1, 4, 1, 1), (3, 1, 1, 0, 1), (0, 9, 0, 0, 5)]
    # job 0: 2 V100 workers (12) + 3 CPU workers (3); the slot-9 row is outside 1..T
    assert work_done(INST, Allocations.from_rows(rows)).tolist() == [15, 0, 0, 3]


def test_untyped_instances_keep_one_implicit_type():
    inst = Instance(6, DEFAULT_RESOURCES, (Server("w0", dict(GPU_CAP)),),
                    (Server("p0", {"cpu": 8.0, "bw": 40.0}),),
                    (Job("a", 1, 2, 2, 1.5, dict(WORKER), {"cpu": 1.0, "bw": 10.0},
                         Utility.constant(1.0)),))
    assert not inst.typed and inst.types == (None,)
    assert inst.type_speed.tolist() == [[1]] and inst.worker_type.tolist() == [0]
    assert inst.work.tolist() == [6] and inst.min_duration.tolist() == [3]
    assert np.array_equal(inst.type_demand[:, 0], inst.worker_demand)
    assert instance_to_dict(inst)["format"] == INSTANCE_FORMAT
    inst.require_untyped("policy 'x'")  # no error


def test_typed_instances_refuse_where_unsupported():
    with pytest.raises(UnsupportedInstance) as err:
        INST.require_untyped("policy 'oasis'")
    assert str(err.value) == ("policy 'oasis' does not support accelerator types yet (this "
                              "instance's worker servers are of types v100, k80, cpu)")
    assert isinstance(err.value, ValueError) and "\n" not in str(err.value)


# ---- format: @2 round trips, strict reading ---------------------------------------------------------
def test_the_document_of_a_typed_instance():
    doc = instance_to_dict(INST)
    assert doc["format"] == TYPED_INSTANCE_FORMAT
    assert doc["worker_servers"][3] == {"id": "c0", "capacity": CPU_CAP, "rack": "r1",
                                        "accelerator": "cpu"}
    j0 = doc["jobs"][0]
    assert list(j0) == ["id", "arrival", "epochs", "chunks", "chunk_time", "worker", "ps", "unit",
                        "types", "utility", "class"]
    assert j0["unit"] == 4 and j0["types"] == {
        "v100": {"speed": 6}, "k80": {"speed": 2}, "cpu": {"speed": 1, "worker": CPU_MODE}}
    assert doc["jobs"][2]["span_types"] is True
    assert "unit" not in doc["jobs"][1] and "types" not in doc["jobs"][1]  # defaults: omitted
    assert "span_types" not in doc["jobs"][0]


@given(hetero_instances())
def test_typed_round_trip_is_byte_exact(inst):
    doc = instance_to_dict(inst)
    assert doc["format"] == TYPED_INSTANCE_FORMAT
    back = instance_from_dict(json.loads(dumps(doc)))
    assert back == inst
    for name in ("type_speed", "type_demand", "worker_type", "unit", "span_types", "work"):
        assert np.array_equal(getattr(back, name), getattr(inst, name)), name
    assert dumps(instance_to_dict(back)) == dumps(doc)
    assert back.fingerprint == inst.fingerprint


def test_files_write_read_write_byte_identical(tmp_path):
    save_instance(INST, tmp_path / "a.json")
    save_instance(load_instance(tmp_path / "a.json"), tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


NAN = float("nan")
# name: (fields of Instance(...), the field the error must name); code and file alike
CASES = {
    "ps-server-with-accelerator": (
        _fields(ps_servers=(Server("p0", {"cpu": 8.0, "bw": 40.0}, accelerator="cpu"),)),
        "ps_servers[0].accelerator"),
    "some-workers-without-type": (
        _fields(worker_servers=_workers()[:3] + (Server("c0", dict(CPU_CAP)),)),
        "worker_servers[3].accelerator"),
    "empty-accelerator-name": (_fields(worker_servers=_workers(accelerator="")),
                               "worker_servers[0].accelerator"),
    "unknown-type-in-job": (_fields(jobs=_jobs(0, types={"a100": JobType(2)})),
                            "jobs[0].types.a100"),
    "no-types-listed": (_fields(jobs=_jobs(0, types={})), "jobs[0].types"),
    "zero-speed": (_fields(jobs=_jobs(0, types={"v100": JobType(0)})), "jobs[0].types.v100.speed"),
    "fractional-speed": (_fields(jobs=_jobs(0, types={"v100": JobType(1.5)})),
                         "jobs[0].types.v100.speed"),
    "string-speed": (_fields(jobs=_jobs(0, types={"v100": JobType("2")})),
                     "jobs[0].types.v100.speed"),
    "type-demand-other-bandwidth": (
        _fields(jobs=_jobs(1, types={"cpu": JobType(1, {"cpu": 16.0, "bw": 4.0})})),
        "jobs[1].types.cpu.worker.bw"),
    "type-demand-unknown-resource": (
        _fields(jobs=_jobs(1, types={"cpu": JobType(1, {"tpu": 1.0, "bw": 5.0})})),
        "jobs[1].types.cpu.worker.tpu"),
    "type-demand-negative": (
        _fields(jobs=_jobs(1, types={"cpu": JobType(1, {"cpu": -1.0, "bw": 5.0})})),
        "jobs[1].types.cpu.worker.cpu"),
    "zero-unit": (_fields(jobs=_jobs(2, unit=0)), "jobs[2].unit"),
    "fractional-unit": (_fields(jobs=_jobs(2, unit=2.5)), "jobs[2].unit"),
    "span-types-not-a-bool": (_fields(jobs=_jobs(2, span_types=1)), "jobs[2].span_types"),
    "placement-progress-with-types": (_fields(progress="placement"), "progress"),
}
# built in code only (a file cannot say it, or says it in another way, tested below)
CODE_ONLY = {
    "types-on-an-untyped-cluster": (
        _fields(worker_servers=_workers(accelerator=None), jobs=_jobs(3)[3:]), "jobs[0].types"),
    "unit-on-an-untyped-cluster": (
        _fields(worker_servers=_workers(accelerator=None), jobs=(_job(0, types=None),)),
        "jobs[0].unit"),
    "job-type-not-a-job-type": (_fields(jobs=_jobs(0, types={"v100": 3})), "jobs[0].types.v100"),
}


def test_the_base_instance_is_valid_and_solves():
    assert validate(INST, solve(INST, "greedy")).ok


@pytest.mark.parametrize("case", sorted({**CASES, **CODE_ONLY}))
def test_bad_typed_instance_in_code_raises_naming_the_field(case):
    fields, field = {**CASES, **CODE_ONLY}[case]
    with pytest.raises(FormatError) as err:
        Instance(**fields)
    assert err.value.field == field, str(err.value)
    assert str(err.value).startswith(f"{field}: ") and err.value.message


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_file_reader_reports_the_same_field_and_message(case):
    assert_file_reports_as_code(*CASES[case])  # the writer marks each document @2


@pytest.mark.parametrize("where, key, value", [
    ("worker_servers", "accelerator", "v100"), ("jobs", "unit", 2), ("jobs", "span_types", True),
    ("jobs", "types", {"v100": {"speed": 2}}),
])
def test_an_instance1_document_refuses_the_typed_fields(where, key, value):
    doc = instance_to_dict(INST.with_jobs([INST.jobs[1]]))  # a @2 document ...
    doc["format"] = INSTANCE_FORMAT  # ... announced as @1
    for item in doc["worker_servers"] + doc["jobs"]:
        for k in ("accelerator", "unit", "types", "span_types"):
            item.pop(k, None)
    doc[where][0][key] = value
    with pytest.raises(FormatError) as err:
        instance_from_dict(doc)
    assert err.value.field == f"{where}[0].{key}"
    assert err.value.message == f"accelerator types need format {TYPED_INSTANCE_FORMAT!r}"


def test_an_instance2_document_without_types_is_refused():
    doc = instance_to_dict(INST)
    for s in doc["worker_servers"]:
        del s["accelerator"]
    doc["jobs"] = [doc["jobs"][1]]
    with pytest.raises(FormatError) as err:
        instance_from_dict(doc)
    assert err.value.field == "format" and INSTANCE_FORMAT in err.value.message


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d["jobs"][0]["types"]["v100"].update(cores=2), "jobs[0].types.v100.cores"),
    (lambda d: d["jobs"][0]["types"]["v100"].pop("speed"), "jobs[0].types.v100.speed"),
    (lambda d: d["jobs"][0].update(types=[["v100", 2]]), "jobs[0].types"),
    (lambda d: d["worker_servers"][0].update(accel="v100"), "worker_servers[0].accel"),
    (lambda d: d.update(format="oasis-opt/instance@3"), "format"),
])
def test_structure_errors_in_typed_documents_name_the_field(mutate, field):
    doc = instance_to_dict(INST)
    mutate(doc)
    with pytest.raises(FormatError) as err:
        instance_from_dict(doc)
    assert err.value.field == field, str(err.value)
