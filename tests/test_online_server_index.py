"""The per-slot server index (``online.server_index``) gives the every-server reading's floats.

* ``ServerIndex.marginals`` against ``_dp.cheapest_marginals`` over every server, on random
  slots changed at random (ties on purpose, zero demands, full servers, re-sorts, released
  slots), bit for bit;
* the cost curves C_t(k) read three ways: every slot of both pools, PSs only where a worker fits
  (``_dp.slot_costs``), and through the index, bit for bit;
* OASiS with and without the index: the same schedules, row for row, on paper-sim instances
  (the old and new paths of the speed work, on the same instances).
"""
from __future__ import annotations

import copy
import pickle
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_opt import validate
from oasis_opt.model.numerics import fit_count, unit_prices
from oasis_opt.online import _dp
from oasis_opt.online.dual import DualJob, Hints, Market, best_schedule
from oasis_opt.online.oasis import INDEX_MIN_SERVERS, OasisPolicy
from oasis_opt.online.server_index import ServerIndex
from oasis_opt.sim import simulate
from oasis_opt.workloads import paper_sim


def _resource_major(x: np.ndarray) -> np.ndarray:
    """(T+1, H, R) values stored as (T+1, R, H), as ``OasisPolicy`` keeps them."""
    return np.ascontiguousarray(x.transpose(0, 2, 1)).transpose(0, 2, 1)


@st.composite
def index_cases(draw):
    T, H, R = draw(st.integers(1, 6)), draw(st.integers(1, 80)), draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    levels = draw(st.sampled_from([2, 5, 1000]))  # few levels: many exact ties
    cap = rng.integers(1, 8, size=(H, R)).astype(float)
    price = _resource_major(np.broadcast_to(rng.integers(1, levels + 1, size=(H, R)) / levels,
                                            (T + 1, H, R)).copy())
    free = _resource_major(np.broadcast_to(cap, (T + 1, H, R)).copy())
    index = ServerIndex(price, free, dirty_limit=draw(st.integers(1, 12)),
                        depth=draw(st.integers(1, 4)))
    most = draw(st.sampled_from([2, H]))  # servers a commit changes per slot: few (kept as
    for _ in range(draw(st.integers(0, 8))):  # dirty) or up to all (re-sorts)
        slots = np.sort(rng.choice(np.arange(1, T + 1), size=rng.integers(1, T + 1),
                                   replace=False))
        pairs = [(t, h) for t in slots.tolist()
                 for h in np.sort(rng.choice(H, size=rng.integers(1, min(most, H) + 1),
                                             replace=False))]
        t, h = np.array(pairs).T
        # either way: the index must not rely on prices only rising as OASiS's do
        price[t, h] = np.maximum(0.0, price[t, h] + rng.integers(-levels, levels + 1,
                                                                 size=(len(t), R)) / levels)
        free[t, h] += rng.integers(-3, 3, size=(len(t), R))
        index.changed(t, h)
        if rng.random() < 0.3:
            index.forget_before(int(rng.integers(1, T + 1)))
    w = rng.integers(0, 3, size=R).astype(float)
    n = draw(st.integers(0, 6))
    return index, price, free, w, n


@settings(max_examples=200, deadline=None)
@given(index_cases())
def test_indexed_marginals_equal_every_server_reading(case):
    index, price, free, w, n = case
    slots = np.arange(1, price.shape[0])
    got = index.marginals(slots, w, n)
    want = _dp.cheapest_marginals(unit_prices(price[slots], w), fit_count(free[slots], w, n), n)
    assert got.shape == want.shape
    assert np.array_equal(got, want)  # inf where the slot holds fewer than n


@settings(max_examples=300, deadline=None)
@given(index_cases(), st.integers(0, 2**32 - 1))
def test_indexed_placement_is_the_every_server_greedy(case, seed):
    """``ServerIndex.place`` places what ``_dp.greedy_fill`` places from every server, row for
    row, in the slots it certifies (ties at the threshold included), and leaves the others."""
    index, price, free, w, n = case
    slots = np.arange(1, price.shape[0])
    fit = fit_count(free[slots], w, 8)
    counts = np.minimum(np.random.default_rng(seed).integers(0, 6, len(slots)), fit.sum(axis=1))
    if not counts.any():
        return
    row, server, k, left = index.place(slots, w, counts)
    want = _dp.greedy_fill(unit_prices(price[slots], w), fit, counts)
    placed = {(int(r), int(h), int(c)) for r, h, c in zip(*want) if r not in set(left.tolist())}
    assert {(int(r), int(h), int(c)) for r, h, c in zip(row, server, k)} == placed
    assert not set(row.tolist()) & set(left.tolist())


