"""The array solver layer: one linear program in CSR arrays, solved by HiGHS or OR-Tools CP-SAT.

``solve_program(lp, limits)`` takes a :class:`LinearProgram`

    optimise  c @ x   s.t.   row_lower <= A @ x <= row_upper,   lower <= x <= upper,
              x_j integer where ``integer[j]``

and :class:`SolverLimits` (optional), and returns a :class:`SolverResult` in one vocabulary for
both back ends (status, incumbent, objective, best bound, relative gap, LP row duals, build and
solve times). The offline MILP of problem (1), the column-generation master of (14)-(18) and the
Dorm baseline all go through it.

Modules: :mod:`.lp` (the program, the result, the status vocabulary and the proven-bound rule),
:mod:`.highs` and :mod:`.cpsat` (the two back ends), :mod:`.child` (a solve in a child process
that is killed when it overshoots its limit); this module chooses the back end and re-exports
their names.

**Limits** (:class:`SolverLimits`, one frozen object: ``solve_program(lp,
SolverLimits(time_limit=60, node_limit=100))``). ``time_limit`` (seconds) covers the hand-off to
the solver and the solve: the solver gets what is left after the hand-off. Deterministic limits,
which give the same result on any machine and under any load (what tests use): ``node_limit``
and ``solution_limit`` (HiGHS MIPs: ``mip_max_nodes``, ``mip_max_improving_sols``;
``node_limit=0`` stops before the root LP), ``iteration_limit`` (HiGHS LPs:
``simplex_iteration_limit``), ``deterministic_time`` (CP-SAT's ``max_deterministic_time``, in its
deterministic "seconds"). A limit the chosen back end does not have is an error naming it.
``mip_gap``: the relative gap counted as optimal.

**Logs.** Solvers never write to stdout: HiGHS's one-per-process banner is captured when the
first ``Highs`` object is made, and both solvers' logs go to the Python logger
``oasis_opt.offline.solver`` at DEBUG level (collected only when that level is enabled, e.g.
``oasis-opt --log-level debug ...``).
"""
from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import Any, Callable

import numpy as np

from .child import KILL_GRACE_S, KILL_GRACE_SHARE, ChildOutcome, run_in_child
from .cpsat import CPSAT_MAX_DECIMALS, CPSAT_MAX_OBJECTIVE, CPSAT_ROW_MAGNITUDE, solve_cpsat
from .highs import (IncrementalLP, new_highs, quiet_highspy, run_highs, set_highs_threads,
                    solve_highs, to_highs_lp)
from .lp import (BACKENDS, LIMIT_STATUS, MIP_GAP, NO_LIMITS, OUTCOMES, STATUSES, STOPPED,
                 LinearProgram, Outcome, SolverLimits, SolverResult, check_limits, check_point,
                 describe, finish, ordered_bound, relative_gap, solve_empty)

__all__ = ["BACKENDS", "LIMIT_STATUS", "MIP_GAP", "NO_LIMITS", "OUTCOMES", "STATUSES", "STOPPED",
           "LinearProgram", "Outcome", "SolverLimits", "SolverResult", "check_limits",
           "check_point", "describe", "ordered_bound", "relative_gap", "solve_program",
           "solve_in_child", "run_in_child", "ChildOutcome", "KILL_GRACE_S", "KILL_GRACE_SHARE",
           "IncrementalLP", "new_highs", "quiet_highspy", "run_highs", "set_highs_threads",
           "to_highs_lp", "CPSAT_MAX_DECIMALS", "CPSAT_MAX_OBJECTIVE", "CPSAT_ROW_MAGNITUDE"]


