"""Offline programs for placement-aware progress: a full-speed MILP and a topology-free bound.

With ``instance.progress == "placement"`` (``costmodel.placement``) a job with W workers and P
PSs in a slot gains W T_ref / T_actual worker-slots, where (PS model, every r_l, speed s)

    T_ref    = tau + 2 S' max(1/b, W/(P B)),          S' = S x 8/1000 (seconds per Gbps)
    T_actual = tau / s + 2 S' max over the links l its containers use of
               max( (1 - P_l/P) / (b r_l)  [if W_l > 0],   (W - W_l) / (P B r_l)  [if P_l > 0] ),

W_l, P_l its workers and PSs under link l, r_l the link's share (1 for a server's own link and
for a non-blocking uplink, 1/o under o:1 oversubscription), s the slowest of its worker servers'
accelerator speeds (1 for a job that uses no GPU). Two facts about every schedule that passes the
validator give the two programs:

* **eta <= max(1, s).** Workers and PSs live on different servers (the two pools), so on a
  worker server's own link (r = 1) P_l = 0 and the first term is 1/b; constraint (6),
  P B >= W b, makes W/(P B) <= 1/b, so T_actual >= tau/s + 2 S'/b and T_ref = tau + 2 S'/b: the
  ratio is at most max(1, s) (<= 1 when s <= 1). Ring allreduce likewise (a ring of n >= 2
  workers on separate servers has a step at >= 1/b; one worker has no communication).
  Hence, on an instance where no GPU job can use an accelerator faster than the reference
  (speed <= 1; every Philly and paper instance), a worker-slot credits at most one worker-slot,
  every valid placement-aware schedule is a feasible solution of the topology-free MILP of (1)
  (``milp_arrays``) with the same utility, and that MILP's optimum, any proven bound of it and
  its LP relaxation are **upper bounds** on the placement-aware optimum
  (:func:`placement_upper_bound`; it refuses instances with faster accelerators, where the
  bound would need the speeds in (2) and in the earliest completion slots).
* **Full speed, exactly.** Given (6), T_actual <= T_ref (eta >= 1, with s >= 1) iff every link's
  terms are <= 1/b, which only links with r_l < 1 can break. For such a link, with P = P_in + P_out
  and W = W_in + W_out split by the link,

      W_in > 0  =>  P_out <= r_l P                  (a worker under l: few shards outside)
      P_in > 0  =>  b W_out <= r_l B P              (a PS under l: little worker traffic in)

  and for ring allreduce: W_in > 0 => W_out = 0 (no ring crosses the link). The program of the
  policy ``offline-topo`` (:func:`build_full_speed_milp`) is the MILP of (1) plus these rows,
  with binaries d (W_in > 0) and e (P_in > 0) per job, slot and oversubscribed link:

      W_in <= k_i d,   (1 - r) P_out - r P_in <= (1 - r) k_i (1 - d),
      P_in <= k_i e,   W_out - r (B/b) P <= k_i (1 - e)

  (k_i the job's most workers in a slot, which also bounds P <= W), and no worker column on a
  server slower than the reference for a GPU job. Every schedule it returns runs every slot at
  eta >= 1, so the placement-aware worker-slots cover what (2) counted, the job completes in the
  slot the MILP says (the last slot with workers) and the utility is the MILP's objective: a
  **feasible schedule, hence a lower bound** on the placement-aware optimum. It equals the
  optimum whenever some optimal schedule runs at full speed, and is below it when only a slower,
  straddling placement finishes a job in time (tested against brute force).

Under a time limit the ``offline-topo`` schedule is still feasible (its utility a lower bound on
OPT), and ``stats["bound"]`` is a bound on the full-speed program only, not on OPT (the
``stats["program"]`` field says so); :func:`placement_upper_bound` gives the upper end of the
bracket. On a chunk-time instance every placement runs at full speed and the program is the
``offline`` MILP itself.
"""
from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any, Iterator

import numpy as np
import scipy.sparse as sp

from ..model.instance import Instance
from ..model.schedule import Schedule, ScheduleBuilder
from ..model.validate import assert_valid
from .exact import OfflinePolicy
from .milp_arrays import KINDS, U, X, Y, Z, MilpModel, build_milp, job_sets, milp_size
from .solver import MIP_GAP, LinearProgram, SolverLimits, solve_program
from ..model.numerics import NOISE_RTOL

