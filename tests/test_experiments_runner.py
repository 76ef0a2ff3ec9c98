"""The experiment runner: stable run keys, one atomic record per run, resume after a kill,
invalid schedules reported as errors, and Ray results equal to in-process results."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oasis_opt.experiments.runner import (RUN_FORMAT, ResultStore, SweepError, compute_run,
                                          run_sweep)
from oasis_opt.experiments.spec import RunSpec, canonical
from oasis_opt.model import ScheduleBuilder, validate
from oasis_opt.model.io import FormatError
from oasis_opt.sim.greedy import GreedyPolicy
from oasis_opt.workloads import paper_sim

TINY = {"jobs": 6, "horizon": 20, "worker_servers": 3, "ps_servers": 3}


def tiny_specs(n: int, policy: str = "greedy") -> list[RunSpec]:
    return [RunSpec("paper_sim", {"seed": s, **TINY}, policy,
                    metrics=("total_utility", "timeliness", "per_job"), tags={"seed": s})
            for s in range(n)]


class OverCapacityPolicy(GreedyPolicy):
    """Greedy, then one extra worker row far beyond a server's capacity: must not validate."""

    name = "over-capacity"

    def solve(self, instance, **kw):
        sched = super().solve(instance, **kw)
        b = ScheduleBuilder(instance)
        for i, adm in enumerate(sched.admitted):
            if adm:
                b.admit(i)
        b.add_array([list(r) for r in sched.allocations.rows()])
        job = next(i for i, adm in enumerate(sched.admitted) if adm)
        b.add(job, int(instance.arrival[job]), 0, 0, 10_000)
        return b.build(self.name)


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.json"))}


# ---- run keys -------------------------------------------------------------------------------
def test_key_ignores_order_and_tags_but_not_values():
    a = RunSpec("paper_sim", {"seed": 1, "jobs": 5}, "oasis", {"u_scale": 0.5}, tags={"x": 1})
    b = RunSpec("paper_sim", {"jobs": 5, "seed": 1}, "oasis", {"u_scale": 0.5}, tags={"y": 2})
    assert a.key == b.key
    for other in (RunSpec("paper_sim", {"seed": 2, "jobs": 5}, "oasis", {"u_scale": 0.5}),
                  RunSpec("paper_sim", {"seed": 1, "jobs": 5}, "oasis", {"u_scale": 0.51}),
                  RunSpec("paper_sim", {"seed": 1, "jobs": 5}, "fifo", {"u_scale": 0.5}),
                  RunSpec("testbed", {"seed": 1, "jobs": 5}, "oasis", {"u_scale": 0.5}),
                  RunSpec("paper_sim", {"seed": 1, "jobs": 5}, "oasis", {"u_scale": 0.5},
                          metrics=("per_job",))):
        assert other.key != a.key


def test_key_pinned():
    # Stored results are found by key: a change here orphans every results folder, so it must
    # be deliberate (bump KEY_SCHEMA) rather than a side effect of a refactor.
    spec = RunSpec("paper_sim", {"seed": 0, "jobs": 100, "class_mix": (0.0, 0.5, 0.5)}, "oasis",
                   {"u_scale": 0.2})
    text = ('{"generator":"paper_sim","metrics":["total_utility"],"options":{"u_scale":0.2},'
            '"params":{"class_mix":[0.0,0.5,0.5],"jobs":100,"seed":0},"policy":"oasis",'
            '"run_options":{}}')
    assert spec.key == hashlib.sha256(f"oasis-opt/run-key@2\n{text}".encode()).hexdigest()[:20]


def test_key_same_in_another_process():
    spec = tiny_specs(1)[0]
    code = ("from oasis_opt.experiments.spec import RunSpec; import json,sys; "
            "print(RunSpec.from_dict(json.loads(sys.argv[1])).key)")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(spec.to_dict())], check=True,
                         capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "123"})
    assert out.stdout.strip() == spec.key


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=5)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8)


@given(st.dictionaries(st.text(min_size=1, max_size=6), json_values, max_size=4),
       st.dictionaries(st.text(min_size=1, max_size=6), json_values, max_size=3))
def test_spec_round_trips_through_json_with_its_key(params, options):
    spec = RunSpec("paper_sim", params, "greedy", options)
    again = RunSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again.key == spec.key and again.keyed() == spec.keyed()


def test_bad_specs_are_rejected_by_field():
    with pytest.raises(ValueError, match=r"spec\.params\.x"):
        RunSpec("paper_sim", {"x": float("nan")}, "greedy")
    with pytest.raises(ValueError, match=r"spec\.params\.y"):
        RunSpec("paper_sim", {"y": {1, 2}}, "greedy")
    with pytest.raises(ValueError, match="unknown metric"):
        RunSpec("paper_sim", {}, "greedy", metrics=("nope",))
    with pytest.raises(ValueError, match=r"spec\.tags\.t"):
        RunSpec("paper_sim", {}, "greedy", tags={"t": object()})
    assert canonical((1, 2.5, {"a": None})) == [1, 2.5, {"a": None}]


