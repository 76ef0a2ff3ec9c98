"""The preprocessing step (``training.dataset``): a task's split and scaling described with a
digest that training jobs name, and checked where a job is planned (``runtime.plan.job_plan``:
the executor and the service's submission)."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from oasis_opt.cli import main
from oasis_opt.model import Instance, Job, Server, Utility
from oasis_opt.runtime.plan import ExecutionRefused, job_plan
from oasis_opt.training.dataset import dataset_digest, prepare
from oasis_opt.training.tasks import get_task

CONFIG = {"learning_rate": 0.01, "weight_decay": 1e-4, "width": 16, "depth": 1,
          "batch_size": 32, "optimizer": "adam"}


def test_the_description_is_the_tasks_own_split_and_scaling():
    doc = prepare("digits-mlp", 3)
    task = get_task("digits-mlp")
    x, y = task.raw()
    train, val, test = task.split_indices(3)
    assert doc["examples"] == {"train": len(train), "validation": len(val), "test": len(test)}
    assert sum(doc["examples"].values()) == len(y) == 1797
    for part, idx in zip(("train", "validation", "test"), (train, val, test)):
        assert doc["class_counts"][part] == np.bincount(y[idx], minlength=10).tolist()
    assert doc["scaling"] == {"mean": 0.0, "scale": 16.0, "fitted_on": "train"}
    assert doc["features"] == 64 and doc["classes"] == 10 and doc["data_seed"] == 3


def test_the_digest_names_the_split_not_the_task():
    """Both digits tasks share a dataset (one digest); another seed is another split; a tabular
    task's scaling (fitted on its train split) is in its digest."""
    assert dataset_digest("digits-mlp", 0) == dataset_digest("digits-cnn", 0)
    assert dataset_digest("digits-mlp", 0) != dataset_digest("digits-mlp", 1)
    assert dataset_digest("digits-mlp", 0).startswith("sha256:")
    assert prepare("digits-mlp", 0)["digest"] == dataset_digest("digits-mlp", 0)
    doc = prepare("wine-mlp", 0)
    assert isinstance(doc["scaling"]["mean"], list) and len(doc["scaling"]["mean"]) == \
        doc["features"]


def _instance(task: dict) -> Instance:
    cap = {"cpu": 2.0, "mem": 8.0, "bw": 10.0}
    dem = {"cpu": 1.0, "mem": 1.0, "bw": 1.0}
    job = Job("a", 1, 2, 4, 0.5, dem, dem, Utility.sigmoid(10.0, 1.0, 3.0), task=task)
    return Instance(5, ("cpu", "mem", "bw"), (Server("w0", cap),), (Server("p0", cap),), (job,))


def test_a_job_naming_another_dataset_is_refused_where_it_is_planned():
    """The digest of data seed 1 named by a job of data seed 0: refused on ``task.dataset``;
    the right one (or none) plans."""
    base = {"name": "digits-mlp", "config": CONFIG, "seed": 0, "data_seed": 0}
    job_plan(_instance(base), 0)
    job_plan(_instance({**base, "dataset": dataset_digest("digits-mlp", 0)}), 0)
    with pytest.raises(ExecutionRefused) as err:
        job_plan(_instance({**base, "dataset": dataset_digest("digits-mlp", 1)}), 0)
    assert err.value.field == "jobs[0].task.dataset" and "data seed 0" in str(err.value)


def test_the_service_refuses_a_job_on_another_dataset():
    from oasis_opt.model.io import instance_to_dict
    from oasis_opt.policies import get_policy
    from oasis_opt.service.scheduler import BadRequest, Scheduler
    from oasis_opt.service.store import Store

    inst = _instance({"name": "digits-mlp", "config": CONFIG, "data_seed": 0,
                      "dataset": dataset_digest("digits-mlp", 2)})
    sched = Scheduler(inst, lambda: get_policy("greedy"), store=Store(), policy="greedy",
                      executes=True)
    with pytest.raises(BadRequest) as err:
        sched.submit(instance_to_dict(inst)["jobs"][0])
    assert err.value.field == "task.dataset"
    good = dataclasses.replace(inst.jobs[0], task={**inst.jobs[0].task,
                                                   "dataset": dataset_digest("digits-mlp", 0)})
    assert sched.submit(instance_to_dict(inst.with_jobs([good]))["jobs"][0])["id"] == "a"


def test_the_command_writes_the_description(tmp_path, capsys):
    out = tmp_path / "d.json"
    assert main(["automl", "dataset", "digits-cnn", "--seed", "2", "--out", str(out)]) == 0
    assert json.loads(out.read_text()) == prepare("digits-cnn", 2)
    printed = capsys.readouterr().out
    assert printed.startswith("digits, data seed 2: 1077/360/360 examples")
    assert main(["automl", "dataset", "nope", "--out", str(out)]) == 2
    assert "TASK: unknown task 'nope'" in capsys.readouterr().err
    assert main(["automl", "dataset", "digits-mlp", "--seed", "-1", "--out", str(out)]) == 2
    assert "--seed: expected an integer >= 0" in capsys.readouterr().err
