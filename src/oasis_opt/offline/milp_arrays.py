"""The linearised MILP of problem (1) (reference section 2.1) as arrays for the solver layer.

Variables (all integer), per job i that can run at all:

* ``x_i`` in {0,1}: admitted (eq. (11));
* ``u_it`` in {0,1}: job i completes in slot t, for t in [t0_i, T] where
  ``t0_i = a_i + ceil(work_i / k_i) - 1`` and k_i is the most workers the job can ever have in a
  slot (N_i, the worker servers' room, the PS room through (6)): no earlier completion exists;
* ``y_iht`` in {0..min(N_i, room of h)}: workers of i on worker server h in slot t >= a_i
  (eqs. (9), (12): no variable before arrival; none on a server too small for one worker);
* ``z_ikt`` likewise for PSs (eqs. (10), (13)).

Objective (1): ``max sum_i sum_t f_i(t - a_i) u_it``. Constraints, in worker-slots
(``instance.work`` = ceil(E_i N_i x_i) is the workload of (2) everywhere in the package):

* (2)   ``sum_{t,h} y_iht >= work_i x_i``;
* ``sum_t u_it = x_i`` (one completion slot iff admitted);
* no workers after completion, which also gives (3):
  ``sum_h y_iht <= k_i sum_{t' >= t} u_it'`` (``k_i x_i`` for t < t0_i), with the big M
  k_i <= N_i above (the tightest valid one: with N_i ~ 100 and one worker per server the LP
  could run workers after a fractional completion almost for free);
* a worker in the completion slot: ``u_it <= sum_h y_iht``, so the completion slot is the last
  slot with workers, as (8) defines it, and ``ScheduleBuilder`` derives the same utility;
* (4)/(5) ``sum_i w_i^r y_iht <= c_h^r`` and ``sum_i s_i^r z_ikt <= c_k^r`` (rows that no
  choice of the variables can violate are left out);
* (6)   ``b_i sum_h y_iht <= B_i sum_k z_ikt``, written ``p_i sum_h y - q_i sum_k z <= 0``
  with the simplest fraction p_i/q_i that gives the same integer points for sum_h y <= k_i
  (:func:`ps_ratio`): small integer coefficients instead of float bandwidths, which CP-SAT
  needs and HiGHS solved faster with (about 1.5x over the 16 Fig. 5 instances, one run);
* (7)   ``sum_k z_ikt <= sum_h y_iht``.

**Accelerator types** (``model.instance``). A column ``y_iht`` exists only on a server of a type
g(h) the job can use, its room is counted with the job's demand there, w_{i g(h)}^r, and so are
rows (4); constraint (2) counts work units, ``sum_{t,h} s_{i g(h)} y_iht >= work_i x_i``; and for
a job that may not span types and can use G_i >= 2 of the cluster's types, binaries ``v_igt``
(job i's workers of slot t sit on type g) with ``sum_g v_igt <= 1`` and
``sum_{h of type g} y_iht <= k_ig v_igt`` (k_ig: its most workers on type g in a slot). The
earliest completion t0_i uses the most units a slot can give, m_i (:func:`max_units_per_slot`).
Without types s = 1, every server is usable and no v exists: the model is the paper's, column
for column.

Every reduction above removes only variables that are zero (or rows that hold) in every feasible
solution, so the optimum equals that of the unreduced model in :mod:`.milp_pyomo` (tested).
A disaggregated linking row per server and a cumulative-work row per slot were tried and
dropped: the LP bound moved by < 2 % and the solves did not get faster.
Jobs with zero work complete on arrival without resources (as ``derive_outcome`` counts them):
they are admitted outside the model and their utility is the model's ``constant``.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from ..model.instance import Instance
from ..model.numerics import NOISE_RTOL, WORK_EPS, fit_count
from ..model.schedule import PS, WORKER, Schedule, ScheduleBuilder
from .solver import LinearProgram

X, U, Y, Z, V = 0, 1, 2, 3, 4  # variable kinds (v: the type a job's workers use in a slot)
KINDS = ("x", "u", "y", "z", "v")


def server_room(capacity: np.ndarray, demand: np.ndarray) -> np.ndarray:
    """``[i, s]`` = most containers of job i (demand row) that fit on an empty server s.

    ``model.numerics.fit_count``: the fit the simulator, the dual subroutine and the validator
    use, min over resources with positive demand of floor((c_s^r + FIT_EPS) / d_i^r); 2^31 when
    the job demands nothing of the pool.
    """
    room = np.empty((len(demand), len(capacity)))
    for i, d in enumerate(demand):
        room[i] = fit_count(capacity, d, cap=2**31)
    return room


@dataclass(frozen=True)
class MilpModel:
    """The MILP of one instance: the program plus what each column means.

    ``kind[j]``, ``job[j]``, ``slot[j]`` (0 for x), ``server[j]`` (global index, -1 for x/u; the
    type index for v) describe column j. ``constant``: utility of zero-work jobs (admitted outside the model).
    ``excluded``: job -> why it cannot run at all (x_i = 0 without a variable).
    """

    lp: LinearProgram
    kind: np.ndarray
    job: np.ndarray
    slot: np.ndarray
    server: np.ndarray
    constant: float
    zero_work: tuple[int, ...]
    excluded: dict[int, str] = field(default_factory=dict)
    build_s: float = 0.0

    @property
    def x_cols(self) -> np.ndarray:
        return np.flatnonzero(self.kind == X)

    def size(self) -> dict:
        return {"columns": self.lp.n_cols, "rows": self.lp.n_rows, "nonzeros": int(self.lp.A.nnz)}


class _Coo:
    """Row-by-row accumulation of (row, col, value) triplets and row bounds."""

    def __init__(self) -> None:
        self.r: list[np.ndarray] = []
        self.c: list[np.ndarray] = []
        self.v: list[np.ndarray] = []
        self.lo: list[float] = []
        self.up: list[float] = []

    def row(self, cols: ArrayLike, vals: ArrayLike, lo: float = -math.inf,
            up: float = math.inf) -> None:
        cols = np.asarray(cols, dtype=np.int64).ravel()
        vals = np.broadcast_to(np.asarray(vals, dtype=float), cols.shape)
        self.r.append(np.full(len(cols), len(self.lo), dtype=np.int64))
        self.c.append(cols)
        self.v.append(vals)
        self.lo.append(lo)
        self.up.append(up)

    def rows(self, rows: ArrayLike, cols: ArrayLike, vals: ArrayLike, lo: ArrayLike,
             up: ArrayLike) -> None:
        """Many rows at once: entries (rows[n] relative to the new block, cols[n], vals[n])."""
        base = len(self.lo)
        self.r.append(np.asarray(rows, dtype=np.int64) + base)
        self.c.append(np.asarray(cols, dtype=np.int64))
        self.v.append(np.asarray(vals, dtype=float))
        self.lo.extend(np.asarray(lo, dtype=float).tolist())
        self.up.extend(np.asarray(up, dtype=float).tolist())

    def matrix(self, n_cols: int) -> sp.csr_matrix:
        m = len(self.lo)
        if not self.r:
            return sp.csr_matrix((m, n_cols))
        return sp.csr_matrix((np.concatenate(self.v), (np.concatenate(self.r),
                                                       np.concatenate(self.c))), shape=(m, n_cols))


def max_workers_per_slot(instance: Instance, wroom: np.ndarray, proom: np.ndarray
                         ) -> np.ndarray:
    """k_i: most workers job i can have in one slot, from N_i, the worker servers' room and the
    PS servers' room (k workers need ceil(k b_i / B_i) PSs, constraint (6), and PSs <= workers)."""
    N = instance.chunks.astype(float)
    kw = np.minimum(N, wroom.sum(axis=1))
    zmax = np.minimum(N, proom.sum(axis=1))
    b, B = instance.worker_bw, instance.ps_bw
    with np.errstate(divide="ignore", invalid="ignore"):
        kp = np.where(b > 0, np.floor(zmax * B / np.where(b > 0, b, 1) + WORK_EPS), np.inf)
    return np.minimum(kw, kp).astype(np.int64)


