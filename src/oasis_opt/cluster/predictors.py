"""Utilisation predictors behind one interface, and their one-step-ahead evaluation (MAE / RMSE).

A predictor sees a series x_0, x_1, ... one value at a time (``update``) and forecasts the next
one (``predict``). Values may be scalars or numpy arrays of any fixed shape (then every element
is its own series: the tree placement predicts every subtree at once). Before it has enough
history a predictor returns NaN ("no forecast"); ``evaluate`` scores only the steps at which
every compared predictor has a forecast, so all are scored on the same points.

Predictors (reference section 4, "Our predictor interface"):

====================  ==========================================================================
``last``              x^_{t+1} = x_t
``ewma``              x^_{t+1} = lam x_t + (1 - lam) x^_t, x^_1 = x_0 (lam = 0.3)
``p95``               P95 of the last ``window`` values (numpy's linear-interpolation quantile);
                      ``max`` is the same with q = 1 (Autopilot-style, safe for packing)
``type-mean``         mean of the past values of the same type key (Helios ``NaiveEstimator``);
                      an unseen key falls back to the mean of all past values (as Helios falls
                      back to the global mean)
``ar``                x^_{t+1} = c + sum_{j=1..k} phi_j x_{t+1-j}, least squares (numpy
                      ``lstsq``) on the last ``window`` values, refitted every ``refit`` updates;
                      NaN until k + 2 values are known
====================  ==========================================================================
"""
from __future__ import annotations

import math
from collections import deque
from typing import Callable, Hashable, Iterable, Sequence

import numpy as np


class UtilizationPredictor:
    """One-step-ahead forecaster. Subclasses implement ``update`` and ``predict``."""

    name = "base"

    def reset(self) -> None:
        """Forget all history."""
        raise NotImplementedError

    def update(self, value, key: Hashable | None = None) -> None:
        """Observe x_t (``key``: its type, used by type-aware predictors, ignored by others)."""
        raise NotImplementedError

    def predict(self, key: Hashable | None = None):
        """Forecast x_{t+1} (of type ``key``); NaN (or an array of NaN) with too little history."""
        raise NotImplementedError


def _nan_like(shape) -> float | np.ndarray:
    return math.nan if shape == () else np.full(shape, np.nan)


class LastValue(UtilizationPredictor):
    name = "last"

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self._last = None

    def update(self, value, key=None) -> None:
        self._last = np.array(value, dtype=float)

    def predict(self, key=None):
        if self._last is None:
            return math.nan
        return float(self._last) if self._last.ndim == 0 else self._last.copy()


class EWMA(UtilizationPredictor):
    """Exponentially weighted moving average with weight ``lam`` on the newest value."""

    name = "ewma"

    def __init__(self, lam: float = 0.3):
        if not 0 < lam <= 1:
            raise ValueError(f"lam: must lie in (0, 1], got {lam!r}")
        self.lam = float(lam)
        self.reset()

    def reset(self) -> None:
        self._level = None

    def update(self, value, key=None) -> None:
        x = np.array(value, dtype=float)
        self._level = x if self._level is None else self.lam * x + (1.0 - self.lam) * self._level

    def predict(self, key=None):
        if self._level is None:
            return math.nan
        return float(self._level) if self._level.ndim == 0 else self._level.copy()


class WindowQuantile(UtilizationPredictor):
    """The ``q`` quantile of the last ``window`` values (q = 0.95: P95; q = 1: window max)."""

    def __init__(self, window: int = 6, q: float = 0.95):
        if int(window) != window or window < 1:
            raise ValueError(f"window: must be an integer >= 1, got {window!r}")
        if not 0 <= q <= 1:
            raise ValueError(f"q: must lie in [0, 1], got {q!r}")
        self.window, self.q = int(window), float(q)
        self.name = "max" if q == 1 else f"p{round(100 * q)}"
        self.reset()

    def reset(self) -> None:
        self._buf: deque = deque(maxlen=self.window)

    def update(self, value, key=None) -> None:
        self._buf.append(np.array(value, dtype=float))

    def predict(self, key=None):
        if not self._buf:
            return math.nan
        out = np.quantile(np.stack(self._buf), self.q, axis=0)
        return float(out) if np.ndim(out) == 0 else out


class TypeMean(UtilizationPredictor):
    """Mean of the past values observed with the same ``key`` (Helios-style history mean)."""

    name = "type-mean"

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self._sum: dict = {}
        self._n: dict = {}
        self._all_sum = None
        self._all_n = 0

    def update(self, value, key=None) -> None:
        x = np.array(value, dtype=float)
        self._sum[key] = self._sum.get(key, 0.0) + x
        self._n[key] = self._n.get(key, 0) + 1
        self._all_sum = x if self._all_sum is None else self._all_sum + x
        self._all_n += 1

    def predict(self, key=None):
        if key in self._n:
            out = self._sum[key] / self._n[key]
        elif self._all_n:
            out = self._all_sum / self._all_n
        else:
            return math.nan
        return float(out) if np.ndim(out) == 0 else out


