"""The closed loop: an online policy deciding each slot on the progress the executor measured.

``run_closed_loop(instance, policy, slot_seconds=S) -> ClosedLoopRun`` runs the simulator's slot
loop (``sim.core.SlotLoop``) with the executor (``runtime.executor.Executor``) inside it, slot by
slot:

1. the loop hands arrivals to the policy and asks it for slot t's containers, as in a simulation;
2. the executor runs slot t for real, **time-boxed** (``Executor(time_box=True)``): no iteration
   starts after the slot's end t S on the wall-clock grid, so a job slower than its plan does
   fewer mini-batches than planned and the rest is carried to its next slot;
3. the **measured** progress is credited (``SlotLoop(measure=...)``): after the slot a job has
   W_i (B_i - b) / B_i work units left, b its mini-batches done and B_i = E_i N_i M_i its total
   (0, and completion in slot t, exactly when the executor completed it);
4. a job that fell behind (it got less than the progress model promised, by more than
   ``BEHIND_TOL`` work units) is **re-planned**: the policy's ``replan`` (OASiS: the remaining
   work re-priced at the current prices over slots t+1..T, ``OasisPolicy.replan``; the
   baselines decide slot by slot and re-decide from the measured remaining work at their next
   ``allocate``, so their ``replan`` does nothing).

The loop ends after slot T, or earlier once every job has arrived and is decided and every
admitted one has completed. What the loop decided is an ordinary ``Schedule`` (``schedule``,
which the validator accepts: a job that fell behind holds more worker-slots than W_i, and its
completion is the last slot with workers); the executor's ``ExecutionReport`` (``report``)
compares the real run with that schedule and carries ``meta.closed_loop`` = ``{"replans",
"behind"}``: every re-plan (``OasisPolicy.replan``'s record; for a baseline ``{"job", "slot",
"remaining"}``) and every job-slot that fell behind (``{"slot", "job", "model", "measured"}``
work units).

The speed model is refit online from the slots that ran (``costmodel.profile.
online_predictions``): the report's ``online_predicted_s`` per job-slot and its
``contention-online`` error are what that refit predicted before each slot. The re-plans use the
measured progress itself, which already holds whatever the machine's load did to the slot.

The open loop (``runtime.executor.execute``, ``oasis-opt execute --open-loop``) runs a schedule
fixed in advance, every planned mini-batch, however late.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from ..model.schedule import Schedule
from .executor import ContainerPool, Executor
from .plan import JobPlan, container_demand, job_plan, plan_execution

BEHIND_TOL = 1e-6  # work units: a job whose measured progress is this far below the model's


@dataclass
class ClosedLoopRun:
    """What a closed loop did: ``schedule`` (the slots the policy decided on the measured
    progress), ``report`` (the executor's ``ExecutionReport`` beside that schedule),
    ``replans`` and ``behind`` (module docstring), ``planned`` (the policy's open-loop
    schedule on the progress model, computed first to size the containers)."""

    schedule: Schedule
    report: Any
    planned: Schedule
    replans: list[dict] = field(default_factory=list)
    behind: list[dict] = field(default_factory=list)


# measure(t, rows, model) -> {job: work units left after slot t} for every job in ``model``
# (the jobs with rows in t; 0: it completed in t)
SlotMeasure = Callable[[int, list, dict], Mapping[int, float]]


class ClosedLoop:
    """The loop of ``run_closed_loop`` on any source of measured progress: ``measure(t, rows,
    model)`` runs slot t's ``rows`` (``model``: ``{job: work units}`` the progress model gives
    each job with rows) and returns the work units each of them has left (0: completed).
    ``run()`` steps slots 1..T (or until every job is settled, module docstring) and returns
    the schedule decided; ``replans`` and ``behind`` fill as it goes."""

    def __init__(self, instance, policy, measure: SlotMeasure):
        from ..sim.core import SlotLoop

        self.instance, self.policy, self._measure = instance, policy, measure
        self.loop = SlotLoop(instance, policy, measure=self._credit)
        self.replans: list[dict] = []
        self.behind: list[dict] = []

    def _credit(self, t: int, rows: list, model: dict) -> dict[int, float]:
        left = self._measure(t, rows, dict(model))
        credit, behind = measured_credit(self.loop.state, t, model, left)
        self.behind.extend(behind)
        return credit

    def run(self) -> Schedule:
        """Step the slots (module docstring) and return the schedule the policy decided."""
        instance, loop, state = self.instance, self.loop, self.loop.state
        last_arrival = int(instance.arrival.max()) if instance.I else 0
        while loop.t < instance.horizon:
            loop.step()
            t = loop.t
            self.replans.extend(replan_behind(self.policy, state, t,
                                              [b for b in self.behind if b["slot"] == t]))
            settled = state.decided & (~state.admitted | (state.completion >= 0)
                                       | state.cancelled)
            if t >= last_arrival and bool(np.all(settled)):
                break
        return loop.schedule()


def measured_credit(state, t: int, model: Mapping[int, float], left: Mapping[int, float]
                    ) -> tuple[dict[int, float], list[dict]]:
    """The work units to credit slot ``t``'s jobs from what was measured: ``left`` ``{job: work
    units left after the slot}`` (0: it completed), ``model`` ``{job: work units}`` the progress
    model promised, ``state`` the loop's state before the credit. A job is credited all it had
    left when it completed, else what its remaining work fell by (never below 0). Returns the
    credit and the job-slots that fell behind (``{"slot", "job", "model", "measured"}``: got
    less than the model by more than ``BEHIND_TOL``). ``ValueError`` on a job missing from
    ``left`` or a negative or non-finite value."""
    credit, behind = {}, []
    for j, gross in model.items():
        if j not in left:
            raise ValueError(f"measure: no measured progress for job {j} in slot {t}")
        before = float(state.remaining[j])
        rest = float(left[j])
        if not (np.isfinite(rest) and rest >= 0):
            raise ValueError(f"measure: job {j} has {rest!r} work units left after slot {t}")
        got = before if rest == 0 else max(0.0, before - rest)
        credit[j] = got
        if got < gross - BEHIND_TOL:
            behind.append({"slot": t, "job": int(j), "model": float(gross),
                           "measured": float(got)})
    return credit, behind


def replan_behind(policy, state, t: int, behind: list[dict]) -> list[dict]:
    """After slot ``t`` settled: the policy's ``replan`` for every job of ``behind`` (slot
    ``t``'s records of ``measured_credit``) that has not completed, in order. Returns the
    re-plans (``OasisPolicy.replan``'s record; for a policy that decides slot by slot
    ``{"job", "slot", "remaining"}``)."""
    out = []
    for rec in behind:
        j = rec["job"]
        if state.completion[j] >= 0:
            continue
        remaining = float(state.remaining[j])
        done = policy.replan(j, t, remaining, state)
        out.append(done if done is not None else {"job": j, "slot": t, "remaining": remaining})
    return out


def executor_left(executor: Executor, instance, plans: dict[int, JobPlan], jobs) -> dict[int, float]:
    """After a slot ran on ``executor``: the work units each of ``jobs`` has left, W_i (B_i - b)
    / B_i (b its mini-batches done, B_i its total; 0 once the executor completed it).
    ``plans``: the jobs' ``JobPlan`` (filled for jobs without)."""
    left = {}
    for j in jobs:
        plan = plans.get(j)
        if plan is None:
            plan = plans[j] = job_plan(instance, j)
        snap = executor.snapshot(j)
        left[j] = (0.0 if snap["completion_slot"] is not None else
                   plan.work * (plan.total_minibatches - snap["done"]) / plan.total_minibatches)
    return left


