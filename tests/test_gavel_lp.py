"""Gavel's allocation LPs: hand-solved cases, and a brute-force grid over the allocations of tiny
instances that no LP answer may lose to (and whose value the LP's own x must reach)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_opt.offline import gavel_lp as lp


def feasible(x, T, N, n, tol=1e-6):
    """Whether allocations ``x`` ((J, G) or a stack (M, J, G)) meet Gavel's base constraints."""
    N = np.broadcast_to(np.asarray(N, float)[:, None], T.shape)
    ok = ((x >= -tol).all(axis=(-2, -1)) & (x.sum(axis=-1) <= 1 + tol).all(axis=-1)
          & ((N * x).sum(axis=-2) <= n + tol).all(axis=-1) & (x[..., T == 0] <= tol).all(axis=-1))
    return ok


def throughput(x, T):
    return (T * x).sum(axis=-1)


def maxmin_value(x, T, N, n):
    P = lp.equal_share_throughput(T, n)
    return (np.asarray(N, float) * throughput(x, T) / P).min(axis=-1)


def makespan_value(x, T, r):
    return np.where(r > 0, r / np.maximum(throughput(x, T), 1e-300), 0.0).max(axis=-1)


def rho_value(x, T, r, t, p, c=0.0):
    return ((t + r / np.maximum(throughput(x, T), 1e-300)) / (c + r / p)).max(axis=-1)


def grid(T, N, n, step=0.05):
    """Every feasible allocation of a 2-job, 2-type instance on a grid of ``step``, (M, 2, 2)."""
    vals = np.arange(0, 1 + 1e-9, step)
    x = np.array(list(itertools.product(vals, repeat=4))).reshape(-1, 2, 2)
    return x[feasible(x, T, N, n)]


def test_hand_solved_cases():
    # one 2-GPU job alone on 4 GPUs: all the time, ratio N T x / P = 2 x 5 / 5
    a = lp.max_min_fairness([[5.0]], [2], [4])
    assert a.objective == pytest.approx(2.0) and a.x == pytest.approx(np.ones((1, 1)))
    # two identical 1-GPU jobs on one GPU: half each
    a = lp.max_min_fairness([[3.0], [3.0]], [1, 1], [1])
    assert a.objective == pytest.approx(0.5) and a.x.ravel() == pytest.approx([0.5, 0.5])
    # makespan: y1 = 1 + 3a, y2 = 2 - a with r = (4, 2): a = 0.6, makespan 10 / 7
    T = np.array([[4.0, 1.0], [2.0, 1.0]])
    a = lp.min_makespan(T, [1, 1], [1, 1], [4, 2])
    assert a.objective == pytest.approx(10 / 7)
    assert makespan_value(a.x, T, np.array([4.0, 2.0])) == pytest.approx(10 / 7)
    # finish-time fairness, one job: its best is all the time on its type, rho = p / T
    a = lp.finish_time_fairness([[2.0]], [1], [1], [10.0], [0.0], [1.0])
    assert a.objective == pytest.approx(0.5, rel=1e-3) and a.x[0, 0] == pytest.approx(1.0)


def test_isolated_throughput_is_gavels_one_jth_share():
    """Gavel's IsolatedPolicy gives each of J jobs n_g / J GPUs of every type, capped at all
    its time, and passes no unused share on (a water-filling rule, our former one, gives the
    2- and 4-GPU jobs 0.75 and 0.375: FTF then ran ~9 % below Gavel on a 120-job trace)."""
    T = np.array([[1.0, 1.0]] * 3)
    # 1 + 2 + 4 GPUs wanted on 4 GPUs: 4/3 GPUs each, i.e. shares 1, 2/3, 1/3 of the job's time
    p = lp.isolated_throughput(T, [1, 2, 4], [2, 2])
    assert p == pytest.approx([1.0, 2 / 3, 1 / 3])
    assert lp.isolated_throughput(T, [1, 1, 1], [2, 2]) == pytest.approx([1.0] * 3)
    # a type the job cannot use still counts in its share (Gavel's x is set for every type)
    assert lp.isolated_throughput([[2.0, 0.0]], [1], [2, 2]) == pytest.approx([1.0])


def test_ftf_denominator_counts_the_isolated_time_of_work_done():
    """rho_j = (t_j + r_j / y_j) / (c_j + r_j / p_j) with c_j Gavel's cumulative isolated time,
    not t_j: one job, 10 units left at rate 2 (5 time units), 4 waited, 1 of isolated work done,
    p = 1: rho = (4 + 5) / (1 + 10) = 9/11 (with t_j in the denominator it would be 9/14)."""
    a = lp.finish_time_fairness([[2.0]], [1], [1], [10.0], [4.0], [1.0], [1.0])
    assert a.objective == pytest.approx(9 / 11, rel=1e-3)
    with pytest.raises(ValueError, match="done_isolated"):
        lp.finish_time_fairness([[2.0]], [1], [1], [10.0], [4.0], [1.0], [-1.0])


