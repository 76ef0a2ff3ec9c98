"""Offline optimum and bounds of problem (1).

The public API (each name imports its module on first use, so ``import oasis_opt.offline``
loads neither Pyomo nor OR-Tools; the HiGHS paths need only the core install):

* the exact MILP of section 2.1: ``build_milp(instance) -> MilpModel`` (arrays: ``model.lp`` is
  a ``LinearProgram``), ``decode(model, instance, x, policy, stats) -> Schedule``, and the
  policies that build, solve and decode it in one call: ``OfflinePolicy(backend="highs" |
  "cpsat").solve(instance, time_limit=None) -> Schedule`` (``CpsatPolicy`` = the CP-SAT one,
  needs the ``cpsat`` extra);
* its LP relaxation: ``lp_bound(instance) -> float``, an upper bound on the optimum;
* column generation on (14)-(18): ``bracket(instance, ColgenOptions(...), time_limit=...) ->
  Bracket`` (an integer schedule and ``lower <= OPT <= upper``), policy ``ColgenPolicy``;
  ``ColgenOptions`` (how it runs: seed policy, deterministic limits, time shares, smoothing,
  gap, ruin-and-recreate rounds, LP solver, seed) and ``LnsOptions`` (one ruin-and-recreate
  search), frozen and checked when built;
* placement-aware progress (``"progress": "placement"``): ``TopoOfflinePolicy`` (policy
  ``offline-topo``, the best full-speed schedule: a lower bound on OPT) and
  ``placement_upper_bound(instance) -> dict`` (the topology-free MILP or LP: an upper bound);
* the solver layer: ``LinearProgram`` (c, A, row and column bounds, integrality),
  ``solve_program(lp, SolverLimits(...), backend="highs" | "cpsat", ...) -> SolverResult``
  (``SolverLimits``: time limit, deadline, node / solution / iteration limits, deterministic
  time, MIP gap; frozen and checked when built), ``Outcome`` (what a back end saw, for
  ``lp.finish``), ``MIP_GAP``;
* the readable Pyomo model (the reference the array model is tested against; needs the
  ``pyomo`` extra): ``build_pyomo``, ``solve_pyomo``.

Modules: :mod:`.solver` (the solver layer's entry point: :mod:`.lp` the program, result and status
vocabulary, :mod:`.highs` HiGHS via highspy arrays with LP duals, :mod:`.cpsat` CP-SAT with
documented integer scaling, :mod:`.child` a solve killed when it overshoots its limit), :mod:`.milp_arrays` / :mod:`.milp_pyomo` (the MILP as arrays / as Pyomo), :mod:`.exact`
(policies ``offline``, ``offline-cpsat`` and ``lp_bound``), :mod:`.colgen` (column generation
and policy ``offline-colgen``), :mod:`.topo` (policy ``offline-topo`` and the placement-aware
bracket).

Example (HiGHS, core install)::

    from oasis_opt.offline import OfflinePolicy, build_milp, lp_bound
    model = build_milp(instance)              # model.lp.n_cols columns, model.size()
    schedule = OfflinePolicy().solve(instance)
    assert schedule.total_utility <= lp_bound(instance) + 1e-6
"""
from typing import TYPE_CHECKING

from .._lazy import lazy_exports

_EXPORTS = {
    "MilpModel": ".milp_arrays", "build_milp": ".milp_arrays", "decode": ".milp_arrays",
    "OfflinePolicy": ".exact", "CpsatPolicy": ".exact", "lp_bound": ".exact",
    "Bracket": ".colgen", "bracket": ".colgen", "ColgenPolicy": ".colgen",
    "ColgenOptions": ".colgen", "LnsOptions": ".colgen",
    "LinearProgram": ".solver", "SolverResult": ".solver", "solve_program": ".solver",
    "SolverLimits": ".solver", "Outcome": ".solver", "MIP_GAP": ".solver",
    "TopoOfflinePolicy": ".topo", "placement_upper_bound": ".topo",
    "build_pyomo": ".milp_pyomo", "solve_pyomo": ".milp_pyomo",
}
__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:
    from .colgen import Bracket, ColgenOptions, ColgenPolicy, LnsOptions, bracket
    from .exact import CpsatPolicy, OfflinePolicy, lp_bound
    from .milp_arrays import MilpModel, build_milp, decode
    from .milp_pyomo import build_pyomo, solve_pyomo
    from .solver import (MIP_GAP, LinearProgram, Outcome, SolverLimits, SolverResult,
                         solve_program)
    from .topo import TopoOfflinePolicy, placement_upper_bound

__all__ = list(_EXPORTS)