def worker_room(instance: Instance) -> np.ndarray:
    """``[i, h]``: most workers of job i on an empty worker server h, with its demand on h's
    type (0 on a type it cannot use), capped at N_i."""
    if not instance.typed:
        room = server_room(instance.worker_capacity, instance.worker_demand)
    else:
        room = np.zeros((instance.I, instance.H))
        for g in range(len(instance.types)):
            mask = instance.type_mask[g]
            part = server_room(instance.worker_capacity[mask], instance.type_demand[:, g])
            room[:, mask] = np.where(instance.usable[:, g][:, None], part, 0.0)
    return np.minimum(room, instance.chunks[:, None])


def max_units_per_slot(instance: Instance, wroom: np.ndarray, kmax: np.ndarray) -> np.ndarray:
    """m_i: most work units job i can do in one slot with at most k_i workers: the fastest
    type's room first when it may span types, else the best single type (s_ig times its workers
    there). k_i without types (one unit per worker)."""
    if not instance.typed:
        return kmax
    speed = instance.type_speed
    out = np.zeros(instance.I, dtype=np.int64)
    for i in range(instance.I):
        per_type = [(int(speed[i, g]), int(wroom[i, instance.type_mask[g]].sum()))
                    for g in instance.type_order(i)]
        if instance.span_types[i]:
            left, units = int(kmax[i]), 0
            for s, room in per_type:
                take = min(left, room)
                units, left = units + s * take, left - take
            out[i] = units
        else:
            out[i] = max((s * min(int(kmax[i]), room) for s, room in per_type), default=0)
    return out


