"""The array solver layer: one linear program in CSR arrays, solved by HiGHS or OR-Tools CP-SAT.

``solve_program(lp)`` takes a :class:`LinearProgram`

    optimise  c @ x   s.t.   row_lower <= A @ x <= row_upper,   lower <= x <= upper,
              x_j integer where ``integer[j]``

and returns a :class:`SolverResult` in one vocabulary for both back ends (status, incumbent,
objective, best bound, relative gap, LP row duals, build and solve times). The offline MILP of
problem (1), the column-generation master of (14)-(18) and the Dorm baseline all go through it.

HiGHS (``backend="highs"``) receives the model through ``highspy.Highs.passModel`` from CSC
arrays: Pyomo's hand-off costs several times HiGHS's own solve on big models (see
``benchmarks/bench_offline.py``). HiGHS's thread scheduler is process-global: a later solve that
asks for another thread count fails silently (model status "Not Set"), so this module sets the
count at most once per process (:func:`set_highs_threads`), and recovers once, by resetting the
scheduler, if code elsewhere in the process changed it.

CP-SAT (``backend="cpsat"``) needs integers everywhere; see :func:`_scale_row` and
:func:`_objective_scale` for how coefficients are scaled and the error this bounds:

* **objective**: ``c' = round(S c)`` with ``S = 10^k``, the largest power of ten keeping
  ``max |c'| <= 10^9``. For every x, ``|S c.x - c'.x| <= e S`` with
  ``e = (0.5 / S) * sum_{j: c_j != 0} max(|lower_j|, |upper_j|)``, so CP-SAT's optimum x* has
  true value ``c.x* >= OPT - 2 e`` (reported as ``info["objective_error"]``), the reported
  objective is the *true* ``c.x*``, and the reported bound ``bound'/S + e`` is a valid bound.
  For the offline MILP (utilities <= 100, one completion binary per job) ``e <= 0.5 I 10^-7 T``.
* **rows**: each row is scaled by the smallest ``10^k`` (k <= 9) that makes all its
  coefficients integers; bounds become ``floor(S up + tol)`` / ``ceil(S lo - tol)`` with the
  feasibility tolerance ``tol`` = 1e-9 S max(1, |bound|) that HiGHS and the validator also allow.
  A row whose coefficients have more decimals (bandwidths drawn as arbitrary floats) is scaled
  by S large enough that its rounding error over the variable box is below half that tolerance,
  so it still keeps every exactly feasible point and only points within the tolerance
  (``info["rows_inexact"]`` counts such rows; CP-SAT is slower on their large coefficients).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from .._extras import require

from ..model.numerics import FEAS_TOL, ROW_TOL  # HiGHS feasibility, CP-SAT row scaling

BACKENDS = ("highs", "cpsat")
STATUSES = ("optimal", "time_limit", "infeasible", "unbounded", "error")
# Relative MIP gap at which a solve counts as optimal ("proven optimal" below means: within it).
MIP_GAP = 1e-6
# CP-SAT integer scaling limits (see the module docstring).
CPSAT_MAX_DECIMALS = 9
CPSAT_MAX_OBJECTIVE = 1e9
CPSAT_ROW_MAGNITUDE = 2.0**30


@dataclass(frozen=True)
class LinearProgram:
    """optimise c @ x  s.t.  row_lower <= A @ x <= row_upper,  lower <= x <= upper.

    ``integer`` is a boolean mask of integer columns; ``sense`` is "max" or "min". Infinite
    bounds are ``-inf`` / ``inf``. Shapes are checked on construction (ValueError naming the field).
    """

    c: np.ndarray
    A: sp.csr_matrix
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


@dataclass(frozen=True)
class SolverResult:
    """The outcome of ``solve_program`` (both back ends).

    ``status``: "optimal" | "time_limit" | "infeasible" | "unbounded" | "error".
    ``x``: the incumbent (integer columns rounded to integers), None if there is none.
    ``objective``: ``c @ x`` of that incumbent. ``bound``: best bound on the optimum (the dual
    bound of a MILP; the optimum itself for a solved LP). ``gap``: ``|bound - objective| /
    max(|objective|, 1e-9)`` (0 when both are 0). ``row_duals`` (LPs only): d objective / d row
    bound in the problem's own sense, so a binding ``<=`` row of a maximisation has a dual >= 0.
    ``info``: back-end details (CP-SAT scaling error, HiGHS model status ...).
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


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    """|bound - objective| / max(|objective|, 1e-9); 0 when both are (nearly) 0."""
    if objective is None or bound is None or not math.isfinite(bound):
        return None
    diff = abs(bound - objective)
    if diff <= 1e-12 * max(1.0, abs(bound)):
        return 0.0
    return diff / max(abs(objective), 1e-9)


