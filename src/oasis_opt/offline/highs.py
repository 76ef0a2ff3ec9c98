"""The HiGHS back end of the solver layer (``backend="highs"``), and the HiGHS helpers other
modules share (:func:`new_highs`, :func:`run_highs`, :func:`to_highs_lp`, :class:`IncrementalLP`).

HiGHS (``backend="highs"``) receives the model through ``highspy.Highs.passModel`` from CSC
arrays: Pyomo's hand-off costs several times HiGHS's own solve on big models (see
``benchmarks/bench_offline.py``). HiGHS's thread scheduler is process-global: a later solve that
asks for another thread count fails silently (model status "Not Set"), so this module sets the
count at most once per process (:func:`set_highs_threads`), and recovers once, by resetting the
scheduler, if code elsewhere in the process changed it.

**Logs.** Solvers never write to stdout: HiGHS's one-per-process banner is captured when the
first ``Highs`` object is made, and both solvers' logs go to the Python logger
``oasis_opt.offline.solver`` at DEBUG level (collected only when that level is enabled, e.g.
``oasis-opt --log-level debug ...``).
"""
from __future__ import annotations

import logging
import math
import os
import sys
import time
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
from numpy.typing import ArrayLike

from ..model.numerics import BOUND_RTOL, FEAS_TOL
from .lp import (LinearProgram, Outcome, RowwiseMatrix, SolverLimits, SolverResult, finish,
                 time_left)

if TYPE_CHECKING:  # imported where used: a RowwiseMatrix program is solved without scipy
    import scipy.sparse as sp

log = logging.getLogger("oasis_opt.offline.solver")  # one logger for the solver layer

_HIGHS_THREADS: int | None = None  # None: HiGHS's default (joins the existing scheduler)
_HIGHS_BANNER_CAPTURED = False


def quiet_highspy() -> Any:
    """``import highspy``, with HiGHS's banner kept off stdout.

    HiGHS prints "Running HiGHS ... Copyright ..." to the C stdout when the process makes its
    first ``Highs`` object, whatever ``output_flag`` says later. The first call here makes that
    object with file descriptor 1 pointed at a temporary file and logs the banner at DEBUG.
    (Another thread writing to stdout during those microseconds would be captured too.) Call it
    before anything else (Pyomo included) creates a ``Highs``.
    """
    global _HIGHS_BANNER_CAPTURED
    import highspy

    if not _HIGHS_BANNER_CAPTURED:
        _HIGHS_BANNER_CAPTURED = True
        banner = _capture_stdout_fd(highspy.Highs)
        if banner.strip():
            log.debug("HiGHS: %s", banner.strip())
    return highspy


def _capture_stdout_fd(fn: Callable[[], object]) -> str:
    """Run ``fn()`` with file descriptor 1 redirected to a temporary file; return what it wrote."""
    import ctypes
    import tempfile

    libc = ctypes.CDLL(None)
    sys.stdout.flush()
    libc.fflush(None)
    saved = os.dup(1)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 1)
        try:
            fn()
        finally:
            libc.fflush(None)  # C stdio buffers what it wrote while fd 1 was the file
            os.dup2(saved, 1)
            os.close(saved)
        tmp.seek(0)
        return tmp.read().decode(errors="replace")


def highs_threads() -> int | None:
    """The thread count :func:`set_highs_threads` set for this process (None: HiGHS's default)."""
    return _HIGHS_THREADS


def set_highs_threads(threads: int | None) -> None:
    """Set HiGHS's thread count for this process (once; it is process-global in HiGHS).

    Resets HiGHS's global scheduler so that the new count takes effect; every ``Highs`` this
    module creates afterwards asks for the same count. ``None`` returns to HiGHS's default.
    """
    highspy = quiet_highspy()

    global _HIGHS_THREADS
    if threads is not None and threads < 1:
        raise ValueError(f"threads: must be >= 1, got {threads}")
    if _HIGHS_THREADS == threads:
        return
    highspy.Highs.resetGlobalScheduler(True)
    _HIGHS_THREADS = threads


def new_highs(**options: Any) -> Any:
    """A ``highspy.Highs`` with this module's thread setting and the given options (None values
    skipped) that writes nothing to the console; its log goes to this module's logger at DEBUG
    when that level is enabled."""
    highspy = quiet_highspy()

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    if log.isEnabledFor(logging.DEBUG):
        h.setOptionValue("log_to_console", False)
        h.setOptionValue("output_flag", True)
        h.cbLogging += _log_highs
    if _HIGHS_THREADS is not None:
        h.setOptionValue("threads", _HIGHS_THREADS)
    for k, v in options.items():
        if v is not None:
            h.setOptionValue(k, v)
    return h


def _log_highs(event: Any) -> None:
    message = str(event.message).strip("\n").rstrip()
    if message:
        log.debug("HiGHS: %s", message)


def run_highs(h: Any) -> Any:
    """``h.run()``, recovering once if another component changed HiGHS's global thread pool.

    A run that finds the global scheduler set up with another thread count returns without
    solving (model status "Not Set"); resetting the scheduler and running again fixes it.
    """
    highspy = quiet_highspy()

    h.run()
    if h.getModelStatus() == highspy.HighsModelStatus.kNotset:
        highspy.Highs.resetGlobalScheduler(True)
        h.run()
    return h.getModelStatus()


