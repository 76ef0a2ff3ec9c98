"""One plan, whatever the backend: whole OASiS runs give the same result file with the numpy,
JAX and reference dual subroutines (the tie rule of ``oasis_opt.online.dual``).

A result file is a deterministic function of the instance, the policy and its options except
``stats.timing`` (wall-clock seconds); ``stats.backend`` and ``stats.options.backend`` name the
backend. The files are compared byte for byte with those values blanked, nothing else.
"""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_opt import save_result, solve, validate
from oasis_opt.model import Topology
from oasis_opt.model.io import dumps
from oasis_opt.offline.colgen import price_jobs
from oasis_opt.online.dual import BACKENDS, Market, best_schedule
from oasis_opt.online.oasis import OasisPolicy
from oasis_opt.sim import simulate
from oasis_opt.testing import hetero_instances, instances
from oasis_opt.workloads import generate, paper_sim

NOT_DETERMINED = ("timing", "backend")  # the only stats a backend may change


def result_bytes(inst, sched, path) -> str:
    """The saved result file, with the wall-clock and backend entries of ``stats`` blanked."""
    save_result(inst, sched, path)
    doc = json.loads(path.read_text())
    stats = doc["stats"]
    assert set(NOT_DETERMINED) <= set(stats), sorted(stats)
    for key in NOT_DETERMINED:
        stats[key] = None
    if "backend" in stats["options"]:  # the option as given to oasis_opt.solve
        stats["options"]["backend"] = None
    return dumps(doc)


def assert_identical_runs(inst, tmp_path, backends=BACKENDS, policy="oasis", **options):
    files = {}
    for b in backends:
        sched = solve(inst, policy, backend=b, **options)
        assert validate(inst, sched).ok and sched.stats["backend"] == b
        files[b] = result_bytes(inst, sched, tmp_path / f"{b}.json")
    first = files[backends[0]]
    for b in backends[1:]:
        assert files[b] == first, f"{b} differs from {backends[0]}"
    return json.loads(first)


class EveryBackend(OasisPolicy):
    """OASiS that, at every decision, also asks the other backends for the plan at the same
    prices and free capacities: they must return the same rows."""

    def on_arrival(self, job, t, state):
        market = Market(self.worker_price, self.ps_price, self.worker_free, self.ps_free)
        plans = [best_schedule(self.instance, job, market, backend=b,
                               granularity=self.granularity) for b in BACKENDS]
        for other in plans[1:]:
            assert (other.completion, other.cost, other.payoff) == \
                (plans[0].completion, plans[0].cost, plans[0].payoff)
            assert np.array_equal(other.rows, plans[0].rows)
        return super().on_arrival(job, t, state)


@settings(max_examples=15)
@given(instances(), st.sampled_from(["worker-slot", "chunk"]))
def test_every_decision_and_every_result_file_is_the_same(tmp_path_factory, inst, granularity):
    sched = simulate(inst, EveryBackend(granularity=granularity))
    assert validate(inst, sched).ok
    assert_identical_runs(inst, tmp_path_factory.mktemp("r"), granularity=granularity)


@settings(max_examples=15, deadline=None)
@given(hetero_instances())
def test_typed_every_decision_and_every_result_file_is_the_same(tmp_path_factory, inst):
    sched = simulate(inst, EveryBackend())
    assert validate(inst, sched).ok
    assert_identical_runs(inst, tmp_path_factory.mktemp("r"))


def test_numpy_and_jax_on_a_mixed_cluster(tmp_path):
    """paper-sim's jobs on V100/K80/CPU servers: work in units of ~1e4-1e5 a job (too many for
    the reference's Python loops; the typed hypothesis test above holds it to them)."""
    inst = generate("paper-sim", seed=3, jobs=8, horizon=30, servers=4,
                    cluster_mix="v100:k80:cpu")
    assert inst.typed
    doc = assert_identical_runs(inst, tmp_path, backends=("numpy", "jax"))
    assert sum(j["admitted"] for j in doc["jobs"]) > 0


