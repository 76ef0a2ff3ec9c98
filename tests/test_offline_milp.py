"""The exact offline optimum of (1): MILP arrays vs Pyomo vs brute force, HiGHS vs CP-SAT, on
clusters without and with accelerator types.

The brute force below is written independently of the MILP: per job, enumerate every minimal
plan (a completion slot t_hat and, in each slot a_i..t_hat, integer workers per accelerator type
the job can use, at most N_i in all, on one type unless the job may span types, with workers in
t_hat, reaching the job's work units, and no worker removable without losing one of these: any
feasible plan contains one of these slot-wise with the same completion slot, and fewer workers
never make a slot less feasible, since they need no more PSs, ceil(k b / B)); then search over
one option per job (or rejection), checking each slot by trying every placement of the workers
on the worker servers of their type and of the fewest PSs on the PS servers. Without types there
is one type of speed 1, and a minimal plan has exactly work_i workers.
"""
from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_opt.model import DEFAULT_RESOURCES, Instance, Job, Server, Utility, validate
from oasis_opt.offline.exact import OfflinePolicy, lp_bound
from oasis_opt.offline.milp_arrays import build_milp, ps_ratio
from oasis_opt.offline.milp_pyomo import solve_pyomo
from oasis_opt.policies import get_policy, solve
from oasis_opt.testing import hetero_instances, instances


# ---- brute force ------------------------------------------------------------------------------
def _compositions(total: int, parts: int, cap: int):
    """Tuples of ``parts`` integers in 0..cap summing to ``total``."""
    if parts == 0:
        if total == 0:
            yield ()
        return
    for first in range(min(cap, total) + 1):
        for rest in _compositions(total - first, parts - 1, cap):
            yield (first,) + rest


def _slot_choices(inst, i: int) -> list[tuple[int, ...]]:
    """Workers per type (all G types, 0 on those the job cannot use) one slot may hold."""
    G, N = len(inst.types), int(inst.chunks[i])
    usable = [g for g in range(G) if inst.type_speed[i, g] > 0]
    out = []
    for total in range(N + 1):
        for split in _compositions(total, len(usable), total):
            if not inst.span_types[i] and sum(1 for k in split if k) > 1:
                continue
            counts = [0] * G
            for g, k in zip(usable, split):
                counts[g] = k
            out.append(tuple(counts))
    return out


def job_options(inst, i: int) -> list[tuple[float, dict[int, tuple[int, ...]]]]:
    """(utility, {slot: workers per type}) for every minimal plan of job i, best utility first."""
    a, T, work = int(inst.arrival[i]), inst.horizon, int(inst.work[i])
    speed = [int(s) for s in inst.type_speed[i]]
    choices = _slot_choices(inst, i)
    units = {c: sum(k * s for k, s in zip(c, speed)) for c in choices}
    out = []

    def minimal(plan: list[tuple[int, ...]], done: int) -> bool:
        last = len(plan) - 1
        for n, c in enumerate(plan):
            for g, k in enumerate(c):
                if k and done - speed[g] >= work and not (n == last and sum(c) == 1):
                    return False
        return True

    def extend(plan: list[tuple[int, ...]], done: int, t_hat: int) -> None:
        if len(plan) == t_hat - a + 1:
            if done >= work and sum(plan[-1]) and minimal(plan, done):
                out.append((float(inst.utility_table[i, t_hat]),
                            {a + n: c for n, c in enumerate(plan) if sum(c)}))
            return
        for c in choices:
            if done < work or not units[c]:  # once the work is done, only empty slots follow
                extend(plan + [c], done + units[c], t_hat)

    for t_hat in range(a, T + 1):
        extend([], 0, t_hat)
    return sorted(out, key=lambda o: -o[0])


def _fits(demands: list[tuple[np.ndarray, int]], capacity: np.ndarray) -> bool:
    """Can containers (demand vector, count) be placed on servers with ``capacity`` (S, R)?"""
    S = capacity.shape[0]

    def place(n: int, free: np.ndarray) -> bool:
        if n == len(demands):
            return True
        d, count = demands[n]
        for split in _compositions(count, S, count):
            use = np.outer(split, d)
            if np.all(use <= free + 1e-9):
                if place(n + 1, free - use):
                    return True
        return False

    return place(0, capacity.astype(float))


