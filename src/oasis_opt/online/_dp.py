"""What the dual subroutine's backends share (``dual`` dispatches to them; none imports another).

* ``JobSpec`` / ``job_spec``: one job (a ``dual_inputs.DualJob``) reduced to arrays.
* ``slot_costs``: the per-slot cost curves C_t(k), built by this one function for every backend,
  so that all of them minimise over the same floats.
* ``tie_costs``: C_t(k) + k eta_t, the costs the DP compares (the tie rule, see ``dual``).
* ``CompletionScan``, ``cost_lower_bound``, ``backtrack``, ``plan_rows``, ``make_plan``: the scan
  over completion slots, the plan's workers per slot and its allocation rows.

The tie rule these pieces implement is stated in ``dual``'s module docstring.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..model.numerics import (CHUNK_EPS, COST_RTOL, PAYOFF_RTOL, fill, fit_count,
                              fit_count_columns, unit_prices, unit_prices_columns)

if TYPE_CHECKING:
    from .dual_inputs import DualJob, Hints

GRANULARITIES = ("worker-slot", "chunk")


@dataclass(frozen=True)
class Plan:
    """A job's best schedule at given prices (``best_schedule``)."""

    job: int
    completion: int | None  # t_hat; None when no feasible schedule exists in a_i..T
    utility: float  # f_i(t_hat - a_i) (0.0 when infeasible)
    cost: float  # resource cost at the given prices (eq. 28); inf when infeasible
    payoff: float  # utility - cost (eq. 27); -inf when infeasible
    workers: np.ndarray  # (T+1,) int64 workers per slot (index 0 unused)
    rows: np.ndarray  # (n, 5) int64 allocation rows (job, slot, global server, role, count)

    @property
    def feasible(self) -> bool:
        return self.completion is not None


# ---- what the subroutine needs of one job ---------------------------------------------------------
@dataclass(frozen=True)
class JobSpec:
    """One job, reduced to arrays (built once per call by ``job_spec``).

    ``need[k]`` PSs for k = 0..N workers; ``ok[k]``: k workers allowed by (7) (need <= k).
    ``delta[k]``: work units k workers do in one slot; ``target``: units to reach (see ``dual``).
    ``utility[t]`` = f(t - a) for t = 0..T (only t >= a is read). ``rho``: the fewest PSs per
    worker, min over allowed k >= 1 of need[k] / k (constraint (6): b / B rounded up).
    """

    job: int
    arrival: int
    horizon: int
    N: int
    w: np.ndarray
    s: np.ndarray
    need: np.ndarray
    ok: np.ndarray
    delta: np.ndarray
    target: int
    work: int
    rho: float
    utility: np.ndarray
    granularity: str = "worker-slot"
    types: "JobTypes | None" = None
    # (T+1,) or None: slots of one class hold the same prices and free capacities (the
    # caller's promise), so their cost curves are built once (``range_costs``)
    slot_class: np.ndarray | None = None
    # (worker, PS) ``server_index.ServerIndex`` kept in step with the arrays by the caller, or
    # None: cost curves read the candidates it certifies (the same floats)
    index: tuple[Any, Any] | None = None

    @property
    def options(self) -> int:
        """Number of per-slot options of the DP: k = 0..N without types, else ``types``'s."""
        return len(self.delta)

    @property
    def unit_delta(self) -> bool:
        """Whether option o does exactly o work units (the DP then reads F by a strided view)."""
        return self.granularity == "worker-slot" and (
            self.types is None or self.types.span)


@dataclass(frozen=True)
class JobTypes:
    """A job on a cluster with accelerator types (``dual``'s "Accelerator types").

    ``server_type`` (H,): type index of each worker server; ``speed`` (G,): s_g work units per
    worker-slot on type g (0: the job cannot use it); ``demand`` (G, R): w_g, its per-worker
    demand there; ``span``: its workers in one slot may sit on several types. Without ``span``
    the DP's option o is k_o workers on type g_o (``opt_k``, ``opt_type``; option 0: none),
    in increasing order of work units delta_o = k_o s_{g_o}, then of k, then of g; with ``span``
    option P is P work units, from any mix of types.
    """

    server_type: np.ndarray
    speed: np.ndarray
    demand: np.ndarray
    span: bool
    opt_k: np.ndarray | None
    opt_type: np.ndarray | None

    @property
    def usable(self) -> list[int]:
        return np.flatnonzero(self.speed > 0).tolist()


