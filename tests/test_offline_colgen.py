"""Column generation bounds: LP bound >= CG bound >= OPT >= restricted-master schedule >= OASiS."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_opt.model import DEFAULT_RESOURCES, Instance, Server, validate
from oasis_opt.model.io import dumps, result_to_dict
from oasis_opt.offline.colgen import (SEED_POLICIES, ColgenOptions, ColumnPool, CGState,
                                      LnsOptions, RestrictedMaster, bracket, column_generation,
                                      columns_of, could_complete, fill_residual, fits_greedily,
                                      lagrangian_bound, policy_schedules, price_jobs,
                                      ruin_and_recreate, schedule_of)
from oasis_opt.offline.exact import OfflinePolicy, lp_bound
from oasis_opt.online.estimate import history_u, pricing_document
from oasis_opt.policies import get_policy, solve
from test_offline_milp import tiny, tiny_typed

TOL = 1e-6


def close_le(a, b):
    return a <= b + TOL * max(1.0, abs(b))


@settings(max_examples=100)
@given(tiny)
def test_bound_chain_on_random_instances(inst):
    bound_chain(inst)


@settings(max_examples=60, deadline=None)
@given(tiny_typed)
def test_bound_chain_on_random_typed_instances(inst):
    """With accelerator types: OPT by the typed MILP, itself held to a brute force."""
    bound_chain(inst)


def bound_chain(inst):
    opt = OfflinePolicy().solve(inst).total_utility
    oasis = get_policy("oasis").solve(inst)
    br = bracket(inst, time_limit=None)
    assert validate(inst, br.schedule).ok, validate(inst, br.schedule)
    assert br.converged  # tiny instances: column generation runs to the end
    assert close_le(br.upper, lp_bound(inst))
    assert close_le(opt, br.upper)
    assert close_le(br.lower, opt)
    assert close_le(oasis.total_utility, br.lower)
    assert br.seed_utility == pytest.approx(oasis.total_utility)
    assert br.lower == pytest.approx(br.schedule.total_utility)
    assert 0 <= br.gap <= 1


@settings(max_examples=40, deadline=None)
@given(tiny)
def test_seeded_bracket_contains_the_optimum_and_beats_every_seed(inst):
    """Seeded with every baseline's schedule (and OASiS at a second floor price): the bracket
    still contains the MILP optimum, and its lower end is at least every seed's utility."""
    opt = OfflinePolicy().solve(inst).total_utility
    low = pricing_document(history_u([inst]), 1e-6)
    seeds = policy_schedules(inst, SEED_POLICIES, {"oasis-low": low})
    assert set(seeds) == set(SEED_POLICIES) | {"oasis-low"}
    br = bracket(inst, time_limit=None, seeds=seeds)
    assert validate(inst, br.schedule).ok
    assert close_le(br.lower, opt) and close_le(opt, br.upper)
    assert br.lower == pytest.approx(br.schedule.total_utility)
    assert close_le(br.upper, lp_bound(inst))
    for name, s in seeds.items():
        assert close_le(br.candidates[name], br.lower)
        assert close_le(s.total_utility, br.lower), name
    assert br.source in set(br.candidates) | {"mip"}


@settings(max_examples=60, deadline=None)
@given(tiny)
def test_fill_residual_is_feasible_and_keeps_what_it_was_given(inst):
    """Filled from OASiS's columns (and from nothing), at zero and at random prices: one column
    per job, the given ones kept, the schedule valid, and the independent capacity check of
    ``fits_greedily`` accepts every column in the same order."""
    pool = ColumnPool(inst)
    seed = pool.add(columns_of(inst, get_policy("oasis").solve(inst)))
    rng = np.random.default_rng(inst.I)
    for start in (seed, []):
        for prices in (np.zeros(pool.shape), rng.uniform(0, 1, pool.shape)):
            filled = fill_residual(pool, list(start), prices, range(inst.I))
            assert filled[:len(start)] == list(start)
            jobs = [pool.columns[n].job for n in filled]
            assert len(set(jobs)) == len(jobs)
            assert fits_greedily(pool, filled) == filled
            assert validate(inst, schedule_of(pool, filled, "fill")).ok


