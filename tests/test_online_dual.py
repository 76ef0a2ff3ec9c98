"""The OASiS dual subroutine (Alg. 2): reference vs numpy vs JAX (identical plans), brute force,
plan validity, the tie rule, the array-level entry point."""
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
from oasis_opt.online.dual import (BACKENDS, GRANULARITIES, DualJob, Market, Plan,
                                   best_schedule, best_schedule_arrays)
from oasis_opt.model.schedule import work_done
from oasis_opt.testing import hetero_instances, instances


# ---- random problems: an instance, a job, prices and free capacities ---------------------------
@st.composite
def dual_cases(draw, max_horizon: int = 6, max_servers: int = 3, max_work: int = 12,
               granularity=None, typed: bool = False):
    """(instance, job, prices, granularity); ``typed``: a cluster with accelerator types
    (worker-slot granularity, work in units)."""
    strategy = hetero_instances if typed else instances
    inst = draw(strategy(max_jobs=3, max_horizon=max_horizon, max_servers=max_servers,
                         max_work=max_work))
    assume(inst.I > 0)
    job = draw(st.integers(0, inst.I - 1))
    # an early arrival for the job under test, so that most cases have a feasible schedule
    jobs = list(inst.jobs)
    jobs[job] = replace(jobs[job], arrival=draw(st.integers(1, jobs[job].arrival)))
    inst = inst.with_jobs(jobs)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    T, H, K, R = inst.horizon, inst.H, inst.K, inst.R
    # price scale from "utility dominates" to "cost dominates", so payoffs of both signs occur;
    # half the cases draw prices from three values, so that equal-cost plans abound (ties)
    scale = 10.0 ** draw(st.floats(-3, 0.5))
    if draw(st.booleans()):
        wprice = scale * rng.uniform(0, 1, (T + 1, H, R))
        pprice = scale * rng.uniform(0, 1, (T + 1, K, R))
    else:
        levels = scale * np.array([0.1, 0.1, 0.1, 0.3, 0.7])
        wprice = rng.choice(levels, (T + 1, H, R))
        pprice = rng.choice(levels, (T + 1, K, R))
    # free = capacity times a per-(slot, server) fraction: mostly all, sometimes little or none
    fractions = np.array([0.0, 0.3, 0.7] + [1.0] * 7)
    wfree = inst.worker_capacity[None] * rng.choice(fractions, (T + 1, H, 1))
    pfree = inst.ps_capacity[None] * rng.choice(fractions, (T + 1, K, 1))
    g = "worker-slot" if typed else granularity or draw(st.sampled_from(GRANULARITIES))
    return inst, job, (wprice, pprice, wfree, pfree), g


def plan_cost(inst: Instance, plan: Plan, wprice, pprice) -> float:
    """Resource cost (28) of a plan's rows at the given prices, recomputed from scratch."""
    H, total = inst.H, 0.0
    for _, t, server, role, n in plan.rows.tolist():
        demand = inst.container_demand(plan.job, server, role)  # a worker's: its type's
        if role == WORKER:
            total += n * float(wprice[t, server] @ demand)
        else:
            total += n * float(pprice[t, server - H] @ demand)
    return total


def check_plan(inst: Instance, plan: Plan, prices) -> None:
    """Everything a plan promises: validator-clean as a one-job schedule, within the free
    capacity, k_t <= N_i, exactly ceil(k b/B) PSs, the work (in units with types), cost and
    payoff consistent."""
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
    assert work_done(inst, sched.allocations)[i] >= inst.work[i]
    # within the free capacity, per slot, server and resource
    used_w = np.zeros_like(wfree)
    used_p = np.zeros_like(pfree)
    for _, t, s, role, n in rows.tolist():
        if role == WORKER:
            used_w[t, s] += n * inst.container_demand(i, s, role)
        else:
            used_p[t, s - H] += n * inst.ps_demand[i]
    assert (used_w <= wfree + 1e-9).all() and (used_p <= pfree + 1e-9).all()
    assert math.isclose(plan_cost(inst, plan, wprice, pprice), plan.cost, rel_tol=1e-9,
                        abs_tol=1e-12)
    assert plan.utility == pytest.approx(inst.utility_of(i, plan.completion), rel=1e-12)
    assert plan.payoff == pytest.approx(plan.utility - plan.cost, rel=1e-12, abs=1e-12)


