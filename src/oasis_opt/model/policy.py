"""What the simulator asks of a slot-by-slot policy (the ``OnlinePolicy`` hooks) and of a
placement (the ``Placement`` protocol).

The simulator (``oasis_opt.sim.core.simulate``) owns time and capacity and sits above the
policies that implement these hooks (OASiS in ``online``, the baselines), so the base class sits
here, at the bottom, and ``solve`` names the simulator by a ``"module:attr"`` string.

Online policies take no time limit: they decide each job as it arrives, and stopping the slot
loop part-way would leave admitted jobs unfinished (an invalid schedule), so ``solve`` has no
``time_limit`` parameter and passing one is a ``TypeError`` (the CLI reports ``--time-limit`` as
bad input for them). Time limits belong to the offline solvers.
"""
from __future__ import annotations

from typing import Any, Iterable, Protocol, runtime_checkable

import numpy as np

from .registry import resolve
from .schedule import Schedule

SIMULATOR = "oasis_opt.sim.core:simulate"
ONLINE_NO_TIME_LIMIT = ("an online policy decides each job as it arrives and takes no time limit "
                        "(time limits are for the offline solvers)")


class OnlinePolicy:
    """Base class of slot-by-slot policies; ``solve`` runs the simulator.

    ``state`` below is the simulator's ``oasis_opt.sim.state.ClusterState``.
    """

    name = "online"

    # True: the simulator may stop once every job has arrived and is done or rejected (the
    # slots after it could hold no container); the policy's state and stats must then not
    # depend on the idle slots up to the horizon being stepped
    stops_when_done = False

    def start(self, instance: Any, state: Any) -> None:  # noqa: B027 - optional hook
        """Called once before slot 1."""

    def check(self, instance: Any, state: Any) -> None:
        """Raise ``ValueError`` (or ``TypeError``) when the policy cannot run ``instance`` (a
        pricing without a U for a resource a job demands, a typed cluster for an untyped
        variant ...): what ``start`` would refuse. The scheduling service checks every job it
        accepts so, on the cluster with that job alone. Default: ``start`` on ``state`` (a
        fresh ``ClusterState``), so the policy must be a throwaway one; a policy whose start is
        costly checks without it."""
        self.start(instance, state)

    def on_arrival(self, job: int, t: int, state: Any) -> bool | None:
        """Admit (True), reject (False) or defer (None) a job arriving in slot t. Default: admit."""
        return True

    def allocate(self, t: int, state: Any) -> Iterable[tuple[int, int, int, int]]:
        """This slot's containers, rows ``(job, global server, role, count)``."""
        raise NotImplementedError

    def on_slot_end(self, t: int, state: Any, completed: np.ndarray) -> None:  # noqa: B027
        """Called after progress is credited; ``completed`` = jobs finished in slot t."""

    def on_cancel(self, job: int, t: int, state: Any) -> None:  # noqa: B027 - optional hook
        """``job`` is withdrawn from slot t on (the scheduling service's cancel; it gets no
        containers from slot t). A policy that reserved capacity ahead releases the job's
        reservation of slots t.. here; the default reserves nothing, so does nothing."""

    def replan(self, job: int, t: int, remaining: float, state: Any) -> dict | None:
        """``job`` fell behind: after slot ``t`` it still has ``remaining`` work units to do
        (measured, ``state.remaining[job]``), more than its plan expected. A policy that fixed a
        plan ahead (OASiS) re-plans the remaining work over slots t+1.. here and returns what it
        did (a dict, ``OasisPolicy.replan``); the default returns None: a policy that decides
        slot by slot re-decides from ``state.remaining`` at its next ``allocate`` anyway."""
        return None

    def extend(self, instance: Any, state: Any) -> bool:
        """Jobs were appended to the instance mid-run (the scheduling service accepts jobs
        while it runs): ``instance`` is the same cluster with the old jobs first, unchanged, and
        new ones arriving after slot ``state.t``; ``state`` is extended already. Return True
        when the policy now decides as a policy started on ``instance`` would have; False
        (the default) when it cannot, and the caller starts a fresh policy and replays the
        slots decided so far. A policy whose start reads only the cluster and per-job values
        of each job can take the new jobs here; one that reads all jobs at once (oracle
        pricing, seeded draws sized by the job count) cannot."""
        return False

    def stats(self) -> dict:
        """Statistics for the schedule; wall-clock seconds go under the ``"timing"`` key (the
        only part of a result that may differ between two runs of the same policy)."""
        return {}

    # what a policy that plans ahead (OASiS fixes whole plans at admission) can say of the future;
    # the scheduling service shows it, the simulator does not need it
    def plan(self, job: int) -> list[tuple[int, int, int, int]] | None:
        """The job's committed allocations ``[(slot, server, role, count)]``, or None."""
        return None

    def committed(self) -> np.ndarray | None:
        """Resources reserved per slot, server and resource (shape (T+1, H+K, R), row 0
        unused), or None: a policy that decides slot by slot reserves nothing ahead."""
        return None

    def solve(self, instance: Any, *, progress: bool = False) -> Schedule:
        """Run the simulator over slots 1..T and return the schedule (``progress``: a bar)."""
        simulate = resolve(SIMULATOR)
        schedule: Schedule = simulate(instance, self, show_progress=progress)
        return schedule


Rows = list[tuple[int, int, int]]
"""A placement's rows ``(global server, role, count)``: worker servers 0..H-1, PS servers H..H+K-1."""


@runtime_checkable
class Placement(Protocol):
    """What a policy asks of a placement: *where* its containers go once it has decided *how
    many* (``sim.placement`` holds the greedy base class, first-fit, round-robin, random and
    packing; ``cluster.tree`` the topology-aware tree placement). ``free`` is the free capacity
    (H+K, R) and is never modified; ``None``: the containers do not fit."""

    name: str

    def reset(self, instance: Any) -> None:
        """Called once before a run (a placement may keep state between slots)."""

    def place(self, instance: Any, job: int, k: int, free: np.ndarray) -> Rows | None:
        """Rows for k workers and the PSs constraint (6) gives them."""

    def place_counts(self, instance: Any, job: int, workers: int, ps: int, free: np.ndarray, *,
                     on_type: int | None = None) -> Rows | None:
        """Rows for exactly ``workers`` workers and ``ps`` PSs (workers on ``on_type`` if given)."""

    def place_most(self, instance: Any, job: int, k_max: int, free: np.ndarray, *,
                   remaining: float | None = None) -> tuple[int, Rows]:
        """The largest k <= k_max that fits, with its rows (0 and [] if none)."""
