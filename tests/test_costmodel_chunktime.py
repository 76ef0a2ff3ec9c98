"""The paper's chunk-time formula x_i = M_i (tau_i + 2 e_i / b_i), units explicit, and the catalogue."""
import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from oasis_opt.costmodel import (CATALOGUE, CPU_TYPES, GPU_TYPES, RESOURCE_UNITS, ServerType,
                                 chunk_time, chunk_time_from_provenance, comm_time_s,
                                 gbps_to_mbps, get_server_type, megabytes_to_megabits, provenance)
from oasis_opt.model import DEFAULT_RESOURCES


# ---- units ---------------------------------------------------------------------------------------
def test_unit_conversions():
    assert megabytes_to_megabits(1) == 8.0  # 1 MB = 10^6 bytes = 8 Mbit
    assert gbps_to_mbps(1) == 1000.0
    np.testing.assert_array_equal(megabytes_to_megabits(np.array([0.5, 2.0])), [4.0, 16.0])
    np.testing.assert_array_equal(gbps_to_mbps(np.array([0.1, 5.0])), [100.0, 5000.0])


def test_comm_time_hand_computed():
    # push + pull of 125 MB = 2 x 1000 Mbit over 1000 Mbps = 2 s
    assert comm_time_s(125.0, 1.0) == 2.0
    # 575 MB over 5 Gbps: 2 * 4600 Mbit / 5000 Mbps = 1.84 s
    assert comm_time_s(575.0, 5.0) == pytest.approx(1.84, rel=1e-15)
    # 30 MB over 100 Mbps (0.1 Gbps): 2 * 240 / 100 = 4.8 s
    assert comm_time_s(30.0, 0.1) == pytest.approx(4.8, rel=1e-15)


# ---- chunk time, hand-computed ------------------------------------------------------------------
def test_chunk_time_hand_computed_one_hour_slot():
    # M = 10 mini-batches, tau = 1 s, e = 100 MB, b = 1 Gbps: comm = 2 * 800 / 1000 = 1.6 s,
    # 2.6 s per mini-batch, 26 s per chunk = 26 / 3600 worker-slots
    assert chunk_time(10, 1.0, 100.0, 1.0, 3600.0) == pytest.approx(26.0 / 3600.0, rel=1e-15)


def test_chunk_time_hand_computed_testbed_slot():
    # M = 50, tau = 36 s, e = 575 MB, b = 5 Gbps, 20-minute slot: 50 * 37.84 s / 1200 s
    assert chunk_time(50, 36.0, 575.0, 5.0, 1200.0) == pytest.approx(50 * 37.84 / 1200, rel=1e-14)


def test_chunk_time_compute_only_and_comm_only():
    # one mini-batch of one slot of compute and nothing to send: exactly one worker-slot
    assert chunk_time(1, 3600.0, 0.0, 1.0, 3600.0) == 1.0
    # communication only: 3 mini-batches x 2 s (125 MB at 1 Gbps) = 6 s of a 60 s slot
    assert chunk_time(3, 0.0, 125.0, 1.0, 60.0) == pytest.approx(0.1, rel=1e-15)


def test_chunk_time_default_slot_is_one_hour():
    assert chunk_time(10, 1.0, 100.0, 1.0) == chunk_time(10, 1.0, 100.0, 1.0, 3600.0)


finite = dict(allow_nan=False, allow_infinity=False)


@given(st.lists(st.tuples(st.integers(1, 200), st.floats(0, 500, **finite),
                          st.floats(0, 1000, **finite), st.floats(0.01, 100, **finite),
                          st.floats(1, 10_000, **finite)), min_size=1, max_size=20))
def test_vectorised_matches_scalar_and_formula(rows):
    M, tau, e, b, slot = (np.array(c, dtype=float) for c in zip(*rows))
    if ((tau == 0) & (e == 0)).any():
        with pytest.raises(ValueError, match="chunk_time"):
            chunk_time(M, tau, e, b, slot)
        return
    vec = chunk_time(M, tau, e, b, slot)
    for n, row in enumerate(rows):
        scalar = chunk_time(*row)
        assert isinstance(scalar, float)
        assert vec[n] == scalar
        # the same formula written out in bits and seconds
        m, t, mb, gbps, s = row
        assert scalar == pytest.approx(m * (t + 2 * mb * 8e6 / (gbps * 1e9)) / s, rel=1e-12)


@given(st.integers(1, 100), st.floats(0.001, 100), st.floats(1, 575), st.floats(0.1, 5),
       st.floats(60, 7200))
