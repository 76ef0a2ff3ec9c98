"""The array solver layer (oasis_opt.offline.solver): HiGHS and CP-SAT on the same programs."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_opt.offline.cpsat import decimal_scale, scale_row
from oasis_opt.offline.solver import (STOPPED, IncrementalLP, LinearProgram, SolverLimits,
                                      new_highs, ordered_bound, set_highs_threads, solve_program,
                                      to_highs_lp)


def program(c, A, lo, up, lower, upper, integer=True, sense="max"):
    A = np.atleast_2d(np.asarray(A, float))
    n = A.shape[1]
    return LinearProgram(np.asarray(c, float), sp.csr_matrix(A), np.asarray(lo, float),
                         np.asarray(up, float), np.asarray(lower, float),
                         np.asarray(upper, float), np.full(n, integer, dtype=bool), sense)


def enumerate_optimum(lp):
    """Best objective over every integer point of the box (tiny programs), None if infeasible."""
    best = None
    A = lp.A.toarray()
    for x in itertools.product(*(range(int(lo), int(up) + 1)
                                 for lo, up in zip(lp.lower, lp.upper))):
        ax = A @ np.asarray(x, float)
        if np.all(ax >= lp.row_lower - 1e-9) and np.all(ax <= lp.row_upper + 1e-9):
            v = float(lp.c @ np.asarray(x, float))
            if best is None or (v > best if lp.sense == "max" else v < best):
                best = v
    return best


def test_lp_duals_are_sensitivities_in_the_problem_sense():
    # max x + 2y  s.t. x + y <= 4, y <= 3: optimum (1, 3), both rows bind with dual 1
    lp = program([1, 2], [[1, 1], [0, 1]], [-math.inf] * 2, [4, 3], [0, 0], [10, 10],
                 integer=False)
    res = solve_program(lp, relax=True)
    assert res.status == "optimal" and res.proven_optimal
    assert res.objective == pytest.approx(7.0)
    np.testing.assert_allclose(res.row_duals, [1.0, 1.0], atol=1e-9)
    assert res.bound == pytest.approx(res.objective) and res.gap == 0.0
    # the same problem as a minimisation of -c: duals change sign, objective too
    neg = program([-1, -2], [[1, 1], [0, 1]], [-math.inf] * 2, [4, 3], [0, 0], [10, 10],
                  integer=False, sense="min")
    r2 = solve_program(neg)
    assert r2.objective == pytest.approx(-7.0)
    np.testing.assert_allclose(r2.row_duals, [-1.0, -1.0], atol=1e-9)


def test_relax_drops_integrality():
    lp = program([1, 2], [[1, 1], [0, 1]], [-math.inf] * 2, [4.5, 3.5], [0, 0], [10, 10])
    assert solve_program(lp).objective == pytest.approx(7.0)  # integer: (1, 3)
    assert solve_program(lp, relax=True).objective == pytest.approx(8.0)  # LP: (1, 3.5)
    assert solve_program(lp, relax=True).row_duals is not None
    assert solve_program(lp).row_duals is None


@pytest.mark.parametrize("backend", ["highs", "cpsat"])
def test_infeasible_program_is_reported(backend):
    lp = program([1.0], [[1.0]], [2.0], [math.inf], [0], [1])  # x >= 2 but x <= 1
    res = solve_program(lp, backend=backend)
    assert res.status == "infeasible" and not res.proven_optimal and res.x is None


def test_unbounded_lp_is_reported():
    lp = program([1.0, 0.0], [[0.0, 1.0]], [-math.inf], [1.0], [0, 0], [math.inf, 1],
                 integer=False)
    assert solve_program(lp).status == "unbounded"


@pytest.mark.parametrize("backend", ["highs", "cpsat"])
def test_empty_program(backend):
    lp = program(np.zeros(0), np.zeros((1, 0)), [-math.inf], [1.0], [], [])
    res = solve_program(lp, backend=backend)
    assert res.status == "optimal" and res.objective == 0.0 and len(res.x) == 0
    bad = program(np.zeros(0), np.zeros((1, 0)), [1.0], [2.0], [], [])
    assert solve_program(bad, backend=backend).status == "infeasible"


def test_bad_input_names_the_field():
    with pytest.raises(ValueError, match="row_upper"):
        program([1, 2], [[1, 1]], [0], [1, 2], [0, 0], [1, 1])
    with pytest.raises(ValueError, match="sense"):
        program([1], [[1]], [0], [1], [0], [1], sense="maximise")
    with pytest.raises(ValueError, match="A:"):
        LinearProgram(np.ones(2), sp.csr_matrix(np.ones((1, 3))), np.zeros(1), np.ones(1),
                      np.zeros(2), np.ones(2), np.ones(2, bool))
    lp = program([1], [[1]], [0], [1], [0], [1])
    with pytest.raises(ValueError, match="backend"):
        solve_program(lp, backend="gurobi")
    with pytest.raises(ValueError, match="time_limit"):
        solve_program(lp, SolverLimits(time_limit=0))
    with pytest.raises(ValueError, match="relax"):
        solve_program(lp, backend="cpsat", relax=True)
    cont = program([1], [[1]], [0], [1], [0], [1], integer=False)
    with pytest.raises(ValueError, match="integer"):
        solve_program(cont, backend="cpsat")
    inf = program([1], [[1]], [0], [1], [0], [math.inf])
    with pytest.raises(ValueError, match="finite"):
        solve_program(inf, backend="cpsat")


def test_decimal_scaling_is_exact_and_minimal():
    assert decimal_scale(np.array([1.0, 2.0])) == 1
    assert decimal_scale(np.array([0.25, 3.5])) == 100
    assert decimal_scale(np.array([0.1, 0.7])) == 10
    assert decimal_scale(np.array([1 / 3])) is None
    a, lo, up, exact = scale_row(np.array([0.5, 1.5]), -math.inf, 2.75, np.array([5.0, 5.0]))
    assert exact and a.tolist() == [5, 15] and lo is None and up == 27


def test_inexact_rows_keep_feasible_points_and_only_those_within_tolerance():
    coef = np.array([1 / 3, 1 / 7, 0.3])
    box = np.array([9.0, 9.0, 9.0])
    for up in (2.0, 1.0, 0.0, 3.0 + 3 / 7):
        a, lo, iup, exact = scale_row(coef, -math.inf, up, box)
        assert not exact and lo is None
        for x in itertools.product(range(10), range(10), range(10)):
            act = coef @ np.asarray(x, float)
            kept = a @ np.asarray(x) <= iup
            if act <= up:
                assert kept  # a point that fits exactly (e.g. a full capacity) is kept
            if kept:
                assert act <= up + 1e-9 * max(1.0, abs(up))


@settings(max_examples=100)
@given(n=st.integers(1, 4), m=st.integers(0, 3),
       coefs=st.lists(st.sampled_from([0.0, 0.5, 1.0, 1.25, 2.0, 3.0, -1.0, 0.1, 1 / 3]),
                      min_size=12, max_size=12),
       c=st.lists(st.floats(-10, 10, allow_nan=False), min_size=4, max_size=4),
       rhs=st.lists(st.floats(-1, 8, allow_nan=False), min_size=3, max_size=3),
       ub=st.lists(st.integers(0, 3), min_size=4, max_size=4),
       sense=st.sampled_from(["max", "min"]))
def test_highs_and_cpsat_agree_with_enumeration(n, m, coefs, c, rhs, ub, sense):
    A = np.array(coefs[: n * m] + [0.0] * (n * m - len(coefs[: n * m]))).reshape(m, n)
    lp = program(c[:n], A if m else np.zeros((0, n)), [-math.inf] * m, rhs[:m], [0] * n, ub[:n],
                 sense=sense)
    truth = enumerate_optimum(lp)
    h = solve_program(lp)
    cp = solve_program(lp, backend="cpsat")
    if truth is None:
        assert h.status == "infeasible" and cp.status == "infeasible"
        return
    assert h.status == "optimal"
    assert h.objective == pytest.approx(truth, abs=1e-6)
    assert abs(h.bound - h.objective) <= 1e-6 * max(1.0, abs(truth))  # proven: gap closed
    assert cp.status == "optimal"
    # CP-SAT optimises the integer-scaled objective: within the error bound it reports
    assert abs(cp.objective - truth) <= cp.info["objective_error"] + 1e-9
    assert (cp.bound >= truth - 1e-9) if sense == "max" else (cp.bound <= truth + 1e-9)
    # its solution is feasible for the original rows (to the shared 1e-9 tolerance)
    ax = lp.A.toarray() @ cp.x
    assert np.all(ax <= lp.row_upper + 1e-9 * np.maximum(1.0, np.abs(lp.row_upper)))
    assert abs(cp.bound - cp.objective) <= 1e-6 * max(1.0, abs(truth)) + cp.info["objective_error"]


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 4), m=st.integers(0, 3),
       coefs=st.lists(st.sampled_from([0.0, -2.0, -1.0, 0.5, 1.0, 3.0]), min_size=12, max_size=12),
       c=st.lists(st.integers(-3, 3), min_size=4, max_size=4),
       rhs=st.lists(st.floats(-1, 8, allow_nan=False), min_size=3, max_size=3),
       integer=st.booleans(), sense=st.sampled_from(["max", "min"]))
def test_a_rowwise_matrix_program_solves_as_its_scipy_twin(n, m, coefs, c, rhs, integer, sense):
    """A ``RowwiseMatrix`` (CSR arrays handed to HiGHS row-wise, no scipy; the Gavel LPs) gives
    the program the scipy matrix of the same arrays gives, on HiGHS and CP-SAT, and its ``@`` is
    scipy's: a row or column mixed up in the row-wise hand-off fails here."""
    from oasis_opt.offline.lp import RowwiseMatrix

    A = np.array(coefs[: n * m]).reshape(m, n)
    lp = program(c[:n], A if m else np.zeros((0, n)), [-math.inf] * m, rhs[:m], [0] * n,
                 [3] * n, integer=integer, sense=sense)
    csr = lp.A
    rowwise = RowwiseMatrix(csr.data, csr.indices.astype(np.int32),
                            csr.indptr.astype(np.int32), csr.shape)
    twin = LinearProgram(lp.c, rowwise, lp.row_lower, lp.row_upper, lp.lower, lp.upper,
                         lp.integer, sense)
    x = np.arange(1.0, n + 1)
    assert np.array_equal(rowwise @ x, csr @ x)
    assert (rowwise.tocsr() != csr).nnz == 0
    for backend in (("highs", "cpsat") if integer else ("highs",)):
        a, b = solve_program(lp, backend=backend), solve_program(twin, backend=backend)
        assert a.status == b.status
        if a.status == "optimal":
            assert b.objective == pytest.approx(a.objective, abs=1e-9)