def test_seeds_are_checked():
    inst = _fig5()
    good = get_policy("fifo").solve(inst)
    with pytest.raises(ValueError, match="seeds: name 'oasis\\+fill' is taken"):
        bracket(inst, seeds={"oasis+fill": good})
    with pytest.raises(ValueError, match="seeds: name 'lp-greedy' is taken"):
        bracket(inst, seeds={"lp-greedy": good})
    bad = get_policy("oasis").solve(_fig5(seed=2))  # another instance's: overfills this one
    with pytest.raises(ValueError, match=r"seeds\['other'\]: not a valid schedule"):
        bracket(inst, seeds={"other": bad})
    with pytest.raises(ValueError, match="cg_gap"):
        bracket(inst, ColgenOptions(cg_gap=1.0))


def test_a_loose_cg_gap_still_gives_a_valid_bracket():
    inst = _fig5(servers=12, seed=0)
    opt = OfflinePolicy().solve(inst).total_utility
    br = bracket(inst, ColgenOptions(cg_gap=0.05), time_limit=None, seeds=policy_schedules(inst))
    assert br.lower <= opt + TOL and br.upper >= opt - TOL and validate(inst, br.schedule).ok


def _fig5(servers=3, seed=1):
    from oasis_opt.workloads import paper_fig5

    return paper_fig5(seed, servers=servers, priority=(50.0, 100.0))


def test_every_iterations_lagrangian_bound_is_valid_and_stops_early_stay_valid():
    inst = _fig5()
    opt = OfflinePolicy().solve(inst).total_utility
    full = bracket(inst, time_limit=None)
    assert full.converged and full.iterations > 3
    for h in full.history:  # every priced point gave a bound on OPT (and on LP(14))
        assert h["bound"] >= opt - TOL and h["best_bound"] >= full.upper - TOL
    for cap in (1, 2, 3):
        early = bracket(inst, ColgenOptions(max_iterations=cap), time_limit=None)
        assert early.iterations == cap and not early.converged
        assert early.upper >= opt - TOL  # the Lagrangian bound, not the master's value
        assert early.lower <= opt + TOL and validate(inst, early.schedule).ok
    # stopped after one round the master value is below OPT here: it is not what is reported
    one = bracket(inst, ColgenOptions(max_iterations=1), time_limit=None)
    assert one.lp_value < opt < one.upper


def test_lagrangian_bound_at_arbitrary_prices_bounds_the_optimum():
    inst = _fig5(servers=6)
    opt = OfflinePolicy().solve(inst).total_utility
    pool = ColumnPool(inst)
    rng = np.random.default_rng(0)
    for scale in (0.0, 0.1, 1.0, 10.0):
        prices = rng.random(pool.shape) * scale
        prices[0] = 0.0
        assert lagrangian_bound(pool, prices, price_jobs(inst, prices)) >= opt - TOL


def test_pooled_master_is_a_relaxation_of_the_per_server_master():
    inst = _fig5(servers=6)
    pool = ColumnPool(inst)
    pool.add(columns_of(inst, get_policy("oasis").solve(inst)))
    values = {}
    for pooled in (True, False):
        state = CGState()
        master = RestrictedMaster(pool, pooled=pooled)
        master.sync()
        out = column_generation(pool, master, state, ColgenOptions(smoothing=0.0))
        assert out["converged"]
        values[pooled] = out["value"]
        assert state.best_bound >= out["value"] - TOL
    assert values[True] >= values[False] - TOL


def test_stopped_early_the_bracket_is_still_valid():
    inst = _fig5(servers=12, seed=0)
    opt = OfflinePolicy().solve(inst).total_utility
    for rounds, nodes in ((1, 0), (2, 1), (4, None)):
        br = bracket(inst, ColgenOptions(max_iterations=rounds, node_limit=nodes),
                     time_limit=None)
        assert validate(inst, br.schedule).ok and br.iterations == rounds
        assert br.lower <= opt + TOL and br.upper >= opt - TOL
        assert br.schedule.stats["stopped_by"] == "iteration_limit"
    # no pricing round at all: the bound is the trivial one (every job at f_i(0)), still finite
    # and valid, and the result is writable as JSON
    none = bracket(inst, ColgenOptions(max_iterations=0), time_limit=None)
    assert none.iterations == 0 and math.isfinite(none.upper) and none.upper >= opt - TOL
    assert validate(inst, none.schedule).ok
    dumps(result_to_dict(inst, none.schedule))