def brute_force(inst) -> float:
    """The optimal total utility of ``inst`` by exhaustive search (tiny instances only)."""
    b, B = inst.worker_bw, inst.ps_bw
    G = len(inst.types)

    @lru_cache(maxsize=None)
    def slot_ok(load: tuple[tuple[int, tuple[int, ...]], ...]) -> bool:
        workers: list[list] = [[] for _ in range(G)]
        pss = []
        for i, counts in load:
            k = sum(counts)
            z = max(1, math.ceil(k * b[i] / B[i] - 1e-9))
            if z > k:
                return False
            for g, kg in enumerate(counts):
                if kg:
                    workers[g].append((inst.type_demand[i, g], kg))
            pss.append((inst.ps_demand[i], z))
        return (all(_fits(workers[g], inst.worker_capacity[inst.worker_type == g])
                    for g in range(G)) and _fits(pss, inst.ps_capacity))

    options = [job_options(inst, i) for i in range(inst.I)]
    best_left = [0.0] * (inst.I + 1)  # optimistic utility of jobs i.. (for pruning)
    for i in reversed(range(inst.I)):
        best_left[i] = best_left[i + 1] + (options[i][0][0] if options[i] else 0.0)
    best = 0.0
    load: dict[int, list[tuple[int, tuple[int, ...]]]] = {}

    def search(i: int, value: float) -> None:
        nonlocal best
        if value + best_left[i] <= best + 1e-12:
            return
        if i == inst.I:
            best = value
            return
        for util, plan in options[i]:
            if value + util + best_left[i + 1] <= best + 1e-12:
                break  # options are sorted by utility
            ok = True
            for t, k in plan.items():
                if not slot_ok(tuple(sorted(load.get(t, []) + [(i, k)]))):
                    ok = False
                    break
            if ok:
                for t, k in plan.items():
                    load.setdefault(t, []).append((i, k))
                search(i + 1, value + util)
                for t in plan:
                    load[t].pop()
        search(i + 1, value)  # reject job i

    search(0, 0.0)
    return best


