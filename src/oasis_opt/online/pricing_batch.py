"""OASiS under several pricings at once: one arrival sequence, B price floors, in lockstep.

The floor search (``online.estimate``) runs OASiS on each history instance once per floor L of its
grid. Those runs see the same jobs in the same order and differ only in the constants of eq. (22),
so they are a batch: ``solve_pricings`` decides each arriving job for every member (one per
pricing) in one pass of the dual subroutine (Alg. 2, ``dual_numpy``) whose arrays carry a member
axis:

* the members' committed g / v, free capacities and prices live in shared (T+1, B, H, R) arrays
  (each member an ``OasisPolicy`` whose arrays are views of its column, so Alg. 1's admission
  step, ``OasisPolicy._commit``, is the member's own);
* the cost curves C_t(k) of every (slot, member) are built by one ``_dp.slot_costs`` call (its
  rows are per slot and member, so they are the floats each member's own call gives), slots
  untouched by every member sharing one row as in the sequential run;
* the DP over remaining work F_t(D) steps all members at once (``dual_numpy.dp_step`` on (B, D)
  tables) until every member's completion scan (``_dp.CompletionScan``, one per member with its
  own pruning bound) has stopped; a member whose scan stopped earlier is computed on but its
  later rows are never read.

Decisions diverge between floors (each member admits what its prices admit and keeps its own
usage); what the batch shares is the per-slot numpy work, whose Python overhead dominates at the
sizes of a calibration. Each member's decisions, plans and payoffs are those of its own sequential
run, float for float (``tests/test_online_pricing_batch.py`` holds them against
``OasisPolicy(pricing=...).solve``). Each member's schedule is then produced by the simulator,
which replays the member's decisions and committed plans (checking them against its own capacity
account) exactly as it runs a sequential ``OasisPolicy``.

Numpy backend only (the JAX and reference backends run per member).
"""
from __future__ import annotations

import math
import time
from typing import Any, Sequence

import numpy as np

from ..model import Instance
from ..model.numerics import payoff_positive
from ..model.schedule import Schedule
from ._dp import (CompletionScan, JobSpec, cost_lower_bound, finite_prefix, job_spec,
                  scan_result, slot_costs, tie_costs)
from .dual_inputs import DualJob, Hints
from .dual_numpy import FIRST_BLOCK, MAX_BLOCK, dp_step
from .oasis import STATE_ARRAYS, OasisPolicy

# (D, k) table entries a batched DP step builds at once: beyond about a megabyte the table
# leaves the cache and a batch step is no faster than its members' steps one by one
TABLE = 1 << 17


class _BatchMember(OasisPolicy):
    """OASiS under one pricing of a batch: the batch takes its decisions (``solve_pricings``),
    the simulator then replays them: ``start`` keeps the state the batch built and
    ``on_arrival`` returns the decision already taken."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.decided: dict[int, bool] | None = None

    def start(self, instance: Instance, state: Any) -> None:
        if self.decided is None:
            super().start(instance, state)
            self.decided = {}

    def extend(self, instance: Instance, state: Any) -> bool:
        """A batch member replays the batch's decisions on a fixed instance: no extension."""
        return False

    def on_arrival(self, job: int, t: int, state: Any) -> bool:
        assert self.decided is not None
        return self.decided[job]

    def record(self, job: int, admit: bool) -> None:
        """The batch's decision on ``job``, replayed by ``on_arrival``."""
        assert self.decided is not None, "record() before start()"
        self.decided[job] = admit


def _share(members: list[_BatchMember], T: int) -> dict[str, np.ndarray]:
    """Move each member's state arrays into one (T+1, B, n, R) array per name (resource-major
    in memory, as ``oasis._every_slot``) and rebind the members to their columns: the values are
    copied, not recomputed."""
    out = {}
    for name in STATE_ARRAYS:  # the member state kept in shared arrays
        first = getattr(members[0], name)
        n, R = first.shape[1], first.shape[2]
        shared = np.empty((T + 1, len(members), R, n)).transpose(0, 1, 3, 2)
        for m, member in enumerate(members):
            shared[:, m] = getattr(member, name)
            setattr(member, name, shared[:, m])
        out[name] = shared
    return out