def test_spread_over_types_keeps_the_type_blind_optimum():
    """The symmetric point: same per-job totals (so the same type-blind objective), each type in
    proportion to its size, and within capacity; refuses jobs whose GPU count varies by type."""
    rng = np.random.default_rng(3)
    N = rng.choice([1.0, 2.0, 4.0], size=9)
    n = np.array([4.0, 8.0, 16.0])
    NN = np.repeat(N[:, None], 3, axis=1)
    a = lp.max_min_fairness(np.ones((9, 3)), NN, n, scale=N)
    b = lp.spread_over_types(a, NN, n)
    assert b.x.sum(axis=1) == pytest.approx(a.x.sum(axis=1))
    assert b.x / b.x.sum(axis=1, keepdims=True) == pytest.approx(np.tile(n / n.sum(), (9, 1)))
    assert feasible(b.x, np.ones((9, 3)), N, n)
    assert maxmin_value(b.x, np.ones((9, 3)), N, n) == pytest.approx(a.objective, rel=1e-6)
    with pytest.raises(ValueError, match="same GPUs"):
        lp.spread_over_types(a, NN * np.array([1.0, 1.0, 2.0]), n)


def test_gavel_bisection_stops_within_five_percent():
    for opt in (150.0, 4321.0, 99_999.0, 2.5e6):
        m = lp.gavel_bisection(opt)
        assert opt <= m <= 1.05 * opt + 1e-9 or (opt < 100 and m <= 105)


@settings(max_examples=25, deadline=None)
@given(T=st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0]), min_size=4, max_size=4),
       N=st.lists(st.integers(1, 2), min_size=2, max_size=2),
       n=st.lists(st.integers(1, 3), min_size=2, max_size=2),
       r=st.lists(st.integers(1, 5), min_size=2, max_size=2),
       t=st.lists(st.integers(0, 4), min_size=2, max_size=2),
       central=st.booleans())
def test_lps_beat_every_grid_point(T, N, n, r, t, central):
    T = np.array(T).reshape(2, 2)
    if not (T > 0).any(axis=1).all():
        T[:, 0] = np.maximum(T[:, 0], 1.0)
    N, n, r, t = (np.array(v, float) for v in (N, n, r, t))
    points = grid(T, N, n)
    # max-min fairness
    a = lp.max_min_fairness(T, N, n, central=central)
    assert feasible(a.x, T, N, n)
    assert maxmin_value(a.x, T, N, n) == pytest.approx(a.objective, rel=1e-6, abs=1e-7)
    assert a.objective >= maxmin_value(points, T, N, n).max() - 1e-7
    # makespan
    a = lp.min_makespan(T, N, n, r, central=central)
    assert feasible(a.x, T, N, n)
    assert makespan_value(a.x, T, r) == pytest.approx(a.objective, rel=1e-6)
    assert a.objective <= makespan_value(points, T, r).min() + 1e-7
    f = lp.makespan_feasible(T, N, n, r, a.objective * 1.01, central=central)
    assert feasible(f.x, T, N, n) and makespan_value(f.x, T, r) <= a.objective * 1.01 * (1 + 1e-6)
    assert lp.makespan_feasible(T, N, n, r, a.objective * 0.9).objective == -np.inf
    # finish-time fairness: the bisection's rho is reached by its x, and no grid point beats it
    p = lp.isolated_throughput(T, N, n)
    a = lp.finish_time_fairness(T, N, n, r, t, p, central=central)
    assert feasible(a.x, T, N, n)
    assert rho_value(a.x, T, r, t, p) <= a.objective * (1 + 1e-6)
    assert a.objective <= rho_value(points, T, r, t, p).min() * (1 + 2 * lp.RHO_TOL)


def test_vertex_and_central_optima_agree_on_the_objective():
    rng = np.random.default_rng(5)
    T = rng.uniform(0.5, 4.0, size=(8, 3))
    N, n = rng.integers(1, 3, size=8), np.array([4.0, 4.0, 4.0])
    v = lp.max_min_fairness(T, N, n)
    c = lp.max_min_fairness(T, N, n, central=True)
    assert v.objective == pytest.approx(c.objective, rel=1e-6)
    assert feasible(v.x, T, N, n) and feasible(c.x, T, N, n)


def test_bad_arrays_are_refused():
    with pytest.raises(ValueError, match="throughputs: expected shape"):
        lp.max_min_fairness([[1.0, 2.0]], [1, 1], [1, 1])
    with pytest.raises(ValueError, match="every job needs a type"):
        lp.max_min_fairness([[0.0, 0.0]], [1], [1, 1])
