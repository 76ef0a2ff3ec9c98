"""``solve`` (one ``oasis_opt.solve`` call: a policy on an instance, validated and written) and
``policies``."""
from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from .args import (MAX_WORK, OPTION, PROGRESS, adder, arg, existing_file, option_error,
                   policy_options, positive_seconds, values)
from .common import EXIT_INVALID, EXIT_OK, CliError, load_instance, located, show_progress, write

if TYPE_CHECKING:
    from ..model import Instance, Schedule
    from ..model.validate import ValidationReport

# seconds a solver gets when reading the instance used up --time-limit (it then stops at once)
MIN_TIME_LEFT = 1e-9
# share of --time-limit held back for validating and writing the result (a 100-job schedule
# takes seconds to write on a loaded machine)
WRITE_RESERVE = 0.05

add_solve = adder(
    arg("instance", metavar="INSTANCE", help="instance JSON"),
    arg("--policy", required=True, metavar="NAME", help="policy (see `oasis-opt policies`)"),
    arg("--time-limit", type=positive_seconds, metavar="S",
        help="time limit in seconds for the whole command, reading the instance included "
             "(offline solvers)"),
    arg("--backend", choices=("numpy", "jax", "reference"),
        help="kernel backend (policy option backend=...)"),
    arg("--pricing", type=existing_file, metavar="FILE",
        help="pricing parameters file (policy option pricing=...)"),
    OPTION, PROGRESS, MAX_WORK,
    arg("--out", required=True, metavar="RESULT", help="result JSON to write"))


def solve(args: argparse.Namespace) -> int:
    from ..model.io import FormatError, save_result
    from ..model.validate import validate
    from ..policies import OptionError, solve
    from ..sizing import TooMuchWork

    inst = load_instance(args.instance)
    options = policy_options(args)
    given = values(options)
    given.setdefault("progress", show_progress(args))
    t0 = time.perf_counter()
    if args.time_limit is not None:  # what is left of it: the limit counts from the start
        given["time_limit"] = max((1 - WRITE_RESERVE) * args.time_limit - (t0 - args.started),
                                  MIN_TIME_LEFT)
    try:
        sched = solve(inst, args.policy, max_work=args.max_work, **given)
    except OptionError as e:
        raise option_error(e, options, args.policy) from None
    except TooMuchWork as e:  # beyond --max-work, or the machine's memory: the instance's size
        raise CliError("--max-work" if e.field == "max_work" else args.instance,
                       e.message) from None
    except FormatError as e:
        if isinstance(given.get("pricing"), str):  # the pricing file is bad
            raise located(e, given["pricing"]) from None
        raise
    except ValueError as e:
        raise CliError(f"--policy {args.policy}", str(e)) from None
    elapsed = time.perf_counter() - t0
    report = validate(inst, sched)
    write(args.out, save_result, inst, sched)
    run_time = sched.stats.get("timing", {}).get("run_time_s")
    seconds = run_time if isinstance(run_time, (int, float)) else elapsed
    print(f"{solve_line(inst, sched, report, seconds)} -> {args.out}")
    if not report.ok:
        print(report, file=sys.stderr)
        return EXIT_INVALID
    return EXIT_OK


def solve_line(inst: Instance, sched: Schedule, report: ValidationReport, seconds: float) -> str:
    """``solve``'s summary line. For a solver-backed policy (stats with ``status`` and
    ``bound``) the solver's outcome, in words ("time limit, no incumbent, no bound"), comes
    before the schedule's validity, so a schedule returned at a limit never reads as a result."""
    done = int(sched.completed.sum())
    line = (f"{sched.policy}: total utility {sched.total_utility:.4f}, admitted "
            f"{sum(sched.admitted)}/{inst.I}, completed {done}")
    validity = "valid" if report.ok else f"INVALID ({len(report.violations)} violations)"
    if "status" in sched.stats and "bound" in sched.stats:
        from ..offline.solver import describe

        return f"{line}; solver: {describe(sched.stats)}; schedule {validity}, {seconds:.2f} s"
    return f"{line}, {validity}, {seconds:.2f} s{_pricing_said(sched.stats)}"


def _pricing_said(stats: dict) -> str:
    """Which pricing an OASiS run used: the oracle (eqs. (23)-(26) on the instance's own jobs,
    what ``--pricing`` left out means) or the file / document it was given."""
    pricing = stats.get("pricing")
    if not isinstance(pricing, dict) or "source" not in pricing:
        return ""
    source = pricing["source"]
    if source == "oracle":
        return "; pricing: the oracle (eqs. (23)-(26) on this instance's own jobs)"
    if source.startswith("file:"):
        return f"; pricing: the file {source.removeprefix('file:')}"
    return f"; pricing: {source}"


def policies(args: argparse.Namespace) -> int:
    from ..policies import available_policies

    names = available_policies()
    width = max(map(len, names), default=0)
    for name, summary in names.items():
        print(f"{name.ljust(width)}  {summary}")
    return EXIT_OK


COMMANDS = {"solve": (add_solve, solve), "policies": (adder(), policies)}
