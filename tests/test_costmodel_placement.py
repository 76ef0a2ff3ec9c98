"""The placement-aware cost model: hand-computed iteration times, the array kernel against the
graph-walking reference, progress = k T_ref / T_actual, and the validator's placement mode."""
import dataclasses

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_opt.costmodel.models import MODELS, TIRESIAS_TENSORS_MB, get_model
from oasis_opt.costmodel.placement import (IterationTime, context, ideal_and_actual,
                                           iteration_time, job_profile, placement_progress,
                                           placement_work_remaining, placement_worker_slots,
                                           tensor_shards)
from oasis_opt.model import (Instance, Job, Schedule, ScheduleBuilder, Server, Topology,
                             Utility, derive_outcome, validate)
from oasis_opt.sim.greedy import GreedyPolicy
from oasis_opt.testing import instances

GBE10 = 10.0  # Gbps = 1.25 GB/s, the reference's worked numbers
S_MB = 100.0  # 0.1 GB, about ResNet-50 fp32


def two_racks(servers_per_rack: int = 16, oversubscription: float = 4.0, nic: float = GBE10):
    g = nx.Graph()
    g.add_node("core", kind="core")
    for r in ("A", "B"):
        g.add_node(r, kind="rack")
        g.add_edge(r, "core", bandwidth=servers_per_rack * nic / oversubscription)
        for n in range(servers_per_rack):
            g.add_node(f"{r}{n}", kind="server")
            g.add_edge(f"{r}{n}", r, bandwidth=nic)
    return Topology(g)


def one_each(rack: str, n: int, first: int = 0) -> dict:
    return {f"{rack}{i}": 1 for i in range(first, first + n)}


# ---- hand-computed layouts (reference section 3.7) -------------------------------------------------
def test_ps_single_rack_8_workers_8_ps():
    """Every worker sends 0.1 GB over its 1.25 GB/s NIC: 0.08 s per phase, 0.16 s per iteration."""
    t = iteration_time(two_racks(), one_each("A", 8), one_each("A", 8, first=8), model_mb=S_MB,
                       worker_bw_gbps=GBE10, ps_bw_gbps=GBE10)
    assert t.push_s == pytest.approx(0.08) and t.comm_s == pytest.approx(0.160)


def test_ps_bottleneck_8_workers_1_ps():
    """One PS receives 8 x 0.1 GB = 0.8 GB at 1.25 GB/s: 0.64 s per phase, 1.28 s in all."""
    t = iteration_time(two_racks(), one_each("A", 8), {"A8": 1}, model_mb=S_MB,
                       worker_bw_gbps=GBE10, ps_bw_gbps=GBE10)
    assert t.comm_s == pytest.approx(1.280)
    assert "PS on A8" in t.bottleneck


def test_ps_cross_rack_all_workers_in_one_rack_all_ps_in_the_other():
    """Racks of 16 x 10 GbE at 4:1: each container's uplink share is 10/4 Gbps = 0.3125 GB/s.
    Every worker's 0.1 GB crosses: 0.32 s per phase, 0.64 s per iteration (4x the rack-local
    0.16 s); the PSs see the same from their side."""
    t = iteration_time(two_racks(), one_each("A", 8), one_each("B", 8), model_mb=S_MB,
                       worker_bw_gbps=GBE10, ps_bw_gbps=GBE10)
    assert t.comm_s == pytest.approx(0.640)
    assert "link above A" in t.bottleneck or "link above B" in t.bottleneck


def test_ps_cross_rack_half_and_half():
    """4 workers + 4 PSs per rack: half of each worker's bytes cross, 0.05 GB / 0.3125 GB/s =
    0.16 s per phase (NIC: 0.08 s), 0.32 s per iteration; a PS receives 4 x 12.5 MB across."""
    w = one_each("A", 4) | one_each("B", 4)
    p = one_each("A", 4, first=4) | one_each("B", 4, first=4)
    t = iteration_time(two_racks(), w, p, model_mb=S_MB, worker_bw_gbps=GBE10, ps_bw_gbps=GBE10)
    assert t.comm_s == pytest.approx(0.320)


def test_ps_non_blocking_uplink_costs_nothing_extra():
    t = iteration_time(two_racks(oversubscription=1.0), one_each("A", 8), one_each("B", 8),
                       model_mb=S_MB, worker_bw_gbps=GBE10, ps_bw_gbps=GBE10)
    assert t.comm_s == pytest.approx(0.160)


