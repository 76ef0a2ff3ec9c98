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