def assert_same_plan(p: Plan, q: Plan) -> None:
    """The same plan, bit for bit: completion, cost, payoff, workers and allocation rows."""
    assert (p.job, p.completion) == (q.job, q.completion), (p, q)
    assert (p.utility, p.cost, p.payoff) == (q.utility, q.cost, q.payoff), (p, q)
    assert np.array_equal(p.workers, q.workers), (p.workers, q.workers)
    assert p.rows.shape == q.rows.shape and np.array_equal(p.rows, q.rows), (p.rows, q.rows)


# ---- the backends return the same plan -------------------------------------------------------------
@settings(max_examples=150)
@given(dual_cases())
def test_numpy_matches_reference(case):
    inst, job, prices, g = case
    ref = best_schedule(inst, job, Market(*prices), backend="reference", granularity=g)
    fast = best_schedule(inst, job, Market(*prices), backend="numpy", granularity=g)
    check_plan(inst, ref, prices)
    check_plan(inst, fast, prices)
    assert_same_plan(ref, fast)


@settings(max_examples=60)
@given(dual_cases())
def test_numpy_loop_path_matches_reference(case):
    """The numpy DP step for large tables (a loop over k) on small cases, forced."""
    from oasis_opt.online import dual_numpy

    inst, job, prices, g = case
    ref = best_schedule(inst, job, Market(*prices), backend="reference", granularity=g)
    saved, dual_numpy.LOOP_ABOVE = dual_numpy.LOOP_ABOVE, 0
    try:
        fast = best_schedule(inst, job, Market(*prices), backend="numpy", granularity=g)
    finally:
        dual_numpy.LOOP_ABOVE = saved
    check_plan(inst, fast, prices)
    assert_same_plan(ref, fast)


@settings(max_examples=40)
@given(dual_cases())
def test_jax_matches_reference(case):
    inst, job, prices, g = case
    ref = best_schedule(inst, job, Market(*prices), backend="reference", granularity=g)
    jx = best_schedule(inst, job, Market(*prices), backend="jax", granularity=g)
    check_plan(inst, jx, prices)
    assert_same_plan(ref, jx)


@settings(max_examples=40, deadline=None)
@given(dual_cases(), st.sampled_from([1e-300, 1e-308, 1e-312, 1e-318]))
def test_jax_matches_reference_on_subnormal_prices(case, tiny):
    """Prices near an underflowed floor give subnormal slot costs (|C| < 2.2e-308), which XLA on
    CPU flushes to zero: a kernel fed them unscaled (a mutant with ``dual_jax.SCALE = 1``) sees
    ties where numpy sees a cheaper count and returns another plan. The kernel's exact 2^64
    scaling keeps them."""
    inst, job, (wp, pp, wf, pf), g = case
    prices = (wp * tiny, pp * tiny, wf, pf)
    assume(np.any((prices[0] > 0) & (prices[0] < np.finfo(float).tiny)))
    ref = best_schedule(inst, job, Market(*prices), backend="reference", granularity=g)
    jx = best_schedule(inst, job, Market(*prices), backend="jax", granularity=g)
    assert_same_plan(ref, jx)