# ---- one run ---------------------------------------------------------------------------------
def test_record_matches_a_direct_solve():
    spec = tiny_specs(1)[0]
    rec = compute_run(spec)
    inst = paper_sim(0, **TINY)
    sched = GreedyPolicy().solve(inst)
    assert validate(inst, sched).ok
    assert rec["format"] == RUN_FORMAT and rec["key"] == spec.key
    assert rec["metrics"]["total_utility"] == pytest.approx(sched.total_utility)
    assert rec["metrics"]["per_job"]["completion"] == list(sched.completion)
    assert rec["summary"]["completed"] == int(sched.completed.sum())
    assert set(rec["timing"]) >= {"generate_s", "solve_s", "validate_s", "total_s"}
    assert rec["env"]["versions"]["oasis-opt"]
    tl = rec["metrics"]["timeliness"]
    n_done = sum(len(v) for v in tl["completed"].values())
    n_cens = sum(len(v) for v in tl["censored"].values())
    assert n_done + n_cens == inst.I  # paper_sim utilities are all sigmoids


# ---- sweeps in-process -----------------------------------------------------------------------
def test_sweep_stores_each_run_once_and_skips_stored(tmp_path):
    specs = tiny_specs(4)
    rep = run_sweep(specs + specs[:2], tmp_path, workers=1, progress=False)  # duplicates dropped
    assert sorted(rep.computed) == sorted(s.key for s in specs) and not rep.skipped
    before = files(tmp_path)
    assert set(before) == {f"{s.key}.json" for s in specs}
    mtimes = {p.name: p.stat().st_mtime_ns for p in tmp_path.glob("*.json")}
    rep2 = run_sweep(specs, tmp_path, workers=1, progress=False)
    assert rep2.computed == [] and sorted(rep2.skipped) == sorted(s.key for s in specs)
    assert files(tmp_path) == before
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.glob("*.json")} == mtimes
    assert {k: r["metrics"] for k, r in rep2.records.items()} == \
        {k: r["metrics"] for k, r in rep.records.items()}


def test_interrupted_sweep_resumes_without_recomputing(tmp_path):
    specs = tiny_specs(6)
    stored: list[str] = []

    def interrupt_after_two(key):
        stored.append(key)
        if len(stored) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(specs, tmp_path, workers=1, progress=False, on_stored=interrupt_after_two)
    first = files(tmp_path)
    assert set(first) == {f"{k}.json" for k in stored}
    rep = run_sweep(specs, tmp_path, workers=1, progress=False)
    assert sorted(rep.skipped) == sorted(stored)
    assert len(rep.computed) == 4 and not set(rep.computed) & set(stored)
    after = files(tmp_path)
    assert len(after) == 6 and {k: after[k] for k in first} == first


