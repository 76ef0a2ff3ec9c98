"""What the dual subroutine (``dual``, Alg. 2) is given: three small frozen objects.

* ``DualJob``: one job's parameters as arrays and scalars (no ``Instance``), or read from an
  instance by ``DualJob.from_instance``.
* ``Market``: the prices and free capacities the job is scheduled against.
* ``Hints``: optional caching hints of a caller that keeps its arrays (never change the plan).

A ``Market`` is checked when it is built (its arrays must agree with one another); a job and
hints are checked against a market (``check_job``, ``check_hints``), where T, H, K and R are
known, and a market against an instance's (``check_dims``); ``check_market`` refuses anything
that is not a ``Market``. Every check raises ``ValueError`` naming the field. The objects are
frozen and compare (and hash) by identity: their fields are arrays. None of them crosses a jit
boundary (the JAX kernel takes plain arrays), so none needs to be a pytree or a static argument.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from ..model.numerics import NOISE_RTOL, ps_count

if TYPE_CHECKING:
    from ..model import Instance

__all__ = ["DualJob", "Hints", "Market", "check_dims", "check_hints", "check_job",
           "check_market"]


@dataclass(frozen=True, eq=False, kw_only=True)
class DualJob:
    """Job i as the dual subroutine reads it (keyword fields; T slots, H worker servers, R
    resources of the ``Market`` it is scheduled against):

    * ``arrival`` a_i in 1..T; ``chunks`` N_i >= 1 (the most workers per slot); ``work`` W_i >= 0
      worker-slots to train (ceil(E_i N_i x_i), constraint (2)).
    * ``worker_demand`` w_i, ``ps_demand`` s_i: (R,), finite, >= 0.
    * ``utility`` (T+1,): ``utility[t]`` = f_i(t - a_i), the utility of completing in slot t;
      finite and non-increasing from slot a_i on (earlier entries are not read).
    * PSs for k workers: ``worker_bw`` b_i and ``ps_bw`` B_i (ceil(k b_i / B_i), at least one
      for k >= 1: constraint (6)), or ``ps_need`` (N_i + 1,) the PS count for k = 0..N_i
      directly (non-decreasing integers, ``ps_need[0] == 0``).
    * ``epochs`` E_i and ``chunk_time`` x_i: needed by ``granularity="chunk"`` only.
    * ``job``: the job index written in the allocation rows (column 0).
    * Accelerator types (``dual``'s module docstring), all or none of: ``server_type`` (H,)
      type index 0..G-1 of each worker server, ``type_speed`` (G,) s_g >= 0 integers (0: the
      job cannot use type g; some s_g >= 1), ``type_demand`` (G, R) its per-worker demand on
      each type (used instead of ``worker_demand``); ``span_types``: its workers in one slot
      may sit on several types. ``work`` is then in work units.
    """

    arrival: int
    chunks: int
    work: int
    worker_demand: ArrayLike
    ps_demand: ArrayLike
    utility: ArrayLike
    worker_bw: float | None = None
    ps_bw: float | None = None
    ps_need: ArrayLike | None = None
    epochs: int | None = None
    chunk_time: float | None = None
    job: int = 0
    server_type: ArrayLike | None = None
    type_speed: ArrayLike | None = None
    type_demand: ArrayLike | None = None
    span_types: bool = False

    @classmethod
    def from_instance(cls, instance: Instance, job: int) -> DualJob:
        """Job ``job`` of an ``Instance`` (checked when the instance was built): PS counts by
        its rule ceil(k b_i / B_i) as ``ps_need``; its accelerator types, speeds and demands
        on a typed cluster."""
        N = int(instance.chunks[job])
        types: dict[str, Any] = {}
        if instance.typed:
            types = dict(server_type=instance.worker_type, type_speed=instance.type_speed[job],
                         type_demand=instance.type_demand[job],
                         span_types=bool(instance.span_types[job]))
        return cls(job=int(job), arrival=int(instance.arrival[job]), chunks=N,
                   work=int(instance.work[job]), worker_demand=instance.worker_demand[job],
                   ps_demand=instance.ps_demand[job], utility=instance.utility_table[job],
                   ps_need=instance.ps_needed(job, np.arange(N + 1)),
                   epochs=int(instance.epochs[job]),
                   chunk_time=float(instance.chunk_time[job]), **types)


@dataclass(frozen=True, eq=False)
class Market:
    """The prices and free capacities one job is scheduled against: T slots, H worker servers,
    K PS servers, R resources (row 0 of the slot axis is unused; slots are 1..T).

    * ``worker_price`` (T+1, H, R): p_h^r(t); ``ps_price`` (T+1, K, R): q_k^r(t); finite and
      >= 0 from the job's arrival slot on (eq. 22 for OASiS; LP duals of the packing
      constraints for column generation).
    * ``worker_free`` (T+1, H, R), ``ps_free`` (T+1, K, R): free capacity c - g per slot, the
      room constraints (30)-(31) leave.

    Built with T >= 1 and the four shapes agreeing (``ValueError`` naming the field); the
    arrays are held as float arrays (``np.asarray``: a float array is not copied, so a caller
    that changes its arrays in place may keep one ``Market``).
    """

    worker_price: np.ndarray
    ps_price: np.ndarray
    worker_free: np.ndarray
    ps_free: np.ndarray

    def __post_init__(self) -> None:
        shape = np.shape(self.worker_price)
        if len(shape) != 3 or shape[0] < 2:
            raise ValueError(f"worker_price: expected shape (T+1, H, R) with T >= 1, got {shape}")
        T, H, R = shape[0] - 1, shape[1], shape[2]
        K = np.shape(self.ps_price)[1] if np.ndim(self.ps_price) == 3 else -1
        for name, n in (("ps_price", K), ("worker_free", H), ("ps_free", K)):
            got = np.shape(getattr(self, name))
            if got != (T + 1, n, R) or n < 0:
                want = (T + 1, "K" if n < 0 else n, R)
                raise ValueError(f"{name}: expected shape {want} (like worker_price "
                                 f"{shape}), got {got}")
        for name in ("worker_price", "ps_price", "worker_free", "ps_free"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=float))

    @property
    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(worker_price, ps_price, worker_free, ps_free), the backends' argument order."""
        return self.worker_price, self.ps_price, self.worker_free, self.ps_free

    @property
    def horizon(self) -> int:
        """T."""
        return self.worker_price.shape[0] - 1

    @property
    def dims(self) -> tuple[int, int, int, int]:
        """(T, H, K, R)."""
        (T1, H, R), K = self.worker_price.shape, self.ps_price.shape[1]
        return T1 - 1, H, K, R