def test_jax_refuses_costs_beyond_its_scaled_range():
    from oasis_opt.online import dual_jax
    from oasis_opt.workloads import paper_sim

    inst = paper_sim(0, jobs=2, horizon=40, worker_servers=2, ps_servers=2)  # job 1 fits
    shape = (inst.horizon + 1, inst.H, inst.R)
    wfree = np.broadcast_to(inst.worker_capacity, shape)
    pfree = np.broadcast_to(inst.ps_capacity, (inst.horizon + 1, inst.K, inst.R))
    with pytest.raises(ValueError, match="2\\^900"):
        best_schedule(inst, 1, Market(np.full(shape, 2.0 ** 950), np.zeros(pfree.shape), wfree,
                                      pfree), backend="jax")
    # the numpy backend takes the same prices
    assert best_schedule(inst, 1, Market(np.full(shape, 2.0 ** 950), np.zeros(pfree.shape),
                                         wfree, pfree)).payoff < 0
    assert dual_jax.MAX_COST * dual_jax.SCALE < 2.0 ** 1000


@settings(max_examples=40)
@given(dual_cases())
def test_worker_slot_payoff_at_least_chunk_payoff(case):
    """A literal-Alg.-2 (chunk) schedule is also a worker-slot schedule: the worker-slot DP,
    optimal over the larger set, never does worse."""
    inst, job, prices, _ = case
    ws = best_schedule(inst, job, Market(*prices), granularity="worker-slot")
    ch = best_schedule(inst, job, Market(*prices), granularity="chunk")
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
    ref = best_schedule(inst, job, Market(*prices), backend="reference", granularity=g)
    brute = brute_force_payoff(inst, job, prices, g)
    if brute == -math.inf:
        assert ref.completion is None
    else:
        assert ref.payoff == pytest.approx(brute, rel=1e-9, abs=1e-9)


# ---- edges and errors ---------------------------------------------------------------------------
# ---- accelerator types: the backends agree, and match a brute force -----------------------------
@settings(max_examples=100, deadline=None)
@given(dual_cases(typed=True))
def test_typed_backends_return_the_same_plan(case):
    from oasis_opt.online import dual_numpy

    inst, job, prices, g = case
    ref = best_schedule(inst, job, Market(*prices), backend="reference")
    check_plan(inst, ref, prices)
    fast = best_schedule(inst, job, Market(*prices), backend="numpy")
    assert_same_plan(ref, fast)
    saved, dual_numpy.LOOP_ABOVE = dual_numpy.LOOP_ABOVE, 0
    try:
        assert_same_plan(ref, best_schedule(inst, job, Market(*prices), backend="numpy"))
    finally:
        dual_numpy.LOOP_ABOVE = saved


@settings(max_examples=30, deadline=None)
@given(dual_cases(typed=True))
def test_typed_jax_matches_reference(case):
    inst, job, prices, _ = case
    assert_same_plan(best_schedule(inst, job, Market(*prices), backend="reference"),
                     best_schedule(inst, job, Market(*prices), backend="jax"))


def _typed_slot_options(inst, job, t, prices) -> dict[int, float]:
    """Exact per-slot optimum with types by enumerating every placement: units P -> min cost of
    workers doing P units (each on a type it can use, one type unless spanning, at most N_i) and
    any PS count allowed by (6) and (7), within the free capacity."""
    wprice, pprice, wfree, pfree = prices
    N = int(inst.chunks[job])
    s, b, B = inst.ps_demand[job], inst.worker_bw[job], inst.ps_bw[job]
    speed = inst.server_speed(job)
    best = {0: 0.0}
    for y in itertools.product(range(N + 1), repeat=inst.H):
        k = sum(y)
        used = [h for h, n in enumerate(y) if n]
        if not 1 <= k <= N or any(speed[h] == 0 for h in used):
            continue
        if not inst.span_types[job] and len({int(inst.worker_type[h]) for h in used}) > 1:
            continue
        dem = [inst.container_demand(job, h, 0) for h in range(inst.H)]
        if any((n * dem[h] > wfree[t, h] + 1e-9).any() for h, n in enumerate(y)):
            continue
        units = sum(n * int(speed[h]) for h, n in enumerate(y))
        cw = sum(n * float(wprice[t, h] @ dem[h]) for h, n in enumerate(y))
        for z in itertools.product(range(k + 1), repeat=inst.K):
            m = sum(z)
            if m > k or m * B < k * b * (1 - 1e-12) or \
                    any((n * s > pfree[t, q] + 1e-9).any() for q, n in enumerate(z)):
                continue
            c = cw + sum(n * float(pprice[t, q] @ s) for q, n in enumerate(z))
            best[units] = min(best.get(units, math.inf), c)
    return best


