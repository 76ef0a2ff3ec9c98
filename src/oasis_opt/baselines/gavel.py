"""Gavel's heterogeneity-aware policies (Narayanan et al., OSDI 2020) and its round mechanism.

A Gavel policy is an allocation X (jobs x accelerator types, time fractions; ``offline.gavel_lp``)
turned into integral per-round decisions by Gavel's round-based mechanism, with rounds = slots:

* **rigid jobs**: job j runs with exactly k_j workers (``numerics.workers_alone``: N_j on a Gavel
  import, where N_j is the trace's GPU count) on one type, or not at all; k_j = 0: never runs;
* **time**: slots of the instance's ``meta["slot_s"]`` seconds (360 s, Gavel's round, when it
  has none);
* **recomputation**: X is recomputed over the jobs active at the start of a slot when jobs
  arrived or finished since the last computation and at least ``recompute_s`` seconds (Gavel:
  1,920 s) passed since it, or it was made at time 0 (Gavel's ``last_reset_time == 0`` test). Until then a new job has no
  allocation and does not run, and a finished job's share stays unused;
* **priorities** (Gavel's ``_update_priorities``): job j's time on type g since the last
  computation, r_jg, starts at a credit of half a slot (Gavel's 180 s on 360-s rounds; a job
  that arrives later starts there too), and type g's total R_g at the sum of the credits of the
  jobs active at the computation; a slot run adds its time to both. Priority = X_jg / (r_jg /
  R_g) (X_jg 1e9 while R_g = 0; 0 for a job without allocation, with X_jg = 0, or that cannot
  use g); the deficit accumulates X_jg e - (r_jg - credit) at each computation, e the time since
  the previous one. Per type, jobs sorted by (priority, deficit, X_jg), highest first; types
  visited in the instance's order (Gavel: V100, P100, K80), shuffled each slot (seeded) by
  type-blind policies. A job is taken if it has an allocation, is not yet taken this slot, can
  use the type, has priority > 0 (FIFO only) and its k_j workers (and PSs) fit in what the type
  has left; smaller jobs fill in behind larger ones;
* **placement and leases**: a job that ran on the same type in the previous slot keeps exactly
  its servers if they still have room (a lease extension), placed first; the others, largest
  first, fill the type's servers in instance order (several servers if need be).

Allocations (``GavelPolicy.allocation``, one per registered subclass): ``las`` (Gavel's
``max_min_fairness_perf``), ``ftf`` (``finish_time_fairness_perf``), ``makespan``
(``min_total_duration_perf``), ``las-agnostic`` (``max_min_fairness``: throughputs set to 1),
``fifo`` and ``fifo-gavel``:

* ``fifo`` (textbook): jobs in arrival order, strict head-of-line; the head takes the fastest
  type it can use with room for its k_j GPUs and keeps it until it ends; recomputed at every
  event (no cadence), so the round mechanism runs every allocated job;
* ``fifo-gavel``: Gavel's FIFO as its simulator runs it (``scheduler/policies/fifo.py``, mode
  ``base``): at each recomputation jobs in arrival order get X_jg = 1 on the *last* open type of
  the alphabetical list (V100 while it is open), and when a type's GPUs run out a *random* open
  type is closed (Gavel draws an index with ``random.Random(seed).randrange`` and uses it only
  there), so V100 can be over-committed, its jobs taking turns by priority, while other types
  stay empty. The draws are Gavel's own (same generator, seed and calls: ``GavelFifo``). On a
  Gavel import the rounds also count Gavel's steps (``_steps``): a job runs int(T_g L) steps a
  round there, so it often needs one more, nearly empty round than our work units do, and a
  multi-GPU job left with fewer steps than GPUs fails 5 rounds and is dropped; until then the
  job keeps its type and its GPUs in the rounds here too (idle), as in Gavel.

Throughputs in the LPs: T_jg = k_j s_jg, the job's work units per slot on type g; type
capacities n_g and job sizes D_jg = k_j w_jg in GPUs (the ``gpu`` resource; on a cluster without
GPUs, D_jg = k_j and n_g = sum_j k_j, so that only placement limits the jobs). The round's GPU
count check is Gavel's; the placement then checks every resource and drops a job whose
containers do not fit (other resources than GPUs, on instances other than Gavel's).
"""
from __future__ import annotations

