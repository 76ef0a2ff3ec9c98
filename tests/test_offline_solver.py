"""The array solver layer (oasis_opt.offline.solver): HiGHS and CP-SAT on the same programs."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_opt.offline.solver import (LinearProgram, _decimal_scale, _scale_row, new_highs,
                                      IncrementalLP, set_highs_threads, solve_program,
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
        solve_program(lp, time_limit=0)
    with pytest.raises(ValueError, match="relax"):
        solve_program(lp, backend="cpsat", relax=True)
    cont = program([1], [[1]], [0], [1], [0], [1], integer=False)
    with pytest.raises(ValueError, match="integer"):
        solve_program(cont, backend="cpsat")
    inf = program([1], [[1]], [0], [1], [0], [math.inf])
    with pytest.raises(ValueError, match="finite"):
        solve_program(inf, backend="cpsat")


def test_decimal_scaling_is_exact_and_minimal():
    assert _decimal_scale(np.array([1.0, 2.0])) == 1
    assert _decimal_scale(np.array([0.25, 3.5])) == 100
    assert _decimal_scale(np.array([0.1, 0.7])) == 10
    assert _decimal_scale(np.array([1 / 3])) is None
    a, lo, up, exact = _scale_row(np.array([0.5, 1.5]), -math.inf, 2.75, np.array([5.0, 5.0]))
    assert exact and a.tolist() == [5, 15] and lo is None and up == 27


def test_inexact_rows_keep_feasible_points_and_only_those_within_tolerance():
    coef = np.array([1 / 3, 1 / 7, 0.3])
    box = np.array([9.0, 9.0, 9.0])
    for up in (2.0, 1.0, 0.0, 3.0 + 3 / 7):
        a, lo, iup, exact = _scale_row(coef, -math.inf, up, box)
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
    assert h.status == "optimal" and h.proven_optimal
    assert h.objective == pytest.approx(truth, abs=1e-6)
    assert cp.status == "optimal"
    # CP-SAT optimises the integer-scaled objective: within the error bound it reports
    assert abs(cp.objective - truth) <= cp.info["objective_error"] + 1e-9
    assert (cp.bound >= truth - 1e-9) if sense == "max" else (cp.bound <= truth + 1e-9)
    # its solution is feasible for the original rows (to the shared 1e-9 tolerance)
    ax = lp.A.toarray() @ cp.x
    assert np.all(ax <= lp.row_upper + 1e-9 * np.maximum(1.0, np.abs(lp.row_upper)))
    assert cp.proven_optimal


def test_time_limit_returns_incumbent_not_marked_optimal():
    # a 0-1 knapsack with many near-equal items: far from closed in 0.05 s
    rng = np.random.default_rng(0)
    n = 400
    w = rng.integers(1000, 1100, size=n).astype(float)
    c = w + rng.random(n)
    A = np.vstack([w, rng.integers(1000, 1100, size=n)])
    lp = program(c, A, [-math.inf] * 2, [w.sum() / 2 + 0.5, A[1].sum() / 2 + 0.5],
                 np.zeros(n), np.ones(n))
    for backend in ("highs", "cpsat"):
        res = solve_program(lp, backend=backend, time_limit=0.05, initial=np.zeros(n))
        if res.status == "optimal":  # a much faster machine: then it must be truly proven
            assert res.proven_optimal
            continue
        assert res.status == "time_limit" and not res.proven_optimal
        assert res.x is not None and res.bound >= res.objective - 1e-6
        assert res.gap is not None and res.gap >= 0


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
    # HiGHS's time_limit counts the object's run time over all runs; IncrementalLP's is per call
    rng = np.random.default_rng(0)
    m, n = 600, 900
    lp = IncrementalLP("max")
    lp.add_rows(np.full(m, -math.inf), np.ones(m))
    lp.add_cols(rng.random(n), np.zeros(n), np.full(n, 10.0),
                sp.random(m, n, density=0.02, random_state=0, format="csc"))
    first = lp.solve()
    assert first[0] == "optimal"
    spent = lp._h.getRunTime()
    lp.add_cols([0.5], [0.0], [1.0], sp.csc_matrix(np.eye(m, 1)))
    assert spent > 0.01  # the warm-started re-solve below takes far less than half of it
    status, value, x, duals = lp.solve(time_limit=spent / 2)
    assert status == "optimal" and value >= first[1] - 1e-9
    assert len(x) == n + 1 and len(duals) == m
