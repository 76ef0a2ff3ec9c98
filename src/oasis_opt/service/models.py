"""Deployment: a trained job's model served by the service, versioned, with its accuracies.

``Models(scheduler)`` deploys the weights a job ended with (its last checkpoint in the state) as
model ``name``: each deployment of a name is its next version (1, 2, ...), and the last one is
what ``predict`` uses unless asked for another. A model is the package's model file
(``training.export``: weights, task, configuration and the feature scaling of the job's train
split) kept in the state (``store``'s ``models`` table), so a restarted service serves what it
served. With each version come its validation accuracy (the job's, as the executor measured it)
and its held-out accuracy: measured at deployment on the test split of the job's data seed
(``Task.split_indices``: never trained on, never used to choose the model).

``predict(name, images, version=None)`` takes *raw* rows (digits: 64 pixels in 0..16, flat or
8x8) and returns the predicted classes; the loaded networks are kept, so a request costs one
forward pass. Refusals are ``scheduler.BadRequest``: 404 an unknown model or version, 409 a job
that did not complete or has no weights (a policy-only service trains nothing), 400 bad images.
"""
from __future__ import annotations

import io
import threading
import time
from typing import TYPE_CHECKING, Any

from .scheduler import BadRequest

if TYPE_CHECKING:
    from ..training.export import SavedModel
    from .scheduler import Scheduler

MAX_IMAGES = 10_000  # rows of one predict request


class Models:
    """The models a service deploys (module docstring)."""

    def __init__(self, scheduler: Scheduler):
        self.scheduler, self.store = scheduler, scheduler.store
        self._lock = threading.Lock()
        self._loaded: dict[tuple[str, int], SavedModel] = {}

    def deploy(self, name: Any, job_id: Any) -> dict:
        """Deploy the weights job ``job_id`` completed with as the next version of ``name``."""
        from ..training.export import load_model, save_model
        from ..training.tasks import get_task

        if not isinstance(name, str) or not name or not name.replace("-", "").replace(
                "_", "").isalnum():
            raise BadRequest("name", f"expected a name of letters, digits, '-' and '_', got "
                             f"{name!r}")
        if not isinstance(job_id, str):
            raise BadRequest("job", f"expected a job id, got {job_id!r}")
        sched = self.scheduler
        seq = sched.job_seq(job_id)
        view = sched.job_view(seq)
        if view["state"] != "completed":
            raise BadRequest("job", f"job {job_id!r} is {view['state']}: only a completed job's "
                             "weights are deployed", 409)
        checkpoint = sched.checkpoints().get(seq)
        task_doc = view["task"]
        if checkpoint is None or task_doc is None:
            raise BadRequest("job", f"job {job_id!r} has no trained weights (a service run "
                             "with --no-execute trains nothing)", 409)
        task = get_task(task_doc["name"])
        data_seed = int(task_doc.get("data_seed", 0))
        x, y = task.raw()
        train, _, test = task.split_indices(data_seed)
        mean, scale = task.scaling(x[train])
        val_accuracy = (view["real"] or {}).get("val_accuracy")
        buf = io.BytesIO()
        save_model(buf, task.name, task_doc["config"], checkpoint["flat"], mean=mean,
                   scale=scale, meta={"job": job_id, "data_seed": data_seed,
                                      "val_accuracy": val_accuracy})
        blob = buf.getvalue()
        model = load_model(io.BytesIO(blob))
        heldout = model.accuracy(x[test], y[test])
        with self._lock:
            version = self.store.record_model(name, job_id, blob, val_accuracy, heldout,
                                              len(test), time.time())
            self._loaded[(name, version)] = model
        return self.view(name, version)

    def view(self, name: str, version: int) -> dict:
        for row in self.store.models(name):
            if row["version"] == version:
                return row
        raise BadRequest("version", f"model {name!r} has no version {version}", 404)

    def all(self) -> list[dict]:
        """Every model's versions, oldest first, each with its job and accuracies."""
        return self.store.models()

    def versions(self, name: str) -> list[dict]:
        rows = self.store.models(name)
        if not rows:
            raise BadRequest("name", f"no model {name!r} (POST /models deploys one)", 404)
        return rows

    def _model(self, name: str, version: Any) -> tuple[int, SavedModel]:
        from ..training.export import load_model

        rows = self.versions(name)
        if version is None:
            version = rows[-1]["version"]
        elif isinstance(version, bool) or not isinstance(version, int):
            raise BadRequest("version", f"expected a version number, got {version!r}")
        with self._lock:
            model = self._loaded.get((name, version))
            if model is None:
                blob = self.store.model_blob(name, version)
                if blob is None:
                    raise BadRequest("version", f"model {name!r} has no version {version} "
                                     f"(versions 1..{rows[-1]['version']})", 404)
                model = self._loaded[(name, version)] = load_model(io.BytesIO(blob))
        return version, model

    def predict(self, name: str, images: Any, version: Any = None) -> dict:
        """Classes of the raw rows ``images`` by model ``name`` (its last version, or
        ``version``)."""
        import numpy as np

        version, model = self._model(name, version)
        if not isinstance(images, list) or not images:
            raise BadRequest("images", "expected a non-empty list of images (rows of raw "
                             "features)")
        if len(images) > MAX_IMAGES:
            raise BadRequest("images", f"{len(images)} images; a request takes at most "
                             f"{MAX_IMAGES}", 413)
        try:
            x = np.asarray(images, dtype=float)
        except (TypeError, ValueError):
            raise BadRequest("images", "expected numbers, one list per image") from None
        try:
            labels = model.predict(x)
        except ValueError as e:
            raise BadRequest("images", str(e).removeprefix("images: ")) from None
        return {"name": name, "version": version, "labels": labels.tolist()}