def solve_program(lp: LinearProgram, *, backend: str = "highs", time_limit: float | None = None,
                  relax: bool = False, seed: int = 0, mip_gap: float = MIP_GAP,
                  initial: np.ndarray | None = None) -> SolverResult:
    """Solve ``lp`` with ``backend`` ("highs" or "cpsat").

    ``relax=True`` drops integrality (HiGHS only; CP-SAT solves integer programs only) and
    returns row duals. ``time_limit`` (seconds) returns the best incumbent found, with
    ``status="time_limit"`` and ``proven_optimal=False``. ``seed`` fixes the solvers' random
    seeds (both are deterministic for a given seed; CP-SAT runs with one worker). ``initial``:
    a feasible point handed to the solver as a starting incumbent (MILPs).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend: unknown {backend!r} (known: {', '.join(BACKENDS)})")
    if time_limit is not None and not time_limit > 0:
        raise ValueError(f"time_limit: must be > 0 seconds, got {time_limit}")
    if lp.n_cols == 0:
        return _solve_empty(lp, backend)
    if backend == "highs":
        return _solve_highs(lp, time_limit=time_limit, relax=relax, seed=seed, mip_gap=mip_gap,
                            initial=initial)
    if relax:
        raise ValueError("relax: CP-SAT solves integer programs only; use backend='highs' for LPs")
    return _solve_cpsat(lp, time_limit=time_limit, seed=seed, mip_gap=mip_gap, initial=initial)


def _solve_empty(lp: LinearProgram, backend: str) -> SolverResult:
    """No columns: feasible iff every row admits activity 0."""
    ok = bool(np.all(lp.row_lower <= 1e-9) and np.all(lp.row_upper >= -1e-9))
    info = {"objective_error": 0.0} if backend == "cpsat" else {}
    if not ok:
        return SolverResult("infeasible", False, None, None, None, None, None, 0.0, 0.0, backend,
                            info)
    return SolverResult("optimal", True, np.zeros(0), 0.0, 0.0, 0.0, np.zeros(lp.n_rows), 0.0,
                        0.0, backend, info)


# ---------------------------------------------------------------------------------------------
# HiGHS
# ---------------------------------------------------------------------------------------------
_HIGHS_THREADS: int | None = None  # None: HiGHS's default (joins the existing scheduler)


def set_highs_threads(threads: int | None) -> None:
    """Set HiGHS's thread count for this process (once; it is process-global in HiGHS).

    Resets HiGHS's global scheduler so that the new count takes effect; every ``Highs`` this
    module creates afterwards asks for the same count. ``None`` returns to HiGHS's default.
    """
    import highspy

    global _HIGHS_THREADS
    if threads is not None and threads < 1:
        raise ValueError(f"threads: must be >= 1, got {threads}")
    if _HIGHS_THREADS == threads:
        return
    highspy.Highs.resetGlobalScheduler(True)
    _HIGHS_THREADS = threads


def new_highs(**options: Any) -> Any:
    """A silent ``highspy.Highs`` with this module's thread setting and the given options."""
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    if _HIGHS_THREADS is not None:
        h.setOptionValue("threads", _HIGHS_THREADS)
    for k, v in options.items():
        if v is not None:
            h.setOptionValue(k, v)
    return h


