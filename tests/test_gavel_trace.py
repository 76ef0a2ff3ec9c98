"""Gavel's traces as instances: the shipped dev trace, strict reading (errors name the file, line
and column or the throughput entry), the CLI."""
from __future__ import annotations

import json
import math
import shutil

import pytest

from oasis_opt.cli import main
from oasis_opt.model.io import FormatError, load_instance
from oasis_opt.workloads.gavel import (SPEED_SCALE, TRACE_COLUMNS, gavel_files, gavel_instance,
                                       parse_cluster, read_throughputs, read_trace)

FILES = gavel_files()


@pytest.fixture(scope="module")
def dev():
    return gavel_instance(FILES["trace"], FILES["throughputs"])


def test_dev_trace_as_documented(dev):
    jobs = read_trace(FILES["trace"])
    assert len(jobs) == dev.I == 60
    sizes = [j.scale_factor for j in jobs]
    assert (sizes.count(1), sizes.count(2), sizes.count(4)) == (50, 3, 7)
    assert jobs[-1].arrival_s == 32200
    assert dev.types == ("v100", "p100", "k80") and dev.H == 6 and dev.K == 1
    assert [s.capacity["gpu"] for s in dev.worker_servers] == [4.0] * 6
    table = read_throughputs(FILES["throughputs"])
    for n, (gj, job) in enumerate(zip(jobs, dev.jobs)):
        prov = job.provenance
        assert job.chunks == gj.scale_factor and job.epochs == 1 and job.unit == SPEED_SCALE
        # arrival: the next 360-s round boundary after submission
        assert job.arrival == math.ceil(gj.arrival_s / 360) + 1 and prov["arrival_s"] == gj.arrival_s
        # work units cover the steps, within one unit
        steps = job.work * prov["steps_per_unit"]
        assert gj.total_steps <= steps < gj.total_steps + prov["steps_per_unit"] + 1e-6
        # per-type speeds follow the throughputs (rounding of 1000 x ratio)
        ref = table["v100"][gj.key]
        for g in dev.types:
            rate = table[g][gj.key]
            if rate > 0:
                assert job.types[g].speed == max(1, round(SPEED_SCALE * rate / ref))
            else:
                assert g not in job.types
        # utility target = isolated run time in slots, fastest type, all GPUs
        assert job.utility.target == prov["isolated_slots"] == job.min_duration
        assert job.span_types is False and n == prov["gavel_job_id"]


def test_cluster_spec_and_servers():
    assert parse_cluster("8:0:4") == {"v100": 8, "p100": 0, "k80": 4}
    inst = gavel_instance(FILES["trace"], FILES["throughputs"], cluster="6:0:8",
                          gpus_per_server=4)
    assert [(s.accelerator, s.capacity["gpu"]) for s in inst.worker_servers] == [
        ("v100", 4.0), ("v100", 2.0), ("k80", 4.0), ("k80", 4.0)]
    for bad, field in (("8:8", "cluster"), ("8:x:8", "cluster: p100"), ("0:0:0", "cluster")):
        with pytest.raises(ValueError) as err:
            parse_cluster(bad)
        assert str(err.value).startswith(field)


def _write_trace(tmp_path, rows):
    path = tmp_path / "t.trace"
    path.write_text("\n".join("\t".join(map(str, r)) for r in rows) + "\n")
    return path


ROW = ["ResNet-18 (batch size 32)", "python x.py %s", "image_classification", "--num_steps",
       "1", "1000", "1", "1", "-1.000000", "0"]


@pytest.mark.parametrize("column, value, message", [
    ("total_steps", "12.5", "expected an integer"),
    ("total_steps", "0", "must be >= 1"),
    ("scale_factor", "abc", "expected a number"),
    ("priority_weight", "0", "must be a finite number > 0"),
    ("arrival_time", "-3", "must be a finite number >= 0"),
    ("SLO", "nan", "must be a finite number"),
    ("job_type", " ", "expected a non-empty job type"),
])
def test_bad_trace_field_is_named(tmp_path, column, value, message):
    row = list(ROW)
    row[TRACE_COLUMNS.index(column)] = value
    path = _write_trace(tmp_path, [ROW, row])
    with pytest.raises(FormatError) as err:
        read_trace(path)
    assert err.value.field == f"t.trace line 2 column {column}"
    assert message in err.value.message


