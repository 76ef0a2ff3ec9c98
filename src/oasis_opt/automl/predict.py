"""Predicting a trial's final metric and remaining time from its partial learning curve.

Every predictor returns a ``Prediction``: the final validation accuracy ``mean`` with an
uncertainty ``std`` (one standard deviation, read as a normal distribution by ``classify``),
and the remaining training time. Three kinds, as in the thesis's design (reference 6.2):

* ``last_value``: the floor every other predictor must beat. mean = the last observed value;
  std = RMS of the observed epoch-to-epoch changes times sqrt(remaining epochs) (a random walk
  with the curve's own step size), clipped to [``MIN_STD``, ``MAX_STD``].
* ``ParametricPredictor`` (Domhan, Springenberg & Hutter, IJCAI'15): each family of ``FAMILIES``
  fitted by least squares to the points (x = epoch, y = accuracy) with
  ``scipy.optimize.curve_fit`` (bounded trust-region), extrapolated to the last epoch E. The
  ensemble weights a family by its Bayesian information criterion,
  ``w_f ∝ exp(-BIC_f / 2)``, ``BIC_f = n ln(max(RSS_f / n, NOISE_FLOOR^2)) + k_f ln n``
  (Domhan weights by MCMC posterior; BIC weights are its large-sample approximation), and
  ``std^2 = sum_f w_f (yhat_f - mean)^2 + s^2`` (spread of the families plus the residual
  variance ``s^2 = RSS / (n - k)`` of the weightiest fit). A family is fitted only with more
  points than parameters; with no family fitted the prediction is ``last_value``'s.
* ``RegressionPredictor`` (Baker, Gupta, Raskar & Naik, 2017): nu-SVR on partial-curve
  features (the k values, their first and second differences) and the configuration (numbers,
  log10 for positive ones, strings one-hot), trained on the *completed* trials of the same
  study, one model per observed length k. Uncertainty: a bagged ensemble of ``BAGS`` SVRs,
  ``std^2 = spread of the bags^2 + out-of-bag RMSE^2``.

**Calibration** (split conformal, Vovk et al.; Lei et al. 2018): with held-out errors e_j of
predictions (mean_j, scale_j), the normalised scores |e_j| / scale_j give q = the
ceil((n + 1) 0.9)-th smallest score (``conformal_quantile``), and mean +- q scale is a 90 %
interval for a new trial exchangeable with the held-out ones; it is reported as the std
q scale / 1.645, so that mean +- 1.645 std is that interval and a normal reading of it gives
the controller's probabilities. The regression's held-out errors are its out-of-bag errors
(each training trial predicted by the bags that did not see it; scale = its local error scale
``error_scale``): ``RegressionPredictor.predict(..., calibrated=True)``. With fewer than 9
held-out errors no rank exists and the uncalibrated std is kept.

Remaining time (all predictors): remaining epochs x mean observed epoch seconds, std
sqrt(remaining) x std of the observed epoch seconds (epochs independent).

Predictions of accuracy are clipped to [0, 1].
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

MIN_STD = 0.005  # about two validation examples of the digits tasks (360 of them)
MAX_STD = 0.5
NOISE_FLOOR = 0.002  # accuracy resolution below which residuals are noise-free for the BIC
BAGS = 10
NEIGHBOURS, LOCAL_MIN = 0.2, 5  # share (and least number) of trials in the local error scale


@dataclass(frozen=True)
class Prediction:
    """Predicted final accuracy (``mean`` +- ``std``) and remaining seconds (``remaining_s`` +-
    ``remaining_std``) of a trial observed for some epochs; ``method`` names what predicted it."""

    mean: float
    std: float
    remaining_s: float
    remaining_std: float
    method: str


def remaining_time(seconds: Sequence[float], epochs: int) -> tuple[float, float]:
    """(mean, std) of the remaining training seconds: (E - k) x mean epoch seconds,
    sqrt(E - k) x std of the epoch seconds."""
    k = len(seconds)
    left = max(epochs - k, 0)
    if k == 0:
        return math.nan, math.nan
    s = np.asarray(seconds, dtype=float)
    return float(left * s.mean()), float(math.sqrt(left) * (s.std(ddof=1) if k > 1 else 0.0))


def _check(values: Sequence[float], epochs: int) -> np.ndarray:
    y = np.asarray(values, dtype=float)
    if y.ndim != 1 or y.size == 0:
        raise ValueError("values: expected at least one observed epoch")
    if epochs < y.size:
        raise ValueError(f"epochs: {epochs} is fewer than the {y.size} observed")
    return y


Z90 = 1.6448536269514722  # the 95th percentile of N(0, 1): a central 90 % interval
LEVEL = 0.9


def conformal_quantile(scores: Sequence[float], level: float = LEVEL) -> float | None:
    """The ceil((n + 1) ``level``)-th smallest of the n ``scores`` (split conformal), None
    when n is too small for that rank (n + 1 < 1 / (1 - level))."""
    x = np.sort(np.asarray(scores, dtype=float))
    rank = math.ceil((x.size + 1) * level)
    if x.size == 0 or rank > x.size:
        return None
    return float(x[rank - 1])


# ---- last value ---------------------------------------------------------------------------------
def last_value(values: Sequence[float], epochs: int) -> tuple[float, float]:
    """(mean, std) of the final value by the last-value rule (see the module docstring)."""
    y = _check(values, epochs)
    steps = np.diff(y)
    rms = float(np.sqrt(np.mean(steps ** 2))) if steps.size else MAX_STD
    std = rms * math.sqrt(epochs - y.size)
    return float(y[-1]), float(min(max(std, MIN_STD), MAX_STD))


# ---- parametric families ------------------------------------------------------------------------
@dataclass(frozen=True)
class Family:
    """A parametric learning-curve family f(x; theta) with bounds and a starting point."""

    name: str
    formula: str
    f: Callable[..., np.ndarray]
    p0: tuple[float, ...]
    lower: tuple[float, ...]
    upper: tuple[float, ...]

    @property
    def k(self) -> int:
        return len(self.p0)


def _pow3(x, c, a, alpha):
    return c - a * x ** (-alpha)


def _exp3(x, c, a, b):
    return c - a * np.exp(-b * x)


def _ilog2(x, c, a):
    return c - a / np.log(x + 1.0)


def _log_power(x, a, b, c):
    return a / (1.0 + (x / np.exp(b)) ** c)


def _weibull(x, alpha, beta, kappa, delta):
    return alpha - (alpha - beta) * np.exp(-((kappa * x) ** delta))


def _mmf(x, alpha, beta, kappa, delta):
    return alpha - (alpha - beta) / (1.0 + (kappa * x) ** delta)


# Increasing, saturating shapes (reference 6.1's table, from Domhan et al.); x = epoch >= 1.
FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("pow3", "c - a x^(-alpha)", _pow3, (0.9, 0.5, 1.0), (0.0, -1.0, 0.0), (1.0, 2.0, 5.0)),
    Family("exp3", "c - a exp(-b x)", _exp3, (0.9, 0.5, 0.5), (0.0, -1.0, 0.0), (1.0, 5.0, 5.0)),
    Family("ilog2", "c - a / ln(x + 1)", _ilog2, (0.9, 0.5), (0.0, -2.0), (1.0, 5.0)),
    Family("log-power", "a / (1 + (x / e^b)^c)", _log_power, (0.9, 0.0, -1.0),
           (0.0, -5.0, -5.0), (1.0, 10.0, 0.0)),
    Family("weibull", "alpha - (alpha - beta) exp(-(kappa x)^delta)", _weibull,
           (0.9, 0.1, 0.5, 1.0), (0.0, 0.0, 1e-3, 0.1), (1.0, 1.0, 10.0, 5.0)),
    Family("mmf", "alpha - (alpha - beta) / (1 + (kappa x)^delta)", _mmf,
           (0.9, 0.1, 0.5, 1.0), (0.0, 0.0, 1e-3, 0.1), (1.0, 1.0, 10.0, 5.0)),
)}


@dataclass(frozen=True)
class Fit:
    family: str
    params: tuple[float, ...]
    rss: float
    final: float  # f(E), clipped to [0, 1]
    bic: float


def fit_family(family: Family, values: Sequence[float], epochs: int) -> Fit | None:
    """Least-squares fit of ``family`` to the curve, or None (too few points, no convergence)."""
    from scipy.optimize import curve_fit

    y = _check(values, epochs)
    n = y.size
    if n <= family.k:
        return None
    x = np.arange(1, n + 1, dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            params, _ = curve_fit(family.f, x, y, p0=family.p0, bounds=(family.lower, family.upper),
                                  method="trf", max_nfev=1000)
        except (RuntimeError, ValueError):
            return None
        with np.errstate(all="ignore"):
            fitted = family.f(x, *params)
            final = float(family.f(float(epochs), *params))
    if not (np.isfinite(fitted).all() and math.isfinite(final)):
        return None
    rss = float(np.sum((fitted - y) ** 2))
    bic = n * math.log(max(rss / n, NOISE_FLOOR ** 2)) + family.k * math.log(n)
    return Fit(family.name, tuple(float(p) for p in params), rss, min(max(final, 0.0), 1.0), bic)


class ParametricPredictor:
    """The BIC-weighted ensemble of ``families`` (default: all of ``FAMILIES``); with a single
    family, that family alone (its std is then its residual std)."""

    def __init__(self, families: Sequence[str] | None = None):
        names = list(FAMILIES) if families is None else list(families)
        unknown = [n for n in names if n not in FAMILIES]
        if unknown or not names:
            raise ValueError(f"families: unknown family {unknown[0] if unknown else None!r} "
                             f"(known: {', '.join(FAMILIES)})")
        self.families = [FAMILIES[n] for n in names]
        self.name = names[0] if len(names) == 1 else "parametric"

    def fits(self, values: Sequence[float], epochs: int) -> list[Fit]:
        return [f for f in (fit_family(fam, values, epochs) for fam in self.families)
                if f is not None]

    def predict(self, values: Sequence[float], epochs: int) -> tuple[float, float, str]:
        """(mean, std, method): method is ``self.name`` or ``last-value`` when nothing fits."""
        y = _check(values, epochs)
        if y.size == epochs:
            return float(y[-1]), 0.0, self.name
        return self.combine(self.fits(y, epochs), y, epochs)

    def combine(self, fits: Sequence[Fit], values: Sequence[float],
                epochs: int) -> tuple[float, float, str]:
        """The ensemble's (mean, std, method) from ``fits`` of the curve ``values``."""
        y = np.asarray(values, dtype=float)
        if not fits:
            return (*last_value(y, epochs), "last-value")
        bic = np.array([f.bic for f in fits])
        w = np.exp(-(bic - bic.min()) / 2.0)
        w /= w.sum()
        finals = np.array([f.final for f in fits])
        mean = float(w @ finals)
        best = fits[int(np.argmax(w))]
        s2 = max(best.rss / max(y.size - FAMILIES[best.family].k, 1), NOISE_FLOOR ** 2)
        std = math.sqrt(float(w @ (finals - mean) ** 2) + s2)
        return mean, float(min(max(std, MIN_STD), MAX_STD)), self.name


