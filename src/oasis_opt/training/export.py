"""A trained model as one file, and its ``predict``: weights, task, configuration, scaling.

``save_model(path, task, config, flat, mean=..., scale=..., meta=...)`` writes a NumPy ``.npz``
(no pickle) with the arrays ``flat`` (the float32 parameter vector of ``tasks.ravel``), ``mean``
and ``scale`` (the feature scaling of the training split, ``Task.scaling``) and ``meta``, a JSON
string: ``{"format": "oasis-opt/model@1", "task", "config", "meta"}``. ``load_model(path)``
reads and checks it and returns a ``SavedModel`` whose ``predict(x)`` takes *raw* features (the
dataset's rows as scikit-learn ships them, e.g. digits' 64 pixels in 0..16, flat or 8x8) and
returns the predicted class of each row. ``oasis-opt predict MODEL IMAGES`` is the same from
the shell.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, BinaryIO, Mapping

import numpy as np

from ..model.checks import FormatError

MODEL_FORMAT = "oasis-opt/model@1"


def save_model(path: str | Path | BinaryIO, task: str, config: Mapping[str, Any],
               flat: np.ndarray, *, mean: Any, scale: Any,
               meta: Mapping[str, Any] | None = None) -> None:
    """Write the model file (module docstring) to ``path`` or a binary file object (the
    service keeps its deployed models' bytes); ``meta``: JSON-able provenance."""
    doc = {"format": MODEL_FORMAT, "task": task, "config": dict(config), "meta": dict(meta or {})}
    arrays = dict(flat=np.asarray(flat, dtype=np.float32), mean=np.asarray(mean, float),
                  scale=np.asarray(scale, float), meta=np.array(json.dumps(doc, sort_keys=True)))
    if hasattr(path, "write"):
        np.savez(path, **arrays)
        return
    with open(path, "wb") as f:  # a file object: np.savez would append .npz to a str path
        np.savez(f, **arrays)


@dataclass(frozen=True)
class SavedModel:
    """A model read by ``load_model``: ``predict`` raw rows, ``accuracy`` against labels."""

    task: str
    config: Mapping[str, Any]
    meta: Mapping[str, Any]
    flat: np.ndarray
    mean: np.ndarray
    scale: np.ndarray

    @cached_property
    def _network(self):
        """The task, the network and its parameters, built once (a served model answers many
        requests)."""
        from .tasks import get_task, ravel

        task = get_task(self.task)
        model = task.model(self.config)
        _, unflatten = ravel(model.init(0))  # the layout; the values are the file's
        return task, model, unflatten(self.flat)

    def predict(self, x: Any) -> np.ndarray:
        """Predicted class (int) of each raw row of ``x``: ``ValueError("images: ...")`` when
        the rows are not the task's features."""
        task, model, params = self._network
        x = np.asarray(x)
        width = int(np.prod(task.input_shape))
        if x.ndim < 1 or len(x) == 0 or x[0].size != width or not np.issubdtype(x.dtype,
                                                                               np.number):
            raise ValueError(f"images: expected n >= 1 rows of {width} numbers (the {task.name} "
                             f"task's features), got an array of shape {x.shape}")
        if not np.all(np.isfinite(x)):
            raise ValueError("images: the array holds NaN or infinite values")
        return np.asarray(model.classes(params, task.prepare(x, self.mean, self.scale)),
                          dtype=np.int64)

    def accuracy(self, x: Any, y: Any) -> float:
        """Share of rows of ``x`` whose predicted class is the label in ``y``."""
        y = np.asarray(y)
        if y.shape != (len(x),):
            raise ValueError(f"labels: expected {len(x)} labels (one per image), got an array "
                             f"of shape {y.shape}")
        return float(np.mean(self.predict(x) == y))


def load_model(path: str | Path | BinaryIO) -> SavedModel:
    """Read a model file (a path or a binary file object); ``FormatError`` naming what is
    wrong with it."""
    from .tasks import get_task, ravel

    try:
        z = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise FormatError("model", f"not an oasis-opt model file ({e})") from None
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise FormatError("model", "not an oasis-opt model file (a single array, not an .npz "
                          "archive)")
    try:
        with z:
            arrays = {k: z[k] for k in ("flat", "mean", "scale", "meta")}
    except (OSError, ValueError, KeyError) as e:
        raise FormatError("model", f"not an oasis-opt model file ({e})") from None
    try:
        doc = json.loads(str(arrays["meta"]))
    except ValueError as e:
        raise FormatError("meta", f"not valid JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != MODEL_FORMAT:
        raise FormatError("format", f"expected {MODEL_FORMAT!r}")
    try:
        task = get_task(doc.get("task"))
        config = task.space.check(doc.get("config"))
    except ValueError as e:
        raise FormatError(*str(e).split(": ", 1)) from None
    size = int(ravel(task.model(config).init(0))[0].size)
    if arrays["flat"].shape != (size,):
        raise FormatError("flat", f"expected {size} parameters for this network, got "
                          f"{arrays['flat'].shape}")
    return SavedModel(task.name, config, doc.get("meta", {}), arrays["flat"], arrays["mean"],
                      arrays["scale"])