def test_a_bad_rowwise_matrix_is_refused():
    from oasis_opt.offline.lp import RowwiseMatrix

    with pytest.raises(ValueError, match="CSR matrix"):
        RowwiseMatrix(np.ones(2), np.array([0, 1]), np.array([0, 1]), (2, 2))
    with pytest.raises(ValueError, match="column index"):
        RowwiseMatrix(np.ones(1), np.array([2]), np.array([0, 1]), (1, 2))


def knapsack(n=400, seed=0):
    """A 0-1 knapsack with many near-equal items: HiGHS needs a few nodes to close it."""
    rng = np.random.default_rng(seed)
    w = rng.integers(1000, 1100, size=n).astype(float)
    c = w + rng.random(n)
    A = np.vstack([w, rng.integers(1000, 1100, size=n)])
    return program(c, A, [-math.inf] * 2, [w.sum() / 2 + 0.5, A[1].sum() / 2 + 0.5],
                   np.zeros(n), np.ones(n))


def fig5_milp():
    from oasis_opt.offline.milp_arrays import build_milp
    from oasis_opt.workloads import paper_fig5

    return build_milp(paper_fig5(0, servers=3, priority=(50.0, 100.0))).lp


# limits that stop each back end before it has found anything (or proven any bound)
NOTHING_YET = {"highs": {"node_limit": 0}, "cpsat": {"deterministic_time": 1e-9}}


