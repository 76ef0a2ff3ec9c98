"""Map a function over items, unordered, in this process or on Ray.

``make_pool(workers, address)``:
- ``workers == 1`` and no address: ``InProcessPool``, a plain loop (no Ray import);
- otherwise ``RayPool``: a local Ray started with ``ray.init(address="local", num_cpus=workers)``
  (``"local"`` always starts a fresh instance, so a stale ``ray start`` session file cannot make it
  try to reconnect), or, with ``address``, a join of that existing cluster.

Both are context managers whose ``imap_unordered(fn, items)`` yields ``(index, fn(item))`` as
results arrive. Ray is imported lazily, only when a ``RayPool`` starts. Each Ray task takes one
CPU and runs with single-threaded BLAS/OpenMP, so N tasks do not fight over N cores; tasks are
spread over the cluster's nodes (Ray's ``SPREAD`` strategy), at most twice the CPUs in flight.

``init_ray`` is the one place that calls ``ray.init`` (the pool and the executor): a local start
that fails with Ray's start-up timeout is retried by ``retry_startup`` (``RAY_START_ATTEMPTS``
in all, each after ``ray.shutdown()``, logged); a cluster that cannot be joined raises
``RayJoinError``, which says what to check: an address where nothing accepts connections at once
(``check_reachable``; Ray would retry for many minutes), ``RAY_AUTH_MODE=token`` for a cluster
with Ray's token authentication (Ray sends no token to an address it is given unless told to).
"""
from __future__ import annotations

import logging
import os
from typing import Any, Callable, Iterable, Iterator, Sequence

from .._extras import require

log = logging.getLogger(__name__)
# attempts at starting a local Ray: Ray's start-up has fixed waits (the raylet's 30 s registration,
# ray/_private/node.py; the metrics agent's 15 s, ray-project/ray#65983) that a loaded machine
# can exceed, and ray.init then fails with this message
RAY_START_ATTEMPTS = 5
RAY_STARTUP_TIMEOUT = "timed out during startup"  # Ray's message for that failure
# Niceness of the workers of a local Ray this package starts. Ray's default (15) makes sense on
# a shared node, but a local Ray here exists only to run this package's work: at 15 its workers
# got about 4 % of a core each next to two ordinary busy processes, and a quick reproduction
# took over 20 minutes instead of 3 (Ray system config ``worker_niceness``).
RAY_WORKER_NICENESS = 0


def retry_startup(start: Callable[[], Any], stop: Callable[[], Any],
                  attempts: int = RAY_START_ATTEMPTS) -> Any:
    """``start()``, again after ``stop()`` when it fails with Ray's startup timeout (the raylet did
    not register within Ray's fixed wait), at most ``attempts`` times in all; any other error,
    or the last timeout, propagates. After a failed attempt every process it started (a child of
    this process that was not there before, with its own children) is killed: ``ray.shutdown()``
    does not stop the GCS, dashboard and monitors of a node that never came up, and left running
    they load the machine that made the start time out (Linux; elsewhere only ``stop()``)."""
    for attempt in range(1, attempts + 1):
        before = child_pids()
        try:
            return start()
        except Exception as e:  # noqa: BLE001 - Ray raises a bare Exception for it
            if RAY_STARTUP_TIMEOUT not in str(e) or attempt == attempts:
                raise
            log.warning("local Ray did not start in time (attempt %d of %d): %s; starting again",
                        attempt, attempts, e)
            stop()
            kill_tree(child_pids() - before)


def child_pids(pid: int | str = "self") -> set[int]:
    """The direct children of process ``pid`` (Linux ``/proc``; an empty set elsewhere)."""
    out: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out.update(int(p) for p in f.read().split())
        except OSError:  # the thread or process is gone
            pass
    return out


def descendants(pids: set[int]) -> set[int]:
    """``pids`` and every process under them now: children, their children, ... (Linux
    ``/proc``; only ``pids`` elsewhere)."""
    todo, seen = list(pids), set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        todo.extend(child_pids(pid))
    return seen


def kill_tree(pids: set[int]) -> None:
    """SIGKILL every process in ``pids`` and all their descendants (children first listed)."""
    import signal

    for pid in descendants(pids):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:  # already gone
            pass
    for pid in pids:  # reap our own children (their descendants are reaped by init)
        try:
            os.waitpid(pid, 0)
        except OSError:
            pass


# One task per CPU: keep numerical libraries in each task single-threaded.
SINGLE_THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                     "MKL_NUM_THREADS": "1", "JAX_PLATFORMS": "cpu"}


# Ray's own loggers whose warnings are about Ray, not this package's work: every start of a local
# Ray logs "Token authentication is enabled for this Ray cluster ..." (the default mode, which
# stays on). Kept off the user's screen unless RAY_WARNINGS_ENV is set to 1.
RAY_QUIET_LOGGERS = ("ray._private.authentication.authentication_token_setup",)
RAY_WARNINGS_ENV = "OASIS_OPT_RAY_WARNINGS"


def quiet_ray_warnings() -> None:
    """Raise ``RAY_QUIET_LOGGERS`` to ERROR (their warnings dropped), unless the environment
    variable ``OASIS_OPT_RAY_WARNINGS=1`` asks for them. Token authentication is not changed."""
    if os.environ.get(RAY_WARNINGS_ENV) == "1":
        return
    for name in RAY_QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)


# Ray's token authentication: a driver or node given an address sends the cluster's token only
# when this is "token" (ray.init never turns it on for an explicit address)
RAY_AUTH_MODE_ENV = "RAY_AUTH_MODE"


