"""Multi-dimensional priority preemption with GPU -> CPU degradation (the thesis' second
contribution; the reference's section 5.4).

**Priority.** Every term is normalised to [0, 1], as Slurm's multifactor priority does:

    prio(j) = w_u user(j) + w_t type(j) + w_w min(wait_j / W_max, 1)
            + w_r (1 - min(rem_j / R_max, 1)) + w_s min(unsaved_j / U_j, 1)
            + w_p min(stops_j / P_max, 1)

* user(j): the job's user class, ``provenance.user_class`` in ``USER_CLASSES`` (high 1, mid 0.5,
  low 0); without one, from its utility class (time-critical high, time-sensitive mid,
  time-insensitive low; none: mid). The class is also the job's **band** (2, 1, 0), as Borg's
  priority bands.
* type(j): ``provenance.job_type`` in ``JOB_TYPES`` (prod-train 1.0, dev 0.6, automl 0.3; none:
  prod-train); ``DEGRADED_TYPE_WEIGHT`` = 0.2 while the job runs degraded on CPU.
* wait_j: slots the job has been active but not running; rem_j: its remaining work in slots at
  its fixed workers on its fastest type; unsaved_j: work units since its last checkpoint, over
  U_j = what those workers do in c_j slots (``costmodel.preemption``); stops_j: times it was
  preempted or degraded. Defaults: weights (0.3, 0.2, 0.2, 0.15, 0.1, 0.3), W_max = R_max = 24
  slots, P_max = 3; ``weights`` given by name replace the defaults they name. The weight of past
  stops (0.3: a job stopped three times gains as much as a high user class) protects victims
  from being stopped again, and is what lets a requeued victim outrank a running job.

**Jobs and slots.** Every job is admitted and asks for a fixed k_i workers (gang, as Tiresias
and Kubernetes pods: ``baselines.common.fixed_workers``, the same seed gives the same k_i;
trimmed to the workers its work can use when it starts) with their PSs, on accelerator servers
(not on CPU-mode ones). A running job keeps its servers until it completes or is stopped. Each
slot, the jobs not running on accelerators (queued, and degraded ones) are visited in decreasing
priority (ties: arrival, then instance order); each starts if it fits; otherwise a job that is
not degraded may preempt.

**Preemption rule.** A may preempt B only if prio(A) - prio(B) >= ``delta`` (0.1): the
multi-dimensional score alone, as the thesis and Kubernetes' ``PriorityClass`` values have it (a
higher class, a long wait, many past stops all raise a job; a requeued victim may in turn
outrank a running job, so chains of preemptions can form). With ``bands=True`` A must also sit
in a higher band than B (band(A) > band(B), Borg's bands): every chain then ends after
one step whatever the score, since a victim is always in a lower band than its preemptor and
only preempts lower bands still. Only jobs that ran on accelerators in the previous slot are
victims, and degraded jobs never preempt. Victims are chosen inside the **smallest topology
subtree** (rack, then pod, then the whole cluster) where some victim set makes A fit; in each
subtree the eligible jobs with containers there are added lowest priority first (then least
unsaved work) until A fits, then Kubernetes' reprieve drops the highest-priority victims A does
not need; across the subtrees of that level the set with the lexicographically smallest (highest
victim priority, number of victims, lost work) wins (Kubernetes' ``pickOneNodeForPreemption``
order). At most ``cap`` (25 %; YARN's ``total_preemption_per_round`` is 10 %) of the cluster's GPUs are
preempted per slot. The delta and the cap are the protections against churn; their defaults
are the preemption study's (``experiments.preemption``, ``paper_figs/preemption.md``), which
reports the preemptions per hour and lost GPU-hours they give.

**Victims.** ``priority-degrade`` moves a victim to CPU mode (``state.stop(.., "degrade")``) when
it can use the CPU type at >= ``min_cpu_speed`` of its fastest speed and its workers (as many of
its k as fit, at least one) and PSs fit on CPU-mode servers; else it is requeued. Degraded jobs
are re-promoted (``"promote"``) when their workers fit on accelerators again, in priority order:
the job writes a checkpoint before it moves (``model.preemption``: nothing lost, its restart on
the accelerators takes the write too).
``priority-kill`` always requeues (Kubernetes' default preemption), losing the victim's work since
its last checkpoint; ``priority-checkpoint`` requeues too, but the victim first writes a
checkpoint (``"suspend"``, ``model.preemption``: no work lost, the restart paid; the write, at
most 13 s for the catalogue's models, happens while the preemptor's containers start, 60 s);
``priority-nopreempt`` uses the priority only as the queue order. Every stop pays the preemption
costs (``model.preemption``).
"""
from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from ..baselines.common import fixed_workers, make_placement
from ..model.classes import CLASS_OF_UTILITY, USER_CLASSES, user_class  # noqa: F401 - re-exported
from ..model.numerics import FIT_EPS, NOISE_RTOL, useful_workers
from ..model.preemption import CPU_MODE, cpu_servers
from ..sim.core import OnlinePolicy
from ..sim.placement import Placement, apply