def test_ps_colocated_worker_and_ps_skip_the_nic():
    """Worker n and PS n share server A_n: 1/8 of each worker's bytes stay inside the server, so
    the NICs carry 7/8 x 0.1 GB: 0.07 s per phase, 0.14 s."""
    t = iteration_time(two_racks(), one_each("A", 8), one_each("A", 8), model_mb=S_MB,
                       worker_bw_gbps=GBE10, ps_bw_gbps=GBE10)
    assert t.comm_s == pytest.approx(0.140)


def test_ps_skewed_shards_make_the_big_shard_the_bottleneck():
    """vgg19 with 2 PSs (tensor i -> PS i mod 2): the 392 MB tensor lands on PS 0; 4 workers
    push it at 10 Gbps into PS 0: 4 x shard0 x 8 / 10000 s."""
    shards = tensor_shards(TIRESIAS_TENSORS_MB["vgg19"], 2)
    assert sum(shards) == pytest.approx(547.1) and max(shards) > 0.7 * 547.1
    t = iteration_time(two_racks(), one_each("A", 4), one_each("A", 2, first=4),
                       model_mb=547.1, worker_bw_gbps=GBE10, ps_bw_gbps=GBE10, shards_mb=shards)
    assert t.push_s == pytest.approx(4 * max(shards) * 8 / 10000)
    balanced = iteration_time(two_racks(), one_each("A", 4), one_each("A", 2, first=4),
                              model_mb=547.1, worker_bw_gbps=GBE10, ps_bw_gbps=GBE10)
    assert balanced.push_s == pytest.approx(4 * 547.1 / 2 * 8 / 10000)
    assert t.push_s > balanced.push_s


def test_ring_allreduce_reference_numbers():
    """Reference table: 8 nodes on 10 GbE, alpha 20 us: 0.140 s; on 100 GbE 0.014 s; 8 GPUs on
    NVLink (130 GB/s, 5 us): 0.0014 s; across 2 racks at 4:1 (per-flow B/4): 0.560 s."""
    t = two_racks()
    ring = iteration_time(t, one_each("A", 8), model_mb=S_MB, worker_bw_gbps=GBE10,
                          collective="allreduce", latency_s=20e-6)
    assert ring.comm_s == pytest.approx(2 * 7 / 8 * 0.1 / 1.25 + 14 * 20e-6)
    assert ring.comm_s == pytest.approx(0.140, abs=5e-4)
    fast = iteration_time(two_racks(nic=100.0), one_each("A", 8), model_mb=S_MB,
                          worker_bw_gbps=100.0, collective="allreduce")
    assert fast.comm_s == pytest.approx(0.014)
    nvlink = iteration_time(t, {"A0": 8}, model_mb=S_MB, worker_bw_gbps=GBE10,
                            collective="allreduce", node_bw_gbps=130 * 8, latency_s=5e-6)
    assert nvlink.comm_s == pytest.approx(0.0014, abs=5e-5)
    split = iteration_time(two_racks(servers_per_rack=4), one_each("A", 4) | one_each("B", 4),
                           model_mb=S_MB, worker_bw_gbps=GBE10, collective="allreduce")
    assert split.comm_s == pytest.approx(0.560)


def test_compute_time_is_the_slowest_workers():
    t = iteration_time(two_racks(), one_each("A", 2), {"A5": 1}, model_mb=0.0, compute_s=0.3,
                       worker_bw_gbps=GBE10, ps_bw_gbps=GBE10, speed={"A0": 2.0, "A1": 0.5})
    assert t.compute_s == pytest.approx(0.6) and t.comm_s == 0.0
    assert isinstance(t, IterationTime) and t.total_s == pytest.approx(0.6)