@pytest.mark.parametrize("backend", ["highs", "cpsat"])
@pytest.mark.parametrize("make", [knapsack, fig5_milp])
def test_a_limit_before_any_solution_gives_no_incumbent_and_no_bound(backend, make):
    # CP-SAT ending UNKNOWN used to report its unset best bound (~0) as a bound on a program
    # whose optimum is 240.57 (Fig. 5) or 210548 (knapsack)
    lp = make()
    res = solve_program(lp, SolverLimits(**NOTHING_YET[backend]), backend=backend)
    assert res.status == ("node_limit" if backend == "highs" else "deterministic_time_limit")
    assert not res.proven_optimal
    assert res.x is None and res.objective is None and res.incumbent is None
    assert res.bound is None and res.gap is None
    # with a starting point, that point is the incumbent: exactly it, its objective recomputed
    start = np.zeros(lp.n_cols)
    start[0] = 1.0 if make is knapsack else 0.0
    res = solve_program(lp, SolverLimits(**NOTHING_YET[backend]), backend=backend, initial=start)
    assert res.status in STOPPED and res.incumbent == "initial"
    np.testing.assert_array_equal(res.x, start)
    assert res.objective == float(lp.c @ start) and res.bound is None and res.gap is None


@pytest.mark.parametrize("backend,limits", [("highs", {"solution_limit": 1}),
                                            ("highs", {"node_limit": 2}),
                                            ("cpsat", {"deterministic_time": 0.1})])