def test_all_three_backends_on_a_small_paper_instance(tmp_path):
    inst = paper_sim(3, jobs=16, horizon=12, worker_servers=6, ps_servers=6)
    doc = assert_identical_runs(inst, tmp_path)
    assert any(j["admitted"] for j in doc["jobs"])


@pytest.mark.parametrize("jobs,seed,calibration", [(100, 1, "calibrated"),
                                                   (200, 2, "calibrated"),
                                                   (400, 2, "calibrated"),
                                                   (100, 3, "literal")])
def test_paper_sim_result_files_numpy_and_jax(tmp_path, jobs, seed, calibration):
    """The paper-sim preset (T = 300, H = K = 50) at full size: numpy and JAX write the same
    file (the reference backend is too slow here; it joins in the ``--runslow`` case). The
    400-job case was left out while JAX's payoff of one job differed from numpy's in the last
    place and decided a tie; ties are now compared within the numerics tolerance, then by the
    canonical order, so it is back."""
    inst = generate("paper-sim", seed=seed, jobs=jobs, calibration=calibration)
    doc = assert_identical_runs(inst, tmp_path, backends=("numpy", "jax"))
    assert sum(j["admitted"] for j in doc["jobs"]) > 0


@pytest.mark.slow
@pytest.mark.parametrize("jobs,seed", [(100, 1), (200, 2)])
def test_paper_sim_result_file_reference(tmp_path, jobs, seed):
    """All three backends on the full paper-sim preset (1-2 minutes each on 2 cores)."""
    inst = generate("paper-sim", seed=seed, jobs=jobs)
    assert_identical_runs(inst, tmp_path)


def test_timing_is_the_only_wall_clock_entry(tmp_path):
    """Two runs with the same backend write the same file once ``stats.timing`` is blanked:
    every other entry is deterministic (so the comparison above hides nothing else)."""
    inst = paper_sim(5, jobs=12, horizon=20, worker_servers=4, ps_servers=4)
    a, b = (result_bytes(inst, solve(inst, "oasis"), tmp_path / f"{n}.json") for n in "ab")
    assert a == b
    timing = json.loads((tmp_path / "a.json").read_text())["stats"]["timing"]
    assert set(timing) == {"run_time_s", "decision_s", "job_decision_s"}


# ---- the other callers of the dual subroutine -----------------------------------------------------
@pytest.mark.parametrize("progress", ["chunk-time", "placement"])
def test_oasis_topo_result_files_identical(tmp_path, progress):
    """oasis-topo calls the dual at steered prices and re-plans with a larger work target:
    still one result, whatever the backend (4:1 oversubscribed racks)."""
    inst = paper_sim(2, jobs=30, horizon=40)
    inst = dataclasses.replace(inst, topology=Topology.from_racks(inst, 4.0), progress=progress)
    assert_identical_runs(inst, tmp_path, policy="oasis-topo")


def test_column_generation_prices_the_same_plans_with_every_backend():
    """Column generation prices jobs at LP duals with full capacities free: sparse prices, mostly
    0, so equal-cost plans everywhere; every backend returns the same columns."""
    inst = paper_sim(6, jobs=6, horizon=30, worker_servers=8, ps_servers=8)
    inst = inst.with_jobs([dataclasses.replace(j, arrival=1 + n % 3)
                           for n, j in enumerate(inst.jobs)])  # early: room to finish
    rng = np.random.default_rng(0)
    prices = rng.choice([0.0, 0.0, 0.0, 1e-3, 5e-3], (inst.horizon + 1, inst.H + inst.K, inst.R))
    plans = {b: price_jobs(inst, prices, backend=b) for b in BACKENDS}
    assert sum(p.feasible for p in plans["numpy"]) >= 4
    for b in BACKENDS[1:]:
        for p, q in zip(plans["numpy"], plans[b]):
            assert (p.completion, p.cost, p.payoff) == (q.completion, q.cost, q.payoff)
            assert np.array_equal(p.rows, q.rows)
