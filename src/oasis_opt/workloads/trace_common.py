"""What every real trace shares: the shipped trace folder, strict CSV reading, and the mapping of
rigid trace jobs to the paper's model (``trace_instance``).

The trace files ship with the package (``oasis_opt/data/traces``, 1.8 MB, each folder with its
licence; see its README for sources and citations); every loader also takes ``root``, a folder
laid out the same way (e.g. ``../shared/traces``). Malformed files raise ``FormatError`` whose
field names the file, the row (1 = header) and the column.

**Mapping a rigid trace job to the paper's model** [choice]. A trace job ran ``d`` seconds on
``g`` GPUs. With slot length L (``slot_s``):

* arrival a_i = floor((submission - window start) / L) + 1;
* N_i = g: one worker per GPU, at most g at once (the paper's elastic jobs may get fewer);
* E_i = ceil(d / L) and x_i = d / (L E_i) in (0, 1], so the workload is
  W_i = ceil(E_i N_i x_i) = ceil(g d / L) worker-slots (the job's GPU-time in slots) and with all
  g workers it runs d_min = ceil(d / L) slots, its trace run time rounded up to whole slots;
* a worker is 1 GPU, 4 vCPUs, 16 GB, 10 GB storage and b_i = 5 Gbps; a PS is 2 vCPUs, 8 GB,
  10 GB and B_i = b_i min(g, 4), so one PS serves up to 4 workers (ceil(k / min(g, 4)) PSs);
* utility: the paper's sigmoid (class mix 10/55/35 %, gamma1 ~ U[1, 100], gamma2 by class,
  ``workloads._common.sample_utilities``), with the target gamma3 ~ U[1, 15] counted from the
  job's fastest completion: gamma3 + d_min - 1 slots after arrival (a long trace job cannot
  meet a 15-slot target);
* ``provenance``: the trace row (timestamp, duration, GPUs, virtual cluster), the model class by
  GPU-time as Pollux assigns it (< 1 GPU-h cifar10/ncf, 1-10 deepspeech2/bert, 10-100 yolov3,
  >= 100 imagenet; the coin within a pair is seeded), which the placement-aware cost model uses;
* instance order = submission order (the trace's real order breaks ties within a slot);
* horizon: the last job's earliest possible completion plus ``tail`` slots.

Everything random (utilities, model coins, PAI sampling) comes from ``seed``.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..costmodel.models import pollux_model_for_gpu_hours
from ..model import JOB_CLASSES, Instance, Job, Topology, Utility
from ..model.io import FormatError
from ._common import (DEFAULT_CLASS_MIX, RESOURCES, check_choice, check_class_mix, check_int,
                      check_interval, check_object, check_positive, check_seed, sample_utilities)

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
WORKER_DEMAND = {"gpu": 1.0, "cpu": 4.0, "mem": 16.0, "storage": 10.0, "bw": 5.0}
PS_DEMAND = {"cpu": 2.0, "mem": 8.0, "storage": 10.0}
WORKERS_PER_PS = 4


def trace_root(root: str | Path | None = None) -> Path:
    """The folder holding the trace folders: ``root``, or the copy shipped with the package."""
    if root is None:
        return Path(str(resources.files("oasis_opt") / "data" / "traces"))
    path = Path(root)
    if not path.is_dir():
        raise ValueError(f"root: {path} is not a folder")
    return path


# ---- strict CSV reading -------------------------------------------------------------------------
def parse_int(minimum: int) -> Callable[[str], int]:
    """A CSV cell parser: an integer (written as an integral number) >= ``minimum``, else
    ValueError saying what it expected."""
    def parse(v: str) -> int:
        try:
            x = float(v)
        except ValueError:
            raise ValueError(f"expected an integer, got {v!r}") from None
        if not math.isfinite(x) or x != int(x):
            raise ValueError(f"expected an integer, got {v!r}")
        if x < minimum:
            raise ValueError(f"must be >= {minimum}, got {v!r}")
        return int(x)
    return parse


def parse_float(minimum: float, strict: bool = False) -> Callable[[str], float]:
    """A CSV cell parser: a finite number >= ``minimum`` (> with ``strict``), else ValueError."""
    def parse(v: str) -> float:
        try:
            x = float(v)
        except ValueError:
            raise ValueError(f"expected a number, got {v!r}") from None
        if not math.isfinite(x):
            raise ValueError(f"must be finite, got {v!r}")
        if x < minimum or (strict and x == minimum):
            raise ValueError(f"must be {'>' if strict else '>='} {minimum:g}, got {v!r}")
        return x
    return parse


def parse_str(v: str) -> str:
    """A CSV cell, stripped; ValueError if it is empty."""
    if not v.strip():
        raise ValueError("expected a non-empty value")
    return v.strip()


def parse_time(v: str) -> datetime:
    """A CSV cell as a timestamp in ``TIME_FORMAT``; ValueError naming the format otherwise."""
    try:
        return datetime.strptime(v.strip(), TIME_FORMAT)
    except ValueError:
        raise ValueError(f"expected a time {TIME_FORMAT!r}, got {v!r}") from None


def read_csv(path: str | Path, columns: Sequence[str],
             parsers: dict[str, Callable[[str], object]]) -> list[dict]:
    """Rows of a CSV with exactly the header ``columns``, each field parsed by ``parsers``.

    Every error is a ``FormatError`` whose field is ``"<file> row <n> column <name>"`` (the
    header is row 1). Each row dict also carries ``_row``, its row number.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise FormatError(str(path), f"cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise FormatError(str(path), f"not a UTF-8 text file ({e.reason})") from None
    lines = list(csv.reader(text.splitlines()))
    if not lines:
        raise FormatError(f"{path.name} row 1", "empty file: no header")
    header = [h.strip() for h in lines[0]]
    if header != list(columns):
        raise FormatError(f"{path.name} row 1", f"expected the header {','.join(columns)}, "
                          f"got {','.join(header)}")
    out = []
    for n, fields in enumerate(lines[1:], start=2):
        if not fields or (len(fields) == 1 and not fields[0].strip()):
            continue  # blank line
        if len(fields) < len(columns):
            raise FormatError(f"{path.name} row {n} column {columns[len(fields)]}",
                              f"missing (expected {len(columns)} fields, got {len(fields)})")
        if len(fields) > len(columns):
            raise FormatError(f"{path.name} row {n}", f"extra field after column {columns[-1]} "
                              f"(expected {len(columns)} fields, got {len(fields)})")
        row: dict = {"_row": n}
        for col, v in zip(columns, fields):
            try:
                row[col] = parsers[col](v)
            except ValueError as e:
                raise FormatError(f"{path.name} row {n} column {col}", str(e)) from None
        out.append(row)
    return out


def _window(start: str, days) -> tuple[datetime, datetime]:
    if isinstance(days, bool) or not isinstance(days, (int, float)) or not math.isfinite(days) \
            or days <= 0:
        raise ValueError(f"days: must be a number > 0, got {days!r}")
    for fmt in (TIME_FORMAT, "%Y-%m-%d"):
        try:
            t0 = datetime.strptime(str(start), fmt)
            break
        except ValueError:
            continue
    else:
        raise ValueError(f"start: expected YYYY-MM-DD or {TIME_FORMAT!r}, got {start!r}")
    return t0, t0 + timedelta(days=float(days))



# ---- trace jobs -> instance ----------------------------------------------------------------------
@dataclass(frozen=True)
class TraceJob:
    """One rigid trace job before mapping: submitted ``offset_s`` after the window start."""

    key: str
    offset_s: float
    duration_s: float
    gpus: int
    provenance: dict


@dataclass(frozen=True, kw_only=True)
class TraceMapping:
    """How ``trace_instance`` maps trace jobs beyond the slot length (keyword fields; checked when
    built, ``ValueError`` naming the field). The defaults are the mapping of the module
    docstring.

    * ``tail`` (an integer >= 0, 24): the horizon is the last job's earliest possible completion
      plus ``tail`` slots;
    * ``horizon`` (an integer >= 1, or None: by ``tail``): this horizon instead; it must reach
      the last job's earliest completion (checked when the jobs are mapped);
    * ``class_mix`` (three probabilities summing to 1, ``workloads._common.DEFAULT_CLASS_MIX``)
      and ``priority`` (an interval (low, high), 0 <= low <= high, of gamma1; (1, 100)): the
      utilities' draw;
    * ``oversubscription`` (a finite number > 0, or None: no topology): the instance carries
      ``Topology.from_racks`` with it;
    * ``progress``: the instance's progress model, "chunk-time" or "placement".
    """

    tail: int = 24
    horizon: int | None = None
    class_mix: tuple[float, float, float] = DEFAULT_CLASS_MIX
    priority: tuple[float, float] = (1.0, 100.0)
    oversubscription: float | None = None
    progress: str = "chunk-time"

    def __post_init__(self) -> None:
        check_int("tail", self.tail, 0)
        if self.horizon is not None:
            check_int("horizon", self.horizon, 1)
        # stored as tuples of floats: the object compares and hashes by value
        object.__setattr__(self, "class_mix", check_class_mix(self.class_mix))
        object.__setattr__(self, "priority", check_interval("priority", self.priority))
        if self.oversubscription is not None:
            check_positive("oversubscription", self.oversubscription)
        check_choice("progress", self.progress, ("chunk-time", "placement"))


def trace_instance(jobs: Sequence[TraceJob], workers, pss, *, seed: int, slot_s: float,
                   mapping: TraceMapping | None = None, meta: dict | None = None,
                   model_of: Callable[[TraceJob, float], str] | None = None) -> Instance:
    """Map rigid trace jobs to the paper's model (module docstring) on the given servers.

    ``mapping``: the horizon, utilities, topology and progress model (``TraceMapping``; None:
    its defaults). ``model_of(job, coin)``: the job's model name (default: Pollux's rule by
    GPU-time).
    """
    seed = check_seed(seed)
    slot_s = check_positive("slot_s", slot_s)
    m = check_object("mapping", mapping, TraceMapping)
    if not jobs:
        raise ValueError("jobs: no trace job in the window")
    r_util, r_model = np.random.default_rng(seed).spawn(2)
    classes, utilities = sample_utilities(r_util, len(jobs), m.class_mix, m.priority)
    coins = r_model.random(len(jobs))
    model_of = model_of or (lambda j, coin: pollux_model_for_gpu_hours(
        j.duration_s * j.gpus / 3600.0, coin))
    out, last = [], 1
    for n, j in enumerate(jobs):
        arrival = int(j.offset_s // slot_s) + 1
        epochs = max(1, math.ceil(j.duration_s / slot_s))
        x = j.duration_s / (slot_s * epochs)
        u = utilities[n]
        utility = Utility.sigmoid(u.priority, u.decay, u.target + epochs - 1)
        prov = {**j.provenance, "duration_s": j.duration_s, "num_gpus": j.gpus,
                "model": model_of(j, float(coins[n])), "slot_s": slot_s}
        job = Job(j.key, arrival, epochs, j.gpus, x, dict(WORKER_DEMAND),
                  {**PS_DEMAND, "bw": WORKER_DEMAND["bw"] * min(j.gpus, WORKERS_PER_PS)},
                  utility, JOB_CLASSES[int(classes[n])], prov)
        last = max(last, arrival + job.min_duration - 1)
        out.append(job)
    T = last + int(m.tail) if m.horizon is None else check_int("horizon", m.horizon, last)
    base = Instance(T, RESOURCES, tuple(workers), tuple(pss), tuple(out), progress=m.progress,
                    meta={**(meta or {}), "seed": seed, "slot_s": slot_s})
    if m.oversubscription is None:
        return base
    return Instance(T, RESOURCES, base.worker_servers, base.ps_servers, base.jobs,
                    Topology.from_racks(base, float(m.oversubscription)), m.progress,
                    dict(base.meta, oversubscription=m.oversubscription))