def test_iteration_time_rejects_bad_input():
    topo = two_racks()
    with pytest.raises(ValueError, match="workers"):
        iteration_time(topo, {}, {"A1": 1}, model_mb=1, worker_bw_gbps=1, ps_bw_gbps=1)
    with pytest.raises(ValueError, match="not a server"):
        iteration_time(topo, {"A": 1}, {"A1": 1}, model_mb=1, worker_bw_gbps=1, ps_bw_gbps=1)
    with pytest.raises(ValueError, match="collective"):
        iteration_time(topo, {"A0": 1}, {"A1": 1}, model_mb=1, worker_bw_gbps=1, collective="x")
    with pytest.raises(ValueError, match="shards_mb"):
        iteration_time(topo, {"A0": 1}, {"A1": 2}, model_mb=1, worker_bw_gbps=1, ps_bw_gbps=1,
                       shards_mb=[1.0])
    with pytest.raises(ValueError, match="ps"):
        iteration_time(topo, {"A0": 1}, None, model_mb=1, worker_bw_gbps=1, ps_bw_gbps=1)


def test_model_table_matches_the_reference():
    assert get_model("vgg19").size_mb == 547.1 and get_model("resnet50").size_mb == 80.6
    assert get_model("alexnet").largest_fraction == pytest.approx(0.61, abs=0.005)
    assert all(m.compute_s > 0 and m.size_mb > 0 for m in MODELS.values())
    with pytest.raises(ValueError, match="unknown model"):
        get_model("gpt")


# ---- instances: progress = k T_ref / T_actual -----------------------------------------------------------
def rack_instance(oversubscription: float = 4.0, collective: str = "ps", kinds=(None, None)):
    """2 racks, each 2 worker servers (4 GPUs, 40 Gbps) and 1 PS server (100 Gbps)."""
    cap_w = {"gpu": 4.0, "cpu": 32.0, "mem": 128.0, "storage": 100.0, "bw": 40.0}
    cap_p = {"cpu": 32.0, "mem": 128.0, "storage": 100.0, "bw": 100.0}
    ws = tuple(Server(f"w{r}{n}", dict(cap_w), f"rack-{r}", kinds[r]) for r in range(2)
               for n in range(2))
    ps = tuple(Server(f"p{r}", dict(cap_p), f"rack-{r}") for r in range(2))
    job = Job("j", 1, 4, 4, 1.0, {"gpu": 1.0, "cpu": 1.0, "bw": 10.0},
              {"cpu": 1.0, "bw": 20.0}, Utility.sigmoid(10, 1, 3), "time-sensitive",
              {"model": "resnet50"})
    base = Instance(6, ("gpu", "cpu", "mem", "storage", "bw"), ws, ps, (job,),
                    progress="placement", meta={"costmodel": {"collective": collective}})
    return dataclasses.replace(base, topology=Topology.from_racks(base, oversubscription))


W00, W01, W10, W11, P0, P1 = 0, 1, 2, 3, 4, 5


def by_hand(ratio_cross: float, workers_out: float, ps_in: float) -> float:
    """progress of 2 workers of resnet50 (b = 10, B = 20) given the bytes crossing."""
    m = get_model("resnet50")
    t_ref = m.compute_s + 2 * m.size_mb * 8 / 1000 * max(1 / 10, 2 / (1 * 20))
    phase = max(1 / 10, workers_out / (10 * ratio_cross), ps_in / (20 * ratio_cross), 2 / 20)
    return 2 * t_ref / (m.compute_s + 2 * m.size_mb * 8 / 1000 * phase)


def test_progress_rack_local_is_exactly_the_papers():
    inst = rack_instance()
    rows = [(W00, 0, 1), (W01, 0, 1), (P0, 1, 1)]
    assert placement_progress(inst, 0, rows, 1) == 2.0  # bit for bit
    t_ref, t_act = ideal_and_actual(inst, 0, rows)
    m = get_model("resnet50")
    assert t_ref == pytest.approx(m.compute_s + 2 * m.size_mb * 8 / 1000 / 10) == t_act


def test_progress_cross_rack_by_hand():
    """Workers in rack 0, PS in rack 1, 4:1: rack 0 has 2 x 40 + 100 = 180 Gbps of NICs and an
    uplink of 45, so r = 1/4: each worker's S crosses at 10/4 Gbps."""
    inst = rack_instance(4.0)
    got = placement_progress(inst, 0, [(W00, 0, 1), (W01, 0, 1), (P1, 1, 1)], 1)
    assert got == pytest.approx(by_hand(0.25, 1.0, 2.0))
    assert got < 2.0
    # one worker in each rack: half the worker traffic is local (PS in rack 0)
    # one worker in each rack, PS in rack 0: the remote worker alone crosses, but a synchronous
    # iteration waits for it, so the job is as slow as when both cross
    split = placement_progress(inst, 0, [(W00, 0, 1), (W10, 0, 1), (P0, 1, 1)], 1)
    assert split == pytest.approx(by_hand(0.25, 1.0, 1.0)) == pytest.approx(got)
    # non-blocking core: no loss
    assert placement_progress(rack_instance(1.0), 0, [(W00, 0, 1), (W01, 0, 1), (P1, 1, 1)], 1) == 2.0