def run_highs(h: Any) -> Any:
    """``h.run()``, recovering once if another component changed HiGHS's global thread pool.

    A run that finds the global scheduler set up with another thread count returns without
    solving (model status "Not Set"); resetting the scheduler and running again fixes it.
    """
    import highspy

    h.run()
    if h.getModelStatus() == highspy.HighsModelStatus.kNotset:
        highspy.Highs.resetGlobalScheduler(True)
        h.run()
    return h.getModelStatus()


def to_highs_lp(lp: LinearProgram, relax: bool = False) -> Any:
    """The ``highspy.HighsLp`` of ``lp`` (CSC arrays; no per-element Python work)."""
    import highspy

    A = sp.csc_matrix(lp.A)
    A.sort_indices()
    h_lp = highspy.HighsLp()
    h_lp.num_col_ = lp.n_cols
    h_lp.num_row_ = lp.n_rows
    h_lp.col_cost_ = np.ascontiguousarray(lp.c, dtype=np.float64)
    h_lp.col_lower_ = np.ascontiguousarray(lp.lower, dtype=np.float64)
    h_lp.col_upper_ = np.ascontiguousarray(lp.upper, dtype=np.float64)
    h_lp.row_lower_ = np.ascontiguousarray(lp.row_lower, dtype=np.float64)
    h_lp.row_upper_ = np.ascontiguousarray(lp.row_upper, dtype=np.float64)
    h_lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    h_lp.a_matrix_.num_col_ = lp.n_cols
    h_lp.a_matrix_.num_row_ = lp.n_rows
    h_lp.a_matrix_.start_ = A.indptr.astype(np.int32)
    h_lp.a_matrix_.index_ = A.indices.astype(np.int32)
    h_lp.a_matrix_.value_ = A.data.astype(np.float64)
    h_lp.sense_ = highspy.ObjSense.kMaximize if lp.sense == "max" else highspy.ObjSense.kMinimize
    if not relax and np.any(lp.integer):
        kinds = (highspy.HighsVarType.kContinuous, highspy.HighsVarType.kInteger)
        h_lp.integrality_ = [kinds[int(v)] for v in np.asarray(lp.integer, bool)]
    return h_lp


def _solve_highs(lp: LinearProgram, *, time_limit: float | None, relax: bool, seed: int,
                 mip_gap: float, initial: np.ndarray | None) -> SolverResult:
    import highspy

    MS = highspy.HighsModelStatus
    is_mip = (not relax) and bool(np.any(lp.integer))
    t0 = time.perf_counter()
    h = new_highs(time_limit=None if time_limit is None else float(time_limit),
                  random_seed=int(seed), mip_rel_gap=float(mip_gap),
                  primal_feasibility_tolerance=FEAS_TOL,
                  mip_feasibility_tolerance=FEAS_TOL if is_mip else None)
    h.passModel(to_highs_lp(lp, relax=relax))
    if initial is not None and is_mip:
        sol = highspy.HighsSolution()
        sol.col_value = np.asarray(initial, dtype=np.float64).tolist()
        sol.value_valid = True
        h.setSolution(sol)
    build_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    status = run_highs(h)
    if status == MS.kUnboundedOrInfeasible:  # presolve could not tell which: ask the simplex
        h.setOptionValue("presolve", "off")
        status = run_highs(h)
    solve_s = time.perf_counter() - t1
    info = h.getInfo()
    name = {MS.kOptimal: "optimal", MS.kInfeasible: "infeasible", MS.kUnbounded: "unbounded",
            MS.kUnboundedOrInfeasible: "infeasible", MS.kTimeLimit: "time_limit",
            MS.kIterationLimit: "time_limit", MS.kInterrupt: "time_limit",
            MS.kSolutionLimit: "time_limit"}.get(status, "error")
    details = {"highs_status": h.modelStatusToString(status)}
    has_x = info.primal_solution_status == highspy.kSolutionStatusFeasible
    x = objective = bound = duals = None
    if has_x and name in ("optimal", "time_limit"):
        x = np.array(h.getSolution().col_value, dtype=float)
        if is_mip:
            ints = np.asarray(lp.integer, bool)
            x[ints] = np.round(x[ints])
        objective = float(lp.c @ x)
    if is_mip:
        if name in ("optimal", "time_limit") and math.isfinite(info.mip_dual_bound):
            bound = float(info.mip_dual_bound)
            if objective is not None:  # HiGHS's bound vs our recomputed (rounded) objective
                bound = max(bound, objective) if lp.sense == "max" else min(bound, objective)
    elif name == "optimal":
        bound = objective
        duals = np.array(h.getSolution().row_dual, dtype=float)
    gap = relative_gap(objective, bound)
    # HiGHS reports kOptimal once its gap is within mip_rel_gap (or its 1e-6 absolute gap)
    proven = name == "optimal"
    return SolverResult(name, proven, x, objective, bound, gap, duals, build_s, solve_s, "highs",
                        details)