def _decide(spec: JobSpec, members: list[_BatchMember], arrays: dict[str, np.ndarray]
            ) -> list[tuple[CompletionScan, list[np.ndarray]]]:
    """Alg. 2 for one job under every member's prices: ``dual_numpy.best_schedule_numpy`` with a
    member axis. Returns each member's finished completion scan and the DP's choices per slot
    from the arrival to its completion slot. A member leaves the DP's tables once its scan has
    stopped (the batch does the slots each member's own run does, not the longest run's)."""
    a, T, target = spec.arrival, spec.horizon, spec.target
    B = len(members)
    n_slots = T - a + 1
    prices = tuple(arrays[name] for name in ("worker_price", "ps_price", "worker_free",
                                             "ps_free"))
    F = np.full((B, target + 1), math.inf)
    F[:, 0] = 0.0
    most = np.maximum.accumulate(spec.delta)
    scans = [CompletionScan(spec, cost_lower_bound(spec, m.worker_min[a:].min(axis=0),
                                                   m.ps_min[a:].min(axis=0))) for m in members]
    running = np.arange(B)  # members whose scan has not stopped: the rows of F
    steps: list[tuple[np.ndarray, np.ndarray]] = []  # (running, choices (len(running), D))
    reach = np.zeros(B, dtype=np.int64)  # per member, as the sequential run keeps it
    s, block = 0, FIRST_BLOCK
    while len(running):
        e = min(n_slots, s + block)
        C = _member_costs(spec, a + s, a + e, prices, members)  # (slots, B, options)
        flat = C.reshape(-1, C.shape[-1])
        Ct = tie_costs(flat).reshape(C.shape)
        kf = finite_prefix(flat).reshape(C.shape[:2])
        for c, ct, kf_t in zip(C, Ct, kf):
            t = a + len(steps)
            reach[running] = np.minimum(target, reach[running] + most[kf_t[running] - 1])
            rows, k = int(reach[running].max()) + 1, int(kf_t[running].max())
            # a member whose slot holds nothing keeps F (0 + F_{t-1}) and option 0, as
            # ``best_schedule_numpy`` does; the others step together
            step = np.flatnonzero(kf_t[running] > 1)
            Fn = F.copy()
            ch = np.zeros((len(running), rows), dtype=np.int64)
            # members per step: a gathered (non-unit delta) table is slower than the loop over
            # k on (members, D) vectors; a strided one pays while it stays in the cache
            loop = None if spec.unit_delta else True
            group = len(step) if loop else max(1, TABLE // (rows * k))
            for lo in range(0, len(step), max(1, group)):
                sel = step[lo:lo + group]
                at = running[sel]
                Fn[sel, :rows], ch[sel] = dp_step(F[sel], c[at, :k], ct[at, :k], rows,
                                                  spec.delta, spec.unit_delta, loop)
            steps.append((running, ch))
            cost = Fn[:, target].tolist()
            keep = [not scans[m].update(t, cost[n]) for n, m in enumerate(running.tolist())]
            if not all(keep):
                running, Fn = running[keep], Fn[keep]
            F = Fn
            if not len(running):
                break
        s, block = e, min(2 * block, MAX_BLOCK)
    out = []
    for m, scan in enumerate(scans):
        choices = [] if scan.stop is None else [
            ch[np.searchsorted(run, m)] for run, ch in steps[:scan.stop - a + 1]]
        out.append((scan, choices))
    return out


def _member_costs(spec: JobSpec, lo: int, hi: int, prices: tuple[np.ndarray, ...],
                  members: list[_BatchMember]) -> np.ndarray:
    """C (hi - lo, B, options): ``_dp.slot_costs`` of slots lo..hi-1 for every member, one
    ``slot_costs`` call. As ``_dp.range_costs`` does with one member's slot classes, each member
    builds a row only for the slots its own commits touched and one for all its untouched slots
    (they hold its initial state), so a batch builds as many rows as its members' own runs do
    (the union of the members' touched slots would be far more). Rows depend on their (slot,
    member) data only: the same floats."""
    S, B = hi - lo, len(members)
    touched = np.stack([m.slot_class[lo:hi] for m in members]) != 0  # (B, S)
    untouched = ~touched
    first = untouched.argmax(axis=1)  # each member's representative untouched slot
    has = untouched.any(axis=1)
    need = touched.copy()
    need[np.flatnonzero(has), first[has]] = True
    member, slot = np.nonzero(need)
    C = np.empty((S, B, spec.options))
    C[slot, member] = slot_costs(spec, *(x[lo + slot, member] for x in prices))
    um, us = np.nonzero(untouched)
    C[us, um] = C[first[um], um]
    return C


def solve_pricings(instance: Instance, pricings: Sequence[Any], *,
                   granularity: str = "worker-slot") -> list[Schedule]:
    """OASiS (numpy backend) on ``instance`` under each of ``pricings`` (anything
    ``OasisPolicy(pricing=...)`` takes): the schedules ``OasisPolicy(pricing=p,
    granularity=granularity).solve(instance)`` gives for each p, decided in one batch (module
    docstring). ``stats["timing"]["job_decision_s"]`` holds the batch's time per job, shared by
    every member."""
    # no server index: the batch reads the shared arrays itself (an index would follow a
    # member's arrays from before ``_share`` and only cost time)
    members = [_BatchMember(backend="numpy", pricing=p, granularity=granularity,
                            server_index=False) for p in pricings]
    if not members:
        return []
    for member in members:
        member.start(instance, None)
    T = instance.horizon
    if instance.I:
        arrays = _share(members, T)
        slot_class = np.zeros(T + 1, dtype=np.int64)  # 0: untouched by every member
        # the simulator's order: by arrival slot, ties in instance order
        for job in np.argsort(instance.arrival, kind="stable").tolist():
            t0 = time.perf_counter()
            spec = job_spec(DualJob.from_instance(instance, job), T, granularity,
                            Hints(slot_class=slot_class))
            if spec.target == 0 or int(spec.delta[spec.ok].max()) * (T - spec.arrival + 1) \
                    < spec.target:
                # nothing to train (a plan without rows) / infeasible under every pricing:
                # each member's own sequential decision, which commits no slot
                for member in members:
                    member.record(job, OasisPolicy.on_arrival(member, job, spec.arrival, None))
                continue
            for member, (scan, choices) in zip(members, _decide(spec, members, arrays)):
                member.payoff[job] = scan.best if scan.stop is not None else None
                member.planned[job] = scan.stop
                admit = scan.stop is not None and payoff_positive(scan.best, scan.cost)
                member.record(job, admit)
                if admit:
                    plan = scan_result(spec, scan, choices, member.worker_price,
                                       member.ps_price, member.worker_free, member.ps_free)
                    if plan.completion != scan.stop or plan.payoff != scan.best:
                        raise RuntimeError(f"job {job}: plan completes at {plan.completion} "
                                           f"with payoff {plan.payoff}, its scan at "
                                           f"{scan.stop} with {scan.best}")
                    member._commit(plan)
                    _touch(slot_class, plan.rows)
            elapsed = time.perf_counter() - t0
            for member in members:
                member.decision_s[job] = elapsed
    return [member.solve(instance) for member in members]


def _touch(slot_class: np.ndarray, rows: np.ndarray) -> None:
    """Slots a plan committed in get their own class (their data now differ between members)."""
    slot_class[rows[:, 1]] = rows[:, 1]