class RayJoinError(ConnectionError):
    """The Ray cluster at ``address`` could not be joined (not running there, or it refused this
    driver); the message says what to check, token authentication included."""

    def __init__(self, address: str, cause: BaseException, *, reached: bool = True):
        if not reached:
            hint = ": nothing accepts connections there (is the head node running?)"
        elif os.environ.get(RAY_AUTH_MODE_ENV) == "token":
            hint = ""
        else:
            hint = (f"; a cluster with Ray's token authentication (its default) needs "
                    f"{RAY_AUTH_MODE_ENV}=token in this environment, with its token in "
                    "~/.ray/auth_token or RAY_AUTH_TOKEN")
        super().__init__(f"could not join the Ray cluster at {address} "
                         f"({type(cause).__name__}: {cause}){hint}")
        self.address = address


JOIN_PROBE_S = 10.0  # seconds a cluster's address gets to accept a TCP connection


def check_reachable(address: str) -> None:
    """``RayJoinError`` at once when nothing accepts a TCP connection at ``HOST:PORT`` within
    ``JOIN_PROBE_S`` (``ray.init`` would retry for many minutes); other forms of address
    (``auto``, ``ray://...``) are left to Ray."""
    import socket

    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=JOIN_PROBE_S).close()
    except OSError as e:
        raise RayJoinError(address, e, reached=False) from None


def init_ray(address: str | None, *, num_cpus: int | None = None,
             resources: dict[str, float] | None = None,
             system_config: dict[str, Any] | None = None) -> None:
    """``ray.init`` quietly (no dashboard, no driver logs): join the cluster at ``address``, or
    start a fresh local Ray (``address="local"``) with ``num_cpus`` (default: all), custom
    ``resources`` and workers at niceness ``RAY_WORKER_NICENESS`` (``system_config`` may say
    otherwise); a local start that times out is retried (``retry_startup``)."""
    ray = require("ray", extra="ray", feature="running on Ray")
    quiet_ray_warnings()
    kwargs: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False,
                                  logging_level="WARNING")
    if address:
        # AuthenticationError: a token mode without a token (Ray >= 2.5x; absent before)
        refused = (ConnectionError, getattr(ray.exceptions, "AuthenticationError", ConnectionError))
        check_reachable(address)
        try:
            ray.init(address=address, **kwargs)
        except refused as e:
            raise RayJoinError(address, e) from e
        return
    config = {"worker_niceness": RAY_WORKER_NICENESS, **(system_config or {})}
    retry_startup(lambda: ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 1,
                                   resources=resources, _system_config=config, **kwargs),
                  ray.shutdown)


class InProcessPool:
    """Runs every item in this process, in order (``--workers 1``)."""

    workers = 1

    def __enter__(self) -> "InProcessPool":
        return self

    def __exit__(self, *exc) -> None:
        return None

    def imap_unordered(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        for n, item in enumerate(items):
            yield n, fn(item)


class RayPool:
    """Ray tasks, at most ``2 * workers`` in flight (so a huge sweep does not queue everything).

    ``workers``: CPUs of the local instance (default: all of this machine's); with ``address``,
    the cluster's CPUs are used and ``workers`` only bounds the number of tasks in flight.
    A Ray already initialised in this process (e.g. by a test fixture) is used as is and left
    running; one started here is shut down on exit.
    """

    def __init__(self, workers: int | None = None, address: str | None = None,
                 env_vars: dict[str, str] | None = None):
        if workers is not None and workers < 1:
            raise ValueError(f"workers: must be >= 1, got {workers}")
        self.requested = workers
        self.address = address
        self.env_vars = {**SINGLE_THREAD_ENV, **(env_vars or {})}
        self.workers = workers or 1
        self._owned = False
        self._ray = None

    def __enter__(self) -> "RayPool":
        ray = require("ray", extra="ray", feature="running on Ray (--workers 1 runs without it)")
        self._ray = ray
        if not ray.is_initialized():
            init_ray(self.address, num_cpus=self.requested)
            self._owned = True
        self.workers = self.requested or max(1, int(ray.cluster_resources().get("CPU", 1)))
        return self

    def __exit__(self, *exc) -> None:
        if self._owned and self._ray is not None:
            self._ray.shutdown()
        self._owned = False

    def imap_unordered(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        ray = self._ray
        if ray is None:
            raise RuntimeError("RayPool used outside its 'with' block")
        # SPREAD: on a cluster the runs go to every node with a free CPU, not first to the
        # driver's node (Ray's default packs a node before spilling over: on a loaded machine a
        # sweep of short runs then never reached the second node of a two-node cluster)
        remote = ray.remote(num_cpus=1)(fn).options(runtime_env={"env_vars": self.env_vars},
                                                     scheduling_strategy="SPREAD")
        pending: dict[Any, int] = {}
        queue = iter(enumerate(items))
        limit = 2 * self.workers
        try:
            for n, item in _take(queue, limit):
                pending[remote.remote(item)] = n
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    n = pending.pop(ref)
                    yield n, ray.get(ref)
                for m, item in _take(queue, 1):
                    pending[remote.remote(item)] = m
        finally:
            for ref in pending:  # interrupted: do not leave work running on a shared cluster
                ray.cancel(ref, force=True)


def _take(it: Iterator, n: int) -> Iterable:
    for _ in range(n):
        try:
            yield next(it)
        except StopIteration:
            return


def make_pool(workers: int | None = None, address: str | None = None):
    """``InProcessPool`` for ``workers == 1`` without an address, else a ``RayPool``."""
    if workers is not None and workers < 1:
        raise ValueError(f"workers: must be >= 1, got {workers}")
    if workers == 1 and not address:
        return InProcessPool()
    return RayPool(workers, address)