class IncrementalLP:
    """A HiGHS LP that grows by rows and columns between warm-started solves.

    Column generation adds a few columns per round to a master with many rows; rebuilding the
    model each round would dominate. Rows and columns keep their insertion index.
    """

    def __init__(self, sense: str = "max", **options: Any):
        import highspy

        self._h = new_highs(**{"primal_feasibility_tolerance": FEAS_TOL, **options})
        self._h.changeObjectiveSense(highspy.ObjSense.kMaximize if sense == "max"
                                     else highspy.ObjSense.kMinimize)
        self.n_rows = 0
        self.n_cols = 0

    def add_rows(self, lower: np.ndarray, upper: np.ndarray, A: sp.csr_matrix | None = None) -> None:
        """Append rows ``lower <= A @ x <= upper`` (``A``: n x existing columns; None = empty)."""
        n = len(lower)
        if not n:
            return
        if A is None:
            A = sp.csr_matrix((n, self.n_cols))
        A = sp.csr_matrix(A)
        A.sort_indices()
        self._h.addRows(n, np.asarray(lower, float), np.asarray(upper, float), A.nnz,
                        A.indptr[:-1].astype(np.int32), A.indices.astype(np.int32),
                        A.data.astype(float))
        self.n_rows += n

    def add_cols(self, cost: ArrayLike, lower: ArrayLike, upper: ArrayLike,
                 A: sp.csc_matrix) -> None:
        """Append columns with objective ``cost``, bounds and coefficients ``A`` (n_rows x n)."""
        A = sp.csc_matrix(A)
        A.sort_indices()
        n = A.shape[1]
        if n:
            self._h.addCols(n, np.asarray(cost, float), np.asarray(lower, float),
                            np.asarray(upper, float), A.nnz, A.indptr[:-1].astype(np.int32),
                            A.indices.astype(np.int32), A.data.astype(float))
            self.n_cols += n

    def solve(self, time_limit: float | None = None
              ) -> tuple[str, float | None, np.ndarray | None, np.ndarray | None]:
        """(status, objective, x, row duals) with the same conventions as ``solve_program``;
        status "time_limit" (and Nones) when ``time_limit`` seconds ran out."""
        import highspy

        if self.n_cols == 0:  # HiGHS answers "Empty" here; the optimum is x = () with value 0
            return "optimal", 0.0, np.zeros(0), np.zeros(self.n_rows)
        # HiGHS compares time_limit with the object's run time summed over all runs
        self._h.setOptionValue("time_limit", math.inf if time_limit is None
                               else self._h.getRunTime() + max(float(time_limit), 1e-3))
        status = run_highs(self._h)
        if status == highspy.HighsModelStatus.kTimeLimit:
            return "time_limit", None, None, None
        if status != highspy.HighsModelStatus.kOptimal:
            return self._h.modelStatusToString(status), None, None, None
        sol = self._h.getSolution()
        return ("optimal", float(self._h.getInfo().objective_function_value),
                np.array(sol.col_value, float), np.array(sol.row_dual, float))


