"""Classifying trials from a prediction, and sharing resources among the promising ones.

A prediction of a trial's final accuracy is read as a normal distribution N(mean, std^2). With
``best`` the best final accuracy of the study's completed trials (None before the first):

| class | rule (defaults) |
|---|---|
| ``poor`` | P(final > best) < ``delta`` = 0.05 (Domhan et al.'s stopping rule) |
| ``promising`` | P(final >= best - ``epsilon``) >= ``promising_at`` = 0.5, ``epsilon`` = 0.005 |
| ``uncertain`` | otherwise |

Before any trial completed every trial is promising. ``epsilon`` is about two validation
examples of the digits tasks: a trial expected to come within it of the best is worth finishing.

``expected_improvement`` is E[max(final - best, 0)] = std phi(z) + (mean - best) Phi(z) with
z = (mean - best) / std; the controller shares spare resources among promising trials in
proportion to it per predicted remaining second (``water_fill``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

POOR, UNCERTAIN, PROMISING = "poor", "uncertain", "promising"
CLASSES = (POOR, UNCERTAIN, PROMISING)


def normal_cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def p_above(mean: float, std: float, threshold: float) -> float:
    """P(X > threshold) for X ~ N(mean, std^2); a point mass when std = 0."""
    if std <= 0:
        return 1.0 if mean > threshold else 0.0
    return 1.0 - normal_cdf((threshold - mean) / std)


def expected_improvement(mean: float, std: float, best: float | None) -> float:
    """E[max(X - best, 0)] for X ~ N(mean, std^2) (best None counts as 0)."""
    b = 0.0 if best is None else best
    if std <= 0:
        return max(mean - b, 0.0)
    z = (mean - b) / std
    return std * math.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi) + (mean - b) * normal_cdf(z)


@dataclass(frozen=True)
class Thresholds:
    """The classification rule's parameters (see the module docstring)."""

    delta: float = 0.05
    epsilon: float = 0.005
    promising_at: float = 0.5

    def __post_init__(self):
        for name in ("delta", "promising_at"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{name}: must be in [0, 1], got {v!r}")
        if not self.epsilon >= 0.0:
            raise ValueError(f"epsilon: must be >= 0, got {self.epsilon!r}")


def classify(mean: float, std: float, best: float | None,
             thresholds: Thresholds = Thresholds()) -> str:
    """``poor``, ``uncertain`` or ``promising`` (rules in the module docstring)."""
    if best is None:
        return PROMISING
    if p_above(mean, std, best) < thresholds.delta:
        return POOR
    if p_above(mean, std, best - thresholds.epsilon) >= thresholds.promising_at:
        return PROMISING
    return UNCERTAIN


def water_fill(weights: Sequence[float], capacity: int, limits: Sequence[int]) -> list[int]:
    """Share ``capacity`` whole units in proportion to ``weights``, at most ``limits[i]`` each.

    Discrete water-filling: unit by unit, to the entry with the largest ``w_i / (x_i + 1)``
    among those below their limit with w_i > 0 (ties, or scores that underflow to 0: the lower
    index). The result converges to the continuous x_i = min(limit_i, lambda w_i) as units
    grow; units nobody can take are left.
    """
    if len(weights) != len(limits):
        raise ValueError("limits: expected one per weight")
    x = [0] * len(weights)
    for _ in range(max(int(capacity), 0)):
        best, score = -1, 0.0
        for i, (w, cap) in enumerate(zip(weights, limits)):
            if w > 0 and x[i] < cap and (best < 0 or w / (x[i] + 1) > score):
                best, score = i, w / (x[i] + 1)
        if best < 0:
            break
        x[best] += 1
    return x
