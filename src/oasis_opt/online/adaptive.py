"""OASiS with a floor price that learns within the instance (``"oasis-adaptive"``; issue #29).

OASiS's competitive ratio holds for any floor L at most the oracle floor, but what it earns
depends on L by orders of magnitude (``paper_figs/oasis_floor_price.md``), and the best L
differs between instances of one workload. This variant chooses L online, from what it has seen
of the instance so far, with no look-ahead:

* U comes from a pricing document fixed in advance (``pricing=``, e.g. ``estimate-pricing``'s
  file: U by eqs. (23)-(24) over a history), L1 = L2 = L from a grid of floors (``grid``,
  default ``online.estimate.DEFAULT_FLOOR_GRID``);
* beside the real policy run ``len(grid)`` **shadows**, plain OASiS at each floor of the grid
  on the same arrivals. A shadow commits its own plans on its own copy of the cluster and never
  acts; its **score** is the utility its admitted plans earn, f_i(t̂_i - a_i), known at
  admission since OASiS fixes a whole plan then;
* before each decision the real policy takes the floor of the leading shadow (follow the
  leader: the largest score over the jobs decided so far; ties keep the current floor, else the
  smaller one). Before any job has been decided it starts at the grid floor nearest the
  document's own L (the history's choice). On a switch the prices of every (slot, server)
  are recomputed from the committed amounts with the new floor (eq. 22), so every decision is
  plain OASiS at the prices of the moment;
* the job is then decided by Alg. 1 at those prices, and the shadows decide it at theirs.

**A prior from the history** (``prior=``, optional). Ten jobs tell little about which floor an
instance wants; the history that chose the starting floor knows more. With a prior (the
calibration table of ``estimate_pricing``: the history's mean total utility ``m_g`` per grid
floor and its mean job count ``n``; ``FloorCalibration.prior()``, or the ``--report`` file of
``oasis-opt estimate-pricing``) the leader is taken on

    score_g + w * m_g * max(0, 1 - k / n),

k the jobs decided so far, w ``prior_weight`` (default 1): the history's expectation of what
floor g earns on the jobs still to come, fading as the instance's own evidence grows. It reads
only the history and k (no look-ahead: the instance's own job count is not used). With
``prior_weight=0`` it is the plain leader.

**Invariants** (``tests/test_online_adaptive.py``): every admitted plan has payoff > 0 at the
prices it saw (Alg. 1's rule, at the floor in force); the floor in force for job k is a function
of jobs 1..k-1 (and of the prior) only (the decisions for the first k jobs of an instance are those for the
instance cut after job k); with a one-floor grid the policy is OASiS at that floor, plan for plan.

**Guarantee (proof sketch, under stated hypotheses; not a theorem of the paper).** Let job k* be
the last at which the floor switches, L* the floor from then on, and alpha* = max_r ln(U^r /
L*) the alpha of (U, L*) (``Pricing.alpha``). From k* on the policy is OASiS with the constant
pricing (U, L*) on the jobs J' = {k*, ...}, started from the cluster with the earlier plans
committed. Theorem 4's primal-dual argument goes through with an initial commitment g0: each
admission raises the dual objective by at most 2 alpha* times its utility (the price update
(22) is the same differential inequality), and the dual built from the final prices is feasible
for J' on the residual capacity, provided L* is at most the oracle floor of J' (the hypothesis
Theorem 4 needs, which an estimated floor may break). Hence utility(J') >= OPT'(J') / (2
alpha*), OPT' the offline optimum of J' on the capacity the first k* - 1 plans leave. The **cost
of learning** is what the first k* - 1 jobs contribute: at most their total utility at their
fastest plans, and it is also what the shadow that ends ahead has over the real policy, since
both run OASiS at L* on J' once the floor settles but from different commitments. Follow the
leader switches at most ``len(grid) - 1`` times per change of leadership; on the paper's
workloads the floor settles within the first tens of jobs (``stats["switches"]``). The prior
changes only which floor leads before the evidence outweighs it: the argument above holds for
whatever k* and L* it leads to, and after job n the prior term is 0, so from then on the
switches are those of the plain leader. Without the
hypotheses (an estimated L* above the oracle floor, or a floor that never settles) nothing is
guaranteed beyond the invariants; ``paper_figs/pricing.md`` measures what it earns.

Cost: the shadows make a run ``len(grid) + 1`` OASiS runs (15 + 1 by default); they share
nothing with the real policy but the instance. ``extend`` is refused (the shadows would have to
replay): the service replays instead. A cancellation (``on_cancel``) is released in the real
policy and in every shadow, whose score loses the job's utility.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..model import Instance
from .estimate import DEFAULT_FLOOR_GRID, check_grid
from .oasis import OasisPolicy, _resource_major
from .pricing import parse_pricing, read_pricing_file, resolve_pricing


def _document(spec: Any) -> dict:
    """The pricing document behind ``spec`` (a dict or a file path; not "oracle", whose U
    reads every job of the instance, which an online floor must not)."""
    if isinstance(spec, dict):
        return {"format": spec.get("format"), **parse_pricing(spec)}
    if isinstance(spec, str) and spec == "oracle":
        raise ValueError("pricing: oasis-adaptive needs U fixed in advance (a pricing file or "
                         "document, e.g. from `oasis-opt estimate-pricing`), not 'oracle', "
                         "whose U is computed from every job of the instance")
    if isinstance(spec, str) or hasattr(spec, "__fspath__"):
        return {"format": "oasis-opt/pricing@1", **read_pricing_file(spec)}
    raise ValueError(f"pricing: expected a file path or a pricing document, got {spec!r}")


def _prior(spec: Any, grid: tuple[float, ...]) -> tuple[np.ndarray | None, float | None]:
    """``(m_g per floor, n)`` from a ``prior`` option (class docstring), or ``(None, None)``."""
    if spec is None:
        return None, None
    if hasattr(spec, "prior") and callable(spec.prior):  # a FloorCalibration
        spec = spec.prior()
    elif isinstance(spec, str) or hasattr(spec, "__fspath__"):
        import json

        try:
            with open(spec, encoding="utf-8") as f:
                spec = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"prior: cannot read {str(spec)!r}: {e}") from None
    if not isinstance(spec, dict):
        raise ValueError(f"prior: expected a calibration table (dict, FloorCalibration or file), "
                         f"got {type(spec).__name__}")
    missing = [k for k in ("grid", "mean_utility", "history_jobs") if k not in spec]
    if missing:
        raise ValueError(f"prior: missing {', '.join(missing)} (write the table with "
                         "`oasis-opt estimate-pricing --report`, which records history_jobs)")
    try:
        prior_grid = check_grid(spec["grid"])
    except ValueError as e:
        raise ValueError(f"prior: {e}") from None
    if len(prior_grid) != len(grid) or not np.allclose(prior_grid, grid, rtol=1e-12, atol=0):
        raise ValueError(f"prior: its grid {list(prior_grid)} is not the policy's grid "
                         f"{list(grid)}")
    mean = np.asarray(spec["mean_utility"], dtype=float)
    if mean.shape != (len(grid),) or not np.all(np.isfinite(mean)):
        raise ValueError("prior: mean_utility needs one finite value per grid floor")
    jobs = spec["history_jobs"]
    if isinstance(jobs, list):  # the report's per-instance counts
        jobs = float(np.mean(jobs)) if jobs else 0.0
    if isinstance(jobs, bool) or not isinstance(jobs, (int, float)) or not jobs >= 1:
        raise ValueError(f"prior: history_jobs must be a job count >= 1, got {jobs!r}")
    # the report's grid is sorted as the policy's: keep the order of ``spec["grid"]``'s sort
    order = np.argsort(np.asarray(spec["grid"], dtype=float))
    return mean[order], float(jobs)


def floor_of(doc: dict) -> float:
    """The document's floor as one number: the geometric mean of its floors (per pool, per
    resource), the point of the grid it starts nearest to."""
    floors = []
    for key in ("L_worker", "L_ps"):
        v = doc[key]
        floors += list(v.values()) if isinstance(v, dict) else [v]
    return float(np.exp(np.mean(np.log(floors))))


class AdaptiveOasisPolicy(OasisPolicy):
    """OASiS whose floor L follows the leading shadow over a grid of floors (module docstring).

    Options: ``pricing`` (required: a pricing file or document; its U prices every run, its L
    picks the starting floor), ``grid`` (the floors, increasing after sorting; each at most
    every U), ``prior`` (optional: the history's calibration table, a dict with ``grid``,
    ``mean_utility`` and ``history_jobs``, a ``FloorCalibration`` with job counts, or the path
    of ``estimate-pricing --report``'s file; its grid must be ``grid``), ``prior_weight``
    (w >= 0, default 1), ``backend``, ``granularity`` (as OASiS's).
    """

    name = "oasis-adaptive"

    def __init__(self, pricing: Any = None, grid: Sequence[float] = DEFAULT_FLOOR_GRID,
                 backend: str = "numpy", granularity: str = "worker-slot",
                 prior: Any = None, prior_weight: float = 1.0):
        self.grid = check_grid(grid)
        self.prior_mean, self.prior_jobs = _prior(prior, self.grid)
        if (isinstance(prior_weight, bool) or not isinstance(prior_weight, (int, float))
                or not math.isfinite(prior_weight) or prior_weight < 0):
            raise ValueError(f"prior_weight: expected a finite number >= 0, got {prior_weight!r}")
        self.prior_weight = float(prior_weight)
        self.documents: list[dict] | None = None
        self.start_index = 0
        self.source: str | None = None
        if pricing is None:  # constructible without options (the registry's rule); refused
            # when started, in ``check`` / ``start``
            super().__init__(backend=backend, granularity=granularity, server_index=False)
            return
        doc = _document(pricing)
        # where U came from, for the result's stats (the documents below are dicts)
        self.source = None if isinstance(pricing, dict) else f"file:{pricing}"
        documents = [{**doc, "L_worker": L, "L_ps": L} for L in self.grid]
        for n, d in enumerate(documents):  # a floor above some U is refused here, by name
            try:
                parse_pricing(d)
            except ValueError as e:
                raise ValueError(f"grid[{n}]: {e}") from None
        self.documents = documents
        start = math.log(floor_of(doc))
        self.start_index = int(np.argmin([abs(math.log(L) - start) for L in self.grid]))
        super().__init__(backend=backend, pricing=documents[self.start_index],
                         granularity=granularity, server_index=False)

    def _documents(self) -> list[dict]:
        if self.documents is None:
            raise ValueError("pricing: oasis-adaptive needs a pricing file or document for U "
                             "(e.g. from `oasis-opt estimate-pricing`)")
        return self.documents

    def check(self, instance: Instance, state: Any) -> None:
        for d in self._documents():
            if instance.I:  # as OASiS: an instance without jobs needs no prices
                resolve_pricing(d, instance)
        super().check(instance, state)

    def start(self, instance: Instance, state: Any) -> None:
        self._documents()
        self.current = self.start_index
        documents = self._documents()
        self.pricing_spec = documents[self.current]
        super().start(instance, state)
        self.shadows = [OasisPolicy(backend=self.backend, pricing=d, granularity=self.granularity,
                                    server_index=False) for d in documents]
        for shadow in self.shadows:
            shadow.start(instance, state)
        self.scores = np.zeros(len(self.grid))
        self.floor_index: list[int | None] = [None] * instance.I  # the floor job i was decided at
        self.switches = 0
        self.decided = 0  # jobs decided so far (k of the prior term)

    def extend(self, instance: Instance, state: Any) -> bool:
        return False

    def prior_term(self) -> np.ndarray:
        """``w * m_g * max(0, 1 - k / n)`` per floor (zeros without a prior)."""
        if self.prior_mean is None or self.prior_jobs is None:
            return np.zeros(len(self.grid))
        share = max(0.0, 1.0 - self.decided / self.prior_jobs)
        return self.prior_weight * share * self.prior_mean

    def leader(self) -> int:
        """The floor to decide the next job at: the best score (plus the prior term); ties
        keep the current floor, else the smallest."""
        total = self.scores + self.prior_term()
        best = total.max()
        ahead = np.flatnonzero(total == best)
        return self.current if self.current in ahead else int(ahead[0])

    def _switch(self, index: int) -> None:
        """Reprice every (slot, server) from the committed amounts at floor ``grid[index]``."""
        inst = self.instance
        self.current = index
        self.pricing_spec = self._documents()[index]
        self.pricing = resolve_pricing(self.pricing_spec, inst)
        # laid out as ``OasisPolicy.start`` lays out its arrays (resource-major)
        self.worker_price = _resource_major(self.pricing.worker_prices(self.worker_used,
                                                                       inst.worker_capacity))
        self.ps_price = _resource_major(self.pricing.ps_prices(self.ps_used, inst.ps_capacity))
        self.worker_min = self.worker_price.min(axis=1)
        self.ps_min = self.ps_price.min(axis=1)
        self.switches += 1

    def on_arrival(self, job: int, t: int, state: Any) -> bool:
        leader = self.leader()
        if leader != self.current:
            self._switch(leader)
        self.floor_index[job] = self.current
        admit = super().on_arrival(job, t, state)
        self.decided += 1
        # the shadows decide the same job after the real policy: their scores for job k+1
        # hold jobs 1..k only
        utility = self.instance.jobs[job].utility
        a = int(self.instance.arrival[job])
        for g, shadow in enumerate(self.shadows):
            if shadow.on_arrival(job, t, state):
                completion = shadow.planned[job]
                assert completion is not None
                self.scores[g] += float(utility(completion - a))
        return admit

    def on_cancel(self, job: int, t: int, state: Any) -> None:
        """Release the job's reservation from slot t (OASiS's ``on_cancel``, at the floor in
        force) in the real policy and in every shadow; a cancelled job earns nothing, so its
        utility leaves the scores of the shadows that had admitted it."""
        super().on_cancel(job, t, state)
        utility = self.instance.jobs[job].utility
        a = int(self.instance.arrival[job])
        for g, shadow in enumerate(self.shadows):
            if shadow.parts_by_job.get(job):
                completion = shadow.planned[job]
                assert completion is not None
                self.scores[g] -= float(utility(completion - a))
                shadow.on_cancel(job, t, state)

    def stats(self) -> dict:
        out = super().stats()
        if self.source is not None and "pricing" in out:
            out["pricing"] = {**out["pricing"], "source": self.source}
        out["adaptive"] = {"grid": list(self.grid), "start_floor": self.grid[self.start_index],
                           "final_floor": self.grid[self.current], "switches": self.switches,
                           "prior": None if self.prior_mean is None else {
                               "weight": self.prior_weight, "history_jobs": self.prior_jobs,
                               "mean_utility": [float(m) for m in self.prior_mean]},
                           "shadow_utility": [float(s) for s in self.scores],
                           "job_floor": [None if i is None else self.grid[i]
                                         for i in self.floor_index]}
        return out
