"""The experiment runner: execute ``RunSpec``s in parallel, store each result once, resume.

A sweep is a list of ``RunSpec``s. ``run_sweep`` drops duplicates (same key), skips every run
whose result is already stored, and executes the rest through a pool (in-process for
``workers=1``, else Ray, local by default or an existing cluster with ``address``). Each run
(``execute_run``, in the worker) builds its instance, solves it, **validates the schedule** (an
invalid schedule is an error, never a result), and extracts its metrics; the driver writes the
record atomically as ``<results>/<key>.json`` as soon as it arrives. A sweep killed at any point
therefore loses only the runs in flight, and re-running it computes exactly the missing ones:
nothing is duplicated (one file per key, written by rename) and nothing half-written is read.
"""
from __future__ import annotations

import platform
import socket
import time
import traceback
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from ..model.io import FormatError, jsonable, read_json, write_json_atomic
from .spec import METRICS, RunSpec, resolve_generator, resolve_policy

RUN_FORMAT = "oasis-opt/run@1"
_VERSIONED = ("oasis-opt", "numpy", "scipy", "highspy", "ortools", "pyomo", "jax", "ray")


@lru_cache(maxsize=1)
def versions() -> dict[str, str]:
    """Installed versions of the package and the libraries whose behaviour a result depends on."""
    out = {"python": platform.python_version()}
    for dist in _VERSIONED:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    commit = _git_commit()
    if commit:
        out["git"] = commit
    return out


def _git_commit() -> str | None:
    """Commit of the source checkout this package runs from (``+dirty`` with local changes);
    None for an installed wheel or without git. Results are keyed by spec, not by code, so this
    is what tells a stored result's code apart."""
    import subprocess

    src = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "-C", str(src), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--", "."],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty else "")


class RunError(RuntimeError):
    """A run failed (bad spec, solver error, or a schedule that does not validate)."""


