"""The placement-aware bracket: ``offline-topo`` (full-speed schedules, a lower bound) <= the
brute-force placement-aware optimum <= the topology-free MILP and its LP (upper bounds), on tiny
two-rack topologies.

The brute force is written independently of both programs: per job and slot it enumerates
every placement the validator accepts (workers per worker server, at most N_i; PSs per PS
server, between ceil(k b_i / B_i) and k; nothing before arrival), credits each the simulator's
placement-aware worker-slots (``costmodel.placement.placement_progress``), and searches over
slots by dynamic programming on each job's remaining work (subtracted slot by slot as the
simulator does) and completion (the last slot with workers once the work is covered).
"""
from __future__ import annotations

import dataclasses
import itertools
import math
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_opt.costmodel.placement import placement_progress, placement_worker_slots
from oasis_opt.model import Instance, Job, Server, Topology, Utility, validate
from oasis_opt.model.numerics import DONE_EPS
from oasis_opt.offline.exact import lp_bound
from oasis_opt.offline.solver import MIP_GAP
from oasis_opt.offline.topo import (TopoOfflinePolicy, build_full_speed_milp, full_speed_jobs,
                                    placement_upper_bound)
from oasis_opt.policies import solve
from oasis_opt.testing import utilities
from oasis_opt.workloads.traces import PhillyCluster, PhillyFilter, TraceMapping, philly_instance

RESOURCES = ("gpu", "cpu", "mem", "storage", "bw")


def _fits(demand: np.ndarray, free: np.ndarray) -> bool:
    return bool((demand <= free + 1e-9).all())


