"""Exact offline optimum of problem (1) (policies ``offline`` and ``offline-cpsat``) and its LP bound.

Both policies build the reduced MILP of :mod:`.milp_arrays` and hand it to the solver layer:
HiGHS (default) or OR-Tools CP-SAT (one worker, integer scaling documented in :mod:`.solver`;
the objective error it may cause is reported as ``stats["objective_error"]``). The empty
schedule (every job rejected) is always feasible and is given to the solver as its starting
point: when a limit stops the solver before it found anything better, that empty schedule is
returned (``stats["incumbent"]`` False, ``objective`` None), so a limit always leaves a valid
schedule. Instances with accelerator types are solved by the typed model of
:mod:`.milp_arrays`.

**Time limit.** ``solve(instance, time_limit=S)`` counts everything from the call: building the
MILP arrays (checked before every job and resource; the sparse matrix, one step that cannot be
interrupted, is not assembled with less time left than the build took so far), the hand-off to
the solver and the solve, which gets what is left. With a time limit, a MILP of at least
``CHILD_MIN_COLUMNS`` columns is built, solved and decoded in a child process
(:func:`.solver.run_in_child`) that is killed if it overshoots by more than 1 s + 5 %: neither
the matrix assembly nor HiGHS's presolve checks the clock on big models (the presolve ran 216 s
of a 60 s limit on the 100-job MILP below), and this process never holds the big model. Smaller
ones are solved in this process, where HiGHS and CP-SAT keep their limits and starting a process
(about a second) would eat a short limit; option ``isolate`` (True / False) overrides the
choice. Stopped while building, or killed, the result is the empty starting schedule with no
bound. ``benchmarks/bench_offline.py --part limit`` measures the overshoot.

**Size.** The MILP has about jobs x slots x servers columns (1.54 M at 100 paper-sim jobs,
T = 300, H = K = 50). Before building it, :func:`.milp_arrays.milp_size` counts it and
:func:`memory_estimate` turns that into bytes; above ``memory_budget_gb`` (default: half this
machine's memory) the policy refuses with :class:`ModelTooLarge`, pointing to
``offline-colgen``, instead of running into swap.

``stats``: ``status`` (the solver layer's vocabulary, :mod:`.solver`: "optimal", "time_limit",
"node_limit" ...), ``proven_optimal``, ``incumbent`` (True: the returned schedule is the
solver's; False: a limit stopped the solver before it found anything, and the returned schedule
is the empty starting point), ``objective`` (the incumbent's utility; None without one),
``bound`` (a proven bound on the optimum, or None), ``gap`` (relative, or None), ``build_s``
(arrays), ``handoff_s`` (solver model construction), ``solve_s``, ``time_limit``, model size,
``memory_estimate_gb``, ``excluded`` jobs (cannot run at all, with the reason) and ``message``.
"""
from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import Any

import numpy as np

from ..model import Instance
from ..model.schedule import Schedule, ScheduleBuilder
from ..model.validate import assert_valid
from ..sizing import physical_memory
from .milp_arrays import DeadlineReached, MilpModel, build_milp, decode, milp_size
from .solver import (MIP_GAP, STOPPED, SolverLimits, SolverResult, check_limits, run_in_child,
                     solve_program)

# Peak resident memory (bytes) = base + per nonzero x the nonzeros ``milp_size`` counts, per
# back end, covering every peak measured on paper-sim instances, T = 300 (this process plus its
# solver child, 60-120 s time limits; ``benchmarks/bench_offline.py --part sizes``, two runs).
# HiGHS: 1.8-1.9 / 3.0-3.4 GB at 1.4 / 2.9 M nonzeros (10 / 20 jobs, the 3.4 GB run reached
# branch-and-bound: about 1.2 kB per nonzero), 2.4-4.7 / 5.1-6.3 GB at 7.1 / 13.4 M (50 / 100
# jobs, stopped in presolve, so a full solve may need more); CP-SAT: 0.9 / 1.6-1.8 GB at
# 1.4 / 2.9 M.
MEMORY_MODEL = {"highs": {"base": 0.3e9, "nonzero": 1200.0},
                "cpsat": {"base": 0.3e9, "nonzero": 700.0}}
# share of this machine's physical memory a MILP may use by default
MEMORY_SHARE = 0.5
# with a time limit, MILPs from this many columns are solved in a killable child process
CHILD_MIN_COLUMNS = 100_000


class ModelTooLarge(ValueError):
    """The MILP would not fit the memory budget; the message names the sizes and the way out."""


def default_memory_budget_gb() -> float | None:
    """``MEMORY_SHARE`` of this machine's physical memory in GB (1e9 bytes); None where the
    system does not say (then no MILP is refused for its size)."""
    memory = physical_memory()
    return None if memory is None else MEMORY_SHARE * memory / 1e9


def memory_estimate(size: dict[str, int], backend: str) -> float:
    """Estimated peak memory in bytes of building and solving a MILP of ``size`` (its
    ``nonzeros``, as ``milp_size`` counts them) with ``backend`` (``MEMORY_MODEL``)."""
    m = MEMORY_MODEL[backend]
    return m["base"] + m["nonzero"] * size["nonzeros"]