# ---- regression on completed trials (Baker et al.) ----------------------------------------------
def curve_features(values: Sequence[float]) -> np.ndarray:
    """Baker's partial-curve features: the k values, first and second differences."""
    y = np.asarray(values, dtype=float)
    return np.concatenate([y, np.diff(y), np.diff(y, 2)])


class ConfigEncoder:
    """Configurations as numbers: per key, numbers (log10 when every training value is > 0),
    strings one-hot over the training values (an unseen string encodes as all zeros)."""

    def __init__(self, configs: Sequence[Mapping[str, Any]]):
        keys = sorted({k for c in configs for k in c})
        self.columns: list[tuple[str, Any]] = []  # (key, None) numeric, (key, value) one-hot
        self.log: dict[str, bool] = {}
        for key in keys:
            vals = [c.get(key) for c in configs]
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
                self.log[key] = all(v > 0 for v in vals)
                self.columns.append((key, None))
            else:
                for v in sorted({str(v) for v in vals}):
                    self.columns.append((key, v))

    def __call__(self, config: Mapping[str, Any]) -> np.ndarray:
        out = []
        for key, cat in self.columns:
            v = config.get(key)
            if cat is not None:
                out.append(1.0 if str(v) == cat else 0.0)
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                out.append(math.log10(v) if self.log[key] and v > 0 else float(v))
            else:
                out.append(0.0)
        return np.asarray(out, dtype=float)


