"""How well the predictors and the classifier do on recorded curves, without leakage.

For every trial of a study and every observed share f of its training (k = max(1, round(f E))
epochs), each predictor predicts the final accuracy from the first k epochs:

* ``last-value``; each parametric family alone (``pow3`` ...; a family that cannot be fitted
  falls back to the last value, counted in ``fallback``); the ``parametric`` ensemble;
* ``regression``, trained on the *other* trials only: the study's trials are dealt into
  ``folds`` (5) folds by a seeded permutation and each fold is predicted by a model trained on
  the completed curves of the four others (5-fold cross-fitting; nothing of a trial's own curve
  past epoch k, nor its final value, is ever seen by its predictor).

* the calibrated twins (split conformal, ``predict.conformal_quantile``):
  ``regression-conformal``, the fold's regression with ``calibrated=True`` (scores: its own
  out-of-bag errors on the four other folds); ``parametric-conformal``, the ensemble's mean
  with the std rescaled so that mean +- 1.645 std is the conformal 90 % interval of the
  scores |final - mean| / std of the trials outside the fold (the ensemble is not trained, so
  those are held-out errors). Neither sees anything of the fold it predicts.

``prediction_quality`` reports per (study, share, predictor): the mean absolute error against
the true final value, Spearman's rank correlation between predicted and true finals, the share
of true finals inside the predicted 90 % interval (mean +- 1.645 std) and the mean std.

``classification_quality`` applies ``classify.classify`` to the same predictions against an
incumbent ``best`` = the ``incumbent`` quantile (0.9) of the finals of the trials outside the
fold (a good trial a study would know after a few dozen completions) and reports per class the
predicted count, precision and recall, the truth being ``poor``: final < best, ``promising``:
final >= best - epsilon.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .classify import POOR, PROMISING, Thresholds, classify
from ..training.curves import Curve
from .predict import (FAMILIES, Z90, ParametricPredictor, RegressionPredictor, conformal_quantile,
                      fit_family, last_value)

FRACTIONS = (0.1, 0.2, 0.4)
FOLDS = 5
INCUMBENT = 0.9


@dataclass(frozen=True)
class Predictions:
    """Per predictor, arrays over the study's trials (in ``curves`` order) at one share."""

    study: str
    fraction: float
    observed: int  # epochs k
    final: np.ndarray
    mean: dict[str, np.ndarray]
    std: dict[str, np.ndarray]
    fallback: dict[str, int]
    incumbent: np.ndarray  # per trial: the incumbent its fold is judged against


def fold_of(n: int, folds: int = FOLDS, seed: int = 0) -> np.ndarray:
    """Fold of each of n trials: a seeded permutation dealt round-robin."""
    return np.random.default_rng(np.random.SeedSequence([seed, 0xF01D])).permutation(n) % folds