def typed_options(N: int, speed: np.ndarray, ok: np.ndarray, span: bool
                  ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None, np.ndarray]:
    """(delta, opt_k, opt_type, ok) of the per-slot options (``JobTypes``)."""
    if span:
        P = N * int(speed.max()) + 1
        return np.arange(P, dtype=np.int64), None, None, np.ones(P, dtype=bool)
    opts = [(0, 0, -1)] + [(k * int(speed[g]), k, g) for g in np.flatnonzero(speed > 0).tolist()
                           for k in range(1, N + 1)]
    opts.sort()
    arr = np.array(opts, dtype=np.int64).reshape(-1, 3)
    return arr[:, 0], arr[:, 1], arr[:, 2], ok[arr[:, 1]]


def job_spec(job: DualJob, horizon: int, granularity: str = "worker-slot",
             hints: Hints | None = None) -> JobSpec:
    """The arrays of ``job`` (``dual_inputs.DualJob`` with ``ps_need`` given, already checked:
    ``dual_inputs.check_job``, or read from an instance) over slots 0..``horizon``; ``hints``:
    its ``slot_class`` and ``server_index`` (checked: ``dual_inputs.check_hints``), if any.

    Worker-slot granularity: target = W_i work units, delta(k) = k. Chunk granularity: target =
    E_i N_i chunks (0 for a job without work), delta(k) = floor(k / x_i) chunks (``dual``).
    With accelerator types (``server_type`` given; worker-slot granularity): target = W_i work
    units and the options of ``JobTypes``.
    """
    N = int(job.chunks)
    k = np.arange(N + 1)
    need = np.asarray(job.ps_need, dtype=np.int64)
    ok = need <= k
    work = job.work
    if granularity == "worker-slot":
        delta, target = k.astype(np.int64), int(work)
    else:
        epochs, chunk_time = job.epochs, job.chunk_time
        assert epochs is not None and chunk_time is not None  # checked by the entry point
        target = 0 if work == 0 else int(epochs) * N
        delta = (np.floor(k / float(chunk_time) + CHUNK_EPS).astype(np.int64) if target
                 else k.astype(np.int64))
        delta = np.minimum(delta, target)
    allowed = ok[1:]
    rho = float((need[1:][allowed] / k[1:][allowed]).min()) if allowed.any() else 0.0
    types = None
    if job.server_type is not None:
        speed = np.asarray(job.type_speed, dtype=np.int64)
        span = bool(job.span_types)
        delta, opt_k, opt_type, ok = typed_options(N, speed, ok, span)
        types = JobTypes(np.asarray(job.server_type, dtype=np.int64), speed,
                         np.asarray(job.type_demand, dtype=float), span, opt_k, opt_type)
    slot_class = cast("np.ndarray | None", None if hints is None else hints.slot_class)
    index = None if hints is None or types is not None else hints.server_index
    return JobSpec(int(job.job), int(job.arrival), int(horizon), N,
                   np.asarray(job.worker_demand, dtype=float),
                   np.asarray(job.ps_demand, dtype=float), need, ok, delta, target, int(work),
                   rho, np.asarray(job.utility, dtype=float), granularity, types, slot_class,
                   index)


# ---- per-slot cost curves C_t(k), shared by every backend -------------------------------------------
def cheapest_marginals(u: np.ndarray, fit: np.ndarray, n: int) -> np.ndarray:
    """m[t, j-1] = unit price of the j-th cheapest container (j = 1..n) in slot t, inf beyond
    the slot's capacity. Servers sorted by u, each repeated ``fit`` times (cheapest first)."""
    S, H = u.shape
    if n == 0 or H == 0:
        return np.full((S, n), np.inf)
    u = np.where(fit > 0, u, np.inf)
    if n == 1:  # the cheapest usable server's price (a minimum picks one of the same floats)
        return u.min(axis=1)[:, None]
    if H > n:  # only the n cheapest usable servers can matter (each holds >= 1 container)
        part = np.argpartition(u, n - 1, axis=1)[:, :n]
        u = np.take_along_axis(u, part, axis=1)
        fit = np.take_along_axis(fit, part, axis=1)
    order = np.argsort(u, axis=1, kind="stable")
    u = np.take_along_axis(u, order, axis=1)
    m = u.shape[1]
    cum = np.minimum(np.cumsum(np.take_along_axis(fit, order, axis=1), axis=1), n + 1)
    # position of the j-th container: first server whose cumulative fit reaches j (rows are
    # made globally sorted by an offset so that one searchsorted serves every slot)
    off = (np.arange(S) * (n + 2))[:, None]
    pos = np.searchsorted((cum + off).ravel(), (np.arange(1, n + 1)[None, :] + off).ravel(),
                          side="left").reshape(S, n) - np.arange(S)[:, None] * m
    inside = pos < m
    return np.where(inside, np.take_along_axis(u, np.minimum(pos, m - 1), axis=1), np.inf)


