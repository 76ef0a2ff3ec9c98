"""Presets: generate(), determinism (byte-identical files), JSON round trips, fig5, testbed, errors."""
import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from oasis_opt import solve, validate
from oasis_opt.costmodel import chunk_time_from_provenance, comm_time_s
from oasis_opt.model.io import instance_to_dict, load_instance, save_instance
from oasis_opt.model.load import load_factor
from oasis_opt.model.numerics import workers_alone
from oasis_opt.sim.placement import FirstFit
from oasis_opt.workloads import MODEL_GRADIENT_MB, PRESETS, generate, paper_fig5, testbed

CASES = [("paper-sim", {}), ("paper-sim", {"calibration": "literal", "jobs": 40}),
         ("paper-sim", {"arrivals": "poisson", "gpu_pool": "ps", "servers": 8}),
         ("paper-fig5", {"servers": 12}), ("testbed", {}), ("philly-chains", {"jobs": 30}),
         ("philly-priority", {"jobs": 30}), ("degrade-real", {})]


def test_presets_listed():
    assert set(PRESETS) == {"paper-sim", "paper-fig5", "testbed", "testbed-real", "philly-priority",
                            "philly-chains", "degrade-real"}
    assert all(isinstance(v, str) and v for v in PRESETS.values())


@pytest.mark.parametrize("preset, kw", CASES)
def test_same_seed_byte_identical_other_seed_differs(tmp_path, preset, kw):
    paths = [tmp_path / f"{n}.json" for n in range(3)]
    for path, seed in zip(paths, (5, 5, 6)):
        save_instance(generate(preset, seed=seed, **kw), path)
    assert paths[0].read_bytes() == paths[1].read_bytes()
    assert paths[0].read_bytes() != paths[2].read_bytes()


@pytest.mark.parametrize("preset, kw", CASES)
def test_json_round_trip_exact(tmp_path, preset, kw):
    inst = generate(preset, seed=3, **kw)
    save_instance(inst, tmp_path / "a.json")
    back = load_instance(tmp_path / "a.json")
    assert instance_to_dict(back) == instance_to_dict(inst)
    assert back.jobs == inst.jobs and back.servers == inst.servers
    np.testing.assert_array_equal(back.capacity, inst.capacity)
    save_instance(back, tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert back.meta["generator"] == preset and back.meta["seed"] == 3


def test_size_arguments_map_to_generators():
    inst = generate("paper-sim", seed=0, jobs=12, horizon=40, servers=7)
    assert (inst.I, inst.horizon, inst.H, inst.K) == (12, 40, 7, 7)
    default = generate("paper-sim", seed=0)
    assert (default.I, default.horizon, default.H, default.K) == (100, 300, 50, 50)
    f = generate("paper-fig5", seed=0, servers=9, jobs=6, horizon=8)
    assert (f.I, f.horizon, f.H, f.K) == (6, 8, 5, 4)


@pytest.mark.parametrize("call, name", [
    (dict(preset="nope", seed=0), "unknown preset 'nope'.*paper-sim, paper-fig5, testbed"),
    (dict(preset="paper-sim", seed=-1), "seed"),
    (dict(preset="paper-sim", seed="1"), "seed"),
    (dict(preset="paper-sim", seed=True), "seed"),
    (dict(preset="paper-sim", seed=0, jobs=-1), "jobs"),
    (dict(preset="paper-sim", seed=0, jobs=2.5), "jobs"),
    (dict(preset="paper-sim", seed=0, horizon=0), "horizon"),
    (dict(preset="paper-sim", seed=0, servers=0), "worker_servers"),
    (dict(preset="paper-fig5", seed=0, servers=1), "servers"),
    (dict(preset="paper-fig5", seed=0, horizon=-3), "horizon"),
    (dict(preset="testbed", seed=0, jobs=5), "jobs"),
    (dict(preset="testbed", seed=0, servers=9), "servers"),
    (dict(preset="paper-sim", seed=0, calibration="exact"), "calibration"),
    (dict(preset="paper-sim", seed=0, arrivals="bursty"), "arrivals"),
    (dict(preset="paper-sim", seed=0, gpu_pool="both"), "gpu_pool"),
    (dict(preset="paper-sim", seed=0, class_mix=(0.5, 0.5)), "class_mix"),
    (dict(preset="paper-sim", seed=0, class_mix=(0.5, 0.6, -0.1)), "class_mix"),
    (dict(preset="paper-sim", seed=0, class_mix=(0.2, 0.2, 0.2)), "class_mix"),
    (dict(preset="paper-sim", seed=0, priority=(100, 1)), "priority"),
    (dict(preset="paper-sim", seed=0, priority=(-1, 1)), "priority"),
    (dict(preset="paper-sim", seed=0, priority=5), "priority"),
    (dict(preset="paper-sim", seed=0, slot_s=0), "slot_s"),
    (dict(preset="paper-sim", seed=0, rack_size=0), "rack_size"),
    (dict(preset="paper-sim", seed=0, colour="red"), "colour: unknown option.*calibration"),
    (dict(preset="paper-sim", seed=0, servers=4, worker_servers=3), "worker_servers"),
    (dict(preset="testbed", seed=0, calibration="literal"), "calibration"),
])
def test_bad_arguments_raise_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        generate(**call)


# ---- paper-fig5 --------------------------------------------------------------------------------
def _alone(inst, j, horizon=None):
    """The job alone on the empty cluster under the greedy policy (completion or None)."""
    job = dataclasses.replace(inst.jobs[j])
    sub = dataclasses.replace(inst.with_jobs([job]), horizon=horizon or inst.horizon)
    sched = solve(sub, "greedy")
    assert validate(sub, sched).ok
    return sched.completion[0]


@pytest.mark.parametrize("n", [3, 6, 9, 12])
def test_fig5_split_small_and_feasible(n):
    for seed in range(3):
        inst = paper_fig5(seed, servers=n)
        assert (inst.H, inst.K) == (math.ceil(n / 2), n // 2)
        assert inst.I == 10 and inst.horizon == 10
        assert (inst.min_duration <= inst.horizon - inst.arrival + 1).all()
        assert (inst.min_duration <= 10).all()
        assert ((1 <= inst.epochs) & (inst.epochs <= 200)).all()
        assert all(50 <= j.utility.priority <= 100 for j in inst.jobs)
        for j in range(inst.I):
            # each job alone finishes by T: the instance is feasible job by job
            assert _alone(inst, j) is not None
            assert chunk_time_from_provenance(inst.jobs[j].provenance) == inst.chunk_time[j]
        sched = solve(inst, "greedy")
        assert validate(inst, sched).ok


def test_fig5_priority_groups():
    for lo in (1.0, 25.0, 75.0):
        inst = paper_fig5(4, servers=6, priority=(lo, 100.0))
        assert all(lo <= j.utility.priority <= 100.0 for j in inst.jobs)


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 12), jobs=st.integers(0, 10),
       horizon=st.integers(1, 12))