def typed_brute_force_payoff(inst, job, prices) -> float:
    a, T, need = int(inst.arrival[job]), inst.horizon, int(inst.work[job])
    slots = list(range(a, T + 1))
    per_slot = [_typed_slot_options(inst, job, t, prices) for t in slots]
    best = -math.inf
    for choice in itertools.product(*[sorted(o.items()) for o in per_slot]):
        if sum(units for units, _ in choice) < need:
            continue
        used = [t for t, (units, _) in zip(slots, choice) if units]
        done = used[-1] if used else a
        best = max(best, inst.utility_of(job, done) - sum(c for _, c in choice))
    return best


@settings(max_examples=100, deadline=None)
@given(dual_cases(max_horizon=3, max_servers=2, max_work=8, typed=True))
def test_typed_reference_matches_brute_force(case):
    inst, job, prices, _ = case
    assume(int(inst.chunks[job]) <= 3 and inst.horizon - inst.arrival[job] < 3)
    ref = best_schedule(inst, job, Market(*prices), backend="reference")
    brute = typed_brute_force_payoff(inst, job, prices)
    if brute == -math.inf:
        assert ref.completion is None
    else:
        assert ref.payoff == pytest.approx(brute, rel=1e-9, abs=1e-9)


def _v100_k80(span: bool, T: int = 1, v100: int = 3, k80: int = 1, chunk_time: float = 1.5,
              gpus: float = 2.0) -> Instance:
    """A V100 server and a K80 server (``gpus`` GPUs each); one job of 2 chunks, unit 1."""
    from oasis_opt.model import DEFAULT_RESOURCES, JobType

    cap = {"gpu": gpus, "cpu": 8.0, "mem": 32.0, "storage": 100.0, "bw": 10.0}
    ws = (Server("v", cap, accelerator="v100"), Server("k", cap, accelerator="k80"))
    ps = (Server("p", {"cpu": 8.0, "mem": 32.0, "storage": 100.0, "bw": 20.0}),)
    job = Job("a", 1, 1, 2, chunk_time, {"gpu": 1.0, "cpu": 1.0, "bw": 1.0},
              {"cpu": 1.0, "bw": 5.0}, Utility.constant(10.0),
              types={"v100": JobType(v100), "k80": JobType(k80)}, span_types=span)
    return Instance(T, DEFAULT_RESOURCES, ws, ps, (job,))