@dataclass(frozen=True, eq=False)
class Hints:
    """Caching hints of a caller that keeps its arrays; each is optional and none changes the
    plan (checked against the ``Market`` by ``check_hints``):

    * ``price_min``: ``(wmin, pmin)``, each (R,), the smallest worker / PS price of each
      resource over slots a_i..T and all servers, which the call otherwise computes (and checks
      the prices with) from the whole arrays; the caller vouches that the prices are finite and
      >= 0. Used only to stop the completion scan early, so the plan is the same whatever valid
      bound is given.
    * ``slot_class`` (T+1,) integers (a caller that knows which slots it left alone): slots of
      one class hold the same prices and free capacities, so their cost curves are built once
      (e.g. every untouched slot in class 0).
    * ``server_index``: ``(worker, PS)`` ``online.server_index.ServerIndex`` over exactly the
      market's price and free arrays, told of every change; cost curves and the plan's
      placement then read a few certified servers per slot instead of all (jobs without
      accelerator types).
    """

    price_min: tuple[ArrayLike, ArrayLike] | None = None
    slot_class: ArrayLike | None = None
    server_index: tuple[Any, Any] | None = None


NO_HINTS = Hints()


# ---- checks against a market ---------------------------------------------------------------------
def check_market(market: Any) -> Market:
    """``market`` if it is a ``Market`` (checked when it was built); ``ValueError`` naming
    ``market`` otherwise (e.g. the four arrays passed loose, as before ``Market``)."""
    if not isinstance(market, Market):
        raise ValueError(f"market: expected a Market(worker_price, ps_price, worker_free, "
                         f"ps_free), got {type(market).__name__}")
    return market