JOB_TYPES = {"prod-train": 1.0, "dev": 0.6, "automl": 0.3}
DEGRADED_TYPE_WEIGHT = 0.2
WEIGHT_NAMES = ("user", "type", "wait", "remaining", "unsaved", "preempted")
DEFAULT_WEIGHTS = {"user": 0.3, "type": 0.2, "wait": 0.2, "remaining": 0.15, "unsaved": 0.1,
                   "preempted": 0.3}
MODES = ("degrade", "kill", "checkpoint", "nopreempt")
Rows = list[tuple[int, int, int]]


def job_type(job) -> str:
    """The job's type (module docstring); ValueError naming the field if unknown."""
    kind = (job.provenance or {}).get("job_type", "prod-train")
    if kind not in JOB_TYPES:
        raise ValueError(f"jobs[{job.id}].provenance.job_type: unknown type {kind!r} "
                         f"(known: {', '.join(JOB_TYPES)})")
    return str(kind)


def priority(weights: Mapping[str, float], user: np.ndarray, jtype: np.ndarray,
             wait: np.ndarray, remaining: np.ndarray, unsaved: np.ndarray,
             stops: np.ndarray, *, max_wait: float, max_remaining: float,
             max_stops: float) -> np.ndarray:
    """prio(j) of the module docstring, on arrays (``unsaved`` already divided by U_j)."""
    w = weights
    return (w["user"] * user + w["type"] * jtype
            + w["wait"] * np.minimum(wait / max_wait, 1.0)
            + w["remaining"] * (1.0 - np.minimum(remaining / max_remaining, 1.0))
            + w["unsaved"] * np.minimum(unsaved, 1.0)
            + w["preempted"] * np.minimum(stops / max_stops, 1.0))


def _positive(name: str, v: float) -> float:
    if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
        raise ValueError(f"{name}: must be a finite number > 0, got {v!r}")
    return float(v)


