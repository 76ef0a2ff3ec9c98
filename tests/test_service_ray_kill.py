"""``oasis-opt serve --open-loop`` training on a real local Ray, killed with SIGKILL in the middle
of a slot and restarted on the same state file (the open loop, so that the run can be held to the
simulator's schedule and its in-process replay; the closed loop's restart replays the stored
measured progress, ``test_service.py``): every accepted job goes on from its last checkpoint and
completes, no decision is taken twice, a cancellation stands, the slot that was running when the
service died runs again as it was decided, every planned mini-batch is trained exactly once, and
the final parameters are bit for bit those of the in-process replay of the schedule (what an
uninterrupted run trains).

Nothing waits a tuned time: every wait polls the service's /health or its state file a bounded
number of times. SIGKILL leaves Ray's agents running for about a minute; the restarted service
stops the ones its predecessor recorded before it starts its own Ray (checked here among the
killed service's descendants, by their ids); whatever is left at the end, the test kills.
"""
from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from oasis_opt.model.io import instance_to_dict, save_instance
from oasis_opt.online.pricing import oracle_pricing, save_pricing
from oasis_opt.policies import get_policy
from oasis_opt.sim.core import simulate

pytestmark = pytest.mark.ray
pytest.importorskip("ray")
httpx = pytest.importorskip("httpx")
psutil = pytest.importorskip("psutil")

sys.path.insert(0, str(Path(__file__).parent))
from test_service_live import free_port  # noqa: E402
from test_service_ray import cluster_and_jobs  # noqa: E402

POLLS = 2400  # at most this many polls of POLL_S each: Ray's start-up on a busy machine
POLL_S = 0.25


class Training:
    """``oasis-opt serve`` with Ray execution in a subprocess of its own session."""

    def __init__(self, d: Path, state: Path, slot_s: float):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = d / f"serve-{self.port}.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "oasis_opt", "serve", "--cluster", str(d / "cluster.json"),
             "--policy", "oasis", "--pricing", str(d / "pricing.json"), "--slot-s", str(slot_s),
             "--state", str(state), "--port", str(self.port), "--open-loop"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def health(self) -> dict | None:
        try:
            return httpx.get(self.url + "/health", timeout=10).json()
        except httpx.HTTPError:
            return None

    def wait(self, ok, what: str) -> dict:
        for _ in range(POLLS):
            if self.proc.poll() is not None:
                raise AssertionError(f"the service exited ({self.proc.returncode}): "
                                     + self.log_path.read_text()[-3000:])
            health = self.health()
            if health is not None and ok(health):
                return health
            time.sleep(POLL_S)
        raise AssertionError(f"{what}: not reached after {POLLS} polls; "
                             + self.log_path.read_text()[-3000:])

    def descendants(self) -> list:
        try:
            return psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def alive(p) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def reap(procs: list) -> list[str]:
    """The processes of ``procs`` still alive after a bounded wait (their names), then killed:
    they are this test's own (descendants of the service it started)."""
    _, alive = psutil.wait_procs(procs, timeout=30)
    left = []
    for p in alive:
        try:
            left.append(f"{p.pid} {p.name()}")
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=30)
    return left


