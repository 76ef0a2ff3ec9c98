"""The OASiS dual subroutine (Alg. 2): reference vs numpy vs JAX, brute force, plan validity."""
from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from oasis_opt.model import Instance, Job, Server, ScheduleBuilder, Utility, validate
from oasis_opt.model.schedule import WORKER
from oasis_opt.online.dual import GRANULARITIES, Plan, best_schedule
from oasis_opt.testing import instances


# ---- random problems: an instance, a job, prices and free capacities ---------------------------
@st.composite
def dual_cases(draw, max_horizon: int = 6, max_servers: int = 3, max_work: int = 12,
               granularity=None):
    inst = draw(instances(max_jobs=3, max_horizon=max_horizon, max_servers=max_servers,
                          max_work=max_work))
    assume(inst.I > 0)
    job = draw(st.integers(0, inst.I - 1))
    # an early arrival for the job under test, so that most cases have a feasible schedule
    jobs = list(inst.jobs)
    jobs[job] = replace(jobs[job], arrival=draw(st.integers(1, jobs[job].arrival)))
    inst = inst.with_jobs(jobs)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    T, H, K, R = inst.horizon, inst.H, inst.K, inst.R
    # price scale from "utility dominates" to "cost dominates", so payoffs of both signs occur
    scale = 10.0 ** draw(st.floats(-3, 0.5))
    wprice = scale * rng.uniform(0, 1, (T + 1, H, R))
    pprice = scale * rng.uniform(0, 1, (T + 1, K, R))
    # free = capacity times a per-(slot, server) fraction: mostly all, sometimes little or none
    fractions = np.array([0.0, 0.3, 0.7] + [1.0] * 7)
    wfree = inst.worker_capacity[None] * rng.choice(fractions, (T + 1, H, 1))
    pfree = inst.ps_capacity[None] * rng.choice(fractions, (T + 1, K, 1))
    g = granularity or draw(st.sampled_from(GRANULARITIES))
    return inst, job, (wprice, pprice, wfree, pfree), g


def plan_cost(inst: Instance, plan: Plan, wprice, pprice) -> float:
    """Resource cost (28) of a plan's rows at the given prices, recomputed from scratch."""
    H, total = inst.H, 0.0
    for _, t, server, role, n in plan.rows.tolist():
        if role == WORKER:
            total += n * float(wprice[t, server] @ inst.worker_demand[plan.job])
        else:
            total += n * float(pprice[t, server - H] @ inst.ps_demand[plan.job])
    return total


def check_plan(inst: Instance, plan: Plan, prices) -> None:
    """Everything a plan promises: validator-clean as a one-job schedule, within the free
    capacity, k_t <= N_i, exactly ceil(k b/B) PSs, cost and payoff consistent."""
    wprice, pprice, wfree, pfree = prices
    i, H = plan.job, inst.H
    if plan.completion is None:
        assert plan.payoff == -math.inf and plan.cost == math.inf and len(plan.rows) == 0
        return
    b = ScheduleBuilder(inst)
    b.admit(i)
    b.add_array(plan.rows)
    sched = b.build("plan")
    report = validate(inst, sched)
    assert report.ok, str(report)
    assert sched.completion[i] == plan.completion
    rows = plan.rows
    assert (rows[:, 0] == i).all() and (rows[:, 4] > 0).all()
    workers = np.bincount(rows[rows[:, 3] == WORKER, 1], rows[rows[:, 3] == WORKER, 4],
                          minlength=inst.horizon + 1)
    ps = np.bincount(rows[rows[:, 3] != WORKER, 1], rows[rows[:, 3] != WORKER, 4],
                     minlength=inst.horizon + 1)
    assert np.array_equal(workers, plan.workers)
    assert (workers <= inst.chunks[i]).all()
    assert np.array_equal(ps, inst.ps_needed(i, workers))
    assert workers.sum() >= inst.work[i]
    # within the free capacity, per slot, server and resource
    used_w = np.zeros_like(wfree)
    used_p = np.zeros_like(pfree)
    for _, t, s, role, n in rows.tolist():
        if role == WORKER:
            used_w[t, s] += n * inst.worker_demand[i]
        else:
            used_p[t, s - H] += n * inst.ps_demand[i]
    assert (used_w <= wfree + 1e-9).all() and (used_p <= pfree + 1e-9).all()
    assert math.isclose(plan_cost(inst, plan, wprice, pprice), plan.cost, rel_tol=1e-9,
                        abs_tol=1e-12)
    assert plan.utility == pytest.approx(inst.utility_of(i, plan.completion), rel=1e-12)
    assert plan.payoff == pytest.approx(plan.utility - plan.cost, rel=1e-12, abs=1e-12)


