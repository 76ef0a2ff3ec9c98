"""The early-stopping rules practitioners use, as replay controllers.

**Optuna** (``optuna-median``, ``optuna-sh``, ``optuna-hyperband``): Optuna's own
``MedianPruner``, ``SuccessiveHalvingPruner`` and ``HyperbandPruner`` with their default
arguments, driven through Optuna's ask-and-tell API exactly as a training loop drives them: a
trial starts with ``study.ask()``, reports each epoch's validation accuracy with
``trial.report(value, step=epoch)``, is stopped when ``trial.should_prune()`` says so (told
``PRUNED``), and is told its final accuracy (``COMPLETE``) after its last epoch. The study
maximises, lives in memory, and is named after the seed (Hyperband's bracket of a trial is a
hash of the study's name and the trial's number), so a replay is deterministic. Nothing of the
pruners is reimplemented here.

**ASHA** (``asha``): asynchronous successive halving, Li et al., MLSys 2020, Algorithm 2,
implemented here (promotion-based). Rungs k = 0, 1, ... at r eta^k epochs, the last rung at
the trial's final epoch; with the defaults of Ray Tune's ``AsyncHyperBandScheduler``
(``grace_period`` r = 1, ``reduction_factor`` eta = 4) a 40-epoch trial has rungs at 1, 4, 16
and 40 epochs. A trial that reaches a rung pauses there. Whenever a unit is free, ``get_job``
scans the rungs from the top down and promotes (resumes) the best not-yet-promoted trial of the
first rung k whose top ``floor(|rung k| / eta)`` trials hold one; if none, it starts a new
trial at rung 0. Ties rank by the study's order. Why our own beside Ray Tune's: Ray's
``ASHAScheduler`` (``tune-asha``, ``automl.tune``) is the *stopping* variant (a trial continues
iff it is in the top 1/eta when it reaches a rung, as Optuna's SH pruner does); the promotion
variant is the algorithm of the ASHA paper and differs from the stopping one in kind, so both
are compared. Trials still paused when the study ends count as stopped at their rung.
"""
from __future__ import annotations

import logging
from typing import Mapping

from .replay import CONTINUE, PAUSE, STOP, Controller


def _optuna():
    from .._extras import require

    optuna = require("optuna", extra="automl", feature="the Optuna pruners")
    logging.getLogger("optuna").setLevel(logging.WARNING)
    return optuna


class OptunaController(Controller):
    """Trials stopped by an Optuna pruner (``pruner``: "median", "successive-halving" or
    "hyperband"; ``options``: the pruner's keyword arguments, its defaults otherwise)."""

    PRUNERS = {"median": ("optuna-median", "MedianPruner"),
               "successive-halving": ("optuna-sh", "SuccessiveHalvingPruner"),
               "hyperband": ("optuna-hyperband", "HyperbandPruner")}

    def __init__(self, pruner: str = "median", **options):
        if pruner not in self.PRUNERS:
            raise ValueError(f"pruner: unknown pruner {pruner!r} (known: "
                             f"{', '.join(self.PRUNERS)})")
        self.name, self.pruner_class = self.PRUNERS[pruner]
        self.options = options
        self.make_pruner()  # fail fast on a bad option

    def make_pruner(self):
        optuna = _optuna()
        try:
            return getattr(optuna.pruners, self.pruner_class)(**self.options)
        except TypeError as e:
            raise ValueError(f"options: {self.pruner_class}: {e}") from None

    def reset(self, trials, workers, seed) -> None:
        super().reset(trials, workers, seed)
        optuna = _optuna()
        self.study = optuna.create_study(
            direction="maximize", pruner=self.make_pruner(), study_name=f"replay-{seed}",
            sampler=optuna.samplers.RandomSampler(seed=seed))
        self.running: dict[int, object] = {}
        self.pruned = 0

    def start_trial(self, trial: int) -> None:
        self.running[trial] = self.study.ask()

    def observe(self, trial, epoch, value, seconds, now) -> str:
        optuna = _optuna()
        ot = self.running[trial]
        ot.report(value, step=epoch)
        if epoch == self.trials[trial].epochs:
            self.study.tell(ot, value)
            del self.running[trial]
            return CONTINUE
        if ot.should_prune():
            self.study.tell(ot, state=optuna.trial.TrialState.PRUNED)
            del self.running[trial]
            self.pruned += 1
            return STOP
        return CONTINUE

    def stats(self) -> dict:
        return {"pruned": self.pruned, "pruner": self.pruner_class,
                "pruner_options": dict(self.options)}