# column kind of the link binaries, after milp_arrays' kinds; their ``server`` field is
# 2 n + 0 for d (W_in > 0) and 2 n + 1 for e (P_in > 0) of oversubscribed link n
LINK = len(KINDS)
PROGRAM = "full-speed schedules (every slot at eta >= 1): a feasible schedule, a lower bound on OPT"


def oversubscribed_links(instance: Instance) -> tuple[np.ndarray, np.ndarray]:
    """(ratio (L,), member (L, H + K) bool) of the links with share r_l < 1: the servers under
    each (global index). Empty on a chunk-time instance."""
    if instance.progress != "placement":
        return np.zeros(0), np.zeros((0, instance.H + instance.K), dtype=bool)
    from ..costmodel.placement import context

    ctx = context(instance)
    links = np.flatnonzero(ctx.ratio < 1.0)
    member = (ctx.links[None, :, :] == links[:, None, None]).any(axis=2)
    return ctx.ratio[links], member


def _slow_servers(instance: Instance) -> np.ndarray:
    """(I, H) bool: worker server h is slower than the reference for job i (a GPU job on an
    accelerator of speed < 1), where its compute would make eta < 1."""
    if instance.progress != "placement":
        return np.zeros((instance.I, instance.H), dtype=bool)
    from ..costmodel.placement import context

    ctx = context(instance)
    return ctx.uses_gpu[:, None] & (ctx.speed[None, : instance.H] < 1.0)


def _pairs(instance: Instance, ratio: np.ndarray, member: np.ndarray
           ) -> Iterator[tuple[int, int, bool, bool]]:
    """Per job with variables, the oversubscribed links that can split it: (job, link, rows
    needed (a), (b))."""
    sets = job_sets(instance)[0]
    H = instance.H
    allreduce = _allreduce(instance)
    for i, js in sets.items():
        for n in range(len(ratio)):
            w_in = member[n, js.hs]
            p_in = member[n, js.ks + H]
            if allreduce:
                yield i, n, bool(w_in.any() and (~w_in).any()), False
            else:
                yield i, n, bool(w_in.any() and (~p_in).any()), bool(p_in.any() and (~w_in).any())


def _allreduce(instance: Instance) -> bool:
    from ..costmodel.placement import costmodel_options

    return costmodel_options(instance).get("collective", "ps") == "allreduce"


def full_speed_size(instance: Instance) -> dict[str, int]:
    """Size of :func:`build_full_speed_milp`'s program without building it: ``milp_size`` plus
    the link binaries and rows (nonzeros an upper bound, as ``milp_size``'s)."""
    out = dict(milp_size(instance))
    ratio, member = oversubscribed_links(instance)
    if not len(ratio):
        return out
    sets = job_sets(instance)[0]
    T = instance.horizon
    for i, n, a, b in _pairs(instance, ratio, member):
        js, ns = sets[i], T - int(instance.arrival[i]) + 1
        width = len(js.hs) + len(js.ks) + 1
        out["columns"] += ns * (a + b)
        out["rows"] += 2 * ns * (a + b)
        out["nonzeros"] += 2 * ns * width * (a + b)
    return out