def assert_same_best(p: Plan, q: Plan) -> None:
    """Same best payoff (1e-9 relative); equal cost when they complete in the same slot."""
    assert (p.completion is None) == (q.completion is None), (p, q)
    if p.completion is None:
        return
    assert math.isclose(p.payoff, q.payoff, rel_tol=1e-9, abs_tol=1e-9), (p.payoff, q.payoff)
    if p.completion == q.completion:
        assert math.isclose(p.cost, q.cost, rel_tol=1e-9, abs_tol=1e-9), (p.cost, q.cost)


# ---- the backends agree ------------------------------------------------------------------------------
@settings(max_examples=150)
@given(dual_cases())
def test_numpy_matches_reference(case):
    inst, job, prices, g = case
    ref = best_schedule(inst, job, *prices, backend="reference", granularity=g)
    fast = best_schedule(inst, job, *prices, backend="numpy", granularity=g)
    check_plan(inst, ref, prices)
    check_plan(inst, fast, prices)
    assert_same_best(ref, fast)


@settings(max_examples=60)
@given(dual_cases())
def test_numpy_loop_path_matches_reference(case):
    """The numpy DP step for large tables (a loop over k) on small cases, forced."""
    from oasis_opt.online import dual_numpy

    inst, job, prices, g = case
    ref = best_schedule(inst, job, *prices, backend="reference", granularity=g)
    saved, dual_numpy.LOOP_ABOVE = dual_numpy.LOOP_ABOVE, 0
    try:
        fast = best_schedule(inst, job, *prices, backend="numpy", granularity=g)
    finally:
        dual_numpy.LOOP_ABOVE = saved
    check_plan(inst, fast, prices)
    assert_same_best(ref, fast)


@settings(max_examples=25)
@given(dual_cases())
def test_jax_matches_reference(case):
    inst, job, prices, g = case
    ref = best_schedule(inst, job, *prices, backend="reference", granularity=g)
    jx = best_schedule(inst, job, *prices, backend="jax", granularity=g)
    check_plan(inst, jx, prices)
    assert_same_best(ref, jx)


@settings(max_examples=40)
@given(dual_cases())
def test_worker_slot_payoff_at_least_chunk_payoff(case):
    """A literal-Alg.-2 (chunk) schedule is also a worker-slot schedule: the worker-slot DP,
    optimal over the larger set, never does worse."""
    inst, job, prices, _ = case
    ws = best_schedule(inst, job, *prices, granularity="worker-slot")
    ch = best_schedule(inst, job, *prices, granularity="chunk")
    if ch.completion is not None:
        assert ws.payoff >= ch.payoff - 1e-9 * max(1.0, abs(ch.payoff))


