"""paper-sim on a mixed cluster (``cluster_mix``): servers by share, per-type speeds from the cost
model rounded by the integer-speed rule, CPU mode, seeded and byte-identical."""
from __future__ import annotations

import math

import numpy as np
import pytest

from oasis_opt import solve, validate
from oasis_opt.costmodel import (ACCELERATOR_SERVERS, CATALOGUE, chunk_time_on, comm_time_s,
                                 cpu_mode_worker, integer_speeds, relative_speed)
from oasis_opt.model.io import TYPED_INSTANCE_FORMAT, dumps, instance_to_dict
from oasis_opt.workloads import generate, paper_sim
from oasis_opt.workloads.paper import apportion, parse_cluster_mix

MIX = "v100:p100:k80:cpu"


@pytest.fixture(scope="module")
def mixed():
    return paper_sim(3, jobs=40, horizon=60, worker_servers=10, ps_servers=6, cluster_mix=MIX)


def test_seeded_and_byte_identical(mixed):
    again = paper_sim(3, jobs=40, horizon=60, worker_servers=10, ps_servers=6, cluster_mix=MIX)
    assert dumps(instance_to_dict(again)) == dumps(instance_to_dict(mixed))
    other = paper_sim(4, jobs=40, horizon=60, worker_servers=10, ps_servers=6, cluster_mix=MIX)
    assert other.fingerprint != mixed.fingerprint
    assert instance_to_dict(mixed)["format"] == TYPED_INSTANCE_FORMAT
    assert mixed.meta["cluster_mix"] == {"v100": 1.0, "p100": 1.0, "k80": 1.0, "cpu": 1.0}


def test_the_mix_keeps_the_untyped_draws(mixed):
    """Arrivals, job parameters and utilities are the untyped instance's: the mix adds types."""
    plain = paper_sim(3, jobs=40, horizon=60, worker_servers=10, ps_servers=6)
    for a, b in zip(plain.jobs, mixed.jobs):
        assert (a.id, a.arrival, a.epochs, a.chunks, a.chunk_time, a.utility) == \
            (b.id, b.arrival, b.epochs, b.chunks, b.chunk_time, b.utility)


def test_servers_by_share_in_blocks(mixed):
    # 10 servers, four equal shares: 2.5 each, the remainders go to the types listed first
    assert apportion(10, parse_cluster_mix(MIX)) == {"v100": 3, "p100": 3, "k80": 2, "cpu": 2}
    assert [s.accelerator for s in mixed.worker_servers] == \
        ["v100"] * 3 + ["p100"] * 3 + ["k80"] * 2 + ["cpu"] * 2
    for s in mixed.worker_servers:
        assert s.kind in ACCELERATOR_SERVERS[s.accelerator]
        assert s.capacity["gpu"] == CATALOGUE[s.kind].gpus
    assert all(s.accelerator is None for s in mixed.ps_servers)
    # 7 x (1/2, 1/4, 1/4) = 3.5, 1.75, 1.75: the two .75 remainders win
    assert apportion(7, parse_cluster_mix("v100=2:k80=1:cpu=1")) == {"v100": 3, "k80": 2, "cpu": 2}


def test_job_speeds_follow_the_cost_model_and_the_rounding_rule(mixed):
    gpu_jobs = 0
    for i, job in enumerate(mixed.jobs):
        if job.worker["gpu"] == 0:  # needs no accelerator: every type alike
            assert job.types is None and job.unit == 1
            continue
        gpu_jobs += 1
        prov = job.provenance
        assert not job.span_types and list(job.types) == ["v100", "p100", "k80", "cpu"]
        comm = comm_time_s(prov["gradient_mb"], prov["worker_bw_gbps"])
        share = prov["minibatch_time_s"] / (prov["minibatch_time_s"] + comm)
        exact = {g: 1 / chunk_time_on(1.0, share, relative_speed(prov["model_family"], g))
                 for g in job.types}
        unit, speeds = integer_speeds(exact, mixed.meta["speed_tolerance"])
        assert job.unit == unit and {g: t.speed for g, t in job.types.items()} == speeds
        assert job.types["cpu"].worker == cpu_mode_worker(job.worker)
        assert all(job.types[g].worker is None for g in ("v100", "p100", "k80"))
        # rounding never shortens a job and costs less than 1% (+ the unit of the ceiling)
        for g, t in job.types.items():
            need = job.epochs * job.chunks * chunk_time_on(job.chunk_time, share,
                                                           relative_speed(prov["model_family"], g))
            got = mixed.work[i] / t.speed
            assert need * (1 - 1e-9) <= got <= need / (1 - 0.01) + 1 / t.speed
    assert gpu_jobs > 20


@pytest.mark.parametrize("policy", ("fifo", "drf", "rrh", "dorm", "tiresias", "optimus",
                                    "greedy"))
def test_every_type_agnostic_policy_runs_it(mixed, policy):
    sched = solve(mixed, policy)
    assert validate(mixed, sched).ok
    used = {mixed.worker_servers[s].accelerator
            for s, r in zip(sched.allocations.server, sched.allocations.role) if r == 0}
    assert used  # some work was placed


@pytest.mark.parametrize("mix, message", [
    ("v100:x80", "unknown accelerator 'x80'"),
    ("v100:v100", "type 'v100' given twice"),
    ("v100=0:k80", "share of 'v100' must be a finite number > 0"),
    ("v100=a", "bad share 'a' of 'v100'"),
    ("", "unknown accelerator ''"),
    ({}, "expected"),
])
def test_bad_mixes_name_the_option(mix, message):
    with pytest.raises(ValueError, match=f"^cluster_mix: .*{message}"):
        paper_sim(1, jobs=2, cluster_mix=mix)


def test_a_mix_needs_servers_for_every_type_and_gpu_workers():
    with pytest.raises(ValueError, match="^cluster_mix: 3 worker servers leave type 'cpu'"):
        paper_sim(1, jobs=2, worker_servers=3, cluster_mix=MIX)
    with pytest.raises(ValueError, match="^cluster_mix: .*gpu_pool='worker'"):
        paper_sim(1, jobs=2, gpu_pool="ps", cluster_mix=MIX)
    with pytest.raises(ValueError, match="^speed_tolerance"):
        paper_sim(1, jobs=2, cluster_mix=MIX, speed_tolerance=0.0)


def test_the_preset_and_the_cli(tmp_path, capsys):
    from oasis_opt.cli import main

    inst = generate("paper-sim", seed=2, jobs=10, horizon=30, servers=8,
                    cluster_mix="v100=2:k80:cpu")
    args = ["generate", "--preset", "paper-sim", "--jobs", "10", "--horizon", "30", "--servers",
            "8", "--cluster-mix", "v100=2:k80:cpu", "--seed", "2", "--out"]
    assert main(args + [str(tmp_path / "a.json")]) == 0
    assert main(args + [str(tmp_path / "b.json")]) == 0
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert (tmp_path / "a.json").read_text() == dumps(instance_to_dict(inst))
    assert "8 worker (v100, k80, cpu)" in capsys.readouterr().out
    code = main(["generate", "--preset", "testbed", "--cluster-mix", "v100", "--seed", "1",
                 "--out", str(tmp_path / "c.json")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("oasis-opt: error: --cluster-mix: unknown option")
    assert math.isfinite(inst.work.sum()) and np.all(inst.work > 0)