def _prices(inst, gpu_price: dict[int, float]):
    wprice = np.zeros((inst.horizon + 1, inst.H, inst.R))
    for h, p in gpu_price.items():
        wprice[:, h, inst.resources.index("gpu")] = p
    return (wprice, np.zeros((inst.horizon + 1, inst.K, inst.R)),
            np.broadcast_to(inst.worker_capacity, wprice.shape).copy(),
            np.broadcast_to(inst.ps_capacity, (inst.horizon + 1, inst.K, inst.R)).copy())


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_slot_buys_the_cheapest_work_not_the_cheapest_workers(backend):
    # 3 units: one V100 worker (3 units at 2.5) beats three K80 workers (1 unit at 1.0 each, and
    # the job has only 2 chunks anyway): price per unit of progress 0.83 < 1
    inst = _v100_k80(span=False, v100=3, k80=1, chunk_time=1.5)
    assert inst.work[0] == 3
    plan = best_schedule(inst, 0, Market(*_prices(inst, {0: 2.5, 1: 1.0})), backend=backend)
    assert plan.rows[plan.rows[:, 3] == WORKER, 2:].tolist() == [[0, 0, 1]]
    assert plan.cost == pytest.approx(2.5)
    # 2 units, V100 speed 3, K80 speed 1: two K80 workers (2.0) beat one V100 worker (2.5)
    inst = _v100_k80(span=False, v100=3, k80=1, chunk_time=1.0)
    plan = best_schedule(inst, 0, Market(*_prices(inst, {0: 2.5, 1: 1.0})), backend=backend)
    assert plan.rows[plan.rows[:, 3] == WORKER, 2:].tolist() == [[1, 0, 2]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_spanning_job_mixes_types_in_a_slot(backend):
    # 4 units in one slot: one V100 (3) and one K80 (1) worker, only if the job spans types
    inst = _v100_k80(span=True, v100=3, k80=1, chunk_time=2.0, gpus=1.0)
    prices = _prices(inst, {0: 1.0, 1: 1.0})
    plan = best_schedule(inst, 0, Market(*prices), backend=backend)
    check_plan(inst, plan, prices)
    assert plan.completion == 1 and plan.cost == pytest.approx(2.0)
    assert plan.rows[plan.rows[:, 3] == WORKER, 2:].tolist() == [[0, 0, 1], [1, 0, 1]]
    assert plan.payoff == pytest.approx(typed_brute_force_payoff(inst, 0, prices))
    alone = _v100_k80(span=False, v100=3, k80=1, chunk_time=2.0, gpus=1.0)
    assert best_schedule(alone, 0, Market(*_prices(alone, {0: 1.0, 1: 1.0})),
                         backend=backend).completion is None


def test_typed_arguments_are_checked():
    inst = _v100_k80(span=False)
    job = DualJob.from_instance(inst, 0)
    market = Market(*_prices(inst, {0: 1.0}))
    with pytest.raises(ValueError, match="^granularity: 'chunk' takes no accelerator types"):
        best_schedule_arrays(job, market, granularity="chunk")
    with pytest.raises(ValueError, match="^type_speed: expected"):
        best_schedule_arrays(replace(job, type_speed=[0, 0]), market)
    with pytest.raises(ValueError, match="^server_type: expected shape"):
        best_schedule_arrays(replace(job, server_type=[0, 5]), market)
    with pytest.raises(ValueError, match="^type_demand: needed"):
        best_schedule_arrays(replace(job, type_demand=None), market)


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
    plan = best_schedule(inst, 0, Market(wp, pp, wf, pf), backend=backend)
    assert plan.completion is None and plan.payoff == -math.inf and len(plan.rows) == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_cheapest_servers_first_ties_by_index(backend):
    inst = _one_job_instance(chunks=3, epochs=1)  # 3 worker-slots, up to 3 workers
    wp, pp, wf, pf = _empty_prices(inst)
    wf[:, 0] = np.array([1.0, 2.0, 2.0])  # w0 holds one worker, w1 four; equal prices
    plan = best_schedule(inst, 0, Market(wp, pp, wf, pf), backend=backend)
    assert plan.completion == 1  # all three in the arrival slot
    assert plan.rows[plan.rows[:, 3] == WORKER][:, [2, 4]].tolist() == [[0, 1], [1, 2]]
    wp[1, 1] = 0.01  # w1 now cheaper: it takes all three
    plan = best_schedule(inst, 0, Market(wp, pp, wf, pf), backend=backend)
    assert plan.rows[plan.rows[:, 3] == WORKER][:, [2, 4]].tolist() == [[1, 3]]


def test_bad_arguments_are_rejected():
    inst = _one_job_instance()
    wp, pp, wf, pf = _empty_prices(inst)
    with pytest.raises(ValueError, match="backend"):
        best_schedule(inst, 0, Market(wp, pp, wf, pf), backend="torch")
    with pytest.raises(ValueError, match="granularity"):
        best_schedule(inst, 0, Market(wp, pp, wf, pf), granularity="epoch")
    with pytest.raises(ValueError, match="worker_free"):
        best_schedule(inst, 0, Market(wp, pp, wf[:-1], pf))
    wp[2, 0, 0] = -1.0
    with pytest.raises(ValueError, match="worker_price"):
        best_schedule(inst, 0, Market(wp, pp, wf, pf))


def test_job_without_work_completes_on_arrival():
    # chunk_time must be > 0, but E N x below the float slack rounds to no whole worker-slot
    inst = _one_job_instance(chunk_time=1e-12, arrival=2)
    assert inst.work[0] == 0
    plan = best_schedule(inst, 0, Market(*_empty_prices(inst)))
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
                plans.append(best_schedule(inst, job, Market(*prices), granularity=granularity))
            a, b = plans
            assert (a.completion, a.cost) == (b.completion, b.cost)
            assert np.array_equal(a.rows, b.rows)
            check_plan(inst, a, prices)
    finally:
        dual_numpy.LOOP_ABOVE = saved


# ---- the tie rule (``dual`` module docstring) ----------------------------------------------------
def _idle_cluster(chunk_time=7 / 6):
    """Three identical worker servers (2 workers each), two identical PS servers (4 PSs each),
    one job: N = 3, W = 7 worker-slots, b = B (one PS per worker), constant utility. At equal
    prices every split of the work completing in the same slot costs the same: all ties."""
    ws = tuple(Server(f"w{h}", {"cpu": 4, "mem": 16, "bw": 10}) for h in range(3))
    ps = tuple(Server(f"p{k}", {"cpu": 4, "mem": 16, "bw": 20}) for k in range(2))
    job = Job("j", 1, 2, 3, chunk_time, {"cpu": 2, "mem": 2, "bw": 5},
              {"cpu": 1, "mem": 2, "bw": 5}, Utility.constant(10.0))
    return Instance(6, ("cpu", "mem", "bw"), ws, ps, (job,))


# slots 1, 2, 3 (earliest completion); from the last slot back, the fewest workers (work in the
# earliest slots); servers by lowest index: w0 takes 2, w1 one; p0 (global 3) every PS
IDLE_PLAN = [[0, 1, 0, 0, 2], [0, 1, 1, 0, 1], [0, 1, 3, 1, 3],
             [0, 2, 0, 0, 2], [0, 2, 1, 0, 1], [0, 2, 3, 1, 3],
             [0, 3, 0, 0, 1], [0, 3, 3, 1, 1]]


@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_idle_cluster_every_backend_returns_the_rules_plan(granularity):
    inst = _idle_cluster()
    assert int(inst.work[0]) == 7
    prices = _empty_prices(inst)
    plans = [best_schedule(inst, 0, Market(*prices), backend=b, granularity=granularity)
             for b in BACKENDS]
    for plan in plans[1:]:
        assert_same_plan(plans[0], plan)
    check_plan(inst, plans[0], prices)
    if granularity == "worker-slot":
        assert plans[0].rows.tolist() == IDLE_PLAN
    else:  # 2 chunks need 3 workers (x = 7/6): 6 chunks in 3 slots, 3 workers each
        assert plans[0].completion == 3 and plans[0].workers[1:4].tolist() == [3, 3, 3]


@pytest.mark.parametrize("backend", BACKENDS)
def test_costs_within_the_relative_tolerance_are_ties(backend):
    """Slot 1 dearer by 1e-14 (relative, below COST_RTOL = PAYOFF_RTOL = 1e-12): still ties,
    the plan of the idle cluster. Dearer by 1e-9: a real difference, slot 1 is avoided and the
    job completes one slot later (same utility, lower cost)."""
    inst = _idle_cluster()
    wp, pp, wf, pf = _empty_prices(inst)
    for factor, workers in ((1 + 1e-14, [3, 3, 1, 0]), (1 + 1e-9, [0, 3, 3, 1])):
        w = wp.copy()
        w[1] *= factor
        plan = best_schedule(inst, 0, Market(w, pp, wf, pf), backend=backend)
        assert plan.workers[1:5].tolist() == workers, factor


def test_earliest_completion_among_equal_payoffs():
    """Constant utility and equal prices: completing in slot 3, 4, 5 or 6 pays the same; slot
    3 (the earliest possible) is chosen, by every backend."""
    inst = _idle_cluster()
    for b in BACKENDS:
        assert best_schedule(inst, 0, Market(*_empty_prices(inst)), backend=b).completion == 3


# ---- the array-level entry point ---------------------------------------------------------------
def _job_arrays(inst, job):
    """One job's parameters as plain arrays and scalars, as a caller without an Instance has."""
    j = inst.jobs[job]
    return DualJob(arrival=j.arrival, chunks=j.chunks, work=int(inst.work[job]),
                   worker_demand=[j.worker.get(r, 0.0) for r in inst.resources],
                   ps_demand=[j.ps.get(r, 0.0) for r in inst.resources],
                   utility=[j.utility(t - j.arrival) if t >= j.arrival else 0.0
                            for t in range(inst.horizon + 1)],
                   worker_bw=float(inst.worker_bw[job]), ps_bw=float(inst.ps_bw[job]),
                   epochs=j.epochs, chunk_time=j.chunk_time, job=job)


@settings(max_examples=60)
@given(dual_cases())
def test_array_entry_point_equals_best_schedule(case):
    inst, job, prices, g = case
    market = Market(*prices)
    via_instance = best_schedule(inst, job, market, granularity=g)
    via_arrays = best_schedule_arrays(_job_arrays(inst, job), market, granularity=g)
    assert_same_plan(via_instance, via_arrays)
    # the PS rule given as a table instead of b_i / B_i: the same plan
    spec = _job_arrays(inst, job)
    spec = replace(spec, worker_bw=None, ps_bw=None,
                   ps_need=inst.ps_needed(job, np.arange(spec.chunks + 1)))
    table = best_schedule_arrays(spec, market, granularity=g, backend="reference")
    assert_same_plan(via_instance, table)


def test_array_entry_point_on_the_idle_cluster():
    inst = _idle_cluster()
    plan = best_schedule_arrays(_job_arrays(inst, 0), Market(*_empty_prices(inst)))
    assert plan.rows.tolist() == IDLE_PLAN
    assert plan.payoff == pytest.approx(10.0 - 7 * 0.9 - 7 * 0.8)  # unit prices 0.1 x 9, 0.1 x 8


def _call_with(**change):
    """``best_schedule_arrays`` on the idle cluster with the named fields of the market, of the
    job or the granularity changed."""
    inst = _idle_cluster()
    market = dict(zip(("worker_price", "ps_price", "worker_free", "ps_free"),
                      _empty_prices(inst)))
    granularity = change.pop("granularity", "worker-slot")
    market.update({k: change.pop(k) for k in list(change) if k in market})
    return best_schedule_arrays(replace(_job_arrays(inst, 0), **change), Market(**market),
                                granularity=granularity)


BAD_ARGUMENTS = {
    "worker_price": dict(worker_price=np.zeros((7, 3))),
    "ps_price": dict(ps_price=np.zeros((7, 2, 4))),
    "worker_free": dict(worker_free=np.zeros((6, 3, 3))),
    "ps_free": dict(ps_free=np.zeros((7, 5, 3))),
    "arrival": dict(arrival=7),
    "chunks": dict(chunks=0),
    "work": dict(work=-1),
    "worker_demand": dict(worker_demand=[1.0, 2.0]),
    "ps_demand": dict(ps_demand=[1.0, -2.0, 0.0]),
    "utility": dict(utility=np.zeros(6)),
    "utility ": dict(utility=np.arange(7.0)),  # increasing: f must be non-increasing
    "ps_need": dict(ps_need=[0, 1, 2], worker_bw=None, ps_bw=None),
    "ps_bw": dict(ps_bw=0.0),
    "epochs": dict(epochs=None, granularity="chunk"),
    "chunk_time": dict(chunk_time=0.0, granularity="chunk"),
    "job": dict(job=-1),
}


@pytest.mark.parametrize("name", sorted(BAD_ARGUMENTS))
def test_array_entry_point_names_a_bad_argument(name):
    with pytest.raises(ValueError, match=f"^{name.strip()}: "):
        _call_with(**BAD_ARGUMENTS[name])


# ---- pieces of the fast path held to their plain twins ---------------------------------------------
@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6), st.integers(1, 7), st.integers(0, 2**32 - 1))
def test_greedy_fill_is_place_slot_row_by_row(S, H, seed):
    """``greedy_fill`` (all slots at once, a masked argmin for one container) places what
    ``place_slot`` (Theorem 1's greedy, one slot) places: cheapest first, ties by lowest index;
    counts beyond the slots' fit raise."""
    from oasis_opt.online._dp import greedy_fill, place_slot

    rng = np.random.default_rng(seed)
    u = rng.choice([0.5, 1.0, 2.0], (S, H))  # few values: ties abound
    fit = rng.integers(0, 3, (S, H))
    fit[:, 0] = np.maximum(fit[:, 0], 1)  # at least one container fits in every slot
    for counts in (np.ones(S, dtype=np.int64), np.minimum(rng.integers(1, 5, S), fit.sum(axis=1)),
                   rng.integers(0, 2, S)):  # zero counts: a PS count of 0 (``ps_need``)
        row, server, n = greedy_fill(u, fit, counts)
        got = [[(int(h), int(c)) for r, h, c in zip(row, server, n) if r == s] for s in range(S)]
        want = [place_slot(u[s], fit[s], int(counts[s])) for s in range(S)]
        assert [sorted(g) for g in got] == [sorted(w) for w in want]
    with pytest.raises(RuntimeError, match="cannot place"):
        greedy_fill(u, fit, fit.sum(axis=1) + 1)


