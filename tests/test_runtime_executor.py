"""The executor, for real: a tiny schedule (2 jobs, 3 slots of a second) trained on a local Ray.

Nothing here asserts on seconds: real time only paces the slots, so what is checked is what the
executor promises whatever the machine's load: every slot runs exactly the mini-batches and
synchronous iterations its worker counts plan, on the containers the schedule places (as the
containers and PSs report them, not as the allocation says), the model learns, and the model
trained equals the in-process replay (``runtime.replay``), killed worker or not.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from oasis_opt.cli import main
from oasis_opt.model import PS, WORKER, Instance, Job, ScheduleBuilder, Server, Utility, validate
from oasis_opt.model.io import save_instance, save_result
from oasis_opt.runtime.plan import (ExecutionRefused, iteration_sizes, job_plan, minibatch_indices,
                                    plan_execution)
from oasis_opt.runtime.replay import replay_training
from oasis_opt.runtime.report import load_report

CONFIG = {"learning_rate": 0.01, "weight_decay": 1e-4, "width": 16, "depth": 1,
          "batch_size": 32, "optimizer": "adam"}
# digits: 1,078 training examples in 4 chunks -> M = 1078 // (4 * 32) = 8 mini-batches per chunk
# pass; x = 0.5 worker-slots per chunk -> one worker-slot = M / x = 16 mini-batches.
PER_WORKER_SLOT = 16
# job b carries a fitted speed model (as testbed-real jobs do): the report predicts with it too
SPEED = {"kind": "optimus-sync",
         "theta": {"const": 1e-3, "ps_load": 2e-4, "per_worker": 5e-4, "per_ps": 3e-4}}
# ... and the contention-aware one (the slot's totals over the machine's cores)
CONTENTION = {"kind": "optimus-shared", "cores": 2,
              "theta": {"const": 1e-3, "ps_load": 2e-4, "worker_core_s": 1e-3, "ps_core_s": 6e-4}}
# job a: 1 worker + 1 PS, then 2 + 2 (re-sharded), then 1 + 1: E N x = 2 * 4 * 0.5 = 4 worker-slots
# job b: 1 + 1, paused in slot 2, then 1 + 1 on other servers: 1 * 4 * 0.5 = 2 worker-slots
ROWS = {"a": [(1, "w0", WORKER, 1), (1, "p0", PS, 1), (2, "w0", WORKER, 1), (2, "w1", WORKER, 1),
              (2, "p0", PS, 2), (3, "w1", WORKER, 1), (3, "p0", PS, 1)],
        "b": [(1, "w1", WORKER, 1), (1, "p0", PS, 1), (3, "w0", WORKER, 1), (3, "p0", PS, 1)]}


def tiny(task_name: str = "digits-mlp"):
    cap = {"cpu": 2.0, "mem": 8.0, "bw": 10.0}
    dem = {"cpu": 1.0, "mem": 1.0, "bw": 1.0}
    u = Utility.sigmoid(10.0, 1.0, 2.0)
    jobs = tuple(Job(name, 1, epochs, 4, 0.5, dem, dem, u, provenance=provenance,
                     task={"name": task_name, "config": CONFIG, "seed": seed})
                 for name, epochs, seed, provenance in (("a", 2, 1, None),
                                                        ("b", 1, 2, {"speed_model": SPEED,
                                                                     "contention_model":
                                                                         CONTENTION})))
    inst = Instance(3, ("cpu", "mem", "bw"), (Server("w0", cap), Server("w1", cap)),
                    (Server("p0", cap),), jobs)
    b = ScheduleBuilder(inst)
    for job, rows in ROWS.items():
        j = inst.job_index[job]
        b.admit(j)
        for t, server, role, count in rows:
            b.add(j, t, inst.server_index[server], role, count)
    sched = b.build("hand")
    assert validate(inst, sched).ok and sched.completion == (3, 3)
    return inst, sched


@pytest.fixture(scope="module")
def ray_local():
    """A local Ray whose node declares the tiny cluster's servers, the profiling cluster's and
    the testbed-real preset's (and nothing else running)."""
    ray = pytest.importorskip("ray")
    from oasis_opt.runtime.executor import start_ray
    from oasis_opt.runtime.profile import PS_SERVER, WORKER_SERVER

    if ray.is_initialized():  # another module's Ray lacks the servers' resources
        ray.shutdown()
    from oasis_opt.workloads.testbed_real import testbed_real_servers

    real = [x.id for group in testbed_real_servers() for x in group]
    start_ray(None, ["w0", "w1", "p0", WORKER_SERVER, PS_SERVER, *real])
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def pool(ray_local):
    """Containers shared by the in-process executions of this module (warm once)."""
    from oasis_opt.runtime.executor import ContainerPool

    shared = ContainerPool()
    yield shared
    shared.close()


