"""The solver layer's data and vocabulary: :class:`LinearProgram`, :class:`SolverLimits`,
:class:`SolverResult`, the statuses, proven bounds and the checks every back end shares (limits,
starting points).

The back ends (:mod:`.highs`, :mod:`.cpsat`) turn what they saw (an :class:`Outcome`) into a
result with :func:`finish`; :func:`.solver.solve_program` chooses between them.

**Status vocabulary** (``SolverResult.status``):

* ``optimal``: proven optimal (within ``mip_gap``); ``bound`` is given;
* a limit stopped the solve, NOT proven optimal: ``time_limit``, ``node_limit``,
  ``solution_limit``, ``iteration_limit``, ``deterministic_time_limit`` or ``interrupted``
  (``STOPPED``). ``incumbent`` says whether there is one: "solver" (with incumbent),
  "initial" (the solver found nothing better than the given ``initial`` point, which is
  returned) or None (no incumbent, ``x is None``);
* ``infeasible``, ``unbounded``, ``error``.

**Bounds are proven or absent.** ``bound`` is reported only when the solver proved it: HiGHS's
MIP dual bound when finite (a MIP stopped before its root LP has none), the optimum of a solved
LP, CP-SAT's best objective bound only when CP-SAT ends OPTIMAL or FEASIBLE (an UNKNOWN response
carries no bound: its field is 0, not a bound). Otherwise ``bound is None``, whatever the status.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, overload

import numpy as np
from numpy.typing import ArrayLike

if TYPE_CHECKING:  # scipy.sparse costs ~0.2 s to import: only the code that builds with it does
    import scipy.sparse as sp

# HiGHS feasibility, CP-SAT row scaling, bound vs incumbent noise
from ..model.numerics import BOUND_RTOL, FEAS_TOL, NOISE_RTOL, ROW_TOL, VALUE_EPS
from ._checks import is_finite, is_real, is_whole

BACKENDS = ("highs", "cpsat")
# the status of a solve stopped short, by what stopped it
LIMIT_STATUS = {"time": "time_limit", "nodes": "node_limit", "solutions": "solution_limit",
                "iterations": "iteration_limit", "deterministic_time": "deterministic_time_limit",
                "interrupt": "interrupted"}
STOPPED = tuple(LIMIT_STATUS.values())
STATUSES = ("optimal", *STOPPED, "infeasible", "unbounded", "error")
# what a back end tells ``finish`` it saw (``Outcome.kind``)
OUTCOMES = ("optimal", "limit", "infeasible", "unbounded", "error")
# Relative MIP gap at which a solve counts as optimal ("proven optimal" below means: within it).
MIP_GAP = 1e-6


@dataclass(frozen=True, eq=False)
class RowwiseMatrix:
    """A sparse matrix given straight as its CSR arrays (row r's columns are
    ``indices[indptr[r]:indptr[r + 1]]``, its values the same slice of ``data``), for callers
    that build those arrays themselves: HiGHS takes them as they are, so solving such a
    ``LinearProgram`` with HiGHS needs no scipy (``offline.gavel_lp``, on the path that
    ``benchmarks/bench_gavel.py`` times). ``shape`` is (rows, columns)."""

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    shape: tuple[int, int]

    def __post_init__(self) -> None:
        rows, cols = self.shape
        if len(self.indptr) != rows + 1 or self.indptr[0] != 0 or \
                self.indptr[-1] != len(self.data) or len(self.indices) != len(self.data):
            raise ValueError(f"RowwiseMatrix: indptr of length {len(self.indptr)} ending at "
                             f"{self.indptr[-1] if len(self.indptr) else None}, "
                             f"{len(self.indices)} indices and {len(self.data)} values do not "
                             f"make a {rows} x {cols} CSR matrix")
        if len(self.indices) and (self.indices.min() < 0 or self.indices.max() >= cols):
            raise ValueError(f"RowwiseMatrix: a column index outside 0..{cols - 1}")

    @property
    def nnz(self) -> int:
        """Stored entries (scipy's name)."""
        return len(self.data)

    def __matmul__(self, x: np.ndarray) -> np.ndarray:
        """Row activities ``A @ x`` (x of length ``shape[1]``)."""
        rows = np.repeat(np.arange(self.shape[0]), np.diff(self.indptr))
        return np.bincount(rows, weights=self.data * np.asarray(x, float)[self.indices],
                           minlength=self.shape[0])

    def tocsr(self) -> sp.csr_matrix:
        """The same matrix as a ``scipy.sparse.csr_matrix`` (imports scipy)."""
        import scipy.sparse as sp

        return sp.csr_matrix((self.data, self.indices, self.indptr), shape=self.shape)


def as_csr(A: Any) -> sp.csr_matrix:
    """``A`` (a scipy sparse matrix, a dense array or a ``RowwiseMatrix``) as a
    ``scipy.sparse.csr_matrix``."""
    if isinstance(A, RowwiseMatrix):
        return A.tocsr()
    import scipy.sparse as sp

    return sp.csr_matrix(A)


@dataclass(frozen=True)
class LinearProgram:
    """optimise c @ x  s.t.  row_lower <= A @ x <= row_upper,  lower <= x <= upper.

    ``integer`` is a boolean mask of integer columns; ``sense`` is "max" or "min". Infinite
    bounds are ``-inf`` / ``inf``. Shapes are checked on construction (ValueError naming the field).
    """

    c: np.ndarray
    A: sp.csr_matrix | RowwiseMatrix
    row_lower: np.ndarray
    row_upper: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    integer: np.ndarray
    sense: str = "max"

    def __post_init__(self) -> None:
        if self.sense not in ("max", "min"):
            raise ValueError(f"sense: expected 'max' or 'min', got {self.sense!r}")
        n = len(self.c)
        m = self.A.shape[0]
        if self.A.shape[1] != n:
            raise ValueError(f"A: has {self.A.shape[1]} columns, c has {n}")
        for name, size in (("row_lower", m), ("row_upper", m), ("lower", n), ("upper", n),
                           ("integer", n)):
            if len(getattr(self, name)) != size:
                raise ValueError(f"{name}: length {len(getattr(self, name))}, expected {size}")
        for name in ("c", "row_lower", "row_upper", "lower", "upper"):
            if np.isnan(np.asarray(getattr(self, name), dtype=float)).any():
                raise ValueError(f"{name}: contains NaN")
        if not np.isfinite(np.asarray(self.c, dtype=float)).all():
            raise ValueError("c: objective coefficients must be finite")

    @property
    def n_cols(self) -> int:
        return len(self.c)

    @property
    def n_rows(self) -> int:
        return self.A.shape[0]


@dataclass(frozen=True, kw_only=True)
class SolverLimits:
    """When a solve stops: what ``solve_program`` and its back ends are given (keyword fields,
    all optional; checked when built, ``ValueError`` naming the field).

    * ``time_limit``: seconds (> 0) from the solve's call, covering the hand-off to the solver
      and the solve (the solver gets what is left).
    * ``deadline``: a ``time.perf_counter()`` value (a caller that counts its own model building
      too); with ``time_limit`` as well, the earlier applies. A deadline already passed returns
      at once, status "time_limit".
    * Deterministic limits, the same result on any machine and under any load: ``node_limit``
      (an integer >= 0; 0 stops before the root LP) and ``solution_limit`` (>= 1) for HiGHS
      MIPs (``mip_max_nodes``, ``mip_max_improving_sols``), ``iteration_limit`` (>= 0) for HiGHS
      LPs (``simplex_iteration_limit``), ``deterministic_time`` (a finite number > 0) for CP-SAT
      (``max_deterministic_time``, its deterministic "seconds"). Which back end and kind of
      program has which is checked by ``check_limits`` when solving (a limit the back end does
      not have is an error naming it).
    * ``mip_gap``: the relative gap at which a solve counts as optimal (a finite number >= 0;
      default ``MIP_GAP``).

    ``SolverLimits()`` sets none of them (``NO_LIMITS``).
    """

    time_limit: float | None = None
    deadline: float | None = None
    node_limit: int | None = None
    solution_limit: int | None = None
    iteration_limit: int | None = None
    deterministic_time: float | None = None
    mip_gap: float = MIP_GAP

    def __post_init__(self) -> None:
        if self.time_limit is not None and not (is_real(self.time_limit)
                                                and self.time_limit > 0):
            raise ValueError(f"time_limit: must be > 0 seconds, got {self.time_limit}")
        if self.deadline is not None and not (is_real(self.deadline)
                                              and not math.isnan(self.deadline)):
            raise ValueError(f"deadline: must be a time.perf_counter() value, got "
                             f"{self.deadline!r}")
        for name, low in (("node_limit", 0), ("solution_limit", 1), ("iteration_limit", 0)):
            v = getattr(self, name)
            if v is not None and not is_whole(v, low):
                raise ValueError(f"{name}: must be an integer >= {low}, got {v!r}")
        d = self.deterministic_time
        if d is not None and not (is_finite(d, 0.0) and d > 0):
            raise ValueError(f"deterministic_time: must be a finite number > 0, got {d!r}")
        if not is_finite(self.mip_gap, 0.0):
            raise ValueError(f"mip_gap: must be a finite number >= 0, got {self.mip_gap!r}")

    def until(self, start: float) -> SolverLimits:
        """These limits with ``time_limit`` counted from ``start`` (a ``time.perf_counter()``
        value) into ``deadline`` (the earlier of the two); themselves without a time limit."""
        if self.time_limit is None:
            return self
        end = start + float(self.time_limit)
        return replace(self, time_limit=None,
                       deadline=end if self.deadline is None else min(self.deadline, end))

    def deterministic(self) -> dict[str, float | None]:
        """The deterministic limits by name (None: not set)."""
        return {"node_limit": self.node_limit, "solution_limit": self.solution_limit,
                "iteration_limit": self.iteration_limit,
                "deterministic_time": self.deterministic_time}


NO_LIMITS = SolverLimits()


@dataclass(frozen=True, eq=False)
class Outcome:
    """What a back end saw, for :func:`finish` (checked when built, ``ValueError`` naming the
    field; compares by identity: its fields are arrays).

    * ``kind``: one of ``OUTCOMES`` ("optimal", "limit", "infeasible", "unbounded", "error").
    * ``limit``: what stopped a "limit" solve, a key of ``LIMIT_STATUS`` ("time", "nodes",
      "solutions", "iterations", "deterministic_time", "interrupt"); needed then, read only then.
    * ``x``: the solver's incumbent (a 1-D array), None if it has none.
    * ``bound``: the bound it proved (a number; a non-finite one counts as none), or None.
    * ``duals``: LP row duals (a 1-D array), or None.
    """

    kind: str
    limit: str | None = None
    x: np.ndarray | None = None
    bound: float | None = None
    duals: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.kind not in OUTCOMES:
            raise ValueError(f"kind: expected one of {', '.join(OUTCOMES)}, got {self.kind!r}")
        if (self.limit is None and self.kind == "limit") or (self.limit is not None
                                                             and self.limit not in LIMIT_STATUS):
            raise ValueError(f"limit: a solve stopped by a limit names it, one of "
                             f"{', '.join(LIMIT_STATUS)}; got {self.limit!r}")
        for name in ("x", "duals"):
            v = getattr(self, name)
            if v is not None and np.ndim(v) != 1:
                raise ValueError(f"{name}: expected a 1-D array or None, got shape {np.shape(v)}")
        if self.bound is not None and not is_real(self.bound):
            raise ValueError(f"bound: expected a number or None, got {self.bound!r}")


@dataclass(frozen=True)
class SolverResult:
    """The outcome of ``solve_program`` (both back ends; see the module doc for the vocabulary).

    ``status``: one of ``STATUSES``. ``x``: the incumbent (integer columns rounded to integers),
    None if there is none; ``incumbent``: where it came from, "solver", "initial" (the given
    starting point) or None. ``objective``: ``c @ x`` of that incumbent, recomputed.
    ``bound``: a *proven* bound on the optimum (the dual bound of a MILP; the optimum itself for
    a solved LP), else None. ``gap``: ``|bound - objective| / |objective|`` (0 when equal, inf
    when only the objective is 0, None without both). ``row_duals`` (LPs only): d objective /
    d row bound in the problem's own sense, so a binding ``<=`` row of a maximisation has a
    dual >= 0. ``build_s``: the hand-off to the
    solver; ``solve_s``: the solver's run. ``info``: back-end details (CP-SAT scaling error,
    HiGHS model status ...).
    """

    status: str
    proven_optimal: bool
    x: np.ndarray | None
    objective: float | None
    bound: float | None
    gap: float | None
    row_duals: np.ndarray | None
    build_s: float
    solve_s: float
    backend: str
    info: dict[str, Any] = field(default_factory=dict)
    incumbent: str | None = None


@overload
def ordered_bound(sense: str, objective: float | None, bound: float, what: str = ...) -> float:
    ...


@overload
def ordered_bound(sense: str, objective: float | None, bound: float | None,
                  what: str = ...) -> float | None:
    ...


def ordered_bound(sense: str, objective: float | None, bound: float | None,
                  what: str = "bound") -> float | None:
    """``bound``, moved onto ``objective`` when float noise put it on the wrong side.

    For a maximisation a valid bound is >= every feasible value; ``bound < objective`` by more
    than ``BOUND_RTOL * max(1, |objective|)`` raises ``RuntimeError`` naming both numbers.
    """
    if objective is None or bound is None:
        return bound
    below = (objective - bound) if sense == "max" else (bound - objective)
    if below <= 0:
        return bound
    if below > BOUND_RTOL * max(1.0, abs(objective)):
        raise RuntimeError(f"{what} {float(bound)!r} is on the wrong side of the feasible value "
                           f"{float(objective)!r} ({sense}imisation) by {below:.3g}, beyond the "
                           f"tolerance {BOUND_RTOL:g} (relative)")
    return objective


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    """|bound - objective| / |objective|; 0 when both are (nearly) equal, infinite when the
    objective is (nearly) 0 and the bound is not, None without both."""
    if objective is None or bound is None or not math.isfinite(bound):
        return None
    diff = abs(bound - objective)
    if diff <= NOISE_RTOL * max(1.0, abs(bound)):
        return 0.0
    return diff / abs(objective) if abs(objective) > VALUE_EPS else math.inf


def check_limits(backend: str, is_lp: bool, limits: SolverLimits) -> None:
    """Every deterministic limit ``limits`` sets is one ``backend`` has for this kind of program
    (an LP when ``is_lp``), else ValueError naming it (the values are checked when ``limits``
    is built)."""
    for name, v in limits.deterministic().items():
        if v is None:
            continue
        if name == "deterministic_time":
            if backend != "cpsat":
                raise ValueError(f"{name}: a CP-SAT limit; HiGHS takes node_limit, "
                                 "solution_limit (MILPs) or iteration_limit (LPs)")
            continue
        if backend != "highs":
            raise ValueError(f"{name}: a HiGHS limit; CP-SAT takes deterministic_time")
        if name == "iteration_limit" and not is_lp:
            raise ValueError("iteration_limit: HiGHS applies it to LPs only; use node_limit or "
                             "solution_limit for integer programs")
        if name != "iteration_limit" and is_lp:
            raise ValueError(f"{name}: a limit of integer programs; use iteration_limit for LPs")


def check_point(lp: LinearProgram, x: ArrayLike, field_name: str = "x") -> np.ndarray:
    """``x`` as a float array if it satisfies ``lp``'s bounds, integrality and rows (to the
    tolerance ``ROW_TOL`` relative to max(1, |bound|)); else ``ValueError`` naming what it breaks.
    Integer columns are rounded."""
    x = np.asarray(x, dtype=float).ravel()
    if x.shape != (lp.n_cols,):
        raise ValueError(f"{field_name}: length {x.size}, expected {lp.n_cols}")
    if not np.isfinite(x).all():
        raise ValueError(f"{field_name}: contains non-finite values")

    def tol(v: np.ndarray) -> np.ndarray:
        return ROW_TOL * np.maximum(1.0, np.abs(np.where(np.isfinite(v), v, 0.0)))

    for name, bad in (("below its lower bound", x < lp.lower - tol(lp.lower)),
                      ("above its upper bound", x > lp.upper + tol(lp.upper))):
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{field_name}: not feasible: column {j} = {float(x[j])!r} is {name}")
    ints = np.asarray(lp.integer, bool)
    frac = ints & (np.abs(x - np.round(x)) > FEAS_TOL)
    if frac.any():
        j = int(np.flatnonzero(frac)[0])
        raise ValueError(f"{field_name}: not feasible: integer column {j} = {float(x[j])!r}")
    x = np.where(ints, np.round(x), x)
    act = lp.A @ x
    for name, bad in (("below", act < lp.row_lower - tol(lp.row_lower)),
                      ("above", act > lp.row_upper + tol(lp.row_upper))):
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            edge = lp.row_lower[r] if name == "below" else lp.row_upper[r]
            raise ValueError(f"{field_name}: not feasible: row {r} activity {float(act[r])!r} is "
                             f"{name} its bound {float(edge)!r}")
    return x


def finish(lp: LinearProgram, backend: str, outcome: Outcome, *,
            initial: np.ndarray | None = None, build_s: float = 0.0, solve_s: float = 0.0,
            info: dict | None = None) -> SolverResult:
    """The ``SolverResult`` of a back end's ``outcome`` (its kind, incumbent and proven bound,
    :class:`Outcome`), with the hand-off and solve times and the back end's ``info``.

    The incumbent is the better of ``outcome.x`` and the ``initial`` point (also "initial" when
    the solver returns that very point); its objective is recomputed.
    """
    x, bound, duals = outcome.x, outcome.bound, outcome.duals
    incumbent = None if x is None else "solver"
    if outcome.kind in ("optimal", "limit") and initial is not None:
        better = (lambda a, b: a > b) if lp.sense == "max" else (lambda a, b: a < b)
        if x is None or better(float(lp.c @ initial), float(lp.c @ x)) \
                or np.array_equal(x, initial):
            x, incumbent = initial, "initial"
    if outcome.kind not in ("optimal", "limit"):
        x, bound, duals, incumbent = None, None, None, None
    objective = None if x is None else float(lp.c @ x)
    if bound is not None and not math.isfinite(bound):
        bound = None
    bound = ordered_bound(lp.sense, objective, bound, what=f"{backend} bound")
    status = LIMIT_STATUS[str(outcome.limit)] if outcome.kind == "limit" else outcome.kind
    return SolverResult(status, status == "optimal", x, objective, bound,
                        relative_gap(objective, bound), duals, build_s, solve_s, backend,
                        info or {}, incumbent)


def describe(stats: dict) -> str:
    """The solver outcome of an offline policy's ``stats`` in words, e.g. "proven optimal,
    bound 240.57" or "time limit, no incumbent, no bound" (keys ``status``, ``incumbent``,
    ``objective``, ``bound``, ``gap``; column generation's "bracket" with ``stopped_by``)."""
    status = str(stats.get("status"))
    if status == "optimal":
        head = "proven optimal"
    elif status in STOPPED:
        head = status.replace("_", " ")
    elif status == "bracket":
        stopped = stats.get("stopped_by")
        head = "bracket" + (f" ({stopped.replace('_', ' ')})" if stopped else "")
    else:
        head = f"solver {status.replace('_', ' ')}"
    parts = [head]
    objective, bound, gap = stats.get("objective"), stats.get("bound"), stats.get("gap")
    if status != "optimal":
        if stats.get("incumbent") and objective is not None:
            parts.append(f"incumbent {objective:.6g}")
        else:
            parts.append("no incumbent")
    parts.append("no bound" if bound is None else f"bound {bound:.6g}")
    if status != "optimal" and isinstance(gap, (int, float)):
        parts.append(f"gap {gap:.3%}")
    return ", ".join(parts)


def time_left(deadline: float | None) -> float | None:
    """Seconds left until ``deadline`` (a ``time.perf_counter()`` value; None: no deadline)."""
    return None if deadline is None else deadline - time.perf_counter()


def solve_empty(lp: LinearProgram, backend: str) -> SolverResult:
    """No columns: feasible iff every row admits activity 0."""
    ok = bool(np.all(lp.row_lower <= FEAS_TOL) and np.all(lp.row_upper >= -FEAS_TOL))
    info = {"objective_error": 0.0} if backend == "cpsat" else {}
    if not ok:
        return finish(lp, backend, Outcome("infeasible"), info=info)
    return finish(lp, backend, Outcome("optimal", x=np.zeros(0), bound=0.0,
                                       duals=np.zeros(lp.n_rows)), info=info)