def test_completion_scan_stops_when_no_later_slot_can_win():
    """A constant utility on an idle cluster (every price at the floor): the plan completing in
    the arrival slot costs the lower bound, so no later slot can beat it and the numpy scan stops
    at once (it used to run to T), with the plan the unpruned reference finds."""
    from oasis_opt.online._dp import CompletionScan, cost_lower_bound, job_spec

    servers = tuple(Server(f"s{h}", {"cpu": 16.0, "bw": 10.0}) for h in range(3))
    job = Job("j", 2, 1, 2, 1.0, {"cpu": 2.0, "bw": 1.0}, {"cpu": 1.0, "bw": 2.0},
              Utility.constant(5.0))
    ps = tuple(Server(f"p{k}", {"cpu": 16.0, "bw": 10.0}) for k in range(2))
    inst = Instance(50, ("cpu", "bw"), servers, ps, (job,))
    T, H, K, R = inst.horizon, inst.H, inst.K, inst.R
    prices = (np.full((T + 1, H, R), 0.01), np.full((T + 1, K, R), 0.02),
              np.broadcast_to(inst.worker_capacity, (T + 1, H, R)).copy(),
              np.broadcast_to(inst.ps_capacity, (T + 1, K, R)).copy())
    plan = best_schedule(inst, 0, Market(*prices))
    assert_same_plan(plan, best_schedule(inst, 0, Market(*prices), backend="reference"))
    assert plan.completion == 2  # the arrival slot: 2 workers do W = 2 worker-slots there
    spec = job_spec(DualJob.from_instance(inst, 0), T)
    scan = CompletionScan(spec, cost_lower_bound(spec, np.full(R, 0.01), np.full(R, 0.02)))
    assert scan.update(2, plan.cost)  # stop: nothing later can pay more
    assert scan.stop == 2 and scan.best == plan.payoff
