"""The CP-SAT back end of the solver layer (``backend="cpsat"``, OR-Tools, the ``cpsat`` extra).

CP-SAT (``backend="cpsat"``) needs integers everywhere; see :func:`scale_row` and
:func:`objective_scale` for how coefficients are scaled and the error this bounds:

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
"""
from __future__ import annotations

import logging
import math
import time

import numpy as np

from .._extras import require
from ..model.numerics import FEAS_TOL, INTEGER_RTOL, ROW_TOL
from .lp import LinearProgram, Outcome, SolverLimits, SolverResult, as_csr, finish, time_left

log = logging.getLogger("oasis_opt.offline.solver")  # one logger for the solver layer
# CP-SAT integer scaling limits (see the module docstring).
CPSAT_MAX_DECIMALS = 9
CPSAT_MAX_OBJECTIVE = 1e9
CPSAT_ROW_MAGNITUDE = 2.0**30


def decimal_scale(values: np.ndarray, max_decimals: int = CPSAT_MAX_DECIMALS) -> int | None:
    """Smallest 10^k (k <= max_decimals) making every value an integer (to 1e-9), else None."""
    v = np.abs(np.asarray(values, dtype=float))
    if v.size == 0:
        return 1
    for k in range(max_decimals + 1):
        s = 10.0**k
        sv = v * s
        # only float representation noise may separate S v from an integer
        if np.all(np.abs(sv - np.round(sv))
                  <= np.maximum(INTEGER_RTOL, 16 * np.finfo(float).eps * sv)) \
                and sv.max() < 2**53:
            return 10**k
    return None


