"""The offline solvers' parameter objects (issue #28): ``SolverLimits`` and ``Outcome`` (the
solver layer), ``ColgenOptions`` and ``LnsOptions`` (column generation).

Each field's check raises ``ValueError`` naming the field (every ``raise`` of the objects has a
case below); the defaults are the old keyword defaults; a call through the objects gives exactly
what the default call gives, and what the keyword call gave before the objects existed (values
recorded at commit 60d833d, deterministic limits only: nothing here depends on the clock).
"""
from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

import oasis_opt.offline as offline
from oasis_opt.offline.colgen import (CG_GAP, CG_SHARE, LNS_NOISE, LNS_ROUNDS, LNS_SHARE,
                                      LNS_WINDOW, POLICY_OPTIONS, POOLED_SHARE, SMOOTHING,
                                      CGState, ColgenOptions, ColgenPolicy, ColumnPool,
                                      LnsOptions, RestrictedMaster, bracket, column_generation,
                                      columns_of, ruin_and_recreate)
from oasis_opt.offline.lp import MIP_GAP, NO_LIMITS, Outcome, SolverLimits, finish
from oasis_opt.offline.milp_arrays import build_milp
from oasis_opt.offline.solver import solve_in_child, solve_program
from oasis_opt.policies import OptionError, build, get_policy, keyword_names, policy_factory


@pytest.fixture(scope="module")
def inst():
    from oasis_opt.workloads import generate

    return generate("paper-fig5", seed=1)


@pytest.fixture(scope="module")
def milp(inst):
    return build_milp(inst).lp


# ---- every check, one bad value each: ValueError naming the field ---------------------------
BAD = [
    (SolverLimits, {"time_limit": 0}, "time_limit"),
    (SolverLimits, {"time_limit": -1.0}, "time_limit"),
    (SolverLimits, {"time_limit": math.nan}, "time_limit"),
    (SolverLimits, {"time_limit": "5"}, "time_limit"),
    (SolverLimits, {"deadline": math.nan}, "deadline"),
    (SolverLimits, {"deadline": "now"}, "deadline"),
    (SolverLimits, {"node_limit": -1}, "node_limit"),
    (SolverLimits, {"node_limit": 1.5}, "node_limit"),
    (SolverLimits, {"node_limit": True}, "node_limit"),
    (SolverLimits, {"solution_limit": 0}, "solution_limit"),
    (SolverLimits, {"iteration_limit": -1}, "iteration_limit"),
    (SolverLimits, {"deterministic_time": 0}, "deterministic_time"),
    (SolverLimits, {"deterministic_time": math.inf}, "deterministic_time"),
    (SolverLimits, {"mip_gap": -1e-3}, "mip_gap"),
    (SolverLimits, {"mip_gap": math.inf}, "mip_gap"),
    (SolverLimits, {"mip_gap": None}, "mip_gap"),
    (Outcome, {"kind": "done"}, "kind"),
    (Outcome, {"kind": "limit"}, "limit"),  # a limit names what stopped it
    (Outcome, {"kind": "limit", "limit": "patience"}, "limit"),
    (Outcome, {"kind": "optimal", "x": np.zeros((2, 2))}, "x"),
    (Outcome, {"kind": "optimal", "duals": np.zeros((2, 2))}, "duals"),
    (Outcome, {"kind": "optimal", "bound": "1.0"}, "bound"),
    (ColgenOptions, {"seed_policy": ""}, "seed_policy"),
    (ColgenOptions, {"seed_policy": 3}, "seed_policy"),
    (ColgenOptions, {"backend": "cuda"}, "backend"),
    (ColgenOptions, {"max_iterations": -1}, "max_iterations"),
    (ColgenOptions, {"max_iterations": 2.0}, "max_iterations"),
    (ColgenOptions, {"node_limit": -1}, "node_limit"),
    (ColgenOptions, {"cg_share": 0.0}, "cg_share"),
    (ColgenOptions, {"cg_share": "half"}, "cg_share"),
    (ColgenOptions, {"pooled_share": 1.5}, "pooled_share"),
    (ColgenOptions, {"lns_share": math.nan}, "lns_share"),
    (ColgenOptions, {"smoothing": 1.0}, "smoothing"),
    (ColgenOptions, {"cg_gap": 1.0}, "cg_gap"),
    (ColgenOptions, {"cg_gap": -0.1}, "cg_gap"),
    (ColgenOptions, {"lns_rounds": -1}, "lns_rounds"),
    (ColgenOptions, {"lns_rounds": True}, "lns_rounds"),
    (ColgenOptions, {"lns_window": 0.0}, "lns_window"),
    (ColgenOptions, {"lp_solver": "barrier"}, "lp_solver"),
    (ColgenOptions, {"seed": -1}, "seed"),
    (ColgenOptions, {"seed": 1.5}, "seed"),
    (LnsOptions, {}, "rounds or deadline"),  # one of them is needed
    (LnsOptions, {"rounds": -1}, "rounds"),
    (LnsOptions, {"rounds": 2, "deadline": math.nan}, "deadline"),
    (LnsOptions, {"rounds": 2, "window": 0.0}, "window"),
    (LnsOptions, {"rounds": 2, "window": 1.5}, "window"),
    (LnsOptions, {"rounds": 2, "noise": -1.0}, "noise"),
    (LnsOptions, {"rounds": 2, "noise": math.inf}, "noise"),
    (LnsOptions, {"rounds": 2, "seed": -1}, "seed"),
]


