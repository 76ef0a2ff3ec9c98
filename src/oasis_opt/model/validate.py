"""The validator: constraints (2)-(10) of the paper, in work units, plus utility accounting.

Work units are worker-slots without accelerator types; with types a worker on type g does the
job's s_ig units per slot (``model.instance``), a job's workers may sit only on types it can use,
and in one slot on one type unless it allows spanning types.

Every policy's schedule must pass ``validate(instance, schedule)``. Each violation names its rule
and, where they apply, the job, slot, server and resource.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from .numerics import DONE_EPS, NOISE_RTOL, UTILITY_RTOL, VALUE_EPS, capacity_slack
from .registry import PLACEMENT_WORK_REMAINING, resolve
from .preemption import COUNTERS, cpu_servers, parse_events, record_of, replay
from .schedule import PS, WORKER, Schedule, derive_outcome, work_done

if TYPE_CHECKING:
    from .instance import Instance

RULES = {
    "workload": "(2) a completed job gets at least W_i = ceil(epochs*chunks*chunk_time*unit) "
                "work units: the sum over its workers of their server type's speed (one per "
                "worker-slot without types; placement-aware worker-slots when "
                "instance.progress == 'placement')",
    "max-workers": "(3) at most N_i workers per slot",
    "capacity": "(4)/(5) per server, slot and resource: used <= capacity",
    "ps-bandwidth": "(6) PSs * B_i >= workers * b_i",
    "ps-le-workers": "(7) PSs <= workers",
    "ps-without-workers": "no PS in a slot without workers",
    "pool": "workers only on worker servers, PSs only on PS servers",
    "type": "a job's workers only on servers of an accelerator type it can use (its types)",
    "mixed-types": "a job's workers in one slot on one accelerator type, unless it allows "
                   "span_types",
    "arrival": "(9)/(10) nothing before arrival",
    "horizon": "slots lie in 1..T",
    "count": "allocation counts are positive integers",
    "rejected": "nothing for a rejected job",
    "completion": "(8) completion = last slot with workers (null when not completed)",
    "utility": "utility = f(completion - arrival), 0 when not completed",
    "total": "total utility = sum of job utilities",
    "preemption-event": "preemption events (stats.preemption) name admitted jobs, slots in 1..T "
                        "and known kinds; preempt, suspend, degrade and resize stop a job that ran "
                        "in the "
                        "slot before; promote only a degraded job, degrade only one that is not",
    "restart": "no progress during a restart: after a stop, the first slots with workers are "
               "credited only the part after the restart (costmodel.preemption)",
    "lost-work": "work since the last checkpoint is lost at every stop (a suspend saves it) "
                 "and must be redone; the "
                 "per-job counters in stats.preemption.jobs match the events",
    "degraded": "a degraded job's workers only on CPU-mode servers until it is promoted",
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
    checks: list[tuple[str, np.ndarray, Callable[..., str]]] = [
        ("count", a.count <= 0, lambda j, t, s, r, c: f"count {c} is not positive"),
        ("horizon", (a.slot < 1) | (a.slot > T), lambda j, t, s, r, c: f"slot {t} outside 1..{T}"),
        ("arrival", a.slot < arr,
         lambda j, t, s, r, c: f"allocation in slot {t} before arrival {instance.arrival[j]}"),
        ("rejected", ~adm[a.job] if len(a) else np.zeros(0, bool),
         lambda j, t, s, r, c: "allocation for a job that was not admitted"),
        ("pool", (a.role == WORKER) != (a.server < H),
         lambda j, t, s, r, c: f"{('worker', 'ps')[r]} placed on a "
                               f"{'worker' if s < H else 'PS'} server"),
    ]
    if instance.typed and len(a):  # workers on a type the job cannot use
        on_worker = (a.role == WORKER) & (a.server >= 0) & (a.server < H)
        server_type = np.where(on_worker, instance.worker_type[np.where(on_worker, a.server, 0)],
                               -1)
        usable = instance.usable[a.job, np.maximum(server_type, 0)]
        types = instance.types
        checks.append(("type", on_worker & ~usable,
                       lambda j, t, s, r, c: f"worker on a {types[instance.worker_type[s]]} "
                                             "server, a type the job cannot use"))
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
    for j, t in zip(*np.nonzero(z * B[:, None] < y * b[:, None] * (1 - NOISE_RTOL))):
        add("ps-bandwidth", f"{z[j, t]} PSs x B_i={B[j]:g} < {y[j, t]} workers x b_i={b[j]:g}", j, t)
    for j, t in zip(*np.nonzero((z > y) & (y > 0))):
        add("ps-le-workers", f"{z[j, t]} PSs > {y[j, t]} workers", j, t)
    for j, t in zip(*np.nonzero((z > 0) & (y == 0))):
        add("ps-without-workers", f"{z[j, t]} PSs with no workers", j, t)

    if instance.typed:  # one type per job and slot unless the job may span types
        m = (a.role == WORKER) & (a.server >= 0) & (a.server < H) & (a.count > 0)
        triples = np.unique(np.stack([a.job[m], a.slot[m], instance.worker_type[a.server[m]]]),
                            axis=1)  # sorted (job, slot, type), each once
        pairs, first, kinds = np.unique(triples[:2], axis=1, return_index=True,
                                        return_counts=True)
        for (j, t), f, k in zip(pairs.T.tolist(), first.tolist(), kinds.tolist()):
            if k > 1 and not instance.span_types[j]:
                names = ", ".join(str(instance.types[g]) for g in triples[2, f:f + k].tolist())
                add("mixed-types", f"workers on types {names} in one slot (the job does not "
                    "allow span_types)", j, t)

    # ---- capacities (4), (5) -----------------------------------------------------------
    ok = (a.slot >= 1) & (a.slot <= T)
    demand = instance.row_demand(a.job[ok], a.server[ok], a.role[ok]) * a.count[ok, None]
    used = np.zeros((T + 1, len(sid), instance.R))
    np.add.at(used, (a.slot[ok], a.server[ok]), demand)
    over = used > instance.capacity[None, :, :] + capacity_slack(instance.capacity)
    for t, s, r in zip(*np.nonzero(over)):
        add("capacity", f"uses {used[t, s, r]:g} of {instance.capacity[s, r]:g}", slot=t,
            server=s, resource=instance.resources[r])

    # ---- preemption events and their costs (model.preemption) ----------------------------
    ledger = None
    record = record_of(schedule.stats)
    events: list = []
    if record is not None:
        ledger, events = _check_preemption(instance, schedule, record, add)

    # ---- workload (2), completion (8), utility accounting -------------------------------
    completion, utility = derive_outcome(instance, a, events)
    got = work_done(instance, a)
    short, unit = got < instance.work, "work units" if instance.typed else "worker-slots"
    if instance.progress == "placement":  # placement-aware worker-slots (costmodel.placement)
        got, remaining = resolve(PLACEMENT_WORK_REMAINING)(instance, a)
        short, unit = remaining > DONE_EPS, "placement-aware worker-slots"
    if ledger is not None and events:  # credited units net of lost work and restarts
        got = ledger.progress
        short = got < instance.work - DONE_EPS
    for j in range(I):
        claimed = schedule.completion[j]
        if claimed is not None and short[j]:
            rule = "workload"
            if ledger is not None and events:
                need = instance.work[j] - DONE_EPS
                if got[j] + ledger.withheld[j] >= need:
                    rule = "restart"
                elif got[j] + ledger.withheld[j] + ledger.counts["lost_work"][j] >= need:
                    rule = "lost-work"
            add(rule, f"completed with {got[j]:.12g} {unit} < "
                f"{instance.jobs[j].workload:g} needed", j)
        elif claimed != completion[j]:
            add("completion", f"claims completion {claimed}, schedule gives {completion[j]}", j)
        if claimed is not None and not schedule.admitted[j]:
            add("rejected", "a rejected job cannot complete", j)
        expect = instance.utility_of(j, claimed) if claimed is not None and 1 <= claimed <= T else 0.0
        if not math.isclose(schedule.utility[j], expect, rel_tol=UTILITY_RTOL, abs_tol=NOISE_RTOL):
            add("utility", f"claims utility {schedule.utility[j]!r}, f gives {expect!r}", j)
    if not math.isclose(schedule.total_utility, math.fsum(schedule.utility), rel_tol=UTILITY_RTOL,
                        abs_tol=VALUE_EPS):
        out.append(Violation("total", f"total {schedule.total_utility!r} != sum of job utilities "
                             f"{math.fsum(schedule.utility)!r}"))
    return ValidationReport(tuple(out))


def _check_preemption(instance: Instance, schedule: Schedule, record: Any,
                      add: Callable[..., None]) -> tuple[Any, list]:
    """The rules preemption-event, lost-work (counters) and degraded; returns the replayed
    ledger and the well-formed events."""
    a = schedule.allocations
    events, problems = parse_events(instance, record)
    for p in problems:
        add("preemption-event", p)
    ran = a.workers_per_job_slot(instance.I, instance.horizon) > 0
    good = []
    for e in events:
        if not 1 <= e.slot <= instance.horizon:
            add("preemption-event", f"{e.kind} in slot {e.slot} outside 1..{instance.horizon}",
                e.job)
        elif not schedule.admitted[e.job]:
            add("preemption-event", f"{e.kind} of a job that was not admitted", e.job, e.slot)
        elif e.kind != "promote" and (e.slot < 2 or not ran[e.job, e.slot - 1]):
            add("preemption-event", f"{e.kind} of a job that did not run in the slot before",
                e.job, e.slot)
        else:
            good.append(e)
    ledger, refused = replay(instance, a, good)
    for e, why in refused:
        add("preemption-event", why, e.job, e.slot)
    claimed = record.get("jobs") if isinstance(record, dict) else None
    for c in COUNTERS:
        got = ledger.counts[c]
        have = claimed.get(c) if isinstance(claimed, dict) else None
        if not (isinstance(have, list) and len(have) == instance.I):
            add("lost-work", f"stats.preemption.jobs.{c}: expected a list of {instance.I} numbers")
            continue
        for j in range(instance.I):
            if not (isinstance(have[j], (int, float)) and
                    math.isclose(have[j], got[j], rel_tol=UTILITY_RTOL, abs_tol=VALUE_EPS)):
                add("lost-work", f"claims {c} = {have[j]!r}, the events give {got[j]:.12g}", j)
    # degraded intervals: from a degrade event's slot until a promote event's slot
    cpu = cpu_servers(instance)
    since: dict[int, int] = {}
    spans: list[tuple[int, int, int]] = []  # (job, first slot, last slot) degraded
    for e in good:
        if e.kind == "degrade" and e.job not in since:
            since[e.job] = e.slot
        elif e.kind == "promote" and e.job in since:
            spans.append((e.job, since.pop(e.job), e.slot - 1))
    spans += [(j, s, instance.horizon) for j, s in since.items()]
    w = (a.role == WORKER) & (a.server >= 0) & (a.server < instance.H)
    for j, first, last in spans:
        bad = w & (a.job == j) & (a.slot >= first) & (a.slot <= last)
        for n in np.flatnonzero(bad):
            if not cpu[a.server[n]]:
                add("degraded", "degraded job's worker on a server that is not CPU-mode", j,
                    int(a.slot[n]), int(a.server[n]))
    return ledger, good