def check_job(job: DualJob, market: Market, granularity: str) -> DualJob:
    """``job`` checked against ``market`` (``ValueError`` naming the field), with its arrays as
    the kernel reads them: demands and utility as floats, the PS counts as ``ps_need`` (from
    b_i / B_i unless given), the accelerator-type arrays as integers and floats."""
    if not isinstance(job, DualJob):
        raise ValueError(f"job: expected a DualJob, got {type(job).__name__}")
    T, H, _, R = market.dims
    a = _integer("arrival", job.arrival, 1, T)
    N = _integer("chunks", job.chunks, 1)
    W = _integer("work", job.work, 0)
    w = _vector("worker_demand", job.worker_demand, R)
    s = _vector("ps_demand", job.ps_demand, R)
    u = np.asarray(job.utility, dtype=float) if _numeric(job.utility) else None
    if u is None or u.shape != (T + 1,):
        raise ValueError(f"utility: expected shape {(T + 1,)}, got {np.shape(job.utility)}")
    tail = u[a:]
    if not np.isfinite(tail).all():
        raise ValueError("utility: must be finite from the arrival slot on")
    if (np.diff(tail) > NOISE_RTOL * max(1.0, float(np.abs(tail).max()))).any():
        raise ValueError("utility: must be non-increasing from the arrival slot on")
    need = _ps_need(N, job.worker_bw, job.ps_bw, job.ps_need)
    types = _types(job, H, R)
    if types and granularity == "chunk":
        raise ValueError("granularity: 'chunk' takes no accelerator types (server_type is given)")
    epochs, chunk_time = job.epochs, job.chunk_time
    if granularity == "chunk":
        epochs = _integer("epochs", epochs, 1)
        chunk_time = _positive("chunk_time", chunk_time, " in chunk granularity")
    return replace(job, job=_integer("job", job.job, 0), arrival=a, chunks=N, work=W,
                   worker_demand=w, ps_demand=s, utility=u, worker_bw=None, ps_bw=None,
                   ps_need=need, epochs=epochs, chunk_time=chunk_time, **types)


def check_hints(hints: Hints | None, market: Market, arrival: int) -> Hints:
    """``hints`` checked against ``market``, with ``price_min`` always given: the minima over
    slots ``arrival``..T from the hint, or computed from the market (its prices then checked
    finite and >= 0); ``slot_class`` and ``server_index`` checked against the market's shapes."""
    hints = NO_HINTS if hints is None else hints
    if not isinstance(hints, Hints):
        raise ValueError(f"hints: expected Hints, got {type(hints).__name__}")
    T, H, K, R = market.dims
    if hints.price_min is None:
        mins = (_price_min("worker_price", market.worker_price, arrival, R),
                _price_min("ps_price", market.ps_price, arrival, R))
    elif len(hints.price_min) != 2:
        raise ValueError("price_min: expected (worker minimum, PS minimum)")
    else:
        mins = (_vector("price_min", hints.price_min[0], R),
                _vector("price_min", hints.price_min[1], R))
    return Hints(mins, _slot_classes(hints.slot_class, T),
                 _server_index(hints.server_index, T, H, K))


def check_dims(market: Market, dims: tuple[int, int, int, int]) -> None:
    """ValueError naming the first array of ``market`` whose shape is not (T+1, n, R) of
    ``dims`` = (T, H, K, R) (an instance's)."""
    T, H, K, R = dims
    for name, n in (("worker_price", H), ("ps_price", K), ("worker_free", H), ("ps_free", K)):
        got = np.shape(getattr(market, name))
        if got != (T + 1, n, R):
            raise ValueError(f"{name}: expected shape {(T + 1, n, R)}, got {got}")


def _price_min(name: str, prices: np.ndarray, a: int, R: int) -> np.ndarray:
    """Per-resource minimum price over slots a..T (lower bound for pruning); ValueError naming
    ``name`` unless every price there is finite and >= 0."""
    part = prices[a:]
    m = np.array([part[..., r].min() for r in range(R)]) if part.size else np.zeros(R)
    if not ((m >= 0).all() and (part.size == 0 or np.isfinite(part.max()))):  # NaN fails
        raise ValueError(f"{name}: prices must be finite non-negative numbers")
    return m


def _slot_classes(slot_class: ArrayLike | None, T: int) -> np.ndarray | None:
    """The checked ``slot_class`` (T+1,) integers, or None."""
    if slot_class is None:
        return None
    classes = np.asarray(slot_class) if _numeric(slot_class) else None
    if classes is None or classes.shape != (T + 1,) or classes.dtype.kind not in "iu":
        raise ValueError(f"slot_class: expected shape {(T + 1,)} of integers, "
                         f"got {np.shape(slot_class)}")
    return classes


def _server_index(index: Any, T: int, H: int, K: int) -> tuple[Any, Any] | None:
    """The checked ``server_index`` (its pools' shapes match the arrays'), or None."""
    if index is None:
        return None
    from .server_index import ServerIndex
    if not (isinstance(index, tuple) and len(index) == 2
            and all(isinstance(x, ServerIndex) for x in index)):
        raise ValueError("server_index: expected (worker ServerIndex, PS ServerIndex)")
    for name, ix, n in (("worker", index[0], H), ("PS", index[1], K)):
        if ix.price.shape[:2] != (T + 1, n):
            raise ValueError(f"server_index: the {name} index covers {ix.price.shape[:2]} "
                             f"(slots, servers), the arrays {(T + 1, n)}")
    return index