def test_a_limit_after_some_search_gives_incumbent_and_proven_bound(backend, limits):
    lp = knapsack()
    opt = solve_program(lp).objective  # proven optimal without limits
    res = solve_program(lp, SolverLimits(**limits), backend=backend, initial=np.zeros(lp.n_cols))
    assert res.status == f"{next(iter(limits)).removesuffix('_limit')}_limit"
    assert not res.proven_optimal and res.incumbent == "solver"
    assert res.objective == pytest.approx(float(lp.c @ res.x))
    assert res.objective <= opt + 1e-6 and res.bound >= opt - 1e-6
    assert res.gap == pytest.approx((res.bound - res.objective) / res.objective)
    assert res.objective > 0  # better than the starting point


@st.composite
def capped_programs(draw):
    """Small integer programs (<= 6 columns, bounds <= 3) whose optimum enumeration finds."""
    n = draw(st.integers(2, 6))
    m = draw(st.integers(1, 3))
    A = np.array(draw(st.lists(st.sampled_from([0.0, 1.0, 2.0, 3.0, 0.5, 1.25]),
                               min_size=n * m, max_size=n * m))).reshape(m, n)
    c = draw(st.lists(st.floats(0.5, 10, allow_nan=False), min_size=n, max_size=n))
    up = draw(st.lists(st.floats(1, 8, allow_nan=False), min_size=m, max_size=m))
    ub = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    return program(c, A, [-math.inf] * m, up, [0] * n, ub)


LIMITS = ([("highs", {"node_limit": k}) for k in (0, 1, 2, 5)]
          + [("highs", {"solution_limit": k}) for k in (1, 2)]
          + [("cpsat", {"deterministic_time": d}) for d in (1e-9, 1e-5, 1e-4, 1e-3, 1e-2)])


