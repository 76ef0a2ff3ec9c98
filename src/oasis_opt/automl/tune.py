"""Ray Tune's trial schedulers as replay controllers: ``tune-asha`` and ``tune-hyperband``.

Ray Tune's own ``ASHAScheduler`` (``AsyncHyperBandScheduler``) and ``HyperBandScheduler``,
with their default arguments except ``max_t`` (the trials' epoch count), decide; nothing of
them is reimplemented here. They are driven through Tune's trial-scheduler API the way Tune's
``TuneController`` drives them, without starting Tune's runner, its trainables or Ray:

* every trial of the study is a real ``ray.tune.experiment.Trial`` (a stub: no trainable),
  added in the study's order with ``on_trial_add`` before the study starts (what Tune's
  search algorithm does as it generates trials; HyperBand fills its brackets in that order);
* whenever a unit is free, ``choose_trial_to_run`` names the trial to start or resume (the
  ``PENDING`` ones in order, or a ``PAUSED`` one HyperBand released after halving a bracket);
  it runs on one unit;
* each epoch's validation accuracy is reported as ``{"training_iteration": epoch,
  "val_accuracy": value}`` to ``on_trial_result`` (metric ``val_accuracy``, mode ``max``),
  and its decision is executed as ``TuneController`` executes it: ``CONTINUE``; ``PAUSE``
  (the trial leaves its unit, status ``PAUSED``); ``STOP`` (``stop_trial``: ``on_trial_complete``
  for a running trial, ``on_trial_remove`` for a paused or pending one, then ``TERMINATED``).
  The scheduler may also stop other, paused trials (HyperBand's losers of a halving) through
  the runner's ``stop_trial``, which does the same;
* after a trial's last epoch it ends (the function trainable returns): ``stop_trial`` again.

What differs from a Tune run: time is the replay's (recorded epoch seconds, no wall clock, no
checkpoint or restore delays) and results are not buffered (Tune's HyperBand disables
buffering too), so a replay is deterministic and exactly reproducible. ASHA chooses a
trial's bracket with ``numpy.random`` (one bracket by default: always bracket 0); the global
numpy generator is seeded with the study's seed at ``reset`` and restored at ``close``.

Ray Tune's ASHA is the *stopping* variant of asynchronous successive halving: at rung r
eta^k (defaults r = 1, eta = 4; rungs below ``max_t``) a trial continues iff its value is not
below the (1 - 1/eta) quantile (``numpy.nanpercentile``, linear interpolation) of the values
earlier trials recorded at that rung; it never pauses. Our ``asha`` is the promotion variant
(``automl.pruners``). Tune's HyperBand is synchronous: its brackets (eta 3) pause trials at a
milestone until every live trial of the bracket reached it, then keep the top 1/eta.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from .replay import CONTINUE, PAUSE, STOP, Controller

METRIC, TIME_ATTR = "val_accuracy", "training_iteration"


def _tune():
    """Ray Tune's scheduler and trial modules (ImportError naming the extra if missing)."""
    from .._extras import require

    require("ray", extra="ray", feature="Ray Tune's schedulers")
    try:
        from ray.tune import schedulers
        from ray.tune.experiment import Trial
    except ImportError as e:  # ray installed without its tune extra
        raise ImportError(f"Ray Tune's schedulers need ray[tune] (pip install "
                          f"'oasis-opt[ray]'): {e}") from None
    return schedulers, Trial


class _Runner:
    """What Tune's schedulers see of ``TuneController``: its trials and ``stop_trial``."""

    def __init__(self, scheduler, trials: list) -> None:
        self.scheduler = scheduler
        self.trials = trials
        self.last_result: dict[str, dict] = {}

    def get_trials(self) -> list:
        return self.trials

    def stop_trial(self, trial) -> None:
        """``TuneController.stop_trial``: a running trial is completed with its last result,
        a pending or paused one removed; then it is ``TERMINATED``."""
        _, Trial = _tune()
        if trial.status in (Trial.ERROR, Trial.TERMINATED):
            return
        if trial.status in (Trial.PENDING, Trial.PAUSED):
            self.scheduler.on_trial_remove(self, trial)
        else:
            self.scheduler.on_trial_complete(self, trial,
                                             self.last_result.get(trial.trial_id, {}))
        trial.set_status(Trial.TERMINATED)