# ---------------------------------------------------------------------------------------------
# CP-SAT
# ---------------------------------------------------------------------------------------------
def _decimal_scale(values: np.ndarray, max_decimals: int = CPSAT_MAX_DECIMALS) -> int | None:
    """Smallest 10^k (k <= max_decimals) making every value an integer (to 1e-9), else None."""
    v = np.abs(np.asarray(values, dtype=float))
    if v.size == 0:
        return 1
    for k in range(max_decimals + 1):
        s = 10.0**k
        sv = v * s
        # only float representation noise may separate S v from an integer
        if np.all(np.abs(sv - np.round(sv)) <= np.maximum(1e-9, 16 * np.finfo(float).eps * sv)) \
                and sv.max() < 2**53:
            return 10**k
    return None


def _scale_row(coef: np.ndarray, lo: float, up: float, box: np.ndarray
               ) -> tuple[np.ndarray, int | None, int | None, bool]:
    """Integer version of ``lo <= coef @ x <= up`` for integer x with ``|x_j| <= box_j``.

    Returns (integer coefficients, integer lo or None, integer up or None, exact?). Both
    versions accept exactly the integer points that satisfy the row to within ``ROW_TOL``
    (relative, the feasibility tolerance HiGHS and the validator use), up to points inside
    that tolerance band: every point satisfying the row exactly is kept, and every kept point
    satisfies it to within the tolerance. "Exact" rows are scaled by the power of ten that makes
    their coefficients integers; the others by S large enough that the rounding error of
    ``round(S coef) @ x`` (at most ``slack`` = sum_j 0.5 box_j) fits twice in the tolerance.
    """
    s = _decimal_scale(coef)
    if s is not None:
        a = np.round(coef * s).astype(np.int64)
        slack, exact = 0.0, True
    else:
        s = max((float(np.sum(box)) + 1.0) / ROW_TOL,
                CPSAT_ROW_MAGNITUDE / max(np.abs(coef).max(), 1e-300))
        if s * float(np.abs(coef) @ np.maximum(box, 1.0)) >= 2.0**62:
            raise ValueError("A: a row's coefficients cannot be scaled to CP-SAT's 64-bit "
                             "integers at the required precision")
        a = np.round(coef * s).astype(np.int64)
        slack = float(np.sum(np.abs(a - coef * s) * box))
        exact = False

    def edge(v: float, up_side: bool) -> int | None:
        if not math.isfinite(v):
            return None
        tol = ROW_TOL * s * max(1.0, abs(v))
        return math.floor(v * s + tol - slack) if up_side else math.ceil(v * s - tol + slack)

    return a, edge(lo, False), edge(up, True), exact


def _objective_scale(c: np.ndarray) -> float:
    """S = 10^k, the largest power of ten with max |S c| <= CPSAT_MAX_OBJECTIVE (k <= 15)."""
    cmax = float(np.abs(c).max()) if len(c) else 0.0
    if cmax == 0.0:
        return 1.0
    return 10.0 ** min(15, math.floor(math.log10(CPSAT_MAX_OBJECTIVE) - math.log10(cmax)))


