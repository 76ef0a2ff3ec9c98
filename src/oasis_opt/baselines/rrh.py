"""RRH: the Risk-Reward Heuristic of Irwin, Grit and Chase (HPDC 2004), as the OASiS paper
uses it (paper §V baseline 3).

Each job i has a fixed worker number k_i ~ U{1..30} (``fixed_workers``: seeded, capped at N_i,
at its workload and at what fits on the empty cluster) with ceil(k_i b_i / B_i) PSs; a job
runs with exactly these or not at all. Formulas, at slot t, with r_j the remaining
worker-slots of job j and f_j(c) its utility when it completes in slot c (0 for c > T: a job
unfinished by T earns nothing, A7):

* run time still needed     d_j(t) = ceil(r_j / k_j)
* completion if run now     C_j(t) = t + d_j(t) - 1
* remaining utility gain    G_j(t) = f_j(C_j(t))
* loss of j if delayed by D L_j(D, t) = f_j(C_j(t)) - f_j(C_j(t) + D)

Admission (at arrival, t = a_i), with A = the admitted, unfinished jobs (running or not)::

    delay cost  DC_i = sum_{j in A} L_j(d_i(t), t)
    admit i  iff  k_i > 0  and  G_i(t) - DC_i > theta          (theta = 0)

Pause / keep, at every event (an arrival, or the slot after a completion), with W = the
admitted, unfinished jobs not running now::

    opportunity cost  OC_j = sum_{l in W, l != j} L_l(d_j(t), t)
    net value         V_j  = G_j(t) - OC_j

* a running job with V_j <= 0 is paused (its containers are released; its progress is kept,
  since training is asynchronous); otherwise it keeps its containers;
* a waiting job with V_j <= 0 stays paused; the waiting jobs with V_j > 0 start in decreasing
  order of reward rate V_j / d_j(t) (Irwin et al.'s FirstReward ranking, present value and
  opportunity cost weighted equally; ties by arrival, then instance order) when their k_i
  workers and PSs can be placed; one that cannot be placed waits (later ones may still start).

Documented choices (A8): the delay cost of admission assumes, pessimistically, that every
admitted unfinished job is delayed by the newcomer's whole run time (A8's literal definition);
the opportunity cost of running a job counts only the jobs still waiting; decisions are taken
at events only; placement round-robin by default, as the paper says for RRH.
"""
from __future__ import annotations

import math

import numpy as np

from ..model.numerics import DONE_EPS
from ..sim.placement import Placement, apply
from .common import EventPolicy, fixed_workers


class RrhPolicy(EventPolicy):
    name = "rrh"

    def __init__(self, *, seed: int = 0, placement: str | Placement = "round-robin",
                 max_workers: int = 30, theta: float = 0.0):
        super().__init__(seed=seed, placement=placement)
        if max_workers < 1:
            raise ValueError(f"max_workers: must be >= 1, got {max_workers}")
        if not math.isfinite(theta):
            raise ValueError(f"theta: must be finite, got {theta}")
        self.max_workers = int(max_workers)
        self.theta = float(theta)

    def start(self, instance, state) -> None:
        super().start(instance, state)
        self.k = fixed_workers(instance, self.seed, self.max_workers)
        T = instance.horizon
        # f_j(c) for c in 0..T+1, with f_j(T+1) = 0: completing after T earns nothing (A7)
        self.value = np.concatenate([instance.utility_table, np.zeros((instance.I, 1))], axis=1)
        self.T = T
        self.rejected = 0
        self.paused = 0  # running jobs paused
        self.held_back = 0  # (event, waiting job) pairs left paused because V <= 0
        self.decision_log: list[dict] = []

    # ---- the formulas of the module docstring -------------------------------------------
    def run_time(self, jobs: np.ndarray, state) -> np.ndarray:
        """d_j(t) = ceil(r_j / k_j)."""
        return np.ceil(state.remaining[jobs] / self.k[jobs] - DONE_EPS).astype(np.int64)

    def gain(self, jobs: np.ndarray, t: int, state) -> np.ndarray:
        """G_j(t) = f_j(t + d_j - 1), 0 beyond T."""
        c = np.minimum(t + self.run_time(jobs, state) - 1, self.T + 1)
        return self.value[jobs, c]

    def delay_loss(self, jobs: np.ndarray, delay: int, t: int, state) -> float:
        """sum_j L_j(delay, t) over ``jobs``."""
        if len(jobs) == 0:
            return 0.0
        c = t + self.run_time(jobs, state) - 1
        now = self.value[jobs, np.minimum(c, self.T + 1)]
        later = self.value[jobs, np.minimum(c + delay, self.T + 1)]
        return float((now - later).sum())

    # ---- admission ---------------------------------------------------------------------
    def admit(self, job, t, state) -> bool:
        if self.k[job] == 0:
            self.rejected += 1
            return False
        one = np.array([job])
        d = int(self.run_time(one, state)[0])
        others = state.active()
        gain = float(self.gain(one, t, state)[0])
        cost = self.delay_loss(others, d, t, state)
        ok = gain - cost > self.theta
        self.rejected += not ok
        self.decision_log.append({"job": int(job), "slot": int(t), "gain": gain,
                                  "delay_cost": cost, "admitted": bool(ok)})
        return bool(ok)

    # ---- pause / keep / start ------------------------------------------------------------
    def decide(self, t, state) -> None:
        unfinished = state.active()
        if len(unfinished) == 0:
            return
        running = np.array([j in self.held for j in unfinished.tolist()], dtype=bool)
        waiting = unfinished[~running]
        d = self.run_time(unfinished, state)
        gain = self.gain(unfinished, t, state)
        net = np.empty(len(unfinished))
        for n, j in enumerate(unfinished.tolist()):
            others = waiting[waiting != j]
            net[n] = gain[n] - self.delay_loss(others, int(d[n]), t, state)
        for j in unfinished[running & (net <= 0)].tolist():
            del self.held[j]
            self.paused += 1
        self.held_back += int((~running & (net <= 0)).sum())
        cand = np.flatnonzero(~running & (net > 0))
        # reward rate V/d descending; ties by position in ``unfinished`` (arrival order)
        cand = cand[np.lexsort((cand, -(net[cand] / d[cand])))]
        free = self.free_after_held()
        for n in cand.tolist():
            j = int(unfinished[n])
            rows = self.placement.place(self.instance, j, int(self.k[j]), free)
            if rows is not None:
                apply(self.instance, j, rows, free)
                self.held[j] = rows

    def stats(self) -> dict:
        return {**super().stats(), "rejected": self.rejected, "paused": self.paused,
                "held_back": self.held_back, "workers": self.k.tolist(),
                "admission": self.decision_log}