def build_full_speed_milp(instance: Instance, deadline: float | None = None) -> MilpModel:
    """The MILP of (1) with the full-speed rows of the module docstring (``offline-topo``)."""
    model = build_milp(instance, deadline=deadline)
    ratio, member = oversubscribed_links(instance)
    slow = _slow_servers(instance)
    upper = model.lp.upper.copy()
    ycols = np.flatnonzero(model.kind == Y)
    upper[ycols[slow[model.job[ycols], model.server[ycols]]]] = 0.0
    yz = np.flatnonzero((model.kind == Y) | (model.kind == Z))
    if not len(ratio) or not len(yz):
        return replace(model, lp=replace(model.lp, upper=upper))
    t_start = time.perf_counter() - model.build_s
    H, allreduce = instance.H, _allreduce(instance)
    # the y / z columns of every (job, slot), grouped
    order = np.lexsort((model.slot[yz], model.job[yz]))
    yz = yz[order]
    key = model.job[yz] * (instance.horizon + 1) + model.slot[yz]
    starts = np.r_[0, np.flatnonzero(np.diff(key)) + 1, len(yz)]
    group = {int(key[s]): yz[s:e] for s, e in zip(starts[:-1], starts[1:])}
    sets = job_sets(instance)[0]
    rows_r: list[np.ndarray] = []
    rows_c: list[np.ndarray] = []
    rows_v: list[np.ndarray] = []
    lo: list[float] = []
    up: list[float] = []
    new_job: list[int] = []
    new_slot: list[int] = []
    new_link: list[int] = []
    n_cols = model.lp.n_cols

    def row(cols: np.ndarray, vals: np.ndarray, bound: float) -> None:
        rows_r.append(np.full(len(cols), len(up), dtype=np.int64))
        rows_c.append(cols)
        rows_v.append(vals)
        lo.append(-math.inf)
        up.append(bound)

    def binary(i: int, t: int, n: int, which: int) -> int:
        nonlocal n_cols
        new_job.append(i)
        new_slot.append(t)
        new_link.append(2 * n + which)
        n_cols += 1
        return n_cols - 1

    b, B = instance.worker_bw, instance.ps_bw
    for i, n, need_a, need_b in _pairs(instance, ratio, member):
        if not (need_a or need_b):
            continue
        if deadline is not None and time.perf_counter() >= deadline:
            from .milp_arrays import DeadlineReached

            raise DeadlineReached("the time limit was reached while adding the link rows "
                                  f"({time.perf_counter() - t_start:.1f} s)")
        k, r = float(sets[i].kmax), float(ratio[n])
        for t in range(int(instance.arrival[i]), instance.horizon + 1):
            cols = group[i * (instance.horizon + 1) + t]
            worker = model.kind[cols] == Y
            inside = member[n, model.server[cols]]
            w_in, w_out = cols[worker & inside], cols[worker & ~inside]
            p_in, p_out = cols[~worker & inside], cols[~worker & ~inside]
            if allreduce:  # W_in > 0 => W_out = 0
                d = binary(i, t, n, 0)
                row(np.r_[w_in, d], np.r_[np.ones(len(w_in)), -k], 0.0)
                row(np.r_[w_out, d], np.r_[np.ones(len(w_out)), k], k)
                continue
            if need_a:  # W_in > 0 => (1 - r) P_out - r P_in <= 0
                d = binary(i, t, n, 0)
                row(np.r_[w_in, d], np.r_[np.ones(len(w_in)), -k], 0.0)
                row(np.r_[p_out, p_in, d], np.r_[np.full(len(p_out), 1.0 - r),
                                                 np.full(len(p_in), -r), (1.0 - r) * k],
                    (1.0 - r) * k)
            if need_b:  # P_in > 0 => W_out - r (B/b) (P_in + P_out) <= 0
                e = binary(i, t, n, 1)
                c = r * float(B[i]) / float(b[i])
                row(np.r_[p_in, e], np.r_[np.ones(len(p_in)), -k], 0.0)
                row(np.r_[w_out, p_in, p_out, e],
                    np.r_[np.ones(len(w_out)), np.full(len(p_in) + len(p_out), -c), k], k)
    added = n_cols - model.lp.n_cols
    lp = model.lp
    if rows_r:
        extra = sp.csr_matrix((np.concatenate(rows_v), (np.concatenate(rows_r),
                                                        np.concatenate(rows_c))),
                              shape=(len(up), n_cols))
    else:
        extra = sp.csr_matrix((0, n_cols))
    A = sp.vstack([sp.hstack([lp.A, sp.csr_matrix((lp.n_rows, added))]), extra], format="csr")
    lp = LinearProgram(c=np.r_[lp.c, np.zeros(added)], A=A,
                       row_lower=np.r_[lp.row_lower, lo], row_upper=np.r_[lp.row_upper, up],
                       lower=np.r_[lp.lower, np.zeros(added)], upper=np.r_[upper, np.ones(added)],
                       integer=np.r_[lp.integer, np.ones(added, dtype=bool)], sense=lp.sense)
    return replace(model, lp=lp, kind=np.r_[model.kind, np.full(added, LINK, np.int8)],
                   job=np.r_[model.job, np.asarray(new_job, np.int64)],
                   slot=np.r_[model.slot, np.asarray(new_slot, np.int64)],
                   server=np.r_[model.server, np.asarray(new_link, np.int64)],
                   build_s=time.perf_counter() - t_start)


