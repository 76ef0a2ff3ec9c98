"""Utilisation predictors on series with known answers, and the MAE / RMSE evaluation."""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from oasis_opt.cluster.predictors import (EWMA, PREDICTORS, AutoRegressive, LastValue, TypeMean,
                                          WindowQuantile, errors, evaluate, get_predictor,
                                          one_step_forecasts)


def all_predictors():
    return [get_predictor(name) for name in PREDICTORS]


@given(st.floats(0.0, 1.0), st.integers(10, 40))
def test_constant_series_is_predicted_exactly_by_every_predictor(c, n):
    series = np.full(n, c)
    scores = evaluate(all_predictors(), series, keys=[t % 3 for t in range(n)])
    for name, s in scores.items():
        assert s["mae"] == pytest.approx(0.0, abs=1e-9), name
        assert s["rmse"] == pytest.approx(0.0, abs=1e-9), name


def test_last_value_on_a_ramp_is_off_by_the_slope():
    f = one_step_forecasts(LastValue(), np.arange(10) * 0.1)
    assert math.isnan(f[0])
    assert np.allclose(f[1:], np.arange(9) * 0.1)
    assert errors(f, np.arange(10) * 0.1) == pytest.approx({"mae": 0.1, "rmse": 0.1, "n": 9})


def test_ewma_by_hand():
    f = one_step_forecasts(EWMA(0.5), [1.0, 0.0, 0.0, 1.0])
    # level: 1 -> 0.5 -> 0.25 -> 0.625
    assert np.isnan(f[0]) and list(f[1:]) == [1.0, 0.5, 0.25]
    with pytest.raises(ValueError, match="lam"):
        EWMA(0.0)


def test_window_quantile_and_max():
    series = [0.1, 0.5, 0.3, 0.9, 0.2]
    p = WindowQuantile(window=3, q=0.5)  # median of the last 3
    f = one_step_forecasts(p, series)
    assert list(f[1:]) == [0.1, pytest.approx(0.3), 0.3, 0.5]
    m = one_step_forecasts(get_predictor("max", window=2), series)
    assert list(m[1:]) == [0.1, 0.5, 0.5, 0.9]
    # P95 of 4 values by linear interpolation: x_(3) + 0.85 (x_(4) - x_(3))
    p95 = WindowQuantile(window=4, q=0.95)
    for x in series[:4]:
        p95.update(x)
    assert p95.predict() == pytest.approx(0.5 + 0.85 * (0.9 - 0.5))
    assert p95.name == "p95"


def test_type_mean_uses_the_key_then_the_global_mean():
    p = TypeMean()
    assert math.isnan(p.predict("a"))
    for x, key in ((1.0, "a"), (3.0, "a"), (10.0, "b")):
        p.update(x, key)
    assert p.predict("a") == 2.0 and p.predict("b") == 10.0
    assert p.predict("c") == pytest.approx(14.0 / 3)  # unseen type: mean of everything


def test_ar_recovers_a_noiseless_ar2_process():
    x = [0.3, 0.5]
    for _ in range(60):
        x.append(0.2 + 0.5 * x[-1] - 0.25 * x[-2])
    ar = AutoRegressive(k=2, window=None)
    f = one_step_forecasts(ar, x)
    assert np.isnan(f[:4]).all()  # needs k + 2 = 4 values to fit
    assert np.allclose(f[10:], np.array(x)[10:], atol=1e-9)
    assert ar._coef[0] == pytest.approx([0.2, 0.5, -0.25])


def test_ar_beats_last_value_on_a_noisy_ar1():
    rng = np.random.default_rng(3)
    x = [0.5]
    for _ in range(600):
        x.append(0.5 + 0.6 * (x[-1] - 0.5) + rng.normal(0, 0.05))
    scores = evaluate([AutoRegressive(k=1, window=200), LastValue()], x, warmup=50)
    assert scores["ar(1)"]["rmse"] < scores["last"]["rmse"]
    # the one-step error of the true model is the noise: RMSE close to 0.05
    assert scores["ar(1)"]["rmse"] == pytest.approx(0.05, rel=0.15)


def test_predictors_work_elementwise_on_arrays():
    series = np.array([[0.1, 0.9], [0.2, 0.8], [0.3, 0.7], [0.4, 0.6], [0.5, 0.5], [0.6, 0.4]])
    for p in all_predictors():
        p.reset()
        for x in series:
            p.update(x)
        out = np.asarray(p.predict())
        assert out.shape == (2,), p.name
        # the same predictor run per element gives the same forecast
        for e in range(2):
            q = get_predictor(p.name.split("(")[0] if p.name.startswith("ar") else p.name)
            for x in series[:, e]:
                q.update(x)
            assert out[e] == pytest.approx(q.predict(), abs=1e-9), p.name


def test_evaluate_scores_every_predictor_on_the_same_steps():
    x = np.sin(np.arange(50) / 5) * 0.4 + 0.5
    scores = evaluate([LastValue(), AutoRegressive(k=3)], x)
    assert scores["last"]["n"] == scores["ar(3)"]["n"] == 50 - 5
    with pytest.raises(ValueError, match="no step"):
        errors(np.full(3, np.nan), np.zeros(3))
    with pytest.raises(ValueError, match="unknown predictor"):
        get_predictor("oracle")