def ps_ratio(instance: Instance, job: int, kmax: int) -> tuple[float, float]:
    """(p, q) with ``ceil(k p / q) = ps_needed(job, k)`` for every k = 1..kmax, p/q simplest.

    Constraint (6) only matters at integer worker counts k <= kmax, where it says
    ``PSs >= ceil(k b_i / B_i)`` (``Instance.ps_needed``, with its float tolerance). The simplest
    fraction p/q in the interval that reproduces those counts gives the same integer points
    with small integer coefficients (exact for CP-SAT, clean for HiGHS). Falls back to
    (b_i, B_i) if the counts admit no single ratio (float ties only).
    """
    from fractions import Fraction

    b, B = float(instance.worker_bw[job]), float(instance.ps_bw[job])
    if kmax < 1:
        return b, B
    k = np.arange(1, kmax + 1)
    need = np.asarray(instance.ps_needed(job, k), dtype=np.int64)
    lo = max(Fraction(int(n) - 1, int(kk)) for n, kk in zip(need, k))  # p/q > lo
    hi = min(Fraction(int(n), int(kk)) for n, kk in zip(need, k))  # p/q <= hi
    if lo >= hi:
        return b, B
    for q in range(1, 4 * kmax * kmax + 2):  # an interval of width >= 1/kmax^2 holds one
        p = math.floor(hi * q)
        if Fraction(p, q) > lo:
            return float(p), float(q)
    return b, B


@dataclass(frozen=True)
class JobSets:
    """Index sets of one job that can run: worker servers ``hs`` and PS servers ``ks`` with room
    for one container, first possible completion slot ``t0`` and most workers per slot ``kmax``."""

    hs: np.ndarray
    ks: np.ndarray
    t0: int
    kmax: int


