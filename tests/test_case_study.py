"""The computer-vision case study end to end, small: ``oasis-opt serve`` started for real (uvicorn
on 127.0.0.1, a SQLite state, a local Ray running the executor's JAX training), a search of four
digits trials driven by the automl-thesis controller one trial at a time, the best model
exported. Checked independently of what the case study reports: the exported weights are the
state's checkpoint and reproduce the reported held-out accuracy (recomputed here from the
task's own split, and through ``oasis-opt predict``), the held-out images are disjoint from
everything trained or searched on, the service's schedule passes ``validate``, and a stopped
trial really trained fewer mini-batches than its job needs.

With one trial at a time the order is fixed (the study's order of seed 0: trials 1, 3, 2, 0):
trial 3 completes with a good accuracy before trial 2 (plain SGD at learning rate 2e-4, near
chance after an epoch) is judged, so the controller stops at least that one. Nothing waits a
tuned time and nothing asserts on seconds.
"""
from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

pytestmark = pytest.mark.ray
pytest.importorskip("ray")
pytest.importorskip("uvicorn")
pytest.importorskip("optax")


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    from oasis_opt.experiments.case_study import CaseStudy, run_case_study

    out = tmp_path_factory.mktemp("case-study")
    settings = CaseStudy(trials=4, concurrent=1, jobs=0, epochs=4, slot_s=1.0, horizon=60,
                         seed=0)
    lines: list[str] = []
    summary = run_case_study(settings, out, progress=False, log=lines.append)
    return settings, out, summary, lines


def test_the_service_ran_every_job_and_its_schedule_is_valid(study):
    from oasis_opt.model import validate
    from oasis_opt.service.scheduler import stored_schedule
    from oasis_opt.service.store import Store

    settings, out, summary, _ = study
    assert json.loads((out / "summary.json").read_text()) == summary
    assert summary["validation"] == {"ok": True, "violations": []}
    store = Store(out / "state.db")
    try:
        inst, schedule = stored_schedule(store)
    finally:
        store.close()
    assert validate(inst, schedule).ok
    by_id = {j["id"]: j for j in summary["jobs"]}
    assert sorted(by_id) == [f"trial-{t:02d}" for t in range(settings.trials)]
    assert all(j["state"] in ("completed", "cancelled", "rejected") for j in by_id.values())
    for n, job in enumerate(inst.jobs):  # the service's completions are the schedule's
        if by_id[job.id]["state"] == "completed":
            assert schedule.completion[n] == by_id[job.id]["completion"]
            assert by_id[job.id]["minibatches"] == by_id[job.id]["minibatches_to_complete"]
    assert summary["service"]["admitted"] == sum(schedule.admitted)
    records = [json.loads(r) for (r,) in sqlite3.connect(out / "state.db").execute(
        "SELECT record FROM slots WHERE record IS NOT NULL")]
    assert len(records) >= summary["service"]["last_slot_with_jobs"]
    # one trial at a time: the controller's cap held in every slot
    for slot in range(1, summary["service"]["last_slot_with_jobs"] + 1):
        assert sum(any(r["slot"] == slot for r in j["slots"]) for j in by_id.values()) <= 1


def test_stopped_trials_trained_fewer_minibatches(study):
    _, _, summary, lines = study
    stopped = [j for j in summary["jobs"] if j["stopped_at_epoch"] is not None]
    assert any(j["id"] == "trial-02" for j in stopped), lines
    for j in stopped:
        assert j["state"] == "cancelled"
        assert 0 < j["minibatches"] < j["minibatches_to_complete"], j
        assert j["completion"] is None and j["utility"] == 0.0
    assert summary["controller"]["stopped"] == len(stopped)
    for j in summary["jobs"]:  # a stop the service refused (409): the trial completed whole
        if j.get("stop_too_late_at_epoch") is not None:
            assert j["state"] == "completed" and j["stopped_at_epoch"] is None, j
            assert j["minibatches"] == j["minibatches_to_complete"], j
    assert summary["controller"]["minibatches_saved"] == sum(
        j["minibatches_to_complete"] - j["minibatches"] for j in stopped) > 0