def compute_run(spec: RunSpec) -> dict:
    """Generate, solve, validate, measure: the stored record of one run (raises ``RunError``)."""
    from ..model.validate import validate
    from ..sim.metrics import summarize

    c0, t0 = time.process_time(), time.perf_counter()
    instance = resolve_generator(spec.generator)(**spec.params)
    t1 = time.perf_counter()
    policy = resolve_policy(spec.policy)(**spec.options)
    schedule = policy.solve(instance, **spec.run_options)
    t2 = time.perf_counter()
    report = validate(instance, schedule)
    if not report.ok:
        head = "\n".join(f"  {v}" for v in report.violations[:20])
        more = len(report.violations) - 20
        raise RunError(f"{spec.policy} produced an invalid schedule "
                       f"({len(report.violations)} violations):\n{head}"
                       + (f"\n  ... and {more} more" if more > 0 else ""))
    t3 = time.perf_counter()
    metrics = {name: jsonable(METRICS[name](instance, schedule)) for name in spec.metrics}
    t4 = time.perf_counter()
    return {
        "format": RUN_FORMAT,
        "key": spec.key,
        "spec": spec.to_dict(),
        "metrics": metrics,
        "summary": jsonable(summarize(instance, schedule)),
        "stats": jsonable(schedule.stats),
        # wall times, and the CPU time of the whole run (what a loaded machine does not inflate)
        "timing": {"generate_s": t1 - t0, "solve_s": t2 - t1, "validate_s": t3 - t2,
                   "metrics_s": t4 - t3, "total_s": t4 - t0, "cpu_s": time.process_time() - c0},
        "env": {"versions": versions(), "host": socket.gethostname(), "ray_node": ray_node(),
                "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
    }


def ray_node() -> str | None:
    """The id of the Ray node this process runs on (a run's record says where it ran: on a
    cluster, which machine); None without Ray. Ray is not imported here."""
    import sys

    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    return ray.get_runtime_context().get_node_id()


def execute_run(spec_doc: dict) -> dict:
    """Worker entry point: ``{"record": ...}`` or ``{"error": message, "traceback": ...}``.

    Errors come back as data (not as exceptions re-raised by Ray) so that one bad run does not
    stop a sweep and its message reaches the driver unwrapped.
    """
    try:
        return {"record": compute_run(RunSpec.from_dict(spec_doc))}
    except Exception as e:  # noqa: BLE001 - reported per run by the driver
        return {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}


class ResultStore:
    """One JSON record per run key in a folder; writes are atomic (temporary file + rename)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def has(self, key: str) -> bool:
        return self.path(key).is_file()

    def keys(self) -> set[str]:
        if not self.root.is_dir():
            return set()
        return {p.stem for p in self.root.glob("*.json") if not p.name.startswith(".")}

    def save(self, record: dict) -> Path:
        path = self.path(record["key"])
        write_json_atomic(path, record)
        self.failure_path(record["key"]).unlink(missing_ok=True)  # an earlier failure, now fixed
        return path

    def failure_path(self, key: str) -> Path:
        return self.root / "failed" / f"{key}.txt"

    def log_failure(self, spec: RunSpec, text: str) -> Path:
        """A failed run's message and traceback, beside (never among) the results."""
        path = self.failure_path(spec.key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{spec.label()}\n\n{text}")
        return path

    def load(self, spec: RunSpec) -> dict:
        """The stored record of ``spec``; ``FormatError`` if it is not that run's record."""
        path = self.path(spec.key)
        doc = read_json(path)
        if not isinstance(doc, dict) or doc.get("format") != RUN_FORMAT:
            raise FormatError("format", f"{path}: not an {RUN_FORMAT!r} record")
        if doc.get("key") != spec.key:
            raise FormatError("key", f"{path}: holds key {doc.get('key')!r}, expected {spec.key!r}")
        stored = {k: v for k, v in doc.get("spec", {}).items() if k != "tags"}
        if stored != spec.keyed():
            raise FormatError("spec", f"{path}: stored spec differs from the requested run "
                              "(delete the file to recompute it)")
        return doc


class SweepError(RuntimeError):
    """Some runs failed; the others were stored. ``failures``: key -> (label, message)."""

    def __init__(self, failures: Mapping[str, tuple[str, str]]):
        self.failures = dict(failures)
        lines = [f"{len(self.failures)} run(s) failed:"]
        for key, (label, msg) in list(self.failures.items())[:5]:
            lines.append(f"- {key} {label}: {msg}")
        if len(self.failures) > 5:
            lines.append(f"... and {len(self.failures) - 5} more")
        super().__init__("\n".join(lines))


@dataclass
class SweepReport:
    """What a sweep did: every record (stored before or now), and which keys it computed."""

    records: dict[str, dict] = field(default_factory=dict)
    computed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failures: dict[str, tuple[str, str]] = field(default_factory=dict)
    wall_s: float = 0.0

    def record(self, spec: RunSpec) -> dict:
        return self.records[spec.key]


def unique_specs(specs: Iterable[RunSpec]) -> list[RunSpec]:
    """Specs in order, one per key (figures may ask for the same run twice)."""
    seen: dict[str, RunSpec] = {}
    for s in specs:
        seen.setdefault(s.key, s)
    return list(seen.values())


def run_sweep(specs: Iterable[RunSpec], results: str | Path, *, workers: int | None = None,
              address: str | None = None, progress: bool = True, desc: str = "runs",
              raise_on_error: bool = True,
              on_stored: Callable[[str], None] | None = None) -> SweepReport:
    """Compute every run of ``specs`` not yet stored in ``results``; return all their records.

    ``workers``: 1 = in this process without Ray; N = a local Ray with N CPUs (default: all
    CPUs); with ``address`` a running Ray cluster is joined instead. Ray starts only if some run
    is missing. ``on_stored(key)`` is called after each record is written. Failed runs are
    stored nowhere (their tracebacks go to ``<results>/failed/<key>.txt``); with
    ``raise_on_error`` a ``SweepError`` listing them is raised after every other run is stored.
    """
    from ..runtime.ray_pool import make_pool

    t0 = time.perf_counter()
    store = ResultStore(results)
    specs = unique_specs(specs)
    stored = store.keys()
    report = SweepReport()
    todo = []
    for s in specs:
        if s.key in stored:
            report.records[s.key] = store.load(s)
            report.skipped.append(s.key)
        else:
            todo.append(s)
    if todo:
        from tqdm import tqdm

        docs = [s.to_dict() for s in todo]
        # the pool first: a missing Ray fails before a progress bar is drawn
        with make_pool(workers, address) as pool, \
                tqdm(total=len(todo), desc=desc, unit="run", disable=not progress,
                     postfix={"stored": len(report.skipped)} if report.skipped else None) as bar:
            for n, out in pool.imap_unordered(execute_run, docs):
                spec = todo[n]
                if "error" in out:
                    report.failures[spec.key] = (spec.label(), out["error"])
                    store.log_failure(spec, out["error"] + "\n\n" + out["traceback"])
                    bar.set_postfix(failed=len(report.failures))
                else:
                    store.save(out["record"])
                    report.records[spec.key] = out["record"]
                    report.computed.append(spec.key)
                    if on_stored is not None:
                        on_stored(spec.key)
                bar.update(1)
    report.wall_s = time.perf_counter() - t0
    if report.failures and raise_on_error:
        raise SweepError(report.failures)
    return report