def slot_costs(spec: JobSpec, wprice: np.ndarray, pprice: np.ndarray, wfree: np.ndarray,
               pfree: np.ndarray) -> np.ndarray:
    """C[t, k]: cheapest cost of k workers plus need[k] PSs in each given slot (inf if they do
    not fit or (7) forbids k), for k = 0..N. Inputs are (S, H, R) / (S, K, R) slices of
    consecutive slots; each slot's row depends on that slot's data only (element-wise sums, a
    per-row sort and cumulative sum), so any slicing gives the same floats. Extra leading axes
    (S, B, H, R) -- a batch of clusters, e.g. one per price floor -- give C (S, B, k): each
    (slot, member) row is the one that member's own (S, H, R) call gives."""
    if wprice.ndim > 3:
        lead = wprice.shape[:-2]
        C = slot_costs(spec, *(x.reshape((-1,) + x.shape[-2:])
                               for x in (wprice, pprice, wfree, pfree)))
        return C.reshape(lead + C.shape[-1:])
    S = wprice.shape[0]
    N = spec.N
    if spec.types is None:
        M = ps_most(spec)

        def ps_read(rows: np.ndarray | None) -> np.ndarray:
            price, free = ((pprice, pfree) if rows is None else
                           (_take_slots(pprice, rows), _take_slots(pfree, rows)))
            return cheapest_marginals(unit_prices(price, spec.s), fit_count(free, spec.s, M), M)

        mw = cheapest_marginals(unit_prices(wprice, spec.w), fit_count(wfree, spec.w, N), N)
        return untyped_costs(spec, mw, _ps_marginals(spec, mw, ps_read))
    ps = ps_costs(spec, pprice, pfree)
    tp = spec.types
    cw_by_type = type_costs(spec, wprice, wfree)
    if tp.span:
        A = span_table(spec, cw_by_type)[-1]  # (S, N+1, P): cheapest k workers doing P units
        return (A + ps[:, :, None]).min(axis=1)
    C = np.full((S, spec.options), np.inf)
    C[:, 0] = 0.0
    assert tp.opt_k is not None and tp.opt_type is not None  # set without span
    for o in range(1, spec.options):
        k, g = int(tp.opt_k[o]), int(tp.opt_type[o])
        C[:, o] = cw_by_type[g][:, k] + ps[:, k]
    return C


def untyped_costs(spec: JobSpec, mw: np.ndarray, mp: np.ndarray) -> np.ndarray:
    """C[t, k] of a job without types from the slots' cheapest worker marginals ``mw`` (S, N)
    and PS marginals ``mp`` (S, ``ps_most``) (``cheapest_marginals``)."""
    S = len(mw)
    cw = np.concatenate([np.zeros((S, 1)), np.cumsum(mw, axis=1)], axis=1)
    return cw + ps_curve(spec, mp)


def _indexed_costs(spec: JobSpec, slots: np.ndarray) -> np.ndarray:
    """``slot_costs`` of the given slots read through ``spec.index`` (the same floats)."""
    assert spec.index is not None and spec.types is None
    iw, ip = spec.index
    mw = iw.marginals(slots, spec.w, spec.N)
    return untyped_costs(spec, mw, _ps_marginals(
        spec, mw, lambda rows: ip.marginals(slots if rows is None else slots[rows], spec.s,
                                            ps_most(spec))))


def _ps_marginals(spec: JobSpec, mw: np.ndarray, read: Any) -> np.ndarray:
    """The PS marginals (S, ``ps_most``) that ``untyped_costs`` needs next to the worker
    marginals ``mw``: ``read(rows)`` for the rows (slots) where a worker fits (``read(None)``:
    all of them), inf elsewhere. There C_t(k) = inf for k >= 1 whatever PSs cost, and
    C_t(0) = 0 reads none, so the floats are those of reading every slot (at cluster scale most
    slots of the near future hold no worker of an arriving job)."""
    room = np.flatnonzero(np.isfinite(mw[:, 0]))
    if len(room) == len(mw):
        return read(None)
    mp = np.full((len(mw), ps_most(spec)), np.inf)
    if len(room):
        mp[room] = read(room)
    return mp