def executor_measure(executor: Executor, instance, plans: dict[int, JobPlan]) -> SlotMeasure:
    """``ClosedLoop``'s ``measure`` on a started, time-boxed ``executor``: run the slot, then
    ``executor_left`` of the slot's jobs."""

    def measure(t: int, rows: list, model: dict) -> dict[int, float]:
        executor.run_slot(t, rows)
        return executor_left(executor, instance, plans, model)

    return measure


def run_closed_loop(instance, policy, *, slot_seconds: float, address: str | None = None,
                    pool: ContainerPool | None = None,
                    on_iteration: Callable | None = None, on_slot: Callable | None = None,
                    on_phase: Callable[[str, float], None] | None = None,
                    max_restarts: int = 3) -> ClosedLoopRun:
    """Run ``policy`` (a fresh ``OnlinePolicy``) on ``instance`` in a closed loop with the
    executor (module docstring). ``slot_seconds``, ``address``, ``pool``, ``on_iteration``,
    ``on_slot``, ``on_phase``, ``max_restarts``: as ``Executor``'s. Before anything starts, the
    policy's open-loop schedule (a simulation on a copy of the policy) must pass the executor's
    checks (``plan_execution``: the validator, a known task for every job it runs); it sizes the
    containers warmed before slot 1. ``ExecutionRefused``/``ExecutionError`` as ``execute``."""
    from ..sim.core import simulate

    planned = simulate(instance, copy.deepcopy(policy))
    plans = plan_execution(instance, planned)
    ps = planned.allocations.ps_per_job_slot(instance.I, instance.horizon)
    ps_counts = {j: sorted(set(ps[j][ps[j] > 0].tolist())) for j in plans}
    with Executor(instance, slot_seconds=slot_seconds, address=address, plans=plans,
                  on_iteration=on_iteration, on_slot=on_slot, max_restarts=max_restarts,
                  pool=pool, on_phase=on_phase, time_box=True) as ex:
        ex.warm(container_demand(planned, len(instance.servers)), ps_counts)
        closed = ClosedLoop(instance, policy, executor_measure(ex, instance, dict(plans)))
        schedule = closed.run()
        report = ex.report(schedule)
    report.doc.setdefault("meta", {})["closed_loop"] = {"replans": closed.replans,
                                                        "behind": closed.behind}
    return ClosedLoopRun(schedule, report, planned, closed.replans, closed.behind)