@settings(max_examples=60, deadline=None)
@given(lp=capped_programs(), case=st.sampled_from(LIMITS), start=st.booleans())
def test_every_reported_bound_bounds_the_optimum_under_deterministic_limits(lp, case, start):
    backend, limits = case
    truth = enumerate_optimum(lp)  # x = 0 is feasible: never None
    res = solve_program(lp, SolverLimits(**limits), backend=backend,
                        initial=np.zeros(lp.n_cols) if start else None)
    assert res.status == "optimal" or res.status in STOPPED
    if res.bound is not None:
        err = res.info.get("objective_error", 0.0)
        assert res.bound >= truth - 1e-9 - err
    if res.x is not None:
        assert res.objective == pytest.approx(float(lp.c @ res.x))
        assert res.objective <= truth + 1e-9
        assert np.all(lp.A.toarray() @ res.x <= lp.row_upper + 1e-9 * np.maximum(1, lp.row_upper))
    else:
        assert res.status in STOPPED and not start and res.gap is None
    if res.status == "optimal":  # proven: the bound meets the objective within the gap
        assert res.bound - res.objective <= 1e-6 * max(1.0, abs(res.objective)) \
            + res.info.get("objective_error", 0.0) + 1e-9


def test_limits_the_back_end_does_not_have_are_errors_naming_them():
    lp = knapsack(n=5)
    with pytest.raises(ValueError, match="node_limit: a HiGHS limit"):
        solve_program(lp, SolverLimits(node_limit=3), backend="cpsat")
    with pytest.raises(ValueError, match="deterministic_time: a CP-SAT limit"):
        solve_program(lp, SolverLimits(deterministic_time=1.0))
    with pytest.raises(ValueError, match="iteration_limit: HiGHS applies it to LPs only"):
        solve_program(lp, SolverLimits(iteration_limit=10))
    with pytest.raises(ValueError, match="node_limit: a limit of integer programs"):
        solve_program(lp, SolverLimits(node_limit=1), relax=True)
    with pytest.raises(ValueError, match="node_limit: must be an integer >= 0"):
        solve_program(lp, SolverLimits(node_limit=-1))
    with pytest.raises(ValueError, match="deterministic_time: must be a finite number > 0"):
        solve_program(lp, SolverLimits(deterministic_time=0), backend="cpsat")
    # an LP stopped before any pivot
    res = solve_program(lp, SolverLimits(iteration_limit=0), relax=True)
    assert res.status == "iteration_limit"
    assert res.bound is None


def test_an_infeasible_starting_point_is_refused_naming_what_it_breaks():
    lp = program([1, 1], [[1, 1]], [-math.inf], [1], [0, 0], [1, 1])
    with pytest.raises(ValueError, match=r"initial: not feasible: row 0 activity 2.0 is above"):
        solve_program(lp, initial=[1, 1])
    with pytest.raises(ValueError, match=r"initial: not feasible: column 1 = 2.0 is above"):
        solve_program(lp, initial=[0, 2])
    with pytest.raises(ValueError, match=r"initial: not feasible: integer column 0 = 0.5"):
        solve_program(lp, initial=[0.5, 0])
    with pytest.raises(ValueError, match="initial: length 3, expected 2"):
        solve_program(lp, initial=[0, 0, 0])
    with pytest.raises(ValueError, match="initial: a starting incumbent is for integer"):
        solve_program(lp, relax=True, initial=[0, 0])


def test_a_deadline_already_passed_returns_the_starting_point_without_solving():
    import time

    lp = knapsack(n=20)
    res = solve_program(lp, SolverLimits(deadline=time.perf_counter()), initial=np.zeros(20))
    assert res.status == "time_limit" and res.incumbent == "initial"
    assert res.bound is None and res.solve_s == 0.0 and "not run" in res.info["highs_status"]
    res = solve_program(lp, SolverLimits(deadline=time.perf_counter()), backend="cpsat")
    assert res.status == "time_limit" and res.x is None and res.bound is None
    assert res.incumbent is None


