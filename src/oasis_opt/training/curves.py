"""Learning curves: the ``Curve`` record and the curves CSV (strict reader, canonical writer).

The CSV has exactly the header ``study,trial,epoch,val_accuracy,val_loss,seconds,config`` and one
row per (trial, epoch):

| column | meaning |
|---|---|
| ``study`` | the study's name (non-empty) |
| ``trial`` | trial number, an integer >= 0, unique within the study |
| ``epoch`` | 1, 2, ... : a trial's rows are contiguous and its epochs consecutive from 1 |
| ``val_accuracy`` | validation accuracy after the epoch, in [0, 1] |
| ``val_loss`` | validation loss after the epoch, a number >= 0, or ``inf`` / ``nan`` (diverged) |
| ``seconds`` | wall time of that epoch (training and evaluation), >= 0 |
| ``config`` | the trial's hyperparameters as a JSON object, the same on every row of the trial |

Any tool that writes this format produces curves that replay here. ``read_curves`` rejects a bad
file with one ``FormatError`` naming the file, row (the header is row 1) and column.
``write_curves`` writes floats as ``repr`` and configs as compact JSON with sorted keys, so
``write_curves(read_curves(f))`` reproduces a file it wrote byte for byte. Light module: no JAX.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..model.io import FormatError
from ..workloads.traces import parse_float, parse_int, parse_str, read_csv

COLUMNS = ("study", "trial", "epoch", "val_accuracy", "val_loss", "seconds", "config")


@dataclass(frozen=True)
class Curve:
    """One trial's learning curve: per epoch 1..E its validation accuracy, loss and wall time."""

    study: str
    trial: int
    config: Mapping[str, Any]
    val_accuracy: tuple[float, ...]
    val_loss: tuple[float, ...]
    seconds: tuple[float, ...]

    def __post_init__(self):
        where = f"curve {self.study!r} trial {self.trial!r}"
        if not isinstance(self.study, str) or not self.study or self.study != self.study.strip() \
                or any(c in self.study for c in "\r\n"):
            raise ValueError(f"{where}: study must be a non-empty name without surrounding "
                             "whitespace or line breaks")
        if isinstance(self.trial, bool) or not isinstance(self.trial, int) or self.trial < 0:
            raise ValueError(f"{where}: trial must be an integer >= 0")
        if not isinstance(self.config, Mapping):
            raise ValueError(f"{where}: config must be a mapping")
        _config_json(self.config, where)
        lengths = {len(self.val_accuracy), len(self.val_loss), len(self.seconds)}
        if len(lengths) != 1 or not self.val_accuracy:
            raise ValueError(f"{where}: val_accuracy, val_loss and seconds must have one value "
                             "per epoch (at least one)")
        for e, (a, l, s) in enumerate(zip(self.val_accuracy, self.val_loss, self.seconds), 1):
            if not 0.0 <= a <= 1.0:
                raise ValueError(f"{where} epoch {e}: val_accuracy must be in [0, 1], got {a!r}")
            if not (l >= 0.0 or math.isnan(l)):
                raise ValueError(f"{where} epoch {e}: val_loss must be >= 0 or nan, got {l!r}")
            if not (math.isfinite(s) and s >= 0.0):
                raise ValueError(f"{where} epoch {e}: seconds must be finite and >= 0, got {s!r}")

    @property
    def epochs(self) -> int:
        return len(self.val_accuracy)


def _config_json(config: Mapping[str, Any], where: str) -> str:
    try:
        return json.dumps(dict(config), sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: config is not a JSON object of finite values ({e})") from None


# ---- reading ------------------------------------------------------------------------------------
def _accuracy(v: str) -> float:
    x = parse_float(0.0)(v)
    if x > 1.0:
        raise ValueError(f"must be in [0, 1], got {v!r}")
    return x


def _loss(v: str) -> float:
    try:
        x = float(v)
    except ValueError:
        raise ValueError(f"expected a number, inf or nan, got {v!r}") from None
    if not (x >= 0.0 or math.isnan(x)):
        raise ValueError(f"must be >= 0, inf or nan, got {v!r}")
    return x


def _config(v: str) -> dict:
    def no_constant(name: str):
        raise ValueError(f"{name} is not valid JSON")

    try:
        value = json.loads(v, parse_constant=no_constant)
    except ValueError as e:
        raise ValueError(f"expected a JSON object, got {v!r} ({e})") from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__} {v!r}")
    return value