@pytest.fixture(scope="module")
def cli_run(ray_local, tmp_path_factory):
    """The tiny schedule executed through ``oasis-opt execute`` (progress display on)."""
    d = tmp_path_factory.mktemp("execute")
    inst, sched = tiny()
    save_instance(inst, d / "inst.json")
    save_result(inst, sched, d / "sched.json")
    code = main(["execute", str(d / "inst.json"), str(d / "sched.json"), "--slot-s", "1",
                 "--open-loop", "--progress", "--out", str(d / "report.json")])
    assert code == 0
    return inst, sched, load_report(d / "report.json")


def expected_minibatches(inst, sched, job: str) -> dict[int, int]:
    """Per slot: workers x 16 mini-batches (this instance's whole worker-slots), the plan."""
    rows = [r for r in ROWS[job] if r[2] == WORKER]
    return {t: PER_WORKER_SLOT * sum(c for s, _, r, c in rows if s == t)
            for t in sorted({r[0] for r in rows})}


# ---- the plan (no Ray) ---------------------------------------------------------------------------
def test_worker_slots_map_to_minibatches_and_iterations():
    inst, sched = tiny()
    plan = job_plan(inst, 0)
    assert (plan.chunks, plan.minibatches, plan.batch_size) == (4, 8, 32)
    assert plan.total_minibatches == 2 * 4 * 8 and plan.work == 4
    assert [plan.planned_minibatches(c) for c in range(5)] == [0, 16, 32, 48, 64]
    assert iteration_sizes(32, 2) == [2] * 16 and iteration_sizes(7, 3) == [3, 3, 1]
    # an iteration's workers train different chunks, and an epoch covers each chunk M times
    bounds = np.array([0, 270, 540, 809, 1078])
    seen = [minibatch_indices(n, seed=1, chunks=4, minibatches=8, batch_size=32,
                              chunk_bounds=bounds) for n in range(32)]
    for n in range(0, 32, 4):
        assert len({int(np.searchsorted(bounds, ix[0], "right")) for ix in seen[n:n + 4]}) == 4
    for c in range(4):
        ix = np.concatenate(seen[c::4])
        assert len(set(ix.tolist())) == len(ix) == 8 * 32  # no example twice in one pass
        assert ix.min() >= bounds[c] and ix.max() < bounds[c + 1]


@pytest.mark.parametrize("change, field", [
    (lambda j: {**j.task, "name": "nope"}, "jobs[0].task.name"),
    (lambda j: None, "jobs[0].task"),
    (lambda j: {**j.task, "config": {**CONFIG, "width": 17}}, "jobs[0].task.config.width"),
    # wine has 106 training examples: 4 chunks hold no mini-batch of 64
    (lambda j: {**j.task, "name": "wine-mlp", "config": {**CONFIG, "batch_size": 64}},
     "jobs[0].task.config.batch_size"),
])
def test_jobs_that_cannot_train_are_refused_naming_the_field(change, field):
    import dataclasses

    inst, sched = tiny()
    bad = inst.with_jobs([dataclasses.replace(inst.jobs[0], task=change(inst.jobs[0])),
                          inst.jobs[1]])
    with pytest.raises(ExecutionRefused) as err:
        plan_execution(bad, sched)
    assert err.value.field == field


def test_an_invalid_schedule_is_refused():
    inst, _ = tiny()
    with pytest.raises(ExecutionRefused, match="validator rejects") as err:
        plan_execution(inst, over_capacity(inst))
    assert err.value.field == "schedule"


def test_an_executor_takes_more_jobs_on_the_same_servers():
    import dataclasses

    from oasis_opt.runtime.executor import Executor

    inst, _ = tiny()
    ex = Executor(inst.with_jobs(inst.jobs[:1]), slot_seconds=1.0)
    ex.extend(inst)  # job b arrives
    assert ex.instance is inst
    with pytest.raises(ValueError, match="first 2 jobs"):
        ex.extend(inst.with_jobs(inst.jobs[1:]))
    with pytest.raises(ValueError, match="servers differ"):
        ex.extend(dataclasses.replace(inst, ps_servers=(Server("p9", {"cpu": 2.0, "bw": 9.0}),)))
    with pytest.raises(ValueError, match="slot_seconds"):
        Executor(inst, slot_seconds=0)


def over_capacity(inst):
    """A schedule the validator rejects: 3 workers on a 2-core server, no PS."""
    b = ScheduleBuilder(inst)
    b.admit(0)
    b.add(0, 1, inst.server_index["w0"], WORKER, 3)
    return b.build("bad")


