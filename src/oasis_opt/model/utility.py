"""Utility functions of a job's duration ``d = t_hat - a`` (slots after arrival).

The paper's evaluation uses the CORA sigmoid ``f(d) = priority / (1 + exp(decay * (d - target)))``
(gamma1 = priority, gamma2 = decay, gamma3 = target); a constant utility is also allowed.
Both are non-negative and non-increasing in ``d``, as the paper's model requires.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .checks import FormatError, choice, number

KINDS = ("sigmoid", "constant")
# the parameters each kind reads (the others must stay at their default 0)
PARAMETERS = {"sigmoid": ("priority", "decay", "target"), "constant": ("value",)}


@dataclass(frozen=True)
class Utility:
    """A non-increasing utility of the duration ``d`` (slots between arrival and completion slot).

    ``kind="sigmoid"``: ``priority / (1 + exp(decay * (d - target)))``; ``decay = 0`` gives the
    time-insensitive constant ``priority / 2`` exactly as the paper's sigmoid does.
    ``kind="constant"``: ``value`` whatever ``d``.

    Checked when built (``FormatError`` naming the field, e.g. ``kind: unknown utility kind
    'linear'``): a known kind, finite numbers, ``priority``, ``decay`` and ``value`` >= 0 (so f is
    non-negative and non-increasing), and no parameter of the other kind.
    """

    kind: str
    priority: float = 0.0
    decay: float = 0.0
    target: float = 0.0
    value: float = 0.0

    def __post_init__(self) -> None:
        choice(self.kind, KINDS, "kind", "utility kind")
        for name in ("priority", "decay", "target", "value"):
            v = number(getattr(self, name), name, minimum=None if name == "target" else 0.0)
            if v and name not in PARAMETERS[self.kind]:
                raise FormatError(name, f"not a parameter of a {self.kind} utility "
                                  f"(it takes: {', '.join(PARAMETERS[self.kind])})")
            object.__setattr__(self, name, v)

    def __call__(self, d: Any) -> Any:
        """Evaluate at a scalar or array duration; numerically stable for any decay."""
        if self.kind == "constant":
            return np.full(np.shape(d), self.value, dtype=float) if np.ndim(d) else float(self.value)
        z = self.decay * (np.asarray(d, dtype=float) - self.target)
        # priority * expit(-z), written so that exp never overflows
        e = np.exp(-np.abs(z))
        out = np.where(z >= 0, self.priority * e / (1.0 + e), self.priority / (1.0 + e))
        return out if np.ndim(d) else float(out)

    @property
    def max_value(self) -> float:
        """sup_d f(d) over d >= 0 (f is non-increasing, so f(0))."""
        return float(self(0))

    def to_json(self) -> dict:
        if self.kind == "constant":
            return {"kind": "constant", "value": self.value}
        return {"kind": "sigmoid", "priority": self.priority, "decay": self.decay, "target": self.target}

    @staticmethod
    def sigmoid(priority: float, decay: float, target: float) -> "Utility":
        return Utility("sigmoid", priority=float(priority), decay=float(decay), target=float(target))

    @staticmethod
    def constant(value: float) -> "Utility":
        return Utility("constant", value=float(value))


def utility_table(utilities: Sequence[Utility], arrivals: np.ndarray, horizon: int) -> np.ndarray:
    """``table[i, t]`` = f_i(t - a_i) for completion slot t in 0..T (column 0 unused, -inf before arrival).

    Array view used by the solvers so they never call Python utility objects in a loop.
    """
    t = np.arange(horizon + 1, dtype=float)
    table = np.full((len(utilities), horizon + 1), -math.inf)
    for i, (u, a) in enumerate(zip(utilities, np.asarray(arrivals).tolist())):
        start = max(0, math.ceil(a))  # the slots t >= a
        table[i, start:] = u(t[start:] - a)
    return table