def test_fig5_property_every_job_fits_its_window(seed, n, jobs, horizon):
    inst = paper_fig5(seed, servers=n, jobs=jobs, horizon=horizon)
    assert inst.I == jobs and inst.H + inst.K == n
    assert (inst.min_duration <= inst.horizon - inst.arrival + 1).all()
    for j in range(inst.I):
        assert FirstFit().place(inst, j, 1, inst.capacity.copy()) is not None
    assert validate(inst, solve(inst, "greedy")).ok


@pytest.mark.parametrize("scale", [0.25, 0.5])
def test_fig5_e_max_scale_caps_each_job_at_its_share_of_what_it_does_alone(scale):
    """E_i <= max(1, floor(s E_max_i)), E_max_i the most epochs job i finishes alone by T: so a
    copy of the job with ceil(E_i / s) epochs (<= E_max_i) still finishes alone by T."""
    for seed in range(3):
        inst = paper_fig5(seed, servers=6, e_max_scale=scale)
        assert inst.meta["e_max_scale"] == scale
        for j, job in enumerate(inst.jobs):
            if job.epochs > 1:
                bigger = dataclasses.replace(job, epochs=math.ceil(job.epochs / scale))
                assert bigger.epochs <= 200
                assert _alone(inst.with_jobs([bigger]), 0) is not None, (seed, j)
    # scaled down, the work drops; servers, arrivals and utilities are the preset's
    base, small = paper_fig5(4, servers=6), paper_fig5(4, servers=6, e_max_scale=0.25)
    assert small.work.sum() < base.work.sum()
    assert (small.arrival == base.arrival).all() and small.servers == base.servers
    assert [j.utility for j in small.jobs] == [j.utility for j in base.jobs]


def test_fig5_target_range_draws_gamma3_from_it():
    base = paper_fig5(2, servers=9)
    inst = paper_fig5(2, servers=9, target_range=(1.0, 5.0))
    assert inst.meta["target_range"] == [1.0, 5.0] and "target_range" not in base.meta
    assert all(1.0 <= j.utility.target <= 5.0 for j in inst.jobs)
    assert any(j.utility.target > 5.0 for j in base.jobs)
    # gamma1, gamma2 and the jobs are the preset's: only the target changed
    for a, b in zip(inst.jobs, base.jobs):
        assert (a.utility.priority, a.utility.decay) == (b.utility.priority, b.utility.decay)
        assert dataclasses.replace(a, utility=b.utility) == b


@pytest.mark.parametrize("options", [{"e_max_scale": 0.5}, {"target_range": (1.0, 5.0)},
                                     {"e_max_scale": 0.25, "target_range": (1.0, 5.0)}])
