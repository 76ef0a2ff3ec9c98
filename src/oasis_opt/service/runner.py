"""Slots in wall-clock time: a thread that calls ``Scheduler.advance`` at every slot boundary and
runs the slot on an ``Executor`` (or, policy-only, lets the slot's time pass).

Slot t of a runner begins ``(t - 1 - f) S`` seconds after it started, f the slots already finished
in its state (a restarted service goes on from where the state stops, on a new time grid). With
an executor, the executor paces the slot itself (``Executor.run_slot``: a slot ends at the later
of its due time and the end of its planned work; a slot that overran moves the grid, the next
ones are not shortened to catch up) and the slot's per-job records and checkpoints
are written to the state when it ends; a restarted service restores every job's checkpoint first.
A closed-loop scheduler (``Scheduler(closed_loop=True)``, ``oasis-opt serve``'s default) gets a
time-boxed executor (no iteration starts after the slot's end) and is handed, with the slot's
records, the work each job has left (``runtime.closed_loop.executor_left``), which it credits.

**A kill leaves no Ray behind for long.** A service that starts its own local Ray records Ray's
processes (its descendants) in the state after Ray starts and after every slot. SIGKILL runs no
clean-up: Ray's workers exit within seconds, but its agents live on for about a minute. The next
service on the same state stops every recorded process that still runs (the same pid *and*
start time, so never a process that took a recycled pid) before it starts its own Ray, and says
so in its log (``stop_left_processes``).
"""
from __future__ import annotations

import threading
import time
import traceback
from typing import TYPE_CHECKING, Callable

from .scheduler import Scheduler
from .store import Store

if TYPE_CHECKING:
    from ..runtime.executor import Executor


class ServiceRunner:
    """Runs ``scheduler``'s slots every ``slot_seconds`` until the horizon or ``stop()``.

    ``execute``: run the slots on Ray (``address``: join that Ray cluster; default a local one);
    otherwise nothing runs and progress is the simulator's account. ``status`` is "starting"
    (Ray and the executor starting), "running", "finished" (the horizon is over), "stopped" or
    "failed" (``error`` says why); while a decided slot runs, ``slot_running`` is its number and
    ``slot_started`` its ``time.monotonic()`` start (None between slots). ``report``: called
    with one line per slot finished (what ``oasis-opt serve`` prints).
    """

    def __init__(self, scheduler: Scheduler, slot_seconds: float, *, execute: bool = False,
                 address: str | None = None, report: Callable[[str], None] | None = None):
        self.scheduler, self.slot_seconds = scheduler, float(slot_seconds)
        self.execute, self.address, self.report = execute, address, report
        self.status: str = "starting"
        self.error: str | None = None
        self.slot_running: int | None = None
        self.slot_started: float | None = None
        self._stop = threading.Event()
        self._plans: dict = {}  # closed loop: the jobs' ``runtime.plan.JobPlan``, as they run
        self._thread = threading.Thread(target=self._main, name="oasis-opt-slots", daemon=True)

    def start(self) -> "ServiceRunner":
        self._thread.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        """Stop at the next slot boundary (a slot running on the executor ends first)."""
        self._stop.set()
        self._thread.join(timeout)

    def _main(self) -> None:
        executor: Executor | None = None
        try:
            if self.execute:
                executor = self._executor()
            self.status = "running"
            self._slots(executor)
            self.status = "stopped" if self._stop.is_set() else "finished"
        except Exception as e:  # noqa: BLE001 - reported by /health, the service stays up
            self.status, self.error = "failed", f"{type(e).__name__}: {e}"
            traceback.print_exc()
        finally:
            if executor is not None:
                executor.close()

    def _executor(self) -> Executor:
        from ..runtime.executor import Executor

        sched = self.scheduler
        if self.address is None:  # a local Ray: first what a killed service left of its own
            left = stop_left_processes(sched.store)
            if left and self.report is not None:
                self.report(f"stopped {len(left)} processes the previous service on this state "
                            f"left running ({', '.join(left)})")
        # no catch-up: after a slot overruns (containers starting, kernels compiling) the next
        # slots still last S each, so clients acting between slots are not outrun by slots that
        # pass in milliseconds, and the horizon is not spent on empty ones
        # closed loop: time-boxed, so a slow job does less than planned and is re-planned
        executor = Executor(sched.instance, slot_seconds=self.slot_seconds, address=self.address,
                            catch_up=False, time_box=sched.closed_loop)
        executor.start()
        self._record_processes()
        for seq, snapshot in sched.checkpoints().items():
            executor.restore(seq, snapshot)
        return executor

    def _record_processes(self) -> None:
        if self.execute and self.address is None:
            self.scheduler.store.record_processes(own_processes())

    def _slots(self, executor: Executor | None) -> None:
        sched, S = self.scheduler, self.slot_seconds
        origin = time.monotonic() - sched.finished_slots * S
        while not self._stop.is_set():
            t = sched.finished_slots + 1
            if t > sched.cluster.horizon:
                return
            if self._stop.wait(max(0.0, origin + (t - 1) * S - time.monotonic())):
                return
            started = time.monotonic()
            slot = sched.advance()
            decided = time.monotonic() - started
            self.slot_running, self.slot_started = t, started
            if executor is None:
                if self._stop.wait(max(0.0, origin + t * S - time.monotonic())):
                    return  # decided, not run: a restart runs it as decided
                sched.finish(t)
            else:
                self._run(executor, t, slot.rows)
                self._record_processes()  # Ray's workers come and go with the containers
            self.slot_running = self.slot_started = None
            if self.report is not None:
                self.report(slot_line(sched, t, time.monotonic() - started, decided))

    def _run(self, executor: Executor, t: int, rows: list) -> None:
        """Run decided slot ``t`` (its allocation ``rows``) on ``executor`` and record it."""
        sched = self.scheduler
        instance = sched.instance
        executor.extend(instance)
        record = executor.run_slot(t, rows)
        progress, checkpoints = {}, {}
        jobs = sorted({j for j, *_ in rows})
        for j in jobs:
            snap = checkpoints[j] = executor.snapshot(j)
            progress[j] = {**snap["slots"][-1], "completion_slot": snap["completion_slot"],
                           "completion_s": snap["completion_s"]}
        left = None
        if sched.closed_loop:
            from ..runtime.closed_loop import executor_left

            left = executor_left(executor, instance, self._plans, jobs)
        sched.finish(t, record, progress, checkpoints, left=left)


