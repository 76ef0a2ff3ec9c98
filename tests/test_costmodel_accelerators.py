"""The accelerator catalogue and the speed model: speeds by model family and accelerator (units
and ranges as documented), the chunk time on a type, and the integer-speed rule (the smallest
unit whose rounding loses less than the tolerance)."""
from __future__ import annotations

import ast
import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oasis_opt.costmodel import (ACCELERATOR_SERVERS, ACCELERATORS, CATALOGUE, CPU_SLOWDOWN,
                                 CPU_WORKER_VCPUS, FAMILIES, MODEL_FAMILY, RELATIVE_SPEED,
                                 chunk_time_on, cpu_mode_worker, integer_speeds, model_family,
                                 relative_speed)
from oasis_opt.costmodel.models import MODELS
from oasis_opt.workloads.gavel import gavel_files

# Gavel's isolated throughputs as the package ships them (values unchanged from Gavel's
# simulation_throughputs.json; provenance and licence in oasis_opt/data/traces/README.md)
GAVEL = gavel_files()["throughputs"]
GAVEL_NAMES = {"resnet18": "ResNet-18", "resnet50": "ResNet-50", "transformer": "Transformer",
               "lm": "LM", "recommendation": "Recommendation", "a3c": "A3C",
               "cyclegan": "CycleGAN"}


def test_the_catalogue_has_every_generation_and_a_cpu_mode():
    assert {"k80", "p100", "v100", "a100", "h100", "cpu"} <= set(ACCELERATORS)
    assert ACCELERATORS["cpu"].kind == "cpu" and ACCELERATORS["v100"].kind == "gpu"
    for name, hosts in ACCELERATOR_SERVERS.items():
        for host in hosts:
            assert CATALOGUE[host].accelerator == name
            assert (CATALOGUE[host].gpus > 0) == (name != "cpu")


def test_speeds_are_relative_to_one_v100_with_the_documented_ranges():
    for family in FAMILIES:
        table = RELATIVE_SPEED[family]
        assert set(table) == set(ACCELERATORS) and table["v100"] == 1.0
        assert 10.0 <= CPU_SLOWDOWN[family] <= 50.0  # the documented CPU range
        assert table["cpu"] == pytest.approx(1 / CPU_SLOWDOWN[family])
        assert table["a100"] > 1.0 and table["h100"] > table["a100"]
        assert all(v > 0 for v in table.values())
    assert relative_speed("resnet50", "h100") == pytest.approx(2.0 * 1.8)
    assert relative_speed("lm", "cpu", reference="k80") == pytest.approx(0.1 / 0.25)


def test_p100_and_k80_are_gavels_geometric_means():
    """Read from the repository's copy of Gavel's table, so it runs everywhere: a P100 or K80
    speed off Gavel's geometric mean by more than 5e-4 fails here."""
    table = json.loads(GAVEL.read_text())
    for family, name in GAVEL_NAMES.items():
        ratios = {"p100": [], "k80": []}
        for key, row in table["v100"].items():
            job, scale = ast.literal_eval(key)
            if scale == 1 and job.split(" (")[0] == name:
                for acc in ratios:
                    ratios[acc].append(table[acc][key]["null"] / row["null"])
        for acc, values in ratios.items():
            mean = math.exp(sum(map(math.log, values)) / len(values))
            assert RELATIVE_SPEED[family][acc] == pytest.approx(mean, abs=5e-4), (family, acc)


def test_every_model_of_the_package_has_a_family():
    assert set(MODELS) <= set(MODEL_FAMILY)
    assert model_family("bert") == "transformer" and model_family("lm") == "lm"
    with pytest.raises(ValueError, match="unknown model or family 'gpt'"):
        model_family("gpt")
    with pytest.raises(ValueError, match="unknown accelerator 'tpu'"):
        relative_speed("lm", "tpu")


def test_chunk_time_on_a_type_speeds_up_only_the_computation():
    # half computation: twice the speed saves a quarter; all communication: no change
    assert chunk_time_on(2.0, 0.5, 2.0) == pytest.approx(1.5)
    assert chunk_time_on(2.0, 0.0, 10.0) == 2.0
    assert chunk_time_on(2.0, 1.0, 0.1) == pytest.approx(20.0)
    with pytest.raises(ValueError, match="compute_share"):
        chunk_time_on(1.0, 1.5, 1.0)


def test_cpu_mode_worker_drops_the_gpu():
    w = cpu_mode_worker({"gpu": 2.0, "cpu": 4.0, "mem": 8.0, "bw": 1.5})
    assert w == {"gpu": 0.0, "cpu": float(CPU_WORKER_VCPUS), "mem": 8.0, "bw": 1.5}
    assert cpu_mode_worker({"cpu": 40.0, "bw": 1.0})["cpu"] == 40.0


def test_integer_speeds_on_exact_ratios():
    assert integer_speeds({"v100": 1.0, "k80": 0.25}) == (4, {"v100": 4, "k80": 1})
    assert integer_speeds({"v100": 1.0}) == (1, {"v100": 1})
    # 1.6 = 8/5: u = 5 gives 8 exactly despite 5 * 1.6 = 8.000000000000002 in floats
    assert integer_speeds({"a": 1.0, "b": 1.6}) == (5, {"a": 5, "b": 8})
    assert integer_speeds({"a": 1 / 3}, tolerance=0.01) == (3, {"a": 1})
    with pytest.raises(ValueError, match="ratios"):
        integer_speeds({"a": 0.0})
    with pytest.raises(ValueError, match="tolerance"):
        integer_speeds({"a": 1.0}, tolerance=0.0)


@given(st.lists(st.floats(0.01, 5.0), min_size=1, max_size=5), st.sampled_from([0.01, 0.05]))
def test_integer_speeds_is_the_smallest_unit_within_the_tolerance(ratios, tol):
    named = {f"t{n}": r for n, r in enumerate(ratios)}
    unit, speeds = integer_speeds(named, tol)

    def ok(u):
        return all(math.floor(u * r * (1 + 1e-9)) >= 1 and
                   u * r - math.floor(u * r * (1 + 1e-9)) < tol * u * r for r in ratios)

    assert ok(unit) and not any(ok(u) for u in range(1, unit))
    for name, r in named.items():
        assert speeds[name] >= 1
        assert speeds[name] <= unit * r * (1 + 1e-9)  # rounded down (float noise aside)
        assert speeds[name] > (1 - tol) * unit * r  # losing less than the tolerance
    assert unit <= math.ceil(1 / (tol * min(ratios))) + 1