def range_costs(spec: JobSpec, lo: int, hi: int, wprice: np.ndarray, pprice: np.ndarray,
                wfree: np.ndarray, pfree: np.ndarray) -> np.ndarray:
    """``slot_costs`` of slots lo..hi-1 from the whole (T+1, ...) arrays. With
    ``spec.slot_class``, one row is built per class (its first slot in the range) and copied to
    the others: rows depend on their slot's data only, so the floats are the same. With
    ``spec.index`` the rows are read through it (``server_index``: the same floats again)."""
    indexed = spec.index is not None

    def every_slot() -> np.ndarray:
        if indexed:
            return _indexed_costs(spec, np.arange(lo, hi))
        return slot_costs(spec, wprice[lo:hi], pprice[lo:hi], wfree[lo:hi], pfree[lo:hi])

    if spec.slot_class is None:
        return every_slot()
    _, first, inverse = np.unique(spec.slot_class[lo:hi], return_index=True,
                                  return_inverse=True)
    if len(first) == hi - lo:
        return every_slot()
    rep = lo + np.sort(first)
    C = (_indexed_costs(spec, rep) if indexed else
         slot_costs(spec, *(_take_slots(x, rep) for x in (wprice, pprice, wfree, pfree))))
    order = np.argsort(first)  # class (sorted by value) -> row of C (sorted by first slot)
    where = np.empty_like(order)
    where[order] = np.arange(len(order))
    return C[where[inverse.ravel()]]


def _take_slots(x: np.ndarray, slots: np.ndarray) -> np.ndarray:
    """x[slots] of an (S, H, R) array, resource-major in memory when ``x`` is (so that one
    resource of every server stays contiguous)."""
    if x.strides[1] < x.strides[2]:
        return np.take(x.transpose(0, 2, 1), slots, axis=0).transpose(0, 2, 1)
    return np.take(x, slots, axis=0)


def ps_most(spec: JobSpec) -> int:
    """The most PSs any allowed worker count needs (constraint (7) allows k iff need[k] <= k)."""
    ok = spec.need <= np.arange(spec.N + 1)
    return int(spec.need[ok].max()) if ok.any() else 0


def ps_curve(spec: JobSpec, mp: np.ndarray) -> np.ndarray:
    """P[t, k] from the slots' cheapest PS marginals ``mp`` (S, ``ps_most``)."""
    ok = spec.need <= np.arange(spec.N + 1)  # (7)
    M = mp.shape[1]
    cp = np.concatenate([np.zeros((len(mp), 1)), np.cumsum(mp, axis=1)], axis=1)
    out = cp[:, np.minimum(spec.need, M)]
    out[:, ~ok] = np.inf
    return out


def ps_costs(spec: JobSpec, pprice: np.ndarray, pfree: np.ndarray) -> np.ndarray:
    """P[t, k]: cheapest cost of the need[k] PSs of k = 0..N workers in each given slot (inf
    where they do not fit or (7) forbids k)."""
    M = ps_most(spec)
    return ps_curve(spec, cheapest_marginals(unit_prices(pprice, spec.s),
                                             fit_count(pfree, spec.s, M), M))


def type_servers(spec: JobSpec, g: int) -> np.ndarray:
    """Worker servers of type g (global indices, ascending)."""
    assert spec.types is not None
    return np.flatnonzero(spec.types.server_type == g)


def type_costs(spec: JobSpec, wprice: np.ndarray, wfree: np.ndarray) -> dict[int, np.ndarray]:
    """g -> cw_g (S, N+1): cheapest cost of k workers on servers of type g (Theorem 1's greedy
    within the type: its workers all do s_g units, so the cheapest unit price first), for each
    type the job can use."""
    assert spec.types is not None
    S, N = wprice.shape[0], spec.N
    out = {}
    for g in spec.types.usable:
        idx = type_servers(spec, g)
        w = spec.types.demand[g]
        mw = cheapest_marginals(unit_prices(wprice[:, idx], w), fit_count(wfree[:, idx], w, N), N)
        out[g] = np.concatenate([np.zeros((S, 1)), np.cumsum(mw, axis=1)], axis=1)
    return out


def _span_step(A: np.ndarray, cw: np.ndarray, speed: int) -> tuple[np.ndarray, np.ndarray]:
    """One type more in the span table: new[k, P] = min_j A[k - j, P - j s] + cw[j], and the
    smallest minimising j. A (S, N+1, P), cw (S, N+1)."""
    S, N1, P = A.shape
    cand = np.full((N1,) + A.shape, np.inf)
    for j in range(N1):
        if j * speed >= P:
            break
        cand[j, :, j:, j * speed:] = A[:, :N1 - j, :P - j * speed] + cw[:, j, None, None]
    arg = cand.argmin(axis=0)
    return np.take_along_axis(cand, arg[None], axis=0)[0], arg