@pytest.mark.parametrize("cls, kwargs, field", BAD,
                         ids=[f"{c.__name__}-{f}-{i}" for i, (c, _, f) in enumerate(BAD)])
def test_a_bad_value_raises_a_value_error_naming_the_field(cls, kwargs, field):
    with pytest.raises(ValueError, match=f"^{field}: ") as err:
        cls(**kwargs)
    assert not isinstance(err.value, OptionError)  # plain ValueError: the router names it


def test_good_values_are_kept_as_given():
    lim = SolverLimits(time_limit=5, deadline=-math.inf, node_limit=np.int64(3),
                       solution_limit=1, iteration_limit=0, deterministic_time=0.5, mip_gap=0.0)
    assert lim.node_limit == 3 and lim.mip_gap == 0.0 and lim.deadline == -math.inf
    opts = ColgenOptions(backend="reference", max_iterations=0, node_limit=0, cg_share=1.0,
                         smoothing=0.0, cg_gap=0.0, lns_rounds=0, lp_solver="simplex", seed=7)
    assert (opts.max_iterations, opts.lns_rounds, opts.seed) == (0, 0, 7)
    assert LnsOptions(deadline=0.0).rounds is None and LnsOptions(rounds=0).deadline is None
    assert Outcome("limit", limit="nodes", x=np.zeros(2), bound=math.inf).limit == "nodes"


def test_the_objects_are_frozen_and_keyword_only():
    import dataclasses

    for obj in (SolverLimits(), ColgenOptions(), LnsOptions(rounds=1), Outcome("error")):
        field = dataclasses.fields(obj)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, field, None)
    for cls in (SolverLimits, ColgenOptions, LnsOptions):
        with pytest.raises(TypeError):
            cls(1)
    # replace() checks again
    with pytest.raises(ValueError, match="^cg_gap: "):
        dataclasses.replace(ColgenOptions(), cg_gap=2.0)


# ---- the entry points refuse anything else, naming the parameter ------------------------------
def test_entry_points_refuse_a_dict_or_a_mix(inst, milp):
    with pytest.raises(ValueError, match="^limits: expected SolverLimits, got dict"):
        solve_program(milp, {"node_limit": 1})
    with pytest.raises(ValueError, match="^options: expected ColgenOptions, got dict"):
        bracket(inst, {"cg_gap": 0.1})
    with pytest.raises(ValueError, match="^options: expected ColgenOptions, got dict"):
        ColgenPolicy({"cg_gap": 0.1})
    with pytest.raises(ValueError, match="^options: give a ColgenOptions or its fields"):
        ColgenPolicy(ColgenOptions(), cg_gap=0.1)
    with pytest.raises(TypeError, match="'lns_share'"):  # a bracket option, not the policy's
        ColgenPolicy(lns_share=0.3)
    with pytest.raises(ValueError, match="^cg_share: "):
        ColgenPolicy(cg_share=2.0)


def test_solve_in_child_needs_a_time_limit_and_no_deadline(milp):
    with pytest.raises(ValueError, match="^limits: expected SolverLimits"):
        solve_in_child(milp, None)
    with pytest.raises(ValueError, match="^time_limit: solve_in_child needs one"):
        solve_in_child(milp, SolverLimits(node_limit=1))
    with pytest.raises(ValueError, match="^deadline: "):
        solve_in_child(milp, SolverLimits(time_limit=60, deadline=0.0))


