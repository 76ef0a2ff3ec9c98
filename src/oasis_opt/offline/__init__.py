"""Offline optimum and bounds of problem (1).

* :mod:`.solver`: the array solver layer (``LinearProgram``, ``solve_program``: HiGHS via
  highspy arrays, OR-Tools CP-SAT with documented integer scaling, LP duals);
* :mod:`.milp_arrays` / :mod:`.milp_pyomo`: the linearised MILP of section 2.1 as arrays (what
  the solvers use) and as a readable Pyomo model (the reference the tests cross-check);
* :mod:`.exact`: policies ``offline`` (HiGHS) and ``offline-cpsat``, and ``lp_bound``;
* :mod:`.colgen`: column generation on (14)-(18), ``bracket(instance, time_limit=...)`` and the
  policy ``offline-colgen``.

Submodules are imported on use (Pyomo and OR-Tools are heavy imports).
"""