def predict_study(curves: Sequence[Curve], fractions: Sequence[float] = FRACTIONS, *,
                  folds: int = FOLDS, seed: int = 0, progress: bool = False) -> list[Predictions]:
    """Every predictor's prediction of every trial at every share (see the module docstring).
    ``curves``: one study whose trials all have the same number of epochs."""
    curves = list(curves)
    epochs = {c.epochs for c in curves}
    if len(epochs) != 1 or len({c.study for c in curves}) != 1:
        raise ValueError("curves: expected one study whose trials have the same epochs")
    if len(curves) < 2 * folds:
        raise ValueError(f"curves: need at least {2 * folds} trials for {folds} folds")
    E = epochs.pop()
    A = np.array([c.val_accuracy for c in curves])
    final = A[:, -1]
    fold = fold_of(len(curves), folds, seed)
    incumbent = np.empty(len(curves))
    for f in range(folds):
        incumbent[fold == f] = np.quantile(final[fold != f], INCUMBENT)
    models = {f: RegressionPredictor(seed=seed).fit([A[i] for i in np.flatnonzero(fold != f)],
                                                    [curves[i].config
                                                     for i in np.flatnonzero(fold != f)])
              for f in range(folds)}
    names = ["last-value", *FAMILIES, "parametric", "regression", "parametric-conformal",
             "regression-conformal"]
    ensemble = ParametricPredictor()
    singles = {name: ParametricPredictor([name]) for name in FAMILIES}
    out = []
    steps = [(fr, i) for fr in fractions for i in range(len(curves))]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(steps), desc=f"predict {curves[0].study}", unit="trial", leave=False)
    for fr in fractions:
        k = max(1, round(fr * E))
        mean = {n: np.empty(len(curves)) for n in names}
        std = {n: np.empty(len(curves)) for n in names}
        fallback = dict.fromkeys(names, 0)
        for i, c in enumerate(curves):
            y = A[i, :k]
            mean["last-value"][i], std["last-value"][i] = last_value(y, E)
            fits = {name: fit_family(fam, y, E) for name, fam in FAMILIES.items()}
            for name in FAMILIES:
                got = [fits[name]] if fits[name] is not None else []
                mean[name][i], std[name][i], method = singles[name].combine(got, y, E)
                fallback[name] += method == "last-value"
            got = [f for f in fits.values() if f is not None]
            mean["parametric"][i], std["parametric"][i], method = ensemble.combine(got, y, E)
            fallback["parametric"] += method == "last-value"
            mean["regression"][i], std["regression"][i], _ = models[fold[i]].predict(y, E,
                                                                                      c.config)
            mean["regression-conformal"][i], std["regression-conformal"][i], _ = \
                models[fold[i]].predict(y, E, c.config, calibrated=True)
            if bar is not None:
                bar.update()
        pm, ps = mean["parametric"], std["parametric"]
        scores = np.abs(final - pm) / ps
        mean["parametric-conformal"] = pm.copy()
        std["parametric-conformal"] = ps.copy()
        for f in range(folds):
            q = conformal_quantile(scores[fold != f])
            if q is not None:
                std["parametric-conformal"][fold == f] = ps[fold == f] * q / Z90
        out.append(Predictions(curves[0].study, fr, k, final, mean, std, fallback, incumbent))
    if bar is not None:
        bar.close()
    return out


def prediction_quality(preds: Sequence[Predictions]) -> list[dict]:
    """Rows: study, share, observed epochs, predictor, MAE, Spearman, 90 % coverage, mean std,
    fallbacks to the last value."""
    from scipy.stats import spearmanr

    rows = []
    for p in preds:
        for name, m in p.mean.items():
            err = m - p.final
            rho = spearmanr(m, p.final).statistic if np.ptp(m) > 0 else float("nan")
            rows.append({"study": p.study, "fraction": p.fraction, "observed": p.observed,
                         "predictor": name, "trials": len(m),
                         "mae": float(np.mean(np.abs(err))), "spearman": float(rho),
                         "coverage90": float(np.mean(np.abs(err) <= Z90 * p.std[name])),
                         "mean_std": float(np.mean(p.std[name])), "fallback": p.fallback[name]})
    return rows


def classification_quality(preds: Sequence[Predictions],
                           predictors: Sequence[str] = ("last-value", "parametric", "regression",
                                                        "parametric-conformal",
                                                        "regression-conformal"),
                           thresholds: Thresholds = Thresholds()) -> list[dict]:
    """Rows: study, share, predictor, class, predicted, true, precision, recall (NaN when
    nothing is predicted / true in the class)."""
    rows = []
    for p in preds:
        truth = {POOR: p.final < p.incumbent,
                 PROMISING: p.final >= p.incumbent - thresholds.epsilon}
        for name in predictors:
            got = np.array([classify(m, s, b, thresholds) for m, s, b
                            in zip(p.mean[name], p.std[name], p.incumbent)])
            for cls, true in truth.items():
                said = got == cls
                hit = int(np.sum(said & true))
                rows.append({"study": p.study, "fraction": p.fraction, "observed": p.observed,
                             "predictor": name, "class": cls, "predicted": int(said.sum()),
                             "true": int(true.sum()),
                             "precision": float(hit / said.sum()) if said.any() else float("nan"),
                             "recall": float(hit / true.sum()) if true.any() else float("nan")})
    return rows
