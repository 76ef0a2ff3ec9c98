"""Data preprocessing: a task's dataset loaded, split and normalised, in one file that training
jobs name.

``prepare(task, seed)`` loads the task's dataset (scikit-learn's, raw), splits it train /
validation / test (stratified 60/20/20 by ``seed``: ``Task.split_indices``), fits the feature
scaling on the train split alone (``Task.scaling``) and describes the result: the examples and
the class counts of each part, the scaling, and ``digest``, a SHA-256 of the dataset's name, the
seed, the three index sets and the scaling. Every task on the same dataset and seed gets the same
digest (the digits MLP and CNN share one). ``oasis-opt automl dataset TASK --seed S --out F``
writes it (``oasis-opt/dataset@1`` JSON).

A job names it as ``task["dataset"]`` (with ``data_seed`` S); ``runtime.plan.job_plan`` refuses a
job whose named dataset is not the one its data seed gives, so a job cannot train on other data
than the preprocessing step described (the service refuses it at submission, 400 on
``task.dataset``).
"""
from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

DATASET_FORMAT = "oasis-opt/dataset@1"


def prepare(task_name: str, seed: int = 0) -> dict:
    """The dataset document of ``task_name``'s data split by ``seed`` (module docstring);
    ``ValueError`` naming ``task`` or ``seed``."""
    from .tasks import get_task

    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed: expected an integer >= 0, got {seed!r}")
    task = get_task(task_name)
    x, y = task.raw()
    parts = dict(zip(("train", "validation", "test"), task.split_indices(seed)))
    mean, scale = task.scaling(x[parts["train"]])
    classes = np.arange(task.classes)
    return {"format": DATASET_FORMAT, "dataset": task.dataset, "data_seed": seed,
            "features": int(x.shape[1]), "classes": task.classes,
            "examples": {k: int(len(v)) for k, v in parts.items()},
            "class_counts": {k: np.bincount(y[v], minlength=len(classes)).tolist()
                             for k, v in parts.items()},
            "scaling": {"mean": np.asarray(mean, float).tolist(),
                        "scale": np.asarray(scale, float).tolist(),
                        "fitted_on": "train"},
            "digest": dataset_digest(task_name, seed)}


@lru_cache(maxsize=32)
def dataset_digest(task_name: str, seed: int = 0) -> str:
    """``sha256:<hex>`` of the dataset, seed, split indices and scaling of ``task_name``."""
    from .tasks import get_task

    task = get_task(task_name)
    x, _ = task.raw()
    train, val, test = task.split_indices(seed)
    mean, scale = task.scaling(x[train])
    h = hashlib.sha256()
    h.update(f"{DATASET_FORMAT}\0{task.dataset}\0{seed}\0".encode())
    for part in (train, val, test, np.asarray(mean, np.float64), np.asarray(scale, np.float64)):
        a = np.ascontiguousarray(part, dtype=np.float64 if part.dtype.kind == "f" else np.int64)
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return "sha256:" + h.hexdigest()


def save_dataset(doc: dict, path: str | Path) -> None:
    """Write a ``prepare`` document as JSON."""
    Path(path).write_text(json.dumps(doc, indent=1) + "\n")


def describe(doc: dict[str, Any]) -> str:
    """One line: the parts, the scaling, the digest."""
    n = doc["examples"]
    mean, scale = doc["scaling"]["mean"], doc["scaling"]["scale"]
    scaling = (f"(x - {mean:g}) / {scale:g}" if isinstance(mean, float) else
               f"per-feature mean and deviation of {len(mean)} features")
    return (f"{doc['dataset']}, data seed {doc['data_seed']}: {n['train']}/{n['validation']}/"
            f"{n['test']} examples (train/validation/test, stratified), scaling {scaling} "
            f"fitted on the train split; {doc['digest'][:19]}")