def to_highs_lp(lp: LinearProgram, relax: bool = False) -> Any:
    """The ``highspy.HighsLp`` of ``lp`` (CSC arrays, or a ``RowwiseMatrix``'s CSR arrays as
    they are; no per-element Python work)."""
    highspy = quiet_highspy()

    if isinstance(lp.A, RowwiseMatrix):
        A, matrix_format = lp.A, highspy.MatrixFormat.kRowwise
    else:
        import scipy.sparse as sp

        A, matrix_format = sp.csc_matrix(lp.A), highspy.MatrixFormat.kColwise
        A.sort_indices()
    h_lp = highspy.HighsLp()
    h_lp.num_col_ = lp.n_cols
    h_lp.num_row_ = lp.n_rows
    h_lp.col_cost_ = np.ascontiguousarray(lp.c, dtype=np.float64)
    h_lp.col_lower_ = np.ascontiguousarray(lp.lower, dtype=np.float64)
    h_lp.col_upper_ = np.ascontiguousarray(lp.upper, dtype=np.float64)
    h_lp.row_lower_ = np.ascontiguousarray(lp.row_lower, dtype=np.float64)
    h_lp.row_upper_ = np.ascontiguousarray(lp.row_upper, dtype=np.float64)
    h_lp.a_matrix_.format_ = matrix_format
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


def solve_highs(lp: LinearProgram, limits: SolverLimits, *, relax: bool, seed: int,
                initial: np.ndarray | None, start: bool = True,
                options: dict[str, Any] | None = None) -> SolverResult:
    """HiGHS under ``limits`` (a ``time_limit`` there counts from this call; ``solve_program``
    has turned it into the ``deadline`` already); ``initial`` is handed to it as a start
    solution when ``start`` (and kept as the fallback incumbent either way)."""
    highspy = quiet_highspy()

    MS = highspy.HighsModelStatus
    is_mip = (not relax) and bool(np.any(lp.integer))
    t0 = time.perf_counter()
    limits = limits.until(t0)
    node_limit, solution_limit = limits.node_limit, limits.solution_limit
    h = new_highs(random_seed=int(seed), mip_rel_gap=float(limits.mip_gap),
                  primal_feasibility_tolerance=FEAS_TOL,
                  mip_feasibility_tolerance=FEAS_TOL if is_mip else None,
                  mip_max_nodes=node_limit, mip_max_improving_sols=solution_limit,
                  simplex_iteration_limit=limits.iteration_limit, **(options or {}))
    h.passModel(to_highs_lp(lp, relax=relax))
    if initial is not None and start:
        sol = highspy.HighsSolution()
        sol.col_value = initial.tolist()
        sol.value_valid = True
        h.setSolution(sol)
    build_s = time.perf_counter() - t0

    def run() -> Any:  # HiGHS gets the time left (its clock starts with each run)
        left = time_left(limits.deadline)
        if left is not None:
            if left <= 0:
                return None
            h.setOptionValue("time_limit", left)
        return run_highs(h)

    t1 = time.perf_counter()
    status = run()
    if status == MS.kUnboundedOrInfeasible:  # presolve could not tell which: ask the simplex
        h.setOptionValue("presolve", "off")
        status = run()
        if status is None:
            status = MS.kTimeLimit
    solve_s = time.perf_counter() - t1
    if status is None:  # the hand-off used up the time limit
        return finish(lp, "highs", Outcome("limit", limit="time"), initial=initial,
                      build_s=build_s,
                      info={"highs_status": "not run: time limit spent on the hand-off"})
    info = h.getInfo()
    stopped = {MS.kTimeLimit: "time", MS.kIterationLimit: "iterations",
               MS.kInterrupt: "interrupt"}
    if status == MS.kSolutionLimit:  # mip_max_nodes / mip_max_improving_sols
        stopped[status] = ("nodes" if node_limit is not None and
                           (solution_limit is None or info.mip_node_count >= node_limit)
                           else "solutions")
    outcome = {MS.kOptimal: "optimal", MS.kInfeasible: "infeasible", MS.kUnbounded: "unbounded",
               MS.kUnboundedOrInfeasible: "infeasible"}.get(status)
    outcome = outcome or ("limit" if status in stopped else "error")
    x = bound = duals = None
    if info.primal_solution_status == highspy.kSolutionStatusFeasible:
        x = np.array(h.getSolution().col_value, dtype=float)
        if is_mip:
            ints = np.asarray(lp.integer, bool)
            x[ints] = np.round(x[ints])
    if x is not None and initial is not None and start and outcome in ("optimal", "limit"):
        reported = float(info.objective_function_value)
        if abs(float(lp.c @ x) - reported) > BOUND_RTOL * max(1.0, abs(reported)):
            # HiGHS 1.16 hands back the start solution as its own when presolve solves the MIP
            # outright (its objective and bound are right, its column values are not): again,
            # without the start
            return solve_highs(lp, limits, relax=relax, seed=seed, initial=initial, start=False,
                               options=options)
    if is_mip:
        bound = float(info.mip_dual_bound)  # +-inf (dropped) until HiGHS has proven one
    elif outcome == "optimal" and x is not None:
        bound = float(lp.c @ x)
        duals = np.array(h.getSolution().row_dual, dtype=float)
    # HiGHS reports kOptimal once its gap is within mip_rel_gap (or its 1e-6 absolute gap)
    return finish(lp, "highs", Outcome(outcome, limit=stopped.get(status), x=x, bound=bound,
                                       duals=duals), initial=initial, build_s=build_s,
                  solve_s=solve_s, info={"highs_status": h.modelStatusToString(status)})


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
        import scipy.sparse as sp

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
        import scipy.sparse as sp

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
        """(status, objective, x, row duals) with the conventions of ``solve_program``: "optimal",
        or "time_limit" (and Nones) when ``time_limit`` seconds ran out, or HiGHS's status."""
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