# ---- properties -------------------------------------------------------------------------------
@st.composite
def contended(draw, max_jobs: int = 3):
    """Tiny instances whose jobs arrive in the first half of the horizon, so that most can
    finish and several compete for the servers (the shared strategy draws late arrivals)."""
    inst = draw(instances(max_jobs=max_jobs, max_horizon=4, max_servers=2, max_work=6))
    late = max(1, (inst.horizon + 1) // 2)
    return inst.with_jobs([replace(j, arrival=draw(st.integers(1, late))) for j in inst.jobs])


tiny = contended().filter(lambda i: i.I >= 1)


@st.composite
def contended_typed(draw, max_jobs: int = 3):
    """``contended`` with accelerator types: two worker servers at most (one or two types),
    work of at most 8 units, so that the brute force stays small."""
    inst = draw(hetero_instances(max_jobs=max_jobs, max_horizon=3, max_servers=2, max_work=8))
    late = max(1, (inst.horizon + 1) // 2)
    return inst.with_jobs([replace(j, arrival=draw(st.integers(1, late))) for j in inst.jobs])


tiny_typed = contended_typed().filter(lambda i: i.I >= 1)


@settings(max_examples=150)
@given(tiny)
def test_highs_optimum_equals_brute_force_and_cpsat(inst):
    exact_equals_brute_force(inst)


@settings(max_examples=80, deadline=None)
@given(tiny_typed)
def test_typed_optimum_equals_brute_force_and_cpsat(inst):
    exact_equals_brute_force(inst)
    assert lp_bound(inst) >= brute_force(inst) - 1e-6


def exact_equals_brute_force(inst):
    truth = brute_force(inst)
    h = OfflinePolicy().solve(inst)
    c = get_policy("offline-cpsat").solve(inst)
    for s in (h, c):
        assert validate(inst, s).ok, validate(inst, s)
        assert s.stats["status"] == "optimal"
        # proven: the bound meets the schedule's utility (CP-SAT: up to its scaling error)
        err = s.stats.get("objective_error", 0.0)
        assert s.stats["bound"] - s.total_utility <= 1e-6 * max(1.0, truth) + err + 1e-9
    assert h.total_utility == pytest.approx(truth, rel=1e-6, abs=1e-6)
    # CP-SAT's objective is scaled to integers: the stated error bound covers the difference,
    # beside the relative gap (1e-6) at which it stops
    assert abs(c.total_utility - truth) <= c.stats["objective_error"] + 1e-6 * max(1.0, truth)
    assert c.stats["objective_error"] < 1e-4
    assert h.stats["bound"] >= truth - 1e-6 and h.stats["objective"] == pytest.approx(
        h.total_utility)


@settings(max_examples=50)
@given(tiny)
def test_pyomo_reference_model_agrees_with_the_array_model(inst):
    pyomo_agrees(inst)


@settings(max_examples=30, deadline=None)
@given(tiny_typed)
def test_typed_pyomo_reference_model_agrees_with_the_array_model(inst):
    pyomo_agrees(inst)


def pyomo_agrees(inst):
    ref = solve_pyomo(inst)
    arrays = OfflinePolicy().solve(inst)
    assert ref["objective"] == pytest.approx(arrays.total_utility, rel=1e-6, abs=1e-6)
    relaxed = solve_pyomo(inst, relax=True)
    # the array model is tighter (big-M k_i <= N_i, k_ig for the type binaries, reduced index
    # sets): its LP is no weaker
    assert lp_bound(inst) <= relaxed["objective"] + 1e-6
    assert lp_bound(inst) >= arrays.total_utility - 1e-6


@settings(max_examples=200)
@given(b=st.floats(0.1, 5.0), B=st.floats(5.0, 20.0), kmax=st.integers(1, 60))
def test_ps_ratio_reproduces_the_ps_counts_of_constraint_6(b, B, kmax):
    job = Job("j", 1, 1, kmax, 1.0, {"bw": b}, {"bw": B}, Utility.constant(1.0))
    inst = Instance(2, DEFAULT_RESOURCES, (Server("w", {"bw": 100.0}),),
                    (Server("p", {"bw": 100.0}),), (job,))
    p, q = ps_ratio(inst, 0, kmax)
    k = np.arange(1, kmax + 1)
    np.testing.assert_array_equal(np.ceil(k * p / q - 1e-12), inst.ps_needed(0, k))


# ---- edge cases -------------------------------------------------------------------------------
def _cluster(jobs, T=3):
    ws = (Server("w0", {"gpu": 2, "cpu": 8, "mem": 32, "storage": 100, "bw": 10}),)
    ps = (Server("p0", {"cpu": 8, "mem": 32, "storage": 100, "bw": 20}),)
    return Instance(T, DEFAULT_RESOURCES, ws, ps, tuple(jobs))


def _job(name, arrival=1, chunks=2, epochs=1, chunk_time=1.0, gpu=1.0, value=10.0):
    return Job(name, arrival, epochs, chunks, chunk_time,
               {"gpu": gpu, "cpu": 1, "mem": 1, "storage": 1, "bw": 1},
               {"cpu": 1, "mem": 1, "storage": 1, "bw": 5}, Utility.constant(value))


@pytest.mark.parametrize("policy", ["offline", "offline-cpsat"])
def test_empty_job_list_gives_an_empty_valid_schedule(policy):
    inst = _cluster([])
    s = solve(inst, policy)
    assert validate(inst, s).ok and s.total_utility == 0.0 and len(s.allocations) == 0
    assert s.stats["status"] == "optimal" and s.stats["proven_optimal"]


@pytest.mark.parametrize("policy", ["offline", "offline-cpsat"])
def test_jobs_that_cannot_run_are_excluded_with_a_reason(policy):
    jobs = [_job("too-big", gpu=4.0),  # no worker server has 4 GPUs
            _job("too-late", arrival=3, chunks=1, epochs=3),  # needs 3 slots from slot 3 of 3
            _job("fine", value=7.0)]
    inst = _cluster(jobs)
    s = solve(inst, policy)
    assert validate(inst, s).ok
    assert s.total_utility == pytest.approx(7.0)
    assert s.admitted == (False, False, True)
    assert "4" not in s.stats["excluded"].get("fine", "")
    assert set(s.stats["excluded"]) == {"too-big", "too-late"}
    assert "room" in s.stats["excluded"]["too-big"]
    assert "horizon" in s.stats["excluded"]["too-late"]


def test_highs_handing_back_the_start_as_its_solution_is_caught():
    # HiGHS 1.16, given the empty start, solves this MILP in presolve and reports objective 2.0
    # with the start's column values; the solver layer notices and solves again without it
    cap = {"cpu": 4.0, "mem": 16.0, "storage": 100.0, "bw": 10.0}
    jobs = (Job("j0", 1, 1, 1, 1.5, {"cpu": 1.0, "storage": 5.0, "bw": 1.0},
                {"cpu": 1.0, "mem": 1.0, "storage": 5.0, "bw": 5.0},
                Utility.sigmoid(1.0, 0.0, 1.0)),
            Job("j1", 1, 2, 2, 1.0, {"cpu": 2.0, "storage": 5.0, "bw": 1.0},
                {"cpu": 1.0, "mem": 2.0, "storage": 5.0, "bw": 10.0},
                Utility.sigmoid(4.0, 0.0, 6.0)))
    inst = Instance(2, DEFAULT_RESOURCES, (Server("w0", cap),), (Server("p0", cap),), jobs)
    s = OfflinePolicy().solve(inst)
    assert validate(inst, s).ok and s.stats["status"] == "optimal"
    assert s.total_utility == pytest.approx(brute_force(inst)) == pytest.approx(2.0)
    assert s.stats["bound"] == pytest.approx(2.0)


def test_capacity_forces_a_choice_between_jobs():
    # one server with 2 GPUs, two jobs of 2 GPU-workers each needing 3 worker-slots by slot 3
    jobs = [_job("a", chunks=1, epochs=3, gpu=2.0, value=5.0),
            _job("b", chunks=1, epochs=3, gpu=2.0, value=9.0)]
    inst = _cluster(jobs)
    s = OfflinePolicy().solve(inst)
    assert validate(inst, s).ok and s.admitted == (False, True)
    assert s.total_utility == pytest.approx(brute_force(inst)) == pytest.approx(9.0)


def _fig5():
    from oasis_opt.workloads import paper_fig5

    return paper_fig5(0, servers=3, priority=(50.0, 100.0))  # seconds to prove optimal


FIG5_OPT = 240.5698146205584  # HiGHS and CP-SAT, proven optimal (test_offline_fig5 solves it)

# limits that stop each back end before it found anything or proved any bound
NOTHING_YET = {"offline": {"node_limit": 0}, "offline-cpsat": {"deterministic_time": 1e-9}}


@pytest.mark.parametrize("policy", ["offline", "offline-cpsat"])
def test_a_limit_before_any_solution_gives_the_empty_schedule_and_no_bound(policy):
    inst = _fig5()
    s = solve(inst, policy, **NOTHING_YET[policy])
    assert validate(inst, s).ok and s.total_utility == 0.0 and not any(s.admitted)
    st = s.stats
    assert st["status"] == ("node_limit" if policy == "offline" else "deterministic_time_limit")
    assert not st["proven_optimal"] and not st["incumbent"]
    assert st["bound"] is None and st["gap"] is None and st["objective"] is None
    assert "no incumbent" in st["message"] and "best incumbent" not in st["message"]


@pytest.mark.parametrize("policy,limits", [("offline", {"solution_limit": 1}),
                                           ("offline", {"node_limit": 2}),
                                           ("offline-cpsat", {"deterministic_time": 0.1})])
def test_a_limit_after_some_search_gives_an_incumbent_and_a_proven_bound(policy, limits):
    inst = _fig5()
    s = solve(inst, policy, **limits)
    st = s.stats
    assert validate(inst, s).ok and st["incumbent"]
    assert st["status"] == f"{next(iter(limits)).removesuffix('_limit')}_limit"
    assert st["objective"] == pytest.approx(s.total_utility) and s.total_utility > 0
    assert s.total_utility <= FIG5_OPT + 1e-6 <= st["bound"] + 2e-6
    assert st["gap"] == pytest.approx((st["bound"] - s.total_utility) / s.total_utility)
    assert "NOT proven optimal" in st["message"]
    again = solve(inst, policy, **limits)  # a deterministic limit: the same run
    assert again.total_utility == s.total_utility and again.stats["bound"] == st["bound"]


@settings(max_examples=40, deadline=None)
@given(inst=tiny, case=st.sampled_from([("offline", {"node_limit": k}) for k in (0, 1, 3)]
                                       + [("offline", {"solution_limit": 1})]
                                       + [("offline-cpsat", {"deterministic_time": d})
                                          for d in (1e-9, 1e-4, 1e-2)]))
def test_bounds_under_deterministic_limits_bound_the_optimum(inst, case):
    policy, limits = case
    opt = OfflinePolicy().solve(inst).total_utility  # proven (held against brute force above)
    s = solve(inst, policy, **limits)
    assert validate(inst, s).ok and s.total_utility <= opt + 1e-6
    if s.stats["bound"] is not None:
        assert s.stats["bound"] >= opt - 1e-6 - s.stats.get("objective_error", 0.0)


@pytest.mark.parametrize("backend,limits", [("highs", {"solution_limit": 1}),
                                            ("cpsat", {"deterministic_time": 0.05})])
def test_a_solve_in_a_child_process_is_the_same_solve(backend, limits):
    # under a time limit big MILPs go to a killable child process; the result is the same
    inst = _fig5()
    here = OfflinePolicy(backend=backend, isolate=False, **limits).solve(inst, time_limit=600)
    child = OfflinePolicy(backend=backend, isolate=True, **limits).solve(inst, time_limit=600)
    assert validate(inst, child).ok and child.total_utility == here.total_utility > 0
    for key in ("status", "incumbent", "objective", "bound", "gap"):
        assert child.stats[key] == here.stats[key], key
    with pytest.raises(ValueError, match="isolate: expected"):
        OfflinePolicy(isolate="yes")


class _EndlessBuild(OfflinePolicy):
    """A policy whose build never ends, like a matrix assembly far past the limit."""

    def _build_and_solve(self, instance, size, deadline, time_limit):
        import time
        time.sleep(3600)


def test_a_build_past_the_time_limit_is_killed_with_its_child_process():
    # under a limit the build runs in the child too, so even a step that never checks the
    # clock is stopped: the result is the empty starting schedule, no incumbent, no bound
    inst = _fig5()
    s = _EndlessBuild(isolate=True).solve(inst, time_limit=0.5)
    st = s.stats
    assert validate(inst, s).ok and s.total_utility == 0.0
    assert st["status"] == "time_limit" and not st["incumbent"] and st["bound"] is None
    assert "killed" in st["message"] and st["time_limit"] == 0.5


def test_the_time_limit_counts_building_the_model():
    # a limit shorter than any build: the solver is never started
    inst = _fig5()
    s = OfflinePolicy().solve(inst, time_limit=1e-9)
    st = s.stats
    assert validate(inst, s).ok and s.total_utility == 0.0
    assert st["status"] == "time_limit" and not st["incumbent"] and st["objective"] is None
    assert st["bound"] is None and "while building the MILP" in st["message"]


@pytest.mark.parametrize("deadline, stops", [(15.0, True), (25.0, False)])
def test_the_matrix_is_not_assembled_with_less_time_left_than_the_build_took(
        monkeypatch, deadline, stops):
    # a clock that reads 0 when the build starts and 10 ever after: 10 s of building, then
    # 5 s (stop) or 15 s (go on) left for the one step that cannot be interrupted
    import types

    import oasis_opt.offline.milp_arrays as milp_arrays

    reads = iter([0.0])
    monkeypatch.setattr(milp_arrays, "time",
                        types.SimpleNamespace(perf_counter=lambda: next(reads, 10.0)))
    if stops:
        with pytest.raises(milp_arrays.DeadlineReached, match="assembling the MILP's matrix"):
            build_milp(_fig5(), deadline=deadline)
    else:
        assert build_milp(_fig5(), deadline=deadline).size()["columns"] == 227


def test_an_instance_above_the_memory_budget_is_refused_pointing_to_colgen():
    from oasis_opt.offline.exact import ModelTooLarge

    inst = _fig5()
    with pytest.raises(ModelTooLarge, match=r"memory_budget_gb: .*227 columns.*offline-colgen"):
        OfflinePolicy(memory_budget_gb=1e-3).solve(inst)
    from oasis_opt.sizing import physical_memory

    assert OfflinePolicy().memory_budget_gb == pytest.approx(0.5 * physical_memory() / 1e9)
    with pytest.raises(ValueError, match="memory_budget_gb: must be a number > 0"):
        OfflinePolicy(memory_budget_gb=0)
    with pytest.raises(ValueError, match="node_limit: a HiGHS limit"):
        get_policy("offline", backend="cpsat", node_limit=1)
    with pytest.raises(TypeError, match="time_limt"):  # run options are never swallowed
        OfflinePolicy().solve(inst, time_limt=5)


@settings(max_examples=60)
@given(st.one_of(instances(max_jobs=5, max_horizon=8, max_servers=3),
                 hetero_instances(max_jobs=5, max_horizon=6)))
def test_size_estimate_counts_the_columns_and_bounds_rows_and_nonzeros(inst):
    """Also with accelerator types (the v columns and their rows)."""
    from oasis_opt.offline.milp_arrays import milp_size

    built, counted = build_milp(inst).size(), milp_size(inst)
    assert counted["columns"] == built["columns"]
    assert counted["rows"] >= built["rows"] and counted["nonzeros"] >= built["nonzeros"]


def test_model_size_is_reduced_to_arrival_and_room():
    jobs = [_job("a", arrival=2), _job("too-big", gpu=4.0)]
    m = build_milp(_cluster(jobs, T=4))
    assert set(m.job.tolist()) == {0}
    assert m.slot[m.kind == 2].min() == 2  # workers only from arrival on
    assert m.slot[m.kind == 1].min() == 2  # completion no earlier than a + d_min - 1


def _typed_pair(span: bool) -> Instance:
    """A V100 and a K80 server; a job of 3 units, 2 a slot per V100 worker, 1 per K80 worker:
    one slot on both types if it may span them, else two slots."""
    from oasis_opt.model import JobType

    cap = {"gpu": 1.0, "cpu": 8.0, "mem": 32.0, "storage": 100.0, "bw": 10.0}
    ws = (Server("v", cap, accelerator="v100"), Server("k", cap, accelerator="k80"))
    ps = (Server("p", {"cpu": 8.0, "mem": 32.0, "storage": 100.0, "bw": 20.0}),)
    job = Job("a", 1, 1, 2, 1.5, {"gpu": 1.0, "cpu": 1.0, "bw": 1.0}, {"cpu": 1.0, "bw": 5.0},
              Utility.sigmoid(10.0, 2.0, 1.0),
              types={"v100": JobType(2), "k80": JobType(1)}, span_types=span)
    return Instance(3, DEFAULT_RESOURCES, ws, ps, (job,))


@pytest.mark.parametrize("policy", ["offline", "offline-cpsat"])
@pytest.mark.parametrize("span, completion", [(True, 1), (False, 2)])
def test_span_rule_decides_the_completion_slot(policy, span, completion):
    inst = _typed_pair(span)
    assert inst.work[0] == 3
    s = solve(inst, policy)
    assert validate(inst, s).ok and s.completion == (completion,)
    assert s.total_utility == pytest.approx(brute_force(inst))
    assert (build_milp(inst).kind == 4).any() != span  # v columns only without span_types


def test_the_milp_counts_container_fits_as_the_simulator_does():
    """``server_room`` is ``model.numerics.fit_count``: 2999.9999995 of a resource holds two
    containers of 1000, not three. The former floor(c / d + 1e-9) rounded 2.9999999995 up to 3,
    so the MILP could place a container the validator then finds over capacity."""
    from oasis_opt.model.numerics import fit_count
    from oasis_opt.offline.milp_arrays import server_room

    capacity = np.array([[2999.9999995, 8.0], [3000.0, 8.0], [0.3, 1.0]])
    demand = np.array([[1000.0, 0.0], [0.1 + 0.2, 1.0], [0.0, 0.0]])
    room = server_room(capacity, demand)
    assert room.tolist() == [[2, 3, 0], [8, 8, 1], [2**31] * 3]
    assert room.tolist() == [fit_count(capacity, d, cap=2**31).tolist() for d in demand]
