"""OASiS on clusters with accelerator types: the per-type pricing constants (23'), (25') of
``online.pricing``, prices by server type, admission on an empty cluster, and OASiS against the
exact optimum on tiny typed instances."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_opt import solve, validate
from oasis_opt.model import DEFAULT_RESOURCES, Instance, Job, JobType, Server, Utility
from oasis_opt.online.dual import Market, best_schedule
from oasis_opt.online.pricing import leanest_use, oracle_pricing, oracle_u_types
from oasis_opt.testing import hetero_instances

_CAP = {"gpu": 4.0, "cpu": 16.0, "mem": 64.0, "storage": 100.0, "bw": 40.0}


def _cluster(*jobs, T=6):
    return Instance(T, DEFAULT_RESOURCES,
                    (Server("v", dict(_CAP), accelerator="v100"),
                     Server("k", dict(_CAP), accelerator="k80"),
                     Server("c", {**_CAP, "gpu": 0.0, "cpu": 64.0}, accelerator="cpu")),
                    (Server("p", {"cpu": 64.0, "mem": 64.0, "bw": 400.0}),), tuple(jobs))


def _job(jid, types, value=10.0, chunks=2, chunk_time=3.0, unit=1):
    return Job(jid, 1, 1, chunks, chunk_time, {"gpu": 1.0, "cpu": 2.0, "bw": 5.0},
               {"cpu": 1.0, "bw": 20.0}, Utility.constant(value), unit=unit, types=types)


CPU_MODE = JobType(1, {"cpu": 8.0, "bw": 5.0})


def test_u_per_type_is_the_best_utility_over_the_demand_of_jobs_that_use_the_type():
    # a: V100 (speed 3) and CPU mode; b: K80 only; dmin: a 6 units / (2 x 3) = 1 slot
    inst = _cluster(_job("a", {"v100": JobType(3), "cpu": CPU_MODE}, value=12.0),
                    _job("b", {"k80": JobType(1)}, value=8.0))
    U = oracle_u_types(inst)
    g = {t: n for n, t in enumerate(inst.types)}
    r = {x: n for n, x in enumerate(inst.resources)}
    assert U[g["v100"], r["gpu"]] == 12.0 and U[g["v100"], r["cpu"]] == 6.0
    assert U[g["k80"], r["gpu"]] == 8.0 and U[g["k80"], r["cpu"]] == 4.0
    assert U[g["cpu"], r["cpu"]] == 12.0 / 8.0 and math.isnan(U[g["cpu"], r["gpu"]])
    # V_i: a on V100 needs 2 worker-slots of 1 + 2 + 5 = 8 (CPU mode: 6 of 13); b 6 of 8
    assert leanest_use(inst).tolist() == [16.0, 48.0]
    pricing = oracle_pricing(inst)
    assert np.array_equal(pricing.U_worker_types, U, equal_nan=True)
    assert pricing.U_worker[r["gpu"]] == 12.0  # the max over types (file format, alpha)
    # a full server of each type is priced at its type's U
    full = np.broadcast_to(inst.worker_capacity, (1,) + inst.worker_capacity.shape)
    prices = pricing.worker_prices(full, inst.worker_capacity)[0]
    assert prices[g["v100"], r["gpu"]] == pytest.approx(12.0)
    assert prices[g["k80"], r["gpu"]] == pytest.approx(8.0)
    assert prices[g["cpu"], r["cpu"]] == pytest.approx(1.5)
    only_k = pricing.worker_prices(full[:, 1:2], inst.worker_capacity[1:2], np.array([1]))
    assert only_k[0, 0, r["gpu"]] == pytest.approx(8.0)
    stats = oracle_pricing(inst, u_scale=2.0).stats()
    assert stats["U_worker_types"]["k80"]["gpu"] == pytest.approx(16.0)


def test_oasis_buys_the_work_where_it_is_cheapest():
    # one job: 12 units; V100 at speed 3 (2 workers, 2 slots) or K80 at speed 1: it goes to V100
    inst = _cluster(_job("a", {"v100": JobType(3), "k80": JobType(1)}, chunk_time=6.0))
    s = solve(inst, "oasis")
    assert validate(inst, s).ok and s.admitted == (True,)
    workers = s.allocations.rows()
    assert {int(r[2]) for r in workers if r[3] == 0} == {0}


def _leanest(inst) -> tuple[int, int]:
    """Job 0's leanest type (the argmin of V_i, ``pricing.leanest_use``) and its slots alone
    there with one worker, ceil(W_i / s_ig)."""
    slots = -(-inst.work[0] // np.maximum(inst.type_speed[0], 1))
    use = np.where(inst.usable[0], slots * inst.type_demand[0].sum(axis=1), np.inf)
    lean = int(np.argmin(use))
    return lean, int(slots[lean])


@st.composite
def lone_jobs(draw):
    """One job on a ``hetero_instances`` cluster, built to meet the precondition of (25'): its
    types cut to those with a server that holds one of its workers (so its leanest type can hold
    a plan), and the horizon stretched so that one worker from its arrival finishes by T."""
    inst = draw(hetero_instances(min_jobs=1, max_jobs=1, max_horizon=5))
    job = inst.jobs[0]
    holds = inst.worker_fits(0, inst.worker_capacity).max(axis=1) > 0  # per type
    if not holds[inst.usable[0]].all():
        types = {inst.types[g]: (job.types or {}).get(inst.types[g], JobType(job.unit))
                 for g in np.flatnonzero(holds)}
        inst = inst.with_jobs([replace(job, types=types)])
    _, slots = _leanest(inst)
    return replace(inst, horizon=max(inst.horizon, job.arrival - 1 + slots))


@settings(max_examples=40, deadline=None)
@given(lone_jobs())
def test_an_empty_cluster_admits_a_job_its_leanest_type_can_hold(inst):
    """(25'): f(T - a) > 0 and a plan on the job's leanest type (V_i) that fits by T: then its
    payoff at the floor prices is positive, so OASiS admits it. The strategy builds that
    precondition, so every example reaches the admission check: an OASiS that rejects a job it
    could place alone (a floor price above the payoff) fails here."""
    pricing = oracle_pricing(inst)
    T, H, K, R = inst.horizon, inst.H, inst.K, inst.R
    lean, _ = _leanest(inst)
    wfree = np.broadcast_to(inst.worker_capacity, (T + 1, H, R)).copy()
    wfree[:, inst.worker_type != lean] = 0.0  # only the leanest type
    pfree = np.broadcast_to(inst.ps_capacity, (T + 1, K, R)).copy()
    zero_w, zero_p = np.zeros((T + 1, H, R)), np.zeros((T + 1, K, R))
    assert best_schedule(inst, 0, Market(zero_w, zero_p, wfree, pfree)).feasible  # a plan that fits
    assert inst.work[0] > 0 and inst.utility_table[0, T] > 0
    s = solve(inst, "oasis")
    assert s.admitted == (True,) and validate(inst, s).ok
    assert pricing.alpha >= 1


@settings(max_examples=40, deadline=None)
@given(hetero_instances(max_jobs=3, max_horizon=4, max_servers=2, max_work=8))
def test_oasis_never_beats_the_exact_optimum_on_typed_instances(inst):
    oasis = solve(inst, "oasis")
    opt = solve(inst, "offline")
    assert validate(inst, oasis).ok and opt.stats["proven_optimal"]
    assert oasis.total_utility <= opt.total_utility + 1e-6 * max(1.0, opt.total_utility)


def test_chunk_granularity_refuses_types_with_one_line():
    from oasis_opt.model import UnsupportedInstance

    inst = _cluster(_job("a", {"v100": JobType(3)}))
    with pytest.raises(UnsupportedInstance, match="^policy 'oasis' with granularity 'chunk' "
                       "does not support accelerator types yet"):
        solve(inst, "oasis", granularity="chunk")