def test_a_time_limit_spent_before_pricing_still_gives_a_valid_bracket():
    # the seed policy alone outlasts a 1 ns limit: no pricing round, no integer master
    inst = _fig5(servers=12, seed=0)
    br = bracket(inst, time_limit=1e-9)
    assert br.iterations == 0 and br.mip_status == "time_limit" and br.source == "oasis"
    assert validate(inst, br.schedule).ok and br.schedule.stats["stopped_by"] == "time_limit"
    assert br.lower == pytest.approx(br.seed_utility) and br.upper >= br.lower


def test_a_bound_below_the_schedule_is_an_error_not_clamped(monkeypatch):
    import oasis_opt.offline.colgen as colgen

    inst = _fig5()
    good = bracket(inst, ColgenOptions(max_iterations=1), time_limit=None)
    monkeypatch.setattr(colgen, "lagrangian_bound", lambda pool, prices, plans: 1.0)
    with pytest.raises(RuntimeError, match=r"column-generation upper bound 1\.0 .* feasible "
                                           r"value [0-9.]+ \(maximisation\)"):
        bracket(inst, ColgenOptions(max_iterations=1), time_limit=None)
    assert good.upper >= good.lower


def test_policy_and_empty_instance():
    inst = _fig5(servers=6)
    s = solve(inst, "offline-colgen", max_iterations=30)
    assert validate(inst, s).ok
    st = s.stats
    assert st["lower"] == pytest.approx(s.total_utility) and st["upper"] >= st["lower"]
    assert st["bound"] == st["upper"] and "gap" in st and st["seed_policy"] == "oasis"
    empty = Instance(3, DEFAULT_RESOURCES, (Server("w", {"gpu": 1.0, "bw": 10.0}),),
                     (Server("p", {"bw": 10.0}),), ())
    e = solve(empty, "offline-colgen")
    assert validate(empty, e).ok and e.total_utility == 0.0
    assert e.stats["upper"] == 0.0 and e.stats["gap"] == 0.0 and e.stats["status"] == "optimal"
    with pytest.raises(ValueError, match="time_limit"):
        bracket(inst, time_limit=-1)
    with pytest.raises(TypeError, match="time_limt"):
        get_policy("offline-colgen").solve(inst, time_limt=5)
    with pytest.raises(ValueError, match="lp_solver"):
        bracket(inst, ColgenOptions(lp_solver="barrier"))


@settings(max_examples=40, deadline=None)
@given(tiny)
def test_ruin_and_recreate_never_loses_and_stays_feasible(inst):
    pool = ColumnPool(inst)
    start = pool.add(columns_of(inst, get_policy("fifo").solve(inst)))
    score = np.arange(inst.I, dtype=float)
    best, rounds = ruin_and_recreate(pool, start, [np.zeros(pool.shape)], score,
                                     LnsOptions(rounds=5))
    assert rounds == 5
    worth = lambda cols: sum(pool.columns[n].utility for n in cols)  # noqa: E731
    assert worth(best) >= worth(start) - 1e-9
    assert fits_greedily(pool, best) == best  # within capacities, one column per job
    assert validate(inst, schedule_of(pool, best, "lns")).ok  # the validator is the judge
    again, _ = ruin_and_recreate(pool, start, [np.zeros(pool.shape)], score, LnsOptions(rounds=5))
    assert again == best  # seeded: deterministic


def test_lns_and_seed_with_options():
    inst = _fig5(servers=12, seed=0)
    opt = OfflinePolicy().solve(inst).total_utility
    s = solve(inst, "offline-colgen", seed_with=("drf", "dorm"), lns_rounds=3,
              max_iterations=4)
    assert validate(inst, s).ok and s.stats["lns_rounds"] == 3
    assert {"drf", "dorm"} <= set(s.stats["candidates"])
    assert s.stats["lower"] <= opt + TOL <= s.stats["upper"] + 2 * TOL
    with pytest.raises(ValueError, match="lns_rounds"):
        bracket(inst, ColgenOptions(lns_rounds=-1))


