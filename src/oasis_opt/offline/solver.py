"""The array solver layer: one linear program in CSR arrays, solved by HiGHS or OR-Tools CP-SAT.

``solve_program(lp)`` takes a :class:`LinearProgram`

    optimise  c @ x   s.t.   row_lower <= A @ x <= row_upper,   lower <= x <= upper,
              x_j integer where ``integer[j]``

and returns a :class:`SolverResult` in one vocabulary for both back ends (status, incumbent,
objective, best bound, relative gap, LP row duals, build and solve times). The offline MILP of
problem (1), the column-generation master of (14)-(18) and the Dorm baseline all go through it.

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

**Limits.** ``time_limit`` (seconds) covers the hand-off to the solver and the solve: the solver
gets what is left after the hand-off. Deterministic limits, which give the same result on any
machine and under any load (what tests use): ``node_limit`` and ``solution_limit`` (HiGHS
MIPs: ``mip_max_nodes``, ``mip_max_improving_sols``; ``node_limit=0`` stops before the root
LP), ``iteration_limit`` (HiGHS LPs: ``simplex_iteration_limit``), ``deterministic_time``
(CP-SAT's ``max_deterministic_time``, in its deterministic "seconds"). A limit the chosen back
end does not have is an error naming it.

**Logs.** Solvers never write to stdout: HiGHS's one-per-process banner is captured when the
first ``Highs`` object is made, and both solvers' logs go to the Python logger
``oasis_opt.offline.solver`` at DEBUG level (collected only when that level is enabled, e.g.
``oasis-opt --log-level debug ...``).

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

import logging
import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, overload

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from .._extras import require

# HiGHS feasibility, CP-SAT row scaling, bound vs incumbent noise
from ..model.numerics import BOUND_RTOL, FEAS_TOL, ROW_TOL

BACKENDS = ("highs", "cpsat")
# the status of a solve stopped short, by what stopped it
LIMIT_STATUS = {"time": "time_limit", "nodes": "node_limit", "solutions": "solution_limit",
                "iterations": "iteration_limit", "deterministic_time": "deterministic_time_limit",
                "interrupt": "interrupted"}
STOPPED = tuple(LIMIT_STATUS.values())
STATUSES = ("optimal", *STOPPED, "infeasible", "unbounded", "error")
log = logging.getLogger(__name__)
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
    if diff <= 1e-12 * max(1.0, abs(bound)):
        return 0.0
    return diff / abs(objective) if abs(objective) > 1e-9 else math.inf


def solve_program(lp: LinearProgram, *, backend: str = "highs", time_limit: float | None = None,
                  relax: bool = False, seed: int = 0, mip_gap: float = MIP_GAP,
                  initial: np.ndarray | None = None, node_limit: int | None = None,
                  solution_limit: int | None = None, iteration_limit: int | None = None,
                  deterministic_time: float | None = None,
                  deadline: float | None = None,
                  highs_options: dict[str, Any] | None = None) -> SolverResult:
    """Solve ``lp`` with ``backend`` ("highs" or "cpsat").

    ``relax=True`` drops integrality (HiGHS only; CP-SAT solves integer programs only) and
    returns row duals. ``time_limit`` (seconds from this call) covers the hand-off and the
    solve; ``deadline`` (a ``time.perf_counter()`` value; the earlier of the two applies) lets a
    caller count its own model building too: a deadline already passed returns at once, status
    "time_limit", with the ``initial`` point as incumbent if given. The deterministic limits
    ``node_limit``, ``solution_limit``, ``iteration_limit`` (HiGHS) and ``deterministic_time``
    (CP-SAT) are described in the module doc. A solve stopped by a limit has that limit as
    status (``STOPPED``), ``proven_optimal=False``, an incumbent or not (``incumbent``), and a
    ``bound`` only if the solver proved one. ``seed`` fixes the solvers' random seeds (both are
    deterministic for a given seed under deterministic limits; CP-SAT runs with one worker).
    ``initial``: a feasible point of an integer program (checked: ``ValueError`` naming the
    violated bound or row otherwise), handed to the solver as a starting incumbent; when the
    solver returns nothing better, it is the result's incumbent (``incumbent == "initial"``).
    ``highs_options``: further HiGHS options (e.g. ``{"solver": "ipm", "run_crossover": "off"}``
    for an interior point of an LP's optimal face instead of a vertex).
    """
    t_start = time.perf_counter()
    if backend not in BACKENDS:
        raise ValueError(f"backend: unknown {backend!r} (known: {', '.join(BACKENDS)})")
    if time_limit is not None and not time_limit > 0:
        raise ValueError(f"time_limit: must be > 0 seconds, got {time_limit}")
    is_lp = relax or (lp.n_cols > 0 and not np.any(lp.integer))
    check_limits(backend, is_lp, node_limit=node_limit,
                  solution_limit=solution_limit, iteration_limit=iteration_limit,
                  deterministic_time=deterministic_time)
    if initial is not None:
        if is_lp:
            raise ValueError("initial: a starting incumbent is for integer programs "
                             "(this solve is an LP)")
        initial = check_point(lp, initial, "initial")
    if lp.n_cols == 0:
        return _solve_empty(lp, backend)
    if time_limit is not None:
        deadline = t_start + float(time_limit) if deadline is None else \
            min(deadline, t_start + float(time_limit))
    if deadline is not None and time.perf_counter() >= deadline:
        return _finish(lp, backend, "limit", limit="time", initial=initial,
                       info={f"{backend}_status": "not run: the time limit was spent before"})
    if backend == "highs":
        return _solve_highs(lp, deadline=deadline, relax=relax, seed=seed, mip_gap=mip_gap,
                            initial=initial, node_limit=node_limit,
                            solution_limit=solution_limit, iteration_limit=iteration_limit,
                            options=highs_options)
    if relax:
        raise ValueError("relax: CP-SAT solves integer programs only; use backend='highs' for LPs")
    return _solve_cpsat(lp, deadline=deadline, seed=seed, mip_gap=mip_gap, initial=initial,
                        deterministic_time=deterministic_time)


# A solve run in a child process is killed this long after its time limit (seconds, plus a share
# of the limit) if the solver has not stopped by itself.
KILL_GRACE_S = 1.0
KILL_GRACE_SHARE = 0.05


class ChildOutcome(NamedTuple):
    """What :func:`run_in_child` saw: ``kind`` "done" (``value`` is what the function returned),
    "killed" (still running ``late_s`` after its limit) or "died" (exit code ``exit_code``);
    ``handoff_s``: starting the child and pickling the job to it; ``elapsed_s``: the whole run."""
    kind: str
    value: Any = None
    handoff_s: float = 0.0
    elapsed_s: float = 0.0
    late_s: float = 0.0
    exit_code: int | None = None


def run_in_child(fn: Callable[..., Any], *args: Any, time_limit: float) -> ChildOutcome:
    """``fn(*args)`` in a child process, killed ``KILL_GRACE_S + KILL_GRACE_SHARE * time_limit``
    seconds after ``time_limit`` (counted from this call, starting the child included).

    The child is a fresh interpreter (``python -c``; ``fn`` and ``args`` pickled to it through a
    pipe), so it inherits no threads and never re-runs the caller's ``__main__``. ``fn`` gets no
    clock of its own: give it the wall-clock deadline (``time.time()`` based) in ``args``. Its
    logs on this module's logger are forwarded as they come when DEBUG is enabled; an exception
    it raises is re-raised here. POSIX only (file descriptors passed to the child): callers run
    ``fn`` in their own process elsewhere.
    """
    import pickle
    import subprocess
    import threading
    from multiprocessing.connection import Connection

    if not time_limit > 0:
        raise ValueError(f"time_limit: must be > 0 seconds, got {time_limit}")
    t0 = time.perf_counter()
    to_child, from_child = os.pipe(), os.pipe()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from oasis_opt.offline.solver import _child_main; "
         "_child_main(int(sys.argv[1]), int(sys.argv[2]))", str(to_child[0]), str(from_child[1])],
        pass_fds=(to_child[0], from_child[1]), stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, env=env)
    os.close(to_child[0])
    os.close(from_child[1])
    send, receive = Connection(to_child[1], readable=False), Connection(from_child[0],
                                                                        writable=False)
    kill_at = t0 + time_limit + KILL_GRACE_S + KILL_GRACE_SHARE * time_limit

    job = pickle.dumps((fn, args, log.isEnabledFor(logging.DEBUG), _HIGHS_THREADS),
                       protocol=pickle.HIGHEST_PROTOCOL)
    sent = [math.nan]

    def hand_off() -> None:
        # a job larger than the pipe's buffer blocks until the child reads it, and a child
        # starting on a loaded machine may take long to: the kill clock runs meanwhile
        try:
            send.send_bytes(job)
            sent[0] = time.perf_counter()
        except OSError:  # the child died or was killed before reading it all
            pass
        finally:
            send.close()

    sender = threading.Thread(target=hand_off, daemon=True)
    sender.start()

    def handoff_s() -> float:
        return (sent[0] if sent[0] == sent[0] else time.perf_counter()) - t0

    def died() -> ChildOutcome:
        return ChildOutcome("died", handoff_s=handoff_s(), elapsed_s=time.perf_counter() - t0,
                            exit_code=proc.wait())

    try:
        while True:
            wait = kill_at - time.perf_counter()
            if wait <= 0 or not receive.poll(wait):
                proc.kill()
                now = time.perf_counter()
                return ChildOutcome("killed", handoff_s=handoff_s(), elapsed_s=now - t0,
                                    late_s=now - t0 - time_limit)
            try:
                kind, payload = receive.recv()
            except EOFError:  # the child died without a word
                return died()
            if kind == "log":
                log.debug("%s", payload)
            elif kind == "error":
                raise payload
            else:
                return ChildOutcome("done", payload, handoff_s=handoff_s(),
                                    elapsed_s=time.perf_counter() - t0)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        sender.join()
        receive.close()


def solve_in_child(lp: LinearProgram, *, time_limit: float, initial: np.ndarray | None = None,
                   solve: Callable[..., SolverResult] | None = None,
                   **options: Any) -> SolverResult:
    """``solve_program(lp, time_limit=time_limit, initial=initial, **options)`` in a child
    process (:func:`run_in_child`), killed ``KILL_GRACE_S + KILL_GRACE_SHARE * time_limit``
    seconds after the limit.

    HiGHS does not check its clock everywhere: on the 1.54 M-column MILP of 100 paper-sim jobs
    its presolve ran 47 s of a 30 s limit, and 216 s of a 60 s one on a loaded machine. A child
    process is the only way to stop it on time. Killed, the result is what a limit gives
    before any solution: status "time_limit", the ``initial`` point as incumbent if given, no
    bound. Starting the child counts in the limit (the child solves until the same wall-clock
    deadline). A child that dies (e.g. killed for memory) gives status "error" with the exit
    code in ``info``. ``solve``: the function the child runs (default ``solve_program``; the
    tests use it to check the kill). Not on POSIX, the solve runs in this process.
    """
    if not time_limit > 0:
        raise ValueError(f"time_limit: must be > 0 seconds, got {time_limit}")
    options = {"initial": initial, **options}
    if os.name != "posix":
        return (solve or solve_program)(lp, time_limit=time_limit, **options)
    backend = options.get("backend", "highs")
    out = run_in_child(_solve_until, solve or solve_program, lp, options,
                       time.time() + time_limit, time_limit=time_limit)
    if out.kind == "done":
        return out.value
    if out.kind == "killed":
        return _finish(lp, backend, "limit", limit="time", initial=initial,
                       build_s=out.handoff_s, solve_s=out.elapsed_s - out.handoff_s,
                       info={f"{backend}_status": f"killed: still running {out.late_s:.1f} s "
                             "after the time limit"})
    return _finish(lp, backend, "error", build_s=out.elapsed_s,
                   info={f"{backend}_status": "the solver process died (exit code "
                         f"{out.exit_code}; -9: killed, e.g. out of memory)"})


def _solve_until(solve: Callable[..., SolverResult], lp: LinearProgram, options: dict,
                 deadline_wall: float) -> SolverResult:
    """``solve(lp, **options)`` until the wall-clock ``deadline_wall`` (run in the child)."""
    left = deadline_wall - time.time()
    if left > 0:
        return solve(lp, time_limit=left, **options)
    return solve(lp, deadline=time.perf_counter(), **options)  # starting the child used it up


def _child_main(in_fd: int, out_fd: int) -> None:
    """Body of the :func:`run_in_child` process: read ``(fn, args, debug, threads)`` from
    ``in_fd``, run ``fn(*args)``, write ("result", value) or ("error", exception) to ``out_fd``;
    with debug logging, ("log", message) for every log record of this module as it comes."""
    import pickle
    import threading
    from multiprocessing.connection import Connection

    receive, send = Connection(in_fd, writable=False), Connection(out_fd, readable=False)
    fn, args, debug, threads = pickle.loads(receive.recv_bytes())
    receive.close()
    lock = threading.Lock()  # HiGHS may log from its worker threads

    def put(item: tuple[str, Any]) -> None:
        with lock:
            send.send(item)

    if debug:
        class Forward(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                put(("log", record.getMessage()))

        root = logging.getLogger("oasis_opt")
        root.addHandler(Forward())
        root.setLevel(logging.DEBUG)
        root.propagate = False
    if threads is not None:
        set_highs_threads(threads)
    try:
        put(("result", fn(*args)))
    except Exception as e:  # noqa: BLE001 - re-raised in the parent
        put(("error", e))
    send.close()


def check_limits(backend: str, is_lp: bool, **limits: float | None) -> None:
    """Deterministic limits: right type and range, and one the back end has (else ValueError)."""
    lowest = {"node_limit": 0, "solution_limit": 1, "iteration_limit": 0}
    for name, v in limits.items():
        if v is None:
            continue
        if name == "deterministic_time":
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                    or not v > 0:
                raise ValueError(f"{name}: must be a finite number > 0, got {v!r}")
            if backend != "cpsat":
                raise ValueError(f"{name}: a CP-SAT limit; HiGHS takes node_limit, "
                                 "solution_limit (MILPs) or iteration_limit (LPs)")
            continue
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lowest[name]:
            raise ValueError(f"{name}: must be an integer >= {lowest[name]}, got {v!r}")
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
    frac = ints & (np.abs(x - np.round(x)) > 1e-9)
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


def _finish(lp: LinearProgram, backend: str, outcome: str, *, limit: str | None = None,
            x: np.ndarray | None = None, bound: float | None = None,
            initial: np.ndarray | None = None, duals: np.ndarray | None = None,
            build_s: float = 0.0, solve_s: float = 0.0, info: dict | None = None
            ) -> SolverResult:
    """The ``SolverResult`` of a back end's outcome ("optimal", "limit", "infeasible",
    "unbounded" or "error"), its incumbent ``x`` (None: none) and proven ``bound`` (None: none).

    The incumbent is the better of ``x`` and the ``initial`` point (also "initial" when the
    solver returns that very point); its objective is recomputed.
    """
    incumbent = None if x is None else "solver"
    if outcome in ("optimal", "limit") and initial is not None:
        better = (lambda a, b: a > b) if lp.sense == "max" else (lambda a, b: a < b)
        if x is None or better(float(lp.c @ initial), float(lp.c @ x)) \
                or np.array_equal(x, initial):
            x, incumbent = initial, "initial"
    if outcome not in ("optimal", "limit"):
        x, bound, duals, incumbent = None, None, None, None
    objective = None if x is None else float(lp.c @ x)
    if bound is not None and not math.isfinite(bound):
        bound = None
    bound = ordered_bound(lp.sense, objective, bound, what=f"{backend} bound")
    if outcome == "limit":
        assert limit is not None, "a solve stopped by a limit names it"
        status = LIMIT_STATUS[limit]
    else:
        status = outcome
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


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else deadline - time.perf_counter()


def _solve_empty(lp: LinearProgram, backend: str) -> SolverResult:
    """No columns: feasible iff every row admits activity 0."""
    ok = bool(np.all(lp.row_lower <= 1e-9) and np.all(lp.row_upper >= -1e-9))
    info = {"objective_error": 0.0} if backend == "cpsat" else {}
    if not ok:
        return _finish(lp, backend, "infeasible", info=info)
    return _finish(lp, backend, "optimal", x=np.zeros(0), bound=0.0, duals=np.zeros(lp.n_rows),
                   info=info)


# ---------------------------------------------------------------------------------------------
# HiGHS
# ---------------------------------------------------------------------------------------------
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
    """The ``highspy.HighsLp`` of ``lp`` (CSC arrays; no per-element Python work)."""
    highspy = quiet_highspy()

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


def _solve_highs(lp: LinearProgram, *, deadline: float | None, relax: bool, seed: int,
                 mip_gap: float, initial: np.ndarray | None, node_limit: int | None,
                 solution_limit: int | None, iteration_limit: int | None,
                 start: bool = True, options: dict[str, Any] | None = None) -> SolverResult:
    """HiGHS; ``initial`` is handed to it as a start solution when ``start`` (and kept as the
    fallback incumbent either way)."""
    highspy = quiet_highspy()

    MS = highspy.HighsModelStatus
    is_mip = (not relax) and bool(np.any(lp.integer))
    t0 = time.perf_counter()
    h = new_highs(random_seed=int(seed), mip_rel_gap=float(mip_gap),
                  primal_feasibility_tolerance=FEAS_TOL,
                  mip_feasibility_tolerance=FEAS_TOL if is_mip else None,
                  mip_max_nodes=node_limit, mip_max_improving_sols=solution_limit,
                  simplex_iteration_limit=iteration_limit, **(options or {}))
    h.passModel(to_highs_lp(lp, relax=relax))
    if initial is not None and start:
        sol = highspy.HighsSolution()
        sol.col_value = initial.tolist()
        sol.value_valid = True
        h.setSolution(sol)
    build_s = time.perf_counter() - t0

    def run() -> Any:  # HiGHS gets the time left (its clock starts with each run)
        left = _left(deadline)
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
        return _finish(lp, "highs", "limit", limit="time", initial=initial, build_s=build_s,
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
        if abs(float(lp.c @ x) - reported) > 1e-6 * max(1.0, abs(reported)):
            # HiGHS 1.16 hands back the start solution as its own when presolve solves the MIP
            # outright (its objective and bound are right, its column values are not): again,
            # without the start
            return _solve_highs(lp, deadline=deadline, relax=relax, seed=seed, mip_gap=mip_gap,
                                initial=initial, node_limit=node_limit,
                                solution_limit=solution_limit, iteration_limit=iteration_limit,
                                start=False, options=options)
    if is_mip:
        bound = float(info.mip_dual_bound)  # +-inf (dropped) until HiGHS has proven one
    elif outcome == "optimal" and x is not None:
        bound = float(lp.c @ x)
        duals = np.array(h.getSolution().row_dual, dtype=float)
    # HiGHS reports kOptimal once its gap is within mip_rel_gap (or its 1e-6 absolute gap)
    return _finish(lp, "highs", outcome, limit=stopped.get(status), x=x, bound=bound,
                   initial=initial, duals=duals, build_s=build_s, solve_s=solve_s,
                   info={"highs_status": h.modelStatusToString(status)})


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


def _solve_cpsat(lp: LinearProgram, *, deadline: float | None, seed: int, mip_gap: float,
                 initial: np.ndarray | None, deterministic_time: float | None) -> SolverResult:
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
        return _finish(lp, "cpsat", "infeasible", info={"reason": "empty variable domain"})
    box = np.maximum(np.abs(lo_b), np.abs(up_b)).astype(float)

    def out_of_time(n: int) -> bool:  # the hand-off is Python work per element: check often
        return deadline is not None and n % 1024 == 0 and time.perf_counter() >= deadline

    def handoff_timed_out() -> SolverResult:
        return _finish(lp, "cpsat", "limit", limit="time", initial=initial,
                       build_s=time.perf_counter() - t0,
                       info={"cpsat_status": "not run: time limit spent on the hand-off"})

    model = cp_model.CpModel()
    xs = []
    for j, (lo, up) in enumerate(zip(lo_b.tolist(), up_b.tolist())):
        if out_of_time(j):
            return handoff_timed_out()
        xs.append(model.new_int_var(lo, up, f"x{j}"))
    A = sp.csr_matrix(lp.A)
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
            if lo > 1e-9 or up < -1e-9:
                return _finish(lp, "cpsat", "infeasible", build_s=time.perf_counter() - t0,
                               info={"reason": f"row {r}"})
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
        for j, v in enumerate(initial.astype(np.int64).tolist()):
            model.add_hint(xs[j], v)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    # full LP relaxation in the single worker: without it CP-SAT proves little on packing MILPs
    # (Fig. 5 instances: no proof in 30 s vs ~1-3 s with it)
    solver.parameters.linearization_level = 2
    solver.parameters.random_seed = int(seed)
    solver.parameters.relative_gap_limit = float(mip_gap)
    if deterministic_time is not None:
        solver.parameters.max_deterministic_time = float(deterministic_time)
    if log.isEnabledFor(logging.DEBUG):
        solver.parameters.log_search_progress = True
        solver.parameters.log_to_stdout = False
        solver.log_callback = lambda line: log.debug("CP-SAT: %s", line.rstrip())
    build_s = time.perf_counter() - t0
    left = _left(deadline)
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
    return _finish(lp, "cpsat", outcome, limit=limit, x=x, bound=bound, initial=initial,
                   build_s=build_s, solve_s=solve_s, info=info)