def slot_options(inst: Instance, i: int) -> list[tuple[tuple[tuple[int, int, int], ...], float]]:
    """Every placement of job i in one slot the validator accepts: (rows (server, role, count),
    placement-aware worker-slots); the empty placement first."""
    N, H, K = int(inst.chunks[i]), inst.H, inst.K
    wdem, pdem = inst.worker_demand[i], inst.ps_demand[i]
    wroom = [min(N, *(int(c // d) for c, d in zip(inst.capacity[h], wdem) if d > 0))
             for h in range(H)]
    proom = [min(N, *(int(c // d) for c, d in zip(inst.capacity[H + k], pdem) if d > 0))
             for k in range(K)]
    out: list = [((), 0.0)]
    for y in itertools.product(*(range(r + 1) for r in wroom)):
        k = sum(y)
        if not 1 <= k <= N:
            continue
        for z in itertools.product(*(range(r + 1) for r in proom)):
            p = sum(z)
            if not (p <= k and p * inst.ps_bw[i] >= k * inst.worker_bw[i] * (1 - 1e-12)):
                continue
            rows = tuple([(h, 0, c) for h, c in enumerate(y) if c]
                         + [(H + s, 1, c) for s, c in enumerate(z) if c])
            out.append((rows, placement_progress(inst, i, list(rows), 1)))
    return out


def brute_force(inst: Instance) -> float:
    """The placement-aware optimum of ``inst`` by exhaustive search (tiny instances only)."""
    I, T = inst.I, inst.horizon
    options = [slot_options(inst, i) for i in range(I)]
    demand = [[sum((inst.worker_demand[i] if role == 0 else inst.ps_demand[i]) * c
                   * (np.arange(inst.H + inst.K) == s)[:, None]
                   for s, role, c in rows) if rows else 0 for rows, _ in options[i]]
              for i in range(I)]

    @lru_cache(maxsize=None)
    def joint(active: tuple[int, ...]) -> list[tuple[int, ...]]:
        """Option indices per job (0 = nothing for inactive ones) that fit the capacities."""
        out: list[tuple[int, ...]] = []

        def place(i: int, free: np.ndarray, chosen: tuple[int, ...]) -> None:
            if i == I:
                out.append(chosen)
                return
            for n in (range(len(options[i])) if active[i] else (0,)):
                d = demand[i][n]
                if n == 0 or _fits(d, free):
                    place(i + 1, free - d if n else free, chosen + (n,))

        place(0, inst.capacity.astype(float), ())
        return out

    @lru_cache(maxsize=None)
    def value(t: int, state: tuple[tuple[float, int], ...]) -> float:
        """Best utility from slot t on; state: per job (remaining work, completion or 0)."""
        if t > T:
            return sum(inst.utility_of(i, c) for i, (_, c) in enumerate(state) if c)
        active = tuple(int(inst.arrival[i] <= t) for i in range(I))
        best = -math.inf
        for choice in joint(active):
            nxt = []
            for i, n in enumerate(choice):
                left, done = state[i]
                if n:
                    left = left - options[i][n][1]
                    if left <= DONE_EPS:
                        done = t  # covered: the last slot with workers is the completion
                nxt.append((left, done))
            best = max(best, value(t + 1, tuple(nxt)))
        return best

    start = tuple((float(inst.work[i]), 0) for i in range(I))
    return value(1, start)


@st.composite
def two_racks(draw) -> Instance:
    """2 racks; 1-2 worker servers per rack (1-2 GPUs), one PS server per rack; 1-3 jobs of at
    most 2 workers and 4 worker-slots; T <= 3; uplinks at 1:1, 2:1 or 4:1; jobs with a compute
    time tau and a model size S chosen so that crossing a rack costs little or a lot."""
    T = draw(st.integers(2, 3))
    per_rack = draw(st.sampled_from([(1, 1), (2, 1)]))
    ws = tuple(Server(f"w{r}{n}", {"gpu": float(draw(st.integers(1, 2))), "cpu": 16.0,
                                   "mem": 64.0, "storage": 100.0, "bw": 20.0}, f"rack-{r}")
               for r in range(2) for n in range(per_rack[r]))
    ps = tuple(Server(f"p{r}", {"gpu": 0.0, "cpu": 16.0, "mem": 64.0, "storage": 100.0,
                                "bw": 20.0}, f"rack-{r}") for r in range(2))
    jobs = []
    for i in range(draw(st.integers(1, 3 if len(ws) == 2 else 2))):
        b = float(draw(st.sampled_from([5, 10])))
        B = float(draw(st.sampled_from([b, 2 * b])))
        u, cls = draw(utilities())
        chunks = draw(st.integers(1, 2))
        # up to 4 worker-slots: a 2-worker job of 3-4 must often run in both racks at once
        chunk_time = draw(st.sampled_from([1.0, 1.5, 2.0] if chunks == 2 else [1.0, 2.0]))
        prov = {"minibatch_time_s": draw(st.sampled_from([0.05, 0.3, 1.5])),
                "gradient_mb": draw(st.sampled_from([50.0, 200.0]))}
        jobs.append(Job(f"j{i}", draw(st.integers(1, T)), 1, chunks, chunk_time,
                        {"gpu": 1.0, "cpu": 1.0, "mem": 1.0, "storage": 1.0, "bw": b},
                        {"cpu": 1.0, "mem": 1.0, "storage": 1.0, "bw": B}, u, cls, prov))
    base = Instance(T, RESOURCES, ws, ps, tuple(jobs), progress="placement")
    o = draw(st.sampled_from([1.0, 2.0, 4.0]))
    return dataclasses.replace(base, topology=Topology.from_racks(base, o))


def bracket_holds(inst: Instance) -> tuple[float, float, float]:
    """Checks lower <= OPT <= upper and the lower schedule; returns (lower, OPT, upper)."""
    sched = solve(inst, "offline-topo")
    report = validate(inst, sched)
    assert report.ok, str(report)
    assert sched.stats["proven_optimal"] and sched.stats["status"] == "optimal"
    lower = sched.total_utility
    # the program's objective is the utility the validator (the simulator's accounting) derives
    assert sched.stats["objective"] == pytest.approx(lower, rel=1e-9, abs=1e-9)
    # every slot of every job runs at full speed: placement-aware worker-slots >= workers
    gjob, gslot, got = placement_worker_slots(inst, sched.allocations)
    workers = sched.allocations.workers_per_job_slot(inst.I, inst.horizon)
    assert (got >= workers[gjob, gslot] * (1 - 1e-12)).all()
    # started from a greedy schedule's full-speed part: the same optimum, never below the start
    greedy = solve(inst, "greedy", placement="tree")
    started = TopoOfflinePolicy().solve_from(inst, greedy)
    assert started.total_utility == pytest.approx(lower, rel=2 * MIP_GAP, abs=1e-9)
    assert validate(inst, started).ok
    kept = sum(greedy.utility[i] for i in full_speed_jobs(inst, greedy))
    assert lower >= kept - 2 * MIP_GAP * abs(kept) - 1e-9
    opt = brute_force(inst)
    upper = placement_upper_bound(inst)
    assert upper["status"] == "optimal"
    assert lower <= opt + 1e-9
    # solver bounds hold up to its relative MIP gap tolerance
    assert opt <= upper["upper"] * (1 + MIP_GAP) + 1e-9
    assert upper["upper"] <= lp_bound(inst) + 1e-6
    assert placement_upper_bound(inst, relax=True)["upper"] == pytest.approx(lp_bound(inst))
    return lower, opt, upper["upper"]


@settings(max_examples=100, deadline=None)
@given(two_racks())
def test_full_speed_schedule_and_topology_free_bound_bracket_the_brute_force_optimum(inst):
    lower, opt, upper = bracket_holds(inst)
    if inst.topology.link_bandwidth("rack-0", "core") == 40.0:  # 1:1, every eta = 1
        assert lower == pytest.approx(opt, abs=1e-7) and opt == pytest.approx(upper, abs=1e-7)


def one_job(tau: float, o: float = 4.0) -> Instance:
    """Two racks, one 1-GPU worker server and one PS server each; one job of N = 2 workers and
    3 worker-slots (b = B = 5: 2 workers need 2 PSs) that must finish by T = 2. Rack-local it
    runs one worker a slot (2 worker-slots: too few); across the racks, one worker and one PS in
    each, it gets 2 eta a slot with eta = (tau + 0.32) / (tau + 0.64) at 4:1 (S = 100 MB)."""
    ws = tuple(Server(f"w{r}", {"gpu": 1.0, "cpu": 16.0, "mem": 64.0, "storage": 100.0,
                                "bw": 20.0}, f"rack-{r}") for r in range(2))
    ps = tuple(Server(f"p{r}", {"gpu": 0.0, "cpu": 16.0, "mem": 64.0, "storage": 100.0,
                                "bw": 20.0}, f"rack-{r}") for r in range(2))
    job = Job("j", 1, 1, 2, 1.5, {"gpu": 1.0, "cpu": 1.0, "mem": 1.0, "storage": 1.0, "bw": 5.0},
              {"cpu": 1.0, "mem": 1.0, "storage": 1.0, "bw": 5.0}, Utility.sigmoid(10, 1, 3),
              "time-sensitive", {"minibatch_time_s": tau, "gradient_mb": 100.0})
    base = Instance(2, RESOURCES, ws, ps, (job,), progress="placement")
    return dataclasses.replace(base, topology=Topology.from_racks(base, o))


def test_the_lower_bound_is_strict_when_only_a_straddling_placement_finishes_in_time():
    """tau = 1: eta = 0.805, 2 x 2 x 0.805 >= 3 worker-slots across the racks: OPT finishes the
    job; no full-speed schedule does."""
    inst = one_job(1.0)
    lower, opt, upper = bracket_holds(inst)
    assert lower == 0.0 < opt == pytest.approx(upper) == pytest.approx(inst.utility_of(0, 2))


def test_the_upper_bound_is_strict_when_crossing_is_too_slow():
    """tau = 0.05: eta = 0.536 across the racks, too slow; the topology-free MILP still counts
    two full worker-slots a slot."""
    lower, opt, upper = bracket_holds(one_job(0.05))
    assert lower == opt == 0.0 < upper


def test_a_balanced_split_at_2_to_1_runs_at_full_speed():
    """At 2:1 one worker and one PS in each rack load each uplink with exactly 1/b: the program
    admits this straddling placement (its rows are exact, not 'never cross')."""
    inst = one_job(0.05, o=2.0)
    lower, opt, upper = bracket_holds(inst)
    assert lower == opt == upper > 0


def test_full_speed_rows_exist_only_for_oversubscribed_links():
    inst = one_job(1.0)
    plain = dataclasses.replace(inst, topology=Topology.from_racks(inst, 1.0))
    assert build_full_speed_milp(plain).lp.n_cols < build_full_speed_milp(inst).lp.n_cols
    chunk = dataclasses.replace(inst, progress="chunk-time")
    assert solve(chunk, "offline-topo").total_utility == solve(chunk, "offline").total_utility


def test_upper_bound_refuses_faster_accelerators():
    inst = one_job(1.0)
    ws = tuple(dataclasses.replace(s, kind="V100") for s in inst.worker_servers)
    fast = dataclasses.replace(inst, worker_servers=ws)
    with pytest.raises(ValueError, match=r"servers\[0\].*speed 1.6 > 1"):
        placement_upper_bound(fast)


def test_a_limit_leaves_a_valid_schedule_and_claims_no_optimality():
    """12 Philly jobs on 2 racks of 2 servers at 4:1: no node is enough to find a schedule."""
    inst = philly_instance("2017-11-01", 0.5, 0, slot_s=7200,
                           cluster=PhillyCluster(racks=2, servers_per_rack=2, ps_per_rack=1),
                           select=PhillyFilter(max_jobs=12),
                           mapping=TraceMapping(tail=2, oversubscription=4.0,
                                                progress="placement"))
    sched = solve(inst, "offline-topo", node_limit=0)
    assert sched.stats["status"] == "node_limit" and not sched.stats["proven_optimal"]
    assert "proven optimal" not in sched.stats["message"]
    assert "full-speed" in sched.stats["program"]
    assert validate(inst, sched).ok
    # from a greedy schedule with tree placement: its full-speed part is the incumbent at least
    greedy = solve(inst, "greedy", placement="tree")
    kept = full_speed_jobs(inst, greedy)
    assert kept  # tree placement keeps these jobs inside a rack
    started = TopoOfflinePolicy(node_limit=0).solve_from(inst, greedy)
    assert validate(inst, started).ok and started.stats["incumbent"]
    assert started.total_utility >= sum(greedy.utility[i] for i in kept) - 1e-7