_PARSERS = {"study": parse_str, "trial": parse_int(0), "epoch": parse_int(1),
            "val_accuracy": _accuracy, "val_loss": _loss, "seconds": parse_float(0.0),
            "config": _config}


def read_curves(path: str | Path) -> list[Curve]:
    """The curves of a curves CSV, in file order (``FormatError`` on any bad row, naming it).

    Besides each value's own rule: a trial's rows must be contiguous, start at epoch 1 and go up
    one by one, and carry the same config.
    """
    name = Path(path).name
    rows = read_csv(path, COLUMNS, _PARSERS)
    curves: list[Curve] = []
    ended: dict[tuple[str, int], int] = {}  # (study, trial) -> row of its last epoch
    group: list[dict] = []

    def close():
        if group:
            first = group[0]
            ended[(first["study"], first["trial"])] = group[-1]["_row"]
            curves.append(Curve(first["study"], first["trial"], first["config"],
                                tuple(r["val_accuracy"] for r in group),
                                tuple(r["val_loss"] for r in group),
                                tuple(r["seconds"] for r in group)))
            group.clear()

    for row in rows:
        key, n = (row["study"], row["trial"]), row["_row"]
        at = f"{name} row {n} column"
        if group and key == (group[0]["study"], group[0]["trial"]):
            if row["epoch"] != group[-1]["epoch"] + 1:
                raise FormatError(f"{at} epoch", f"expected epoch {group[-1]['epoch'] + 1} of "
                                  f"study {key[0]!r} trial {key[1]} (after row "
                                  f"{group[-1]['_row']}), got {row['epoch']}")
            if row["config"] != group[0]["config"]:
                raise FormatError(f"{at} config", f"differs from the config of study {key[0]!r} "
                                  f"trial {key[1]} at row {group[0]['_row']}")
            group.append(row)
            continue
        close()
        if key in ended:
            raise FormatError(f"{at} trial", f"study {key[0]!r} trial {key[1]} already ended at "
                              f"row {ended[key]}: a trial's rows must be contiguous")
        if row["epoch"] != 1:
            raise FormatError(f"{at} epoch", f"study {key[0]!r} trial {key[1]} must start at "
                              f"epoch 1, got {row['epoch']}")
        group.append(row)
    close()
    return curves


# ---- writing ------------------------------------------------------------------------------------
def format_curves(curves: Iterable[Curve], *, header: bool = True) -> str:
    """The CSV text of ``curves`` (with the header line unless ``header=False``)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if header:
        writer.writerow(COLUMNS)
    for c in curves:
        config = _config_json(c.config, f"curve {c.study!r} trial {c.trial}")
        for e, (a, l, s) in enumerate(zip(c.val_accuracy, c.val_loss, c.seconds), 1):
            writer.writerow([c.study, c.trial, e, repr(float(a)), repr(float(l)),
                             repr(float(s)), config])
    return out.getvalue()


def write_curves(curves: Iterable[Curve], path: str | Path) -> None:
    """Write ``curves`` as a curves CSV, atomically (a temporary file renamed over ``path``)."""
    path = Path(path)
    text = format_curves(curves)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def append_curves(curves: Iterable[Curve], path: str | Path) -> None:
    """Append ``curves``' rows to an existing curves CSV, leaving its bytes untouched; the rows
    go out in one write, flushed to disk, so an interrupted run leaves whole trials only."""
    text = format_curves(curves, header=False)
    with open(path, "a") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def shipped_curves() -> dict[str, Path]:
    """Study name -> path of the curve sets shipped in ``oasis_opt/data/curves``."""
    folder = Path(str(resources.files("oasis_opt") / "data" / "curves"))
    return {p.stem: p for p in sorted(folder.glob("*.csv"))}