def test_a_bound_on_the_wrong_side_is_moved_only_within_the_tolerance():
    assert ordered_bound("max", 100.0, 100.0 - 1e-5) == 100.0  # float noise: moved
    assert ordered_bound("min", 100.0, 100.0 + 1e-5) == 100.0
    assert ordered_bound("max", 100.0, 120.0) == 120.0 and ordered_bound("max", None, 5.0) == 5.0
    with pytest.raises(RuntimeError, match=r"bound 99\.0 .* feasible value 100\.0"):
        ordered_bound("max", 100.0, 99.0)
    with pytest.raises(RuntimeError, match=r"101\.0 .* 100\.0"):
        ordered_bound("min", 100.0, 101.0)


def test_solver_logs_go_to_python_logging_at_debug(caplog):
    import logging

    lp = knapsack(n=30)
    with caplog.at_level(logging.DEBUG, logger="oasis_opt.offline.solver"):
        solve_program(lp)
        solve_program(lp, backend="cpsat")
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "HiGHS: " in text and "CP-SAT: " in text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="oasis_opt.offline.solver"):
        solve_program(lp)
    assert not caplog.records  # not collected unless asked for


def test_highs_threads_set_once_and_recovered_after_a_foreign_change():
    lp = program([1, 2], [[1, 1], [0, 1]], [-math.inf] * 2, [4.5, 3.5], [0, 0], [10, 10])
    try:
        set_highs_threads(1)
        assert solve_program(lp).objective == pytest.approx(7.0)
        # another component asks HiGHS for another thread count (process-global scheduler)
        foreign = new_highs(threads=2)
        foreign.passModel(to_highs_lp(lp))
        foreign.run()
        res = solve_program(lp)
        assert res.status == "optimal" and res.objective == pytest.approx(7.0)
    finally:
        set_highs_threads(None)
    assert solve_program(lp).objective == pytest.approx(7.0)


def test_incremental_lp_time_limit_is_per_solve():
    # HiGHS's time_limit counts the object's run time over all runs; IncrementalLP's is per call:
    # it sets HiGHS's limit to the run time so far plus the call's limit
    rng = np.random.default_rng(0)
    m, n = 600, 900
    lp = IncrementalLP("max")
    lp.add_rows(np.full(m, -math.inf), np.ones(m))
    lp.add_cols(rng.random(n), np.zeros(n), np.full(n, 10.0),
                sp.random(m, n, density=0.02, random_state=0, format="csc"))
    first = lp.solve()
    assert first[0] == "optimal"
    assert lp._h.getOptionValue("time_limit")[1] == math.inf
    spent = lp._h.getRunTime()
    lp.add_cols([0.5], [0.0], [1.0], sp.csc_matrix(np.eye(m, 1)))
    status, value, x, duals = lp.solve(time_limit=3600.0)
    assert lp._h.getOptionValue("time_limit")[1] == pytest.approx(spent + 3600.0, abs=1e-3)
    assert status == "optimal" and value >= first[1] - 1e-9
    assert len(x) == n + 1 and len(duals) == m


def sleep_forever(lp, limits, **options):
    """A 'solver' that never returns (run in the child by the test below)."""
    import time

    time.sleep(3600)


def test_a_solver_that_overshoots_its_time_limit_is_killed():
    # HiGHS's presolve ignores its clock on big models; solve_in_child stops it regardless
    from oasis_opt.offline.solver import solve_in_child

    lp = knapsack(n=20)
    res = solve_in_child(lp, SolverLimits(time_limit=0.1), initial=np.zeros(20),
                         solve=sleep_forever)
    assert res.status == "time_limit" and res.incumbent == "initial"
    assert res.bound is None and "killed" in res.info["highs_status"]
    # a solver that stops in time answers through the same pipe, errors included
    ok = solve_in_child(lp, SolverLimits(time_limit=600, node_limit=1))
    assert ok.status in ("optimal", "node_limit") and ok.x is not None
    with pytest.raises(ValueError, match="initial: length 3"):
        solve_in_child(lp, SolverLimits(time_limit=600), initial=np.zeros(3))
