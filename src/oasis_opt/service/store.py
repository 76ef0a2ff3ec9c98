"""The service's state in SQLite: written before it takes effect, so a restart loses nothing.

Schema (``oasis-opt/service-state@1``; one file, WAL journal, every write one transaction):

``meta(key TEXT PRIMARY KEY, value TEXT)``
    ``format``; ``cluster`` (the cluster as an instance document without jobs, JSON); ``policy``
    and ``options`` (JSON); ``loop`` ("open" or "closed"; absent: open): a state is resumed only
    by a service with the same four.
``jobs(seq INTEGER PRIMARY KEY, id TEXT UNIQUE, arrival INTEGER, doc TEXT, submitted_at REAL)``
    every accepted job, ``seq`` its index in the service's instance (0, 1, ... in acceptance
    order, which breaks arrival ties as instance order does), ``doc`` its instance-format JSON.
``cancels(seq INTEGER PRIMARY KEY, slot INTEGER, requested_at REAL)``
    a withdrawal, taking effect at the boundary of slot ``slot``.
``decisions(seq INTEGER PRIMARY KEY, slot INTEGER, admitted INTEGER)``
    the policy's admission decision for a job (1 admit, 0 reject), taken in slot ``slot``; the
    primary key is what makes a decision impossible to take twice.
``allocations(slot, seq, server, role, count, PRIMARY KEY (slot, seq, server, role))``
    the containers of every decided slot (``server`` the instance's global server index,
    ``role`` 0 worker / 1 PS).
``slots(slot INTEGER PRIMARY KEY, decided_at REAL, finished_at REAL, finished TEXT, record TEXT)``
    a slot is written when decided (its decisions and allocations in the same transaction) and
    completed after it ran: ``finished`` the JSON list of jobs that completed in it, ``record``
    the executor's slot record (JSON, null without an executor); a closed-loop service adds
    ``closed_loop`` to it: ``credit`` (``{seq: work units}`` credited from the measured
    progress, what a restart replays the slot with), ``behind`` and ``replans``
    (``runtime.closed_loop``).
``progress(seq INTEGER, slot INTEGER, record TEXT, PRIMARY KEY (seq, slot))``
    the executor's per-job record of a slot (real mini-batches, accuracy ...).
``checkpoints(seq INTEGER PRIMARY KEY, slot INTEGER, blob BLOB)``
    the executor's checkpoint of a job after its last slot (weights, optimiser state, counters;
    ``pickle`` of plain numpy data, written and read only by this module), so a restarted
    service trains on from it.
``processes(pid INTEGER PRIMARY KEY, created REAL, name TEXT)``
    the processes of the local Ray an executing service started (its descendants: Ray's
    servers, agents and workers; ``created`` their start time, so that a pid the system gave
    to another process since is never taken for one of them). A service killed with SIGKILL
    cannot stop them; the next service on the same state does, before it starts its own Ray
    (``runner.stop_left_processes``). Empty for a policy-only service or one that joined a
    Ray cluster.
``models(name TEXT, version INTEGER, job TEXT, blob BLOB, val_accuracy REAL, heldout_accuracy REAL, heldout_examples INTEGER, deployed_at REAL, PRIMARY KEY (name, version))``
    the deployed models (``service.models``): version n of ``name`` is the model file
    (``training.export``, ``.npz`` bytes) of job ``job``'s final weights, its validation
    accuracy and its accuracy on the ``heldout_examples`` test images of its data seed.

Standard library only.
"""
from __future__ import annotations

import json
import pickle
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Iterable