def solve_program(lp: LinearProgram, limits: SolverLimits | None = None, *,
                  backend: str = "highs", relax: bool = False, seed: int = 0,
                  initial: np.ndarray | None = None,
                  highs_options: dict[str, Any] | None = None) -> SolverResult:
    """Solve ``lp`` with ``backend`` ("highs" or "cpsat") under ``limits`` (None: no limit, the
    default ``mip_gap``).

    ``relax=True`` drops integrality (HiGHS only; CP-SAT solves integer programs only) and
    returns row duals. ``limits.time_limit`` (seconds from this call) covers the hand-off and
    the solve; ``limits.deadline`` (a ``time.perf_counter()`` value; the earlier of the two
    applies) lets a caller count its own model building too: a deadline already passed returns
    at once, status "time_limit", with the ``initial`` point as incumbent if given. The
    deterministic limits ``node_limit``, ``solution_limit``, ``iteration_limit`` (HiGHS) and
    ``deterministic_time`` (CP-SAT) are described in the module doc. A solve stopped by a limit
    has that limit as status (``STOPPED``), ``proven_optimal=False``, an incumbent or not
    (``incumbent``), and a ``bound`` only if the solver proved one. ``seed`` fixes the solvers'
    random seeds (both are deterministic for a given seed under deterministic limits; CP-SAT
    runs with one worker). ``initial``: a feasible point of an integer program (checked:
    ``ValueError`` naming the violated bound or row otherwise), handed to the solver as a
    starting incumbent; when the solver returns nothing better, it is the result's incumbent
    (``incumbent == "initial"``). ``highs_options``: further HiGHS options (e.g.
    ``{"solver": "ipm", "run_crossover": "off"}`` for an interior point of an LP's optimal face
    instead of a vertex).
    """
    t_start = time.perf_counter()
    if backend not in BACKENDS:
        raise ValueError(f"backend: unknown {backend!r} (known: {', '.join(BACKENDS)})")
    limits = NO_LIMITS if limits is None else limits
    if not isinstance(limits, SolverLimits):
        raise ValueError(f"limits: expected SolverLimits, got {type(limits).__name__}")
    is_lp = relax or (lp.n_cols > 0 and not np.any(lp.integer))
    check_limits(backend, is_lp, limits)
    if initial is not None:
        if is_lp:
            raise ValueError("initial: a starting incumbent is for integer programs "
                             "(this solve is an LP)")
        initial = check_point(lp, initial, "initial")
    if lp.n_cols == 0:
        return solve_empty(lp, backend)
    limits = limits.until(t_start)
    if limits.deadline is not None and time.perf_counter() >= limits.deadline:
        return finish(lp, backend, Outcome("limit", limit="time"), initial=initial,
                      info={f"{backend}_status": "not run: the time limit was spent before"})
    if backend == "highs":
        return solve_highs(lp, limits, relax=relax, seed=seed, initial=initial,
                           options=highs_options)
    if relax:
        raise ValueError("relax: CP-SAT solves integer programs only; use backend='highs' for LPs")
    return solve_cpsat(lp, limits, seed=seed, initial=initial)


def solve_in_child(lp: LinearProgram, limits: SolverLimits, *,
                   initial: np.ndarray | None = None,
                   solve: Callable[..., SolverResult] | None = None,
                   **options: Any) -> SolverResult:
    """``solve_program(lp, limits, initial=initial, **options)`` in a child process
    (:func:`run_in_child`), killed ``KILL_GRACE_S + KILL_GRACE_SHARE * time_limit`` seconds
    after ``limits.time_limit`` (required; a ``deadline`` is refused: a ``perf_counter`` value
    means nothing in another process).

    HiGHS does not check its clock everywhere: on the 1.54 M-column MILP of 100 paper-sim jobs
    its presolve ran 47 s of a 30 s limit, and 216 s of a 60 s one on a loaded machine. A child
    process is the only way to stop it on time. Killed, the result is what a limit gives
    before any solution: status "time_limit", the ``initial`` point as incumbent if given, no
    bound. Starting the child counts in the limit (the child solves until the same wall-clock
    deadline). A child that dies (e.g. killed for memory) gives status "error" with the exit
    code in ``info``. ``solve``: the function the child runs, as ``solve(lp, limits,
    **options)`` (default ``solve_program``; the tests use it to check the kill). Not on POSIX,
    the solve runs in this process.
    """
    if not isinstance(limits, SolverLimits):
        raise ValueError(f"limits: expected SolverLimits, got {type(limits).__name__}")
    if limits.time_limit is None:
        raise ValueError("time_limit: solve_in_child needs one (the child is killed after it)")
    if limits.deadline is not None:
        raise ValueError("deadline: a time.perf_counter() value means nothing in the child; "
                         "give time_limit only")
    time_limit = limits.time_limit
    options = {"initial": initial, **options}
    if os.name != "posix":
        return (solve or solve_program)(lp, limits, **options)
    backend = options.get("backend", "highs")
    out = run_in_child(_solve_until, solve or solve_program, lp, limits, options,
                       time.time() + time_limit, time_limit=time_limit)
    if out.kind == "done":
        return out.value
    if out.kind == "killed":
        return finish(lp, backend, Outcome("limit", limit="time"), initial=initial,
                      build_s=out.handoff_s, solve_s=out.elapsed_s - out.handoff_s,
                      info={f"{backend}_status": f"killed: still running {out.late_s:.1f} s "
                            "after the time limit"})
    return finish(lp, backend, Outcome("error"), build_s=out.elapsed_s,
                  info={f"{backend}_status": "the solver process died (exit code "
                        f"{out.exit_code}; -9: killed, e.g. out of memory)"})


def _solve_until(solve: Callable[..., SolverResult], lp: LinearProgram, limits: SolverLimits,
                 options: dict, deadline_wall: float) -> SolverResult:
    """``solve(lp, limits, **options)`` until the wall-clock ``deadline_wall`` (run in the
    child): ``limits`` with the time left as its ``time_limit``."""
    left = deadline_wall - time.time()
    if left > 0:
        return solve(lp, replace(limits, time_limit=left), **options)
    # starting the child used it up
    return solve(lp, replace(limits, time_limit=None, deadline=time.perf_counter()), **options)
