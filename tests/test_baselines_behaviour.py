"""Each baseline's defining property on a small hand-built instance.

FIFO blocks at the head of the line; DRF equalises dominant shares; RRH rejects a job whose
delay cost exceeds its utility; Dorm adjusts at most M_adj running jobs per event; Tiresias
demotes a job once its attained service passes the threshold (and promotes starving ones);
Optimus gives the marginal worker to the job with the larger gain.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from oasis_opt import solve, validate
from oasis_opt.baselines.common import DominantShare, fixed_workers, max_workers_alone
from oasis_opt.model import DEFAULT_RESOURCES, WORKER, Instance, Job, Server, Utility
from oasis_opt.testing import instances

# PSs take only bandwidth, on a PS server that has nothing else: they never constrain these
# tests and add next to nothing to the pooled dominant shares
PS_DEMAND = {"bw": 100.0}


def server(sid, **cap):
    return Server(sid, {"gpu": 0.0, "cpu": 0.0, "mem": 0.0, "storage": 0.0, "bw": 1e3, **cap})


def job(jid, arrival, work, worker, *, chunks=30, utility=None, cls=None):
    """A job with ``work`` worker-slots (1 epoch x ``chunks`` chunks x work/chunks slots)."""
    return Job(jid, arrival, 1, chunks, work / chunks, {"bw": 1.0, **worker}, dict(PS_DEMAND),
               utility or Utility.constant(10.0), cls)


def instance(T, workers, jobs, ps=None):
    return Instance(T, DEFAULT_RESOURCES, tuple(workers), (ps or server("p", bw=1e4),),
                    tuple(jobs))


def workers_at(sched, j, t) -> int:
    a = sched.allocations
    return int(a.count[(a.job == j) & (a.slot == t) & (a.role == WORKER)].sum())


def first_slot(sched, j) -> int | None:
    a = sched.allocations
    slots = a.slot[(a.job == j) & (a.role == WORKER)]
    return int(slots.min()) if len(slots) else None


def rows_by_slot(sched, j):
    """slot -> sorted (server, role, count) rows of job j."""
    a = sched.allocations
    out: dict[int, list] = {}
    for jj, t, s, role, n in a.rows():
        if jj == j:
            out.setdefault(int(t), []).append((int(s), int(role), int(n)))
    return {t: sorted(r) for t, r in out.items()}


# ---- FIFO ---------------------------------------------------------------------------------
def test_fifo_blocks_behind_the_head_of_the_line():
    """A 1-GPU job that fits next to the running job must wait for the 2-GPU job ahead of it."""
    inst = instance(10, [server("w", gpu=4.0)], [
        job("long", 1, 4, {"gpu": 3.0}),     # runs slots 1-4 (k = 1)
        job("head", 2, 1, {"gpu": 2.0}),     # does not fit beside "long" until slot 5
        job("small", 2, 1, {"gpu": 1.0}),    # fits beside "long" at once, but is behind "head"
    ])
    fifo = solve(inst, "fifo", max_workers=1)
    assert validate(inst, fifo).ok
    assert first_slot(fifo, 0) == 1 and first_slot(fifo, 1) == 5
    assert first_slot(fifo, 2) >= first_slot(fifo, 1)  # no backfilling past the head
    # a policy that backfills (Tiresias's fit-first pass) runs it at once: the slot was free
    tir = solve(inst, "tiresias", max_workers=1, promote_knob=0.0)
    assert first_slot(tir, 2) == 2


def test_fifo_keeps_its_servers_until_done():
    inst = instance(20, [server("w0", gpu=4.0), server("w1", gpu=4.0)],
                    [job(f"j{i}", 1 + i, 6, {"gpu": 1.0}) for i in range(4)])
    s = solve(inst, "fifo", seed=5)
    assert validate(inst, s).ok
    for j in range(inst.I):
        by_slot = rows_by_slot(s, j)
        assert len({tuple(r) for r in by_slot.values()}) == 1  # the same containers every slot
        assert sorted(by_slot) == list(range(min(by_slot), max(by_slot) + 1))  # never paused


# ---- DRF ----------------------------------------------------------------------------------
def test_drf_equalises_dominant_shares():
    """The classic DRF example (NSDI'11): 9 CPUs, 18 GB; A needs <1 CPU, 4 GB>, B <3 CPU, 1 GB>.

    Progressive filling gives A 3 workers and B 2: both dominant shares are 2/3.
    """
    inst = instance(3, [server("w", cpu=9.0, mem=18.0)], [
        job("A", 1, 300, {"cpu": 1.0, "mem": 4.0}),
        job("B", 1, 300, {"cpu": 3.0, "mem": 1.0}),
    ])
    s = solve(inst, "drf")
    assert validate(inst, s).ok
    assert (workers_at(s, 0, 1), workers_at(s, 1, 1)) == (3, 2)
    share = DominantShare(inst)
    a = share(0, 3, inst.ps_needed(0, 3))
    b = share(1, 2, inst.ps_needed(1, 2))
    assert a == pytest.approx(2 / 3, abs=0.01) and b == pytest.approx(2 / 3, abs=0.01)


@settings(max_examples=40)
@given(inst=instances(max_jobs=6, max_horizon=5))
def test_drf_fills_until_nothing_fits(inst):
    """Progressive filling stops only when every job is capped (N_i, what fits alone, its
    remaining work) or its next worker with the PSs it adds fits nowhere; the allocation of the
    last event is held, so this holds in every slot."""
    from oasis_opt.model.numerics import fit_count
    from oasis_opt.sim.placement import apply

    s = solve(inst, "drf")
    assert validate(inst, s).ok
    a = s.allocations
    H = inst.H
    alone = max_workers_alone(inst)
    done = np.zeros(inst.I)
    for t in range(1, inst.horizon + 1):
        free = inst.capacity.copy()
        k = np.zeros(inst.I, dtype=np.int64)
        for j, tt, sv, role, n in a.rows():
            if tt == t:
                apply(inst, j, [(sv, role, n)], free)
                k[j] += n if role == WORKER else 0
        for j in range(inst.I):
            finished = s.completion[j] is not None and s.completion[j] < t
            if inst.arrival[j] > t or finished:
                continue
            cap = min(inst.chunks[j], alone[j], int(np.ceil(inst.work[j] - done[j] - 1e-9)))
            dp = inst.ps_needed(j, k[j] + 1) - inst.ps_needed(j, k[j]) if k[j] < cap else 0
            fits = (k[j] < cap and fit_count(free[:H], inst.worker_demand[j]).sum() >= 1
                    and fit_count(free[H:], inst.ps_demand[j]).sum() >= dp)
            assert not fits, f"slot {t}: job {j} with {k[j]} workers could still grow"
        done += k


# ---- RRH ----------------------------------------------------------------------------------
def _rrh_instance():
    critical = Utility.sigmoid(100.0, 5.0, 3.0)  # worth ~100 if done within 3 slots, ~0 after
    return instance(12, [server("w", gpu=1.0)], [
        job("critical", 1, 3, {"gpu": 1.0}, chunks=1, utility=critical),   # 1 worker, 3 slots
        job("cheap", 2, 5, {"gpu": 1.0}, chunks=1, utility=Utility.constant(5.0)),
        job("valuable", 2, 1, {"gpu": 1.0}, chunks=1, utility=Utility.constant(500.0)),
        job("too-late", 3, 20, {"gpu": 1.0}, chunks=1, utility=Utility.constant(500.0)),
    ])


def test_rrh_rejects_a_job_whose_delay_cost_exceeds_its_utility():
    inst = _rrh_instance()
    s = solve(inst, "rrh")
    assert validate(inst, s).ok
    log = {d["job"]: d for d in s.stats["admission"]}
    # "cheap" (5) would delay "critical" by its 5 slots: critical loses ~100 > 5 -> rejected
    assert log[1]["delay_cost"] > log[1]["gain"] and not s.admitted[1]
    # "valuable" delays critical by 1 slot only: 500 - (loss of critical) > 0 -> admitted
    assert log[2]["gain"] - log[2]["delay_cost"] > 0 and s.admitted[2]
    # "too-late" cannot finish by T = 12: gain f(T+1..) = 0 (A7) -> rejected
    assert log[3]["gain"] == 0.0 and not s.admitted[3]
    assert s.completion[0] is not None and s.utility[0] > 90
    assert s.stats["rejected"] == 2


def test_rrh_admits_everything_with_an_infinitely_low_threshold_but_keeps_k_fixed():
    inst = _rrh_instance()
    s = solve(inst, "rrh", theta=-1e9)
    assert validate(inst, s).ok
    assert all(s.admitted)
    for j in range(inst.I):
        counts = {n for t, rows in rows_by_slot(s, j).items() for _, r, n in rows if r == WORKER}
        assert counts <= {1}  # chunks = 1 caps k_i at 1


def test_rrh_formulas_match_the_docstring():
    inst = _rrh_instance()
    from oasis_opt.baselines.rrh import RrhPolicy
    from oasis_opt.sim import ClusterState

    p = RrhPolicy()
    state = ClusterState(inst)
    p.start(inst, state)
    jobs = np.array([0, 1])
    d = p.run_time(jobs, state)
    assert d.tolist() == [3, 5]  # ceil(work / k)
    t = 2
    g = p.gain(jobs, t, state)
    assert g[0] == pytest.approx(inst.jobs[0].utility(t + 3 - 1 - 1))
    loss = p.delay_loss(np.array([0]), 5, t, state)
    f = inst.jobs[0].utility
    assert loss == pytest.approx(f(t + 3 - 1 - 1) - f(t + 3 - 1 + 5 - 1))


# ---- Dorm ---------------------------------------------------------------------------------
# a deterministic cap on Dorm's MILPs instead of its default 10 s (never reached here)
DORM = {"time_limit": None, "node_limit": 100_000}

def _adjusted_per_slot(sched, inst) -> list[int]:
    """Per slot t, jobs that held containers in t-1, did not complete in t-1, and whose
    containers differ in t (resized, moved or paused)."""
    rows = {j: rows_by_slot(sched, j) for j in range(inst.I)}
    out = []
    for t in range(2, inst.horizon + 1):
        n = 0
        for j in range(inst.I):
            before = rows[j].get(t - 1)
            if before and sched.completion[j] != t - 1 and rows[j].get(t) != before:
                n += 1
        out.append(n)
    return out


@pytest.mark.parametrize("relaxation", ["drop", "soft"])
def test_dorm_adjusts_at_most_m_adj_running_jobs_per_event(relaxation):
    """Six running jobs fill the cluster, then a newcomer arrives whose fair share needs all of
    them to shrink: fairness cannot hold with M_adj running-job adjustments, so Dorm relaxes
    it and says so. Dropped, the full cluster stays as it is and the newcomer waits; soft, the
    M_adj adjustments free workers for the newcomer."""
    jobs = [job(f"r{i}", 1, 400, {"gpu": 1.0}, chunks=8) for i in range(6)]
    jobs.append(job("new", 3, 400, {"gpu": 1.0}, chunks=8))
    inst = instance(6, [server("w0", gpu=12.0), server("w1", gpu=12.0)], jobs)
    for m_adj in (1, 2):
        s = solve(inst, "dorm", max_adjust=m_adj, relaxation=relaxation, **DORM)
        assert validate(inst, s).ok
        assert max(_adjusted_per_slot(s, inst)) <= m_adj
        assert s.stats["max_adjusted"] <= m_adj
        assert s.stats["fairness_relaxed"] >= 1 and s.stats["fairness_shortfall"] >= 1
        assert s.stats["decisions"] == s.stats["events"] >= 2
        assert s.stats["solver_s"] > 0
        assert sum(workers_at(s, j, 2) for j in range(inst.I)) == 24  # full utilisation
        assert sum(workers_at(s, j, 3) for j in range(inst.I)) == 24
        if relaxation == "drop":
            assert workers_at(s, 6, 3) == 0 and max(_adjusted_per_slot(s, inst)) == 0
        else:  # starting the newcomer is not an adjustment; shrinking running jobs is
            assert 1 <= workers_at(s, 6, 3) <= 3 * m_adj
            assert max(_adjusted_per_slot(s, inst)) == m_adj


def test_dorm_keeps_fairness_when_it_can():
    """Two jobs on an empty cluster: the MILP meets (1 - eps) x fair share for both."""
    inst = instance(4, [server("w", gpu=10.0)], [job("a", 1, 400, {"gpu": 1.0}, chunks=10),
                                                 job("b", 1, 400, {"gpu": 1.0}, chunks=10)])
    s = solve(inst, "dorm", **DORM)
    assert validate(inst, s).ok
    assert s.stats["fairness_relaxed"] == 0
    assert workers_at(s, 0, 1) >= 5 * 0.9 and workers_at(s, 1, 1) >= 5 * 0.9
    assert workers_at(s, 0, 1) + workers_at(s, 1, 1) == 10


@settings(max_examples=25)
@given(inst=instances(max_jobs=6, max_horizon=6))
def test_dorm_never_adjusts_more_than_m_adj_on_random_instances(inst):
    s = solve(inst, "dorm", **DORM)
    assert validate(inst, s).ok
    assert max(_adjusted_per_slot(s, inst), default=0) <= 2


# ---- Tiresias -------------------------------------------------------------------------------
def _two_jobs_one_slot_each():
    # one GPU: one worker at a time; "old" arrives first, "young" one slot later
    return instance(12, [server("w", gpu=1.0)], [job("old", 1, 6, {"gpu": 1.0}, chunks=1),
                                                 job("young", 2, 6, {"gpu": 1.0}, chunks=1)])


def test_tiresias_demotes_a_job_after_its_threshold():
    inst = _two_jobs_one_slot_each()
    opts = {"max_workers": 1, "promote_knob": 0.0}
    # threshold 2 worker-slots: "old" runs slots 1-2, is demoted, "young" (Q0) takes slot 3
    s = solve(inst, "tiresias", **opts, queue_limits=(2.0,))
    assert validate(inst, s).ok
    assert [workers_at(s, 0, t) for t in (1, 2, 3)] == [1, 1, 0]
    assert first_slot(s, 1) == 3
    assert s.stats["demotions"] >= 1
    # threshold above the whole job: no demotion, "old" runs to completion first (FIFO in Q0)
    s = solve(inst, "tiresias", **opts, queue_limits=(100.0,))
    assert s.completion[0] == 6 and first_slot(s, 1) == 7
    assert s.stats["demotions"] == 0


def test_tiresias_default_threshold_is_tiresias_3250_gpu_seconds():
    from oasis_opt.baselines.tiresias import TiresiasPolicy

    assert TiresiasPolicy().limits == pytest.approx((3250 / 3600,))
    assert TiresiasPolicy(num_queues=3, slot_seconds=1200).limits == pytest.approx(
        (3250 / 1200, 7200 / 1200))


def test_tiresias_promotes_a_starving_job():
    inst = _two_jobs_one_slot_each()
    opts = {"max_workers": 1, "queue_limits": (2.0, 100.0)}
    off = solve(inst, "tiresias", **opts, promote_knob=0.0)
    on = solve(inst, "tiresias", **opts, promote_knob=1.0)
    assert validate(inst, on).ok and validate(inst, off).ok
    assert off.stats["promotions"] == 0 and on.stats["promotions"] >= 1
    # both run 2 slots in Q0 ("old" 1-2, "young" 3-4) and drop to Q1. Without promotion Q1 is
    # FIFO: "old" (in Q1 since slot 3) runs 5-8 to completion, then "young".
    assert [workers_at(off, 1, t) for t in range(5, 9)] == [0, 0, 0, 0]
    assert off.completion[0] == 8
    # With promote_knob = 1, a job that has waited as long as it ran goes back to Q0: "old"
    # (ran 2, waited 3-4) at slot 5, then "young" (ran 2, waited 5-6) at slot 7.
    assert [workers_at(on, 0, t) for t in range(5, 9)] == [1, 1, 0, 0]
    assert [workers_at(on, 1, t) for t in range(5, 9)] == [0, 0, 1, 1]


# ---- Optimus --------------------------------------------------------------------------------
def test_optimus_gives_the_marginal_worker_to_the_larger_gain():
    """3 GPUs, two jobs: each gets one worker, the third goes to the job with more remaining
    work (gain r/1 - r/2: 50 vs 5 slots saved, same resource cost)."""
    inst = instance(60, [server("w", gpu=3.0)], [job("small", 1, 10, {"gpu": 1.0}),
                                                 job("large", 1, 100, {"gpu": 1.0})])
    s = solve(inst, "optimus")
    assert validate(inst, s).ok
    assert (workers_at(s, 0, 1), workers_at(s, 1, 1)) == (1, 2)


def test_optimus_prefers_the_cheaper_worker_at_equal_gain():
    """Same remaining work; one job's worker takes 2 GPUs: the spare GPUs go to the other."""
    inst = instance(60, [server("w", gpu=5.0)], [job("heavy", 1, 50, {"gpu": 2.0}),
                                                 job("light", 1, 50, {"gpu": 1.0})])
    s = solve(inst, "optimus")
    assert validate(inst, s).ok
    assert (workers_at(s, 0, 1), workers_at(s, 1, 1)) == (1, 3)


# ---- shared helpers ---------------------------------------------------------------------------
def test_fixed_workers_respect_caps():
    inst = instance(3, [server("w", gpu=2.0)], [
        job("a", 1, 100, {"gpu": 1.0}, chunks=40),   # cap: 2 fit on the empty cluster
        job("b", 1, 1, {"gpu": 1.0}, chunks=1),      # cap: N_i = 1
        job("c", 1, 100, {"gpu": 3.0}, chunks=5),    # never fits: 0
    ])
    k = fixed_workers(inst, seed=0)
    assert k[0] <= 2 and k[1] == 1 and k[2] == 0
    assert max_workers_alone(inst).tolist() == [2, 1, 0]
    s = solve(inst, "fifo")
    assert validate(inst, s).ok and s.stats["never_runnable"] == 1