STATE_FORMAT = "oasis-opt/service-state@1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE,
    arrival INTEGER NOT NULL, doc TEXT NOT NULL, submitted_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS cancels (seq INTEGER PRIMARY KEY REFERENCES jobs(seq),
    slot INTEGER NOT NULL, requested_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS decisions (seq INTEGER PRIMARY KEY REFERENCES jobs(seq),
    slot INTEGER NOT NULL, admitted INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS allocations (slot INTEGER NOT NULL, seq INTEGER NOT NULL,
    server INTEGER NOT NULL, role INTEGER NOT NULL, count INTEGER NOT NULL,
    PRIMARY KEY (slot, seq, server, role));
CREATE TABLE IF NOT EXISTS slots (slot INTEGER PRIMARY KEY, decided_at REAL NOT NULL,
    finished_at REAL, finished TEXT, record TEXT);
CREATE TABLE IF NOT EXISTS progress (seq INTEGER NOT NULL, slot INTEGER NOT NULL,
    record TEXT NOT NULL, PRIMARY KEY (seq, slot));
CREATE TABLE IF NOT EXISTS checkpoints (seq INTEGER PRIMARY KEY, slot INTEGER NOT NULL,
    blob BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS processes (pid INTEGER PRIMARY KEY, created REAL NOT NULL,
    name TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS models (name TEXT NOT NULL, version INTEGER NOT NULL,
    job TEXT NOT NULL, blob BLOB NOT NULL, val_accuracy REAL, heldout_accuracy REAL NOT NULL,
    heldout_examples INTEGER NOT NULL, deployed_at REAL NOT NULL, PRIMARY KEY (name, version));
"""


class StateMismatch(ValueError):
    """The state file belongs to another cluster or policy (``field``: the option to fix)."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


class Store:
    """One SQLite file (``":memory:"`` for a throw-away service). Thread-safe: one connection,
    one lock; every ``record_*`` method is one transaction."""

    def __init__(self, path: str | Path = ":memory:"):
        self.path = str(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        if self.path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # a returned commit survives a kill
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _tx(self, statements: Iterable[tuple[str, tuple]]) -> None:
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                for sql, params in statements:
                    db.execute(sql, params)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def _all(self, sql: str, params: tuple = ()) -> list[tuple]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    # ---- identity ------------------------------------------------------------------------
    def bind(self, cluster: dict, policy: str, options: dict, loop: str = "open") -> bool:
        """Tie a new state to this cluster, policy and ``loop`` ("open": progress as the
        simulator accounts it; "closed": as the executor measured it), or check that an
        existing one was made for them (``StateMismatch`` naming the option that differs; a
        state without ``loop`` was written open loop). Returns whether it existed."""
        meta = dict(self._all("SELECT key, value FROM meta"))
        mine = {"format": STATE_FORMAT, "cluster": json.dumps(cluster, sort_keys=True),
                "policy": policy, "options": json.dumps(options, sort_keys=True), "loop": loop}
        if not meta:
            self._tx(("INSERT INTO meta VALUES (?, ?)", kv) for kv in mine.items())
            return False
        meta.setdefault("loop", "open")
        for key, option in (("format", "--state"), ("cluster", "--cluster"),
                            ("policy", "--policy"), ("options", "--pricing"),
                            ("loop", "--open-loop")):
            if meta.get(key) != mine[key]:
                raise StateMismatch(option, f"the state {self.path} was written by a service with "
                                    f"another {key} (start it with the same one, or a new --state)")
        return True

    # ---- writes --------------------------------------------------------------------------
    def record_job(self, seq: int, job_id: str, arrival: int, doc: dict) -> None:
        self._tx([("INSERT INTO jobs VALUES (?, ?, ?, ?, ?)",
                   (seq, job_id, arrival, json.dumps(doc), time.time()))])

    def record_cancel(self, seq: int, slot: int) -> None:
        self._tx([("INSERT INTO cancels VALUES (?, ?, ?)", (seq, slot, time.time()))])

    def record_slot(self, slot: int, decisions: dict[int, bool], rows: list) -> None:
        """A decided slot: its decisions, allocations and the slot row, in one transaction."""
        self._tx([("INSERT INTO slots (slot, decided_at) VALUES (?, ?)", (slot, time.time())),
                  *(("INSERT INTO decisions VALUES (?, ?, ?)", (seq, slot, int(a)))
                    for seq, a in decisions.items()),
                  *(("INSERT INTO allocations VALUES (?, ?, ?, ?, ?)", (slot, *row))
                    for row in rows)])

    def record_finished(self, slot: int, finished: list[int], record: dict | None,
                        progress: dict[int, dict], checkpoints: dict[int, Any]) -> None:
        """A slot that ran: who completed, the executor's records and checkpoints."""
        self._tx([("UPDATE slots SET finished_at = ?, finished = ?, record = ? WHERE slot = ?",
                   (time.time(), json.dumps(finished),
                    None if record is None else json.dumps(record), slot)),
                  *(("INSERT OR REPLACE INTO progress VALUES (?, ?, ?)",
                     (seq, slot, json.dumps(rec))) for seq, rec in progress.items()),
                  *(("INSERT OR REPLACE INTO checkpoints VALUES (?, ?, ?)",
                     (seq, slot, pickle.dumps(ck))) for seq, ck in checkpoints.items())])

    def record_processes(self, procs: Iterable[tuple[int, float, str]]) -> None:
        """The processes this service started and that are running now, ``(pid, created,
        name)``: they replace the ones recorded before."""
        self._tx([("DELETE FROM processes", ()),
                  *(("INSERT INTO processes VALUES (?, ?, ?)", row) for row in procs)])

    def record_model(self, name: str, job: str, blob: bytes, val_accuracy: float | None,
                     heldout_accuracy: float, heldout_examples: int, at: float) -> int:
        """Model ``name``'s next version (returned): the model file ``blob`` of job ``job``."""
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                (last,) = db.execute("SELECT COALESCE(MAX(version), 0) FROM models "
                                     "WHERE name = ?", (name,)).fetchone()
                db.execute("INSERT INTO models VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           (name, last + 1, job, blob, val_accuracy, heldout_accuracy,
                            heldout_examples, at))
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        return int(last) + 1

    # ---- reads ---------------------------------------------------------------------------
    def models(self, name: str | None = None) -> list[dict]:
        """The deployed models (of ``name``, or all), oldest version first, without blobs."""
        keys = ("name", "version", "job", "val_accuracy", "heldout_accuracy",
                "heldout_examples", "deployed_at")
        where, params = ("WHERE name = ? ", (name,)) if name is not None else ("", ())
        return [dict(zip(keys, row)) for row in self._all(
            f"SELECT {', '.join(keys)} FROM models {where}ORDER BY name, version", params)]

    def model_blob(self, name: str, version: int) -> bytes | None:
        rows = self._all("SELECT blob FROM models WHERE name = ? AND version = ?",
                         (name, version))
        return bytes(rows[0][0]) if rows else None

    def processes(self) -> list[tuple[int, float, str]]:
        """``(pid, created, name)`` recorded by the last service on this state."""
        return self._all("SELECT pid, created, name FROM processes ORDER BY pid")

    def meta(self) -> dict[str, str]:
        """The ``meta`` table: format, cluster, policy and options (JSON strings)."""
        return dict(self._all("SELECT key, value FROM meta"))

    def jobs(self) -> list[tuple[int, str, int, dict, float]]:
        return [(s, i, a, json.loads(d), at) for s, i, a, d, at
                in self._all("SELECT seq, id, arrival, doc, submitted_at FROM jobs ORDER BY seq")]

    def cancels(self) -> dict[int, int]:
        return dict(self._all("SELECT seq, slot FROM cancels"))

    def decisions(self) -> dict[int, tuple[int, bool]]:
        return {s: (t, bool(a)) for s, t, a in self._all("SELECT seq, slot, admitted FROM decisions")}

    def slot_rows(self, slot: int) -> list[tuple[int, int, int, int]]:
        return self._all("SELECT seq, server, role, count FROM allocations WHERE slot = ? "
                         "ORDER BY rowid", (slot,))

    def slots(self) -> list[tuple[int, float, float | None]]:
        """(slot, decided_at, finished_at or None) of every decided slot, in order."""
        return self._all("SELECT slot, decided_at, finished_at FROM slots ORDER BY slot")

    def slot_records(self) -> dict[int, dict]:
        """The executor's record of every slot that ran with one (``slots.record``), by slot."""
        return {t: json.loads(rec) for t, rec in self._all(
            "SELECT slot, record FROM slots WHERE record IS NOT NULL ORDER BY slot")}

    def progress(self) -> dict[int, list[dict]]:
        out: dict[int, list[dict]] = {}
        for seq, rec in self._all("SELECT seq, record FROM progress ORDER BY seq, slot"):
            out.setdefault(seq, []).append(json.loads(rec))
        return out

    def checkpoints(self) -> dict[int, Any]:
        return {seq: pickle.loads(blob)
                for seq, blob in self._all("SELECT seq, blob FROM checkpoints")}
