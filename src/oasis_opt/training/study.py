"""Curve sets: a study of random-search trials of one task, trained for real and written as CSV.

Trial ``t`` of a study with seed ``S`` is fully determined by ``(task, S, t)``: its configuration
is ``task.space.sample`` with ``numpy.random.default_rng(SeedSequence([S, t, 0]))``, its weights
and batch order come from ``trial_seed(S, t)``, and every trial uses the data split of seed ``S``.
A study of N trials is therefore the first N trials of any longer one with the same seed, which
is what lets ``generate_curves`` extend a file: it checks the trials already there against the
seed (same configs, same epochs) and appends the missing ones, never rewriting a byte. (The check
sees the configurations only: two tasks with one search space, such as the tabular ones, sample
the same configurations, so a study name given to both is not caught.)
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from .curves import append_curves, read_curves, write_curves
from .tasks import Task, get_task


def trial_config(task: Task, seed: int, trial: int) -> dict[str, Any]:
    """The configuration of trial ``trial`` of the study with seed ``seed``."""
    return task.space.sample(np.random.default_rng(np.random.SeedSequence([seed, trial, 0])))


def trial_seed(seed: int, trial: int) -> int:
    """Seed of trial ``trial``'s initial weights and batch order (31 bits, for ``PRNGKey``)."""
    return int(np.random.SeedSequence([seed, trial, 1]).generate_state(1)[0] >> 1)


@dataclass(frozen=True)
class StudyRun:
    study: str
    existing: int  # trials already in the file
    added: int  # trials trained and appended now
    seconds: float  # wall time of this run


def generate_curves(task: Task | str, trials: int, epochs: int, seed: int, path: str | Path, *,
                    study: str | None = None, progress: bool = True) -> StudyRun:
    """Bring study ``study`` (default: the task's name) in the curves CSV ``path`` to ``trials``
    trials of ``epochs`` epochs, training the missing ones (trials ``k..trials-1``) for real.

    The file is created when missing; other studies in it are left alone. Its existing trials of
    the study must be trials ``0..k-1`` of this seed: a mismatch raises ``ValueError`` naming
    the argument (``epochs: ...`` or ``seed: ...``); a malformed file raises ``FormatError``.
    """
    task = get_task(task) if isinstance(task, str) else task
    for field, value, low in (("trials", trials, 1), ("epochs", epochs, 1), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{field}: expected an integer >= {low}, got {value!r}")
    study = task.name if study is None else study
    if not study or study != study.strip() or any(c in study for c in "\r\n"):
        raise ValueError(f"study: expected a non-empty name without surrounding whitespace or "
                         f"line breaks, got {study!r}")
    path = Path(path)
    start = time.perf_counter()
    existing = _check_existing(task, study, epochs, seed, path) if path.exists() else 0
    if not path.exists():
        write_curves([], path)

    from .train import train_trial  # jitted kernels load only when something trains

    split = task.split(seed)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=trials, initial=min(existing, trials), desc=study, unit="trial")
    best = _best_final(study, path) if existing else None
    try:
        for t in range(existing, trials):
            curve = train_trial(task, trial_config(task, seed, t), epochs, trial_seed(seed, t),
                                split=split)
            append_curves([replace(curve, study=study, trial=t)], path)
            final = curve.val_accuracy[-1]
            best = final if best is None else max(best, final)
            if bar is not None:
                bar.update()
                bar.set_postfix(best=f"{best:.3f}", last=f"{final:.3f}", refresh=False)
    finally:
        if bar is not None:
            bar.close()
    return StudyRun(study, existing, max(trials - existing, 0), time.perf_counter() - start)


def _best_final(study: str, path: Path) -> float | None:
    """Best final validation accuracy of the study's trials already in ``path``."""
    finals = [c.val_accuracy[-1] for c in read_curves(path) if c.study == study]
    return max(finals) if finals else None


def _check_existing(task: Task, study: str, epochs: int, seed: int, path: Path) -> int:
    """Number of the study's trials in ``path``, after checking they are this seed's."""
    curves = [c for c in read_curves(path) if c.study == study]
    if not path.read_bytes().endswith(b"\n"):
        raise ValueError(f"out: {path} does not end with a line break; cannot append to it")
    for t, curve in enumerate(curves):
        if curve.trial != t:
            raise ValueError(f"out: study {study!r} in {path} has trial {curve.trial} where "
                             f"trial {t} was expected (trials must be 0, 1, ... in order)")
        if curve.epochs != epochs:
            raise ValueError(f"epochs: study {study!r} in {path} has {curve.epochs} epochs per "
                             f"trial, not {epochs}")
        expected = trial_config(task, seed, t)
        if dict(curve.config) != expected:
            raise ValueError(f"seed: trial {t} of study {study!r} in {path} has config "
                             f"{dict(curve.config)}, but seed {seed} of task {task.name} samples "
                             f"{expected}")
    return len(curves)