# ---- argument checks ----------------------------------------------------------------------------
def _numeric(x: Any) -> bool:
    try:
        return np.asarray(x).dtype.kind in "biuf"
    except (TypeError, ValueError):
        return False


def _real(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _integer(name: str, x: Any, low: int, high: int | None = None) -> int:
    ok = isinstance(x, numbers.Integral) and not isinstance(x, bool)
    if not ok or x < low or (high is not None and x > high):
        span = f"in {low}..{high}" if high is not None else f">= {low}"
        raise ValueError(f"{name}: expected an integer {span}, got {x!r}")
    return int(x)


def _vector(name: str, x: Any, R: int) -> np.ndarray:
    v = np.asarray(x, dtype=float) if _numeric(x) else None
    if v is None or v.shape != (R,):
        raise ValueError(f"{name}: expected shape {(R,)} (one entry per resource), "
                         f"got {np.shape(x)}")
    if not (np.isfinite(v).all() and (v >= 0).all()):
        raise ValueError(f"{name}: demands must be finite numbers >= 0")
    return v


def _ps_need(N: int, worker_bw: float | None, ps_bw: float | None, ps_need: ArrayLike | None
             ) -> np.ndarray:
    """PS count for k = 0..N workers, from b_i / B_i or given (see ``DualJob``)."""
    if ps_need is not None:
        if worker_bw is not None or ps_bw is not None:
            raise ValueError("ps_need: give either ps_need or worker_bw and ps_bw, not both")
        need = np.asarray(ps_need) if _numeric(ps_need) else None
        if need is None or need.shape != (N + 1,):
            raise ValueError(f"ps_need: expected shape {(N + 1,)} (k = 0..chunks), "
                             f"got {np.shape(ps_need)}")
        if not (np.all(need == np.round(need)) and need[0] == 0 and (np.diff(need) >= 0).all()):
            raise ValueError("ps_need: expected non-decreasing integers starting at 0")
        return need.astype(np.int64)
    b = _positive("worker_bw", worker_bw, " (or give ps_need)")
    B = _positive("ps_bw", ps_bw, " (or give ps_need)")
    return ps_count(np.arange(N + 1), b, B)


def _types(job: DualJob, H: int, R: int) -> dict[str, Any]:
    """The checked accelerator-type fields of ``job`` ({} without types)."""
    server_type, type_speed, type_demand = job.server_type, job.type_speed, job.type_demand
    given = [x is not None for x in (server_type, type_speed, type_demand)]
    if not any(given):
        if job.span_types:
            raise ValueError("span_types: only with accelerator types (give server_type)")
        return {}
    if not all(given):
        missing = [n for n, g in zip(("server_type", "type_speed", "type_demand"), given) if not g]
        raise ValueError(f"{missing[0]}: needed with the other accelerator-type arguments")
    st = np.asarray(server_type) if _numeric(server_type) else None
    sp = np.asarray(type_speed) if _numeric(type_speed) else None
    if sp is None or sp.ndim != 1 or len(sp) == 0 or not (np.all(sp == np.round(sp))
                                                         and (sp >= 0).all() and sp.max() >= 1):
        raise ValueError("type_speed: expected (G,) integers >= 0, at least one >= 1")
    G = len(sp)
    if st is None or st.shape != (H,) or not (np.all(st == np.round(st)) and (st >= 0).all()
                                              and (st < G).all()):
        raise ValueError(f"server_type: expected shape {(H,)}, type indices 0..{G - 1}")
    dem = np.asarray(type_demand, dtype=float) if _numeric(type_demand) else None
    if dem is None or dem.shape != (G, R) or not (np.isfinite(dem).all() and (dem >= 0).all()):
        raise ValueError(f"type_demand: expected shape {(G, R)} of finite demands >= 0")
    if not isinstance(job.span_types, (bool, np.bool_)):
        raise ValueError(f"span_types: expected a bool, got {job.span_types!r}")
    return {"server_type": st.astype(np.int64), "type_speed": sp.astype(np.int64),
            "type_demand": dem, "span_types": bool(job.span_types)}


def _positive(name: str, x: Any, hint: str = "") -> float:
    if not (_real(x) and math.isfinite(x) and x > 0):
        raise ValueError(f"{name}: a finite number > 0 is needed{hint}, got {x!r}")
    return float(x)
