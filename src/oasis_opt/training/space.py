"""Hyperparameter search spaces: sampling and strict checking of trial configurations.

A configuration is a plain dict ``{name: value}`` (it is written to the curves CSV as a JSON
object). Every task's space has the same six hyperparameters (their ranges differ per task):

| name | kind | meaning |
|---|---|---|
| ``learning_rate`` | log-uniform, 3 significant digits | optimiser step size |
| ``weight_decay`` | log-uniform, 3 significant digits | L2 penalty (decoupled for ``adamw``) |
| ``width`` | choice | hidden units (MLP) or convolution channels (CNN) |
| ``depth`` | choice | hidden layers (MLP) or convolution layers (CNN) |
| ``batch_size`` | choice | examples per gradient step |
| ``optimizer`` | choice | ``sgd``, ``momentum`` (0.9), ``adam`` (L2 in the gradient), ``adamw`` |

Log-uniform values are rounded to three significant digits when sampled, so configurations are
short, exact JSON. Light module: numpy only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

OPTIMIZERS = ("sgd", "momentum", "adam", "adamw")


@dataclass(frozen=True)
class LogUniform:
    """A real value drawn log-uniformly in [low, high], rounded to 3 significant digits."""

    low: float
    high: float

    def sample(self, rng: np.random.Generator) -> float:
        value = math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        return min(max(float(f"{value:.3g}"), self.low), self.high)

    def check(self, value: Any, field: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{field}: expected a number, got {value!r}")
        if not (self.low <= value <= self.high):
            raise ValueError(f"{field}: must be in [{self.low:g}, {self.high:g}], got {value!r}")
        return float(value)

    def describe(self) -> str:
        return f"log-uniform [{self.low:g}, {self.high:g}]"


@dataclass(frozen=True)
class Choice:
    """One of a fixed tuple of values (ints or strings)."""

    values: tuple

    def sample(self, rng: np.random.Generator) -> Any:
        value = self.values[int(rng.integers(len(self.values)))]
        return int(value) if isinstance(value, (int, np.integer)) else value

    def check(self, value: Any, field: str) -> Any:
        if isinstance(value, bool) or value not in self.values:
            raise ValueError(f"{field}: must be one of {', '.join(map(str, self.values))}, "
                             f"got {value!r}")
        return value

    def describe(self) -> str:
        return "{" + ", ".join(map(str, self.values)) + "}"


@dataclass(frozen=True)
class SearchSpace:
    """The six hyperparameters of a task, in the order they are sampled."""

    learning_rate: LogUniform
    weight_decay: LogUniform
    width: Choice
    depth: Choice
    batch_size: Choice
    optimizer: Choice = Choice(OPTIMIZERS)

    def params(self) -> dict[str, LogUniform | Choice]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    def sample(self, rng: np.random.Generator) -> dict[str, Any]:
        """One configuration; draws the hyperparameters in the fixed order of the fields."""
        return {name: p.sample(rng) for name, p in self.params().items()}

    def check(self, config: Mapping[str, Any], field: str = "config") -> dict[str, Any]:
        """``config`` as a checked dict; a missing, unknown or out-of-range key raises
        ``ValueError("config.<name>: ...")``."""
        if not isinstance(config, Mapping):
            raise ValueError(f"{field}: expected an object, got {type(config).__name__}")
        params = self.params()
        for name in config:
            if name not in params:
                raise ValueError(f"{field}.{name}: unknown hyperparameter "
                                 f"(known: {', '.join(params)})")
        out = {}
        for name, p in params.items():
            if name not in config:
                raise ValueError(f"{field}.{name}: missing hyperparameter")
            out[name] = p.check(config[name], f"{field}.{name}")
        return out

    def describe(self) -> dict[str, str]:
        return {name: p.describe() for name, p in self.params().items()}