import math
import random

import numpy as np

from ..model.numerics import FIT_EPS, VALUE_EPS, workers_alone
from ..model.policy import OnlinePolicy
from ..offline import gavel_lp
from ..model.numerics import fill, fit_count
from ..sim.placement import apply

ALLOCATIONS = ("las", "ftf", "makespan", "las-agnostic", "fifo", "fifo-gavel")
RECOMPUTE_S = 1920.0  # Gavel's minimum time between two allocation computations
GAVEL_SEED = 11  # --seed of Gavel's reference runs (its FIFO's draws)
MAX_FAILURES = 5  # Gavel drops a job after this many failed micro-tasks
ROUND_S = 360.0  # slot length assumed for an instance whose meta has no slot_s (Gavel's round)
SOLUTIONS = ("central", "vertex")  # which optimal LP point (offline.gavel_lp)


class GavelPolicy(OnlinePolicy):
    """One of Gavel's allocations run by its round mechanism (module docstring)."""

    name = "gavel"

    allocation = "las"  # one of ALLOCATIONS; the subclasses below fix it
    stops_when_done = True  # nothing here reads the slots after the last completion

    def __init__(self, *, seed: int = 0, recompute_s: float | None = None,
                 solution: str = "central"):
        if self.allocation not in ALLOCATIONS:
            raise ValueError(f"allocation: expected one of {', '.join(ALLOCATIONS)}, "
                             f"got {self.allocation!r}")
        if solution not in SOLUTIONS:
            raise ValueError(f"solution: expected one of {', '.join(SOLUTIONS)}, got {solution!r}")
        if recompute_s is not None and not recompute_s >= 0:
            raise ValueError(f"recompute_s: must be >= 0 seconds, got {recompute_s}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed: must be an integer >= 0, got {seed!r}")
        self.central, self.solution, self.seed = solution == "central", solution, int(seed)
        self.recompute_s = (0.0 if self.allocation == "fifo" else RECOMPUTE_S) \
            if recompute_s is None else float(recompute_s)

    # ---- set-up ------------------------------------------------------------------------------
    def start(self, instance, state) -> None:
        self.instance = inst = instance
        self.rng = np.random.default_rng(self.seed)
        self.draws = random.Random(self.seed)  # fifo-gavel: Gavel's FIFOPolicy draws (Python's)
        self.slot_s = float((inst.meta or {}).get("slot_s", ROUND_S))
        G = len(inst.types)
        self.k = np.array([workers_alone(inst, j) for j in range(inst.I)], dtype=np.int64)
        self.T = np.where(inst.usable, self.k[:, None] * inst.type_speed, 0).astype(float)
        gpu = inst.resources.index("gpu") if "gpu" in inst.resources else None
        cap = inst.worker_capacity[:, gpu] if gpu is not None else np.zeros(inst.H)
        self.n = np.array([cap[inst.type_mask[g]].sum() for g in range(G)], dtype=float)
        if self.n.sum() > 0:
            self.D = self.k[:, None] * inst.type_demand[:, :, gpu]
        else:  # no GPUs anywhere: count workers, with room for all (placement decides)
            self.D = np.repeat(self.k[:, None].astype(float), G, axis=1)
            self.n = np.full(G, max(float(self.k.sum()), 1.0))
        self.X = np.zeros((inst.I, G))
        self.in_alloc = np.zeros(inst.I, dtype=bool)
        self.ran = np.zeros((inst.I, G))  # r_jg, seconds (with the credit)
        self.type_ran = np.zeros(G)  # R_g
        self.deficit = np.zeros((inst.I, G))
        self.credit = 0.5 * self.slot_s
        self.last_s: float | None = None
        self.changed = False
        self.lease: dict[int, tuple[int, list]] = {}  # job -> (type, rows) of the last slot
        self.fifo_type: dict[int, int] = {}  # textbook FIFO: the type a started job keeps
        self.iso_done = np.zeros(inst.I)  # FTF: isolated time of the work done so far (slots)
        self.prev_remaining = inst.work.astype(float)  # FTF: work left at the last computation
        self.prev_iso = np.zeros(inst.I)  # FTF: p_j at the last computation (0: not in it)
        self.computations = self.lps = 0
        self.servers_of = [np.flatnonzero(inst.type_mask[g]) for g in range(G)]
        self.ps_of = [int(inst.ps_needed(j, int(self.k[j]))) for j in range(inst.I)]
        # fifo-gavel on a Gavel import: Gavel's own step count (_steps_left) and the jobs done
        # here but not yet in Gavel (_ghosts; _steps docstring)
        provs = [job.provenance or {} for job in inst.jobs]
        self.gavel_steps = self.allocation == "fifo-gavel" and all(
            "total_steps" in p and "throughput" in p for p in provs)
        self.steps_left = [int(p.get("total_steps", 0)) for p in provs]
        self.failures = [0] * inst.I
        self.ghosts: set[int] = set()

    def on_arrival(self, job, t, state):
        self.changed = True
        self.ran[job] = self.credit
        return True

    def on_slot_end(self, t, state, completed) -> None:
        for j in completed.tolist():
            self.lease.pop(j, None)
            if self.gavel_steps and self.steps_left[j] > 0 and self.failures[j] < MAX_FAILURES:
                self.ghosts.add(j)  # done here, not yet in Gavel
            else:
                self.changed = True

    def _with_ghosts(self, jobs: np.ndarray) -> np.ndarray:
        """``jobs`` and the ghosts (``_steps``), in index order."""
        if not self.ghosts:
            return jobs
        return np.array(sorted(set(jobs.tolist()) | self.ghosts), dtype=np.int64)

    # ---- allocation ----------------------------------------------------------------------------
    def _recompute(self, t: int, state) -> None:
        now = (t - 1) * self.slot_s
        active = self._with_ghosts(state.active())
        active = active[self.k[active] > 0]
        # jobs whose usable types have no room for their GPUs at all cannot get time (Gavel's
        # FIFO keeps them in its queue, where the first one stops the queue)
        if self.allocation != "fifo-gavel":
            room = ((self.D[active] <= self.n[None, :] + FIT_EPS)
                    & (self.T[active] > 0)).any(axis=1)
            active = active[room]
        if self.last_s is not None:  # Gavel's _reset_time_run_so_far, with the old X; Gavel
            # sums over the jobs it knows (those with r_j > 0: active at the last computation or
            # run since), so a job arriving later starts at 0 instead of gathering the credit at
            # every computation before its arrival (issue #34; every allocation)
            known = self.ran.sum(axis=1) > 0
            self.deficit[known] += self.X[known] * (now - self.last_s) \
                - (self.ran[known] - self.credit)
        self.ran[:] = 0.0
        self.ran[active] = self.credit
        self.type_ran = self.ran.sum(axis=0)
        X = np.zeros_like(self.X)
        if len(active):
            X[active] = self._allocate(active, t, state)
        self.X, self.in_alloc[:] = X, False
        self.in_alloc[active] = True
        self.last_s, self.changed = now, False
        self.computations += 1

    def _allocate(self, jobs: np.ndarray, t: int, state) -> np.ndarray:
        T, D, n, central = self.T[jobs], self.D[jobs], self.n, self.central
        rem = state.remaining[jobs]
        if self.allocation == "las":
            a = gavel_lp.max_min_fairness(T, D, n, scale=self.k[jobs], central=central)
        elif self.allocation == "las-agnostic":
            # Gavel's MaxMinFairnessPolicy sets every throughput to 1, on the types a job cannot
            # use too (the rounds never run it there: the share is lost), and so counts each
            # job's GPUs on every type
            usable = self.T[jobs] > 0
            D = np.where(usable, D, D.max(axis=1, where=usable, initial=0.0)[:, None])
            a = gavel_lp.max_min_fairness(np.ones_like(T), D, n, scale=self.k[jobs],
                                          central=central)
            # the symmetric point of the optimal face (gavel_lp.spread_over_types), where each
            # job takes the same GPUs on every type (always on a Gavel import); else the LP's
            if central and np.allclose(D, D[:, :1]):
                a = gavel_lp.spread_over_types(a, D, n)
        elif self.allocation == "makespan":  # Gavel's bisection in seconds, then a feasible x
            best = gavel_lp.min_makespan(T, D, n, rem)
            settled = gavel_lp.gavel_bisection(best.objective * self.slot_s) / self.slot_s
            a = gavel_lp.makespan_feasible(T, D, n, rem, settled, central=central)
            self.lps += best.lps
        elif self.allocation == "ftf":
            arrival = np.array([_arrival_s(self.instance, j, self.slot_s) for j in jobs.tolist()])
            elapsed = np.maximum((t - 1) - arrival / self.slot_s, 0.0)
            p = gavel_lp.isolated_throughput(T, D, n)
            # Gavel's _cumulative_isolated_time: the work done since the previous computation
            # at that computation's isolated throughput, for the jobs it included
            was = self.prev_iso[jobs] > 0
            done = self.prev_remaining[jobs] - rem
            self.iso_done[jobs[was]] += done[was] / self.prev_iso[jobs[was]]
            self.prev_iso[:] = 0.0
            self.prev_iso[jobs], self.prev_remaining[jobs] = p, rem
            a = gavel_lp.finish_time_fairness(T, D, n, rem, elapsed, p, self.iso_done[jobs],
                                              central=central)
        elif self.allocation == "fifo":
            return self._fifo(jobs, state)
        else:
            return self._fifo_gavel(jobs)
        self.lps += a.lps
        return a.x

    def _fifo(self, jobs: np.ndarray, state) -> np.ndarray:
        """Textbook FIFO: started jobs keep their type; then strict head-of-line."""
        left = self.n.copy()
        X = np.zeros((len(jobs), len(self.n)))
        for row, j in enumerate(jobs.tolist()):
            if j in self.fifo_type:
                g = self.fifo_type[j]
                X[row, g], left[g] = 1.0, left[g] - self.D[j, g]
        for row, j in enumerate(jobs.tolist()):
            if j in self.fifo_type:
                continue
            order = self.instance.type_order(j)
            room = [g for g in order if self.D[j, g] <= left[g] + FIT_EPS]
            if not room:
                break  # head-of-line blocking
            g = room[0]
            X[row, g], left[g] = 1.0, left[g] - self.D[j, g]
            self.fifo_type[j] = g
        return X

    def _fifo_gavel(self, jobs: np.ndarray) -> np.ndarray:
        """Gavel's FIFO, as its ``scheduler/policies/fifo.py`` (``FIFOPolicy``, mode ``base``)
        computes it: a kept assignment job -> type; a finished job's type goes to the head of
        the queue if its GPUs fit in what that type has left (counting only the jobs visited so
        far, in id order) and it can use the type (else the head waits); then, while the queue
        and the list of open types (free GPUs > 0, alphabetical) are not empty, the head is
        popped, ``randrange`` draws an index among the open types with room for it (none: stop),
        and the job gets the *last* open type, with room for it or not (the loop variable left
        over from scanning the open types), if it can use it; when that type's free GPUs reach
        exactly 0 the drawn type is closed (popped from the open list), not the filled one."""
        types = self.instance.types
        active = set(jobs.tolist())
        left = self.n.copy()
        queue = [j for j in jobs.tolist() if j not in self.fifo_type]
        for j in sorted(self.fifo_type):
            g = self.fifo_type[j]
            if j in active:
                left[g] -= self.D[j, g]
                continue
            del self.fifo_type[j]  # finished: its type goes to the head of the queue
            if queue:
                head = queue[0]
                if self.D[head, g] <= left[g] and self.T[head, g] > 0:
                    queue.pop(0)
                    self.fifo_type[head] = g
                    left[g] -= self.D[head, g]
        open_ = sorted((g for g in range(len(types)) if left[g] > 0), key=lambda g: str(types[g]))
        while queue and open_:
            j = queue.pop(0)
            room = [i for i, g in enumerate(open_) if left[g] >= self.D[j, g]]
            if not room:
                break
            drawn = self.draws.randrange(len(room))  # drawn, then used only to close a type
            last = open_[-1]  # the loop variable left over from scanning the open types
            if self.T[j, last] > 0:
                self.fifo_type[j] = last
                left[last] -= self.D[j, last]
                if left[last] == 0:
                    open_.pop(room[drawn])
        X = np.zeros((len(jobs), len(self.n)))
        for row, j in enumerate(jobs.tolist()):
            if j in self.fifo_type:
                X[row, self.fifo_type[j]] = 1.0
        return X

    # ---- rounds ------------------------------------------------------------------------------
    def allocate(self, t, state):
        inst = self.instance
        now = (t - 1) * self.slot_s
        if self.changed and (self.last_s is None or self.last_s == 0
                             or now - self.last_s >= self.recompute_s - VALUE_EPS):
            self._recompute(t, state)
        jobs = [j for j in self._with_ghosts(state.active()).tolist() if self.in_alloc[j]]
        if not jobs:
            self.lease.clear()
            return []
        G = len(inst.types)
        R = self.type_ran
        share = np.divide(self.ran, R, out=np.zeros_like(self.ran), where=R > 0)
        prio = np.where(share > 0, np.divide(self.X, share, out=np.zeros_like(self.X),
                                             where=share > 0), self.X * 1e9)
        prio[~inst.usable] = 0.0
        order = list(range(G))
        if self.allocation == "las-agnostic":
            order = self.rng.permutation(G).tolist()
        fifo = self.allocation.startswith("fifo")
        left = self.n.copy()  # GPUs per type left this slot (Gavel's num_workers_left)
        taken: dict[int, int] = {}  # job -> type
        for g in order:
            cands = sorted((j for j in jobs if j not in taken and inst.usable[j, g]
                            and not (fifo and prio[j, g] <= 0)),
                           key=lambda j: (-prio[j, g], -self.deficit[j, g], -self.X[j, g], j))
            for j in cands:
                if self.D[j, g] <= left[g] + FIT_EPS:
                    left[g] -= self.D[j, g]
                    taken[j] = g
        ghosts = {j: taken.pop(j) for j in list(taken) if j in self.ghosts}
        out = self._place(taken, state.free.copy())
        runs = [(j, g) for j, (g, rows) in out.items()] + list(ghosts.items())
        for j, g in runs:  # time run: the slot, or the part the job needs
            if self.gavel_steps:
                spent = self._steps(j, g)
            else:
                rate = float(self.k[j] * inst.type_speed[j, g])
                spent = min(1.0, state.remaining[j] / rate) * self.slot_s
            self.ran[j, g] += spent
            self.type_ran[g] += spent
        self.lease = out
        return [(j, s, role, c) for j, (g, rows) in out.items() for s, role, c in rows]

    def _steps(self, j: int, g: int) -> float:
        """Gavel's micro-task (``scheduler.py``): min(int(T_g L), steps left) steps at T_g
        steps/s, the seconds returned; split over the k_j workers with integer division, it
        fails (no step counted) when a worker gets none, and the 5th failure drops the job
        (Gavel's MAX_FAILED_ATTEMPTS). Our work units end a job up to one slot before Gavel's
        steps do (Gavel runs int(T_g L) steps a round, so a few steps are left for one more
        round): such a job stays here as a *ghost* that keeps its type in the FIFO and takes its
        GPUs in the rounds (idle here, nearly so in Gavel) until Gavel would end or drop it."""
        thr = float(self.instance.jobs[j].provenance["throughput"][str(self.instance.types[g])])
        steps = min(int(thr * self.slot_s), self.steps_left[j])
        if j in self.ghosts and steps // int(self.k[j]) == 0:
            self.failures[j] += 1
            steps = 0
        self.steps_left[j] -= steps
        if j in self.ghosts and (self.steps_left[j] <= 0 or self.failures[j] >= MAX_FAILURES):
            self.ghosts.discard(j)
            self.changed = True  # Gavel ends or drops it now: recompute at the next round
        return steps / thr

    def _place(self, taken: dict[int, int], free: np.ndarray) -> dict[int, tuple[int, list]]:
        """Leases first (a job on the same type as last slot keeps its servers if they have
        room), then the other jobs, largest first, first fit on their type."""
        inst, out = self.instance, {}
        rest = []
        for j in sorted(taken, key=lambda j: (-self.k[j], j)):
            prev = self.lease.get(j)
            if prev is not None and prev[0] == taken[j] and _fits(inst, j, prev[1], free):
                apply(inst, j, prev[1], free)
                out[j] = prev
            else:
                rest.append(j)
        for j in rest:
            rows = self._first_fit(j, taken[j], free)
            if rows is not None:  # (only other resources than GPUs can refuse it)
                apply(inst, j, rows, free)
                out[j] = (taken[j], rows)
        return out

    def _first_fit(self, j: int, g: int, free: np.ndarray) -> list | None:
        """Rows for job j's k_j workers on type g's servers in instance order (several servers
        if need be) and its PSs on the PS servers in order, or None if they do not fit."""
        inst, H = self.instance, self.instance.H
        idx = self.servers_of[g]
        w = fill(np.arange(len(idx)), fit_count(free[idx], inst.type_demand[j, g]), int(self.k[j]))
        if w is None:
            return None
        p = fill(np.arange(inst.K), fit_count(free[H:], inst.ps_demand[j]), self.ps_of[j])
        if p is None:
            return None
        return [(int(idx[s]), 0, n) for s, n in w] + [(H + s, 1, n) for s, n in p]

    def stats(self) -> dict:
        return {"allocation": self.allocation, "computations": self.computations,
                "lps": self.lps, "recompute_s": self.recompute_s,
                "rigid_workers": self.k.tolist()}


