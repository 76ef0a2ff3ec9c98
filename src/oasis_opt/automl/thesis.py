"""``automl-thesis``: predict, classify, stop the poor trials, give spare units to promising ones.

The controller of the thesis's third contribution (reference 6.2), on a study capped at
``workers`` units:

1. **Warm-up and rungs.** A trial of E epochs is judged at its rungs r0, 2 r0, 4 r0, ... < E
   with r0 = max(1, round(``warmup`` E)) (10 % of training by default: epochs 4, 8, 16, 32 of
   40), between them it runs on.
2. **Prediction** of its final accuracy and remaining time (``predict.predict``): the regression
   on partial curves and configurations (Baker et al.) once ``min_completed`` trials of the
   same length have completed, refitted each time that number has grown by a quarter; before,
   the BIC-weighted parametric ensemble (Domhan et al.); with fewer than 3 points (too few for
   any family), the last value. With ``calibrate`` (default) the std is the split-conformal
   one (``predict`` module docstring): the regression's from its out-of-bag errors, the
   parametric ensemble's rescaled by the conformal quantile of its normalised errors on the
   completed trials of the same length cut at the same epoch (once 9 have completed);
   ``classify``'s probabilities are read from that calibrated std.
3. **Classification** against the best completed trial (``classify.classify``): poor if
   P(final > best) < ``delta``, promising if P(final >= best - ``epsilon``) >= 0.5, else
   uncertain. Poor trials stop at once.
4. **Allocation.** Every running trial holds one unit. Spare units (the cap minus the running
   trials) go first to the promising trials by water-filling on expected improvement per
   predicted remaining second, EI / remaining, each trial up to ``max_units`` in all
   (``classify.water_fill``; as HyperSched and Ray's ``DistributeResourcesToTopJob``); what
   is left starts new trials in the study's order. The allocation is recomputed at every
   event, so a trial that stops being promising gives its extra units back.

The thesis's rule 6 (end the study when no remaining trial is predicted to improve) is not a
separate rule here: with a finite pool of trials it is the poor rule applied to the last
running trials; the budget rule is the replay's.
"""
from __future__ import annotations

from typing import Mapping

from .classify import (POOR, PROMISING, Thresholds, classify, expected_improvement,
                       water_fill)
from dataclasses import replace

from .predict import (Z90, ParametricPredictor, Prediction, RegressionPredictor,
                      conformal_quantile, predict)
from .replay import CONTINUE, STOP, Controller

REFIT_GROWTH = 1.25


