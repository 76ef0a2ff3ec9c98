"""The linearised MILP of problem (1) (reference section 2.1) as a readable Pyomo model.

This is the reference the array model of :mod:`.milp_arrays` is tested against: the same
constraints written one by one, without its size reductions (only the arrival rule (9)/(10)
restricts the index sets). Pyomo's hand-off to HiGHS is slow for big models, so the solvers use
the array model; see ``benchmarks/bench_offline.py`` for the measured ratio.

    max  sum_{i,t} f_i(t - a_i) u[i,t]                                              (1)
    s.t. sum_{t,h} y[i,t,h] >= work_i x[i]                                           (2)
         sum_h y[i,t,h] <= N_i x[i]                                                  (3)
         sum_i w_i^r y[i,t,h] <= c_h^r,   sum_i s_i^r z[i,t,k] <= c_k^r                (4)(5)
         b_i sum_h y[i,t,h] <= B_i sum_k z[i,t,k]                                    (6)
         sum_k z[i,t,k] <= sum_h y[i,t,h]                                            (7)
         sum_t u[i,t] = x[i];  sum_h y[i,t,h] <= N_i sum_{t'>=t} u[i,t'];
         u[i,t] <= sum_h y[i,t,h]                                          (8), linearised
         y, z defined for t >= a_i only                                              (9)(10)
         x, u binary; y, z non-negative integers                                   (11)-(13)

With accelerator types (``model.instance``) a worker on server h does s_{i g(h)} work units a
slot and demands w_{i g(h)}: (2) reads ``sum_{t,h} s_{i g(h)} y[i,t,h] >= work_i x[i]``, (4)
uses w_{i g(h)}, ``y[i,t,h] = 0`` on a type the job cannot use, and a job that may not span
types has binaries ``v[i,t,g]`` with ``sum_g v[i,t,g] <= 1`` and ``y[i,t,h] <= N_i v[i,t,g(h)]``.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from .._extras import require
from ..model import Instance
from .lp import MIP_GAP

require("pyomo.environ", extra="pyomo", feature="the Pyomo model of the MILP")
import pyomo.environ as pyo  # noqa: E402


def build_pyomo(instance: Instance) -> pyo.ConcreteModel:
    """The MILP as a ``pyo.ConcreteModel`` (variables x, u, y, z; constraints named by equation)."""
    T = instance.horizon
    jobs = range(instance.I)
    H = range(instance.H)
    K = range(instance.K)
    a = instance.arrival.tolist()
    w, s = instance.type_demand, instance.ps_demand  # w[i, g]: a worker's demand on type g
    g_of = instance.worker_type.tolist()
    speed = instance.type_speed
    cw, cp = instance.worker_capacity, instance.ps_capacity
    N, work = instance.chunks.tolist(), instance.work.tolist()
    b, B = instance.worker_bw.tolist(), instance.ps_bw.tolist()
    R = range(instance.R)

    m = pyo.ConcreteModel(name="oasis-milp")
    m.JT = pyo.Set(dimen=2, initialize=[(i, t) for i in jobs for t in range(a[i], T + 1)])
    m.x = pyo.Var(jobs, within=pyo.Binary)
    m.u = pyo.Var(m.JT, within=pyo.Binary)
    m.y = pyo.Var(m.JT, H, within=pyo.NonNegativeIntegers)
    m.z = pyo.Var(m.JT, K, within=pyo.NonNegativeIntegers)

    def workers(i: int, t: int) -> Any:
        return sum(m.y[i, t, h] for h in H)

    def pss(i: int, t: int) -> Any:
        return sum(m.z[i, t, k] for k in K)

    m.utility = pyo.Objective(
        expr=sum(float(instance.utility_table[i, t]) * m.u[i, t] for i, t in m.JT),
        sense=pyo.maximize)
    m.workload = pyo.Constraint(  # (2), in work units
        jobs, rule=lambda m, i: sum(int(speed[i, g_of[h]]) * m.y[i, t, h]
                                    for t in range(a[i], T + 1) for h in H) >= work[i] * m.x[i])
    m.max_workers = pyo.Constraint(m.JT, rule=lambda m, i, t: workers(i, t) <= N[i] * m.x[i])  # (3)

    def cap_rule(var: Any, demand: Callable[[int, int], np.ndarray], cap: np.ndarray
                 ) -> Callable[..., Any]:
        def rule(m: Any, t: int, srv: int, r: int) -> Any:
            terms = [demand(i, srv)[r] * var[i, t, srv] for i in jobs
                     if a[i] <= t and demand(i, srv)[r] > 0]
            return sum(terms) <= cap[srv, r] if terms else pyo.Constraint.Skip
        return rule

    m.worker_capacity = pyo.Constraint(range(1, T + 1), H, R,
                                       rule=cap_rule(m.y, lambda i, h: w[i, g_of[h]], cw))  # (4)
    m.ps_capacity = pyo.Constraint(range(1, T + 1), K, R,
                                   rule=cap_rule(m.z, lambda i, k: s[i], cp))  # (5)
    if instance.typed:  # a job's workers only on types it can use, on one type unless it spans
        G = range(len(instance.types))
        m.usable_type = pyo.Constraint(
            m.JT, H, rule=lambda m, i, t, h: (m.y[i, t, h] == 0 if speed[i, g_of[h]] == 0
                                              else pyo.Constraint.Skip))
        m.v = pyo.Var(m.JT, G, within=pyo.Binary)
        one = [i for i in jobs if not instance.span_types[i]]
        m.one_type = pyo.Constraint(
            m.JT, rule=lambda m, i, t: (sum(m.v[i, t, g] for g in G) <= 1 if i in one
                                        else pyo.Constraint.Skip))
        m.on_its_type = pyo.Constraint(
            m.JT, H, rule=lambda m, i, t, h: (m.y[i, t, h] <= N[i] * m.v[i, t, g_of[h]]
                                              if i in one else pyo.Constraint.Skip))
    m.ps_bandwidth = pyo.Constraint(m.JT, rule=lambda m, i, t: b[i] * workers(i, t)
                                    <= B[i] * pss(i, t))  # (6)
    m.ps_le_workers = pyo.Constraint(m.JT, rule=lambda m, i, t: pss(i, t) <= workers(i, t))  # (7)
    m.one_completion = pyo.Constraint(
        jobs, rule=lambda m, i: sum(m.u[i, t] for t in range(a[i], T + 1)) == m.x[i])
    m.none_after_completion = pyo.Constraint(
        m.JT, rule=lambda m, i, t: workers(i, t) <= N[i] * sum(m.u[i, q] for q in range(t, T + 1)))
    m.worker_at_completion = pyo.Constraint(m.JT, rule=lambda m, i, t: m.u[i, t] <= workers(i, t))
    return m


def solve_pyomo(instance: Instance, *, time_limit: float | None = None, relax: bool = False,
                mip_gap: float = MIP_GAP) -> dict:
    """Build and solve the Pyomo model with HiGHS (Pyomo's ``contrib.solver`` interface).

    Returns ``status`` (Pyomo's termination condition), ``objective`` (incumbent or None),
    ``bound``, ``build_s`` (Pyomo model construction), ``handoff_s`` (Pyomo passing the model to
    HiGHS), ``highs_s`` (HiGHS's own time), ``model`` (with the incumbent loaded, if any).
    ``relax=True`` solves the LP relaxation (integrality dropped).
    """
    from pyomo.contrib.solver.common.factory import SolverFactory

    from .solver import quiet_highspy

    quiet_highspy()  # HiGHS's banner off stdout (Pyomo makes the Highs objects here)
    t0 = time.perf_counter()
    m = build_pyomo(instance)
    if len(m.JT) == 0:  # no job can run: a constant objective HiGHS is never asked about
        return {"status": "convergenceCriteriaSatisfied", "objective": 0.0, "bound": 0.0,
                "build_s": time.perf_counter() - t0, "handoff_s": 0.0, "highs_s": 0.0, "model": m}
    if relax:
        pyo.TransformationFactory("core.relax_integer_vars").apply_to(m)
    build_s = time.perf_counter() - t0
    opt = SolverFactory("highs")
    res = opt.solve(m, raise_exception_on_nonoptimal_result=False, load_solutions=False,
                    time_limit=time_limit, rel_gap=mip_gap)
    try:
        res.solution_loader.load_vars()
    except Exception:  # noqa: BLE001 - no incumbent to load (infeasible / nothing found in time)
        pass
    timer = res.timing_info
    total = float(timer.wall_time)
    highs_s = float(getattr(timer, "highs_time", 0.0) or 0.0)
    return {"status": str(res.termination_condition).split(".")[-1],
            "objective": None if res.incumbent_objective is None else float(res.incumbent_objective),
            "bound": None if res.objective_bound is None else float(res.objective_bound),
            "build_s": build_s, "handoff_s": max(total - highs_s, 0.0), "highs_s": highs_s,
            "model": m}