def own_processes() -> list[tuple[int, float, str]]:
    """``(pid, start time, name)`` of every running descendant of this process."""
    import psutil

    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            out.append((p.pid, p.create_time(), p.name()))
        except psutil.NoSuchProcess:  # ended while listed
            pass
    return out


def stop_left_processes(store: Store, timeout: float = 30.0) -> list[str]:
    """SIGKILL every process ``store`` records (``Store.processes``) that still runs as the
    same process (pid, start time and name), wait up to ``timeout`` seconds for them to end,
    forget them; returns ``"pid name"`` of those stopped."""
    import psutil

    found, names = [], []
    for pid, created, name in store.processes():
        try:
            p = psutil.Process(pid)
            if p.create_time() == created and p.name() == name:
                p.kill()
                found.append(p)
                names.append(f"{pid} {name}")
        except psutil.NoSuchProcess:  # ended by itself, or gone while we looked
            pass
    psutil.wait_procs(found, timeout=timeout)
    store.record_processes([])
    return names


def slot_line(scheduler: Scheduler, t: int, seconds: float, decided: float) -> str:
    """The line ``oasis-opt serve`` prints when slot ``t`` has finished, ``seconds`` after its
    decision began, which took ``decided`` seconds (the policy's, for the jobs it took): its
    jobs and the service's counts."""
    s = scheduler.summary()
    return (f"slot {t} of {s['horizon']} done in {seconds:.1f} s (decided in "
            f"{1e3 * decided:.1f} ms): {s['running']} jobs running, "
            f"{s['scheduled']} scheduled later, {s['pending']} waiting; "
            f"{s['admitted']} admitted, {s['rejected']} rejected, {s['completed']} completed, "
            f"{s['cancelled']} cancelled; utility {s['utility']:.3f}")