# ---- defaults: the old keyword defaults --------------------------------------------------------
def test_defaults_are_the_old_keyword_defaults():
    lim = SolverLimits()
    assert lim == NO_LIMITS and lim.mip_gap == MIP_GAP == 1e-6
    assert all(v is None for v in (lim.time_limit, lim.deadline, lim.node_limit,
                                   lim.solution_limit, lim.iteration_limit,
                                   lim.deterministic_time))
    old = {"seed_policy": "oasis", "backend": "numpy", "max_iterations": None,
           "node_limit": None, "cg_share": 0.7, "pooled_share": 0.4, "smoothing": 0.5,
           "cg_gap": 1e-7, "lns_rounds": None, "lns_share": 0.5, "lp_solver": "ipm", "seed": 0,
           "lns_window": 0.05}  # lns_window: new (issue #29), LnsOptions' window default
    assert ColgenOptions() == ColgenOptions(**old)
    assert (CG_SHARE, POOLED_SHARE, SMOOTHING, CG_GAP, LNS_SHARE) == (0.7, 0.4, 0.5, 1e-7, 0.5)
    lns = LnsOptions(rounds=1)
    assert (lns.window, lns.noise, lns.seed) == (LNS_WINDOW, LNS_NOISE, 0) == (0.05, 0.5, 0)
    assert LNS_ROUNDS == 20
    sig = inspect.signature(bracket).parameters
    assert sig["time_limit"].default == 600.0 and sig["seeds"].default is None
    assert sig["progress"].default is False and sig["policy_name"].default == "offline-colgen"
    sig = inspect.signature(solve_program).parameters
    assert {k: sig[k].default for k in ("backend", "relax", "seed", "initial",
                                        "highs_options")} == {
        "backend": "highs", "relax": False, "seed": 0, "initial": None, "highs_options": None}


def test_the_policy_keeps_its_option_names_defaults_and_errors():
    """The registry reads ``ColgenPolicy``'s signature: the same options (the twelve old ones and
    ``lns_window``), in the same order, with the same defaults; a bad value is an
    ``OptionError`` on that option."""
    old = ["seed_policy", "backend", "max_iterations", "node_limit", "cg_share", "pooled_share",
           "smoothing", "cg_gap", "lns_rounds", "lns_window", "lp_solver", "seed", "seed_with"]
    params = inspect.signature(policy_factory("offline-colgen")).parameters
    assert list(params) == old == [*POLICY_OPTIONS, "seed_with"]
    defaults = ColgenOptions()
    for name in POLICY_OPTIONS:
        assert params[name].default == getattr(defaults, name), name
    assert params["seed_with"].default == ()
    assert keyword_names(policy_factory("offline-colgen")) == set(old)
    policy, run = build("offline-colgen", {"node_limit": 2, "max_iterations": 3,
                                           "time_limit": 5.0, "seed_with": ["drf"]})
    assert policy.options == ColgenOptions(node_limit=2, max_iterations=3)
    assert policy.seed_with == ("drf",) and run == {"time_limit": 5.0}
    for option, value in (("cg_share", 2), ("node_limit", -1), ("lns_rounds", -1),
                          ("lns_window", 0.0), ("lns_window", 1.5),
                          ("lp_solver", "barrier"), ("backend", "cuda"), ("smoothing", 1)):
        with pytest.raises(OptionError) as err:
            build("offline-colgen", {option: value})
        assert err.value.param == option
    for option in ("lns_share", "mip_gap", "time_limt"):
        with pytest.raises(OptionError) as err:
            build("offline-colgen", {option: 0.5})
        assert err.value.param == option


# ---- a call through the objects gives exactly the default call's result ------------------------
def _rows(schedule):
    a = schedule.allocations
    return np.column_stack([a.job, a.slot, a.server, a.role, a.count])


def _same_bracket(a, b):
    assert (a.lower, a.upper, a.gap, a.lp_value, a.iterations, a.columns, a.source,
            a.mip_status, a.lns_rounds, a.candidates) == \
        (b.lower, b.upper, b.gap, b.lp_value, b.iterations, b.columns, b.source, b.mip_status,
         b.lns_rounds, b.candidates)
    drop = lambda h: [{k: v for k, v in r.items() if k != "t"} for r in h]  # noqa: E731
    assert drop(a.history) == drop(b.history)
    np.testing.assert_array_equal(_rows(a.schedule), _rows(b.schedule))


def test_bracket_through_the_options_is_the_default_call(inst):
    default = bracket(inst, time_limit=None)
    _same_bracket(default, bracket(inst, ColgenOptions(), time_limit=None))
    _same_bracket(default, bracket(inst, None, time_limit=None))