def test_sweep_killed_by_sigkill_resumes(tmp_path):
    """A real kill -9 of the sweeping process after its third stored run, then a resume."""
    specs = tiny_specs(7)
    script = textwrap.dedent(f"""
        import json, os, signal, sys
        from oasis_opt.experiments.runner import run_sweep
        from oasis_opt.experiments.spec import RunSpec
        specs = [RunSpec.from_dict(d) for d in json.loads(sys.argv[1])]
        n = []
        def kill(key):
            n.append(key)
            if len(n) == 3:
                os.kill(os.getpid(), signal.SIGKILL)
        run_sweep(specs, {str(tmp_path)!r}, workers=1, progress=False, on_stored=kill)
    """)
    proc = subprocess.run([sys.executable, "-c", script, json.dumps([s.to_dict() for s in specs])],
                          capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    first = files(tmp_path)
    assert len(first) == 3
    rep = run_sweep(specs, tmp_path, workers=1, progress=False)
    assert len(rep.skipped) == 3 and len(rep.computed) == 4
    after = files(tmp_path)
    assert len(after) == 7 and {k: after[k] for k in first} == first


def test_invalid_schedule_is_an_error_not_a_result(tmp_path):
    good = tiny_specs(2)
    bad = RunSpec("paper_sim", {"seed": 0, **TINY}, f"{__name__}:OverCapacityPolicy")
    with pytest.raises(SweepError, match="invalid schedule") as err:
        run_sweep(good + [bad], tmp_path, workers=1, progress=False)
    assert set(err.value.failures) == {bad.key}
    assert set(files(tmp_path)) == {f"{s.key}.json" for s in good}
    assert "capacity" in (tmp_path / "failed" / f"{bad.key}.txt").read_text()
    rep = run_sweep(good + [bad], tmp_path, workers=1, progress=False, raise_on_error=False)
    assert rep.failures.keys() == {bad.key} and not rep.computed  # the failure is retried


def test_store_writes_atomically_and_checks_what_it_reads(tmp_path):
    store = ResultStore(tmp_path)
    spec = tiny_specs(1)[0]
    rec = compute_run(spec)
    store.save(rec)
    good = store.path(spec.key).read_bytes()
    with pytest.raises(ValueError):  # NaN is not JSON: nothing is written, the old file stays
        store.save({**rec, "metrics": {"total_utility": float("nan")}})
    assert store.path(spec.key).read_bytes() == good
    (tmp_path / f".{spec.key}.json.tmp").write_text("{half a fi")  # debris of a killed write
    assert store.keys() == {spec.key}
    assert store.load(spec)["metrics"] == rec["metrics"]
    other = tiny_specs(2)[1]
    store.path(other.key).write_text(store.path(spec.key).read_text())  # a misplaced record
    with pytest.raises(FormatError, match="key"):
        store.load(other)


# ---- Ray -------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def ray_session():
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        from oasis_opt.runtime.ray_pool import init_ray

        init_ray(None, num_cpus=2)
    yield ray
    if started:
        ray.shutdown()


@pytest.mark.ray
def test_the_local_rays_workers_are_not_niced(ray_session):
    # Ray's default worker niceness (15) starved the package's own work next to busy processes
    from oasis_opt.runtime.ray_pool import RAY_WORKER_NICENESS

    @ray_session.remote
    def niceness():
        return os.nice(0)

    assert ray_session.get(niceness.remote()) == RAY_WORKER_NICENESS == 0


@pytest.mark.ray
def test_ray_sweep_equals_in_process_and_resumes(ray_session, tmp_path):
    specs = tiny_specs(5)
    local = run_sweep(specs, tmp_path / "local", workers=1, progress=False)

    stored: list[str] = []

    def interrupt_after_two(key):
        stored.append(key)
        if len(stored) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(specs, tmp_path / "ray", workers=2, progress=False, on_stored=interrupt_after_two)
    assert len(files(tmp_path / "ray")) == 2
    rep = run_sweep(specs, tmp_path / "ray", workers=2, progress=False)
    assert len(rep.computed) == 3 and sorted(rep.skipped) == sorted(stored)
    assert ray_session.is_initialized()  # the fixture's Ray is used, not shut down
    for s in specs:
        assert rep.records[s.key]["metrics"] == local.records[s.key]["metrics"]
        assert rep.records[s.key]["summary"] == local.records[s.key]["summary"]
    bad = RunSpec("paper_sim", {"seed": 0, **TINY, "jobs": -1}, "greedy")
    with pytest.raises(SweepError, match="jobs"):
        run_sweep([bad], tmp_path / "ray", workers=2, progress=False)


def test_a_local_ray_that_times_out_at_startup_is_started_again():
    # Ray waits a fixed 30 s for its raylet; a loaded machine can exceed it. Only that failure
    # is retried, after a shutdown, a bounded number of times.
    from oasis_opt.runtime.ray_pool import RAY_START_ATTEMPTS, retry_startup

    calls, stops = [], []

    def start(fail_times, message):
        def attempt():
            calls.append(1)
            if len(calls) <= fail_times:
                raise Exception(message)
            return "started"
        return attempt

    timeout = ("The current node timed out during startup. This could happen because some of "
               "the raylet failed to startup or the GCS has become overloaded.")
    assert retry_startup(start(RAY_START_ATTEMPTS - 1, timeout), lambda: stops.append(1)) \
        == "started"
    assert len(calls) == RAY_START_ATTEMPTS and len(stops) == RAY_START_ATTEMPTS - 1
    calls.clear()
    with pytest.raises(Exception, match="timed out during startup"):  # the last one propagates
        retry_startup(start(RAY_START_ATTEMPTS, timeout), lambda: None)
    assert len(calls) == RAY_START_ATTEMPTS
    calls.clear()
    with pytest.raises(Exception, match="address already in use"):  # anything else at once
        retry_startup(start(1, "address already in use"), lambda: None)
    assert len(calls) == 1


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="child processes via Linux /proc")
def test_a_failed_ray_start_leaves_no_process_behind():
    # a start that timed out had started processes (the GCS, dashboard, monitors) that
    # ray.shutdown() does not stop: they are killed before the next attempt, their children too
    import time

    from oasis_opt.runtime.ray_pool import child_pids, retry_startup

    started, grandchildren = [], []
    sleeper = [sys.executable, "-c", "import subprocess, sys, time; "
               "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
               "time.sleep(600)"]

    def start():
        proc = subprocess.Popen(sleeper)
        started.append(proc)
        for _ in range(600):  # until its own child is there (a loaded machine may take a while)
            if child_pids(proc.pid):
                break
            time.sleep(0.1)
        grandchildren.extend(child_pids(proc.pid))
        if len(started) == 1:
            raise Exception("The current node timed out during startup.")
        return "started"

    def alive(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
        except OSError:
            return False

    assert retry_startup(start, lambda: None) == "started"
    first, second = started
    assert len(grandchildren) == 2
    assert not alive(first.pid) and not alive(grandchildren[0])  # killed (and reaped) by the retry
    assert second.poll() is None and alive(grandchildren[1])  # the successful attempt's stay
    for pid in (grandchildren[1],):
        os.kill(pid, signal.SIGKILL)
    second.kill()
    second.wait()
