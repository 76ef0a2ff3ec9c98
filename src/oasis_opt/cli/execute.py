"""``execute`` (a schedule run for real on Ray), ``profile`` (a task's measured speed model)
and ``calibrate`` (the slowdown to plan with on the machine as it is now)."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from .args import (PROGRESS, TASK, adder, arg, json_object, non_negative_int,
                   positive_int, positive_int_list, positive_seconds)
from .common import (EXIT_OK, PROG, CliError, failure, load_instance, load_profile, load_result,
                     located, look_up, show_progress, write)

add_execute = adder(
    arg("instance", metavar="INSTANCE", help="instance JSON (every job the schedule runs "
        "names a training task)"),
    arg("result", metavar="RESULT", help="result JSON (the schedule)"),
    arg("--slot-s", type=positive_seconds, required=True, metavar="S",
        help="wall-clock seconds per slot"),
    arg("--address", metavar="ADDR", help="join this running Ray cluster (its nodes "
        "provide the resources server:<id>; default: a local Ray)"),
    arg("--open-loop", action="store_true",
        help="run the result's schedule as it is, every planned mini-batch however late "
             "(default: the closed loop re-runs the result's online policy slot by slot on the "
             "measured progress and re-plans jobs that fall behind, "
             "oasis_opt.runtime.closed_loop)"),
    PROGRESS,
    arg("--out", required=True, metavar="REPORT",
        help="execution report JSON to write (oasis-opt/execution@1)"))
add_profile = adder(
    TASK,
    arg("--config", type=json_object, metavar="JSON",
        help="the task's hyperparameters as a JSON object (default: a documented one per "
             "task, oasis_opt.runtime.profile.DEFAULT_CONFIGS)"),
    arg("--workers", type=positive_int_list, default=(1, 2, 4), metavar="W1,W2,...",
        help="worker counts (default 1,2,4)"),
    arg("--ps", type=positive_int_list, default=(1, 2), metavar="P1,P2,...",
        help="PS counts (default 1,2); points with more PSs than workers are skipped"),
    arg("--iterations", type=positive_int, default=40, metavar="N",
        help="iterations timed per sample (default 40)"),
    arg("--repeats", type=positive_int, default=3, metavar="R",
        help="samples per (workers, PSs) point (default 3)"),
    arg("--seed", type=non_negative_int, default=0, metavar="S",
        help="the task's weights and batch order (default 0)"),
    arg("--address", metavar="ADDR", help="join this running Ray cluster"),
    PROGRESS,
    arg("--out", required=True, metavar="PROFILE", help="profile JSON to write"))
add_calibrate = adder(
    arg("--profile", action="append", required=True, metavar="PROFILE",
        help="speed profile (oasis-opt profile) the plan will be generated with (repeatable)"),
    arg("--slot-s", type=positive_seconds, required=True, metavar="S",
        help="wall-clock seconds per slot, as the plan's"),
    arg("--quantile", type=float, default=None, metavar="Q",
        help="plan with this quantile of the measured busy / predicted ratios (default 0.9, "
             "oasis_opt.runtime.calibrate)"),
    arg("--address", metavar="ADDR", help="join this running Ray cluster"),
    arg("--out", metavar="FILE", help="also write the calibration as JSON"))


def execute(args: argparse.Namespace) -> int:
    from ..runtime.executor import STARTUP_PHASES, ExecutionError, execute
    from ..runtime.plan import ExecutionRefused, plan_execution
    from ..runtime.report import save_report

    inst = load_instance(args.instance)
    sched = load_result(inst, args.result, args.instance)
    bar = None
    last = int(sched.allocations.slot.max()) if len(sched.allocations) else 0
    progress = show_progress(args)

    def on_phase(name: str, seconds: float) -> None:
        nonlocal bar
        print(f"{PROG}: {STARTUP_PHASES[name]} in {seconds:.1f} s", file=sys.stderr, flush=True)
        if name == "compile":  # slot 1 starts now: the bar's first rate is over a whole slot
            from tqdm import tqdm

            bar = tqdm(total=last, desc=f"execute {sched.policy}", unit="slot")

    def on_slot(record: dict) -> None:
        if bar is None:
            return
        bar.update(1)
        bar.set_postfix_str(f"jobs {record['jobs']}, workers {record['workers']}, PS "
                            f"{record['ps']}, overrun {record['overrun_s']:.2f} s")

    if progress:
        print(f"{PROG}: starting Ray, creating the containers, compiling the tasks ...",
              file=sys.stderr, flush=True)
    policy = None
    try:
        if not args.open_loop:  # what ``execute`` refuses first, then the policy's checks
            plan_execution(inst, sched)
            policy = closed_loop_policy(inst, sched, args.result)
        if policy is None:
            report = execute(inst, sched, slot_seconds=args.slot_s, address=args.address,
                             on_slot=on_slot if progress else None,
                             on_phase=on_phase if progress else None)
        else:
            from ..runtime.closed_loop import run_closed_loop

            report = run_closed_loop(inst, policy, slot_seconds=args.slot_s,
                                     address=args.address,
                                     on_slot=on_slot if progress else None,
                                     on_phase=on_phase if progress else None).report
    except ExecutionRefused as e:
        raise (CliError(args.result, e.message) if e.field == "schedule"
               else located(e, args.instance)) from None
    except ExecutionError as e:
        return failure(e)
    finally:
        if bar is not None:
            bar.close()
    write(args.out, save_report, report)
    print(report.summary())
    if policy is not None:
        loop = report.doc["meta"]["closed_loop"]
        print(f"closed loop: {len(loop['behind'])} job-slots fell behind, "
              f"{len(loop['replans'])} re-plans")
    print(f"-> {args.out}")
    return EXIT_OK


def closed_loop_policy(inst: Any, sched: Any, where: str) -> Any:
    """The online policy that made ``sched``, rebuilt by its name with default options, for the
    closed loop; ``CliError`` (pointing to ``--open-loop``) unless it is an online policy whose
    simulation gives exactly ``sched``'s allocations (a result made with other options or by
    hand cannot be re-run)."""
    import copy

    import numpy as np

    from ..model.policy import OnlinePolicy
    from ..policies import OptionError, build
    from ..runtime.plan import slot_events
    from ..sim.core import simulate

    hint = "; run it as it is with --open-loop"
    try:
        policy, _ = build(sched.policy, {})
    except OptionError:
        raise CliError(where, f"policy {sched.policy!r} is not one the closed loop can re-run "
                       f"(an online policy by name){hint}") from None
    if not isinstance(policy, OnlinePolicy):
        raise CliError(where, f"policy {sched.policy!r} is offline: the closed loop re-runs an "
                       f"online policy slot by slot{hint}")
    events = slot_events(sched, inst)
    if events:
        t = min(events)
        raise CliError(where, f"the schedule has preemption events ({len(events)} slots, the "
                       f"first in slot {t}: {events[t]}), which the closed loop does not apply "
                       f"(it re-plans only jobs that fall behind){hint}")
    again = simulate(inst, copy.deepcopy(policy)).allocations
    mine = sched.allocations
    if any(not np.array_equal(a, b) for a, b in (
            (again.job, mine.job), (again.slot, mine.slot), (again.server, mine.server),
            (again.role, mine.role), (again.count, mine.count))):
        raise CliError(where, f"policy {sched.policy!r} with its default options does not give "
                       f"this schedule (made with other options?){hint}")
    return policy


def profile(args: argparse.Namespace) -> int:
    from statistics import median

    from ..training.tasks import get_task
    from ..costmodel.profile import save_profile
    from ..runtime.executor import STARTUP_PHASES, ExecutionError
    from ..runtime.profile import DEFAULT_CONFIGS, profile_points, profile_task
    from ..sim.report import format_table

    task = look_up(get_task, args.task, "--task")
    try:
        config = task.space.check(args.config if args.config is not None
                                  else DEFAULT_CONFIGS[task.name], "--config")
    except ValueError as e:
        raise CliError(*str(e).split(": ", 1)) from None
    points = profile_points(args.workers, args.ps)
    if len(points) < 4:
        raise CliError("--workers", f"{len(points)} (workers, PSs) points with PSs <= workers; "
                       "the speed model's 4 parameters need at least 4")
    bar = None
    progress = show_progress(args)

    def on_phase(name: str, seconds: float) -> None:
        nonlocal bar
        print(f"{PROG}: {STARTUP_PHASES[name]} in {seconds:.1f} s", file=sys.stderr, flush=True)
        if name == "compile":  # the timed slots start now
            from tqdm import tqdm

            bar = tqdm(total=len(points) * (1 + args.repeats), desc=f"profile {task.name}",
                       unit="slot")

    if progress:
        print(f"{PROG}: starting Ray, creating the containers, compiling the task ...",
              file=sys.stderr, flush=True)
    try:
        prof = profile_task({"name": task.name, "config": config, "seed": args.seed},
                            args.workers, args.ps, iterations=args.iterations,
                            repeats=args.repeats, address=args.address,
                            progress=(lambda d, n: bar.update(d - bar.n) if bar else None)
                            if progress else None,
                            on_phase=on_phase if progress else None)
    except ExecutionError as e:
        return failure(e)
    finally:
        if bar is not None:
            bar.close()
    write(args.out, save_profile, prof)

    def measured(w: int, p: int) -> float:
        return median(s.iteration_s for s in prof.samples if (s.workers, s.ps) == (w, p))

    rows = [[w, p, f"{1e3 * measured(w, p):.2f}", f"{1e3 * prof.iteration_time(w, p):.2f}"]
            for w, p in points]
    print(format_table(["workers", "PSs", "measured ms/iteration (median)", "fitted"], rows))
    print(f"t(w, p) = {prof.theta['const'] * 1e3:.3f} + {prof.theta['ps_load'] * 1e3:.3f} w/p + "
          f"{prof.theta['per_worker'] * 1e3:.3f} w + {prof.theta['per_ps'] * 1e3:.3f} p  ms; fit "
          f"error RMS {100 * prof.fit['rms_rel_error']:.1f} %, max "
          f"{100 * prof.fit['max_rel_error']:.1f} % -> {args.out}")
    return EXIT_OK


def calibrate(args: argparse.Namespace) -> int:
    from statistics import median

    from ..model.io import write_json_atomic
    from ..runtime.calibrate import QUANTILE, describe_runs, slowdown_of
    from ..runtime.calibrate import calibrate as run_calibration
    from ..runtime.executor import ExecutionError

    quantile = QUANTILE if args.quantile is None else args.quantile
    try:
        slowdown_of([1.0], quantile)
    except ValueError as e:
        raise CliError("--quantile", str(e).split(": ", 1)[1]) from None
    profiles = [load_profile(path) for path in args.profile]
    print(f"{PROG}: short real runs ({describe_runs()}; slots of {args.slot_s:g} s) ...",
          file=sys.stderr, flush=True)
    try:
        cal = run_calibration(profiles, slot_s=args.slot_s, quantile=quantile,
                              address=args.address)
    except ExecutionError as e:
        return failure(e)
    if args.out:
        write_json_atomic(args.out, cal.to_json())
    r = sorted(cal.ratios)
    print(f"busy / predicted over {len(r)} job-slots: median {median(r):.2f}, min {r[0]:.2f}, "
          f"max {r[-1]:.2f} (1-minute load {cal.load[0]:.1f} -> {cal.load[1]:.1f}, "
          f"{cal.wall_s:.0f} s)")
    print(f"plan with: --slowdown {cal.slowdown:.3g}   (the {quantile:g} quantile)"
          + (f" -> {args.out}" if args.out else ""))
    return EXIT_OK


COMMANDS = {"execute": (add_execute, execute), "profile": (add_profile, profile),
            "calibrate": (add_calibrate, calibrate)}