def test_placement_leaves_a_slot_where_a_price_vanishes_in_the_float_sum():
    """Certificate (i) of ``place``: server 0 is an outsider (not first in either price list)
    priced above the threshold key in a resource whose weight is 1e-20, so its unit price
    rounds to tau; it ties with the candidate placed (server 3) and has the lower index, so the
    every-server greedy takes it. The index must leave the slot to the caller."""
    w = np.array([1.0, 1e-20])
    prices = np.array([[1.0, 2.0], [1.0, 2.0], [1.0, 2.0], [1.0, 0.5], [0.5, 0.5]])
    free = np.array([[5.0, 5.0]] * 4 + [[0.0, 0.0]])
    price = _resource_major(np.broadcast_to(prices, (2, 5, 2)).copy())
    index = ServerIndex(price, _resource_major(np.broadcast_to(free, (2, 5, 2)).copy()),
                        dirty_limit=1, depth=1)
    counts = np.array([1])
    assert unit_prices(prices[0], w) == unit_prices(prices[3], w) == 1.0
    row, server, n, left = index.place(np.array([1]), w, counts)
    assert len(row) == 0 and left.tolist() == [0]
    _, want, _ = _dp.greedy_fill(unit_prices(prices, w)[None], fit_count(free, w, 1)[None], counts)
    assert want.tolist() == [0]