def span_table(spec: JobSpec, cw_by_type: dict[int, np.ndarray]
               ) -> list[np.ndarray]:
    """The cheapest worker cost of k workers doing exactly P units over the first 1, 2, ...
    usable types (a knapsack over types, each type's cost its greedy curve cw_g); one (S, N+1,
    P) table per stage, the last over every type. P = 0..N max_g s_g."""
    assert spec.types is not None
    S = next(iter(cw_by_type.values())).shape[0]
    A = np.full((S, spec.N + 1, spec.options), np.inf)
    A[:, 0, 0] = 0.0
    out = []
    for g in spec.types.usable:
        A, _ = _span_step(A, cw_by_type[g], int(spec.types.speed[g]))
        out.append(A)
    return out


def finite_prefix(C: np.ndarray) -> np.ndarray:
    """Per row of C: 1 + the largest k with a finite cost (C[t, 0] = 0 is always finite)."""
    finite = np.isfinite(C)
    return C.shape[1] - np.argmax(finite[:, ::-1], axis=1)


def tie_costs(C: np.ndarray) -> np.ndarray:
    """The costs the DP compares (``dual``'s tie rule): C~_t(k) = C_t(k) + k eta_t with
    eta_t = COST_RTOL * C_t(k_max) / max(1, k_max), k_max the slot's largest affordable count.
    Each extra worker in a slot must save more than eta_t (a 1e-12 share of the slot's cost
    range), so float noise never decides and equal costs put work in the earliest slots.
    Per-row arithmetic: any slicing of the slots gives the same floats."""
    kmax = finite_prefix(C) - 1
    eta = COST_RTOL * C[np.arange(len(C)), kmax] / np.maximum(1, kmax)
    return C + np.arange(C.shape[1]) * eta[:, None]


# ---- placement of a plan ------------------------------------------------------------------------
def place_slot(u: np.ndarray, fit: np.ndarray, count: int) -> list[tuple[int, int]]:
    """Greedy placement of ``count`` containers: cheapest unit price first, ties by index (the
    DP only plans counts that fit)."""
    placed = fill(np.argsort(u, kind="stable"), fit, count)
    if placed is None:  # callers place counts the DP found to fit
        raise RuntimeError(f"cannot place {count} containers (fit counts {fit.tolist()})")
    return placed


def slot_split(spec: JobSpec, option: int, wprice: np.ndarray, pprice: np.ndarray,
               wfree: np.ndarray, pfree: np.ndarray) -> dict[int, int]:
    """Workers per type ({g: k_g}) of one slot's chosen option; the slot's arrays are (H, R) /
    (K, R). Without types: {0: option}. With ``span``: the split ``slot_costs`` priced, read back
    from the same tables (fewest workers, then the first minimising split)."""
    tp = spec.types
    if tp is None:
        return {0: option} if option else {}
    if not tp.span:
        assert tp.opt_k is not None and tp.opt_type is not None
        return {int(tp.opt_type[option]): int(tp.opt_k[option])} if option else {}
    cw = type_costs(spec, wprice[None], wfree[None])
    ps = ps_costs(spec, pprice[None], pfree[None])[0]
    tables = span_table(spec, cw)
    k = int(np.argmin(tables[-1][0, :, option] + ps))
    split, P = {}, option
    usable = tp.usable
    for stage in range(len(usable) - 1, -1, -1):
        g = usable[stage]
        if stage == 0:
            j = k
        else:
            _, arg = _span_step(tables[stage - 1], cw[g], int(tp.speed[g]))
            j = int(arg[0, k, P])
        if j:
            split[g] = j
        k, P = k - j, P - j * int(tp.speed[g])
    return dict(sorted(split.items()))


def _place(spec: JobSpec, option: int, wprice: np.ndarray, pprice: np.ndarray,
           wfree: np.ndarray, pfree: np.ndarray) -> list[tuple[int, int, int]]:
    """(global server, role, count) of one slot's chosen option, placed greedily; the slot's
    arrays are (H, R) / (K, R)."""
    H = wprice.shape[0]
    out = []
    split = slot_split(spec, option, wprice, pprice, wfree, pfree)
    for g, kg in split.items():
        idx = np.arange(H) if spec.types is None else type_servers(spec, g)
        w = spec.w if spec.types is None else spec.types.demand[g]
        for h, n in place_slot(unit_prices(wprice[idx], w), fit_count(wfree[idx], w, kg), kg):
            out.append((int(idx[h]), 0, n))
    m = int(spec.need[sum(split.values())])
    for q, n in place_slot(unit_prices(pprice, spec.s), fit_count(pfree, spec.s, m), m):
        out.append((H + q, 1, n))
    return out