def full_speed_jobs(instance: Instance, schedule: Schedule) -> list[int]:
    """The jobs ``schedule`` completes with every slot at full speed (placement-aware
    worker-slots >= workers) and plain worker-slots covering their work: the part of it that is
    a feasible point of the full-speed program."""
    a = schedule.allocations
    I, T = instance.I, instance.horizon
    workers = a.workers_per_job_slot(I, T)
    ok = np.array([c is not None for c in schedule.completion])
    ok &= workers.sum(axis=1) >= instance.work
    if instance.progress == "placement" and len(a):
        from ..costmodel.placement import placement_worker_slots

        gjob, gslot, got = placement_worker_slots(instance, a)
        slow = got < workers[gjob, gslot] * (1.0 - NOISE_RTOL)
        ok[gjob[slow]] = False
        speed_ok = ~_slow_servers(instance)
        w = (a.role == 0) & (a.count > 0)
        ok[a.job[w][~speed_ok[a.job[w], a.server[w]]]] = False
    return [int(i) for i in np.flatnonzero(ok)]


def full_speed_part(instance: Instance, schedule: Schedule, policy: str) -> Schedule:
    """``schedule`` restricted to its ``full_speed_jobs`` (and zero-work jobs): a schedule of
    the full-speed program, with the same utility on those jobs."""
    keep = set(full_speed_jobs(instance, schedule))
    builder = ScheduleBuilder(instance)
    for i in sorted(keep | set(np.flatnonzero(instance.work == 0).tolist())):
        builder.admit(int(i))
    a = schedule.allocations
    m = np.isin(a.job, sorted(keep))
    builder.add_array(np.column_stack([a.job[m], a.slot[m], a.server[m], a.role[m], a.count[m]]))
    return builder.build(policy, {})


def encode(model: MilpModel, instance: Instance, schedule: Schedule) -> np.ndarray:
    """A feasible point of the program ``model`` (``build_full_speed_milp``'s) from
    ``schedule``: its ``full_speed_jobs`` with their allocations, every other job rejected
    (which only frees capacity), and the link binaries d = [W_in > 0], e = [P_in > 0]."""
    point = np.zeros(model.lp.n_cols)
    keep = set(full_speed_jobs(instance, schedule)) & set(model.job[model.kind == X].tolist())
    if not keep:
        return point
    index = {key: n for n, key in enumerate(zip(model.kind.tolist(), model.job.tolist(),
                                                model.slot.tolist(), model.server.tolist()))}
    a = schedule.allocations
    for i in sorted(keep):
        cols, counts = [], []
        for m in np.flatnonzero((a.job == i) & (a.count > 0)):
            key = (Y if a.role[m] == 0 else Z, i, int(a.slot[m]), int(a.server[m]))
            cols.append(index.get(key, -1))
            counts.append(int(a.count[m]))
        completion = schedule.completion[i]
        assert completion is not None  # full_speed_jobs keeps completed jobs only
        u = index.get((U, i, int(completion), -1), -1)
        if min(cols, default=-1) < 0 or u < 0 or any(
                c > model.lp.upper[n] for n, c in zip(cols, counts)):
            continue  # a container the program has no column for: leave the job out
        point[index[(X, i, 0, -1)]] = 1.0
        point[u] = 1.0
        point[cols] = counts
    ratio, member = oversubscribed_links(instance)
    for n in np.flatnonzero(model.kind == LINK):
        i, t, link, which = int(model.job[n]), int(model.slot[n]), *divmod(int(model.server[n]), 2)
        if point[index[(X, i, 0, -1)]] == 0:
            continue
        role = (a.job == i) & (a.slot == t) & (a.role == which) & member[link, a.server]
        point[n] = float(a.count[role].sum() > 0)
    return point