def optuna_median(**options) -> OptunaController:
    return OptunaController("median", **options)


def optuna_sh(**options) -> OptunaController:
    return OptunaController("successive-halving", **options)


def optuna_hyperband(**options) -> OptunaController:
    return OptunaController("hyperband", **options)


def asha_rungs(epochs: int, grace_period: int, reduction_factor: int) -> list[int]:
    """Epochs of the rungs r eta^k below ``epochs``, then ``epochs`` itself."""
    rungs, r = [], grace_period
    while r < epochs:
        rungs.append(r)
        r *= reduction_factor
    return rungs + [epochs]


class AshaController(Controller):
    """Promotion-based asynchronous successive halving (see the module docstring)."""

    name = "asha"

    def __init__(self, grace_period: int = 1, reduction_factor: int = 4):
        for field, v, low in (("grace_period", grace_period, 1),
                              ("reduction_factor", reduction_factor, 2)):
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"{field}: expected an integer >= {low}, got {v!r}")
        self.grace_period, self.eta = grace_period, reduction_factor

    def reset(self, trials, workers, seed) -> None:
        super().reset(trials, workers, seed)
        self.order = {t.trial: n for n, t in enumerate(trials)}
        self.rungs = {t.trial: asha_rungs(t.epochs, self.grace_period, self.eta) for t in trials}
        self.members: dict[int, list[tuple[float, int, int]]] = {}  # rung -> (-value, order, t)
        self.promoted: dict[int, set[int]] = {}
        self.promotions = 0

    def observe(self, trial, epoch, value, seconds, now) -> str:
        rungs = self.rungs[trial]
        if epoch in rungs[:-1]:
            k = rungs.index(epoch)
            self.members.setdefault(k, []).append((-value, self.order[trial], trial))
            return PAUSE
        return CONTINUE

    def get_job(self) -> int | None:
        """A trial to promote (top rung first), else a new one, else None."""
        for k in sorted(self.members, reverse=True):
            ranked = sorted(self.members[k])
            top = ranked[:len(ranked) // self.eta]
            done = self.promoted.setdefault(k, set())
            for _, _, t in top:
                if t not in done:
                    done.add(t)
                    self.promotions += 1
                    return t
        if self.queue:
            return self.queue.popleft()
        return None

    def plan(self, running: Mapping[int, int], capacity: int, now: float):
        starts = []
        for _ in range(capacity - len(running)):
            t = self.get_job()
            if t is None:
                break
            starts.append(t)
        return starts, {t: 1 for t in [*running, *starts]}

    def why_none_completed(self) -> str | None:
        """A trial leaves rung k only in the top ``floor(|rung k| / eta)``, so reaching the
        last of n rungs takes at least eta^(n-1) trials at the first rung."""
        if not self.trials:
            return None
        epochs = max(t.epochs for t in self.trials.values())
        rungs = asha_rungs(epochs, self.grace_period, self.eta)
        needed = self.eta ** (len(rungs) - 1)
        if len(self.trials) >= needed:
            return None
        return (f"with reduction_factor (eta) {self.eta}, a trial is promoted from a rung only "
                f"when it ranks in the top 1/{self.eta} of the trials that reached it; rungs at "
                f"epochs {', '.join(map(str, rungs))}, so one trial reaches epoch {epochs} only "
                f"after at least {self.eta}^{len(rungs) - 1} = {needed} trials, and the study "
                f"has {len(self.trials)} (use more trials, a smaller reduction_factor or a "
                f"larger grace_period)")

    def stats(self) -> dict:
        return {"promotions": self.promotions, "grace_period": self.grace_period,
                "reduction_factor": self.eta}
