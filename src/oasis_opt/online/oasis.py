"""OASiS (Alg. 1): online admission by a primal-dual price rule, whole plans fixed at admission.

Jobs are decided one at a time in arrival order (ties in instance order, as the simulator hands
them over). For each arriving job the dual subroutine (``best_schedule``, Alg. 2) finds its best
schedule at the current prices; the job is admitted iff that payoff is strictly positive, beyond
float noise (``model.numerics.payoff_positive``: larger than 1e-12 of the plan's utility and cost,
so that the decision is the same on every CPU) (A11:
the payoff is measured at the prices *before* the allocation, so a plan that fills a resource to
exactly c is feasible). On admission the whole plan is reserved: for every slot, server and
resource it uses, the committed amount g (v for PS servers) grows by count * demand and the price
becomes P(g) of eq. (22). Admitted jobs are never re-planned or preempted; ``allocate(t)`` just
returns the committed rows of slot t.

The slot-by-slot simulator is not needed for OASiS's utility (plans are deterministic, section
15.8) but running it checks every committed plan against the simulator's own capacity account.
One subtlety in chunk granularity: the literal Alg. 2 plan can carry surplus worker-slots (the
per-slot ceil(d x_i)), so the job may reach its W_i worker-slots before the plan's last slot; the
simulator then completes it there and ``allocate`` skips its later rows (their reservation stays
committed, as the prices were set at admission). A *cancelled* job (the service's ``DELETE``,
``SlotLoop.cancel``) is different: its reservation of the slots from the cancellation on is
released (``on_cancel``), and later arrivals are priced as if it had never been admitted.

Options: ``backend`` ("numpy" | "jax" | "reference"), ``pricing`` ("oracle" | path of an
``oasis-opt/pricing@1`` file | a pricing dict | a ``Pricing``), ``u_scale`` (multiplies U, Fig.
6), ``granularity`` ("worker-slot" | "chunk"; chunk takes no accelerator types),
``server_index`` (True | False | None = automatic: on for clusters of at least
``INDEX_MIN_SERVERS`` servers (H + K) without accelerator types): the dual reads each slot's servers through sorted per-slot lists
(``online.server_index``) instead of reading them all. The plans are the same either way; only
the speed changes (``benchmarks/bench_speed.py``).

With accelerator types (``model.instance``) the dual subroutine prices work, not workers, and
the constants are per server type (``online.pricing``: U1_g^r, L1 from the leanest single-type
schedule, alpha and the 2 alpha bound restated there); a plan's workers reserve their type's
demand on their servers.
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..model import Instance
from ..model.numerics import payoff_positive
from ..model.policy import OnlinePolicy
from ..model.schedule import WORKER
from .dual import GRANULARITIES, Hints, Market, Plan, best_schedule, check_backend
from .pricing import Pricing, parse_pricing, read_pricing_file, resolve_pricing
from .server_index import ServerIndex

INDEX_MIN_SERVERS = 4000  # H + K from which ``server_index=None`` turns the index on: whole
# runs at the paper's load (``benchmarks/results/oasis.md``): 1.51x faster at H + K = 4000,
# T = 300 (2.54x at T = 1000), 1.12x at 2000; at a quarter of that load 0.94x at 4000, 0.78x at 2000


def _every_slot(x: np.ndarray, T: int) -> np.ndarray:
    """(H, R) -> a writable (T+1, H, R) array with ``x`` in every slot, stored resource-major
    ((T+1, R, H) in memory, a transposed view): the dual reads one resource of all servers of
    consecutive slots at a time (unit prices, fit counts), which is then contiguous. The values
    and every float computed from them are the same in either layout."""
    x = np.asarray(x, dtype=float)
    return np.ascontiguousarray(np.broadcast_to(x.T, (T + 1,) + x.T.shape)).transpose(0, 2, 1)


def _resource_major(x: np.ndarray) -> np.ndarray:
    """``x`` as ``_every_slot`` stores it: itself if it is, else a copy laid out so (pickle
    writes a transposed array in C order)."""
    if x.transpose(0, 2, 1).flags.c_contiguous:
        return x
    return np.ascontiguousarray(x.transpose(0, 2, 1)).transpose(0, 2, 1)


# the (T+1, servers, R) state arrays, stored resource-major
STATE_ARRAYS = ("worker_used", "ps_used", "worker_free", "ps_free", "worker_price", "ps_price")


class OasisPolicy(OnlinePolicy):
    """The OASiS online scheduler (Bao et al., INFOCOM 2018, Alg. 1).

    A started policy can be pickled or deep-copied mid-run (to branch or checkpoint a run): the
    copy decides as the original would. Its server index is rebuilt on the copy's arrays, not
    copied, since an index reads its owner's arrays through views that a copy would detach."""

    name = "oasis"

    def __init__(self, backend: str = "numpy", pricing: Any = "oracle", u_scale: float = 1.0,
                 granularity: str = "worker-slot", server_index: bool | None = None):
        check_backend(backend)
        if granularity not in GRANULARITIES:
            raise ValueError(f"granularity: expected one of {', '.join(GRANULARITIES)}, "
                             f"got {granularity!r}")
        if isinstance(u_scale, bool) or not isinstance(u_scale, (int, float)) \
                or not math.isfinite(u_scale) or u_scale <= 0:
            raise ValueError(f"u_scale: must be a finite number > 0, got {u_scale!r}")
        # check the pricing file / document at the edge, before any run (resources are checked
        # against the instance in ``start``)
        if isinstance(pricing, dict):
            parse_pricing(pricing)
        elif isinstance(pricing, (str, Path)) and pricing != "oracle":
            read_pricing_file(pricing)
        elif not (pricing == "oracle" or isinstance(pricing, Pricing)):
            raise ValueError(f"pricing: expected 'oracle', a file path or a dict, got {pricing!r}")
        if server_index not in (None, True, False):
            raise ValueError(f"server_index: expected True, False or None, got {server_index!r}")
        self.backend = backend
        self.granularity = granularity
        self.server_index_option = server_index
        self.pricing_spec = pricing
        self.u_scale = float(u_scale)
        self.pricing: Pricing | None = None

    # ---- simulator hooks ---------------------------------------------------------------------
    def check(self, instance: Instance, state: Any) -> None:
        """``start``'s checks without its arrays (``OnlinePolicy.check``)."""
        self._checked_pricing(instance)

    def _checked_pricing(self, instance: Instance) -> Pricing | None:
        """The pricing bound to ``instance`` (None without jobs), after the checks of the
        variant and its options against the instance."""
        if self.granularity == "chunk":  # the literal Alg. 2 counts chunks, not typed work
            instance.require_untyped(f"policy {self.name!r} with granularity 'chunk'")
        if self.server_index_option and instance.typed:
            raise ValueError("server_index: the index serves clusters without accelerator "
                             "types (leave it None or False here)")
        return resolve_pricing(self.pricing_spec, instance, self.u_scale) if instance.I else None

    def start(self, instance: Instance, state: Any) -> None:
        self.pricing = self._checked_pricing(instance)
        self.instance = instance
        T, H, K, R = instance.horizon, instance.H, instance.K, instance.R
        # committed g_h^r(t), v_k^r(t); free = c - g; prices p, q (eq. 22); row 0 unused
        self.worker_used = np.zeros((T + 1, R, H)).transpose(0, 2, 1)  # as ``_every_slot``
        self.ps_used = np.zeros((T + 1, R, K)).transpose(0, 2, 1)
        self.worker_free = _every_slot(instance.worker_capacity, T)
        self.ps_free = _every_slot(instance.ps_capacity, T)
        if self.pricing is not None:
            # eq. (22) at g = 0, computed once per server and copied to every slot (element-wise,
            # so the same floats as pricing the whole (T+1, H, R) array)
            self.worker_price = _every_slot(self.pricing.worker_prices(
                self.worker_used[0], instance.worker_capacity), T)
            self.ps_price = _every_slot(self.pricing.ps_prices(self.ps_used[0],
                                                               instance.ps_capacity), T)
            # smallest price of each resource per slot, over the servers (the dual's pruning
            # bound takes its minimum over slots a..T)
            self.worker_min = self.worker_price.min(axis=1)
            self.ps_min = self.ps_price.min(axis=1)
        # 0: nothing committed in the slot yet (all such slots are alike), else the slot itself
        self.slot_class = np.zeros(T + 1, dtype=np.int64)
        use = self.server_index_option
        if use is None:
            use = H + K >= INDEX_MIN_SERVERS and not instance.typed
        self.index: tuple[ServerIndex, ServerIndex] | None = None
        if use and self.pricing is not None:
            self.index = (ServerIndex(self.worker_price, self.worker_free),
                          ServerIndex(self.ps_price, self.ps_free))
        self.rows_by_slot: dict[int, list[np.ndarray]] = {}
        self.parts_by_job: dict[int, list[np.ndarray]] = {}  # the same parts, by job and slot
        I = instance.I
        # best payoff at decision time (None: undecided / infeasible)
        self.payoff: list[float | None] = [None] * I
        self.planned: list[int | None] = [None] * I  # planned completion slot of the best plan
        self.decision_s: list[float | None] = [None] * I

    def extend(self, instance: Instance, state: Any) -> bool:
        """Take jobs appended mid-run (``OnlinePolicy.extend``): with a pricing fixed in
        advance (a file, a document or a ``Pricing``), a job's decision reads only the prices,
        the free capacity and its own parameters, so the new jobs join as they would have at
        the start. The oracle pricing is computed from every job (eqs. 23-26): False."""
        if isinstance(self.pricing_spec, str) and self.pricing_spec == "oracle":
            return False
        new = instance.jobs[len(self.payoff):]
        if self.pricing is None:  # started without jobs: nothing was committed, start afresh
            self.start(instance, state)
            return True
        # the pricing's checks for the new jobs (a U for every resource they demand)
        resolve_pricing(self.pricing_spec, instance.with_jobs(new), self.u_scale)
        self.instance = instance
        self.payoff.extend([None] * len(new))
        self.planned.extend([None] * len(new))
        self.decision_s.extend([None] * len(new))
        return True

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        index = state.get("index")
        if index is not None:  # the settings, not the lists (see the class docstring)
            state["index"] = [(ix.limit, ix.depth) for ix in index]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        for name in STATE_ARRAYS:
            if name in state:
                setattr(self, name, _resource_major(state[name]))
        if state.get("index") is not None:
            touched = self.slot_class != 0  # slots with commits; the others hold the start data
            (wl, wd), (pl, pd) = state["index"]
            self.index = (ServerIndex(self.worker_price, self.worker_free, wl, wd, touched),
                          ServerIndex(self.ps_price, self.ps_free, pl, pd, touched))

    def on_arrival(self, job: int, t: int, state: Any) -> bool:
        t0 = time.perf_counter()
        a = int(self.instance.arrival[job])
        if self.index is not None:  # jobs arrive in slot order: earlier slots are never read
            for ix in self.index:
                ix.forget_before(a)
        market = Market(self.worker_price, self.ps_price, self.worker_free, self.ps_free)
        hints = Hints(price_min=(self.worker_min[a:].min(axis=0), self.ps_min[a:].min(axis=0)),
                      slot_class=self.slot_class, server_index=self.index)
        plan = best_schedule(self.instance, job, market, hints, backend=self.backend,
                             granularity=self.granularity)
        admit = plan.feasible and payoff_positive(plan.payoff, plan.cost)
        if admit:
            self._commit(plan)
        self.decision_s[job] = time.perf_counter() - t0
        self.payoff[job] = plan.payoff if plan.feasible else None
        self.planned[job] = plan.completion
        return admit

    def allocate(self, t: int, state: Any) -> Iterator[tuple[int, int, int, int]]:
        done = state.done
        for rows in self.rows_by_slot.get(t, ()):
            job = int(rows[0, 0])
            if done[job]:  # chunk granularity: surplus rows after the work is done
                continue
            for _, _, server, role, count in rows.tolist():
                yield job, server, role, count

    # ---- Alg. 1, admission: reserve the plan and raise the prices ----------------------------------
    def _commit(self, plan: Plan) -> None:
        inst, pricing = self.instance, self.pricing
        assert pricing is not None  # set in ``start`` for any instance with a job
        rows = plan.rows
        H = inst.H
        w = rows[rows[:, 3] == WORKER]
        p = rows[rows[:, 3] != WORKER]
        # (slot, server) pairs are unique within one plan, so plain fancy-index updates are exact
        index = self.index or (None, None)
        for sel, used, free, cap, price_fn, prices, mins, base, ix in (
                (w, self.worker_used, self.worker_free, inst.worker_capacity,
                 lambda g, c, s: pricing.worker_prices(g, c, s), self.worker_price,
                 self.worker_min, 0, index[0]),
                (p, self.ps_used, self.ps_free, inst.ps_capacity,
                 lambda g, c, s: pricing.ps_prices(g, c), self.ps_price, self.ps_min, H,
                 index[1])):
            if not len(sel):
                continue
            slot, server, count = sel[:, 1], sel[:, 2] - base, sel[:, 4]
            demand = inst.row_demand(sel[:, 0], sel[:, 2], sel[:, 3])  # a worker's: its type's
            g = used[slot, server] + count[:, None] * demand
            used[slot, server] = g
            c = cap[server]
            free[slot, server] = c - g
            prices[slot, server] = price_fn(g, c, server)
            # rows are sorted by slot: the touched slots are where the slot changes
            touched = slot[np.flatnonzero(np.diff(slot, prepend=-1))]
            mins[touched] = prices[touched].min(axis=1)
            if ix is not None:
                ix.changed(slot, server)
        self.slot_class[rows[:, 1]] = rows[:, 1]
        # rows are sorted by slot: one part per run of equal slots
        for part in np.split(rows, np.flatnonzero(np.diff(rows[:, 1])) + 1) if len(rows) else ():
            self.rows_by_slot.setdefault(int(part[0, 1]), []).append(part)
            self.parts_by_job.setdefault(int(part[0, 0]), []).append(part)

    # ---- a cancellation (the service's DELETE): release the rest of the plan ------------------
    def on_cancel(self, job: int, t: int, state: Any) -> None:
        """Release ``job``'s reservation of slots ``t``.. (it is withdrawn from slot t on): every
        (slot, server) its plan used there gets back the committed amount, free capacity and
        price it would have had had the job never been admitted. The committed amount is summed
        again from the remaining plans in their commit order, so the floats are exactly those of
        a run without the job (a subtraction would leave round-off), and later arrivals are
        priced as in that run. Slots before t keep their commits (they ran)."""
        if self.pricing is None:
            return
        mine: list[np.ndarray] = []
        for slot in sorted(s for s in self.rows_by_slot if s >= t):
            parts = self.rows_by_slot[slot]
            keep = [part for part in parts if int(part[0, 0]) != job]
            if len(keep) < len(parts):
                mine.extend(part for part in parts if int(part[0, 0]) == job)
                self.rows_by_slot[slot] = keep
        if not mine:
            return
        self.parts_by_job[job] = [part for part in self.parts_by_job.get(job, ())
                                  if int(part[0, 1]) < t]
        inst, pricing, H = self.instance, self.pricing, self.instance.H
        released = np.concatenate(mine)  # sorted by slot
        index = self.index or (None, None)
        for is_worker, used, free, cap, prices, mins, base, ix in (
                (True, self.worker_used, self.worker_free, inst.worker_capacity,
                 self.worker_price, self.worker_min, 0, index[0]),
                (False, self.ps_used, self.ps_free, inst.ps_capacity, self.ps_price,
                 self.ps_min, H, index[1])):
            sel = released[(released[:, 3] == WORKER) == is_worker]
            if not len(sel):
                continue
            slot, server = sel[:, 1], sel[:, 2] - base
            g = np.zeros((len(sel), inst.R))
            for n, (s, h) in enumerate(zip(slot.tolist(), sel[:, 2].tolist())):
                for part in self.rows_by_slot.get(s, ()):  # commit order, as in ``_commit``
                    other = part[(part[:, 2] == h) & ((part[:, 3] == WORKER) == is_worker)]
                    for row in other:  # (slot, server) pairs are unique within one plan
                        demand = inst.row_demand(row[None, 0], row[None, 2], row[None, 3])[0]
                        g[n] = g[n] + row[4] * demand
            used[slot, server] = g
            c = cap[server]
            free[slot, server] = c - g
            prices[slot, server] = (pricing.worker_prices(g, c, server) if is_worker
                                    else pricing.ps_prices(g, c))
            touched = slot[np.flatnonzero(np.diff(slot, prepend=-1))]
            mins[touched] = prices[touched].min(axis=1)
            if ix is not None:
                ix.changed(slot, server)

    # ---- a closed loop (``runtime.closed_loop``): a job fell behind its plan ------------------
    def replan(self, job: int, t: int, remaining: float, state: Any) -> dict | None:
        """Re-plan the ``remaining`` work units of admitted ``job`` after slot ``t``: its plan
        of slots t+1.. is released (``on_cancel``) and the remaining work is re-priced at the
        current prices, as a job arriving in slot t+1 with W = ceil(remaining) and the same
        utility of the completion slot (the dual subroutine, Alg. 2). The best plan is committed
        even at a negative payoff (the job was admitted; a re-plan does not reject it); with no
        feasible plan the job gets nothing more. Returns ``{"job", "slot", "remaining",
        "completion_before", "completion", "payoff", "rows"}`` (``rows`` the new plan's
        ``(slot, server, role, count)``)."""
        from dataclasses import replace

        from .dual import best_schedule_arrays
        from .dual_inputs import DualJob

        before = self.planned[job]
        T = self.instance.horizon
        if self.pricing is not None:
            self.on_cancel(job, t + 1, state)
        out: dict[str, Any] = {"job": int(job), "slot": int(t), "remaining": float(remaining),
                               "completion_before": before, "completion": None,
                               "payoff": None, "rows": []}
        work = int(math.ceil(remaining - 1e-9))
        if t >= T or work <= 0 or self.pricing is None:
            return out
        spec = replace(DualJob.from_instance(self.instance, job), arrival=t + 1, work=work)
        market = Market(self.worker_price, self.ps_price, self.worker_free, self.ps_free)
        plan = best_schedule_arrays(spec, market, backend=self.backend,
                                    granularity=self.granularity)
        if plan.feasible:
            self._commit(plan)
            self.planned[job] = plan.completion
            out.update(completion=plan.completion, payoff=float(plan.payoff),
                       rows=[(int(s), int(h), int(r), int(c))
                             for _, s, h, r, c in plan.rows.tolist()])
        else:
            self.planned[job] = None
        return out

    def plan(self, job: int) -> list[tuple[int, int, int, int]] | None:
        return [(t, s, role, c) for part in self.parts_by_job.get(job, ())
                for _, t, s, role, c in part.tolist()]

    def committed(self) -> np.ndarray:
        """g_h^r(t) and v_k^r(t) of Alg. 1, the committed resources, worker then PS servers."""
        return np.concatenate([self.worker_used, self.ps_used], axis=1)

    # ---- reporting ------------------------------------------------------------------------
    def stats(self) -> dict:
        times = [d for d in self.decision_s if d is not None]
        out: dict[str, Any] = {"backend": self.backend, "granularity": self.granularity}
        if self.pricing is not None:
            out["pricing"] = self.pricing.stats()
            out["alpha"] = self.pricing.alpha
            out["competitive_bound"] = self.pricing.competitive_bound
        out["job_payoff"] = self.payoff
        out["job_planned_completion"] = self.planned
        timing = out["timing"] = {"job_decision_s": self.decision_s}  # wall clock: varies
        if times:
            timing["decision_s"] = {"median": float(np.median(times)),
                                    "p95": float(np.percentile(times, 95)),
                                    "max": float(np.max(times)), "total": float(np.sum(times))}
        return out