def test_fig5_options_are_seeded_and_go_through_the_preset(options):
    a = generate("paper-fig5", seed=7, servers=6, **options)
    assert a.fingerprint == paper_fig5(7, servers=6, **options).fingerprint
    assert a.fingerprint != paper_fig5(8, servers=6, **options).fingerprint
    assert a.fingerprint != paper_fig5(7, servers=6).fingerprint
    # the defaults are the preset: same instance as without the options
    assert (paper_fig5(7, servers=6, e_max_scale=1.0, target_range=(1.0, 15.0)).fingerprint
            == paper_fig5(7, servers=6).fingerprint)


@pytest.mark.parametrize("options, name", [({"e_max_scale": 0}, "e_max_scale"),
                                           ({"e_max_scale": 1.5}, "e_max_scale"),
                                           ({"target_range": (5.0, 1.0)}, "target_range"),
                                           ({"target_range": 3}, "target_range")])
def test_fig5_bad_options_name_the_field(options, name):
    with pytest.raises(ValueError, match=name):
        paper_fig5(0, **options)


# ---- testbed ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bed():
    return testbed(0)


def test_testbed_cluster(bed):
    assert bed.H == 7 and bed.K == 2 and bed.horizon == 10 and bed.I == 12
    for s in bed.worker_servers:
        assert (s.capacity["cpu"], s.capacity["mem"], s.capacity["storage"]) == (32, 80, 600)
    gpus = [s.capacity["gpu"] for s in bed.worker_servers]
    assert sum(gpus) == 4 and sum(g > 0 for g in gpus) == 4
    for s in bed.ps_servers:
        assert (s.capacity["gpu"], s.capacity["cpu"], s.capacity["mem"], s.capacity["storage"]) == \
            (0, 8, 32, 1500)
    assert bed.meta["slot_s"] == 1200.0


@pytest.mark.parametrize("seed", range(5))
def test_testbed_jobs(seed):
    bed = testbed(seed)
    assert ((1 <= bed.arrival) & (bed.arrival <= 9)).all() and (np.diff(bed.arrival) >= 0).all()
    assert ((4 <= bed.epochs) & (bed.epochs <= 30)).all()
    assert set(bed.chunks) <= {7, 10}  # 200 images in chunks of 30 or 20
    r = {name: n for n, name in enumerate(bed.resources)}
    w, p = bed.worker_demand, bed.ps_demand
    assert set(w[:, r["gpu"]]) <= {0, 1} and (p[:, r["gpu"]] == 0).all()
    for d in (w, p):
        assert ((1 <= d[:, r["cpu"]]) & (d[:, r["cpu"]] <= 5)).all()
        assert ((2 <= d[:, r["mem"]]) & (d[:, r["mem"]] <= 10)).all()
        assert ((1 <= d[:, r["bw"]]) & (d[:, r["bw"]] <= 3)).all()
    assert (bed.worker_bw <= bed.ps_bw).all()
    for n, job in enumerate(bed.jobs):
        prov = job.provenance
        assert prov["minibatches"] * 10 in (20, 30) and prov["slot_s"] == 1200.0
        assert prov["gradient_mb"] == MODEL_GRADIENT_MB[prov["model"]]
        assert prov["minibatch_time_s"] > 0
        assert chunk_time_from_provenance(prov) == job.chunk_time
        assert prov["minibatch_time_s"] + comm_time_s(prov["gradient_mb"], prov["worker_bw_gbps"]) \
            == pytest.approx(job.chunk_time * 1200.0 / prov["minibatches"], rel=1e-12)
        # at its typical allocation the job runs 40 min - 2 h (2 - 6 slots of 20 minutes),
        # ending by the horizon, and its utility's target is that run's duration
        slots = math.ceil(prov["target_duration_slots"] - 1e-9)
        k = prov["typical_workers"]
        assert 2 <= slots <= 6 and job.arrival + slots - 1 <= bed.horizon
        assert 1 <= k <= workers_alone(bed, n)
        assert math.ceil(bed.work[n] / k) == slots
        assert job.utility.target == slots - 1
    # sized for about the testbed's capacity: sizing by the empty testbed gave about 4.8
    assert 0.5 <= load_factor(bed)[0] <= 1.5
    assert validate(bed, solve(bed, "greedy")).ok


def test_testbed_typical_workers_meet_the_target_load():
    # the share c is the largest at which the (continuous) load is at most the target
    from oasis_opt.workloads.testbed import TARGET_LOAD, typical_workers

    bed = testbed(0)
    alone = np.array([workers_alone(bed, j) for j in range(bed.I)])
    duration = np.array([j.provenance["target_duration_slots"] for j in bed.jobs])
    k = typical_workers(bed, alone, duration)
    assert ((1 <= k) & (k <= alone)).all()
    assert load_factor(bed, duration * alone)[0] > TARGET_LOAD  # the empty-testbed sizing
    # one more worker for every job that can take one overshoots the target load
    more = np.minimum(k + 1, alone)
    assert load_factor(bed, duration * more)[0] > TARGET_LOAD