def test_bracket_under_deterministic_limits_is_what_the_keyword_call_gave(inst):
    opts = ColgenOptions(max_iterations=3, node_limit=2, lns_rounds=3, seed=2)
    br = bracket(inst, opts, time_limit=None)
    # recorded from bracket(inst, time_limit=None, max_iterations=3, node_limit=2,
    # lns_rounds=3, seed=2) before the options object
    assert br.lower == pytest.approx(448.0169396606672, rel=1e-9)
    assert br.upper == pytest.approx(653.1131470614827, rel=1e-9)
    assert (br.iterations, br.lns_rounds, br.mip_status) == (3, 3, "optimal")
    assert br.schedule.stats["stopped_by"] == "iteration_limit"
    # the policy, built from keywords as the registry and the CLI do, gives the same schedule
    for policy in (get_policy("offline-colgen", max_iterations=3, node_limit=2, lns_rounds=3,
                              seed=2), ColgenPolicy(opts)):
        np.testing.assert_array_equal(_rows(policy.solve(inst)), _rows(br.schedule))


def test_column_generation_without_options_prices_without_smoothing(inst):
    out = {}
    for options in (None, ColgenOptions(smoothing=0.0)):
        pool = ColumnPool(inst)
        pool.add(columns_of(inst, get_policy("oasis").solve(inst)))
        master = RestrictedMaster(pool, pooled=True)
        master.sync()
        state = CGState()
        res = column_generation(pool, master, state, options)
        out[options is None] = (res, state.best_bound, state.iterations, len(pool))
    assert out[True] == out[False]


def test_ruin_and_recreate_through_lns_options_is_what_the_keyword_call_gave(inst):
    pool = ColumnPool(inst)
    start = pool.add(columns_of(inst, get_policy("fifo").solve(inst)))
    score = np.arange(inst.I, dtype=float)
    prices = [np.zeros(pool.shape)]
    best, rounds = ruin_and_recreate(pool, start, prices, score, LnsOptions(rounds=4, seed=1))
    # recorded from ruin_and_recreate(pool, start, prices, score, rounds=4, seed=1)
    assert (best, rounds) == ([1, 2, 5, 3, 6, 4], 4)
    again = ruin_and_recreate(pool, start, prices, score,
                              LnsOptions(rounds=4, seed=1, window=LNS_WINDOW, noise=LNS_NOISE))
    assert again == (best, rounds)


def test_solve_program_through_limits_is_the_default_call(milp):
    def same(a, b):
        assert (a.status, a.objective, a.bound, a.gap, a.incumbent) == \
            (b.status, b.objective, b.bound, b.gap, b.incumbent)
        np.testing.assert_array_equal(a.x, b.x)

    default = solve_program(milp)
    same(default, solve_program(milp, SolverLimits()))
    same(default, solve_program(milp, NO_LIMITS, backend="highs", seed=0))
    same(default, solve_program(milp, SolverLimits(mip_gap=MIP_GAP)))
    start = np.zeros(milp.n_cols)
    res = solve_program(milp, SolverLimits(node_limit=1), initial=start)
    # recorded from solve_program(lp, node_limit=1, initial=start) before SolverLimits
    assert res.status == "node_limit" and res.incumbent == "solver"
    assert res.objective == pytest.approx(477.2437558168683, rel=1e-9)
    assert res.bound == pytest.approx(491.4236798114979, rel=1e-9)
    lp = solve_program(milp, SolverLimits(iteration_limit=5), relax=True)
    assert lp.status == "iteration_limit" and lp.x is None and lp.bound is None


def test_until_counts_the_time_limit_into_the_deadline():
    assert SolverLimits(time_limit=5).until(10.0) == SolverLimits(deadline=15.0)
    assert SolverLimits(time_limit=5, deadline=12.0).until(10.0).deadline == 12.0
    assert SolverLimits(time_limit=5, deadline=20.0).until(10.0).deadline == 15.0
    lim = SolverLimits(node_limit=3)
    assert lim.until(10.0) is lim


def test_finish_reads_the_outcome(milp):
    x = np.zeros(milp.n_cols)
    res = finish(milp, "highs", Outcome("limit", limit="nodes", x=x, bound=math.inf))
    assert res.status == "node_limit" and res.bound is None and res.incumbent == "solver"
    res = finish(milp, "highs", Outcome("error", x=x, bound=1.0), initial=x)
    assert res.status == "error" and res.x is None and res.bound is None


def test_the_objects_are_exported_from_the_offline_package():
    for name in ("SolverLimits", "ColgenOptions", "LnsOptions", "Outcome"):
        assert name in offline.__all__ and getattr(offline, name) is not None
    assert offline.SolverLimits is SolverLimits and offline.ColgenOptions is ColgenOptions
    assert offline.LnsOptions is LnsOptions and offline.Outcome is Outcome