def greedy_fill(u: np.ndarray, fit: np.ndarray, counts: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``place_slot`` for many slots at once: u, fit (S, H), counts (S,) -> (slot row, server,
    containers) of every non-empty placement. Per row the servers go in increasing u, ties by
    index (a stable sort), each filled up to its fit: server j of the order gets
    min(fit_j, max(0, count - fits before it)), what ``fill`` gives."""
    row, server, n, short = fill_rows(u, fit, counts)
    if len(short):  # callers place counts the DP found to fit
        bad = int(short[0])
        raise RuntimeError(f"cannot place {int(counts[bad])} containers (fit counts "
                           f"{fit[bad].tolist()})")
    return row, server, n


def fill_rows(u: np.ndarray, fit: np.ndarray, counts: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``greedy_fill`` without the check: also returns the rows whose servers hold fewer than
    their count (their placements are partial)."""
    S, H = u.shape
    if H and S and counts.max() == 1:  # one container: the cheapest server it fits on,
        row = np.flatnonzero(counts)  # lowest index first
        server = np.where(fit[row] > 0, u[row], np.inf).argmin(axis=1)
        if (fit[row, server] > 0).all():
            return row, server, np.ones(len(row), dtype=np.int64), np.zeros(0, dtype=np.int64)
    # each usable server holds >= 1 container, so the placement lies among the servers priced
    # at most v, the count-th smallest usable price: those below v (fewer than count), then
    # those at v in index order (count of them suffice); no sort of the whole row
    usable = np.where(fit > 0, u, np.inf)
    top = int(counts.max()) if S else 0
    if top == 0 or H == 0:
        return (np.zeros(0, dtype=np.int64),) * 3 + (np.flatnonzero(counts > 0),)
    low = np.partition(usable, top - 1, axis=1)[:, :top] if top < H else usable.copy()
    low.sort(axis=1)
    v = np.where(counts > 0, low[np.arange(S), np.clip(counts, 1, low.shape[1]) - 1], -np.inf)
    at_v = (usable == v[:, None]) & np.isfinite(v)[:, None]
    row, col = np.nonzero((usable < v[:, None])
                          | (at_v & (np.cumsum(at_v, axis=1) <= counts[:, None])))
    per_row = np.bincount(row, minlength=S)
    pos = np.arange(len(row)) - (np.cumsum(per_row) - per_row)[row]
    width = int(per_row.max()) if len(row) else 0
    pu, server = np.full((S, width), np.inf), np.zeros((S, width), dtype=np.int64)
    pf = np.zeros((S, width), dtype=np.int64)
    pu[row, pos], server[row, pos], pf[row, pos] = usable[row, col], col, fit[row, col]
    order = np.argsort(pu, axis=1, kind="stable")  # rows are in index order: ties by index
    f = np.take_along_axis(pf, order, axis=1)
    before = np.cumsum(f, axis=1) - f
    n = np.minimum(f, np.maximum(counts[:, None] - before, 0))
    short = np.flatnonzero(n.sum(axis=1) != counts)
    row, j = np.nonzero(n)
    return row, server[row, order[row, j]], n[row, j], short


PLACE_BLOCK = 64  # slots placed at once by ``plan_rows`` (bounds its (slots, servers) arrays)


def _plan_rows_untyped(spec: JobSpec, options: np.ndarray, wprice: np.ndarray,
                       pprice: np.ndarray, wfree: np.ndarray, pfree: np.ndarray) -> np.ndarray:
    """``plan_rows`` without accelerator types: one ``greedy_fill`` per block of slots (workers,
    then the need[k] PSs), once per (slot class, option) pair when the spec has slot classes;
    with ``spec.index`` the slots its certificates cover are placed from its candidates
    (``ServerIndex.place``: the same rows) and only the others read every server."""
    H = wprice.shape[1]
    slots = np.flatnonzero(options)
    rep, inv = slots, None
    if spec.slot_class is not None and len(slots) > 1:
        # slots of one class and option share a placement: place the first of each pair
        _, first, inv = np.unique(spec.slot_class[slots] * (spec.N + 1) + options[slots],
                                  return_index=True, return_inverse=True)
        rep, inv = slots[first], inv.ravel()
        if len(rep) == len(slots):
            rep, inv = slots, None
    kr = options[rep]
    parts = []  # (rep index, global server, role, count)
    index = spec.index or (None, None)
    for lo in range(0, len(rep), PLACE_BLOCK):
        ts, kb = rep[lo:lo + PLACE_BLOCK], kr[lo:lo + PLACE_BLOCK]
        for price, free, dem, counts, base, role, ix in (
                (wprice, wfree, spec.w, kb, 0, 0, index[0]),
                (pprice, pfree, spec.s, spec.need[kb], H, 1, index[1])):
            if not counts.any():
                continue
            if ix is not None:  # the index places the slots it can certify (the same rows)
                at, server, n, left = ix.place(ts, dem, counts)
                parts.append(np.stack([lo + at, base + server, np.full(len(at), role), n], 1))
            else:
                left = np.arange(len(ts))
            if not len(left):
                continue
            tl = ts[left]
            shape = (len(tl), price.shape[1])  # only the demanded resources are gathered
            at, server, n = greedy_fill(
                unit_prices_columns(lambda r: price[tl, :, r], shape, dem),
                fit_count_columns(lambda r: free[tl, :, r], shape, dem, int(counts.max())),
                counts[left])
            parts.append(np.stack([lo + left[at], base + server, np.full(len(at), role), n], 1))
    placed = np.concatenate(parts) if parts else np.zeros((0, 4), dtype=np.int64)
    if inv is None:
        slot = rep[placed[:, 0]]
    else:  # expand: slot s gets the rows of its representative inv[s]
        placed = placed[np.argsort(placed[:, 0], kind="stable")]
        length = np.bincount(placed[:, 0], minlength=len(rep))
        start = np.cumsum(length) - length
        each = length[inv]
        offset = np.repeat(start[inv] - (np.cumsum(each) - each), each) + np.arange(each.sum())
        placed, slot = placed[offset], np.repeat(slots, each)
    out = np.column_stack([np.full(len(slot), spec.job), slot, placed[:, 1:]]).astype(np.int64)
    return out[np.lexsort((out[:, 2], out[:, 1]))]


def plan_rows(spec: JobSpec, options: np.ndarray, wprice: np.ndarray, pprice: np.ndarray,
              wfree: np.ndarray, pfree: np.ndarray) -> np.ndarray:
    """Allocation rows of a plan with option ``options[t]`` in each slot (k workers without
    types), placed greedily (Theorem 1; within each type with types), sorted by (slot, global
    server); PS servers are numbered from H = wprice.shape[1]."""
    if spec.types is None:
        return _plan_rows_untyped(spec, options, wprice, pprice, wfree, pfree)
    H = wprice.shape[1]
    rows: list[tuple[int, int, int, int, int]] = []
    placed: dict[tuple[int, int], list[tuple[int, int, int]]] = {}  # (class, option) -> rows
    for t in np.flatnonzero(options):
        option = int(options[t])
        key = None if spec.slot_class is None else (int(spec.slot_class[t]), option)
        here = placed.get(key) if key is not None else None
        if here is None:  # slots of one class hold the same data: the same placement
            here = _place(spec, option, wprice[t], pprice[t], wfree[t], pfree[t])
            if key is not None:
                placed[key] = here
        rows.extend((spec.job, int(t), server, role, n) for server, role, n in here)
    out = np.asarray(rows, dtype=np.int64).reshape(-1, 5)
    return out[np.lexsort((out[:, 2], out[:, 1]))]


# ---- the completion scan, pruning and backtrack ----------------------------------------------------
def payoff_margin(best: float) -> float:
    """How much a later completion slot must beat ``best`` by (0 while nothing is feasible)."""
    return PAYOFF_RTOL * max(1.0, abs(best)) if math.isfinite(best) else 0.0


class CompletionScan:
    """Alg. 2's scan over completion slots with exact pruning.

    Feed ``update(t, cost)`` with F_t(target) for t = a, a+1, ...; it keeps the first slot whose
    payoff f(t - a) - cost beats the best so far by more than the float margin, and returns True
    once no later slot can win: costs are >= ``lower_bound`` and f is non-increasing, so a later
    t' has payoff <= f(t + 1 - a) - lower_bound, and it wins only if its payoff exceeds
    best + margin(best) (that threshold only rises as the best does). The stop test is that
    inequality itself, evaluated in floats: rounding is monotone, so fl(f(t') - F_t') <=
    fl(f(t + 1 - a) - lower_bound) and no later slot passes the update test. (A job whose plan
    already costs the bound, e.g. a constant utility on an idle cluster, stops at once instead of
    scanning to T.) ``prune=False`` scans every slot (reference).
    """

    def __init__(self, spec: JobSpec, lower_bound: float, prune: bool = True):
        self.utility = spec.utility
        self.horizon = spec.horizon
        self.lower_bound = lower_bound if prune else -math.inf
        self.best, self.cost = -math.inf, math.inf
        self.stop: int | None = None

    def update(self, t: int, cost: float) -> bool:
        if cost < math.inf:
            payoff = float(self.utility[t]) - cost
            if payoff > self.best + payoff_margin(self.best):
                self.best, self.cost, self.stop = payoff, cost, t
        return t >= self.horizon or (float(self.utility[t + 1]) - self.lower_bound
                                      <= self.best + payoff_margin(self.best))


def cost_lower_bound(spec: JobSpec, wmin: np.ndarray, pmin: np.ndarray) -> float:
    """A lower bound on the cost of any feasible schedule of the job in slots a..T.

    Every schedule has >= W_i worker-slots (also in chunk granularity, where sum ceil(d x) >=
    E N x) and >= rho W_i PS-slots (constraint (6)); each costs at least the smallest unit price.
    Used to stop the t_hat scan once f(t_hat - a) - bound cannot beat the best payoff.
    ``wmin`` / ``pmin`` (R,): smallest price of each resource over slots a..T and servers.

    The scan compares the bound with costs the DP summed in floats, so it must stay below those
    sums, not only below the exact costs: a DP cost is a sum of at most m positive terms (per
    slot: N workers, need[N] PSs, the types of a span, the slot's own sum), each an R-term unit
    price, so it is at least its exact value times 1 - (m + 2R) u (u = 2^-53, the standard
    bound for sums of positive floats); the bound's own few operations (a dot product, products
    and a quotient) err by at most (R + 8) u. The bound is lowered by twice their total share.
    """
    lw, lp = float(wmin @ spec.w), float(pmin @ spec.s)
    R = len(spec.w)
    per_slot = spec.N + int(spec.need.max()) + 2 + (0 if spec.types is None
                                                    else len(spec.types.speed))
    terms = per_slot * (spec.horizon - spec.arrival + 1) + 3 * R + 8
    slack = 1.0 - terms * 2.0 ** -52
    if spec.types is None:
        return max(0.0, (spec.work * lw + spec.rho * spec.work * lp) * slack)
    # with types: each unit costs >= min_g (wmin . w_g) / s_g, and >= W / max_g s_g workers
    tp = spec.types
    per_unit = min(float(wmin @ tp.demand[g]) / int(tp.speed[g]) for g in tp.usable)
    workers = spec.work / int(tp.speed.max())
    return max(0.0, (spec.work * per_unit + spec.rho * workers * lp) * slack)


def backtrack(spec: JobSpec, choices: Any, stop: int) -> np.ndarray:
    """Option per slot (T+1,) of the DP's plan completing at slot a + stop (choices[s][D] =
    chosen option in slot a + s for remaining units D; ``choices`` a list of rows or a 2-D
    array); without types the option is the worker count."""
    workers = np.zeros(spec.horizon + 1, dtype=np.int64)
    D = spec.target
    for s in range(stop, -1, -1):
        if D <= 0:
            break
        k = int(choices[s][D])
        workers[spec.arrival + s] = k
        D = max(0, D - int(spec.delta[k]))
    return workers


def make_plan(spec: JobSpec, options: np.ndarray | None, cost: float, wprice: Any, pprice: Any,
              wfree: Any, pfree: Any) -> Plan:
    """Assemble a ``Plan`` from the option per slot (infeasible when ``options`` is None)."""
    T = spec.horizon
    if options is None:
        return Plan(spec.job, None, 0.0, math.inf, -math.inf, np.zeros(T + 1, dtype=np.int64),
                    np.zeros((0, 5), dtype=np.int64))
    used = np.flatnonzero(options)
    completion = int(used[-1]) if len(used) else spec.arrival  # no work: done on arrival
    utility = float(spec.utility[completion])
    rows = plan_rows(spec, options, wprice, pprice, wfree, pfree)
    workers = options
    if spec.types is not None:
        w = rows[rows[:, 3] == 0]
        workers = np.bincount(w[:, 1], w[:, 4], minlength=T + 1).astype(np.int64)
    return Plan(spec.job, completion, utility, float(cost), utility - float(cost), workers, rows)


def infeasible(spec: JobSpec) -> Plan:
    """The plan of a job with no feasible schedule in a..T."""
    return make_plan(spec, None, math.inf, None, None, None, None)


def scan_result(spec: JobSpec, scan: CompletionScan, choices: Any, wprice: np.ndarray,
                pprice: np.ndarray, wfree: np.ndarray, pfree: np.ndarray) -> Plan:
    """The plan a finished scan points at (the DP's ``choices`` per slot from the arrival)."""
    if scan.stop is None:
        return infeasible(spec)
    return make_plan(spec, backtrack(spec, choices, scan.stop - spec.arrival), scan.cost,
                     wprice, pprice, wfree, pfree)
