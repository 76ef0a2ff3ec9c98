"""Predicates the offline solvers' parameter objects check their fields with.

Each object (``lp.SolverLimits``, ``lp.Outcome``, ``colgen.ColgenOptions``,
``colgen.LnsOptions``) raises its own ``ValueError`` naming the field; these only say whether a
value is of the right kind. A bool is never a number here (``True`` is not a node limit).
"""
from __future__ import annotations

import math
import numbers
from typing import Any


def is_real(v: Any) -> bool:
    """A real number (int, float, numpy scalar), not a bool; NaN and infinities included."""
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def is_whole(v: Any, low: int) -> bool:
    """An integer (int or numpy integer, not a bool) >= ``low``."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and int(v) >= low


def is_share(v: Any) -> bool:
    """A real number in (0, 1]."""
    return is_real(v) and 0 < v <= 1


def is_fraction(v: Any) -> bool:
    """A real number in [0, 1)."""
    return is_real(v) and 0 <= v < 1


def is_finite(v: Any, low: float) -> bool:
    """A finite real number >= ``low``."""
    return is_real(v) and math.isfinite(v) and v >= low
