"""Ray Tune's ASHAScheduler and HyperBandScheduler driving replayed curves (automl.tune)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from oasis_opt.automl.controllers import get_controller
from oasis_opt.automl.replay import COMPLETED, PAUSED, STOPPED, replay, study_order
from oasis_opt.automl.tune import TuneController
from oasis_opt.training.curves import Curve


def constant_study(values_in_order, epochs: int, seed: int = 0) -> list[Curve]:
    """Constant-accuracy curves (1 GPU-second an epoch) placed so that the study with ``seed``
    visits them in the order of ``values_in_order``; trial number = visit index."""
    n = len(values_in_order)
    order = study_order(n, seed)  # order[k] = position visited k-th
    curves: list[Curve | None] = [None] * n
    for k, pos in enumerate(order):
        v = float(values_in_order[k])
        curves[pos] = Curve("s", k, {"k": k}, (v,) * epochs, (1.0,) * epochs,
                            (1.0,) * epochs)
    return [c for c in curves if c is not None]


def asha_by_hand(values, epochs: int, grace: int, eta: int) -> list[int]:
    """The stopping ASHA rule, trials run one after another: at each rung r eta^k < epochs a
    trial stops when its value is below the (1 - 1/eta) quantile (linear interpolation) of
    the values earlier trials recorded at that rung. Returns each trial's last epoch."""
    rungs, r = [], grace
    while r < epochs:
        rungs.append(r)
        r *= eta
    recorded: dict[int, list[float]] = {r: [] for r in rungs}
    out = []
    for v in values:
        last = epochs
        for r in rungs:
            seen = recorded[r]
            cut = float(np.percentile(seen, 100 * (1 - 1 / eta))) if seen else None
            recorded[r].append(v)
            if cut is not None and v < cut:
                last = r
                break
        out.append(last)
    return out


def test_tune_asha_stops_the_trials_the_rule_says():
    """Bug caught: Tune's ASHA not consulted (or its STOP ignored): every trial would run to
    epoch 4. By hand, eta 2, rungs at 1 and 2: 0.3 stops at 1 (cut 0.5), 0.4 at 1 (cut
    median(.5,.3,.7) = .5), 0.55 at 2 (rung 1 cut median(.5,.3,.7,.4) = .45, rung 2 cut
    median(.5,.7) = .6)."""
    values = [0.5, 0.3, 0.7, 0.4, 0.55]
    assert asha_by_hand(values, 4, 1, 2) == [4, 1, 4, 1, 2]
    r = replay(constant_study(values, 4), get_controller("tune-asha", reduction_factor=2),
               workers=1, seed=0)
    by_trial = {t["trial"]: t for t in r.trials}
    assert [by_trial[k]["stopped_at_epoch"] for k in range(5)] == [4, 1, 4, 1, 2]
    assert [by_trial[k]["status"] for k in range(5)] == [COMPLETED, STOPPED, COMPLETED,
                                                          STOPPED, STOPPED]
    assert r.gpu_seconds == 12.0  # 4 + 1 + 4 + 1 + 2 epochs of 1 GPU-second
    assert r.best == 0.7
    assert r.stats["decisions"]["stop"] == 3


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tune_asha_matches_the_rule_on_random_studies(seed):
    """The same on 30 random constant trials, Tune's defaults (grace 1, eta 4, rungs 1, 4, 16
    below 40 epochs): one worker, so trials report one after another."""
    values = np.round(np.random.default_rng(seed).uniform(0.2, 0.9, 30), 3)
    r = replay(constant_study(values, 40, seed), TuneController("asha"), workers=1, seed=seed)
    by_trial = {t["trial"]: t["stopped_at_epoch"] for t in r.trials}
    expected = asha_by_hand(values, 40, 1, 4)
    assert [by_trial[k] for k in range(30)] == expected
    assert r.gpu_seconds == float(sum(expected))


def test_tune_hyperband_halves_its_second_bracket():
    """Bug caught: HyperBand's PAUSE treated as STOP, or paused winners never resumed. 8
    trials of 9 epochs, eta 3: s_max + 1 = 3 brackets, filled in the study's order; the first
    (s = 0) holds trials 0-2 at r = 9 (no halving), the second (s = 1) trials 3-7 at r0 = 3:
    all 5 run to epoch 3 and pause, then the top ceil(5/3) = 2 resume to epoch 9 and the other
    3 are stopped. Spend: 3 x 9 + 5 x 3 + 2 x 6 = 54 GPU-seconds."""
    values = [0.6, 0.5, 0.4, 0.31, 0.82, 0.33, 0.8, 0.35]
    r = replay(constant_study(values, 9), TuneController("hyperband"), workers=1, seed=0)
    by_trial = {t["trial"]: t for t in r.trials}
    assert r.gpu_seconds == 54.0
    done = {k for k, t in by_trial.items() if t["status"] == COMPLETED}
    assert done == {0, 1, 2, 4, 6}
    assert all(by_trial[k]["stopped_at_epoch"] == 3 for k in (3, 5, 7))
    assert all(by_trial[k]["status"] in (STOPPED, PAUSED) for k in (3, 5, 7))
    assert r.stats["decisions"]["pause"] >= 4
    assert r.best == 0.82


def test_tune_replays_are_deterministic_and_within_the_cap():
    rng = np.random.default_rng(3)
    curves = [Curve("s", t, {"t": t}, tuple(np.clip(np.cumsum(rng.uniform(-.02, .05, 12)) + .3,
                                                    0, 1)),
                    (1.0,) * 12, tuple(rng.choice([0.5, 1.0, 2.0], 12))) for t in range(40)]
    state = np.random.get_state()
    for name in ("tune-asha", "tune-hyperband"):
        a = replay(curves, get_controller(name), workers=3, seed=5).to_json()
        b = replay(curves, get_controller(name), workers=3, seed=5).to_json()
        assert a == b
        run = sum(math.fsum(c.seconds[:t["stopped_at_epoch"]]) for c, t in
                  zip(sorted(curves, key=lambda c: c.trial), a["trials"]))
        assert a["seconds_spent"] == pytest.approx(run, abs=1e-9)
    # the global numpy generator Tune's ASHA draws brackets from is left as it was
    assert all(np.array_equal(x, y) for x, y in zip(np.random.get_state()[1:2], state[1:2]))


def test_bad_tune_options_name_the_field():
    with pytest.raises(ValueError, match="^scheduler: unknown scheduler 'pbt'"):
        TuneController("pbt")
    with pytest.raises(ValueError, match="^options: metric is fixed"):
        TuneController("asha", metric="loss")
    with pytest.raises(ValueError, match="^options: ASHAScheduler"):
        TuneController("asha", reduction_factor=1)
    with pytest.raises(ValueError, match="^options: HyperBandScheduler"):
        TuneController("hyperband", bogus=1)