def test_lns_window_reaches_the_search(monkeypatch):
    """``lns_window`` is the window ruin-and-recreate re-plans (a bracket that dropped it would
    search with ``LnsOptions``' default): a spy on the module's ``ruin_and_recreate`` records
    the options each bracket hands it; the schedule stays valid at either window."""
    import oasis_opt.offline.colgen as colgen

    seen = []
    real = colgen.ruin_and_recreate

    def spy(pool, start, prices, score, search, **kw):
        seen.append(search.window)
        return real(pool, start, prices, score, search, **kw)

    monkeypatch.setattr(colgen, "ruin_and_recreate", spy)
    inst = _fig5(servers=6, seed=1)
    for window in (0.3, colgen.LNS_WINDOW):
        s = solve(inst, "offline-colgen", lns_rounds=2, lns_window=window, max_iterations=2)
        assert validate(inst, s).ok and s.stats["lns_rounds"] == 2
    assert seen == [0.3, colgen.LNS_WINDOW]


@settings(max_examples=100, deadline=None)
@given(tiny, st.integers(0, 2**32 - 1))
def test_could_complete_never_rejects_a_job_the_dual_subroutine_can_plan(inst, seed):
    """``fill_residual`` skips the DP when ``could_complete`` says no. A screen stricter than
    the DP (PSs counted without ceil(k b_i / B_i), N_i applied per server instead of per slot,
    a fit without ``FIT_EPS``) would silently drop jobs that fit from every fill and every
    ruin-and-recreate round. Rooms: the full capacity, random shares of it, and none."""
    from oasis_opt.online.dual import Market, best_schedule

    rng = np.random.default_rng(seed)
    pool = ColumnPool(inst)
    full = pool.cap.reshape(pool.shape)
    zero = np.zeros(pool.shape)
    H = inst.H
    for room in (full, full * rng.choice([0.0, 0.5, 1.0], size=full.shape),
                 full * rng.uniform(0, 1, size=full.shape), zero):
        market = Market(zero[:, :H], zero[:, H:], room[:, :H], room[:, H:])
        for i in range(inst.I):
            planned = best_schedule(inst, i, market).completion is not None
            assert could_complete(inst, i, room) or not planned, (i, room)
            if not room.any():
                assert not could_complete(inst, i, room) or inst.work[i] == 0


def test_could_complete_on_a_hand_checked_room():
    """One job, N = 2, W = 4 worker-slots, arriving at slot 1 of T = 4, one PS per worker
    (b = B); two worker servers w0, w1 and one PS server. Room for 1 worker (on w0) and 1 PS a
    slot in slots 1-3: 3 < 4 worker-slots, no plan; in slots 1-4: 4, a plan. Room for 2
    workers on w0 but 1 PS a slot in slots 1-3: the PS rule caps each slot at 1, no plan (a
    screen without the PS rule says yes). Room for 2 workers on each of w0, w1 and 5 PSs in
    slot 1 only: N = 2 caps the slot at 2, no plan (a screen capping per server says yes)."""
    from oasis_opt.model import Job, Utility

    unit = {"cpu": 1.0, "bw": 1.0}
    job = Job("j", 1, 1, 2, 2.0, unit, unit, Utility.constant(1.0))
    inst = Instance(4, DEFAULT_RESOURCES, (Server("w0", unit), Server("w1", unit)),
                    (Server("p", unit),), (job,))
    assert inst.work[0] == 4 and inst.ps_needed(0, 2) == 2
    room = np.zeros((5, 3, len(DEFAULT_RESOURCES)))
    room[1:4, [0, 2]] = 1.0
    assert not could_complete(inst, 0, room)
    room[4, [0, 2]] = 1.0
    assert could_complete(inst, 0, room)
    room[4] = 0.0
    room[1:4, 0] = 2.0
    assert not could_complete(inst, 0, room)
    room[:] = 0.0
    room[1, :2], room[1, 2] = 2.0, 5.0
    assert not could_complete(inst, 0, room)