def _message(res: SolverResult, backend: str) -> str:
    if res.status == "optimal":
        return ("proven optimal" if backend == "highs" else
                "proven optimal for the integer-scaled objective (within objective_error)")
    stopped = res.status.replace("_", " ")
    bound = "no proven bound" if res.bound is None else f"bound {res.bound:.6g}"
    if res.status in STOPPED and res.incumbent == "solver":
        return (f"{stopped}: best incumbent {res.objective:.6g}, NOT proven optimal ({bound}"
                + ("" if res.gap is None else f", gap {res.gap:.3%}") + ")")
    if res.status in STOPPED:
        return (f"{stopped}: the solver found no incumbent; returning the empty starting "
                f"schedule (every job rejected), {bound}")
    if res.status == "infeasible":
        return "the solver reports the model infeasible; returning the empty schedule"
    return f"solver {res.status} ({res.info}); returning the empty schedule"


class OfflinePolicy:
    """Exact offline optimum of (1) by the linearised MILP (section 2.1).

    Options: ``backend`` ("highs" or "cpsat"), ``seed``, ``mip_gap`` (relative gap counted as
    optimal; default 1e-6), deterministic limits ``node_limit`` and ``solution_limit`` (HiGHS)
    or ``deterministic_time`` (CP-SAT) as in :func:`.solver.solve_program`, and
    ``memory_budget_gb`` (default: half this machine's memory) and ``isolate`` (solve in a child
    process under a time limit: None = from ``CHILD_MIN_COLUMNS`` columns; see the module doc).
    ``solve(instance, time_limit=None)`` returns the optimal schedule, or under a limit the best
    incumbent (or the empty schedule), marked ``proven_optimal=False`` in ``stats``.
    """

    def __init__(self, backend: str = "highs", seed: int = 0, mip_gap: float = MIP_GAP,
                 node_limit: int | None = None, solution_limit: int | None = None,
                 deterministic_time: float | None = None,
                 memory_budget_gb: float | None = None, isolate: bool | None = None):
        if backend not in ("highs", "cpsat"):
            raise ValueError(f"backend: unknown {backend!r} (known: highs, cpsat)")
        if memory_budget_gb is not None and not (isinstance(memory_budget_gb, (int, float))
                                                 and memory_budget_gb > 0):
            raise ValueError(f"memory_budget_gb: must be a number > 0, got {memory_budget_gb!r}")
        if isolate not in (None, True, False):
            raise ValueError(f"isolate: expected true, false or null, got {isolate!r}")
        self.isolate = isolate
        self.backend = backend
        self.seed = seed
        self.limits = SolverLimits(node_limit=node_limit, solution_limit=solution_limit,
                                   deterministic_time=deterministic_time, mip_gap=mip_gap)
        check_limits(backend, False, self.limits)
        self.memory_budget_gb = (default_memory_budget_gb() if memory_budget_gb is None
                                 else float(memory_budget_gb))
        self.name = "offline" if backend == "highs" else "offline-cpsat"

    def build(self, instance: Instance, deadline: float | None) -> MilpModel:
        """The program this policy solves (a subclass may add rows): ``build_milp``'s."""
        return build_milp(instance, deadline=deadline)

    def initial_point(self, model: MilpModel, instance: Instance) -> np.ndarray:
        """The solver's starting incumbent: the empty schedule (every job rejected)."""
        return np.zeros(model.lp.n_cols)

    def program_size(self, instance: Instance) -> dict[str, int]:
        """The size of ``build``'s program without building it (``milp_size``)."""
        return milp_size(instance)

    def check_size(self, instance: Instance) -> dict[str, Any]:
        """The MILP's size (``milp_size``) and estimated memory; ``ModelTooLarge`` above the
        budget."""
        size = self.program_size(instance)
        need = memory_estimate(size, self.backend) / 1e9
        if self.memory_budget_gb is not None and need > self.memory_budget_gb:
            raise ModelTooLarge(
                f"memory_budget_gb: the MILP of this instance ({instance.I} jobs, T = "
                f"{instance.horizon}, {instance.H} + {instance.K} servers) has {size['columns']:,}"
                f" columns and up to {size['nonzeros']:,} nonzeros, an estimated {need:.3g} GB "
                f"with {self.backend}, above the memory budget of {self.memory_budget_gb:.3g} GB;"
                " use the policy offline-colgen (column generation: a schedule and a bound) for "
                "instances this size, or raise memory_budget_gb")
        return {**size, "memory_estimate_gb": need}

    def solve(self, instance: Instance, *, time_limit: float | None = None,
              progress: bool = False) -> Schedule:
        start = time.perf_counter()
        if time_limit is not None and not time_limit > 0:
            raise ValueError(f"time_limit: must be > 0 seconds, got {time_limit}")
        size = self.check_size(instance)
        isolate = (self.isolate if self.isolate is not None
                   else size["columns"] >= CHILD_MIN_COLUMNS)
        if time_limit is None or not isolate or os.name != "posix":
            deadline = None if time_limit is None else start + time_limit
            schedule = self._build_and_solve(instance, size, deadline, time_limit)
        else:
            # build, solve and decode in a child that is killed at the limit: neither the build
            # (its matrix assembly) nor HiGHS's presolve can be stopped from inside in time
            out = run_in_child(self._build_and_solve_until, instance, size,
                               time.time() + time_limit, time_limit, time_limit=time_limit)
            elapsed = time.perf_counter() - start
            if out.kind == "done":
                schedule = out.value
            elif out.kind == "killed":
                return self._unbuilt(instance, time_limit, size, elapsed,
                                     f"building or solving the MILP was killed {out.late_s:.1f}"
                                     " s after the time limit")
            else:
                return self._unbuilt(instance, time_limit, size, elapsed,
                                     f"the process building and solving the MILP died (exit "
                                     f"code {out.exit_code}; -9: killed, e.g. out of memory)",
                                     status="error")
        assert_valid(instance, schedule)  # a solver tolerance must never leak an invalid schedule
        return schedule

    def _build_and_solve_until(self, instance: Instance, size: dict[str, Any],
                               deadline_wall: float, time_limit: float) -> Schedule:
        """``_build_and_solve`` until the wall-clock ``deadline_wall`` (run in the child)."""
        return self._build_and_solve(instance, size,
                                     time.perf_counter() + deadline_wall - time.time(), time_limit)

    def _build_and_solve(self, instance: Instance, size: dict[str, Any],
                         deadline: float | None, time_limit: float | None) -> Schedule:
        """Build the MILP, solve it until ``deadline`` (a ``time.perf_counter()`` value, or
        None; ``time_limit``: the caller's, for the stats) and decode the solution (not yet
        validated)."""
        start = time.perf_counter()
        try:
            model = self.build(instance, deadline)
        except DeadlineReached as e:
            return self._unbuilt(instance, time_limit, size, time.perf_counter() - start, str(e))
        res = solve_program(model.lp, replace(self.limits, deadline=deadline),
                            backend=self.backend, seed=self.seed,
                            initial=self.initial_point(model, instance))
        shift = model.constant
        found = res.incumbent == "solver" or res.status == "optimal"
        stats = {
            "backend": self.backend, "status": res.status,
            "proven_optimal": bool(res.proven_optimal), "incumbent": found,
            "objective": res.objective + shift if found and res.objective is not None else None,
            "bound": None if res.bound is None else res.bound + shift,
            "gap": res.gap, "build_s": model.build_s, "handoff_s": res.build_s,
            "solve_s": res.solve_s, "time_limit": time_limit,
            **model.size(), "memory_estimate_gb": size["memory_estimate_gb"],
            "excluded": {instance.jobs[i].id: why for i, why in model.excluded.items()},
            "message": _message(res, self.backend),
        }
        stats.update({k: v for k, v in res.info.items() if isinstance(v, (int, float, str))})
        x = res.x if res.x is not None else np.zeros(model.lp.n_cols)
        return decode(model, instance, x, self.name, stats)

    def _unbuilt(self, instance: Instance, time_limit: float | None, size: dict[str, Any],
                 build_s: float, why: str, status: str = "time_limit") -> Schedule:
        """The time limit passed while building the MILP: the empty schedule (zero-work jobs,
        which complete on arrival, admitted as in every schedule of the model); ``size``:
        ``check_size``'s (counting the MILP again would run further past the limit)."""
        builder = ScheduleBuilder(instance)
        for i in np.flatnonzero(instance.work == 0):
            builder.admit(int(i))
        schedule = builder.build(self.name, {})
        schedule.stats.update({
            "backend": self.backend, "status": status, "proven_optimal": False,
            "incumbent": False, "objective": None,
            "bound": None, "gap": None, "build_s": build_s, "handoff_s": 0.0, "solve_s": 0.0,
            "time_limit": time_limit, "columns": size["columns"],
            "memory_estimate_gb": size["memory_estimate_gb"],
            "message": f"{why}: the solver was not run; returning the empty starting schedule "
                       "(every job rejected), no proven bound"})
        return schedule


def CpsatPolicy(seed: int = 0, mip_gap: float = MIP_GAP, deterministic_time: float | None = None,
                memory_budget_gb: float | None = None,
                isolate: bool | None = None) -> OfflinePolicy:
    """The ``offline-cpsat`` policy: the same MILP solved by CP-SAT (one worker, seeded)."""
    return OfflinePolicy(backend="cpsat", seed=seed, mip_gap=mip_gap,
                         deterministic_time=deterministic_time, memory_budget_gb=memory_budget_gb,
                         isolate=isolate)


def lp_bound(instance: Instance, *, time_limit: float | None = None) -> float:
    """An upper bound on the optimum of (1): the LP relaxation's value (plus zero-work jobs)."""
    model = build_milp(instance)
    res = solve_program(model.lp, SolverLimits(time_limit=time_limit), backend="highs", relax=True)
    if res.status != "optimal" or res.objective is None:
        raise RuntimeError(f"LP relaxation not solved: {res.status} {res.info}")
    return float(res.objective) + model.constant