def test_the_exported_model_reproduces_the_heldout_accuracy(study):
    from oasis_opt.training.export import load_model
    from oasis_opt.training.tasks import get_task, ravel
    from oasis_opt.service.store import Store

    settings, out, summary, _ = study
    best = summary["best"]
    done = [j for j in summary["jobs"] if j["state"] == "completed"]
    assert best["val_accuracy"] == max(j["val_accuracy"] for j in done)
    model = load_model(out / "model.npz")
    store = Store(out / "state.db")
    try:
        seq = next(s for s, job_id, *_ in store.jobs() if job_id == best["job"])
        np.testing.assert_array_equal(model.flat, store.checkpoints()[seq]["flat"])
    finally:
        store.close()
    # the accuracy, recomputed from the task's own split and the raw weights
    task = get_task(best["task"])
    split = task.split(settings.seed)
    net = task.model(best["config"])
    params = ravel(net.init(0))[1](model.flat)
    accuracy, _ = net.evaluate(params, split.x_test, split.y_test)
    assert float(accuracy) == pytest.approx(best["accuracy"], abs=1e-6)
    assert len(split.y_test) == best["examples"]
    # the files oasis-opt predict reads are those images, in that order
    x, y = task.raw()
    images, labels = np.load(out / "heldout-images.npy"), np.load(out / "heldout-labels.npy")
    np.testing.assert_array_equal(labels, split.y_test)
    np.testing.assert_array_equal(task.prepare(images, 0.0, 16.0), split.x_test)
    assert model.accuracy(images, labels) == pytest.approx(best["accuracy"], abs=1e-6)
    assert best["accuracy"] > 0.5  # a real model, far above chance (0.1)


def test_the_best_model_is_deployed_served_and_benchmarked(study):
    """Deployment and benchmarking: the job exported is the one the service deployed, the
    held-out accuracy through the API is the exported model's, the model is in the state as
    version 1, and every job that trained has its real speed beside the plan's."""
    _, out, summary, _ = study
    serving, best = summary["serving"], summary["best"]
    assert serving["job"] == best["job"] and serving["version"] == 1
    assert serving["api_accuracy"] == pytest.approx(best["accuracy"], abs=1e-9)
    assert serving["heldout_accuracy"] == pytest.approx(best["accuracy"], abs=1e-9)
    assert serving["heldout_examples"] == best["examples"]
    assert serving["val_accuracy"] == best["val_accuracy"]
    assert serving["latency_ms"]["requests"] == 50 and serving["latency_ms"]["p50"] > 0
    assert serving["throughput"]["images_per_s"] > 0
    db = sqlite3.connect(out / "state.db")
    assert db.execute("SELECT name, version, job FROM models").fetchall() == [
        ("digits", 1, best["job"])]
    trained = [j for j in summary["jobs"] if j["minibatches"] > 0]
    assert trained and all(j["throughput"]["minibatches_per_s"] > 0 for j in trained)
    assert all(j["throughput"]["planned_minibatches_per_s"] > 0 for j in trained)


def test_every_job_names_the_preprocessed_dataset(study):
    """Preprocessing: ``dataset.json`` is the split of the study's data seed, and every job
    (trials and training jobs, MLP and CNN) names its digest, which the executor checked."""
    from oasis_opt.training.dataset import dataset_digest, prepare

    settings, out, summary, _ = study
    doc = json.loads((out / "dataset.json").read_text())
    assert doc == summary["dataset"] == prepare("digits-mlp", settings.seed)
    assert {j["dataset"] for j in summary["jobs"]} == {dataset_digest("digits-mlp", settings.seed)}
    assert summary["dataset"]["examples"] == summary["split"]


def test_heldout_images_are_disjoint_from_training_and_search(study):
    from oasis_opt.training.export import load_model
    from oasis_opt.training.tasks import get_task
    from oasis_opt.service.store import Store

    settings, out, summary, _ = study
    task = get_task("digits-mlp")
    train, val, test = task.split_indices(settings.seed)
    held = np.array(load_model(out / "model.npz").meta["test_indices"])
    np.testing.assert_array_equal(held, test)
    assert not set(held) & (set(train) | set(val))
    assert len(set(train) | set(val) | set(held)) == len(task.raw()[1])
    store = Store(out / "state.db")
    try:  # every job trained on the train split of that data seed
        assert {doc["task"].get("data_seed") for _, _, _, doc, _ in store.jobs()} == {
            settings.seed}
    finally:
        store.close()


def test_predict_command_prints_the_same_accuracy(study, capsys):
    from oasis_opt.cli import main

    _, out, summary, _ = study
    code = main(["predict", str(out / "model.npz"), str(out / "heldout-images.npy"),
                 "--labels", str(out / "heldout-labels.npy"), "--out", str(out / "pred.json")])
    assert code == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"accuracy {summary['best']['accuracy']:.4f} ")
    predictions = json.loads((out / "pred.json").read_text())["predictions"]
    labels = np.load(out / "heldout-labels.npy")
    assert np.mean(np.array(predictions) == labels) == pytest.approx(summary["best"]["accuracy"])


