"""The validator: constraints (2)-(10) of the paper, in worker-slots, plus utility accounting.

Every policy's schedule must pass ``validate(instance, schedule)``. Each violation names its rule
and, where they apply, the job, slot, server and resource.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .numerics import DONE_EPS, UTILITY_RTOL, capacity_slack
from .schedule import PS, WORKER, Schedule, derive_outcome

if TYPE_CHECKING:
    from .instance import Instance

RULES = {
    "workload": "(2) a completed job gets at least epochs*chunks*chunk_time worker-slots "
                "(placement-aware ones when instance.progress == 'placement')",
    "max-workers": "(3) at most N_i workers per slot",
    "capacity": "(4)/(5) per server, slot and resource: used <= capacity",
    "ps-bandwidth": "(6) PSs * B_i >= workers * b_i",
    "ps-le-workers": "(7) PSs <= workers",
    "ps-without-workers": "no PS in a slot without workers",
    "pool": "workers only on worker servers, PSs only on PS servers",
    "arrival": "(9)/(10) nothing before arrival",
    "horizon": "slots lie in 1..T",
    "count": "allocation counts are positive integers",
    "rejected": "nothing for a rejected job",
    "completion": "(8) completion = last slot with workers (null when not completed)",
    "utility": "utility = f(completion - arrival), 0 when not completed",
    "total": "total utility = sum of job utilities",
}


@dataclass(frozen=True)
class Violation:
    rule: str
    message: str
    job: str | None = None
    slot: int | None = None
    server: str | None = None
    resource: str | None = None

    def __str__(self) -> str:
        where = ", ".join(f"{k}={v}" for k, v in (("job", self.job), ("slot", self.slot),
                          ("server", self.server), ("resource", self.resource)) if v is not None)
        return f"[{self.rule}] {self.message}" + (f" ({where})" if where else "")


@dataclass(frozen=True)
class ValidationReport:
    violations: tuple[Violation, ...]

    @property
    def ok(self) -> bool:
        return not self.violations

    def rules(self) -> set[str]:
        return {v.rule for v in self.violations}

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        if self.ok:
            return "valid"
        return f"{len(self.violations)} violation(s):\n" + "\n".join(f"  {v}" for v in self.violations)


class InvalidSchedule(AssertionError):
    def __init__(self, report: ValidationReport):
        super().__init__(str(report))
        self.report = report


def assert_valid(instance: Instance, schedule: Schedule) -> None:
    """Raise ``InvalidSchedule`` listing every violation."""
    report = validate(instance, schedule)
    if not report.ok:
        raise InvalidSchedule(report)


def validate(instance: Instance, schedule: Schedule) -> ValidationReport:
    """Check ``schedule`` against ``instance``; return every violation found."""
    out: list[Violation] = []
    jid = [j.id for j in instance.jobs]
    sid = [s.id for s in instance.servers]
    a = schedule.allocations
    T, H, I = instance.horizon, instance.H, instance.I

    def add(rule: str, msg: str, job: int | None = None, slot: int | None = None,
            server: int | None = None, resource: str | None = None) -> None:
        out.append(Violation(rule, msg, None if job is None else jid[job],
                             None if slot is None else int(slot),
                             None if server is None else sid[server], resource))

    if len(schedule.admitted) != I or len(schedule.completion) != I or len(schedule.utility) != I:
        out.append(Violation("count", f"schedule describes {len(schedule.admitted)} jobs, "
                             f"instance has {I}"))
        return ValidationReport(tuple(out))

    # ---- per-allocation rules (vectorised: schedules of trace replays have 10^5+ rows) ------
    arr = instance.arrival[a.job] if len(a) else np.zeros(0, dtype=np.int64)
    adm = np.asarray(schedule.admitted, dtype=bool)
    checks = (
        ("count", a.count <= 0, lambda j, t, s, r, c: f"count {c} is not positive"),
        ("horizon", (a.slot < 1) | (a.slot > T), lambda j, t, s, r, c: f"slot {t} outside 1..{T}"),
        ("arrival", a.slot < arr,
         lambda j, t, s, r, c: f"allocation in slot {t} before arrival {instance.arrival[j]}"),
        ("rejected", ~adm[a.job] if len(a) else np.zeros(0, bool),
         lambda j, t, s, r, c: "allocation for a job that was not admitted"),
        ("pool", (a.role == WORKER) != (a.server < H),
         lambda j, t, s, r, c: f"{('worker', 'ps')[r]} placed on a "
                               f"{'worker' if s < H else 'PS'} server"),
    )
    for rule, bad, msg in checks:
        for n in np.flatnonzero(bad):
            j, t, s, r, c = (int(a.job[n]), int(a.slot[n]), int(a.server[n]), int(a.role[n]),
                             int(a.count[n]))
            add(rule, msg(j, t, s, r, c), j, t, s)

    # ---- per job and slot: (3), (6), (7) -----------------------------------------------
    y = a.workers_per_job_slot(I, T)
    z = a.ps_per_job_slot(I, T)
    b, B, N = instance.worker_bw, instance.ps_bw, instance.chunks
    for j, t in zip(*np.nonzero(y > N[:, None])):
        add("max-workers", f"{y[j, t]} workers > N_i = {N[j]}", j, t)
    for j, t in zip(*np.nonzero(z * B[:, None] < y * b[:, None] * (1 - 1e-12))):
        add("ps-bandwidth", f"{z[j, t]} PSs x B_i={B[j]:g} < {y[j, t]} workers x b_i={b[j]:g}", j, t)
    for j, t in zip(*np.nonzero((z > y) & (y > 0))):
        add("ps-le-workers", f"{z[j, t]} PSs > {y[j, t]} workers", j, t)
    for j, t in zip(*np.nonzero((z > 0) & (y == 0))):
        add("ps-without-workers", f"{z[j, t]} PSs with no workers", j, t)

    # ---- capacities (4), (5) -----------------------------------------------------------
    ok = (a.slot >= 1) & (a.slot <= T)
    demand = np.where(a.role[ok, None] == WORKER, instance.worker_demand[a.job[ok]],
                      instance.ps_demand[a.job[ok]]) * a.count[ok, None]
    used = np.zeros((T + 1, len(sid), instance.R))
    np.add.at(used, (a.slot[ok], a.server[ok]), demand)
    over = used > instance.capacity[None, :, :] + capacity_slack(instance.capacity)
    for t, s, r in zip(*np.nonzero(over)):
        add("capacity", f"uses {used[t, s, r]:g} of {instance.capacity[s, r]:g}", slot=t,
            server=s, resource=instance.resources[r])

    # ---- workload (2), completion (8), utility accounting -------------------------------
    completion, utility = derive_outcome(instance, a)
    got = y.sum(axis=1)
    short, unit = got < instance.work, "worker-slots"
    if instance.progress == "placement":  # placement-aware worker-slots (costmodel.placement)
        from ..costmodel.placement import placement_work_remaining

        got, remaining = placement_work_remaining(instance, a)
        short, unit = remaining > DONE_EPS, "placement-aware worker-slots"
    for j in range(I):
        claimed = schedule.completion[j]
        if claimed is not None and short[j]:
            add("workload", f"completed with {got[j]:.12g} {unit} < "
                f"{instance.jobs[j].workload:g} needed", j)
        elif claimed != completion[j]:
            add("completion", f"claims completion {claimed}, schedule gives {completion[j]}", j)
        if claimed is not None and not schedule.admitted[j]:
            add("rejected", "a rejected job cannot complete", j)
        expect = instance.utility_of(j, claimed) if claimed is not None and 1 <= claimed <= T else 0.0
        if not math.isclose(schedule.utility[j], expect, rel_tol=UTILITY_RTOL, abs_tol=1e-12):
            add("utility", f"claims utility {schedule.utility[j]!r}, f gives {expect!r}", j)
    if not math.isclose(schedule.total_utility, math.fsum(schedule.utility), rel_tol=UTILITY_RTOL,
                        abs_tol=1e-9):
        out.append(Violation("total", f"total {schedule.total_utility!r} != sum of job utilities "
                             f"{math.fsum(schedule.utility)!r}"))
    return ValidationReport(tuple(out))