class ThesisController(Controller):
    """The ``automl-thesis`` controller (see the module docstring)."""

    name = "automl-thesis"

    def __init__(self, delta: float = 0.05, epsilon: float = 0.005, promising_at: float = 0.5,
                 warmup: float = 0.1, max_units: int = 4, min_completed: int = 10,
                 calibrate: bool = True):
        self.thresholds = Thresholds(delta, epsilon, promising_at)
        if not 0.0 < warmup <= 1.0:
            raise ValueError(f"warmup: must be in (0, 1], got {warmup!r}")
        for field, v, low in (("max_units", max_units, 1), ("min_completed", min_completed, 3)):
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"{field}: expected an integer >= {low}, got {v!r}")
        self.warmup, self.max_units, self.min_completed = warmup, max_units, min_completed
        self.calibrate = bool(calibrate)

    def rungs(self, epochs: int) -> list[int]:
        r = max(1, round(self.warmup * epochs))
        out = []
        while r < epochs:
            out.append(r)
            r *= 2
        return out

    def reset(self, trials, workers, seed) -> None:
        super().reset(trials, workers, seed)
        self.values: dict[int, list[float]] = {t.trial: [] for t in trials}
        self.seconds: dict[int, list[float]] = {t.trial: [] for t in trials}
        self.rung_of = {t.trial: set(self.rungs(t.epochs)) for t in trials}
        self.pred: dict[int, Prediction] = {}
        self.cls: dict[int, str] = {}
        self.best: float | None = None
        self.completed: dict[int, list[int]] = {}  # epochs -> completed trials
        self.regressions: dict[int, RegressionPredictor] = {}
        self.parametric = ParametricPredictor()
        self.conformal: dict[tuple[int, int], tuple[int, float | None]] = {}
        self.counts = {"stopped": 0, "decisions": 0, "by_method": {}, "stopped_at": {},
                       "most_units": 1, "refits": 0}

    def _regression(self, epochs: int) -> RegressionPredictor | None:
        done = self.completed.get(epochs, [])
        reg = self.regressions.get(epochs)
        if len(done) >= self.min_completed and (reg is None or
                                                len(done) >= REFIT_GROWTH * reg.trained_on):
            reg = RegressionPredictor(seed=self.seed).fit(
                [self.values[t] for t in done], [self.trials[t].config for t in done])
            self.regressions[epochs] = reg
            self.counts["refits"] += 1
        return reg

    def _parametric_scale(self, epochs: int, k: int) -> float | None:
        """Conformal quantile of |final - mean| / std of the parametric ensemble on the
        completed trials of ``epochs`` cut at epoch k; refitted when they grew by a quarter."""
        done = self.completed.get(epochs, [])
        n, q = self.conformal.get((epochs, k), (0, None))
        if len(done) >= 9 and (n == 0 or len(done) >= REFIT_GROWTH * n):
            scores = []
            for t in done:
                mean, std, _ = self.parametric.predict(self.values[t][:k], epochs)
                scores.append(abs(self.values[t][-1] - mean) / std)
            q = conformal_quantile(scores)
            self.conformal[(epochs, k)] = (len(done), q)
        return q

    def record(self, trial: int, epoch: int, value: float, seconds: float) -> bool:
        """Keep the epoch's value and seconds; at the last epoch count the trial completed
        (the best, the regression's training set). Whether it completed."""
        self.values[trial].append(value)
        self.seconds[trial].append(seconds)
        if epoch < self.trials[trial].epochs:
            return False
        self.best = value if self.best is None else max(self.best, value)
        self.completed.setdefault(epoch, []).append(trial)
        self.cls.pop(trial, None)
        return True

    def observe(self, trial, epoch, value, seconds, now) -> str:
        if self.record(trial, epoch, value, seconds):
            return CONTINUE
        if epoch not in self.rung_of[trial]:
            return CONTINUE
        self.judge(trial, epoch)
        c = self.counts
        if self.cls[trial] == POOR:
            c["stopped"] += 1
            c["stopped_at"][epoch] = c["stopped_at"].get(epoch, 0) + 1
            del self.cls[trial]
            return STOP
        return CONTINUE

    def judge(self, trial: int, epoch: int) -> Prediction:
        """Predict ``trial``'s final from its first ``epoch`` epochs (step 2, calibrated) and
        classify it against the best completed trial (step 3); both are kept for ``plan``."""
        info = self.trials[trial]
        p = predict(self.values[trial], self.seconds[trial], info.epochs, config=info.config,
                    regression=self._regression(info.epochs), parametric=self.parametric,
                    calibrated=self.calibrate)
        if self.calibrate and p.method == self.parametric.name:
            q = self._parametric_scale(info.epochs, epoch)
            if q is not None:
                p = replace(p, std=p.std * q / Z90)
        self.pred[trial] = p
        self.cls[trial] = classify(p.mean, p.std, self.best, self.thresholds)
        c = self.counts
        c["decisions"] += 1
        c["by_method"][p.method] = c["by_method"].get(p.method, 0) + 1
        return p

    def gain_rate(self, trial: int) -> float:
        """Expected improvement over the best per predicted remaining second."""
        p = self.pred[trial]
        left = self.trials[trial].epochs - len(self.values[trial])
        per_epoch = sum(self.seconds[trial]) / max(len(self.seconds[trial]), 1)
        return (expected_improvement(p.mean, p.std, self.best)
                / max(left * per_epoch, 1e-9))

    def plan(self, running: Mapping[int, int], capacity: int, now: float):
        order = list(running)
        promising = [t for t in order if self.cls.get(t) == PROMISING]
        spare = capacity - len(order)
        extra = water_fill([self.gain_rate(t) for t in promising], spare,
                           [self.max_units - 1] * len(promising))
        units = {t: 1 for t in order}
        for t, x in zip(promising, extra):
            units[t] += x
        spare -= sum(extra)
        starts = []
        while spare > 0 and self.queue:
            t = self.queue.popleft()
            starts.append(t)
            units[t] = 1
            spare -= 1
        self.counts["most_units"] = max(self.counts["most_units"], *units.values(), 1)
        return starts, units

    def stats(self) -> dict:
        return {**self.counts, "thresholds": vars(self.thresholds), "warmup": self.warmup,
                "max_units": self.max_units, "min_completed": self.min_completed,
                "calibrate": self.calibrate}


def lean(**options) -> ThesisController:
    """``automl-thesis-lean``: the controller with ``delta`` 0.4 (a trial stops once its
    calibrated P(final > best) falls below 0.4) and ``warmup`` 0.05 (first rung at 5 % of
    training) unless given; the two values were picked on digits-mlp and digits-cnn, seeds 0
    and 1, from (0.2, 0.1), (0.4, 0.1), (0.4, 0.05), before any run on wine-mlp or
    digits-linear."""
    c = ThesisController(**{"delta": 0.4, "warmup": 0.05, **options})
    c.name = "automl-thesis-lean"
    return c