class AutoRegressive(UtilizationPredictor):
    """AR(k) with intercept, least squares on the last ``window`` values (None: all history)."""

    def __init__(self, k: int = 3, window: int | None = 1008, refit: int = 1):
        for name, v, lo in (("k", k, 1), ("refit", refit, 1)):
            if int(v) != v or v < lo:
                raise ValueError(f"{name}: must be an integer >= {lo}, got {v!r}")
        if window is not None and (int(window) != window or window < k + 2):
            raise ValueError(f"window: must be an integer >= k + 2 = {k + 2}, got {window!r}")
        self.k, self.window, self.refit = int(k), window, int(refit)
        self.name = f"ar({self.k})"
        self.reset()

    def reset(self) -> None:
        self._hist: list[np.ndarray] = []
        self._coef = None
        self._since = 0

    def update(self, value, key=None) -> None:
        self._hist.append(np.array(value, dtype=float))
        if self.window is not None and len(self._hist) > self.window:
            del self._hist[0]
        self._since += 1
        if len(self._hist) >= self.k + 2 and (self._coef is None or self._since >= self.refit):
            self._fit()
            self._since = 0

    def _fit(self) -> None:
        h = np.stack(self._hist)  # (n, *shape)
        flat = h.reshape(len(h), -1)
        n, k = len(flat), self.k
        coef = np.empty((flat.shape[1], k + 1))
        for e in range(flat.shape[1]):
            x = flat[:, e]
            # rows: [1, x_{t-1}, ..., x_{t-k}] -> x_t
            A = np.column_stack([np.ones(n - k)] + [x[k - j: n - j] for j in range(1, k + 1)])
            coef[e] = np.linalg.lstsq(A, x[k:], rcond=None)[0]
        self._coef = coef

    def predict(self, key=None):
        if self._coef is None:
            shape = self._hist[-1].shape if self._hist else ()
            return _nan_like(shape)
        flat = np.stack(self._hist[-self.k:][::-1]).reshape(self.k, -1)  # x_t, x_{t-1}, ...
        out = self._coef[:, 0] + (self._coef[:, 1:] * flat.T).sum(axis=1)
        shape = self._hist[-1].shape
        return float(out[0]) if shape == () else out.reshape(shape)


PREDICTORS: dict[str, Callable[..., UtilizationPredictor]] = {
    "last": LastValue,
    "ewma": EWMA,
    "p95": WindowQuantile,
    "max": lambda window=6: WindowQuantile(window, 1.0),
    "type-mean": TypeMean,
    "ar": AutoRegressive,
}


def get_predictor(name: str, **options) -> UtilizationPredictor:
    """A fresh predictor by name (``PREDICTORS``) with its options."""
    if name not in PREDICTORS:
        raise ValueError(f"unknown predictor {name!r} (known: {', '.join(PREDICTORS)})")
    return PREDICTORS[name](**options)


def one_step_forecasts(predictor: UtilizationPredictor, series: Sequence[float],
                       keys: Sequence[Hashable] | None = None) -> np.ndarray:
    """Forecast of every x_t made from x_0..x_{t-1} (and key_t), then observe x_t; NaN = none."""
    predictor.reset()
    x = np.asarray(series, dtype=float)
    out = np.full(len(x), np.nan)
    for t in range(len(x)):
        key = None if keys is None else keys[t]
        out[t] = predictor.predict(key)
        predictor.update(x[t], key)
    return out


def errors(forecast: np.ndarray, actual: np.ndarray, mask: np.ndarray | None = None) -> dict:
    """MAE and RMSE of ``forecast`` against ``actual`` over ``mask`` (default: finite forecasts)."""
    forecast, actual = np.asarray(forecast, dtype=float), np.asarray(actual, dtype=float)
    m = np.isfinite(forecast) if mask is None else np.asarray(mask, dtype=bool)
    if not m.any():
        raise ValueError("no step has a forecast to score")
    e = forecast[m] - actual[m]
    return {"mae": float(np.mean(np.abs(e))), "rmse": float(np.sqrt(np.mean(e * e))),
            "n": int(m.sum())}


def evaluate(predictors: Iterable[UtilizationPredictor], series: Sequence[float],
             keys: Sequence[Hashable] | None = None, warmup: int = 0) -> dict[str, dict]:
    """MAE / RMSE of one-step forecasts of each predictor on ``series``, scored on the common
    steps t >= ``warmup`` at which every predictor has a forecast."""
    x = np.asarray(series, dtype=float)
    forecasts = {p.name: one_step_forecasts(p, x, keys) for p in predictors}
    common = np.ones(len(x), dtype=bool)
    common[:warmup] = False
    for f in forecasts.values():
        common &= np.isfinite(f)
    return {name: errors(f, x, common) for name, f in forecasts.items()}