def test_a_service_killed_while_training_resumes_every_job_from_its_checkpoint(tmp_path):
    inst = cluster_and_jobs()
    pricing = oracle_pricing(inst)
    save_instance(inst.with_jobs(()), tmp_path / "cluster.json")
    save_pricing(pricing, tmp_path / "pricing.json")
    state = tmp_path / "state.db"
    db = sqlite3.connect(state, isolation_level=None, timeout=30)

    first = Training(tmp_path, state, slot_s=3.0)
    spawned: list = []
    try:
        first.wait(lambda h: True, "the service answering")
        docs = instance_to_dict(inst)["jobs"]
        # a third job, withdrawn at once: its cancel must survive the kill (before slot 1,
        # so it never arrives and the other two are decided as without it)
        docs.append({**docs[1], "id": "c", "arrival": 4})
        for doc in docs:  # in before slot 1: Ray is still starting
            r = httpx.post(first.url + "/jobs", json=doc, timeout=30)
            assert r.status_code == 201, r.text
        r = httpx.delete(first.url + "/jobs/c", timeout=30)
        assert r.status_code == 200 and r.json()["state"] == "cancelling", r.text

        def mid_slot(h: dict) -> bool:  # a slot after one that trained and was checkpointed
            spawned.extend(p for p in first.descendants() if p not in spawned)
            done = db.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0]
            return done >= 1 and h["slot_running"] is not None and h["slot_running"] >= 2

        killed_in = first.wait(mid_slot, "a slot running after a checkpoint")["slot_running"]
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(timeout=60)
    finally:
        if first.proc.poll() is None:
            first.proc.kill()
            first.proc.wait()
        first.log.close()
    # what SIGKILL left running: Ray's agents outlive their raylet by about a minute
    left = {p.pid: p for p in spawned if alive(p)}

    before = {
        "decisions": db.execute("SELECT seq, slot, admitted FROM decisions ORDER BY seq").fetchall(),
        "slots": db.execute("SELECT slot, decided_at FROM slots ORDER BY slot").fetchall(),
        "finished": db.execute("SELECT slot FROM slots WHERE finished_at IS NOT NULL").fetchall(),
        "checkpoints": dict(db.execute("SELECT seq, slot FROM checkpoints").fetchall()),
    }
    # killed in the middle of slot ``killed_in``: decided and written, not finished
    assert (killed_in,) not in before["finished"]
    assert killed_in in [s for s, _ in before["slots"]]

    second = Training(tmp_path, state, slot_s=3.0)
    try:
        # the restarted service stops them before it starts its own Ray, and says which
        second.wait(lambda h: h["status"] != "starting", "the restarted service's Ray")
        said = re.search(r"stopped \d+ processes the previous service on this state left "
                         r"running \((.*)\)", second.log_path.read_text())
        assert said is not None or not left, second.log_path.read_text()[-2000:]
        stopped = {int(x.split()[0]) for x in said.group(1).split(", ")} if said else set()
        still = [str(pid) for pid, p in left.items() if alive(p)]
        assert not still, f"left running by the killed service: {still}"
        assert stopped <= {p.pid for p in spawned}  # only the killed service's own
        second.wait(lambda h: h["status"] in ("finished", "failed"), "the restarted run's end")
        health = second.health()
        assert health is not None and health["status"] == "finished", health
        views = httpx.get(second.url + "/jobs", timeout=30).json()
        spawned2 = second.descendants()
    finally:
        second.stop()
    reap(spawned2 + list(left.values()))

    # no job lost, no decision taken twice: the decisions and the decided slots stand as they
    # were written before the kill, the simulator's decisions for the same arrivals
    ref = simulate(inst, get_policy("oasis", pricing=pricing))
    assert db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == inst.I + 1
    decisions = db.execute("SELECT seq, slot, admitted FROM decisions ORDER BY seq").fetchall()
    assert decisions == before["decisions"]
    assert [bool(a) for _, _, a in decisions] == list(ref.admitted) == [True, True]
    slots = db.execute("SELECT slot, decided_at FROM slots ORDER BY slot").fetchall()
    assert slots[:len(before["slots"])] == before["slots"]
    assert [v["state"] for v in views] == ["completed", "completed", "cancelled"]
    assert [v["completion"] for v in views[:2]] == list(ref.completion)
    # the cancel kept: the job never arrived, got no container, and its cancel is stored
    assert db.execute("SELECT seq, slot FROM cancels").fetchall() == [(2, 1)]
    assert db.execute("SELECT COUNT(*) FROM allocations WHERE seq = 2").fetchone()[0] == 0
    # every planned mini-batch trained once: the killed slot's progress was never recorded, and
    # it ran again from the checkpoint of the slot before
    for v, job in zip(views[:2], inst.jobs):
        real = v["real"]
        assert real["minibatches"] == real["planned_minibatches"] == job.epochs * 4 * 8
    rows = db.execute("SELECT seq, slot FROM progress ORDER BY seq, slot").fetchall()
    assert len(rows) == len(set(rows))
    finals = {seq: json.loads(rec) for seq, rec in
              db.execute("SELECT seq, record FROM progress WHERE slot = (SELECT MAX(slot) "
                         "FROM progress p WHERE p.seq = progress.seq)").fetchall()}
    assert sorted(finals) == [0, 1]
    assert all(f["completion_slot"] == c for f, c in
               zip((finals[0], finals[1]), ref.completion))
    # each job went on from its checkpoint: a restart from scratch (a restore forgotten) would
    # leave the final checkpoint short of the job's mini-batches, its completion undone
    from oasis_opt.service.store import Store

    store = Store(state)
    try:
        checkpoints = store.checkpoints()
    finally:
        store.close()
    assert sorted(checkpoints) == [0, 1]
    assert [checkpoints[j]["done"] for j in (0, 1)] == [j.epochs * 4 * 8 for j in inst.jobs]
    assert [checkpoints[j]["completion_slot"] for j in (0, 1)] == list(ref.completion)
    # and trained what an uninterrupted run trains: the in-process replay of the schedule
    # (the executor's synchronous PS iterations are bit-identical to it)
    from oasis_opt.runtime.replay import replay_training

    for j in (0, 1):
        np.testing.assert_array_equal(checkpoints[j]["flat"], replay_training(inst, ref, j))
    print("left by the SIGKILL:", sorted(left), "stopped by the restart:", sorted(stopped))
