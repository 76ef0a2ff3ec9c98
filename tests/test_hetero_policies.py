"""Every registered policy on clusters with accelerator types: a valid schedule, or one clear line
saying it does not support types yet (the policies listed in ``NOT_YET``); the simulator and the
placements hold jobs to their types; progress is counted by type."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_opt import available_policies, solve, validate
from oasis_opt.model import (DEFAULT_RESOURCES, Instance, Job, JobType, Server,
                             UnsupportedInstance, Utility)
from oasis_opt.model.policy import OnlinePolicy
from oasis_opt.model.schedule import work_done
from oasis_opt.sim import PolicyError, simulate
from oasis_opt.sim.placement import PLACEMENTS, FirstFit, get_placement
from oasis_opt.testing import hetero_instances

# policies that refuse typed instances for now (the topology-aware OASiS's cost model reads one
# worker demand per job)
NOT_YET = ("oasis-topo",)
TYPE_AGNOSTIC = ("fifo", "drf", "rrh", "dorm", "tiresias", "optimus", "greedy", "priority-degrade",
                 "priority-kill", "priority-nopreempt")
EXACT = ("offline", "offline-cpsat")


def _rows(schedule) -> list[tuple]:
    return sorted(map(tuple, schedule.allocations.rows()))


def _options(policy: str, placement: str, seed: int) -> dict:
    """Run options a policy takes: the placement and seed of the baselines, the seed of the
    rest (none for the greedy baseline and OASiS)."""
    from inspect import signature

    from oasis_opt.policies import policy_factory

    takes = signature(policy_factory(policy)).parameters
    return {k: v for k, v in (("placement", placement), ("seed", seed)) if k in takes}


@pytest.mark.parametrize("policy", sorted(available_policies()))
@settings(max_examples=25, deadline=None)
@given(inst=hetero_instances(max_jobs=4, max_horizon=6), seed=st.integers(0, 3),
       placement=st.sampled_from(sorted(PLACEMENTS)))
def test_every_registered_policy_gives_valid_schedules_on_typed_instances(policy, inst, seed,
                                                                          placement):
    """A valid, reproducible schedule, or (``NOT_YET``) one clear line refusing types."""
    opts = _options(policy, placement, seed)
    if policy == "oasis-adaptive":  # U fixed in advance: here the instance's own
        from oasis_opt.online import history_u, pricing_document

        u = (history_u([inst]) if inst.I
             else {"U_worker": {r: 1.0 for r in inst.resources}, "U_ps": {}})
        low = min(v for pool in u.values() for v in pool.values())
        opts.update(pricing=pricing_document(u, low * 1e-3), grid=[low * 1e-6, low * 1e-3, low])
    if policy in NOT_YET:
        with pytest.raises(UnsupportedInstance) as err:
            solve(inst, policy, **opts)
        text = str(err.value)
        assert "\n" not in text and f"'{policy}' does not support accelerator types yet" in text
        return
    first = solve(inst, policy, **opts)
    report = validate(inst, first)
    assert report.ok, f"{policy}/{opts}: {report}"
    again = solve(inst, policy, **opts)
    assert _rows(again) == _rows(first) and again.completion == first.completion


@pytest.mark.parametrize("policy", TYPE_AGNOSTIC)
@settings(max_examples=40)
@given(inst=hetero_instances(max_jobs=6, max_horizon=8), seed=st.integers(0, 3),
       placement=st.sampled_from(sorted(PLACEMENTS)))
def test_type_agnostic_policies_give_valid_schedules_on_bigger_instances(policy, inst, seed,
                                                                          placement):
    first = solve(inst, policy, **_options(policy, placement, seed))
    assert validate(inst, first).ok, f"{policy}/{placement}: {validate(inst, first)}"


def test_the_exact_policies_prove_optimality_with_types():
    inst = _cluster(_job("a", {"v100": JobType(3), "k80": JobType(1)}, chunks=2),
                    _job("b", {"k80": JobType(2)}, chunks=2))
    for policy in EXACT:
        s = solve(inst, policy)
        assert validate(inst, s).ok and s.stats["proven_optimal"] and s.total_utility == 2.0


def test_the_cli_reports_the_refusal_as_bad_input(tmp_path, capsys):
    from oasis_opt.cli import main
    from oasis_opt.model.io import save_instance

    save_instance(_cluster(_job("a", {"v100": JobType(2)})), tmp_path / "i.json")
    code = main(["solve", str(tmp_path / "i.json"), "--policy", "oasis-topo", "--out",
                 str(tmp_path / "r.json")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0
    assert err.startswith("oasis-opt: error: --policy oasis-topo: policy 'oasis-topo' does not "
                          "support accelerator types yet")


# ---- the simulator: progress by type, and types enforced ------------------------------------------
_GPU = {"gpu": 4.0, "cpu": 16.0, "mem": 64.0, "storage": 100.0, "bw": 40.0}
_CPU = {"gpu": 0.0, "cpu": 64.0, "mem": 128.0, "storage": 100.0, "bw": 40.0}
_W = {"gpu": 1.0, "cpu": 1.0, "mem": 1.0, "bw": 5.0}
V0, K0, C0, P0 = 0, 1, 2, 3


def _job(jid, types, *, chunks=4, unit=1, span=False, chunk_time=3.0, arrival=1):
    return Job(jid, arrival, 1, chunks, chunk_time, dict(_W), {"cpu": 1.0, "bw": 20.0},
               Utility.constant(1.0), unit=unit, types=types, span_types=span)


def _cluster(*jobs, horizon=6):
    return Instance(horizon, DEFAULT_RESOURCES,
                    (Server("v0", dict(_GPU), accelerator="v100"),
                     Server("k0", dict(_GPU), accelerator="k80"),
                     Server("c0", dict(_CPU), accelerator="cpu")),
                    (Server("p0", {"cpu": 64.0, "mem": 64.0, "bw": 400.0}),), tuple(jobs))


class Scripted(OnlinePolicy):
    """Allocates the rows given per slot (to test the simulator's account)."""

    name = "scripted"

    def __init__(self, rows_by_slot):
        self.rows_by_slot = rows_by_slot

    def allocate(self, t, state):
        return self.rows_by_slot.get(t, [])


def test_progress_is_the_sum_of_the_workers_type_speeds():
    # 12 units: two V100 workers (2 x 3), one K80 (1), four CPU-mode workers (4), one more (1)
    cpu_mode = JobType(1, {"cpu": 8.0, "mem": 1.0, "bw": 5.0})
    inst = _cluster(_job("a", {"v100": JobType(3), "k80": JobType(1), "cpu": cpu_mode},
                         chunks=4, unit=1, chunk_time=3.0))
    assert inst.work.tolist() == [12]
    rows = {1: [(0, V0, 0, 2), (0, P0, 1, 1)], 2: [(0, K0, 0, 1), (0, P0, 1, 1)],
            3: [(0, C0, 0, 4), (0, P0, 1, 1)], 4: [(0, C0, 0, 1), (0, P0, 1, 1)]}
    sched = simulate(inst, Scripted(rows))
    assert sched.completion == (4,)  # 6 + 1 + 4 = 11 after slot 3, 12 after slot 4
    assert validate(inst, sched).ok
    assert work_done(inst, sched.allocations).tolist() == [12]


@settings(max_examples=30)
@given(inst=hetero_instances(max_jobs=5), policy=st.sampled_from(TYPE_AGNOSTIC))
def test_the_simulator_and_the_validator_count_the_same_work(inst, policy):
    """Two implementations of progress by type: the slot loop's credit (``remaining``) and the
    validator's ``work_done`` over the finished schedule."""
    state = {}

    class Spy(type(__import__("oasis_opt").get_policy(policy))):
        def on_slot_end(self, t, st_, completed):
            super().on_slot_end(t, st_, completed)
            state["remaining"] = st_.remaining.copy()

    sched = simulate(inst, Spy())
    done = work_done(inst, sched.allocations)
    if inst.I:
        assert np.array_equal(inst.work - state["remaining"], done)


@pytest.mark.parametrize("rows, message", [
    ({1: [(0, C0, 0, 1), (0, P0, 1, 1)]}, "on accelerator type cpu, which it cannot use"),
    ({1: [(0, V0, 0, 1), (0, K0, 0, 1), (0, P0, 1, 1)]},
     "on types v100, k80 in one slot (it does not allow span_types)"),
    ({1: [(0, P0, 0, 1)]}, "worker on server p0 of the other pool"),
])
def test_the_simulator_refuses_type_breaches_loudly(rows, message):
    inst = _cluster(_job("a", {"v100": JobType(3), "k80": JobType(1)}))
    with pytest.raises(PolicyError, match=re.escape(message)):
        simulate(inst, Scripted(rows))


def test_a_job_may_span_types_when_it_says_so():
    inst = _cluster(_job("a", {"v100": JobType(3), "k80": JobType(1)}, span=True, chunks=2))
    sched = simulate(inst, Scripted({1: [(0, V0, 0, 1), (0, K0, 0, 1), (0, P0, 1, 1)],
                                     2: [(0, V0, 0, 2), (0, P0, 1, 1)]}))
    assert validate(inst, sched).ok and sched.completion == (2,)


# ---- the placement rule: the fastest type where the workers fit ----------------------------------
def test_placement_takes_the_fastest_type_with_room():
    cpu_mode = JobType(1, {"cpu": 8.0, "mem": 1.0, "bw": 5.0})
    inst = _cluster(_job("a", {"k80": JobType(1), "v100": JobType(3), "cpu": cpu_mode}))
    free = inst.capacity.copy()
    assert FirstFit().place(inst, 0, 4, free)[0] == (V0, 0, 4)
    free[V0, 0] = 2.0  # two V100 GPUs left: four workers go to the K80 server
    assert FirstFit().place(inst, 0, 4, free)[0] == (K0, 0, 4)
    free[K0, 0] = 0.0  # no GPU left: the CPU server takes them
    assert FirstFit().place(inst, 0, 4, free)[0] == (C0, 0, 4)
    assert FirstFit().place_counts(inst, 0, 2, 0, inst.capacity, on_type=1) == [(K0, 0, 2)]


def test_place_most_takes_the_type_with_the_most_progress():
    inst = _cluster(_job("a", {"v100": JobType(3), "k80": JobType(2)}, chunks=8, chunk_time=6.0))
    free = inst.capacity.copy()
    free[V0, 0] = 2.0  # V100: 2 workers x 3 = 6 units; K80: 4 x 2 = 8 units
    k, rows = FirstFit().place_most(inst, 0, 8, free)
    assert (k, rows[0]) == (4, (K0, 0, 4))
    # only 3 units left: one V100 worker or two K80 ones do them all: the faster type wins
    k, rows = FirstFit().place_most(inst, 0, 8, free, remaining=3.0)
    assert (k, rows[0]) == (1, (V0, 0, 1))


def test_a_spanning_job_fills_the_faster_servers_first():
    inst = _cluster(_job("a", {"k80": JobType(1), "v100": JobType(3)}, span=True, chunks=8,
                         chunk_time=6.0))
    free = inst.capacity.copy()
    free[V0, 0] = 2.0
    for name in sorted(PLACEMENTS):
        p = get_placement(name)
        p.reset(inst)
        rows = p.place(inst, 0, 5, free)
        assert rows is not None and sum(n for _, r, n in rows if r == 0) == 5, name
        if name != "tree" and name != "random":
            assert [r for r in rows if r[1] == 0] == [(V0, 0, 2), (K0, 0, 3)], name


def test_growing_workers_stay_on_the_type_of_the_first():
    from oasis_opt.baselines.common import grow_one, ps_table

    inst = _cluster(_job("a", {"v100": JobType(3), "k80": JobType(1)}, chunks=8, chunk_time=6.0))
    free, rows, ps = inst.capacity.copy(), [], ps_table(inst)
    free[V0, 0] = 1.0
    assert grow_one(FirstFit(), inst, ps, 0, 1, free, rows)
    assert not grow_one(FirstFit(), inst, ps, 0, 2, free, rows)  # no second V100, no K80 switch
    assert [r for r in rows if r[1] == 0] == [(V0, 0, 1)]
    # remaining work caps the growth on the type: 3 units = one V100 worker
    rows, free = [], inst.capacity.copy()
    assert grow_one(FirstFit(), inst, ps, 0, 1, free, rows, remaining=3.0)
    assert not grow_one(FirstFit(), inst, ps, 0, 2, free, rows, remaining=3.0)


# ---- what the type-agnostic baselines read off the types -------------------------------------------
def test_workers_alone_takes_the_best_type_or_every_type_when_spanning():
    from oasis_opt.model.numerics import useful_workers, workers_alone

    one = _cluster(_job("a", {"v100": JobType(3), "k80": JobType(1)}, chunks=16, chunk_time=6.0))
    assert workers_alone(one, 0) == 4  # 4 GPUs on either GPU server, one type at a time
    both = _cluster(_job("a", {"v100": JobType(3), "k80": JobType(1)}, chunks=16, chunk_time=6.0,
                         span=True))
    assert workers_alone(both, 0) == 8
    assert useful_workers(7.0, 3) == 3 and useful_workers(6.0, 3) == 2
    assert useful_workers(np.array([0.0, 1.0]), 2).tolist() == [0, 1]


def test_rrh_tiresias_and_optimus_measure_work_by_speed():
    from oasis_opt import get_policy
    from oasis_opt.sim.state import ClusterState

    inst = _cluster(_job("a", {"v100": JobType(6), "k80": JobType(2)}, chunks=2, unit=2,
                         chunk_time=6.0))  # W = 1 x 2 x 6 x 2 = 24 units
    state = ClusterState(inst)
    rrh = get_policy("rrh", max_workers=2)
    rrh.start(inst, state)
    # d = ceil(r / (k s)) with the fastest speed: 24 / (2 x 6) = 2 slots
    assert rrh.run_time(np.array([0]), state).tolist() == [2]
    tiresias = get_policy("tiresias")
    tiresias.start(inst, state)
    state.attained[0] = 8.0  # 8 units at u = 2 units per reference worker-slot
    assert tiresias.service(0, state) == 4.0
    optimus = get_policy("optimus")
    optimus.start(inst, state)
    assert optimus.slots_left(0, [(K0, 0, 1)], 24.0) == 12.0  # on the K80: 24 / 2
    assert optimus.slots_left(0, [(V0, 0, 1)], 24.0) == 4.0