# ---- brute force on tiny cases -------------------------------------------------------------------
def _slot_options(inst, job, t, prices):
    """Exact per-slot optimum by enumerating every placement y_h, z_k: best[k] = min cost of k
    workers and any PS count allowed by (6) and (7), within the free capacity (inf if none)."""
    wprice, pprice, wfree, pfree = prices
    N = int(inst.chunks[job])
    w, s = inst.worker_demand[job], inst.ps_demand[job]
    b, B = inst.worker_bw[job], inst.ps_bw[job]
    best = [0.0] + [math.inf] * N
    for y in itertools.product(range(N + 1), repeat=inst.H):
        k = sum(y)
        if not 1 <= k <= N or any((n * w > wfree[t, h] + 1e-9).any() for h, n in enumerate(y)):
            continue
        cw = sum(n * float(wprice[t, h] @ w) for h, n in enumerate(y))
        for z in itertools.product(range(k + 1), repeat=inst.K):
            m = sum(z)
            if m > k or m * B < k * b * (1 - 1e-12) or \
                    any((n * s > pfree[t, q] + 1e-9).any() for q, n in enumerate(z)):
                continue
            best[k] = min(best[k], cw + sum(n * float(pprice[t, q] @ s) for q, n in enumerate(z)))
    return best


def brute_force_payoff(inst, job, prices, granularity) -> float:
    a, T = int(inst.arrival[job]), inst.horizon
    slots = list(range(a, T + 1))
    per_slot = {t: _slot_options(inst, job, t, prices) for t in slots}
    N, x = int(inst.chunks[job]), float(inst.chunk_time[job])
    if granularity == "worker-slot":
        units, need, workers_of = range(N + 1), int(inst.work[job]), (lambda d: d)
    else:  # d chunks per slot need ceil(d x) workers; E N chunks in all
        need = int(inst.epochs[job]) * N
        units = [d for d in range(need + 1) if math.ceil(d * x - 1e-9) <= N]
        workers_of = (lambda d: math.ceil(d * x - 1e-9))
    best = -math.inf
    for ds in itertools.product(units, repeat=len(slots)):
        if sum(ds) < need:
            continue
        cost = sum(per_slot[t][workers_of(d)] for t, d in zip(slots, ds))
        if cost == math.inf:
            continue
        used = [t for t, d in zip(slots, ds) if workers_of(d) > 0]
        done = used[-1] if used else a
        best = max(best, inst.utility_of(job, done) - cost)
    return best


@settings(max_examples=100)
@given(dual_cases(max_horizon=3, max_servers=2, max_work=6))
def test_reference_matches_brute_force(case):
    inst, job, prices, g = case
    N = int(inst.chunks[job])
    assume(N <= 3 and inst.horizon - inst.arrival[job] < 3)
    if g == "chunk":
        assume(int(inst.epochs[job]) * N <= 8)
    ref = best_schedule(inst, job, *prices, backend="reference", granularity=g)
    brute = brute_force_payoff(inst, job, prices, g)
    if brute == -math.inf:
        assert ref.completion is None
    else:
        assert ref.payoff == pytest.approx(brute, rel=1e-9, abs=1e-9)


# ---- edges and errors ---------------------------------------------------------------------------
def _one_job_instance(T=4, chunks=2, epochs=2, chunk_time=1.0, arrival=1) -> Instance:
    ws = (Server("w0", {"cpu": 4, "mem": 16, "bw": 10}), Server("w1", {"cpu": 4, "mem": 16, "bw": 10}))
    ps = (Server("p0", {"cpu": 4, "mem": 16, "bw": 20}),)
    job = Job("j", arrival, epochs, chunks, chunk_time, {"cpu": 1, "mem": 2, "bw": 2},
              {"cpu": 1, "mem": 2, "bw": 5}, Utility.sigmoid(50, 0.5, 2))
    return Instance(T, ("cpu", "mem", "bw"), ws, ps, (job,))


def _empty_prices(inst, price=0.1):
    T, H, K, R = inst.horizon, inst.H, inst.K, inst.R
    return (np.full((T + 1, H, R), price), np.full((T + 1, K, R), price),
            np.broadcast_to(inst.worker_capacity, (T + 1, H, R)).copy(),
            np.broadcast_to(inst.ps_capacity, (T + 1, K, R)).copy())