def job_sets(instance: Instance) -> tuple[dict[int, JobSets], dict[int, str], list[int],
                                          tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per job: its ``JobSets`` if it gets variables, else why not (excluded) or zero work.

    Returns (sets, excluded, zero_work, (wroom, proom, kmax)) -- what ``build_milp`` builds from
    and ``milp_size`` counts.
    """
    T = instance.horizon
    wroom = worker_room(instance)
    proom = np.minimum(server_room(instance.ps_capacity, instance.ps_demand),
                       instance.chunks[:, None])
    kmax = max_workers_per_slot(instance, wroom, proom)
    units = max_units_per_slot(instance, wroom, kmax)
    sets: dict[int, JobSets] = {}
    excluded: dict[int, str] = {}
    zero_work: list[int] = []
    for i in range(instance.I):
        a = int(instance.arrival[i])
        if instance.work[i] == 0:
            zero_work.append(i)
            continue
        hs = np.flatnonzero(wroom[i] >= 1)
        ks = np.flatnonzero(proom[i] >= 1)
        if len(hs) == 0:
            excluded[i] = "no worker server has room for one worker"
            continue
        if len(ks) == 0 or kmax[i] < 1:
            excluded[i] = "no PS server has room for the PSs of one worker"
            continue
        t0 = a + int(-(-instance.work[i] // units[i])) - 1
        if t0 > T:
            excluded[i] = f"needs {t0 - a + 1} slots from arrival {a}, horizon is {T}"
            continue
        sets[i] = JobSets(hs, ks, t0, int(kmax[i]))
    return sets, excluded, zero_work, (wroom, proom, kmax)


def milp_size(instance: Instance) -> dict[str, int]:
    """Size of ``build_milp(instance)`` without building it: ``columns`` (exact) and upper bounds
    on ``rows`` and ``nonzeros`` (every capacity row (4)/(5) counted as if binding).

    Counted row by row from the same index sets (``job_sets``) as ``build_milp``; the test
    suite holds the two together. Per job: 1 + n_u + n_s (n_h + n_k) columns (n_s = T - a_i + 1
    slots, n_h / n_k servers with room, n_u = T - t0_i + 1 completion slots); the "no workers
    after completion" rows alone hold n_u (n_u + 1) / 2 nonzeros, quadratic in the horizon.
    """
    sets, _, _, _ = job_sets(instance)
    T = instance.horizon
    cols = rows = nnz = 0
    for i, js in sets.items():
        a = int(instance.arrival[i])
        ns, nh, nk, nu = T - a + 1, len(js.hs), len(js.ks), T - js.t0 + 1
        rw = int(np.count_nonzero(instance.type_demand[i] > 0, axis=1).max())  # any type's
        rp = int(np.count_nonzero(instance.ps_demand[i] > 0))
        gs = len(np.unique(instance.worker_type[js.hs]))
        if instance.typed and not instance.span_types[i] and gs > 1:  # the type binaries v
            cols += ns * gs
            rows += ns * (1 + gs)
            nnz += ns * (2 * gs + nh)
        cols += 1 + nu + ns * (nh + nk)
        rows += 2 + 3 * ns + nu
        nnz += ((1 + ns * nh) + (nu + 1) + (ns * nh + (js.t0 - a) + nu * (nu + 1) // 2)
                + (nu + nu * nh) + 2 * ns * (nh + nk) + ns * (nh * rw + nk * rp))
    rows += T * (instance.H + instance.K) * instance.R
    return {"columns": cols, "rows": rows, "nonzeros": nnz}


class DeadlineReached(Exception):
    """``build_milp`` passed its ``deadline`` before the model was complete."""


def build_milp(instance: Instance, deadline: float | None = None) -> MilpModel:
    """The reduced MILP of section 2.1 for ``instance`` (see the module docstring).

    ``deadline`` (a ``time.perf_counter()`` value): checked before each job, before each
    resource's capacity rows; ``DeadlineReached`` is raised once it has passed, or before the
    sparse matrix is assembled when less time is left than building took so far.
    """
    t_start = time.perf_counter()

    def check_deadline() -> None:
        if deadline is not None and time.perf_counter() >= deadline:
            raise DeadlineReached(f"the time limit was reached while building the MILP "
                                  f"({time.perf_counter() - t_start:.1f} s)")

    T, H = instance.horizon, instance.H
    sets, excluded, zero_work, (wroom, proom, kmax) = job_sets(instance)
    work, arrival = instance.work, instance.arrival
    speed = instance.server_speed

    kinds, jobs, slots, servers, ubs, cost = [], [], [], [], [], []
    n = 0

    def new_cols(kind: int, job: int, slot: ArrayLike, server: ArrayLike, ub: ArrayLike,
                 c: ArrayLike = 0.0) -> np.ndarray:
        nonlocal n
        slot = np.asarray(slot, dtype=np.int64).ravel()
        m = len(slot)
        kinds.append(np.full(m, kind, np.int8))
        jobs.append(np.full(m, job, np.int64))
        slots.append(slot)
        servers.append(np.broadcast_to(np.asarray(server, np.int64), slot.shape).ravel())
        ubs.append(np.broadcast_to(np.asarray(ub, float), slot.shape).ravel())
        cost.append(np.broadcast_to(np.asarray(c, float), slot.shape).ravel())
        n += m
        return np.arange(n - m, n)

    coo = _Coo()
    for i, js in sets.items():
        check_deadline()
        a, hs, ks, t0 = int(arrival[i]), js.hs, js.ks, js.t0
        ts = np.arange(a, T + 1)
        ns = len(ts)
        xc = new_cols(X, i, [0], -1, 1.0)[0]
        tu = np.arange(t0, T + 1)
        uc = new_cols(U, i, tu, -1, 1.0, instance.utility_table[i, tu])
        yc = new_cols(Y, i, np.repeat(ts, len(hs)), np.tile(hs, ns),
                      np.tile(wroom[i, hs], ns)).reshape(ns, len(hs))
        zc = new_cols(Z, i, np.repeat(ts, len(ks)), np.tile(ks + H, ns),
                      np.tile(proom[i, ks], ns)).reshape(ns, len(ks))
        # (2): work_i x_i - sum s_{i g(h)} y <= 0 (s = 1 without types)
        coo.row(np.r_[xc, yc.ravel()], np.r_[work[i], -np.tile(speed(i)[hs], ns)], up=0.0)
        # one completion slot iff admitted
        coo.row(np.r_[uc, xc], np.r_[np.ones(len(uc)), -1.0], lo=0.0, up=0.0)
        # no workers after completion, and (3) with k_i <= N_i as the big M:
        # sum_h y_t - k_i * (u_t + ... + u_T, or x_i before t0) <= 0
        for s, t in enumerate(ts):
            tail = uc[max(t - t0, 0):] if t >= t0 else [xc]
            coo.row(np.r_[yc[s], tail], np.r_[np.ones(len(hs)), -kmax[i] * np.ones(len(tail))],
                    up=0.0)
        # a worker in the completion slot: u_t - sum_h y_t <= 0
        s0 = t0 - a
        nh = len(hs)
        rel = np.arange(len(uc))
        coo.rows(np.r_[rel, np.repeat(rel, nh)], np.r_[uc, yc[s0:].ravel()],
                 np.r_[np.ones(len(uc)), -np.ones(len(uc) * nh)],
                 np.full(len(uc), -math.inf), np.zeros(len(uc)))
        # one type per slot unless the job may span types: sum_g v_gt <= 1 and
        # sum_{h of type g} y_ht - k_ig v_gt <= 0
        gs = np.unique(instance.worker_type[hs])
        if instance.typed and not instance.span_types[i] and len(gs) > 1:
            for s, t in enumerate(ts):
                vc = new_cols(V, i, np.full(len(gs), t), gs, 1.0)
                coo.row(vc, 1.0, up=1.0)
                for g, v in zip(gs, vc):
                    on = instance.worker_type[hs] == g
                    kg = min(int(kmax[i]), int(wroom[i, hs[on]].sum()))
                    coo.row(np.r_[yc[s, on], v], np.r_[np.ones(on.sum()), -kg], up=0.0)
        rel = np.arange(ns)
        nk = len(ks)
        # (6): b_i sum_h y - B_i sum_k z <= 0, as p sum_h y - q sum_k z <= 0 with the simplest
        # p/q that gives the same integer points (see ps_ratio)
        p, q = ps_ratio(instance, i, int(kmax[i]))
        coo.rows(np.r_[np.repeat(rel, nh), np.repeat(rel, nk)], np.r_[yc.ravel(), zc.ravel()],
                 np.r_[np.full(ns * nh, p), np.full(ns * nk, -q)],
                 np.full(ns, -math.inf), np.zeros(ns))
        # (7): sum_k z - sum_h y <= 0
        coo.rows(np.r_[np.repeat(rel, nk), np.repeat(rel, nh)], np.r_[zc.ravel(), yc.ravel()],
                 np.r_[np.ones(ns * nk), -np.ones(ns * nh)], np.full(ns, -math.inf), np.zeros(ns))

    cat = (lambda parts, dt: np.concatenate(parts).astype(dt) if parts else np.zeros(0, dt))
    kind, job, slot, server = (cat(kinds, np.int8), cat(jobs, np.int64), cat(slots, np.int64),
                               cat(servers, np.int64))
    ub, c = cat(ubs, float), cat(cost, float)
    check_deadline()
    # (4) and (5): per slot, server and resource, over the jobs with a variable there
    for role_kind, cap, offset in ((Y, instance.worker_capacity, 0),
                                   (Z, instance.ps_capacity, H)):
        cols = np.flatnonzero(kind == role_kind)
        if len(cols) == 0:
            continue
        srv = server[cols] - offset
        key = slot[cols] * cap.shape[0] + srv  # one key per (slot, server)
        # per-column demand: a worker's is its server type's (w_{i g(h)}), a PS's s_i
        demand = instance.row_demand(job[cols], server[cols],
                                     np.full(len(cols), 0 if role_kind == Y else 1))
        for r in range(instance.R):
            check_deadline()
            coef = demand[:, r]
            m = coef > 0
            if not m.any():
                continue
            k, cc, cf = key[m], cols[m], coef[m]
            most = np.zeros((T + 1) * cap.shape[0])
            np.add.at(most, k, cf * ub[cc])
            capk = cap[:, r][k % cap.shape[0]]
            binding = most[k] > capk * (1 + NOISE_RTOL)  # otherwise no choice can violate the row
            if not binding.any():
                continue
            k, cc, cf = k[binding], cc[binding], cf[binding]
            uniq, rel = np.unique(k, return_inverse=True)
            coo.rows(rel, cc, cf, np.full(len(uniq), -math.inf), cap[:, r][uniq % cap.shape[0]])
    check_deadline()
    # assembling the sparse matrix is one call that cannot be stopped and takes about as long as
    # collecting its rows did (measured on the 100-job paper-sim MILP): not started without that
    # much time left
    if deadline is not None and deadline - time.perf_counter() < time.perf_counter() - t_start:
        raise DeadlineReached("the time limit would pass while assembling the MILP's matrix "
                              f"({time.perf_counter() - t_start:.1f} s into building it)")
    lp = LinearProgram(c=c, A=coo.matrix(n), row_lower=np.asarray(coo.lo, float),
                       row_upper=np.asarray(coo.up, float), lower=np.zeros(n), upper=ub,
                       integer=np.ones(n, dtype=bool), sense="max")
    constant = float(sum(instance.utility_table[i, instance.arrival[i]] for i in zero_work))
    return MilpModel(lp, kind, job, slot, server, constant, tuple(zero_work), excluded,
                     time.perf_counter() - t_start)


def decode(model: MilpModel, instance: Instance, x: np.ndarray, policy: str,
           stats: dict | None = None) -> Schedule:
    """The ``Schedule`` of a (rounded) MILP solution: admissions from x_i, allocations from y, z."""
    builder = ScheduleBuilder(instance)
    v = np.round(np.asarray(x, float)).astype(np.int64)
    for i in model.job[(model.kind == X) & (v > 0)]:
        builder.admit(int(i))
    for i in model.zero_work:
        builder.admit(i)
    m = ((model.kind == Y) | (model.kind == Z)) & (v > 0)
    role = np.where(model.kind[m] == Y, WORKER, PS)
    builder.add_array(np.column_stack([model.job[m], model.slot[m], model.server[m], role, v[m]]))
    return builder.build(policy, stats)