class TuneController(Controller):
    """Trials scheduled by Ray Tune's ``scheduler`` ("asha" or "hyperband"; ``options``: its
    keyword arguments, Tune's defaults otherwise; ``max_t`` defaults to the trials' epochs)."""

    SCHEDULERS = {"asha": ("tune-asha", "ASHAScheduler"),
                  "hyperband": ("tune-hyperband", "HyperBandScheduler")}

    def __init__(self, scheduler: str = "asha", **options: Any):
        if scheduler not in self.SCHEDULERS:
            raise ValueError(f"scheduler: unknown scheduler {scheduler!r} (known: "
                             f"{', '.join(self.SCHEDULERS)})")
        for key in ("metric", "mode", "time_attr"):
            if key in options:
                raise ValueError(f"options: {key} is fixed by the replay ({METRIC}, max, "
                                 f"{TIME_ATTR})")
        self.name, self.scheduler_class = self.SCHEDULERS[scheduler]
        self.options = options
        self.make_scheduler(int(options.get("max_t", 100)))  # fail fast on a bad option

    def make_scheduler(self, max_t: int):
        schedulers, _ = _tune()
        options = {"max_t": max_t, **self.options}
        try:
            return getattr(schedulers, self.scheduler_class)(
                metric=METRIC, mode="max", time_attr=TIME_ATTR, **options)
        except (TypeError, AssertionError) as e:
            raise ValueError(f"options: {self.scheduler_class}: {e or 'invalid value'}") \
                from None

    def reset(self, trials, workers, seed) -> None:
        super().reset(trials, workers, seed)
        _, Trial = _tune()
        self.numpy_state = np.random.get_state()
        np.random.seed(seed)
        self.scheduler = self.make_scheduler(max(t.epochs for t in trials) if trials else 1)
        self.tune_trials = {t.trial: Trial("replay", config=dict(t.config),
                                           trial_id=str(t.trial), stub=True) for t in trials}
        self.by_id = {tt.trial_id: t for t, tt in self.tune_trials.items()}
        self.runner = _Runner(self.scheduler, list(self.tune_trials.values()))
        for tt in self.runner.trials:
            self.scheduler.on_trial_add(self.runner, tt)
        self.decisions = {CONTINUE: 0, PAUSE: 0, STOP: 0}

    def observe(self, trial, epoch, value, seconds, now) -> str:
        _, Trial = _tune()
        tt = self.tune_trials[trial]
        result = {TIME_ATTR: epoch, METRIC: value}
        self.runner.last_result[tt.trial_id] = result
        decision = self.scheduler.on_trial_result(self.runner, tt, result)
        if epoch == self.trials[trial].epochs:  # the trainable returns
            self.runner.stop_trial(tt)
            return CONTINUE
        if decision == "PAUSE":
            tt.set_status(Trial.PAUSED)
            self.decisions[PAUSE] += 1
            return PAUSE
        if decision == "STOP":
            self.runner.stop_trial(tt)
            self.decisions[STOP] += 1
            return STOP
        if decision != "CONTINUE":
            raise ValueError(f"{self.scheduler_class} returned {decision!r}")
        self.decisions[CONTINUE] += 1
        return CONTINUE

    def plan(self, running: Mapping[int, int], capacity: int, now: float):
        _, Trial = _tune()
        starts = []
        for _ in range(capacity - len(running)):
            tt = self.scheduler.choose_trial_to_run(self.runner)
            if tt is None:
                break
            tt.set_status(Trial.RUNNING)
            starts.append(self.by_id[tt.trial_id])
        return starts, {t: 1 for t in [*running, *starts]}

    def close(self) -> None:
        np.random.set_state(self.numpy_state)

    def stats(self) -> dict:
        return {"scheduler": self.scheduler_class, "scheduler_options": dict(self.options),
                "decisions": dict(self.decisions)}


def tune_asha(**options: Any) -> TuneController:
    """``tune-asha``: Ray Tune's ``ASHAScheduler`` with ``options`` (its keyword arguments)."""
    return TuneController("asha", **options)


def tune_hyperband(**options: Any) -> TuneController:
    """``tune-hyperband``: Ray Tune's ``HyperBandScheduler`` with ``options``."""
    return TuneController("hyperband", **options)