@pytest.mark.parametrize("backend", ["reference", "numpy", "jax"])
def test_no_capacity_means_infeasible(backend):
    inst = _one_job_instance()
    wp, pp, wf, pf = _empty_prices(inst)
    pf[:] = 0.0  # no PS capacity anywhere
    plan = best_schedule(inst, 0, wp, pp, wf, pf, backend=backend)
    assert plan.completion is None and plan.payoff == -math.inf and len(plan.rows) == 0


@pytest.mark.parametrize("backend", ["reference", "numpy"])
def test_cheapest_servers_first_ties_by_index(backend):
    inst = _one_job_instance(chunks=3, epochs=1)  # 3 worker-slots, up to 3 workers
    wp, pp, wf, pf = _empty_prices(inst)
    wf[:, 0] = np.array([1.0, 2.0, 2.0])  # w0 holds one worker, w1 four; equal prices
    plan = best_schedule(inst, 0, wp, pp, wf, pf, backend=backend)
    assert plan.completion == 1  # all three in the arrival slot
    assert plan.rows[plan.rows[:, 3] == WORKER][:, [2, 4]].tolist() == [[0, 1], [1, 2]]
    wp[1, 1] = 0.01  # w1 now cheaper: it takes all three
    plan = best_schedule(inst, 0, wp, pp, wf, pf, backend=backend)
    assert plan.rows[plan.rows[:, 3] == WORKER][:, [2, 4]].tolist() == [[1, 3]]


def test_bad_arguments_are_rejected():
    inst = _one_job_instance()
    wp, pp, wf, pf = _empty_prices(inst)
    with pytest.raises(ValueError, match="backend"):
        best_schedule(inst, 0, wp, pp, wf, pf, backend="torch")
    with pytest.raises(ValueError, match="granularity"):
        best_schedule(inst, 0, wp, pp, wf, pf, granularity="epoch")
    with pytest.raises(ValueError, match="worker_free"):
        best_schedule(inst, 0, wp, pp, wf[:-1], pf)
    wp[2, 0, 0] = -1.0
    with pytest.raises(ValueError, match="worker_price"):
        best_schedule(inst, 0, wp, pp, wf, pf)


def test_job_without_work_completes_on_arrival():
    # chunk_time must be > 0, but E N x below the float slack rounds to no whole worker-slot
    inst = _one_job_instance(chunk_time=1e-12, arrival=2)
    assert inst.work[0] == 0
    plan = best_schedule(inst, 0, *_empty_prices(inst))
    assert plan.completion == 2 and plan.cost == 0 and plan.payoff == plan.utility > 0


@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_numpy_dp_paths_agree_on_paper_jobs(granularity):
    """Both numpy DP steps (table and loop over k) on realistic sizes (W in the hundreds,
    N_i up to 100): the same additions and the same tie rule, so identical plans."""
    from oasis_opt.online import dual_numpy
    from oasis_opt.workloads import paper_sim

    inst = paper_sim(11, jobs=12, horizon=60, worker_servers=8, ps_servers=8)
    rng = np.random.default_rng(5)
    T, H, K, R = inst.horizon, inst.H, inst.K, inst.R
    prices = (rng.uniform(0, 0.01, (T + 1, H, R)), rng.uniform(0, 0.01, (T + 1, K, R)),
              inst.worker_capacity[None] * rng.choice([0.5, 1.0], (T + 1, H, 1)),
              inst.ps_capacity[None] * rng.choice([0.5, 1.0], (T + 1, K, 1)))
    saved = dual_numpy.LOOP_ABOVE
    try:
        for job in range(inst.I):
            plans = []
            for threshold in (0, 10**12):
                dual_numpy.LOOP_ABOVE = threshold
                plans.append(best_schedule(inst, job, *prices, granularity=granularity))
            a, b = plans
            assert (a.completion, a.cost) == (b.completion, b.cost)
            assert np.array_equal(a.rows, b.rows)
            check_plan(inst, a, prices)
    finally:
        dual_numpy.LOOP_ABOVE = saved