class BaggedSVR:
    """``bags`` nu-SVRs (RBF kernel, gamma = 1 / (features x variance), sklearn's "scale"), each
    fitted by ``sklearn.svm.NuSVR`` on a bootstrap sample of standardised features.

    ``bag_predictions`` evaluates the fitted SVRs directly, f(x) = sum_i a_i exp(-gamma
    |s_i - x|^2) + b over their support vectors (NuSVR.predict with its per-call input checks
    costs milliseconds, and the controller predicts one trial at a time); a test holds it
    against ``NuSVR.predict``. ``oob_final``/``oob_error``: out-of-bag prediction of each
    training row that some bag left out (plus ``offset``) and its error.
    """

    def __init__(self, X: np.ndarray, y: np.ndarray, bags: int, seed: np.random.SeedSequence,
                 offset: np.ndarray | None = None):
        from .._extras import require

        NuSVR = require("sklearn.svm", extra="automl", feature="the regression predictor").NuSVR
        self.mu = X.mean(axis=0)
        sd = X.std(axis=0)
        self.sd = np.where(sd > 0, sd, 1.0)
        Z = (X - self.mu) / self.sd
        rng = np.random.default_rng(seed)
        n = len(y)
        self.svrs = []
        self.bags: list[tuple[np.ndarray, np.ndarray, float, float]] = []
        oob_sum, oob_n = np.zeros(n), np.zeros(n)
        for _ in range(bags):
            idx = rng.integers(0, n, size=n)
            var = float(Z[idx].var())
            gamma = 1.0 / (Z.shape[1] * var) if var > 0 else 1.0
            svr = NuSVR(nu=0.5, C=1.0, kernel="rbf", gamma=gamma).fit(Z[idx], y[idx])
            self.svrs.append(svr)
            self.bags.append((svr.support_vectors_, svr.dual_coef_[0], float(svr.intercept_[0]),
                              gamma))
            out = np.setdiff1d(np.arange(n), idx)
            if out.size:
                oob_sum[out] += self._one(len(self.bags) - 1, Z[out])
                oob_n[out] += 1
        seen = oob_n > 0
        oob = oob_sum[seen] / oob_n[seen]
        self.oob_final = oob + (offset[seen] if offset is not None else 0.0)
        self.oob_error = oob - y[seen]

    def _one(self, b: int, Z: np.ndarray) -> np.ndarray:
        sv, coef, intercept, gamma = self.bags[b]
        d2 = ((Z[:, None, :] - sv[None, :, :]) ** 2).sum(axis=2)
        return np.exp(-gamma * d2) @ coef + intercept

    def bag_predictions(self, X: np.ndarray) -> np.ndarray:
        """Shape (bags, len(X)): every bag's prediction for every row of ``X``."""
        Z = (np.atleast_2d(X) - self.mu) / self.sd
        return np.array([self._one(b, Z) for b in range(len(self.bags))])