@pytest.mark.parametrize("case", ["unknown task", "invalid schedule"])
def test_the_cli_refuses_before_ray_starts(case, tmp_path):
    inst, sched = tiny("nope" if case == "unknown task" else "digits-mlp")
    if case == "invalid schedule":
        sched = over_capacity(inst)
    save_instance(inst, tmp_path / "inst.json")
    save_result(inst, sched, tmp_path / "sched.json")
    code = ("import sys\nfrom oasis_opt.cli import main\n"
            f"rc = main(['execute', {str(tmp_path / 'inst.json')!r}, "
            f"{str(tmp_path / 'sched.json')!r}, '--slot-s', '1', '--out', "
            f"{str(tmp_path / 'r.json')!r}])\n"
            "print(rc, 'ray' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.stdout.split() == ["2", "False"]  # exit 2, Ray never imported
    err = proc.stderr.strip().splitlines()
    if case == "unknown task":
        from oasis_opt.training.tasks import TASKS  # every shipped task is named

        assert err == [f"oasis-opt: error: jobs[0].task.name: unknown task 'nope' (known: "
                       f"{', '.join(TASKS)}) (in {tmp_path / 'inst.json'})"]
        assert "digits-mlp, digits-cnn" in err[0]
    else:
        assert len(err) == 1
        assert err[0].startswith(f"oasis-opt: error: {tmp_path / 'sched.json'}: the validator "
                                 "rejects it (2 violations; first: ")
    assert not (tmp_path / "r.json").exists()


# ---- real execution ------------------------------------------------------------------------------
@pytest.mark.ray
def test_tiny_execution_progress_matches_the_schedule_slot_by_slot(cli_run):
    """The report's counts are what ran: containers that held each job on the servers they
    report, the gradients its PSs averaged, the steps they acknowledged. An executor that starts
    one worker fewer than the allocation asks (or sends one gradient fewer an iteration) fails
    here, as does one that keeps a job's containers when its counts change."""
    from oasis_opt.training.tasks import get_task

    inst, sched, report = cli_run
    task = get_task("digits-mlp")
    data, model = task.split(0), task.model(CONFIG)
    assert report.doc["instance_sha256"] == inst.fingerprint
    assert [s["slot"] for s in report.slots] == [1, 2, 3]
    assert report.planned_utility == sched.total_utility
    for job in ("a", "b"):
        j = report.job(job)
        expect = expected_minibatches(inst, sched, job)
        assert [s["slot"] for s in j["slots"]] == list(expect)
        for s in j["slots"]:
            rows = [r for r in ROWS[job] if r[0] == s["slot"]]
            assert s["workers"] == sum(c for _, _, r, c in rows if r == WORKER)
            assert s["ps"] == sum(c for _, _, r, c in rows if r == PS)
            assert sorted((x["server"], x["role"], x["count"]) for x in s["servers"]) == \
                sorted((srv, ("worker", "ps")[r], c) for _, srv, r, c in rows)
            assert s["real_minibatches"] == s["planned_minibatches"] == expect[s["slot"]]
            assert s["iterations"] == s["planned_iterations"] == PER_WORKER_SLOT
            # per iteration, the gradients the PSs averaged: one from every worker of the slot
            assert s["gradients"] == iteration_sizes(s["planned_minibatches"], s["workers"])
            assert s["restarts"] == 0
            # job a is restarted when its counts change (slots 2 and 3), job b after its pause
            # (slot 3): every slot of both assigns all the job's containers afresh
            assert s["assigned"] == s["workers"] + s["ps"]
        assert j["minibatches"]["real"] == j["minibatches"]["planned"] == sum(expect.values())
        assert j["real"]["completion_slot"] == j["planned"]["completion"] == 3
        assert isinstance(j["real"]["wall_slot"], int)
        assert j["real"]["utility"] == inst.utility_of(inst.job_index[job],
                                                       j["real"]["wall_slot"])
        assert j["restarts"] == []
        # it learned: digits has 10 classes (chance 0.1), and the loss fell by over 40%
        untrained = model.evaluate(model.init(inst.jobs[inst.job_index[job]].task["seed"]),
                                   data.x_val, data.y_val)
        assert j["real"]["val_accuracy"] > 5 / task.classes
        assert j["real"]["val_loss"] < 0.6 * float(untrained[1])
        assert j["slots"][-1]["val_accuracy"] > j["slots"][0]["val_accuracy"]
    # the slots' totals are the sums of their jobs' real counts
    for rec in report.slots:
        here = [s for j in report.jobs for s in j["slots"] if s["slot"] == rec["slot"]]
        assert (rec["jobs"], rec["workers"], rec["ps"]) == \
            (len(here), sum(s["workers"] for s in here), sum(s["ps"] for s in here))
    assert report.real_utility == sum(j["real"]["utility"] for j in report.jobs)
    # the machine's load during the run (one per slot) and the start-up by phase
    assert len(report.doc["meta"]["loadavg_slots"]) == len(report.slots)
    phases = report.doc["meta"]["startup_phases"]
    assert set(phases) == {"ray", "containers", "compile"}
    # the phases are rounded to the millisecond in meta: two of them may gain 1 ms between them
    assert phases["containers"] + phases["compile"] <= report.doc["startup_s"] + 1e-3
    assert report.doc["costmodel"]["chunk-time"]["job_slots"] == 5
    # the fitted speed model: b's own counts (1, 1), and the slot's totals over both jobs (2, 2)
    from oasis_opt.costmodel.profile import iteration_time, shared_iteration_time

    for s in report.job("b")["slots"]:
        assert s["profile_predicted_s"] == pytest.approx(16 * iteration_time(SPEED["theta"], 1, 1))
        assert s["shared_predicted_s"] == pytest.approx(16 * iteration_time(SPEED["theta"], 2, 2))
        # contention-aware: b's own (1, 1) in a slot of 2 workers and 2 PSs on this machine
        assert s["contention_predicted_s"] == pytest.approx(16 * shared_iteration_time(
            CONTENTION["theta"], 1, 1, 2, 2, report.doc["meta"]["cores"]))
    assert report.doc["meta"]["cores"] == (os.cpu_count() or 1)
    assert report.doc["costmodel"]["contention"]["job_slots"] == 2
    # refitted online: b's first slot is predicted by the model itself, its next by the refit
    b_slots = report.job("b")["slots"]
    assert b_slots[0]["online_predicted_s"] == pytest.approx(b_slots[0]["contention_predicted_s"])
    assert b_slots[1]["online_predicted_s"] is not None
    assert report.doc["costmodel"]["contention-online"]["job_slots"] == 2
    assert all(s["online_predicted_s"] is None for s in report.job("a")["slots"])
    assert all(s["profile_predicted_s"] is None for s in report.job("a")["slots"])
    assert report.doc["costmodel"]["profile"]["job_slots"] == 2


@pytest.mark.ray
def test_rays_token_warning_stays_off_the_screen(ray_local):
    """Every local Ray start logged "Token authentication is enabled for this Ray cluster ..."
    to the user's terminal; the executor's start raises that logger to ERROR (token
    authentication itself unchanged) unless OASIS_OPT_RAY_WARNINGS=1 asks for it."""
    import logging

    from oasis_opt.runtime.ray_pool import RAY_QUIET_LOGGERS

    for name in RAY_QUIET_LOGGERS:
        assert not logging.getLogger(name).isEnabledFor(logging.WARNING)


@pytest.mark.ray
def test_execution_trains_what_the_replay_trains(cli_run):
    from oasis_opt.training.tasks import get_task

    inst, sched, report = cli_run
    for job in ("a", "b"):
        i = inst.job_index[job]
        flat = replay_training(inst, sched, i)
        task = get_task("digits-mlp")
        data, model = task.split(0), task.model(CONFIG)
        from oasis_opt.training.tasks import ravel

        unflatten = ravel(model.init(0))[1]
        acc, loss = model.evaluate(unflatten(flat), data.x_val, data.y_val)
        assert report.job(job)["real"]["val_accuracy"] == pytest.approx(float(acc), abs=1e-6)
        assert report.job(job)["real"]["val_loss"] == pytest.approx(float(loss), rel=1e-5)


@pytest.mark.ray
def test_a_killed_worker_restarts_from_the_last_checkpoint(ray_local, pool, cli_run):
    from oasis_opt.runtime.executor import execute

    inst, sched, undisturbed = cli_run
    seen = {}

    def kill_mid_slot(executor, job, t, iteration):
        seen["executor"] = executor
        if (job, t, iteration) == (0, 2, 3) and "killed" not in seen:
            seen["killed"] = executor.containers(0)["workers"][0]
            ray_local.kill(seen["killed"])

    report = execute(inst, sched, slot_seconds=1.0, on_iteration=kill_mid_slot, pool=pool)
    assert "killed" in seen
    assert [(r["job"], r["slot"]) for r in report.restarts()] == [("a", 2)]
    assert "died" in report.restarts()[0]["cause"]
    slot2 = report.job("a")["slots"][1]
    assert slot2["restarts"] == 1 and slot2["real_minibatches"] == slot2["planned_minibatches"]
    ex = seen["executor"]
    for job in ("a", "b"):
        i = inst.job_index[job]
        np.testing.assert_array_equal(ex.final_params(i), replay_training(inst, sched, i))
        assert report.job(job)["real"]["val_loss"] == undisturbed.job(job)["real"]["val_loss"]
        assert report.job(job)["minibatches"] == undisturbed.job(job)["minibatches"]


@pytest.mark.ray
def test_a_job_failing_too_often_stops_the_execution(ray_local, pool):
    from oasis_opt.runtime.executor import ExecutionError, execute

    inst, sched = tiny()
    kills = []

    def kill_every_attempt(executor, job, t, iteration):
        if (job, t, iteration) == (1, 1, 0):
            kills.append(executor.containers(1)["ps"][0])
            ray_local.kill(kills[-1])

    with pytest.raises(ExecutionError, match="slot 1: job 'b' failed 2 times"):
        execute(inst, sched, slot_seconds=1.0, on_iteration=kill_every_attempt, max_restarts=1,
                pool=pool)
    assert len(kills) == 2


@pytest.mark.ray
def test_a_cluster_without_the_servers_resources_is_refused(ray_local):
    import dataclasses

    from oasis_opt.runtime.executor import ExecutionError, Executor

    inst, sched = tiny()
    other = dataclasses.replace(inst, worker_servers=(Server("zz", {"cpu": 2.0, "bw": 10.0}),
                                                      inst.worker_servers[1]))
    with Executor(other, slot_seconds=1.0) as ex:
        with pytest.raises(ExecutionError, match="resource 'server:zz'"):
            ex.warm(np.array([1, 1, 1]))


@pytest.mark.ray
def test_the_report_reader_is_strict(cli_run):
    import copy

    from oasis_opt.model.io import FormatError
    from oasis_opt.runtime.report import report_from_dict

    _, _, report = cli_run
    for change, field in [(lambda d: d.pop("wall_s"), "wall_s"),
                          (lambda d: d.__setitem__("format", "x"), "format"),
                          (lambda d: d["jobs"][1]["slots"][0].__setitem__("extra", 1),
                           "jobs[1].slots[0].extra"),
                          (lambda d: d["jobs"][0]["real"].pop("utility"),
                           "jobs[0].real.utility")]:
        doc = copy.deepcopy(report.doc)
        change(doc)
        with pytest.raises(FormatError) as err:
            report_from_dict(doc)
        assert err.value.field == field


def test_testbed_real_runs_only_when_named():
    from oasis_opt.experiments.figures import FIGURE_NAMES, get_figure
    from oasis_opt.experiments.reproduce import figure_names

    assert "testbed-real" not in figure_names(["all"]) == list(FIGURE_NAMES)
    assert figure_names(["testbed-real", "fig3"]) == ["fig3", "testbed-real"]
    assert get_figure("testbed-real").compute is not None


@pytest.mark.ray
def test_profile_times_real_iterations_and_fits_them(ray_local, tmp_path):
    """A real profile, small (the five points the four-parameter fit needs, 2 iterations each):
    every point is measured over exactly its iterations, as the PSs acknowledged them, and the
    fit's error is what its samples show. A profile that drops a point, or measures one over
    fewer iterations than asked, fails here."""
    from oasis_opt.costmodel.profile import fit_errors, load_profile

    out = tmp_path / "p.json"
    assert main(["profile", "--task", "digits-mlp", "--config", __import__("json").dumps(CONFIG),
                 "--workers", "1,2,3", "--ps", "1,2", "--iterations", "2", "--repeats", "1",
                 "--out", str(out)]) == 0
    prof = load_profile(out)
    assert sorted((x.workers, x.ps) for x in prof.samples) == \
        [(1, 1), (2, 1), (2, 2), (3, 1), (3, 2)]
    assert all(x.iterations == 2 for x in prof.samples)
    assert prof.fit == fit_errors(prof.theta, prof.samples)


# the quick variant of ``reproduce testbed-real`` shrunk to seconds: one history seed, a tiny
# profile, 2 jobs in 4 slots of half a second (seed 2: every policy completes a job), quiet only
TINY_TESTBED_REAL = {"seed": 2, "jobs": 2, "horizon": 4, "slot_s": 0.5, "tasks": ("digits-mlp",),
                     "iterations": 2, "repeats": 1, "history": (1000,), "reps": 1,
                     "loads": ("quiet",), "quantile": 0.9}


@pytest.mark.ray
def test_reproduce_testbed_real_quick_runs_end_to_end_and_resumes(ray_local, tmp_path,
                                                                    monkeypatch):
    """``reproduce testbed-real --quick`` (tiny settings, a stored profile) runs the fidelity
    study: every policy open loop and closed loop, trained for real, and draws the page with the
    targets checked. It crashed on main after minutes of profiling (``solve(..., options=...)``,
    refused by the API) and no test ran it. Here every open-loop execution is held to its
    schedule (the workers, PSs and mini-batches each job-slot really ran are the schedule's),
    every closed-loop schedule is valid and its report is held to it, the load is sampled during
    each run, and a second reproduce redraws from the stored runs without profiling or executing
    anything."""
    import oasis_opt.runtime.closed_loop as closed_loop_module
    import oasis_opt.runtime.executor as executor_module
    import oasis_opt.runtime.profile as profile_module
    from oasis_opt import validate
    from oasis_opt.experiments import testbed_real as study
    from oasis_opt.experiments.reproduce import reproduce
    from oasis_opt.model.io import load_instance, load_result

    from oasis_opt.costmodel.profile import save_profile
    from test_costmodel_profile import profile as synthetic_profile

    monkeypatch.setattr(study, "QUICK", TINY_TESTBED_REAL)
    results, out = tmp_path / "results", tmp_path / "figs"
    folder = results / "testbed-real-quick"
    # a stored profile is reused (profiling itself is the test above; this saves its minute)
    folder.mkdir(parents=True)
    save_profile(synthetic_profile(), folder / "profile-digits-mlp.json")
    written = reproduce(["testbed-real"], quick=True, results=results, out=out, progress=False)
    paths = written["testbed-real"]
    assert sorted(p.suffix for p in paths) == [".md", ".pdf", ".png"]
    page = next(p for p in paths if p.suffix == ".md").read_text()
    inst = load_instance(folder / "instance-quiet-0.json")
    # the plan's speed was calibrated by a real run under the load: its slowdown is the 0.9
    # quantile of that run's busy / predicted ratios, and the instance's chunk times are the
    # uncalibrated ones times it (the same jobs, planned slower or faster)
    from oasis_opt.runtime.calibrate import Calibration
    speed = Calibration.from_json(json.loads((folder / "calibration-quiet-0.json").read_text()))
    assert len(speed.ratios) >= 4 and speed.slowdown == pytest.approx(
        float(np.quantile(speed.ratios, 0.9)))
    bare, _, planned = study.plan(TINY_TESTBED_REAL, [synthetic_profile()], speed.slowdown)
    assert bare.fingerprint == inst.fingerprint
    uncalibrated = study.plan(TINY_TESTBED_REAL, [synthetic_profile()])[0]
    assert [j.chunk_time for j in inst.jobs] == pytest.approx(
        [speed.slowdown * j.chunk_time for j in uncalibrated.jobs])
    assert [j.epochs for j in inst.jobs] == [j.epochs for j in uncalibrated.jobs]
    for mode in study.MODES:
        for policy in study.POLICIES:
            sched = load_result(inst, folder / f"result-quiet-{mode}-{policy}-0.json")
            report = load_report(folder / f"execution-quiet-{mode}-{policy}-0.json")
            row = json.loads((folder / f"run-quiet-{mode}-{policy}-0.json").read_text())["row"]
            assert validate(inst, sched).ok, (mode, policy)
            assert report.doc["instance_sha256"] == inst.fingerprint
            if mode == "open":  # the schedule as it was planned, every mini-batch of it
                assert list(sched.allocations.rows()) == \
                    list(planned[policy].allocations.rows())
            w = sched.allocations.workers_per_job_slot(inst.I, inst.horizon)
            p = sched.allocations.ps_per_job_slot(inst.I, inst.horizon)
            for j in report.jobs:
                i = inst.job_index[j["id"]]
                assert [s["slot"] for s in j["slots"]] == \
                    [t for t in range(1, inst.horizon + 1) if w[i][t] > 0]
                for s in j["slots"]:
                    assert (s["workers"], s["ps"]) == (w[i][s["slot"]], p[i][s["slot"]])
                    if mode == "open":  # work is never cut
                        assert s["real_minibatches"] == s["planned_minibatches"]
                        assert s["iterations"] == s["planned_iterations"]
                    else:  # time-boxed: never more than planned
                        assert s["real_minibatches"] <= s["planned_minibatches"]
                if mode == "open":  # a job completes in the slot of the plan
                    assert j["real"]["completion_slot"] == j["planned"]["completion"]
            # the row's numbers are the report's
            assert row["real_utility"] == pytest.approx(report.doc["total_utility"]["real"])
            assert row["sim_utility"] == pytest.approx(planned[policy].total_utility)
            assert row["jobs_real_done"] == sum(j["real"]["completion_s"] is not None
                                                for j in report.jobs)
            assert (row["replans"] is None) == (mode == "open")
            # the load was sampled during the run (every 0.5 s, and once on entry)
            assert row["load"]["samples"] >= max(1, int(row["wall_s"] / 0.5) - 1)
            assert row["load"]["min"] <= row["load"]["median"] <= row["load"]["max"]
            assert f"| quiet | {mode} | {display_name(policy)} |" in page
    # every policy completes a job in this setting, so the targets are checked on numbers
    assert page.count("- ✅ quiet") + page.count("- ❌ quiet") == 2 * 2 * len(study.POLICIES)

    def refuse(*args, **kwargs):
        raise AssertionError("a stored result was recomputed")

    monkeypatch.setattr(executor_module, "execute", refuse)
    monkeypatch.setattr(closed_loop_module, "run_closed_loop", refuse)
    monkeypatch.setattr(profile_module, "profile_task", refuse)
    again = reproduce(["testbed-real"], quick=True, results=results, out=tmp_path / "again",
                      progress=False)["testbed-real"]
    assert next(p for p in again if p.suffix == ".md").read_text() == page


@pytest.mark.ray
def test_the_study_calibrates_before_each_repetition(ray_local, tmp_path, monkeypatch):
    """The machine is shared and its speed drifts over the minutes a load's runs take, so the
    study calibrates before each repetition and plans that repetition with its own slowdown.
    Two repetitions of one run each (DRF, open loop, to keep it short): two calibrations really
    measured, each repetition's instance the uncalibrated one times its own calibration's
    slowdown, each run stored against its repetition's instance. Bug caught: the first
    calibration reused for every repetition (the plan made minutes before the runs)."""
    from oasis_opt.costmodel.profile import save_profile
    from oasis_opt.experiments import testbed_real as study
    from oasis_opt.model.io import load_instance
    from oasis_opt.runtime.calibrate import Calibration
    from test_costmodel_profile import profile as synthetic_profile

    monkeypatch.setattr(study, "QUICK", {**TINY_TESTBED_REAL, "reps": 2})
    monkeypatch.setattr(study, "POLICIES", ("drf",))
    monkeypatch.setattr(study, "MODES", ("open",))
    results = tmp_path / "results"
    folder = results / "testbed-real-quick"
    folder.mkdir(parents=True)
    save_profile(synthetic_profile(), folder / "profile-digits-mlp.json")
    data = study.compute(quick=True, results=results, progress=False)
    uncalibrated = study.plan(TINY_TESTBED_REAL, [synthetic_profile()])[0]
    assert sorted(data["plans"]) == [("quiet", 0), ("quiet", 1)]
    assert [(r["rep"], r["policy"], r["mode"]) for r in data["rows"]] == \
        [(0, "drf", "open"), (1, "drf", "open")]
    walls = []
    for rep in (0, 1):
        speed = Calibration.from_json(
            json.loads((folder / f"calibration-quiet-{rep}.json").read_text()))
        inst = load_instance(folder / f"instance-quiet-{rep}.json")
        assert data["plans"]["quiet", rep]["speed"] == speed
        assert [j.chunk_time for j in inst.jobs] == pytest.approx(
            [speed.slowdown * j.chunk_time for j in uncalibrated.jobs])
        run = json.loads((folder / f"run-quiet-open-drf-{rep}.json").read_text())
        assert run["instance_sha256"] == inst.fingerprint
        walls.append(speed.wall_s)
    assert all(w > 0 for w in walls)  # both measured (a reused one would be the same file)
    assert (folder / "calibration-quiet-0.json").read_text() != \
        (folder / "calibration-quiet-1.json").read_text()


@pytest.mark.ray
def test_calibration_measures_a_profile_that_is_too_fast(ray_local, pool, tmp_path, capsys):
    """Two real calibrations on the same machine: one with a profile, one with that profile
    claiming every iteration takes a quarter of its time (θ / 4). The second plans 4x the
    mini-batches per slot, which really take about 4x the predicted time, so its slowdown must
    come out well above the first's (here: more than twice it; about 4x without noise). Bug
    caught: a calibration that does not measure (a constant, the profile's own fit error, or
    ratios taken from the prediction rather than the real busy time)."""
    from oasis_opt.costmodel.profile import save_profile
    from oasis_opt.runtime.calibrate import Calibration, calibrate
    from test_costmodel_profile import profile as synthetic_profile

    base = synthetic_profile()
    fast = synthetic_profile({k: v / 4 for k, v in base.theta.items()})
    # the first through the command line, as a user runs it
    save_profile(base, tmp_path / "p.json")
    assert main(["calibrate", "--profile", str(tmp_path / "p.json"), "--slot-s", "0.5",
                 "--out", str(tmp_path / "cal.json")]) == 0
    honest = Calibration.from_json(json.loads((tmp_path / "cal.json").read_text()))
    assert f"plan with: --slowdown {honest.slowdown:.3g}" in capsys.readouterr().out
    hopeful = calibrate([fast], slot_s=0.5, pool=pool)
    assert len(honest.ratios) >= 4 and len(hopeful.ratios) >= 4
    assert hopeful.slowdown > 2 * honest.slowdown, (honest, hopeful)
    assert honest.meta["instances_sha256"] != hopeful.meta["instances_sha256"]
    # both calibration runs measured, the pooled ratios theirs: 10 full-slot job-slots of DRF
    # and 4 of the (4, 2) job alone under FIFO (fewer only where a job ends before the slot)
    for cal in (honest, hopeful):
        assert [run["policy"] for run in cal.meta["runs"]] == ["drf", "fifo"]
        assert sorted(cal.ratios) == sorted(r for run in cal.meta["runs"] for r in run["ratios"])
        assert all(run["job_slots"] >= 1 for run in cal.meta["runs"])


def display_name(policy: str) -> str:
    from oasis_opt.experiments.figures.common import display

    return display(policy)


@pytest.mark.slow
@pytest.mark.ray
def test_cli_reproduce_testbed_real_quick(tmp_path):
    """The quick variant as a user runs it, unshrunk (minutes: --runslow): profiles, runs every
    policy open and closed loop, the page drawn (the command crashed on main after profiling)."""
    code = subprocess.run([sys.executable, "-m", "oasis_opt", "reproduce", "testbed-real",
                           "--quick", "--results", str(tmp_path / "res"), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=3600)
    assert code.returncode == 0, code.stderr[-2000:]
    page = (tmp_path / "out" / "testbed-real.md").read_text()
    assert page.count("| quiet | closed |") == 5 and "## Targets" in page


def test_the_readme_example_schedule_completes_its_jobs(tmp_path):
    """The README's "Running schedules for real" example generated a testbed-real instance on
    which `solve --policy drf` completed 0 of 3 jobs, so its `execute` trained nothing to the
    end. Its generate line, run as written (with a stored profile: the preset's jobs last 2-4
    slots whatever the profile's speed), must give a DRF schedule that completes every job."""
    import re
    import shlex
    from pathlib import Path

    from oasis_opt.costmodel.profile import save_profile
    from oasis_opt.model.io import load_instance, load_result
    from test_costmodel_profile import profile as synthetic_profile

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = readme.split("## Running schedules for real", 1)[1].split("\n## ", 1)[0]
    line = re.search(r"^oasis-opt generate --preset testbed-real .*$", section, re.M).group(0)
    argv = shlex.split(line.split("#")[0])[1:]
    save_profile(synthetic_profile(), tmp_path / "p.json")
    argv[argv.index("--profile") + 1] = str(tmp_path / "p.json")
    argv[argv.index("--out") + 1] = str(tmp_path / "inst.json")
    assert main(argv) == 0
    assert main(["solve", str(tmp_path / "inst.json"), "--policy", "drf", "--out",
                 str(tmp_path / "drf.json")]) == 0
    inst = load_instance(tmp_path / "inst.json")
    sched = load_result(inst, tmp_path / "drf.json")
    assert inst.I >= 2 and bool(sched.completed.all())


def test_overhead_shares_sum_restart_and_checkpoint_per_slot():
    """Catches an overhead share that drops a job of the slot, one of the two costs, or divides
    by the wrong length: two jobs in slot 1 (0.1 + 0.05 and 0 + 0.05 s), one in slot 2
    (restart unrecorded, 0.02 s checkpoint), slots of 2 s -> 10 % and 1 %."""
    from oasis_opt.runtime.report import ExecutionReport

    doc = {"slot_seconds": 2.0, "jobs": [
        {"slots": [{"slot": 1, "restart_s": 0.1, "checkpoint_s": 0.05},
                   {"slot": 2, "restart_s": None, "checkpoint_s": 0.02}]},
        {"slots": [{"slot": 1, "restart_s": 0.0, "checkpoint_s": 0.05}]}]}
    shares = ExecutionReport(doc).overhead_shares()
    assert list(shares) == [1, 2]
    assert shares[1] == pytest.approx(0.1) and shares[2] == pytest.approx(0.01)