@st.composite
def curve_cases(draw):
    """Slots where the job's worker fits nowhere (a resource used up), somewhere, or on many
    servers, with ties; a job with N workers and need[k] PSs."""
    T, H, K, R = (draw(st.integers(1, 6)), draw(st.integers(1, 30)), draw(st.integers(1, 30)),
                  draw(st.integers(1, 3)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    arrays, index = [], []
    for n in (H, K):
        price = _resource_major(np.ones((T + 1, n, R)))
        free = _resource_major(np.full((T + 1, n, R), 3.0))
        ix = ServerIndex(price, free, dirty_limit=2, depth=1)  # built on alike slots
        price[1:] = rng.integers(1, 4, size=(T, n, R)) / 3
        free[1:] = rng.integers(0, 4, size=(T, n, R))
        free[1:][rng.random(T) < 0.5, :, 0] = 0.0  # booked-up slots
        t, h = np.divmod(np.arange(T * n), n)
        ix.changed(t + 1, h)
        arrays += [price, free]
        index.append(ix)
    N = draw(st.integers(1, 5))
    need = np.minimum(np.arange(N + 1), draw(st.integers(0, 3)))  # ps_need: 0 PSs allowed too
    job = DualJob(arrival=1, chunks=N, work=1,
                  worker_demand=rng.integers(1, 3, size=R).astype(float),
                  ps_demand=rng.integers(0, 3, size=R).astype(float), ps_need=need,
                  utility=np.zeros(T + 1))
    spec = _dp.job_spec(job, T)
    return spec, arrays, tuple(index)


@settings(max_examples=150, deadline=None)
@given(curve_cases())
def test_cost_curves_read_three_ways_are_the_same_floats(case):
    spec, (wp, wf, pp, pf), index = case
    T = wp.shape[0] - 1
    s = slice(1, T + 1)
    every = _dp.untyped_costs(
        spec, _dp.cheapest_marginals(unit_prices(wp[s], spec.w), fit_count(wf[s], spec.w, spec.N),
                                     spec.N),
        _dp.cheapest_marginals(unit_prices(pp[s], spec.s),
                               fit_count(pf[s], spec.s, _dp.ps_most(spec)), _dp.ps_most(spec)))
    plain = _dp.range_costs(spec, 1, T + 1, wp, pp, wf, pf)
    indexed = _dp.range_costs(replace(spec, index=index), 1, T + 1, wp, pp, wf, pf)
    assert np.array_equal(plain, every) and np.array_equal(indexed, every)


def _rows(policy: OasisPolicy) -> np.ndarray:
    parts = [p for t in sorted(policy.rows_by_slot) for p in policy.rows_by_slot[t]]
    return np.concatenate(parts) if parts else np.zeros((0, 5), dtype=np.int64)


class _ShallowIndex(OasisPolicy):
    """OASiS with an index that reads 2 servers per list in a first round and re-sorts a slot
    after 4 changes: on these small clusters the default (64 per list) reads every server, so
    this is what puts the certificates to work (the plans may not depend on either setting)."""

    def start(self, instance, state):
        super().start(instance, state)
        assert self.index is not None
        self.index = (ServerIndex(self.worker_price, self.worker_free, dirty_limit=4, depth=2),
                      ServerIndex(self.ps_price, self.ps_free, dirty_limit=4, depth=2))


@pytest.mark.parametrize("seed,T,servers,jobs", [(0, 60, 300, 400), (1, 40, 420, 300),
                                                 (2, 80, 260, 500)])
def test_oasis_with_and_without_the_index_gives_the_same_schedule(seed, T, servers, jobs):
    """Both paths give the same rows, and the schedule is valid: a plan that places one PS
    fewer than ceil(k b_i / B_i) in both paths (the same rows, so the comparisons alone pass)
    breaks rule (6) and fails here."""
    inst = paper_sim(seed, jobs=jobs, horizon=T, worker_servers=servers, ps_servers=servers)
    plain = OasisPolicy(server_index=False)
    result = simulate(inst, plain)
    assert plain.index is None
    for policy in (OasisPolicy(server_index=True), _ShallowIndex(server_index=True)):
        indexed = simulate(inst, policy)
        assert policy.index is not None
        assert np.array_equal(_rows(plain), _rows(policy))
        assert result.total_utility == indexed.total_utility
        assert result.admitted == indexed.admitted
        assert plain.payoff == policy.payoff
        report = validate(inst, indexed)
        assert report.ok, str(report)
    assert any(result.admitted) and validate(inst, result).ok


def test_the_index_is_automatic_at_cluster_scale_only():
    half = INDEX_MIN_SERVERS // 2  # H = K: the smallest cluster that gets it, and just below
    small = paper_sim(0, jobs=5, horizon=10, worker_servers=half - 1, ps_servers=half)
    big = paper_sim(0, jobs=5, horizon=10, worker_servers=half, ps_servers=half)
    for inst, on in ((small, False), (big, True)):
        policy = OasisPolicy()
        simulate(inst, policy)
        assert (policy.index is not None) is on


def test_bad_index_arguments_are_rejected():
    with pytest.raises(ValueError, match="server_index"):
        OasisPolicy(server_index="yes")
    x = np.zeros((3, 4, 2))  # stored slot, server, resource: not resource-major
    with pytest.raises(ValueError, match="resource-major"):
        ServerIndex(x, x)
    with pytest.raises(ValueError, match="dirty_limit"):
        ServerIndex(_resource_major(x), _resource_major(x), dirty_limit=0)
    inst = paper_sim(0, jobs=3, horizon=5, worker_servers=4, ps_servers=4)
    T, H, K, R = inst.horizon, inst.H, inst.K, inst.R
    wp, pp = _resource_major(np.ones((T + 1, H, R))), _resource_major(np.ones((T + 1, K, R)))
    wf = _resource_major(np.broadcast_to(inst.worker_capacity, (T + 1, H, R)).copy())
    pf = _resource_major(np.broadcast_to(inst.ps_capacity, (T + 1, K, R)).copy())
    wrong = ServerIndex(_resource_major(np.ones((T + 1, H + 1, R))),
                        _resource_major(np.ones((T + 1, H + 1, R))))
    market = Market(wp, pp, wf, pf)
    with pytest.raises(ValueError, match="server_index"):
        best_schedule(inst, 0, market, Hints(server_index=(wrong, ServerIndex(pp, pf))))
    with pytest.raises(ValueError, match="server_index"):
        best_schedule(inst, 0, market, Hints(server_index=[ServerIndex(wp, wf)] * 2))
    plain = best_schedule(inst, 0, market)
    indexed = best_schedule(inst, 0, market,
                            Hints(server_index=(ServerIndex(wp, wf), ServerIndex(pp, pf))))
    assert np.array_equal(plain.rows, indexed.rows) and plain.payoff == indexed.payoff


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_a_policy_copied_mid_run_decides_as_the_original(how):
    # the index reads its owner's arrays through views: a copy must rebuild it on its own
    # arrays (and pickle's C-order arrays must be laid out resource-major again), or it reads
    # stale data
    inst = paper_sim(4, jobs=300, horizon=40, worker_servers=200, ps_servers=200)
    order = np.argsort(inst.arrival, kind="stable").tolist()

    def run(copy_at: int | None) -> OasisPolicy:
        policy: OasisPolicy = _ShallowIndex(server_index=True)
        policy.start(inst, None)
        for n, job in enumerate(order):
            if n == copy_at:
                policy = (pickle.loads(pickle.dumps(policy)) if how == "pickle"
                          else copy.deepcopy(policy))
            policy.on_arrival(job, int(inst.arrival[job]), None)
        return policy

    whole, copied = run(None), run(len(order) // 2)
    assert sum(p is not None and p > 0 for p in whole.payoff) > 50  # a run with commits
    assert whole.payoff == copied.payoff and whole.planned == copied.planned
    assert np.array_equal(_rows(whole), _rows(copied))
    assert np.array_equal(whole.committed(), copied.committed())
    assert copied.index is not None
    for ix, price, free in zip(copied.index, (copied.worker_price, copied.ps_price),
                               (copied.worker_free, copied.ps_free)):
        assert (ix.limit, ix.depth) == (4, 2)
        assert ix.price is price and np.shares_memory(ix._flat_price, price)
        assert ix.free is free and np.shares_memory(ix._flat_free, free)