def _solve_cpsat(lp: LinearProgram, *, time_limit: float | None, seed: int, mip_gap: float,
                 initial: np.ndarray | None) -> SolverResult:
    cp_model = require("ortools.sat.python.cp_model", extra="cpsat",
                       feature="the CP-SAT backend (policy offline-cpsat)")

    ints = np.asarray(lp.integer, bool)
    if not ints.all():
        raise ValueError(f"integer: CP-SAT needs integer variables; columns "
                         f"{np.flatnonzero(~ints)[:5].tolist()}... are continuous")
    if not (np.isfinite(lp.lower).all() and np.isfinite(lp.upper).all()):
        raise ValueError("lower/upper: CP-SAT needs finite variable bounds")
    t0 = time.perf_counter()
    lo_b = np.ceil(np.asarray(lp.lower, float) - 1e-9).astype(np.int64)
    up_b = np.floor(np.asarray(lp.upper, float) + 1e-9).astype(np.int64)
    if np.any(lo_b > up_b):
        return SolverResult("infeasible", False, None, None, None, None, None, 0.0, 0.0, "cpsat",
                            {"reason": "empty variable domain"})
    box = np.maximum(np.abs(lo_b), np.abs(up_b)).astype(float)
    model = cp_model.CpModel()
    xs = [model.new_int_var(int(lo), int(up), f"x{j}") for j, (lo, up) in enumerate(zip(lo_b, up_b))]
    A = sp.csr_matrix(lp.A)
    inexact = 0
    for r in range(lp.n_rows):
        cols = A.indices[A.indptr[r]:A.indptr[r + 1]]
        vals = A.data[A.indptr[r]:A.indptr[r + 1]]
        keep = vals != 0
        cols, vals = cols[keep], vals[keep]
        lo, up = float(lp.row_lower[r]), float(lp.row_upper[r])
        if len(cols) == 0:
            if lo > 1e-9 or up < -1e-9:
                return SolverResult("infeasible", False, None, None, None, None, None,
                                    time.perf_counter() - t0, 0.0, "cpsat", {"reason": f"row {r}"})
            continue
        a, ilo, iup, exact = _scale_row(vals, lo, up, box[cols])
        inexact += not exact
        expr = cp_model.LinearExpr.weighted_sum([xs[j] for j in cols], a.tolist())
        model.add_linear_constraint(expr, -(2**62) if ilo is None else ilo,
                                    2**62 if iup is None else iup)
    c = np.asarray(lp.c, float)
    S = _objective_scale(c)
    ci = np.round(c * S).astype(np.int64)
    nz = np.flatnonzero(ci != 0)
    obj = cp_model.LinearExpr.weighted_sum([xs[j] for j in nz], ci[nz].tolist())
    (model.maximize if lp.sense == "max" else model.minimize)(obj)
    err = 0.5 / S * float(np.sum(box[np.flatnonzero(c != 0)]))  # |c.x - c'.x / S| <= err
    if initial is not None:
        for j, v in enumerate(np.round(np.asarray(initial, float)).astype(np.int64)):
            model.add_hint(xs[j], int(v))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    # full LP relaxation in the single worker: without it CP-SAT proves little on packing MILPs
    # (Fig. 5 instances: no proof in 30 s vs ~1-3 s with it)
    solver.parameters.linearization_level = 2
    solver.parameters.random_seed = int(seed)
    solver.parameters.relative_gap_limit = float(mip_gap)
    if time_limit is not None:
        solver.parameters.max_time_in_seconds = float(time_limit)
    build_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    st = solver.solve(model)
    solve_s = time.perf_counter() - t1
    info = {"cpsat_status": solver.status_name(st), "objective_scale": S,
            "objective_error": 2 * err, "rows_inexact": inexact}
    if st in (cp_model.INFEASIBLE,):
        return SolverResult("infeasible", False, None, None, None, None, None, build_s, solve_s,
                            "cpsat", info)
    if st == cp_model.MODEL_INVALID:
        info["validation"] = model.validate()
        return SolverResult("error", False, None, None, None, None, None, build_s, solve_s,
                            "cpsat", info)
    name = "optimal" if st == cp_model.OPTIMAL else "time_limit"
    x = objective = bound = None
    if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        x = np.array(solver.values(xs), dtype=float)
        objective = float(c @ x)
    if st in (cp_model.OPTIMAL, cp_model.FEASIBLE) or math.isfinite(solver.best_objective_bound):
        sign = 1.0 if lp.sense == "max" else -1.0
        bound = float(solver.best_objective_bound) / S + sign * err
        if objective is not None:
            bound = max(bound, objective) if lp.sense == "max" else min(bound, objective)
    gap = relative_gap(objective, bound)
    proven = name == "optimal"
    return SolverResult(name, proven, x, objective, bound, gap, None, build_s, solve_s, "cpsat",
                        info)