class PriorityPolicy(OnlinePolicy):
    """The policy of the module docstring; ``mode`` is fixed by the registered subclasses."""

    name = "priority"
    mode = "degrade"

    def __init__(self, *, seed: int = 0, placement: str | Placement = "tree",
                 max_workers: int = 30, weights: Mapping[str, float] | None = None,
                 delta: float = 0.1, cap: float = 0.25, max_wait: float = 24.0,
                 max_remaining: float = 24.0, max_preempted: float = 3.0,
                 min_cpu_speed: float = 0.02, bands: bool = False):
        if max_workers < 1:
            raise ValueError(f"max_workers: must be >= 1, got {max_workers}")
        if weights is not None and not isinstance(weights, Mapping):
            raise ValueError(f"weights: expected an object {{name: weight}}, got {weights!r}")
        unknown = sorted(set(weights or {}) - set(WEIGHT_NAMES))
        if unknown:
            raise ValueError(f"weights.{unknown[0]}: unknown weight (weights: "
                             f"{', '.join(WEIGHT_NAMES)})")
        w = {**DEFAULT_WEIGHTS, **(weights or {})}  # the ones given replace the defaults
        for k, v in w.items():
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"weights.{k}: must be a finite number >= 0, got {v!r}")
        if not (isinstance(delta, (int, float)) and math.isfinite(delta) and delta >= 0):
            raise ValueError(f"delta: must be a finite number >= 0, got {delta!r}")
        if not (isinstance(cap, (int, float)) and 0 <= cap <= 1):
            raise ValueError(f"cap: must be in [0, 1], got {cap!r}")
        if not (isinstance(min_cpu_speed, (int, float)) and 0 <= min_cpu_speed <= 1):
            raise ValueError(f"min_cpu_speed: must be in [0, 1], got {min_cpu_speed!r}")
        if not isinstance(bands, bool):
            raise ValueError(f"bands: expected true or false, got {bands!r}")
        self.bands = bands
        self.seed = int(seed)
        self.placement_option = placement
        make_placement(placement, self.seed)
        self.max_workers = int(max_workers)
        self.weights = {k: float(v) for k, v in w.items()}
        self.delta, self.cap, self.min_cpu_speed = float(delta), float(cap), float(min_cpu_speed)
        self.max_wait = _positive("max_wait", max_wait)
        self.max_remaining = _positive("max_remaining", max_remaining)
        self.max_preempted = _positive("max_preempted", max_preempted)

    # ---- set-up ---------------------------------------------------------------------------------
    def start(self, instance, state) -> None:
        self.instance = instance
        self.placement = make_placement(self.placement_option, self.seed)
        self.placement.reset(instance)
        self.k = fixed_workers(instance, self.seed, self.max_workers)
        classes = [user_class(j) for j in instance.jobs]
        self.band = np.array([USER_CLASSES[c][0] for c in classes], dtype=np.int64)
        self.user = np.array([USER_CLASSES[c][1] for c in classes])
        self.jtype = np.array([JOB_TYPES[job_type(j)] for j in instance.jobs])
        self.cpu = cpu_servers(instance)
        self.cpu_type = (instance.types.index(CPU_MODE) if instance.typed and
                         CPU_MODE in instance.types else None)
        gpu = instance.resources.index("gpu") if "gpu" in instance.resources else None
        self.gpu_col = gpu
        self.total_gpus = 0.0 if gpu is None else float(instance.capacity[:instance.H, gpu].sum())
        topo = instance.get_topology()
        kinds = dict(topo.graph.nodes(data="kind"))
        self.subtrees: list[list[np.ndarray]] = []  # per level (rack, pod, core): server masks
        for level in ("rack", "pod", "core"):
            masks = []
            for node in sorted(n for n, k in kinds.items() if k == level):
                m = np.zeros(instance.H + instance.K, dtype=bool)
                m[[instance.server_index[s] for s in topo.servers_under(node)]] = True
                masks.append(m)
            if masks:
                self.subtrees.append(masks)
        self.held: dict[int, Rows] = {}
        self.waited = np.zeros(instance.I)
        # jobs that can use no accelerator type run on CPU-mode servers as ordinary jobs
        self.cpu_only = np.array([instance.typed and not (instance.usable[j] & np.array(
            [g != CPU_MODE for g in instance.types])).any() for j in range(instance.I)])
        self.preempted_gpus: list[float] = []  # per slot
        self.log: list[list] = []  # [slot, preemptor, victim, prio(preemptor), prio(victim)]
        self.starts = 0

    # ---- priority -------------------------------------------------------------------------------
    def priorities(self, state) -> np.ndarray:
        """prio(j) for every job (module docstring)."""
        inst, led = self.instance, state.ledger
        rate = np.maximum(self.k * inst.max_speed, 1)
        jtype = np.where(led.degraded, DEGRADED_TYPE_WEIGHT, self.jtype)
        stops = led.counts["preemptions"] + led.counts["degradations"]
        return priority(self.weights, self.user, jtype, self.waited, state.remaining / rate,
                        led.unsaved / (rate * led.checkpoint_slots), stops,
                        max_wait=self.max_wait, max_remaining=self.max_remaining,
                        max_stops=self.max_preempted)

    def may_preempt(self, a: int, b: int, prio: np.ndarray, degraded: np.ndarray) -> bool:
        """The rule: A not degraded, prio(A) - prio(B) >= delta (and band(A) > band(B) with
        ``bands``)."""
        return (self.mode != "nopreempt" and not degraded[a]
                and (not self.bands or self.band[a] > self.band[b])
                and prio[a] - prio[b] >= self.delta - NOISE_RTOL)

    # ---- placement helpers ----------------------------------------------------------------------
    def _masked(self, free: np.ndarray, keep_workers: np.ndarray,
                keep: np.ndarray | None = None) -> np.ndarray:
        """``free`` with worker servers outside ``keep_workers`` (and servers outside ``keep``)
        at zero capacity."""
        out = free.copy()
        out[:self.instance.H][~keep_workers] = 0.0
        if keep is not None:
            out[~keep] = 0.0
        return out

    def place_gpu(self, job: int, k: int, free: np.ndarray, keep: np.ndarray | None = None):
        """Rows of k workers on accelerator servers (inside ``keep`` if given), or None."""
        servers = np.ones_like(self.cpu) if self.cpu_only[job] else ~self.cpu
        return self.placement.place(self.instance, job, k, self._masked(free, servers, keep))

    def gpus_of(self, job: int) -> float:
        if self.gpu_col is None:
            return 0.0
        return float(sum(n * self.instance.container_demand(job, s, r)[self.gpu_col]
                         for s, r, n in self.held[job]))

    def choose_victims(self, a: int, k: int, free: np.ndarray, prio: np.ndarray,
                       candidates: list[int], budget: float):
        """``(victims, rows of A)`` (module docstring), or None."""
        inst = self.instance
        unsaved = self._state.ledger.unsaved
        for level in self.subtrees:
            best = None
            for mask in level:
                inside = [b for b in candidates
                          if any(mask[s] for s, _, _ in self.held[b])]
                inside.sort(key=lambda b: (prio[b], unsaved[b], b))
                trial, chosen, rows = free.copy(), [], None
                for b in inside:
                    for s, r, n in self.held[b]:
                        trial[s] += n * inst.container_demand(b, s, r)
                    chosen.append(b)
                    rows = self.place_gpu(a, k, trial, mask)
                    if rows is not None:
                        break
                if rows is None:
                    continue
                for b in sorted(chosen, key=lambda b: (-prio[b], b)):  # reprieve
                    rest = [v for v in chosen if v != b]
                    again = self._released(free, rest)
                    got = self.place_gpu(a, k, again, mask)
                    if got is not None:
                        chosen, rows = rest, got
                gpus = sum(self.gpus_of(b) for b in chosen)
                if gpus > budget + FIT_EPS:
                    continue
                key = (max(prio[b] for b in chosen), len(chosen),
                       sum(float(unsaved[b]) for b in chosen))
                if best is None or key < best[0]:
                    best = (key, chosen, self.place_gpu(a, k, self._released(free, chosen),
                                                        mask))
            if best is not None:
                return best[1], best[2]
        return None

    def _released(self, free: np.ndarray, victims: list[int]) -> np.ndarray:
        out = free.copy()
        for b in victims:
            for s, r, n in self.held[b]:
                out[s] += n * self.instance.container_demand(b, s, r)
        return out

    def place_cpu(self, job: int, free: np.ndarray):
        """Rows of the job in CPU mode (as many of its k workers as fit, >= 1), or None."""
        inst, g = self.instance, self.cpu_type
        if g is None or self.mode != "degrade" or not inst.usable[job, g]:
            return None
        if inst.type_speed[job, g] < self.min_cpu_speed * inst.max_speed[job]:
            return None
        k, rows = self.placement.place_most(inst, job, int(self.k[job]),
                                            self._masked(free, self.cpu),
                                            remaining=float(self._state.remaining[job]))
        return rows if k > 0 else None

    # ---- the slot -------------------------------------------------------------------------------
    def allocate(self, t, state):
        inst = self.instance
        self._state = state
        degraded = state.degraded
        prio = self.priorities(state)
        free = self._released(inst.capacity, [])
        for j, rows in self.held.items():
            apply(inst, j, rows, free)
        active = state.active()
        visit = [j for j in active.tolist() if j not in self.held or degraded[j]]
        visit.sort(key=lambda j: (-prio[j], inst.arrival[j], j))
        budget = self.cap * self.total_gpus
        spent = 0.0
        for a in visit:
            k = min(int(self.k[a]), useful_workers(state.remaining[a], int(inst.max_speed[a])))
            if k <= 0:
                continue
            base = self._released(free, [a]) if degraded[a] else free
            rows = self.place_gpu(a, k, base)
            victims: list[int] = []
            if rows is None and not degraded[a] and self.mode != "nopreempt":
                # victims ran in slot t - 1 (last_ran 0 means never: none in slot 1)
                cands = [b for b in self.held if not degraded[b] and t > 1
                         and state.last_ran[b] == t - 1 and self.may_preempt(a, b, prio, degraded)]
                found = self.choose_victims(a, k, free, prio, cands, budget - spent) \
                    if cands else None
                if found is not None:
                    victims, rows = found
            if rows is None:
                continue
            if degraded[a]:
                state.stop(a, "promote")
                free = base
            for b in victims:
                self.log.append([t, a, b, float(prio[a]), float(prio[b])])
                spent += self.gpus_of(b)
                free = self._released(free, [b])
                del self.held[b]
            apply(inst, a, rows, free)
            self.held[a] = rows
            self.starts += 1
            for b in victims:
                cpu_rows = self.place_cpu(b, free)
                kind = "suspend" if self.mode == "checkpoint" else "preempt"
                state.stop(b, "degrade" if cpu_rows is not None else kind, by=a)
                if cpu_rows is not None:
                    apply(inst, b, cpu_rows, free)
                    self.held[b] = cpu_rows
        self.preempted_gpus.append(spent)
        for j, rows in self.held.items():
            for s, role, n in rows:
                yield j, s, role, n

    def on_slot_end(self, t, state, completed) -> None:
        for j in completed.tolist():
            self.held.pop(int(j), None)
        active = state.active()
        waiting = np.array([j not in self.held for j in active.tolist()], dtype=bool)
        self.waited[active[waiting]] += 1

    def stats(self) -> dict:
        return {"mode": self.mode, "bands": self.bands, "starts": self.starts, "workers": self.k.tolist(),
                "band": self.band.tolist(), "preempted_gpus": self.preempted_gpus,
                "gpu_cap": self.cap * self.total_gpus, "preemption_log": self.log}


class PriorityDegradePolicy(PriorityPolicy):
    name, mode = "priority-degrade", "degrade"


class PriorityKillPolicy(PriorityPolicy):
    name, mode = "priority-kill", "kill"


class PriorityCheckpointPolicy(PriorityPolicy):
    name, mode = "priority-checkpoint", "checkpoint"


class PriorityNoPreemptPolicy(PriorityPolicy):
    name, mode = "priority-nopreempt", "nopreempt"
