"""A function run in a child process that is killed when it overshoots its time limit.

HiGHS does not check its clock everywhere (its presolve ran 47 s of a 30 s limit on a large
MILP): a child process is the only way to stop it on time. :func:`run_in_child` is that child;
:func:`.solver.solve_in_child` runs a solve in it. The child inherits this process's HiGHS thread
setting (:func:`.highs.set_highs_threads`) and forwards its log records when DEBUG is enabled.
"""
from __future__ import annotations

import logging
import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from . import highs

log = logging.getLogger("oasis_opt.offline.solver")  # one logger for the solver layer


# A solve run in a child process is killed this long after its time limit (seconds, plus a share
# of the limit) if the solver has not stopped by itself.
KILL_GRACE_S = 1.0
KILL_GRACE_SHARE = 0.05


@dataclass(frozen=True)
class ChildOutcome:
    """What :func:`run_in_child` saw: ``kind`` "done" (``value`` is what the function returned),
    "killed" (still running ``late_s`` after its limit) or "died" (exit code ``exit_code``);
    ``handoff_s``: starting the child and pickling the job to it; ``elapsed_s``: the whole run."""
    kind: str
    value: Any = None
    handoff_s: float = 0.0
    elapsed_s: float = 0.0
    late_s: float = 0.0
    exit_code: int | None = None


def run_in_child(fn: Callable[..., Any], *args: Any, time_limit: float) -> ChildOutcome:
    """``fn(*args)`` in a child process, killed ``KILL_GRACE_S + KILL_GRACE_SHARE * time_limit``
    seconds after ``time_limit`` (counted from this call, starting the child included).

    The child is a fresh interpreter (``python -c``; ``fn`` and ``args`` pickled to it through a
    pipe), so it inherits no threads and never re-runs the caller's ``__main__``. ``fn`` gets no
    clock of its own: give it the wall-clock deadline (``time.time()`` based) in ``args``. Its
    logs on this module's logger are forwarded as they come when DEBUG is enabled; an exception
    it raises is re-raised here. POSIX only (file descriptors passed to the child): callers run
    ``fn`` in their own process elsewhere.
    """
    import pickle
    import subprocess
    import threading
    from multiprocessing.connection import Connection

    if not time_limit > 0:
        raise ValueError(f"time_limit: must be > 0 seconds, got {time_limit}")
    t0 = time.perf_counter()
    to_child, from_child = os.pipe(), os.pipe()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from oasis_opt.offline.child import _child_main; "
         "_child_main(int(sys.argv[1]), int(sys.argv[2]))", str(to_child[0]), str(from_child[1])],
        pass_fds=(to_child[0], from_child[1]), stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, env=env)
    os.close(to_child[0])
    os.close(from_child[1])
    send, receive = Connection(to_child[1], readable=False), Connection(from_child[0],
                                                                        writable=False)
    kill_at = t0 + time_limit + KILL_GRACE_S + KILL_GRACE_SHARE * time_limit

    job = pickle.dumps((fn, args, log.isEnabledFor(logging.DEBUG), highs.highs_threads()),
                       protocol=pickle.HIGHEST_PROTOCOL)
    sent = [math.nan]

    def hand_off() -> None:
        # a job larger than the pipe's buffer blocks until the child reads it, and a child
        # starting on a loaded machine may take long to: the kill clock runs meanwhile
        try:
            send.send_bytes(job)
            sent[0] = time.perf_counter()
        except OSError:  # the child died or was killed before reading it all
            pass
        finally:
            send.close()

    sender = threading.Thread(target=hand_off, daemon=True)
    sender.start()

    def handoff_s() -> float:
        return (sent[0] if sent[0] == sent[0] else time.perf_counter()) - t0

    def died() -> ChildOutcome:
        return ChildOutcome("died", handoff_s=handoff_s(), elapsed_s=time.perf_counter() - t0,
                            exit_code=proc.wait())

    try:
        while True:
            wait = kill_at - time.perf_counter()
            if wait <= 0 or not receive.poll(wait):
                proc.kill()
                now = time.perf_counter()
                return ChildOutcome("killed", handoff_s=handoff_s(), elapsed_s=now - t0,
                                    late_s=now - t0 - time_limit)
            try:
                kind, payload = receive.recv()
            except EOFError:  # the child died without a word
                return died()
            if kind == "log":
                log.debug("%s", payload)
            elif kind == "error":
                raise payload
            else:
                return ChildOutcome("done", payload, handoff_s=handoff_s(),
                                    elapsed_s=time.perf_counter() - t0)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        sender.join()
        receive.close()



def _child_main(in_fd: int, out_fd: int) -> None:
    """Body of the :func:`run_in_child` process: read ``(fn, args, debug, threads)`` from
    ``in_fd``, run ``fn(*args)``, write ("result", value) or ("error", exception) to ``out_fd``;
    with debug logging, ("log", message) for every log record of this module as it comes."""
    import pickle
    import threading
    from multiprocessing.connection import Connection

    receive, send = Connection(in_fd, writable=False), Connection(out_fd, readable=False)
    fn, args, debug, threads = pickle.loads(receive.recv_bytes())
    receive.close()
    lock = threading.Lock()  # HiGHS may log from its worker threads

    def put(item: tuple[str, Any]) -> None:
        with lock:
            send.send(item)

    if debug:
        class Forward(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                put(("log", record.getMessage()))

        root = logging.getLogger("oasis_opt")
        root.addHandler(Forward())
        root.setLevel(logging.DEBUG)
        root.propagate = False
    if threads is not None:
        highs.set_highs_threads(threads)
    try:
        put(("result", fn(*args)))
    except Exception as e:  # noqa: BLE001 - re-raised in the parent
        put(("error", e))
    send.close()

