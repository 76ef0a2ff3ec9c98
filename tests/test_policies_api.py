"""``oasis_opt.solve``: one calling convention, options told apart by the policy's signatures,
unknown keywords refused by name; online policies take no time limit."""
from __future__ import annotations

import pytest

import oasis_opt
from oasis_opt import solve, validate
from oasis_opt.model.policy import OnlinePolicy
from oasis_opt.policies import (available_policies, keyword_names, policy_factory,
                                run_option_names)
from oasis_opt.workloads import paper_sim


@pytest.fixture(scope="module")
def inst():
    return paper_sim(4, jobs=8, horizon=12, worker_servers=3, ps_servers=3)


def test_policy_options_reach_the_constructor(inst):
    """``backend="jax"`` given to ``solve`` runs JAX (it used to be dropped silently)."""
    jx = solve(inst, "oasis", backend="jax", granularity="chunk")
    assert jx.stats["backend"] == "jax" and jx.stats["granularity"] == "chunk"
    assert validate(inst, jx).ok
    assert solve(inst, "oasis").stats["backend"] == "numpy"


def test_run_options_reach_solve(inst):
    quiet, shown = solve(inst, "greedy"), solve(inst, "greedy", progress=True,
                                                placement="round-robin")
    assert validate(inst, shown).ok
    assert shown.total_utility == solve(inst, "greedy", placement="round-robin").total_utility
    assert validate(inst, quiet).ok


@pytest.mark.parametrize("policy", ["oasis", "greedy", "drf", "offline", "offline-cpsat",
                                    "offline-colgen"])
def test_an_unknown_keyword_is_a_type_error_naming_it(inst, policy):
    with pytest.raises(TypeError, match="'time_limt'") as err:
        solve(inst, policy, time_limt=5)
    assert f"policy {policy!r}" in str(err.value) and "run options: " in str(err.value)


@pytest.mark.parametrize("policy", ["oasis", "oasis-topo", "fifo", "tiresias", "greedy"])
def test_online_policies_refuse_a_time_limit(inst, policy):
    with pytest.raises(TypeError, match="time_limit.*no time limit"):
        solve(inst, policy, time_limit=5)


def test_every_registered_policy_splits_its_options_cleanly():
    """No policy constructor or ``solve`` swallows unknown options (``**kwargs``); online
    policies' ``solve`` takes exactly ``progress`` (they run the simulator), the offline
    solvers' exactly ``time_limit`` and ``progress``, so a keyword is never both a policy option
    and a run option and the split is unambiguous."""
    offline = set()
    for name in available_policies():
        factory = policy_factory(name)
        assert keyword_names(factory) is not None, name
        built = factory()
        runs = run_option_names(built)
        if isinstance(built, OnlinePolicy):
            assert runs == {"progress"}, name
        else:
            assert runs == {"time_limit", "progress"}, name
            offline.add(name)
        assert not runs & keyword_names(factory), name
    assert offline == {"offline", "offline-cpsat", "offline-colgen", "offline-topo"}


@pytest.mark.parametrize("policy, option", [("offline-cpsat", "node_limit"),
                                            ("offline", "deterministic_time"),
                                            ("offline-colgen", "mip_gap")])
def test_an_option_an_offline_solver_does_not_have_is_an_error_naming_it(inst, policy, option):
    # CP-SAT has no node limit, HiGHS no deterministic time, column generation no MIP gap
    with pytest.raises((TypeError, ValueError), match=option):
        solve(inst, policy, **{option: 1})


def test_get_policy_and_solve_agree(inst):
    a = oasis_opt.get_policy("oasis", u_scale=0.5).solve(inst)
    b = solve(inst, "oasis", u_scale=0.5)
    assert a.admitted == b.admitted and a.total_utility == b.total_utility
    with pytest.raises(TypeError, match="'options'"):  # one convention: no options={...} dict
        solve(inst, "oasis", options={"u_scale": 0.5})


@pytest.mark.parametrize("policy, options, param", [
    ("greedy", {"colour": "red"}, "colour"),  # an option neither the policy nor its run takes
    ("oasis", {"time_limit": 5}, "time_limit"),  # a run option an online policy does not take
    ("greedy", {"placement": "nowhere"}, "options"),  # a value refused without naming it
    ("offline", {"node_limit": -1}, "node_limit"),  # a value refused by name
    ("nope", {}, "policy"),  # no such policy
])
def test_build_raises_an_option_error_naming_the_parameter(policy, options, param):
    """Catches the router refusing in words only: every refusal of ``policies.build`` is an
    ``OptionError`` whose ``.param`` names the parameter at fault, so the command line and the
    service can map it to their own flag or field (and it stays a ValueError and TypeError)."""
    from oasis_opt.policies import OptionError, build

    with pytest.raises(OptionError) as err:
        build(policy, options)
    assert err.value.param == param, err.value
    assert isinstance(err.value, ValueError) and isinstance(err.value, TypeError)
    assert str(err.value) == f"{param}: {err.value.message}" or policy == "nope"


def test_build_splits_policy_and_run_options():
    """Catches a router that sends a run option to the constructor or drops it: ``build``
    returns the built policy and exactly the keywords its ``solve`` takes."""
    from oasis_opt.policies import build

    policy, run = build("offline", {"time_limit": 5.0, "progress": False, "node_limit": 3})
    assert run == {"time_limit": 5.0, "progress": False}
    assert type(policy).__name__ == "OfflinePolicy"


def test_solve_names_an_option_a_run_refuses(inst):
    """Catches a run-time refusal (a MILP above ``memory_budget_gb``) that reaches the caller
    without the option's name, which the command line needs to name ``--option
    memory_budget_gb``."""
    from oasis_opt.policies import OptionError

    with pytest.raises(OptionError) as err:
        solve(inst, "offline", memory_budget_gb=1e-6)
    assert err.value.param == "memory_budget_gb"