def _fits(inst, job: int, rows, free: np.ndarray) -> bool:
    trial = free.copy()
    apply(inst, job, rows, trial)
    return bool((trial >= -FIT_EPS).all())


def _arrival_s(inst, job: int, slot_s: float) -> float:
    prov = inst.jobs[job].provenance or {}
    return float(prov.get("arrival_s", (inst.arrival[job] - 1) * slot_s))


class GavelLas(GavelPolicy):
    """``gavel-las``: Gavel's ``max_min_fairness_perf``."""

    name, allocation = "gavel-las", "las"


class GavelFtf(GavelPolicy):
    """``gavel-ftf``: Gavel's ``finish_time_fairness_perf``."""

    name, allocation = "gavel-ftf", "ftf"


class GavelMakespan(GavelPolicy):
    """``gavel-makespan``: Gavel's ``min_total_duration_perf``."""

    name, allocation = "gavel-makespan", "makespan"


class MaxMinFairness(GavelPolicy):
    """``max-min-fairness``: Gavel's type-blind ``max_min_fairness``."""

    name, allocation = "max-min-fairness", "las-agnostic"


class GavelFifo(GavelPolicy):
    """``gavel-fifo``: FIFO in Gavel's rounds, ``variant`` "textbook" or "gavel" (module
    docstring).

    ``seed`` (variant "gavel"): seeds the ``random.Random`` whose ``randrange`` draws the type
    Gavel's FIFO closes (Gavel's ``FIFOPolicy(seed=...)``, from its driver's ``--seed``); 11,
    the seed of Gavel's reference runs (``data/traces/gavel``), by default. Gavel's driver
    itself defaults to no seed (the draws then change from run to run). The textbook variant
    draws nothing."""

    name = "gavel-fifo"

    def __init__(self, *, variant: str = "textbook", seed: int = GAVEL_SEED,
                 recompute_s: float | None = None):
        if variant not in ("textbook", "gavel"):
            raise ValueError(f"variant: expected 'textbook' or 'gavel', got {variant!r}")
        self.allocation = "fifo" if variant == "textbook" else "fifo-gavel"
        super().__init__(seed=seed, recompute_s=recompute_s)