@pytest.mark.parametrize("argv, field", [
    (["--controller", "asha"], "--controller"),
    (["--controller", "tune-hyperband"], "--controller"),  # pauses trials too
    (["--controller", "nope"], "--controller"),
    (["--option", "delta=2"], "--option delta"),
    (["--jobs", "9"], "--jobs"),
    (["--epochs", "1"], "--epochs"),
    (["--policy", "offline"], "--policy"),
])
def test_case_study_refuses_bad_options(argv, field, capsys, tmp_path):
    from oasis_opt.cli import main

    assert main(["case-study", "--out", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"oasis-opt: error: {field}: "), err
    assert not (tmp_path / "state.db").exists()


def test_predict_refuses_bad_input(tmp_path, capsys):
    from oasis_opt.training.export import save_model
    from oasis_opt.training.tasks import get_task, ravel
    from oasis_opt.cli import main

    config = {"learning_rate": 0.01, "weight_decay": 1e-4, "width": 16, "depth": 1,
              "batch_size": 32, "optimizer": "adam"}
    flat = np.asarray(ravel(get_task("digits-mlp").model(config).init(0))[0])
    save_model(tmp_path / "m.npz", "digits-mlp", config, flat, mean=0.0, scale=16.0)
    np.save(tmp_path / "bad.npy", np.zeros((3, 5)))
    assert main(["predict", str(tmp_path / "m.npz"), str(tmp_path / "bad.npy")]) == 2
    assert "IMAGES: expected n >= 1 rows of 64 numbers" in capsys.readouterr().err
    np.save(tmp_path / "ok.npy", np.zeros((3, 8, 8)))
    np.save(tmp_path / "labels.npy", np.zeros(2))
    assert main(["predict", str(tmp_path / "m.npz"), str(tmp_path / "ok.npy"), "--labels",
                 str(tmp_path / "labels.npy")]) == 2
    assert "--labels: expected 3 labels" in capsys.readouterr().err
    assert main(["predict", str(tmp_path / "bad.npy"), str(tmp_path / "ok.npy")]) == 2
    assert "not an oasis-opt model file" in capsys.readouterr().err
    save_model(tmp_path / "short.npz", "digits-mlp", config, flat[:-1], mean=0.0, scale=16.0)
    assert main(["predict", str(tmp_path / "short.npz"), str(tmp_path / "ok.npy")]) == 2
    assert "flat: expected" in capsys.readouterr().err
    assert main(["predict", str(tmp_path / "m.npz"), str(tmp_path / "ok.npy")]) == 0
    assert capsys.readouterr().out.split() == [
        str(c) for c in np.asarray(get_task("digits-mlp").model(config).classes(
            ravel(get_task("digits-mlp").model(config).init(0))[1](flat),
            np.zeros((3, 64), np.float32)))]


def test_ctrl_c_stops_the_service_and_its_ray(tmp_path):
    """SIGINT to ``oasis-opt case-study`` once its service runs (Ray started): it exits with 130
    and leaves no process behind: the service's process group (the service and the Ray it
    started) is empty. Every wait is a bounded number of polls."""
    import os
    import signal
    import subprocess
    import sys
    import time

    psutil = pytest.importorskip("psutil")
    from oasis_opt.service.client import ServiceError, request

    err = open(tmp_path / "stderr.txt", "w")
    # Python's own handler (KeyboardInterrupt): a process started in the background may have
    # inherited SIGINT ignored
    proc = subprocess.Popen(
        [sys.executable, "-c", "import signal, sys; signal.signal(signal.SIGINT, "
         "signal.default_int_handler); from oasis_opt.cli import main; sys.exit(main())",
         "case-study", "--out",
         str(tmp_path / "out"), "--trials", "2", "--jobs", "0", "--no-progress"],
        stdout=subprocess.DEVNULL, stderr=err)
    try:
        service = None
        for _ in range(3000):  # Ray's start-up, bounded
            assert proc.poll() is None, (tmp_path / "stderr.txt").read_text()
            text = (tmp_path / "stderr.txt").read_text()
            children = psutil.Process(proc.pid).children()
            if "service on http://" in text and children:
                url = text.split("service on ")[1].split()[0]
                service = children[0]
                try:
                    if request("GET", url, "/health")["status"] == "running":
                        break
                except ServiceError:
                    pass
            time.sleep(0.1)
        else:
            raise AssertionError("the service did not start: " + text)
        group = os.getpgid(service.pid)
        assert group == service.pid != os.getpgid(proc.pid)  # the service has its own group
        assert any(p.name().startswith(("raylet", "gcs_server")) for p in
                   service.children(recursive=True))  # its Ray runs
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=600) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if service is not None and _group(service) == service.pid:  # the test failed: clean up
            os.killpg(service.pid, signal.SIGKILL)
        err.close()
    assert "interrupted; stopping the service" in (tmp_path / "stderr.txt").read_text()
    left = [p for p in psutil.process_iter(["pid"]) if _group(p) == group]
    assert not left, [p.cmdline() for p in left]


def _group(p) -> int | None:
    import os

    try:
        return os.getpgid(p.pid)
    except (ProcessLookupError, PermissionError):
        return None