def test_trace_shape_errors(tmp_path):
    with pytest.raises(FormatError) as err:
        read_trace(_write_trace(tmp_path, [ROW[:7]]))
    assert err.value.field == "t.trace line 1 column priority_weight"
    with pytest.raises(FormatError) as err:
        read_trace(_write_trace(tmp_path, [ROW + ["extra"]]))
    assert err.value.field == "t.trace line 1" and "got 11" in err.value.message
    late = list(ROW)
    late[-1] = "50"
    with pytest.raises(FormatError) as err:
        read_trace(_write_trace(tmp_path, [late, ROW]))
    assert err.value.field == "t.trace line 2 column arrival_time"
    (tmp_path / "empty.trace").write_text("\n")
    with pytest.raises(FormatError, match="no job"):
        read_trace(tmp_path / "empty.trace")


def test_throughput_errors(tmp_path):
    table = json.loads(FILES["throughputs"].read_text())
    key = "('ResNet-18 (batch size 32)', 1)"
    trace = _write_trace(tmp_path, [ROW])
    for mutate, field in (
            (lambda t: t["k80"].pop(key), f"throughputs.json: k80: {key}"),
            (lambda t: t["v100"][key].update(null=0.0), f"throughputs.json: v100: {key}: null"),
            (lambda t: t["p100"][key].update(null="fast"), f"throughputs.json: p100: {key}: null"),
            (lambda t: t.pop("v100"), "throughputs.json: v100")):
        broken = json.loads(json.dumps(table))
        mutate(broken)
        path = tmp_path / "throughputs.json"
        path.write_text(json.dumps(broken))
        with pytest.raises(FormatError) as err:
            gavel_instance(trace, path)
        assert err.value.field == field, err.value
    (tmp_path / "throughputs.json").write_text("{not json")
    with pytest.raises(FormatError, match="not JSON"):
        read_throughputs(tmp_path / "throughputs.json")


def test_job_that_fits_no_type_is_refused(tmp_path):
    row = list(ROW)
    row[TRACE_COLUMNS.index("scale_factor")] = "4"
    with pytest.raises(FormatError) as err:
        gavel_instance(_write_trace(tmp_path, [row]), FILES["throughputs"], cluster="2:2:2")
    assert err.value.field == "t.trace line 1 column scale_factor"


def test_cli_generate_gavel(tmp_path, capsys):
    out = tmp_path / "dev.json"
    code = main(["generate", "--trace", "gavel", "--file", str(FILES["trace"]), "--throughputs",
                 str(FILES["throughputs"]), "--cluster", "8:8:8", "--seed", "3",
                 "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    inst = load_instance(out)
    assert inst.I == 60 and inst.meta["slot_s"] == 360 and inst.meta["cluster"] == "8:8:8"
    assert inst.fingerprint == gavel_instance(FILES["trace"], FILES["throughputs"],
                                              seed=3).fingerprint


@pytest.mark.parametrize("args, message", [
    (["--cluster", "8:8"], "oasis-opt: error: --cluster: expected v100:p100:k80"),
    (["--gpus-per-server", "0"], "oasis-opt: error: --gpus-per-server"),
    (["--slot-s", "-1"], "oasis-opt: error: --slot-s"),
])
def test_cli_generate_gavel_bad_input(tmp_path, capsys, args, message):
    code = main(["generate", "--trace", "gavel", "--file", str(FILES["trace"]), "--throughputs",
                 str(FILES["throughputs"]), "--seed", "0", "--out", str(tmp_path / "x.json"),
                 *args])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(message) and len(err.strip().splitlines()) == 1


def test_cli_generate_gavel_defaults_and_bad_trace(tmp_path, capsys):
    out = tmp_path / "x.json"
    assert main(["generate", "--trace", "gavel", "--seed", "0", "--out", str(out)]) == 0
    assert load_instance(out).fingerprint == gavel_instance(FILES["trace"],
                                                            FILES["throughputs"]).fingerprint
    bad = tmp_path / "bad.trace"
    shutil.copy(FILES["trace"], bad)
    bad.write_text(bad.read_text().replace("\t1178999\t", "\t11.5\t", 1))
    code = main(["generate", "--trace", "gavel", "--file", str(bad), "--seed", "0",
                 "--out", str(tmp_path / "y.json")])
    assert code == 2
    assert "bad.trace line 1 column total_steps: expected an integer" in capsys.readouterr().err
    code = main(["generate", "--trace", "philly", "--file", str(bad), "--seed", "0",
                 "--out", str(tmp_path / "z.json")])
    assert code == 2 and "--file: only for --trace gavel" in capsys.readouterr().err