def scale_row(coef: np.ndarray, lo: float, up: float, box: np.ndarray
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
    s = decimal_scale(coef)
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


def objective_scale(c: np.ndarray) -> float:
    """S = 10^k, the largest power of ten with max |S c| <= CPSAT_MAX_OBJECTIVE (k <= 15)."""
    cmax = float(np.abs(c).max()) if len(c) else 0.0
    if cmax == 0.0:
        return 1.0
    return 10.0 ** min(15, math.floor(math.log10(CPSAT_MAX_OBJECTIVE) - math.log10(cmax)))


def solve_cpsat(lp: LinearProgram, limits: SolverLimits, *, seed: int,
                initial: np.ndarray | None) -> SolverResult:
    """CP-SAT on ``lp`` scaled to integers (module doc), one worker, seeded, under ``limits``;
    ``initial``: a hint and the fallback incumbent (:func:`.solver.solve_program` checks all)."""
    cp_model = require("ortools.sat.python.cp_model", extra="cpsat",
                       feature="the CP-SAT backend (policy offline-cpsat)")

    ints = np.asarray(lp.integer, bool)
    if not ints.all():
        raise ValueError(f"integer: CP-SAT needs integer variables; columns "
                         f"{np.flatnonzero(~ints)[:5].tolist()}... are continuous")
    if not (np.isfinite(lp.lower).all() and np.isfinite(lp.upper).all()):
        raise ValueError("lower/upper: CP-SAT needs finite variable bounds")
    t0 = time.perf_counter()
    deadline, deterministic_time = limits.until(t0).deadline, limits.deterministic_time
    lo_b = np.ceil(np.asarray(lp.lower, float) - FEAS_TOL).astype(np.int64)
    up_b = np.floor(np.asarray(lp.upper, float) + FEAS_TOL).astype(np.int64)
    if np.any(lo_b > up_b):
        return finish(lp, "cpsat", Outcome("infeasible"), info={"reason": "empty variable domain"})
    box = np.maximum(np.abs(lo_b), np.abs(up_b)).astype(float)

    def out_of_time(n: int) -> bool:  # the hand-off is Python work per element: check often
        return deadline is not None and n % 1024 == 0 and time.perf_counter() >= deadline

    def handoff_timed_out() -> SolverResult:
        return finish(lp, "cpsat", Outcome("limit", limit="time"), initial=initial,
                      build_s=time.perf_counter() - t0,
                      info={"cpsat_status": "not run: time limit spent on the hand-off"})

    model = cp_model.CpModel()
    xs = []
    for j, (lo, up) in enumerate(zip(lo_b.tolist(), up_b.tolist())):
        if out_of_time(j):
            return handoff_timed_out()
        xs.append(model.new_int_var(lo, up, f"x{j}"))
    A = as_csr(lp.A)
    inexact = 0
    for r in range(lp.n_rows):
        if out_of_time(r):
            return handoff_timed_out()
        cols = A.indices[A.indptr[r]:A.indptr[r + 1]]
        vals = A.data[A.indptr[r]:A.indptr[r + 1]]
        keep = vals != 0
        cols, vals = cols[keep], vals[keep]
        lo, up = float(lp.row_lower[r]), float(lp.row_upper[r])
        if len(cols) == 0:
            if lo > FEAS_TOL or up < -FEAS_TOL:
                return finish(lp, "cpsat", Outcome("infeasible"),
                              build_s=time.perf_counter() - t0, info={"reason": f"row {r}"})
            continue
        a, ilo, iup, exact = scale_row(vals, lo, up, box[cols])
        inexact += not exact
        expr = cp_model.LinearExpr.weighted_sum([xs[j] for j in cols], a.tolist())
        model.add_linear_constraint(expr, -(2**62) if ilo is None else ilo,
                                    2**62 if iup is None else iup)
    c = np.asarray(lp.c, float)
    S = objective_scale(c)
    ci = np.round(c * S).astype(np.int64)
    nz = np.flatnonzero(ci != 0)
    obj = cp_model.LinearExpr.weighted_sum([xs[j] for j in nz], ci[nz].tolist())
    (model.maximize if lp.sense == "max" else model.minimize)(obj)
    err = 0.5 / S * float(np.sum(box[np.flatnonzero(c != 0)]))  # |c.x - c'.x / S| <= err
    if initial is not None:
        for j, v in enumerate(initial.astype(np.int64).tolist()):
            model.add_hint(xs[j], v)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    # full LP relaxation in the single worker: without it CP-SAT proves little on packing MILPs
    # (Fig. 5 instances: no proof in 30 s vs ~1-3 s with it)
    solver.parameters.linearization_level = 2
    solver.parameters.random_seed = int(seed)
    solver.parameters.relative_gap_limit = float(limits.mip_gap)
    if deterministic_time is not None:
        solver.parameters.max_deterministic_time = float(deterministic_time)
    if log.isEnabledFor(logging.DEBUG):
        solver.parameters.log_search_progress = True
        solver.parameters.log_to_stdout = False
        solver.log_callback = lambda line: log.debug("CP-SAT: %s", line.rstrip())
    build_s = time.perf_counter() - t0
    left = time_left(deadline)
    if left is not None:
        if left <= 0:
            return handoff_timed_out()
        solver.parameters.max_time_in_seconds = left
    t1 = time.perf_counter()
    st = solver.solve(model)
    solve_s = time.perf_counter() - t1
    info = {"cpsat_status": solver.status_name(st), "objective_scale": S,
            "objective_error": 2 * err, "rows_inexact": inexact,
            "deterministic_time_used": float(solver.deterministic_time)}
    if st == cp_model.MODEL_INVALID:
        info["validation"] = model.validate()
    outcome = {cp_model.OPTIMAL: "optimal", cp_model.FEASIBLE: "limit",
               cp_model.UNKNOWN: "limit", cp_model.INFEASIBLE: "infeasible"}.get(st, "error")
    limit = ("deterministic_time" if deterministic_time is not None
             and (left is None or solve_s < left) else "time")
    x = bound = None
    if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        x = np.array(solver.values(xs), dtype=float)
        # CP-SAT's best bound of the scaled objective, proven only with a solution (an UNKNOWN
        # response leaves the field at 0); the scaling error e makes it a bound on c.x
        bound = float(solver.best_objective_bound) / S + (1.0 if lp.sense == "max" else -1.0) * err
    return finish(lp, "cpsat", Outcome(outcome, limit=limit, x=x, bound=bound), initial=initial,
                  build_s=build_s, solve_s=solve_s, info=info)