def test_scaling_laws(M, tau, e, b, slot):
    x = chunk_time(M, tau, e, b, slot)
    assert chunk_time(2 * M, tau, e, b, slot) == pytest.approx(2 * x, rel=1e-12)  # linear in M
    assert chunk_time(M, tau, e, b, 2 * slot) == pytest.approx(x / 2, rel=1e-12)  # per slot
    assert chunk_time(M, tau, e, 2 * b, slot) < x  # faster link, shorter chunk


@pytest.mark.parametrize("args, name", [
    ((0, 1.0, 1.0, 1.0, 3600.0), "minibatches"),
    ((2.5, 1.0, 1.0, 1.0, 3600.0), "minibatches"),
    ((1, -1.0, 1.0, 1.0, 3600.0), "minibatch_time_s"),
    ((1, math.nan, 1.0, 1.0, 3600.0), "minibatch_time_s"),
    ((1, 1.0, -5.0, 1.0, 3600.0), "gradient_mb"),
    ((1, 1.0, 1.0, 0.0, 3600.0), "worker_bw_gbps"),
    ((1, 1.0, 1.0, math.inf, 3600.0), "worker_bw_gbps"),
    ((1, 1.0, 1.0, 1.0, 0.0), "slot_s"),
    ((1, 0.0, 0.0, 1.0, 3600.0), "chunk_time"),
])
def test_bad_arguments_name_the_argument(args, name):
    with pytest.raises(ValueError, match=name):
        chunk_time(*args)


def test_provenance_round_trip():
    prov = provenance(np.int64(20), np.float64(12.5), 230.0, 2.5, 3600)
    assert prov == {"minibatches": 20, "minibatch_time_s": 12.5, "gradient_mb": 230.0,
                    "worker_bw_gbps": 2.5, "slot_s": 3600.0}
    assert all(type(v) in (int, float) for v in prov.values())  # plain JSON types
    assert chunk_time_from_provenance(prov) == chunk_time(20, 12.5, 230.0, 2.5, 3600.0)
    del prov["gradient_mb"]
    with pytest.raises(ValueError, match="provenance.gradient_mb"):
        chunk_time_from_provenance(prov)


# ---- catalogue ----------------------------------------------------------------------------------
def test_catalogue_matches_reference_table_A1():
    expected = {"c4.8xlarge": (0, 36, 60), "p2.8xlarge": (8, 32, 488), "p2.16xlarge": (16, 64, 732),
                "g3.8xlarge": (2, 32, 244), "g3.16xlarge": (4, 64, 488)}
    for name, (gpus, vcpus, mem) in expected.items():
        cap = get_server_type(name).capacity(25.0)
        assert cap == {"gpu": gpus, "cpu": vcpus, "mem": mem, "storage": 1000.0, "bw": 25.0}
    assert set(GPU_TYPES) == {"p2.8xlarge", "p2.16xlarge", "g3.8xlarge", "g3.16xlarge"}
    assert CPU_TYPES == ("c4.8xlarge",)
    assert all(CATALOGUE[t].gpus > 0 for t in GPU_TYPES)
    assert all(CATALOGUE[t].gpus == 0 for t in CPU_TYPES)


def test_catalogue_testbed_hosts():
    assert get_server_type("testbed-ps").capacity(20.0) == {
        "gpu": 0.0, "cpu": 8.0, "mem": 32.0, "storage": 1500.0, "bw": 20.0}
    assert get_server_type("testbed-worker-gpu").capacity(20.0)["gpu"] == 1.0
    assert get_server_type("testbed-worker").capacity(20.0)["cpu"] == 32.0


def test_resource_units_cover_the_model_resources():
    assert tuple(RESOURCE_UNITS) == DEFAULT_RESOURCES
    assert set(CATALOGUE["c4.8xlarge"].capacity(20.0)) == set(DEFAULT_RESOURCES)


def test_catalogue_errors_and_immutability():
    with pytest.raises(ValueError, match="unknown server type 'x9.large'.*c4.8xlarge"):
        get_server_type("x9.large")
    with pytest.raises(ValueError, match="bandwidth_gbps"):
        CATALOGUE["c4.8xlarge"].capacity(0.0)
    with pytest.raises(ValueError, match="vcpus"):
        ServerType("bad", 0, -1, 1.0)
    with pytest.raises(ValueError, match="name"):
        ServerType("", 0, 1, 1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        CATALOGUE["c4.8xlarge"].gpus = 4  # type: ignore[misc]