def test_progress_allreduce_and_gpu_speed():
    inst = rack_instance(4.0, "allreduce")
    local = placement_progress(inst, 0, [(W00, 0, 2), (P0, 1, 1)], 1)
    assert local == 2.0
    spread = placement_progress(inst, 0, [(W00, 0, 1), (W10, 0, 1), (P0, 1, 1)], 1)
    m = get_model("resnet50")
    comm = 2 * (1 / 2) * m.size_mb * 8 / 1000
    assert spread == pytest.approx(2 * (m.compute_s + comm / 10) / (m.compute_s + comm / 2.5))
    fast = rack_instance(1.0, kinds=("V100", "T4"))
    assert placement_progress(fast, 0, [(W00, 0, 1), (P0, 1, 1)], 1) > 1.0  # V100 = 1.6 x P100
    assert placement_progress(fast, 0, [(W00, 0, 1), (W10, 0, 1), (P0, 1, 1)], 1) < 2.0  # T4


def test_no_ps_or_no_worker_means_no_progress():
    inst = rack_instance()
    assert placement_progress(inst, 0, [(W00, 0, 2)], 1) == 0.0
    assert placement_progress(inst, 0, [(P0, 1, 1)], 1) == 0.0
    assert placement_progress(inst, 0, [], 1) == 0.0


def test_bad_costmodel_options_are_named():
    inst = rack_instance()
    bad = dataclasses.replace(inst, meta={"costmodel": {"colective": "ps"}})
    with pytest.raises(ValueError, match="meta.costmodel.colective"):
        placement_progress(bad, 0, [(W00, 0, 1), (P0, 1, 1)], 1)
    job = dataclasses.replace(inst.jobs[0], provenance={"minibatch_time_s": 0.1, "gradient_mb": "x"})
    with pytest.raises(ValueError, match=r"jobs\[0\].provenance.gradient_mb"):
        job_profile(inst.with_jobs([job]), 0)
    job = dataclasses.replace(inst.jobs[0], provenance={"model": "gpt"})
    with pytest.raises(ValueError, match=r"jobs\[0\].provenance.model"):
        job_profile(inst.with_jobs([job]), 0)


# ---- the kernel against the graph-walking reference, on random instances and placements ---------------
@st.composite
def placed(draw):
    inst = draw(instances(max_jobs=3, max_servers=4))
    if not inst.I:
        return inst, 0, []
    o = draw(st.sampled_from([1.0, 2.0, 4.0]))
    inst = dataclasses.replace(inst, topology=Topology.from_racks(inst, o), progress="placement")
    job = draw(st.integers(0, inst.I - 1))
    rows = [(s, 0, draw(st.integers(0, 3))) for s in range(inst.H)]
    rows += [(inst.H + s, 1, draw(st.integers(0, 2))) for s in range(inst.K)]
    return inst, job, [r for r in rows if r[2] > 0]


@given(placed(), st.sampled_from(["ps", "allreduce"]))
@settings(max_examples=80)
def test_kernel_equals_reference(case, collective):
    """Progress from the array kernel = k T_ref / T_actual with T_actual from the graph walk
    (instance semantics: traffic inside a server at the container's own bandwidth)."""
    inst, job, rows = case
    if not inst.I:
        return
    inst = dataclasses.replace(inst, meta={"costmodel": {"collective": collective}})
    k = sum(n for _, r, n in rows if r == 0)
    p = sum(n for _, r, n in rows if r == 1)
    got = placement_progress(inst, job, rows, 1)
    if k == 0 or (p == 0 and collective == "ps"):
        assert got == 0.0
        return
    tau, S = job_profile(inst, job)
    b, B = float(inst.worker_bw[job]), float(inst.ps_bw[job])
    ids = [s.id for s in inst.servers]
    ref = iteration_time(inst.get_topology(), {ids[s]: n for s, r, n in rows if r == 0},
                         {ids[s]: n for s, r, n in rows if r == 1}, model_mb=S, compute_s=tau,
                         worker_bw_gbps=b, ps_bw_gbps=B, collective=collective, node_bw_gbps=b)
    if collective == "ps":
        t_ref = tau + 2 * S * 8 / 1000 * max(1 / b, k / (p * B))
    else:
        t_ref = tau + 2 * (k - 1) / k * S * 8 / 1000 / b
    assert got == pytest.approx(k * t_ref / ref.total_s, rel=1e-12)
    assert got <= k * (1 + 1e-12)  # reference-speed servers: never more than the paper


