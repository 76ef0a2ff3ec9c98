"""automl-thesis-rank: ASHA's rungs ranked by the predicted final, the poor rule, the cap."""
from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_automl_replay import Recorder, studies

from oasis_opt.automl.controllers import get_controller
from oasis_opt.automl.predict import ParametricPredictor
from oasis_opt.automl.rank import RankController
from oasis_opt.automl.replay import COMPLETED, STOPPED, replay, study_order
from oasis_opt.training.curves import Curve

E = 32
X = np.arange(1, E + 1)


def curve(trial: int, acc, seconds=1.0) -> Curve:
    acc = tuple(float(a) for a in acc)
    return Curve("s", trial, {"lr": 0.1 * (trial + 1)}, acc, (1.0,) * len(acc),
                 (float(seconds),) * len(acc))


def slow(top: float):
    """A slow starter: low at epoch 4, high at the end (its extrapolation sees it)."""
    return np.clip(top * (1 - np.exp(-X / 12.0)), 0, 1)


def fast(top: float):
    """A fast starter: near its plateau by epoch 4, a low final."""
    return np.clip(top * (1 - np.exp(-X / 1.0)), 0, 1)


# fast and slow starters interleaved: by epoch 4 every fast one leads every slow one, at the
# end every slow one beats every fast one
STUDY = [fast(0.5), slow(0.9), fast(0.6), slow(0.85), fast(0.55), slow(0.95), fast(0.65),
         slow(0.8), fast(0.58), slow(0.88)]


def expected_stops(curves, rungs, eta, score):
    """Trial -> epoch it stops at, run one at a time in the study's order, a trial going on
    from rung k only when ``score`` ranks it in the top ceil(n / eta) of the n trials that
    reached k (ties by order); None: it completes."""
    members: dict[int, list[tuple[float, int]]] = {}
    out = {}
    for n, c in enumerate(curves):
        out[c.trial] = None
        for k in rungs:
            members.setdefault(k, []).append((-score(c.val_accuracy[:k]), n))
            if sorted(members[k]).index(members[k][-1]) >= math.ceil(len(members[k]) / eta):
                out[c.trial] = k
                break
    return out


def test_a_trial_goes_on_from_a_rung_by_its_predicted_final_not_its_current_value():
    """Bug caught: ranking a rung by the current value (successive halving's own rule), or a
    quota other than the top ceil(n / eta): the fast starters would go on and the slow ones,
    which end higher, stop at epoch 4."""
    curves = [curve(t, acc) for t, acc in enumerate(STUDY)]
    # the poor rule off (delta 0) and the parametric ensemble throughout (no regression), so
    # the ranking alone decides; one worker: trials reach the rungs in the study's order
    ctrl = RankController(grace_period=4, reduction_factor=2, delta=0.0, min_completed=1000)
    r = replay(curves, ctrl, workers=1, seed=0)
    order = sorted(curves, key=lambda c: next(t["position"] for t in r.trials
                                              if t["trial"] == c.trial))
    assert ctrl.rungs(E) == [4, 8, 16]
    predicted = ParametricPredictor()
    want = expected_stops(order, [4, 8, 16], 2, lambda v: predicted.predict(v, E)[0])
    by_value = expected_stops(order, [4, 8, 16], 2, lambda v: v[-1])
    assert want != by_value  # the curves do tell the two rules apart
    got = {t["trial"]: (t["stopped_at_epoch"] if t["status"] == STOPPED else None)
           for t in r.trials}
    assert got == want
    assert all(t["status"] in (STOPPED, COMPLETED) for t in r.trials)
    assert r.stats["stopped_by"] == {"rank": sum(v is not None for v in want.values()),
                                     "poor": 0}
    # the best trial of the pool, a slow starter, is found
    assert r.best == max(c.val_accuracy[-1] for c in curves)
    # the ablation ranks by the current value, and so stops the other trials
    ablation = RankController(grace_period=4, reduction_factor=2, delta=0.0,
                              min_completed=1000, rank_by="value")
    rv = replay(curves, ablation, workers=1, seed=0)
    assert {t["trial"]: (t["stopped_at_epoch"] if t["status"] == STOPPED else None)
            for t in rv.trials} == by_value


def test_the_poor_rule_stops_a_trial_its_rank_would_keep():
    """Bug caught: the poor rule not applied at the rungs (the spend would be ASHA's quota
    only). The first trial at a rung always ranks first; once a far better trial completed,
    a trial predicted far below it stops at its first rung all the same."""
    good, bad = curve(0, slow(0.95)), curve(1, np.full(E, 0.2))
    ctrl = RankController(grace_period=4, reduction_factor=2, delta=0.2, min_completed=1000)
    seed = next(s for s in range(20) if study_order(2, s) == [0, 1])  # the good one first
    r = replay([good, bad], ctrl, workers=1, seed=seed)
    assert [t["status"] for t in r.trials] == [COMPLETED, STOPPED]
    assert r.trials[1]["stopped_at_epoch"] == 4
    assert r.stats["stopped_by"] == {"rank": 0, "poor": 1}


def test_the_registered_controller_has_its_chosen_values():
    """Bug caught: the registry building the controller without the values chosen on the
    design curve sets (delta 0.2, at most 2 units), or with rungs other than ASHA's; its
    ablation differing from it in more than the ranking."""
    c = get_controller("automl-thesis-rank")
    assert isinstance(c, RankController) and c.name == "automl-thesis-rank"
    assert (c.thresholds.delta, c.max_units, c.grace_period, c.eta) == (0.2, 2, 1, 4)
    assert c.rungs(40) == [1, 4, 16]
    assert get_controller("automl-thesis-rank", delta=0.3).thresholds.delta == 0.3
    assert c.rank_by == "prediction"
    v = get_controller("automl-thesis-rank-value")
    assert (v.name, v.rank_by, v.thresholds.delta, v.max_units) == (
        "automl-thesis-rank-value", "value", 0.2, 2)


@settings(max_examples=25, deadline=None)
@given(studies(), st.integers(1, 6), st.integers(1, 4), st.integers(2, 4),
       st.sampled_from([0.0, 0.05, 0.2, 0.5]), st.integers(0, 3))
def test_never_more_units_than_the_cap_nor_than_max_units_per_trial(curves, workers, max_units,
                                                                    eta, delta, seed):
    """Bug caught: spare units handed to promising trials beyond the study's cap or beyond
    ``max_units`` each, or a stopped trial kept in the plan."""
    ctrl = Recorder(RankController(reduction_factor=eta, delta=delta, max_units=max_units,
                                   min_completed=3))
    r = replay(curves, ctrl, workers=workers, seed=seed)
    assert ctrl.plans
    for _, units in ctrl.plans:
        assert sum(units.values()) <= workers
        assert all(1 <= u <= max_units for u in units.values())
    assert r.stats["most_units"] <= max_units
    stopped = sum(t["status"] == STOPPED for t in r.trials)
    assert stopped == sum(r.stats["stopped_by"].values())
    assert all(t["status"] in (STOPPED, COMPLETED) for t in r.trials)