class RegressionPredictor:
    """nu-SVR on partial-curve features + configuration, trained on completed trials
    (``fit``), predicting the final value of a partial curve of the same study (``predict``).

    One bagged model per observed length k, built on first use and kept until ``fit`` is called
    again; deterministic for a given ``seed``.
    """

    name = "regression"

    def __init__(self, seed: int = 0, bags: int = BAGS):
        self.seed = int(seed)
        self.bags = int(bags)
        self._curves: list[np.ndarray] = []
        self._configs: list[Mapping[str, Any]] = []
        self._models: dict[int, BaggedSVR] = {}
        self._conformal: dict[int, float | None] = {}
        self.encoder: ConfigEncoder | None = None

    @property
    def trained_on(self) -> int:
        return len(self._curves)

    def fit(self, curves: Sequence[Sequence[float]], configs: Sequence[Mapping[str, Any]]):
        """Train on completed trials: full curves (all of the same length E) and configs."""
        if len(curves) != len(configs):
            raise ValueError("configs: expected one per curve")
        if len(curves) < 3:
            raise ValueError(f"curves: need at least 3 completed trials, got {len(curves)}")
        lengths = {len(c) for c in curves}
        if len(lengths) != 1:
            raise ValueError(f"curves: completed trials must have the same length, got "
                             f"{sorted(lengths)}")
        self._curves = [np.asarray(c, dtype=float) for c in curves]
        self._configs = list(configs)
        self._models = {}
        self._conformal = {}
        self.encoder = ConfigEncoder(self._configs)
        return self

    def _features(self, values: Sequence[float], config: Mapping[str, Any]) -> np.ndarray:
        assert self.encoder is not None
        return np.concatenate([curve_features(values), self.encoder(config)])

    def _model(self, k: int) -> "BaggedSVR":
        if k not in self._models:
            X = np.array([self._features(c[:k], cfg)
                          for c, cfg in zip(self._curves, self._configs)])
            last = np.array([c[k - 1] for c in self._curves])
            gain = np.array([c[-1] for c in self._curves]) - last  # the gain still to come
            self._models[k] = BaggedSVR(X, gain, self.bags,
                                        np.random.SeedSequence([self.seed, k]), offset=last)
        return self._models[k]

    def error_scale(self, k: int, mean: float) -> float:
        """RMS out-of-bag error of the ``NEIGHBOURS`` share of training trials whose predicted
        final is nearest ``mean``: the errors grow where curves are erratic (low accuracies)."""
        model = self._model(k)
        finals, errors = model.oob_final, model.oob_error
        if finals.size == 0:
            return MAX_STD
        m = max(LOCAL_MIN, int(math.ceil(NEIGHBOURS * finals.size)))
        near = np.argsort(np.abs(finals - mean), kind="stable")[:m]
        return float(np.sqrt(np.mean(errors[near] ** 2)))

    def conformal_scale(self, k: int, level: float = LEVEL) -> float | None:
        """q of ``conformal_quantile`` over the out-of-bag scores |error_j| /
        error_scale(k, oob final_j) of the model for k observed epochs (None: too few)."""
        model = self._model(k)
        if k not in self._conformal:
            scale = np.array([self.error_scale(k, f) for f in model.oob_final])
            scores = np.abs(model.oob_error) / np.maximum(scale, MIN_STD)
            self._conformal[k] = conformal_quantile(scores, level)
        return self._conformal[k]

    def predict(self, values: Sequence[float], epochs: int,
                config: Mapping[str, Any], calibrated: bool = False) -> tuple[float, float, str]:
        """(mean, std, name); ``calibrated``: std from the split-conformal 90 % interval of
        the out-of-bag errors (module docstring), else bag spread and error scale combined."""
        y = _check(values, epochs)
        if not self._curves:
            raise ValueError("regression: not fitted (call fit with completed trials first)")
        if epochs != len(self._curves[0]):
            raise ValueError(f"epochs: the completed trials have {len(self._curves[0])}, "
                             f"not {epochs}")
        if y.size == epochs:
            return float(y[-1]), 0.0, self.name
        preds = self._model(y.size).bag_predictions(self._features(y, config)[None, :])[:, 0]
        mean = float(np.clip(y[-1] + preds.mean(), 0.0, 1.0))
        scale = self.error_scale(y.size, mean)
        q = self.conformal_scale(y.size) if calibrated else None
        if q is not None:
            std = q * max(scale, MIN_STD) / Z90
        else:
            std = math.sqrt(float(preds.var()) + scale ** 2)
        return mean, float(min(max(std, MIN_STD), MAX_STD)), self.name


def predict(values: Sequence[float], seconds: Sequence[float], epochs: int, *,
            config: Mapping[str, Any] | None = None,
            regression: RegressionPredictor | None = None,
            parametric: ParametricPredictor | None = None,
            calibrated: bool = False) -> Prediction:
    """The controller's predictor: the regression when given and trained (its std calibrated
    when ``calibrated``), else the parametric ensemble (the last value when no family can be
    fitted yet), with the remaining time."""
    if regression is not None and regression.trained_on:
        mean, std, method = regression.predict(values, epochs, config or {}, calibrated)
    else:
        mean, std, method = (parametric or ParametricPredictor()).predict(values, epochs)
    rem, rem_std = remaining_time(seconds, epochs)
    return Prediction(mean, std, rem, rem_std, method)