class TopoOfflinePolicy(OfflinePolicy):
    """The best schedule whose every slot runs at full speed under placement-aware progress
    (policy ``offline-topo``; module docstring): a feasible schedule and so a lower bound on the
    placement-aware optimum. HiGHS only (the link rows have fractional coefficients r_l and
    r_l B_i / b_i). Options and ``stats`` as ``offline``'s (``exact.OfflinePolicy``), except
    that ``proven_optimal`` and ``bound`` refer to the full-speed program (``stats["program"]``),
    not to the instance's optimum.
    """

    def __init__(self, seed: int = 0, mip_gap: float = MIP_GAP, node_limit: int | None = None,
                 solution_limit: int | None = None, memory_budget_gb: float | None = None,
                 isolate: bool | None = None):
        super().__init__(backend="highs", seed=seed, mip_gap=mip_gap, node_limit=node_limit,
                         solution_limit=solution_limit, memory_budget_gb=memory_budget_gb,
                         isolate=isolate)
        self.name = "offline-topo"
        self._start: Schedule | None = None

    def initial_point(self, model: MilpModel, instance: Instance) -> np.ndarray:
        if self._start is None:
            return super().initial_point(model, instance)
        return encode(model, instance, self._start)

    def solve_from(self, instance: Instance, start: Schedule, *,
                   time_limit: float | None = None, progress: bool = False) -> Schedule:
        """``solve`` with the full-speed part of ``start`` (``full_speed_part``; e.g. a greedy
        schedule with tree placement) as the solver's starting incumbent; a limit returns at
        least that part (also when the solver is killed: then the part itself, with
        ``stats["incumbent"] == "start"``)."""
        self._start = start
        try:
            schedule = self.solve(instance, time_limit=time_limit, progress=progress)
        finally:
            self._start = None
        part = full_speed_part(instance, start, self.name)
        if part.total_utility > schedule.total_utility:
            # the solver was stopped (or killed) before it returned the start: keep the start
            assert_valid(instance, part)
            part.stats.update({**schedule.stats, "incumbent": "start",
                               "objective": part.total_utility,
                               "message": schedule.stats.get("message", "") + "; returning the "
                               "start's full-speed part, which is better"})
            return part
        return schedule

    def build(self, instance: Instance, deadline: float | None) -> MilpModel:
        return build_full_speed_milp(instance, deadline)

    def program_size(self, instance: Instance) -> dict[str, int]:
        return full_speed_size(instance)

    def solve(self, instance: Instance, *, time_limit: float | None = None,
              progress: bool = False) -> Schedule:
        schedule = super().solve(instance, time_limit=time_limit, progress=progress)
        schedule.stats["program"] = PROGRAM
        if schedule.stats.get("proven_optimal"):
            schedule.stats["message"] = ("proven optimal among full-speed schedules (a lower "
                                         "bound on the placement-aware optimum)")
        return schedule


def placement_upper_bound(instance: Instance, *, time_limit: float | None = None,
                          relax: bool = False, node_limit: int | None = None) -> dict[str, Any]:
    """An upper bound on the placement-aware optimum: the topology-free MILP of (1), solved by
    HiGHS (its optimum, or under ``time_limit`` / ``node_limit`` its proven bound), or with
    ``relax`` its LP relaxation (module docstring: valid because eta <= 1 when no GPU job can
    use an accelerator of speed > 1; ``ValueError`` naming the server otherwise).

    Returns ``{"upper": bound or None (no bound proven), "status", "relax", "objective"}``
    (``objective``: the topology-free incumbent, not a placement-aware schedule). ``upper`` is
    HiGHS's dual bound, exact up to its tolerances (relative ``solver.MIP_GAP`` = 1e-6 on the
    MILP; the tests allow that much).
    """
    if instance.progress == "placement":
        from ..costmodel.placement import context

        ctx = context(instance)
        fast = np.flatnonzero(ctx.speed[: instance.H] > 1.0)
        if len(fast) and ctx.uses_gpu.any():
            s = instance.servers[int(fast[0])]
            raise ValueError(f"servers[{int(fast[0])}] ({s.id!r}, kind {s.kind!r}): an "
                             f"accelerator of speed {ctx.speed[fast[0]]:g} > 1 can credit more "
                             "than one worker-slot per worker; the topology-free MILP is not an "
                             "upper bound there")
    model = build_milp(instance)
    limits = SolverLimits(time_limit=time_limit, node_limit=None if relax else node_limit)
    res = solve_program(model.lp, limits, backend="highs", relax=relax)
    shift = model.constant
    # the proven (dual) bound: an optimal MILP's incumbent may sit up to the MIP gap below it
    found = [v for v in (res.bound, res.objective if res.status == "optimal" else None)
             if v is not None]
    upper = max(found) + shift if found else None
    return {"upper": upper, "status": res.status, "relax": relax,
            "objective": None if res.objective is None else res.objective + shift}