@given(instances(max_jobs=4), st.sampled_from(["ps", "allreduce"]))
@settings(max_examples=40)
def test_batch_equals_per_call(inst, collective):
    """The validator's batched progress equals what the simulator credits, bit for bit."""
    inst = dataclasses.replace(inst, topology=Topology.from_racks(inst, 4.0), progress="placement",
                               meta={"costmodel": {"collective": collective}})
    sched = GreedyPolicy(placement="round-robin").solve(inst)
    gjob, gslot, prog = placement_worker_slots(inst, sched.allocations)
    a = sched.allocations
    for j, t, g in zip(gjob, gslot, prog):
        m = (a.job == j) & (a.slot == t)
        rows = list(zip(a.server[m].tolist(), a.role[m].tolist(), a.count[m].tolist()))
        assert placement_progress(inst, int(j), rows[::-1], int(t)) == g  # any row order


# ---- the validator and derive_outcome in placement mode ------------------------------------------------
@given(instances(max_jobs=4))
@settings(max_examples=40)
def test_greedy_schedules_are_valid_in_placement_mode(inst):
    for o in (1.0, 4.0):
        pinst = dataclasses.replace(inst, topology=Topology.from_racks(inst, o), progress="placement")
        sched = GreedyPolicy(placement="round-robin").solve(pinst)
        report = validate(pinst, sched)
        assert report.ok, str(report)
        # placement-aware worker-slots never exceed the plain ones on reference hardware
        credited, remaining = placement_work_remaining(pinst, sched.allocations)
        plain = sched.allocations.workers_per_job_slot(inst.I, inst.horizon).sum(axis=1)
        assert (credited <= plain + 1e-9).all()


def test_validator_flags_a_completion_the_placement_does_not_earn():
    """2 workers for 2 slots give 4 plain worker-slots (= work) but less across racks at 4:1."""
    inst = rack_instance(4.0)
    job = dataclasses.replace(inst.jobs[0], epochs=1, chunks=4, chunk_time=1.0)  # work 4
    inst = inst.with_jobs([job])
    b = ScheduleBuilder(inst)
    b.admit(0)
    for t in (1, 2):
        for row in ((W00, 0, 1), (W01, 0, 1), (P1, 1, 1)):
            b.add(0, t, *row)
    sched = b.build("hand")
    assert sched.completion == (None,)  # derived in placement mode: not done
    plain = dataclasses.replace(inst, progress="chunk-time")
    assert derive_outcome(plain, sched.allocations)[0] == (2,)
    claimed = Schedule("hand", (True,), sched.allocations, (2,), (inst.utility_of(0, 2),),
                       inst.utility_of(0, 2))
    report = validate(inst, claimed)
    assert report.rules() == {"workload"}
    assert "placement-aware" in str(report)
    assert validate(plain, claimed).ok
    # rack-local, the same counts finish the job in slot 2
    b = ScheduleBuilder(inst)
    b.admit(0)
    for t in (1, 2):
        for row in ((W00, 0, 1), (W01, 0, 1), (P0, 1, 1)):
            b.add(0, t, *row)
    local = b.build("hand")
    assert local.completion == (2,) and validate(inst, local).ok


def test_context_is_cached_per_instance():
    inst = rack_instance()
    ctx = context(inst)
    assert context(inst) is ctx
    assert ctx.links.shape == (6, 2)  # server link, rack uplink
    assert sorted(set(ctx.ratio.tolist())) == [0.25, 1.0]  # 180 Gbps of NICs under a 45 Gbps uplink
