"""Tree placement: smallest subtree, best fit, prediction, stickiness; every placement policy's
schedules pass the validator (chunk-time and placement-aware progress)."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_opt.cluster.tree import TreePlacement, subtree_span
from oasis_opt.experiments.placement import placement_metrics
from oasis_opt.model import Instance, Job, Server, Topology, Utility, validate
from oasis_opt.model.io import instance_from_dict, instance_to_dict
from oasis_opt.policies import get_policy
from oasis_opt.sim.greedy import GreedyPolicy
from oasis_opt.sim.placement import PLACEMENTS, apply, get_placement, placement_class
from oasis_opt.testing import instances

RES = ("gpu", "cpu", "mem", "storage", "bw")


def cluster(racks=3, per_rack=2, ps_per_rack=1, gpus=4, pods=None, jobs=None):
    cap_w = {"gpu": float(gpus), "cpu": 64.0, "mem": 256.0, "storage": 100.0, "bw": 40.0}
    cap_p = {"cpu": 64.0, "mem": 256.0, "storage": 100.0, "bw": 100.0}
    ws = tuple(Server(f"w{r}{n}", dict(cap_w), f"rack-{r}") for r in range(racks)
               for n in range(per_rack))
    ps = tuple(Server(f"p{r}{n}", dict(cap_p), f"rack-{r}") for r in range(racks)
               for n in range(ps_per_rack))
    jobs = jobs or tuple(Job(f"j{i}", 1, 1, n, 1.0, {"gpu": 1.0, "cpu": 1.0, "bw": 5.0},
                             {"cpu": 1.0, "bw": 10.0}, Utility.sigmoid(10, 1, 3))
                         for i, n in enumerate((1, 2, 4, 8, 12, 16)))
    inst = Instance(5, RES, ws, ps, tuple(jobs))
    topo = (Topology.from_racks(inst, 4.0) if pods is None
            else Topology.from_pods(inst, pods, 4.0, 2.0))
    return dataclasses.replace(inst, topology=topo)


def place(inst, job, k, free=None, tree=None):
    tree = tree or TreePlacement()
    tree.reset(inst)
    free = inst.capacity.copy() if free is None else free
    return tree.place(inst, job, k, free)


def servers_of(inst, rows, role):
    return {inst.servers[s].id for s, r, n in rows if r == role}


def test_registered_as_tree():
    assert placement_class("tree") is TreePlacement
    assert isinstance(get_placement("tree"), TreePlacement)


def test_one_server_when_it_fits_and_ps_in_the_same_rack():
    inst = cluster()
    rows = place(inst, 2, 4)  # 4 workers: one 4-GPU server
    assert len(servers_of(inst, rows, 0)) == 1
    assert subtree_span(inst, rows) == "rack"
    assert sum(n for _, r, n in rows if r == 1) == inst.ps_needed(2, 4) == 2


def test_smallest_subtree_rack_then_core():
    inst = cluster()
    rows = place(inst, 3, 8)  # 8 workers fill one rack of 2 x 4 GPUs
    assert subtree_span(inst, rows) == "rack"
    rows = place(inst, 4, 12)  # 12 workers: no rack holds them
    assert subtree_span(inst, rows) == "core"
    assert len({inst.servers[s].rack for s, r, n in rows if r == 0}) == 2  # fewest racks spanned


def test_pods():
    pods = {"rack-0": "pod-a", "rack-1": "pod-a", "rack-2": "pod-b"}
    inst = cluster(pods=pods)
    assert inst.get_topology().graph.nodes["pod-a"]["kind"] == "pod"
    rows = place(inst, 4, 12)  # 12 workers fit in pod-a's 16 GPUs
    assert subtree_span(inst, rows) == "pod"
    assert {inst.servers[s].rack for s, r, n in rows} <= {"rack-0", "rack-1"}
    rows = place(inst, 5, 16)
    assert subtree_span(inst, rows) == "pod"
    with pytest.raises(ValueError, match="no pod"):
        Topology.from_pods(inst, {"rack-0": "pod-a"})
    # pod uplink: the racks' uplinks / 2; the instance file keeps the tree
    g = inst.get_topology().graph
    assert g.edges["pod-a", "core"]["bandwidth"] == pytest.approx(
        (g.edges["rack-0", "pod-a"]["bandwidth"] + g.edges["rack-1", "pod-a"]["bandwidth"]) / 2)
    back = instance_from_dict(instance_to_dict(inst))
    assert back.get_topology().to_json() == inst.get_topology().to_json()


def test_best_fit_prefers_the_fuller_rack():
    inst = cluster()
    free = inst.capacity.copy()
    # rack-1 half used: 4 of its 8 GPUs busy
    free[inst.server_index["w10"]] -= np.array([4, 4, 4, 0, 20])
    rows = place(inst, 2, 4, free)
    assert servers_of(inst, rows, 0) == {"w11"}
    # a job that no longer fits rack-1 goes to an empty rack
    rows = place(inst, 3, 8, free)
    assert {inst.servers[s].rack for s, r, n in rows} in ({"rack-0"}, {"rack-2"})


def test_predicted_utilisation_steers_away_from_busy_racks():
    inst = cluster()
    tree = TreePlacement(predictor="p95", window=3)
    tree.reset(inst)
    busy = inst.capacity.copy()
    for s in ("w00", "w01"):  # rack-0 fully busy in the history
        busy[inst.server_index[s]][0] = 0.0
    for _ in range(3):
        tree.observe(busy)
    pred = tree.predicted_utilisation()
    assert pred.max() == pytest.approx(1.0)
    rows = tree.place(inst, 3, 8, inst.capacity.copy())  # everything free now: ties in fit
    assert {inst.servers[s].rack for s, r, n in rows} == {"rack-1"}
    # without the history the first rack in depth-first order wins the tie
    assert {inst.servers[s].rack for s, r, n in place(inst, 3, 8)} == {"rack-0"}


def test_observes_each_new_free_array_and_is_sticky():
    inst = cluster()
    tree = TreePlacement()
    tree.reset(inst)
    f1 = inst.capacity.copy()
    rows = tree.place(inst, 2, 4, f1)
    apply(inst, 2, rows, f1)
    home = {inst.servers[s].rack for s, r, n in rows}
    f2 = inst.capacity.copy()
    f2[inst.server_index["w20"]] -= np.array([3, 3, 3, 0, 15])  # rack-2 now the best fit
    rows2 = tree.place(inst, 2, 4, f2)  # a new array: the end state of f1 is recorded
    assert {inst.servers[s].rack for s, r, n in rows2} == home  # sticky: the job stays
    assert np.asarray(tree._predictor.predict()).max() > 0
    fresh = place(inst, 2, 4, f2)
    assert {inst.servers[s].rack for s, r, n in fresh} == {"rack-2"}


def test_place_most_and_none():
    inst = cluster()
    tree = TreePlacement()
    tree.reset(inst)
    assert tree.place(inst, 5, 25, inst.capacity.copy()) is None  # 24 GPUs in all
    k, rows = tree.place_most(inst, 5, 16, inst.capacity.copy())
    assert k == 16 and sum(n for _, r, n in rows if r == 0) == 16
    assert tree.place_most(inst, 5, 16, np.zeros_like(inst.capacity)) == (0, [])


@st.composite
def tree_cases(draw):
    inst = draw(instances(max_jobs=3, max_servers=4))
    if not inst.I:
        return inst, 0, 0, inst.capacity.copy()
    job = draw(st.integers(0, inst.I - 1))
    k = draw(st.integers(1, 6))
    share = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=inst.H + inst.K,
                          max_size=inst.H + inst.K))
    free = inst.capacity * np.array(share)[:, None]
    return inst, job, k, free


@given(tree_cases())
@settings(max_examples=80)
def test_tree_places_exactly_when_it_fits(case):
    """Tree placement succeeds iff first fit does (the core always holds what fits in total),
    with the right counts, within free capacity, workers on worker servers and PSs on PS ones."""
    inst, job, k, free = case
    if not inst.I:
        return
    ff = get_placement("first-fit").place(inst, job, k, free)
    rows = place(inst, job, k, free.copy())
    assert (rows is None) == (ff is None)
    if rows is None:
        return
    assert sum(n for _, r, n in rows if r == 0) == k
    assert sum(n for _, r, n in rows if r == 1) == inst.ps_needed(job, k)
    assert all((r == 0) == (s < inst.H) for s, r, n in rows)
    left = free.copy()
    apply(inst, job, rows, left)
    assert (left >= -1e-9).all()


POLICIES_WITH_PLACEMENT = ("greedy", "fifo", "drf", "tiresias")


@given(instances(max_jobs=4), st.sampled_from(sorted(PLACEMENTS)),
       st.sampled_from(POLICIES_WITH_PLACEMENT), st.sampled_from(["chunk-time", "placement"]))
@settings(max_examples=60)
def test_every_placement_policy_schedule_is_valid(inst, placement, policy, progress):
    inst = dataclasses.replace(inst, topology=Topology.from_racks(inst, 2.0), progress=progress)
    sched = get_policy(policy, placement=placement).solve(inst)
    report = validate(inst, sched)
    assert report.ok, str(report)


def test_tree_beats_round_robin_on_oversubscribed_racks():
    """Four 4-worker jobs on 3 racks at 4:1, placement-aware progress: tree keeps each job in a
    rack, round-robin spreads its workers and PSs, so the same jobs finish later."""
    jobs = tuple(Job(f"j{i}", 1, 3, 4, 1.0, {"gpu": 1.0, "cpu": 1.0, "bw": 5.0},
                     {"cpu": 1.0, "bw": 10.0}, Utility.sigmoid(10, 1, 3), provenance={"model": "vgg16"})
                 for i in range(4))
    inst = dataclasses.replace(cluster(jobs=jobs), progress="placement", horizon=30)
    done, useful = {}, {}
    for name in ("tree", "round-robin"):
        sched = GreedyPolicy(placement=name).solve(inst)
        assert validate(inst, sched).ok
        done[name] = np.mean([c for c in sched.completion])
        m = placement_metrics(inst, sched)
        assert m["completed"] == 4 and m["jct_mean_h"] == pytest.approx(done[name])  # arrival 1
        useful[name] = m["useful_gpu_work"]
    assert done["tree"] < done["round-robin"]
    assert useful["tree"] == 1.0 > useful["round-robin"]
    flat = dataclasses.replace(inst, topology=Topology.from_racks(inst, 1.0))
    assert placement_metrics(flat, GreedyPolicy(placement="round-robin").solve(flat))[
        "useful_gpu_work"] == 1.0
