"""Exact offline optimum of problem (1) (policies ``offline`` and ``offline-cpsat``) and its LP bound.

Both policies build the reduced MILP of :mod:`.milp_arrays` and hand it to the solver layer:
HiGHS (default) or OR-Tools CP-SAT (one worker, integer scaling documented in :mod:`.solver`;
the objective error it may cause is reported as ``stats["objective_error"]``). The empty
schedule (every job rejected) is always feasible and is given to the solver as its first
incumbent, so a time limit always leaves a valid schedule. Instances with accelerator types are
solved by the typed model of :mod:`.milp_arrays`.

``stats``: ``status``, ``objective``, ``bound`` (best bound on the optimum), ``gap`` (relative),
``proven_optimal``, ``build_s`` (arrays), ``handoff_s`` (solver model construction),
``solve_s``, model size, ``excluded`` jobs (cannot run at all, with the reason) and ``message``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..model import Instance
from ..model.schedule import Schedule
from ..model.validate import assert_valid
from .milp_arrays import build_milp, decode
from .solver import MIP_GAP, SolverResult, solve_program


def _message(res: SolverResult) -> str:
    if res.status == "optimal":
        return "proven optimal" if res.proven_optimal else "optimal for the scaled model"
    if res.status == "time_limit":
        return ("time limit reached: best incumbent, NOT proven optimal "
                f"(bound {res.bound}, gap {res.gap})")
    if res.status == "infeasible":
        return "the solver reports the model infeasible; returning the empty schedule"
    return f"solver {res.status} ({res.info}); returning the empty schedule"


class OfflinePolicy:
    """Exact offline optimum of (1) by the linearised MILP (section 2.1).

    Options: ``backend`` ("highs" or "cpsat"), ``seed``, ``mip_gap`` (relative gap counted as
    optimal; default 1e-6). ``solve(instance, time_limit=None)`` returns the optimal schedule,
    or with a time limit the best incumbent, marked ``proven_optimal=False`` in ``stats``.
    """

    def __init__(self, backend: str = "highs", seed: int = 0, mip_gap: float = MIP_GAP):
        if backend not in ("highs", "cpsat"):
            raise ValueError(f"backend: unknown {backend!r} (known: highs, cpsat)")
        self.backend = backend
        self.seed = seed
        self.mip_gap = mip_gap
        self.name = "offline" if backend == "highs" else "offline-cpsat"

    def solve(self, instance: Instance, *, time_limit: float | None = None, progress: bool = False,
              **_ignored: Any) -> Schedule:
        model = build_milp(instance)
        res = solve_program(model.lp, backend=self.backend, time_limit=time_limit,
                            seed=self.seed, mip_gap=self.mip_gap,
                            initial=np.zeros(model.lp.n_cols))
        x = res.x if res.x is not None else np.zeros(model.lp.n_cols)
        shift = model.constant
        stats = {
            "backend": self.backend, "status": res.status,
            "proven_optimal": bool(res.proven_optimal),
            "objective": None if res.objective is None else res.objective + shift,
            "bound": None if res.bound is None else res.bound + shift,
            "gap": res.gap, "build_s": model.build_s, "handoff_s": res.build_s,
            "solve_s": res.solve_s, "time_limit": time_limit, **model.size(),
            "excluded": {instance.jobs[i].id: why for i, why in model.excluded.items()},
            "message": _message(res),
        }
        stats.update({k: v for k, v in res.info.items() if isinstance(v, (int, float, str))})
        schedule = decode(model, instance, x, self.name, stats)
        assert_valid(instance, schedule)  # a solver tolerance must never leak an invalid schedule
        return schedule


def CpsatPolicy(seed: int = 0, mip_gap: float = MIP_GAP) -> OfflinePolicy:
    """The ``offline-cpsat`` policy: the same MILP solved by CP-SAT (one worker, seeded)."""
    return OfflinePolicy(backend="cpsat", seed=seed, mip_gap=mip_gap)


def lp_bound(instance: Instance, *, time_limit: float | None = None) -> float:
    """An upper bound on the optimum of (1): the LP relaxation's value (plus zero-work jobs)."""
    model = build_milp(instance)
    res = solve_program(model.lp, backend="highs", time_limit=time_limit, relax=True)
    if res.status != "optimal" or res.objective is None:
        raise RuntimeError(f"LP relaxation not solved: {res.status} {res.info}")
    return float(res.objective) + model.constant
