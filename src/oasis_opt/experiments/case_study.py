"""The computer-vision case study end to end (``oasis-opt case-study``, ``make case-study``).

A hyperparameter search and a few training jobs on scikit-learn's digits images, run by the
scheduling service as a user would run them, then the best model exported and measured on
images nothing saw before:

0. **Preprocessing.** ``dataset.json``: the digits images split train / validation / test by
   data seed ``seed`` and their scaling fitted on the train split (``training.dataset``); every
   job names its digest (``task["dataset"]``), which the executor checks before it trains.
1. **The cluster and its prices.** ``cluster.json``: two worker servers of two worker containers
   each and one PS server of three PS containers (one PS serves two workers, constraint (6));
   ``pricing.json``: OASiS's U and L by the plug-in estimate of eqs. (23)-(26)
   (``online.plugin``) on a *past* study of the same shape (the service does not know its jobs
   in advance).
2. **The service**: ``oasis-opt serve`` started as a subprocess (real uvicorn on 127.0.0.1, its
   state in ``state.db``, a local Ray started by its executor through ``runtime.ray_pool``),
   slots of ``slot_s`` wall-clock seconds; its log in ``serve.log``.
3. **The jobs.** Trial t of the search is job ``trial-<t>``: configuration
   ``training.study.trial_config(task, seed, t)``, weights ``trial_seed(seed, t)``; every job,
   trial or not, trains on the train split of data seed ``seed``, and is one of the instance
   format with E = ``epochs`` epochs, N = 2 data chunks and x = 1 worker-slot per chunk, so
   one epoch is N x = 2 worker-slots and the policy may give a job one or two workers per slot
   (half an epoch or one per slot).
   The training jobs (``jobs`` of them, fixed configurations of ``TRAINING_JOBS``) arrive one
   every ``TRAINING_GAP`` slots; they are other users' jobs competing for the cluster.
4. **The AutoML controller** (``automl.controllers``, default ``automl-thesis``) runs the search
   as a client of the service: it decides which trials start, at most ``concurrent`` at a time
   (the study's resource cap; a trial is submitted when it starts), is told each trial's
   validation accuracy at every epoch its checkpoints pass (epoch e counts as observed at the
   first checkpoint, i.e. the end of a slot, at or past e worker-slots of progress; the accuracy
   is that checkpoint's), and a trial it stops is cancelled (``DELETE /jobs/{id}``). The
   service's policy admits or rejects each job and decides its workers and PSs slot by slot;
   the controller's units per trial are therefore one (``automl-thesis`` runs with
   ``max_units=1``), and controllers that pause trials (``asha``) cannot run here. A stop is
   seen after the slot that shows it, and a cancellation takes effect at the next boundary not
   yet decided: a stopped trial may train one slot more than the controller needed. A stop
   that comes too late (the study's service runs the open loop, ``serve --open-loop``, so that
   which stops come in time does not depend on the machine's load: it refuses a stop with 409
   once the slot the trial completes in is decided; a closed-loop service accepts it while
   that slot runs and the trial completes in it): the trial completes, and counts as
   completed, not stopped
   (``stop_too_late_at_epoch`` in the summary).
5. **The end.** When every job has ended (completed, rejected or cancelled), the best of them
   (validation accuracy) is deployed by the service and benchmarked through its API
   (``deploy_and_benchmark``: held-out accuracy, latency, throughput); then the service is
   stopped (SIGINT: it shuts its Ray down) and its state is read: the schedule it ran
   (``scheduler.stored_schedule``) is checked by ``model.validate``; the completed job with the
   best validation accuracy is exported (``training.export``, ``model.npz``) and its accuracy
   measured on the test split of the same data seed (never trained on, never used to choose);
   the test images and labels are written as ``heldout-images.npy`` / ``heldout-labels.npy``
   for ``oasis-opt predict``; everything goes to ``summary.json``.

Whatever happens (an error, Ctrl-C) the service is stopped before ``run_case_study`` returns or
raises. Nothing here is paced by this process: the service owns time, this process polls it.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..service.client import ServiceError, request

if TYPE_CHECKING:
    from ..automl.replay import Controller
    from ..model import Instance, Job

FORMAT = "oasis-opt/case-study@1"
TASK = "digits-mlp"
CHUNKS, CHUNK_TIME = 2, 1.0  # N and x: one epoch = N x = 2 worker-slots
WORKER = {"cpu": 1.0, "mem": 1.0, "bw": 1.0}
PS = {"cpu": 1.0, "mem": 1.0, "bw": 2.0}  # one PS serves two workers
TRAINING_GAP = 3  # slots between two training jobs' arrivals
# the training jobs of other users: (id, task, config), taken in this order
TRAINING_JOBS = (
    ("cnn-a", "digits-cnn", {"learning_rate": 0.003, "weight_decay": 1e-4, "width": 16,
                             "depth": 2, "batch_size": 32, "optimizer": "adam"}),
    ("mlp-b", "digits-mlp", {"learning_rate": 0.003, "weight_decay": 1e-5, "width": 128,
                             "depth": 2, "batch_size": 32, "optimizer": "adamw"}),
    ("cnn-c", "digits-cnn", {"learning_rate": 0.05, "weight_decay": 1e-4, "width": 8,
                             "depth": 1, "batch_size": 64, "optimizer": "momentum"}),
    ("mlp-d", "digits-mlp", {"learning_rate": 0.1, "weight_decay": 1e-4, "width": 64,
                             "depth": 1, "batch_size": 16, "optimizer": "sgd"}),
)
ENDED = ("completed", "rejected", "cancelled")
POLL_S = 0.2
SERVED_MODEL = "digits"  # the name the best model is deployed under
LATENCY_REQUESTS, BATCH_REQUESTS, BATCH = 50, 10, 256  # the benchmark of the deployed model


@dataclass(frozen=True)
class CaseStudy:
    """The case study's settings (``oasis-opt case-study`` options of the same names)."""

    trials: int = 8
    concurrent: int = 2
    jobs: int = 2
    epochs: int = 6
    slot_s: float = 2.0
    horizon: int = 80
    policy: str = "oasis"
    controller: str = "automl-thesis"
    controller_options: dict = field(default_factory=dict)
    seed: int = 0

    def __post_init__(self) -> None:
        for name, low in (("trials", 1), ("concurrent", 1), ("jobs", 0), ("epochs", 2),
                          ("horizon", 2), ("seed", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"{name}: expected an integer >= {low}, got {v!r}")
        if self.jobs > len(TRAINING_JOBS):
            raise ValueError(f"jobs: at most {len(TRAINING_JOBS)} training jobs, got {self.jobs}")
        if not (isinstance(self.slot_s, (int, float)) and math.isfinite(self.slot_s)
                and self.slot_s > 0):
            raise ValueError(f"slot_s: expected a number of seconds > 0, got {self.slot_s!r}")
        if self.controller in ("asha", "tune-hyperband"):
            raise ValueError(f"controller: {self.controller} pauses trials to resume them "
                             "later, which a service job cannot do (a cancelled job stays "
                             "cancelled)")

    def make_controller(self) -> "Controller":
        """The AutoML controller, with one unit per trial (module docstring)."""
        from ..automl.controllers import get_controller

        options = dict(self.controller_options)
        if self.controller == "automl-thesis":
            options.setdefault("max_units", 1)
        try:
            return get_controller(self.controller, **options)
        except TypeError as e:
            raise ValueError(f"controller_options: {e}") from None


# ---- the cluster and the jobs ---------------------------------------------------------------------
def cluster(settings: CaseStudy) -> Instance:
    from ..model import Instance, Server

    worker = {"cpu": 2.0, "mem": 8.0, "bw": 4.0}
    ps = {"cpu": 3.0, "mem": 8.0, "bw": 6.0}
    return Instance(settings.horizon, ("cpu", "mem", "bw"),
                    (Server("w0", worker), Server("w1", worker)), (Server("p0", ps),), (),
                    meta={"slot_s": float(settings.slot_s)})


def make_job(job_id: str, task: str, config: dict, seed: int, settings: CaseStudy, *,
             arrival: int = 1, kind: str, priority: float) -> Job:
    """A job of the case study (module docstring); its utility decays past 2 E slots."""
    from ..model import Job, Utility
    from ..training.dataset import dataset_digest

    return Job(job_id, arrival, settings.epochs, CHUNKS, CHUNK_TIME, WORKER, PS,
               Utility.sigmoid(priority, 0.5, 2 * settings.epochs),
               provenance={"case-study": kind},
               task={"name": task, "config": dict(config), "seed": int(seed),
                     "data_seed": settings.seed,
                     "dataset": dataset_digest(task, settings.seed)})


def trial_job(trial: int, settings: CaseStudy) -> Job:
    from ..training.study import trial_config, trial_seed
    from ..training.tasks import get_task

    return make_job(f"trial-{trial:02d}", TASK,
                    trial_config(get_task(TASK), settings.seed, trial),
                    trial_seed(settings.seed, trial), settings, kind="search", priority=1.0)


def training_job(k: int, settings: CaseStudy) -> Job:
    job_id, task, config = TRAINING_JOBS[k]
    return make_job(job_id, task, config, 1000 + k, settings, kind="training",
                    priority=2.0)


def past_study(settings: CaseStudy) -> Instance:
    """A past study of the same shape (other trials' seed, arrivals spread as the cap spreads
    them): the history OASiS's prices are estimated on."""
    jobs = []
    waves = math.ceil(settings.trials / settings.concurrent)
    span = max(1, settings.horizon // 2 // max(waves, 1))
    for t in range(settings.trials):
        job = trial_job(t, CaseStudy(**{**asdict(settings), "seed": settings.seed + 1}))
        jobs.append(_arriving(job, 1 + (t // settings.concurrent) * span))
    for k in range(settings.jobs):
        jobs.append(_arriving(training_job(k, settings), 1 + k * TRAINING_GAP))
    return cluster(settings).with_jobs(tuple(jobs))


def task_of(job: Job) -> dict:
    """The training task of a job of the case study (every one names its task)."""
    if job.task is None:
        raise ValueError(f"task: job {job.id!r} names no training task")
    return dict(job.task)


def _arriving(job: Job, arrival: int) -> Job:
    from dataclasses import replace

    return replace(job, arrival=arrival)


def job_doc(job: Job) -> dict:
    """The job as the service takes it (no arrival: the next slot boundary)."""
    from ..model.io import instance_to_dict

    doc = instance_to_dict(cluster(CaseStudy()).with_jobs((job,)))["jobs"][0]
    doc.pop("arrival")
    return doc


# ---- the service --------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    """``oasis-opt serve`` in a subprocess; ``stop()`` (SIGINT, then SIGKILL after ``grace_s``)
    is safe to call more than once. SIGINT reaches uvicorn, whose shutdown stops the slot runner
    and with it Ray (``serve`` treats SIGTERM the same way)."""

    def __init__(self, out: Path, settings: CaseStudy, port: int):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = out / "serve.log"
        self.log = open(self.log_path, "w")
        argv = [sys.executable, "-m", "oasis_opt", "serve", "--cluster", str(out / "cluster.json"),
                "--policy", settings.policy, "--slot-s", f"{settings.slot_s:g}",
                "--state", str(out / "state.db"), "--port", str(port),
                # the open loop: every planned mini-batch runs, however loaded the machine, so
                # which stops come in time (and the mini-batches they save) does not depend on
                # the machine's speed; the closed loop's re-plans would move them
                "--open-loop"]
        if settings.policy in ("oasis", "oasis-topo"):
            argv += ["--pricing", str(out / "pricing.json")]
        env = {**os.environ, "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu")}
        env.pop("OASIS_OPT_TOKEN", None)  # the case study submits without a token
        # its own session: a Ctrl-C at the terminal reaches this process only, which stops the
        # service in order (below); the group holds the service and the Ray it starts
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)

    def health(self) -> dict | None:
        """``/health``, or None while the service does not answer; ``RuntimeError`` if it
        exited."""
        if self.proc.poll() is not None:
            raise RuntimeError(f"the service exited with status {self.proc.returncode}: "
                               + self.tail())
        try:
            return request("GET", self.url, "/health", timeout=10)
        except ServiceError:
            return None

    def tail(self, chars: int = 1500) -> str:
        self.log.flush()
        return " ".join(self.log_path.read_text()[-chars:].split())

    def stop(self, grace_s: float = 180.0) -> int | None:
        """Stop the service (its slot running ends first: minutes when containers are still
        starting), then kill whatever of its process group is left (a Ray process that outlived
        its driver; everything, after ``grace_s``)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass  # the group is empty: everything stopped by itself
        self.proc.wait()
        if not self.log.closed:
            self.log.close()
        return self.proc.returncode


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


# Headless Chromium on a machine with no network beyond loopback: without the background
# networking flags it tries Google's hosts at every start, and those connections are refused.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync")


class Screenshot:
    """Headless Chromium taking a picture of the dashboard, in the background."""

    def __init__(self, url: str, path: Path):
        self.path = path
        self.profile = tempfile.mkdtemp(prefix="oasis-opt-chromium-")
        self.proc = subprocess.Popen(
            [chromium() or "chromium", *CHROMIUM_FLAGS, "--hide-scrollbars", "--window-size=1400,900", "--virtual-time-budget=8000",
             f"--user-data-dir={self.profile}", f"--screenshot={path}", url + "/"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def wait(self, timeout: float = 120.0) -> bool:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)
        return self.path.exists()


# ---- the study, driven from here ------------------------------------------------------------------
@dataclass
class _Trial:
    trial: int
    job_id: str
    status: str = "running"  # running, completed, stopped, rejected, completing
    observed: int = 0  # epochs told to the controller
    stopped_at: int | None = None
    stop_too_late: int | None = None  # the epoch of a stop the service refused (409)
    values: list = field(default_factory=list)


class Driver:
    """The AutoML controller as a client of the service (module docstring, step 4)."""

    def __init__(self, settings: CaseStudy, url: str, log: Callable[[str], None]):
        from ..automl.replay import TrialInfo, study_order

        self.settings, self.url, self.log = settings, url, log
        self.controller = settings.make_controller()
        self.jobs = {t: trial_job(t, settings) for t in range(settings.trials)}
        order = study_order(settings.trials, settings.seed)
        self.controller.reset([TrialInfo(t, task_of(self.jobs[t])["config"], settings.epochs)
                               for t in order], settings.concurrent, settings.seed)
        self.trials: dict[int, _Trial] = {}
        self.training_submitted = 0
        self.refused: list[str] = []  # jobs the service refused (its horizon is over)
        self.exhausted = False  # the controller has nothing more to start

    def submit(self, job: Job) -> bool:
        try:
            request("POST", self.url, "/jobs", json=job_doc(job))
            return True
        except ServiceError as e:
            if e.field == "arrival":  # the horizon is over: nothing can arrive any more
                self.refused.append(job.id)
                self.log(f"{job.id}: not submitted ({e.message})")
                return False
            raise

    def running(self) -> dict[int, int]:
        return {t: 1 for t, tr in self.trials.items() if tr.status == "running"}

    def step(self, slot: int, views: dict[str, dict]) -> None:
        """After slot ``slot`` ran: observe, stop, start (``views``: ``GET /jobs`` by id)."""
        from ..automl.cluster import EPOCH_EPS
        from ..automl.replay import CONTINUE, STOP, ControllerError

        s = self.settings
        while (self.training_submitted < s.jobs
               and slot >= self.training_submitted * TRAINING_GAP):
            job = training_job(self.training_submitted, s)
            self.training_submitted += 1
            if self.submit(job):
                self.log(f"{job.id}: submitted ({task_of(job)['name']})")
        now = slot * s.slot_s
        for t, tr in sorted(self.trials.items()):
            if tr.status == "completing" and views.get(tr.job_id, {}).get("state") in ENDED:
                tr.status = views[tr.job_id]["state"]
                self.log(f"{tr.job_id}: {tr.status} after the stop came too late")
            if tr.status == "stopped" and views.get(tr.job_id, {}).get("state") == "completed":
                # a closed-loop service accepts a cancel while the job's last slot runs; the
                # job completed in it, so the stop came too late (as a 409 says in the open loop)
                tr.status, tr.stop_too_late, tr.stopped_at = "completed", tr.stopped_at, None
                self.log(f"{tr.job_id}: completed in the slot that ran when it was stopped")
            if tr.status != "running" or tr.job_id not in views:
                continue
            v = views[tr.job_id]
            if v["state"] == "rejected":
                tr.status = "rejected"
                self.log(f"{tr.job_id}: rejected by the policy")
                continue
            real = v.get("real")
            if real is None or real.get("val_accuracy") is None:
                continue
            E = s.epochs
            done = v["state"] == "completed"
            reached = E if done else min(int(v["worker_slots_done"] / (CHUNKS * CHUNK_TIME)
                                             + EPOCH_EPS), E - 1)
            verdict = CONTINUE
            for e in range(tr.observed + 1, reached + 1):
                value = float(real["val_accuracy"])
                verdict = self.controller.observe(t, e, value, CHUNKS * CHUNK_TIME * s.slot_s,
                                                  now)
                tr.observed = e
                tr.values.append(value)
                if verdict not in (CONTINUE, STOP):
                    raise ControllerError(f"{self.controller.name}: answered {verdict!r}; a "
                                          "trial of the service can only go on or stop")
                if e < E and verdict == STOP:
                    break
            if done:
                tr.status = "completed"
                self.log(f"{tr.job_id}: completed, validation accuracy {tr.values[-1]:.3f}")
            elif verdict == STOP:
                tr.status, tr.stopped_at = "stopped", tr.observed
                self.log(f"{tr.job_id}: stopped by {self.controller.name} at epoch "
                         f"{tr.observed} of {E} (validation accuracy {tr.values[-1]:.3f})")
                try:
                    request("DELETE", self.url, f"/jobs/{tr.job_id}")
                except ServiceError as e:
                    if e.field != "id":
                        raise
                    # 409: the slot it completes in was decided before the stop came; it
                    # completes (the controller has let it go all the same)
                    tr.status, tr.stopped_at, tr.stop_too_late = "completing", None, tr.observed
                    self.log(f"{tr.job_id}: not cancelled ({e.message})")
        self.start(now)

    def start(self, now: float) -> None:
        if self.exhausted:
            return
        running = self.running()
        starts, units = self.controller.plan(running, self.settings.concurrent, now)
        for t in starts:
            tr = self.trials[t] = _Trial(t, self.jobs[t].id)
            if not self.submit(self.jobs[t]):
                tr.status = "not submitted"
                self.exhausted = True
                return
            self.log(f"{tr.job_id}: started by {self.controller.name} "
                     f"({_config_text(task_of(self.jobs[t])['config'])})")
        if not starts and not running:  # all its capacity is free and it starts nothing
            self.exhausted = True

    def finished(self, views: dict[str, dict]) -> bool:
        submitted = [tr.job_id for tr in self.trials.values() if tr.status != "not submitted"]
        submitted += [TRAINING_JOBS[k][0] for k in range(self.training_submitted)]
        return (self.exhausted and self.training_submitted == self.settings.jobs
                and all(views.get(j, {}).get("state") in ENDED or j in self.refused
                        for j in submitted))


def _config_text(config: dict) -> str:
    return (f"{config['optimizer']} lr {config['learning_rate']:g}, {config['depth']}x"
            f"{config['width']}, batch {config['batch_size']}")


# ---- the run --------------------------------------------------------------------------------------
def run_case_study(settings: CaseStudy, out: str | Path, *, port: int | None = None,
                   screenshot: str | Path | None = None, progress: bool = True,
                   log: Callable[[str], None] | None = None) -> dict:
    """Run the case study (module docstring) into directory ``out``; returns the summary
    (also written to ``out/summary.json``). ``screenshot``: PNG of the dashboard, taken by
    headless Chromium while the jobs run (once half of them have ended)."""
    from ..model.io import save_instance
    from ..online.pricing import save_pricing
    from ..online.plugin import plugin_pricing

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if screenshot is not None and chromium() is None:
        raise ValueError("screenshot: Chromium is not installed (`make chromium` installs it)")
    for name in ("state.db", "state.db-wal", "state.db-shm", "summary.json", "model.npz"):
        (out / name).unlink(missing_ok=True)  # a fresh state: the service would resume it
    from ..training.dataset import describe, prepare, save_dataset

    dataset = prepare(TASK, settings.seed)  # preprocessing: the split every job names
    save_dataset(dataset, out / "dataset.json")
    save_instance(cluster(settings), out / "cluster.json")
    if settings.policy in ("oasis", "oasis-topo"):
        save_pricing(plugin_pricing([past_study(settings)]), out / "pricing.json")
    settings.make_controller()  # a bad controller option fails before anything starts
    say = log or (lambda line: print(line, file=sys.stderr, flush=True))
    bar = None
    service = Service(out, settings, port or free_port())
    shot: Screenshot | None = None
    started = time.perf_counter()
    say(f"case study: preprocessing: {describe(dataset)}")
    try:
        say(f"case study: service on {service.url} (dashboard {service.url}/), starting Ray ...")
        for _ in range(6000):  # Ray's start-up on a loaded machine: bounded, never assumed
            health = service.health()
            if health is not None and health["status"] != "starting":
                break
            time.sleep(POLL_S)
        else:
            raise RuntimeError("the service did not start: " + service.tail())
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=settings.trials + settings.jobs, desc="case study", unit="job",
                       file=sys.stderr)
            say = bar.write if log is None else say
        driver = Driver(settings, service.url, say)
        driver.step(0, {})
        seen = 0
        views: dict[str, dict] = {}
        while True:
            health = service.health()
            if health is None:
                time.sleep(POLL_S)
                continue
            if health["status"] == "failed":
                raise RuntimeError(f"the service's slots failed: {health['error']}")
            if health["slot"] > seen:
                seen = health["slot"]
                views = {v["id"]: v for v in request("GET", service.url, "/jobs")}
                driver.step(seen, views)
                ended = sum(v["state"] in ENDED for v in views.values())
                if bar is not None:
                    bar.n = ended
                    best = max((v["real"]["val_accuracy"] for v in views.values()
                                if v["state"] == "completed" and v["real"]), default=None)
                    bar.set_postfix_str(
                        f"slot {seen}, running {sum(v['state'] == 'running' for v in views.values())}"
                        f", stopped {sum(tr.status == 'stopped' for tr in driver.trials.values())}"
                        + (f", best val {best:.3f}" if best is not None else ""))
                    bar.refresh()
                if (screenshot is not None and shot is None
                        and 2 * ended >= settings.trials + settings.jobs
                        and any(v["state"] == "running" for v in views.values())):
                    shot = Screenshot(service.url, Path(screenshot))
                if driver.finished(views) or health["status"] != "running":
                    break
            time.sleep(POLL_S)
        if shot is not None:
            shot.wait()
        views = {v["id"]: v for v in request("GET", service.url, "/jobs")}
        service_summary = request("GET", service.url, "/summary")
        best_id = best_job(views)
        serving = None
        if best_id is not None:
            say(f"case study: deploying {best_id} as model {SERVED_MODEL!r} and measuring it")
            serving = deploy_and_benchmark(service.url, views[best_id], settings)
    except KeyboardInterrupt:
        say("case study: interrupted; stopping the service and its Ray (the slot running "
            "ends first) ...")
        raise
    finally:
        if bar is not None:
            bar.close()
        if shot is not None:
            shot.wait()
        code = service.stop()
    if code != 0:
        raise RuntimeError(f"the service exited with status {code}: {service.tail()}")
    summary = _report(settings, out, driver, views, service_summary,
                      time.perf_counter() - started, best_id)
    summary["serving"] = serving
    summary["dataset"] = dataset
    summary["files"]["dataset.json"] = str(out / "dataset.json")
    if screenshot is not None:
        summary["files"]["screenshot"] = str(screenshot) if Path(screenshot).exists() else None
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def best_job(views: dict[str, dict]) -> str | None:
    """The completed job with the best validation accuracy (ties: the fewest slots run, then
    the first submitted), or None: the model deployed and exported."""
    done = [v for v in views.values()
            if v["state"] == "completed" and (v["real"] or {}).get("val_accuracy") is not None]
    best = max(done, key=lambda v: (v["real"]["val_accuracy"], -v["real"]["slots"], -v["seq"]),
               default=None)
    return None if best is None else best["id"]


def deploy_and_benchmark(url: str, view: dict, settings: CaseStudy) -> dict:
    """Deployment and benchmarking: the job of ``view`` deployed by the service as model
    ``SERVED_MODEL`` (``POST /models``), its held-out images (the test split of the data seed)
    classified through the API, then ``LATENCY_REQUESTS`` requests of one image (latency) and
    ``BATCH_REQUESTS`` of ``BATCH`` images (throughput), one after another on loopback."""
    from ..training.tasks import get_task

    deployed = request("POST", url, "/models", json={"name": SERVED_MODEL, "job": view["id"]})
    task = get_task(view["task"]["name"])
    x, y = task.raw()
    test = task.split_indices(settings.seed)[2]
    path = f"/models/{SERVED_MODEL}/predict"
    labels = np.asarray(request("POST", url, path, json={"images": x[test].tolist()},
                                timeout=120.0)["labels"])
    latency = []
    for n in range(LATENCY_REQUESTS):
        t0 = time.perf_counter()
        request("POST", url, path, json={"images": [x[test[n % len(test)]].tolist()]})
        latency.append(time.perf_counter() - t0)
    batch = x[test][:BATCH].tolist()
    t0 = time.perf_counter()
    for _ in range(BATCH_REQUESTS):
        request("POST", url, path, json={"images": batch}, timeout=120.0)
    batch_s = time.perf_counter() - t0
    ms = 1e3 * np.asarray(latency)
    return {"model": SERVED_MODEL, "version": deployed["version"], "job": view["id"],
            "val_accuracy": deployed["val_accuracy"],
            "heldout_accuracy": deployed["heldout_accuracy"],
            "heldout_examples": deployed["heldout_examples"],
            "api_accuracy": float(np.mean(labels == y[test])),
            "latency_ms": {"p50": float(np.median(ms)), "p99": float(np.percentile(ms, 99)),
                           "requests": LATENCY_REQUESTS},
            "throughput": {"images_per_s": BATCH * BATCH_REQUESTS / batch_s, "batch": BATCH,
                           "requests": BATCH_REQUESTS}}


def _report(settings: CaseStudy, out: Path, driver: Driver, views: dict[str, dict],
            service_summary: dict, seconds: float, best_id: str | None) -> dict:
    """Read the state, validate it, export the best model and test it on the held-out split."""
    from ..training.export import load_model, save_model
    from ..training.tasks import get_task
    from ..model.io import jsonable
    from ..model.validate import validate
    from ..runtime.plan import job_plan
    from ..service.scheduler import stored_schedule
    from ..service.store import Store

    store = Store(out / "state.db")
    try:
        inst, schedule = stored_schedule(store)
        checkpoints = store.checkpoints()
        records = store.progress()
        per_slot: dict[int, list] = {}
        for slot, _, finished_at in store.slots():
            if finished_at is None:
                continue
            for seq, _, role, count in store.slot_rows(slot):
                rows = per_slot.setdefault(seq, [])
                if not rows or rows[-1]["slot"] != slot:
                    rows.append({"slot": slot, "workers": 0, "ps": 0})
                rows[-1]["workers" if role == 0 else "ps"] += count
    finally:
        store.close()
    report = validate(inst, schedule)
    trial_of = {tr.job_id: tr for tr in driver.trials.values()}
    jobs = []
    for seq, job in enumerate(inst.jobs):
        v = views[job.id]
        real = v.get("real") or {}
        plan = job_plan(inst, seq)
        tr = trial_of.get(job.id)
        jobs.append({
            "id": job.id, "kind": (job.provenance or {}).get("case-study"), "task": task_of(job)["name"],
            "config": task_of(job)["config"], "dataset": task_of(job).get("dataset"),
            "state": v["state"], "admitted": v["admitted"],
            "arrival": job.arrival, "decided_slot": v["decided_slot"],
            "completion": v["completion"], "utility": v["utility"],
            "minibatches": real.get("minibatches", 0),
            "minibatches_to_complete": plan.total_minibatches,
            "val_accuracy": real.get("val_accuracy"),
            "stopped_at_epoch": tr.stopped_at if tr else None,
            "stop_too_late_at_epoch": tr.stop_too_late if tr else None,
            "observed": tr.values if tr else None,
            "slots": per_slot.get(seq, []),
            "throughput": _throughput(records.get(seq, []), settings.slot_s)})
    best = next((j for j in jobs if j["id"] == best_id), None)
    split_sizes = None
    heldout = None
    if best is not None:
        seq = next(n for n, job in enumerate(inst.jobs) if job.id == best["id"])
        task = get_task(best["task"])
        x, y = task.raw()
        train, val, test = task.split_indices(settings.seed)
        split_sizes = {"train": len(train), "validation": len(val), "test": len(test)}
        mean, scale = task.scaling(x[train])
        save_model(out / "model.npz", task.name, best["config"], checkpoints[seq]["flat"],
                   mean=mean, scale=scale,
                   meta={"job": best["id"], "data_seed": settings.seed,
                         "val_accuracy": best["val_accuracy"], "test_indices": test.tolist()})
        np.save(out / "heldout-images.npy", x[test])
        np.save(out / "heldout-labels.npy", y[test])
        model = load_model(out / "model.npz")
        heldout = {"job": best["id"], "task": task.name, "config": best["config"],
                   "val_accuracy": best["val_accuracy"], "examples": len(test),
                   "accuracy": model.accuracy(x[test], y[test])}
    stopped = [j for j in jobs if j["stopped_at_epoch"] is not None]
    return {
        "format": FORMAT, "settings": asdict(settings), "seconds": round(seconds, 1),
        "service": {"policy": settings.policy, "slot_s": settings.slot_s,
                    "slots_run": service_summary["slot"],
                    "last_slot_with_jobs": max((r["slot"] for rows in per_slot.values()
                                                for r in rows), default=0),
                    **{k: service_summary[k] for k in ("jobs", "admitted", "rejected",
                                                       "completed", "cancelled", "utility",
                                                       "utilisation")}},
        "validation": {"ok": report.ok, "violations": [str(x) for x in report.violations]},
        "controller": {"name": driver.controller.name, "concurrent": settings.concurrent,
                       "trials_started": len(driver.trials), "stopped": len(stopped),
                       "minibatches_saved": sum(j["minibatches_to_complete"] - j["minibatches"]
                                                for j in stopped),
                       "stats": jsonable(driver.controller.stats())},
        "split": split_sizes, "best": heldout, "jobs": jobs,
        "files": {name: str(out / name) for name in ("cluster.json", "state.db", "serve.log",
                                                      "summary.json", "model.npz",
                                                      "heldout-images.npy",
                                                      "heldout-labels.npy")
                  if (out / name).exists() or name == "summary.json"},
    }


def _throughput(records: list[dict], slot_s: float) -> dict | None:
    """A job's real training speed against its plan's: mini-batches per second of its
    workers' busy time, and the plan's (its slots' planned mini-batches over their length)."""
    busy = sum(r.get("busy_s", 0.0) for r in records)
    if not records or busy <= 0:
        return None
    real = sum(r.get("real_minibatches", 0) for r in records) / busy
    planned = sum(r.get("planned_minibatches", 0) for r in records) / (len(records) * slot_s)
    return {"minibatches_per_s": real, "planned_minibatches_per_s": planned,
            "ratio": real / planned if planned > 0 else None}


def format_summary(summary: dict) -> str:
    """The case study's outcome as text: the dataset, the jobs table, the scheduler, the best
    model, its deployment and benchmark."""
    from ..sim.report import format_table
    from ..training.dataset import describe

    rows = []
    named = {j["id"] for j in summary["jobs"] if j.get("dataset") == summary["dataset"]["digest"]}
    for j in summary["jobs"]:
        slots = " ".join(f"{r['slot']}:{r['workers']}w{r['ps']}p" for r in j["slots"])
        stop = f"stopped at epoch {j['stopped_at_epoch']}" if j["stopped_at_epoch"] else ""
        rows.append([j["id"], j["kind"], j["state"] + (f" ({stop})" if stop else ""),
                     f"{j['minibatches']}/{j['minibatches_to_complete']}",
                     "" if j["val_accuracy"] is None else f"{j['val_accuracy']:.3f}",
                     "" if j["completion"] is None else j["completion"],
                     f"{j['utility']:.3f}", slots])
    s, c, b = summary["service"], summary["controller"], summary["best"]
    util = ", ".join(f"{r} {100 * v:.0f} %" for r, v in s["utilisation"].items())
    lines = [f"preprocessing: {describe(summary['dataset'])}, named by "
             f"{len(named)} of {len(summary['jobs'])} jobs",
             format_table(["job", "kind", "state", "mini-batches", "val acc", "done in",
                           "utility", "slot:workers/PS"], rows), "",
             f"scheduler ({s['policy']}, slots of {s['slot_s']:g} s, jobs ran in slots 1.."
             f"{s['last_slot_with_jobs']}): "
             f"{s['jobs']} jobs, {s['admitted']} admitted, {s['rejected']} rejected, "
             f"{s['completed']} completed, {s['cancelled']} cancelled; utility "
             f"{s['utility']:.3f}; utilisation {util}",
             f"schedule check (oasis_opt.validate): "
             + ("valid" if summary["validation"]["ok"] else
                f"{len(summary['validation']['violations'])} violations"),
             f"controller {c['name']} (at most {c['concurrent']} trials at once): "
             f"{c['trials_started']} trials started, {c['stopped']} stopped early, "
             f"{c['minibatches_saved']} mini-batches not trained"]
    if b is None:
        lines.append("no job completed: nothing to export")
    else:
        split = summary["split"]
        lines.append(f"best model: {b['job']} ({b['task']}, {_config_text(b['config'])}), "
                     f"validation accuracy {b['val_accuracy']:.3f}")
        lines.append(f"held-out accuracy: {b['accuracy']:.4f} on {b['examples']} test images "
                     f"(split {split['train']}/{split['validation']}/{split['test']}: the test "
                     "images were never trained on nor used to choose)")
    serving = summary.get("serving")
    if serving is not None:
        lat, thr = serving["latency_ms"], serving["throughput"]
        lines.append(f"deployed: model {serving['model']} version {serving['version']} "
                     f"({serving['job']}), held-out accuracy {serving['heldout_accuracy']:.4f} "
                     f"at deployment, {serving['api_accuracy']:.4f} through the API")
        lines.append(f"benchmark: one image per request p50 {lat['p50']:.1f} ms, p99 "
                     f"{lat['p99']:.1f} ms ({lat['requests']} requests); "
                     f"{thr['images_per_s']:.0f} images/s in batches of {thr['batch']}")
    speeds = [(j["id"], j["throughput"]) for j in summary["jobs"] if j.get("throughput")]
    if speeds:
        lines.append("training speed, real / planned mini-batches per second: " + ", ".join(
            f"{i} {t['minibatches_per_s']:.1f}/{t['planned_minibatches_per_s']:.1f}"
            for i, t in speeds))
    lines.append(f"-> {summary['files']['summary.json']}"
                 + (f", {summary['files']['model.npz']}" if "model.npz" in summary["files"]
                    else ""))
    return "\n".join(lines)
