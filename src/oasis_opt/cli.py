"""The ``oasis-opt`` command: a thin layer over the library.

Exit codes: 0 success; 1 a schedule is invalid (the violations are listed); 2 bad input, reported
as ONE line ``oasis-opt: error: <field>: <message>`` on stderr, never a traceback (an instance too
big to solve within ``--max-work``, a result written for another instance, included); 3 a failure
inside (a bug, an exhausted machine, runs of ``reproduce`` that failed), also one line on stderr
(``OASIS_OPT_TRACEBACK=1`` prints the traceback too). Never 1 for anything but an invalid schedule.

Adding a subcommand is one function plus its parser lines::

    @command("name", "one-line help", arg("instance", help="..."), arg("--flag", type=int))
    def cmd_name(args) -> int:
        from .something_heavy import thing   # heavy imports inside, so --help stays instant
        ...
        return EXIT_OK

Raise ``CliError(field, message)`` for bad input; ``FormatError`` from the strict readers and
``MissingExtra`` (a feature whose optional dependencies are not installed) are reported the same
way. Only the standard library loads at import time, so ``--help`` and argument errors are
instant: the model (numpy) loads when a subcommand runs, and networkx, jax, ray, ortools, pyomo,
scipy and matplotlib inside the code that needs them.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, NoReturn

from ._extras import MissingExtra

if TYPE_CHECKING:
    # the module, not FormatError: the model (numpy) loads in the subcommands, not for --help,
    # so each function imports FormatError itself, and mypy flags one that does not
    from .costmodel.profile import SpeedProfile
    from .model import Instance, Schedule, checks
    from .model.validate import ValidationReport
    from .policies import Policy
    from .sizing import WorkEstimate

PROG = "oasis-opt"
EXIT_OK, EXIT_INVALID, EXIT_BAD_INPUT, EXIT_FAILURE = 0, 1, 2, 3
# seconds a solver gets when reading the instance used up --time-limit (it then stops at once)
MIN_TIME_LEFT = 1e-9
# share of --time-limit held back for validating and writing the result (a 100-job schedule
# takes seconds to write on a loaded machine)
WRITE_RESERVE = 0.05


class CliError(Exception):
    """Bad input: reported as ``oasis-opt: error: <field>: <message>`` with exit code 2."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


# ---- the subcommand registry ------------------------------------------------------------------
_COMMANDS: dict[str, tuple[Callable[[argparse.Namespace], int], str, tuple]] = {}


# command groups: a command registered as "group leaf" is ``oasis-opt group leaf``
_GROUPS: dict[str, str] = {
    "automl": "AutoML: real training tasks, their learning curves, early-stopping studies",
}


def arg(*flags: str, **kwargs: Any) -> tuple[tuple[str, ...], dict]:
    """One ``add_argument`` call, kept for ``command``."""
    return flags, kwargs


Handler = Callable[[argparse.Namespace], int]


def command(name: str, help: str, *arguments: tuple[tuple[str, ...], dict]
            ) -> Callable[[Handler], Handler]:
    """Register ``fn(args) -> exit code`` as subcommand ``name`` with its ``arg(...)`` lines."""

    def register(fn: Handler) -> Handler:
        _COMMANDS[name] = (fn, help, arguments)
        return fn

    return register


# ---- argument types (argparse turns ArgumentTypeError into "argument --x: <message>") ---------
def _int_at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {v}")
        return v

    parse.__name__ = f"integer >= {low}"
    return parse


def _number(what: str, unit: str, positive: bool) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not math.isfinite(v) or v < 0 or (positive and v == 0):
            raise argparse.ArgumentTypeError(
                f"must be a finite number {'>' if positive else '>='} 0, got {text!r}")
        return v

    parse.__name__ = f"{unit} {'>' if positive else '>='} 0"
    return parse


positive_seconds = _number("a number of seconds", "seconds", positive=True)
non_negative_seconds = _number("a number of seconds", "seconds", positive=False)
positive_number = _number("a number", "number", positive=True)


def floor_grid(text: str) -> tuple[float, ...]:
    """``--grid``: comma-separated floor prices, checked by ``estimate.check_grid``."""
    from .online.estimate import check_grid  # light: numpy and the pricing module only

    values = []
    for n, item in enumerate(text.split(",") if text.strip() else []):
        try:
            values.append(float(item))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected comma-separated numbers, got {item.strip()!r} at position {n}") from None
    try:
        return check_grid(values)
    except ValueError as e:  # "grid[n]: ..." / "grid: ...": say it as this option's values
        where, _, message = str(e).partition(": ")
        at = where[len("grid["):-1] if where.startswith("grid[") else None
        raise argparse.ArgumentTypeError(message + ("" if at is None else f" at position {at}")
                                         ) from None


def work_limit(text: str) -> float:
    """``--max-work``: a number > 0 of slot-server-jobs (``inf``: no limit)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if math.isnan(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0 (or inf), got {text!r}")
    return v


def existing_file(text: str) -> str:
    if not Path(text).is_file():
        raise argparse.ArgumentTypeError(f"no such file: {text!r}")
    return text


positive_int = _int_at_least(1)
non_negative_int = _int_at_least(0)


class _Parser(argparse.ArgumentParser):
    """argparse, but errors become one ``field: message`` line instead of usage + exit."""

    def error(self, message: str) -> NoReturn:
        raise CliError(*_argparse_field(message))


def _argparse_field(message: str) -> tuple[str, str]:
    if message.startswith("argument "):
        field, _, rest = message[len("argument "):].partition(": ")
        return field, rest
    for prefix, what in (("the following arguments are required: ", "required argument missing"),
                         ("unrecognized arguments: ", "unrecognized argument")):
        if message.startswith(prefix):
            return message[len(prefix):], what
    return "arguments", message


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Schedule distributed ML training jobs on shared "
                     "clusters: generate instances, run policies, validate and compare schedules.",
                     epilog="exit codes: 0 ok, 1 invalid schedule, 2 bad input, 3 failure")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument("--log-level", choices=LOG_LEVELS, default="warning",
                        help="messages of the library (solver logs: debug) on stderr "
                             "(default: warning)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    groups: dict[str, Any] = {}
    for name, (fn, help_text, arguments) in _COMMANDS.items():
        target = sub
        group, _, leaf = name.partition(" ")
        if leaf:  # "group leaf": a subcommand of the command group ``group`` (see _GROUPS)
            if group not in groups:
                g = sub.add_parser(group, help=_GROUPS[group], description=_GROUPS[group])
                groups[group] = g.add_subparsers(dest="subcommand", metavar="SUBCOMMAND",
                                                 required=True)
            target, name = groups[group], leaf
        p = target.add_parser(name, help=help_text, description=help_text)
        for flags, kwargs in arguments:
            p.add_argument(*flags, **kwargs)
        p.set_defaults(func=fn)
    return parser


def _version() -> str:
    from . import __version__

    return __version__


LOG_LEVELS = ("debug", "info", "warning", "error")


class _StderrHandler(logging.Handler):
    """Writes records to whatever ``sys.stderr`` is at the time (tests swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        print(self.format(record), file=sys.stderr)


def configure_logging(level: str) -> None:
    """The package's log records at ``level`` and above go to stderr as ``name: message``."""
    logger = logging.getLogger("oasis_opt")
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(level.upper())


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block SIGTERM raises ``KeyboardInterrupt``, as Ctrl-C does, so clean-up code
    (``finally``, Ray's shutdown) runs; the previous handler is restored after it."""
    import signal

    def interrupt(signum: int, frame: object) -> NoReturn:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    started = time.perf_counter()  # a time limit counts from here (solve --time-limit)
    try:
        args = build_parser().parse_args(argv)
        args.started = started
        configure_logging(args.log_level)
        code = _run(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers below
        return code
    except SystemExit as e:  # --help / --version
        return e.code if isinstance(e.code, int) else EXIT_OK
    except (CliError, MissingExtra) as e:
        return _bad_input(e)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`... | head`): stop quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the interpreter's final flush cannot fail
        return 141
    except MemoryError:
        print(f"{PROG}: failure: out of memory (a smaller instance, or --max-work, bounds it)",
              file=sys.stderr)
        return EXIT_FAILURE
    except Exception as e:  # a bug: one line, exit 3, never 1 (reserved for invalid schedules)
        if os.environ.get("OASIS_OPT_TRACEBACK"):
            import traceback

            traceback.print_exc()
        print(f"{PROG}: failure: internal error {type(e).__name__}: {_one_line(str(e))} "
              "(OASIS_OPT_TRACEBACK=1 shows the traceback)", file=sys.stderr)
        return EXIT_FAILURE


def _run(args: argparse.Namespace) -> int:
    from .model.io import FormatError  # the model loads here, not for --help

    try:
        return int(args.func(args))
    except FormatError as e:
        return _bad_input(e)


def _bad_input(err: Exception) -> int:
    print(f"{PROG}: error: {_one_line(str(err))}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _one_line(text: str) -> str:
    return " ".join(text.split())


# ---- helpers shared by subcommands -------------------------------------------------------------
def _located(err: checks.FormatError, path: str) -> CliError:
    """A reader's error, with the file named: as the field when the whole file is bad."""
    message = str(err)[len(err.field) + 2:] if err.field else str(err)
    if not err.field or err.field == str(path):
        return CliError(str(path), message)
    return CliError(err.field, f"{message} (in {path})")


def load_instance(path: str) -> Instance:
    from .model.io import FormatError, load_instance as load

    try:
        return load(path)
    except FormatError as e:
        raise _located(e, path) from None


def load_result(instance: Instance, path: str, instance_path: str = "INSTANCE") -> Schedule:
    from .model.io import FormatError, InstanceMismatch
    from .model.io import load_result as load

    try:
        return load(instance, path)
    except InstanceMismatch as e:  # the pair is wrong, not a field: say so of the file
        raise CliError(str(path), f"this result belongs to another instance, not to "
                       f"{instance_path} (written for sha256 {e.theirs[:12]}..., "
                       f"{instance_path} is {e.ours[:12]}...)") from None
    except FormatError as e:
        raise _located(e, path) from None


def load_profile(path: str) -> SpeedProfile:
    from .costmodel.profile import load_profile as load
    from .model.io import FormatError

    try:
        return load(path)
    except FormatError as e:
        raise _located(e, path) from None


def check_size(estimate: WorkEstimate, max_work: float | None, where: str) -> None:
    """Refuse work beyond ``--max-work`` (field ``--max-work``) or the machine's memory
    (field ``where``: the instance)."""
    from .sizing import DEFAULT_MAX_WORK, TooMuchWork, check_work

    try:
        check_work(estimate, DEFAULT_MAX_WORK if max_work is None else max_work)
    except TooMuchWork as e:
        raise CliError("--max-work" if e.field == "max_work" else where, e.message) from None


def show_progress(args: argparse.Namespace) -> bool:
    """``--progress`` / ``--no-progress``; by default a bar when stderr is a terminal."""
    return sys.stderr.isatty() if args.progress is None else args.progress


MAX_WORK = arg("--max-work", type=work_limit, metavar="N",
               help="refuse instances whose estimated work T x (H+K) x I exceeds N "
                    "slot-server-jobs (default 1e10, minutes to an hour; inf: no limit)")
TASK = arg("--task", required=True, metavar="NAME", help="training task (see `automl tasks`)")
PROGRESS_BAR = arg("--progress", action="store_true", help="show a progress bar")
PROGRESS = arg("--progress", action=argparse.BooleanOptionalAction, default=None,
               help="progress bar on stderr (default: when stderr is a terminal)")


def write(path: str, save: Callable[..., None], *what: Any, field: str = "--out") -> None:
    """``save(*what, path)``; an unwritable destination is bad input on ``field``."""
    try:
        save(*what, path)
    except OSError as e:
        raise CliError(field, f"cannot write {path}: {e.strerror or e}") from None


def parse_option(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE parsed as JSON when it is JSON (``3``, ``true``, ``[1,2]``),
    else kept as a string (``backend=jax``). Hyphens in KEY become underscores."""
    key, eq, raw = text.partition("=")
    key = key.strip().replace("-", "_")
    if not eq or not key.isidentifier():
        raise CliError("--option", f"expected KEY=VALUE, got {text!r}")
    try:
        value = json.loads(raw, parse_constant=_not_finite)
    except ValueError:
        value = raw
    except _NonFinite:
        raise CliError(f"--option {key}", f"must be finite, got {raw!r}") from None
    return key, value


class _NonFinite(Exception):
    pass


def _not_finite(_: str) -> NoReturn:
    raise _NonFinite


def policy_options(args: argparse.Namespace) -> dict[str, tuple[Any, str]]:
    """Policy options from ``--backend``, ``--pricing`` and ``--option``: key -> (value, field)."""
    given = []
    if getattr(args, "backend", None) is not None:
        given.append(("backend", args.backend, "--backend"))
    if getattr(args, "pricing", None) is not None:
        given.append(("pricing", args.pricing, "--pricing"))
    for text in getattr(args, "option", ()):
        key, value = parse_option(text)
        given.append((key, value, f"--option {key}"))
    options: dict[str, tuple[Any, str]] = {}
    for key, value, field in given:
        if key in options:
            raise CliError(field, f"option {key!r} given twice (also by {options[key][1]})")
        options[key] = (value, field)
    return options


def make_policy(name: str, options: dict[str, tuple[Any, str]]) -> Policy:
    """``get_policy(name, **options)``; ``options`` maps key -> (value, CLI field that gave it).

    An option the policy does not take, an unknown policy, or a value the policy's constructor
    rejects (ValueError / TypeError) is bad input naming the field.
    """
    from .policies import UnknownPolicy, policy_factory

    try:
        factory = policy_factory(name)
    except UnknownPolicy as e:
        raise CliError("--policy", str(e)) from None
    return build_with_options(name, factory, options)


def build_with_options(name: str, factory: Callable[..., Any],
                       options: dict[str, tuple[Any, str]]) -> Any:
    """``factory(**options)`` for the policy ``name`` (a scheduling policy or a study
    controller); an option it does not take, or a value it rejects, is bad input naming the
    option's field."""
    from .model.io import FormatError
    from .policies import keyword_names

    accepted = keyword_names(factory)
    if accepted is not None:
        for key, (_, field) in options.items():
            if key not in accepted:
                takes = (f"it takes: {', '.join(sorted(accepted))}" if accepted
                         else "it takes no options")
                raise CliError(field, f"policy {name!r} does not accept option {key!r} ({takes})")
    try:
        return factory(**{k: v for k, (v, _) in options.items()})
    except (ValueError, TypeError) as e:
        given = options.get("pricing", (None,))[0]
        if isinstance(e, FormatError) and isinstance(given, str):  # the pricing file is bad
            raise _located(e, given) from None
        raise blame(e, {k: field for k, (_, field) in options.items()}, f"--policy {name}") from None


def run_options(args: argparse.Namespace, policy: Policy) -> dict[str, Any]:
    """``solve``'s run options from ``--time-limit`` / ``--progress``; one the policy does not
    take (``--time-limit`` on an online policy) is bad input naming the flag."""
    from .model.policy import ONLINE_NO_TIME_LIMIT, OnlinePolicy
    from .policies import run_option_names

    given = {"progress": ("--progress", show_progress(args), bool(args.progress))}
    if args.time_limit is not None:
        given["time_limit"] = ("--time-limit", args.time_limit, True)
    takes = run_option_names(policy)
    for key, (flag, _, explicit) in given.items():
        if takes is not None and key not in takes and explicit:
            why = (ONLINE_NO_TIME_LIMIT if isinstance(policy, OnlinePolicy)
                   else "it takes no such option")
            raise CliError(flag, f"policy {args.policy!r}: {why}")
    return {k: v for k, (_, v, _) in given.items() if takes is None or k in takes}


def look_up(registry: Callable[[str], Any], name: str, field: str) -> Any:
    """``registry(name)``; its ValueError ("<parameter>: unknown ...") is bad input on
    ``field``."""
    try:
        return registry(name)
    except ValueError as e:
        raise CliError(field, str(e).partition(": ")[2]) from None


def blame(err: Exception, fields: dict[str, str], default: str) -> CliError:
    """Library errors say ``"<parameter>: <message>"``: name the CLI field that set that
    parameter (``fields``: parameter -> field) when there is one, else ``default``."""
    name, sep, rest = str(err).partition(": ")
    if sep and name in fields:
        return CliError(fields[name], rest)
    return CliError(default, str(err))


# ---- subcommands -------------------------------------------------------------------------------
@command("generate", "generate a problem instance from a workload preset or a real trace",
         arg("--preset", metavar="NAME",
             help="workload preset (see `oasis-opt presets`), e.g. paper-sim"),
         arg("--trace", choices=("philly", "gavel"),
             help="build the instance from a real trace instead of --preset"),
         arg("--file", type=existing_file, metavar="TRACE",
             help="--trace gavel: a Gavel *.trace file (default: its dev trace, shipped)"),
         arg("--throughputs", type=existing_file, metavar="JSON",
             help="--trace gavel: Gavel's simulation_throughputs.json (default: the shipped "
                  "isolated throughputs)"),
         arg("--cluster", default="8:8:8", metavar="V:P:K",
             help="--trace gavel: V100:P100:K80 GPU counts (default 8:8:8)"),
         arg("--gpus-per-server", type=positive_int, default=4, metavar="N",
             help="--trace gavel: GPUs per server (default 4)"),
         arg("--start", default="2017-11-01", metavar="DATE",
             help="--trace: first submission day, YYYY-MM-DD[ HH:MM:SS]"),
         arg("--days", type=float, default=30.0, metavar="D", help="--trace: days of submissions"),
         arg("--slot-s", type=positive_seconds, metavar="S",
             help="slot length in seconds (--trace: philly 3600, gavel 360: Gavel's round; "
                  "presets that take it)"),
         arg("--trace-root", metavar="DIR", help="--trace: trace folder (default: packaged copy)"),
         arg("--jobs", type=positive_int, metavar="N", help="number of jobs (preset default)"),
         arg("--horizon", type=positive_int, metavar="T", help="slots 1..T (preset default)"),
         arg("--servers", type=positive_int, metavar="N",
             help="servers per the preset's rule (preset default)"),
         arg("--calibration", choices=("calibrated", "literal"),
             help="job-size calibration (ambiguity A2; preset default: calibrated)"),
         arg("--cluster-mix", metavar="TYPE[=SHARE]:...",
             help="paper-sim: worker servers of these accelerator types by share, e.g. "
                  "v100:p100:k80:cpu or v100=2:k80=1:cpu=1 (writes oasis-opt/instance@2)"),
         arg("--profile", action="append", default=[], metavar="PROFILE",
             help="speed profile (oasis-opt profile) whose measured speed sets the chunk times "
                  "(presets with real training tasks, e.g. testbed-real; repeatable)"),
         arg("--slowdown", type=positive_number, metavar="C",
             help="multiply the profiles' iteration times in chunk times by C (the correction "
                  "an execution report suggests; testbed-real)"),
         arg("--seed", type=non_negative_int, required=True, metavar="S", help="random seed"),
         MAX_WORK,
         arg("--out", required=True, metavar="FILE", help="instance JSON to write"))
def cmd_generate(args: argparse.Namespace) -> int:
    from .model.io import FormatError, save_instance
    from .workloads import PRESETS, generate

    if args.trace is not None:
        return _generate_trace(args)
    if args.preset is None:
        raise CliError("--preset", "required (or --trace)")
    if args.preset not in PRESETS:
        raise CliError("--preset", f"unknown preset {args.preset!r} "
                       f"(known: {', '.join(sorted(PRESETS))})")
    options = {} if args.calibration is None else {"calibration": args.calibration}
    if args.cluster_mix is not None:
        options["cluster_mix"] = args.cluster_mix
    if args.slot_s is not None:
        options["slot_s"] = args.slot_s
    if args.slowdown is not None:
        options["slowdown"] = args.slowdown
    if args.profile:
        options["profiles"] = [load_profile(path) for path in args.profile]
    try:
        inst = generate(args.preset, seed=args.seed, jobs=args.jobs, horizon=args.horizon,
                        servers=args.servers, **options)
    except FormatError:
        raise
    except (ValueError, TypeError) as e:
        given = {k: f"--{k.replace('_', '-')}" for k, v in vars(args).items()
                 if v is not None and k not in ("command", "func")}
        given["profiles"] = "--profile"
        raise blame(e, given, f"--preset {args.preset}") from None
    _check_generated(inst, args)
    write(args.out, save_instance, inst)
    types = f" ({', '.join(map(str, inst.types))})" if inst.typed else ""
    print(f"wrote {args.out}: preset {args.preset}, seed {args.seed}, {inst.I} jobs, "
          f"T={inst.horizon}, {inst.H} worker{types} + {inst.K} PS servers")
    return EXIT_OK


def _generate_trace(args: argparse.Namespace) -> int:
    from .model.io import FormatError, save_instance
    from .workloads.traces import philly_instance

    if args.preset is not None:
        raise CliError("--trace", "give either --preset or --trace")
    if args.profile or args.slowdown is not None:
        raise CliError("--profile" if args.profile else "--slowdown",
                       "a trace takes no speed profile")
    if args.trace == "gavel":
        return _generate_gavel(args)
    for name in ("file", "throughputs"):
        if getattr(args, name) is not None:
            raise CliError(f"--{name}", "only for --trace gavel")
    if args.slot_s is None:
        args.slot_s = 3600.0
    if not args.days > 0:
        raise CliError("--days", f"must be > 0, got {args.days}")
    try:
        inst = philly_instance(args.start, args.days, args.seed,
                               slot_s=3600.0 if args.slot_s is None else args.slot_s,
                               root=args.trace_root)
    except FormatError:
        raise
    except ValueError as e:
        raise CliError(f"--trace {args.trace}", str(e)) from None
    _check_generated(inst, args)
    write(args.out, save_instance, inst)
    print(f"wrote {args.out}: Philly trace from {args.start} for {args.days:g} days, {inst.I} jobs, "
          f"T={inst.horizon}, {inst.H} worker + {inst.K} PS servers")
    return EXIT_OK


def _generate_gavel(args: argparse.Namespace) -> int:
    from .model.io import FormatError, save_instance
    from .workloads.gavel import ROUND_S, gavel_files, gavel_instance

    shipped = gavel_files()  # the dev trace and its table, shipped with the package
    try:
        inst = gavel_instance(args.file or shipped["trace"],
                              args.throughputs or shipped["throughputs"], cluster=args.cluster,
                              gpus_per_server=args.gpus_per_server,
                              slot_s=ROUND_S if args.slot_s is None else args.slot_s,
                              seed=args.seed)
    except FormatError:
        raise
    except ValueError as e:
        raise blame(e, {"cluster": "--cluster", "gpus_per_server": "--gpus-per-server",
                        "slot_s": "--slot-s"}, "--trace gavel") from None
    _check_generated(inst, args)
    write(args.out, save_instance, inst)
    print(f"wrote {args.out}: Gavel trace {inst.meta['trace']}, {inst.I} jobs, "
          f"T={inst.horizon} slots of {inst.meta['slot_s']:g} s, {inst.H} worker servers "
          f"({', '.join(map(str, inst.types))}) + {inst.K} PS")
    return EXIT_OK


def _check_generated(inst: Instance, args: argparse.Namespace) -> None:
    """Refuse to write an instance no policy could solve within ``--max-work``."""
    from .sizing import estimate_work

    check_size(estimate_work(inst), args.max_work, "--horizon")


@command("solve", "run a policy on an instance, validate the schedule and write the result",
         arg("instance", metavar="INSTANCE", help="instance JSON"),
         arg("--policy", required=True, metavar="NAME", help="policy (see `oasis-opt policies`)"),
         arg("--time-limit", type=positive_seconds, metavar="S",
             help="time limit in seconds for the whole command, reading the instance included "
                  "(offline solvers)"),
         arg("--backend", choices=("numpy", "jax", "reference"),
             help="kernel backend (policy option backend=...)"),
         arg("--pricing", type=existing_file, metavar="FILE",
             help="pricing parameters file (policy option pricing=...)"),
         arg("--option", action="append", default=[], metavar="KEY=VALUE",
             help="policy option, VALUE parsed as JSON when possible (repeatable)"),
         PROGRESS, MAX_WORK,
         arg("--out", required=True, metavar="RESULT", help="result JSON to write"))
def cmd_solve(args: argparse.Namespace) -> int:
    from .model.io import FormatError, save_result
    from .model.validate import validate
    from .policies import record_options
    from .sizing import estimate_work

    inst = load_instance(args.instance)
    options = policy_options(args)
    policy = make_policy(args.policy, options)
    run = run_options(args, policy)
    check_size(estimate_work(inst, args.policy), args.max_work, args.instance)
    t0 = time.perf_counter()
    if "time_limit" in run:  # what is left of it: the limit counts from the command's start
        run["time_limit"] = max((1 - WRITE_RESERVE) * args.time_limit - (t0 - args.started),
                                MIN_TIME_LEFT)
    try:
        sched = policy.solve(inst, **run)
    except FormatError:
        raise
    except ValueError as e:  # the library's "<parameter>: <message>" for this instance (an
        # offline MILP above its memory budget included)
        raise blame(e, {k: field for k, (_, field) in options.items()},
                    f"--policy {args.policy}") from None
    elapsed = time.perf_counter() - t0
    sched = record_options(sched, {k: v for k, (v, _) in options.items()})
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
        from .offline.solver import describe

        return f"{line}; solver: {describe(sched.stats)}; schedule {validity}, {seconds:.2f} s"
    return f"{line}, {validity}, {seconds:.2f} s"


def quantile(text: str) -> float:
    """``--quantile``: a number in [0, 1]."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}") from None
    if not 0 <= v <= 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {text!r}")
    return v


# above this alpha (U/L > e^50) the plug-in floor is far below every price that matters
PLUGIN_ALPHA_WARNING = 50.0
_SEARCH_ONLY = (("grid", "--grid"), ("backend", "--backend"), ("report", "--report"),
                ("batch", "--batch/--no-batch"))


@command("estimate-pricing", "estimate OASiS's U and L from past instances (paper p.6) and "
         "write a pricing file for `solve --pricing`",
         arg("history", nargs="+", metavar="HISTORY",
             help="instance JSON files of past workload (not the instances to be evaluated)"),
         arg("--method", choices=("plugin", "search"), default="plugin",
             help="plugin (default): eqs. (23)-(26) applied to the history's jobs, L1 and L2 "
                  "from a low percentile of f(T-a)/(W sum_r w) on capacity-normalised demands; "
                  "the paper's definitions, no OASiS runs, nothing tuned on utility. search: "
                  "tuning, the floor L (L1 = L2) of --grid under which OASiS earned the most "
                  "on the history"),
         arg("--quantile", type=quantile, metavar="Q",
             help="plugin: the percentile of the per-job terms and sizes, as a fraction "
                  "(default 0.1)"),
         arg("--grid", type=floor_grid, metavar="L1,L2,...",
             help="search: floor prices L to try, comma-separated (default: 1e-7 to 1 in half "
                  "decades)"),
         arg("--backend", choices=("numpy", "jax", "reference"),
             help="search: OASiS kernel backend for the calibration runs (default numpy)"),
         arg("--batch", action=argparse.BooleanOptionalAction, default=None,
             help="search: run the whole grid on each history instance at once (default "
                  "with the numpy backend, which it needs; the same table and L as "
                  "--no-batch, one floor at a time)"),
         PROGRESS, MAX_WORK,
         arg("--report", metavar="FILE",
             help="search: also write the calibration table (oasis-opt/floor-calibration@1 "
                  "JSON)"),
         arg("--out", required=True, metavar="PRICING", help="pricing JSON to write"))
def cmd_estimate_pricing(args: argparse.Namespace) -> int:
    from .online.pricing import save_pricing

    history = [load_instance(path) for path in args.history]
    for path, inst in zip(args.history[1:], history[1:]):
        # one pricing file prices every history run: the resource names must agree
        if tuple(inst.resources) != tuple(history[0].resources):
            raise CliError(path, f"resources {', '.join(inst.resources)} differ from "
                           f"{args.history[0]}'s ({', '.join(history[0].resources)})")
    if args.method == "plugin":
        for attr, flag in _SEARCH_ONLY:
            if getattr(args, attr) is not None:
                raise CliError(flag, "applies to --method search only")
        from .online.plugin import DEFAULT_QUANTILE, plugin_pricing

        try:
            pricing = plugin_pricing(history, DEFAULT_QUANTILE if args.quantile is None
                                     else args.quantile)
        except ValueError as e:
            raise blame(e, {"history": "HISTORY", "quantile": "--quantile"}, "HISTORY") from None
        write(args.out, save_pricing, pricing)
        _print_plugin(pricing, history, args.out)
        return EXIT_OK
    if args.quantile is not None:
        raise CliError("--quantile", "applies to --method plugin only")
    return _estimate_by_search(args, history)


def _print_plugin(pricing: dict, history: list, out: str) -> None:
    from .sim.report import format_table

    d = pricing.details  # type: ignore[attr-defined]
    rows = [[pool, f"{d[pool]['L_normalised']:.4g}", f"{d[pool].get('eta', math.nan):.4g}",
             ", ".join(f"{r}={v:.3g}" for r, v in d[pool]["L"].items())]
            for pool in ("worker", "ps")]
    print(format_table(["pool", "L (normalised)", "eta", "L per unit"], rows))
    jobs = sum(inst.I for inst in history)
    print(f"plug-in U and L (quantile {d['quantile']:g}) from {jobs} history jobs, alpha = "
          f"{d['alpha']:.4g}, 2 alpha = {2 * d['alpha']:.4g} -> {out}")
    if d["alpha"] > PLUGIN_ALPHA_WARNING:
        print(f"{PROG}: warning: alpha = {d['alpha']:.0f}: the floor is tiny against U (most "
              "history jobs are worth almost nothing at the horizon), so prices stay near 0 "
              "until a server is almost full; --method search tunes the floor instead",
              file=sys.stderr)


def _estimate_by_search(args: argparse.Namespace, history: list) -> int:
    from .model.io import write_json_atomic
    from .online.estimate import DEFAULT_FLOOR_GRID, estimate_pricing
    from .online.pricing import save_pricing
    from .sim.report import format_table
    from .sizing import estimate_work

    grid = DEFAULT_FLOOR_GRID if args.grid is None else args.grid
    check_size(estimate_work(history, "oasis", runs=len(grid)), args.max_work, "HISTORY")
    bar = None
    if show_progress(args):
        from tqdm import tqdm

        bar = tqdm(total=len(grid) * len(history), desc="floor calibration", unit="run",
                   leave=False)
    try:
        pricing = estimate_pricing(
            history, grid, backend=args.backend or "numpy", batch=args.batch,
            progress=None if bar is None else lambda done, total: bar.update(done - bar.n))
    except ValueError as e:
        raise blame(e, {"history": "HISTORY", "grid": "--grid", "batch": "--batch"},
                    "HISTORY") from None
    finally:
        if bar is not None:
            bar.close()

    calibration = pricing.calibration
    write(args.out, save_pricing, pricing)
    if args.report is not None:
        report = {"format": "oasis-opt/floor-calibration@1", "history": list(args.history),
                  **calibration.to_dict()}
        write(args.report, lambda doc, path: write_json_atomic(path, doc), report,
              field="--report")
    rows = [[f"{L:.3g}", mean, "<- chosen" if n == calibration.index else ""]
            for n, (L, mean) in enumerate(zip(calibration.grid, calibration.mean))]
    print(format_table(["L", "mean utility", ""], rows))
    jobs = sum(inst.I for inst in history)
    print(f"chosen L = {calibration.chosen:.6g} (U from {jobs} history jobs) -> {args.out}")
    if calibration.at_edge:
        print(f"{PROG}: warning: the best floor is an end of the grid; widen --grid",
              file=sys.stderr)
    return EXIT_OK


@command("ratio", "the empirical competitive ratio OPT / OASiS per instance, beside alpha and "
         "Theorem 4's bound 2 alpha, and the load (oasis-opt/ratio@1 JSON and a table)",
         arg("instances", nargs="+", metavar="INSTANCE", help="instance JSON files"),
         arg("--pricing", type=existing_file, metavar="FILE",
             help="OASiS's pricing file (default: the oracle constants of each instance)"),
         arg("--time-limit", type=positive_seconds, metavar="S",
             help="seconds per solver run: the MILP, then (if it is not proven optimal in S) "
                  "column generation for the bracket (default: until proven)"),
         arg("--opt", choices=("auto", "milp", "bracket"), default="auto",
             help="how OPT is found: auto (MILP, bracket if not proven), milp, bracket (column "
                  "generation only)"),
         arg("--out", required=True, metavar="FILE", help="ratio report JSON to write"))
def cmd_ratio(args: argparse.Namespace) -> int:
    from .experiments.ratio import ratio_report, ratio_row, table
    from .model.io import FormatError, read_json, write_json_atomic
    from .online.pricing import parse_pricing, resolve_pricing
    from .sim.report import format_table

    instances = [load_instance(path) for path in args.instances]
    pricing: Any = "oracle"
    if args.pricing is not None:
        try:
            doc = read_json(args.pricing)
            parse_pricing(doc)
        except FormatError as e:
            raise _located(e, args.pricing) from None
        for path, inst in zip(args.instances, instances):
            try:
                resolve_pricing(doc, inst)
            except FormatError as e:
                raise CliError("--pricing", f"{e} (for {path})") from None
        pricing = args.pricing
    rows = []
    for path, inst in zip(args.instances, instances):
        try:
            rows.append(ratio_row(inst, pricing, time_limit=args.time_limit, opt=args.opt,
                                  name=str(path)))
        except ValueError as e:  # e.g. the oracle's L is undefined for this instance
            raise CliError(str(path), str(e)) from None
    report = ratio_report(rows, "oracle" if args.pricing is None else str(args.pricing),
                          args.time_limit)
    write(args.out, lambda doc, out: write_json_atomic(out, doc), report)
    head, body = table(rows)
    print(format_table(head, body))
    if any(r["opt"]["method"] == "bracket" for r in rows):
        print("* OPT not proven: the bracket [lower, upper] and the ratio's interval")
    print(f"-> {args.out}")
    return EXIT_OK


@command("validate", "check a result against its instance (constraints (2)-(10), utilities)",
         arg("instance", metavar="INSTANCE", help="instance JSON"),
         arg("result", metavar="RESULT", help="result JSON"))
def cmd_validate(args: argparse.Namespace) -> int:
    from .model.validate import validate

    inst = load_instance(args.instance)
    report = validate(inst, load_result(inst, args.result, args.instance))
    print(report)
    return EXIT_OK if report.ok else EXIT_INVALID


@command("policies", "list the registered policies")
def cmd_policies(args: argparse.Namespace) -> int:
    from .policies import available_policies

    names = available_policies()
    width = max(map(len, names), default=0)
    for name, summary in names.items():
        print(f"{name.ljust(width)}  {summary}")
    return EXIT_OK


@command("presets", "list the workload presets of `generate`")
def cmd_presets(args: argparse.Namespace) -> int:
    from .workloads import PRESETS

    width = max(map(len, PRESETS), default=0)
    for name, description in PRESETS.items():
        print(f"{name.ljust(width)}  {description}")
    return EXIT_OK


@command("summary", "compare results on one instance: policy and options, utility, admissions, "
         "validity, solver status, timeliness (exit 1 when one is invalid)",
         arg("instance", metavar="INSTANCE", help="instance JSON"),
         arg("results", nargs="+", metavar="RESULT", help="result JSON files"))
def cmd_summary(args: argparse.Namespace) -> int:
    from .sim.metrics import compare

    inst = load_instance(args.instance)
    schedules = [load_result(inst, path, args.instance) for path in args.results]
    table = compare(inst, schedules, [Path(path).name for path in args.results])
    print(table)
    return EXIT_OK if table.ok else EXIT_INVALID


@command("reproduce", "run the paper's experiments and draw its figures beside the paper's values",
         arg("figures", nargs="*", default=["all"], metavar="FIGURE",
             help="fig3, fig4, fig5, fig6, testbed or all (default: all, the paper's "
                  "figures); by name only: automl (early stopping on real learning curves), "
                  "testbed-real (trains for real for minutes), preemption (priority preemption "
                  "with degradation), hetero (Gavel's policies), ratio (OPT / OASiS vs size, "
                  "load and 2 alpha; worst-case search)"),
         arg("--quick", action="store_true",
             help="small variant of each figure (all of them in a minute or two)"),
         arg("--workers", type=positive_int, metavar="N",
             help="parallel runs: 1 = in this process without Ray; N = a local Ray with N CPUs "
                  "(default: all CPUs)"),
         arg("--address", metavar="ADDR", help="join this running Ray cluster instead"),
         arg("--results", default="results", metavar="DIR",
             help="one JSON per run; runs stored there are reused, so a killed sweep resumes "
                  "(default: results)"),
         arg("--out", metavar="DIR",
             help="figures (PNG, PDF, markdown) go here (default: paper_figs, or "
                  "paper_figs/quick with --quick)"))
def cmd_reproduce(args: argparse.Namespace) -> int:
    from .experiments.reproduce import figure_names, reproduce
    from .experiments.runner import SweepError

    try:
        names = figure_names(args.figures)
    except ValueError as e:
        raise CliError("FIGURE", str(e).partition(": ")[2]) from None

    # a `kill`/`timeout` ends the sweep like Ctrl-C: Ray shut down, every finished run stored
    try:
        with sigterm_as_interrupt():
            written = reproduce(names, quick=args.quick, workers=args.workers,
                                address=args.address, results=args.results, out=args.out)
    except SweepError as e:  # runs failed (their schedules are never written): a failure, not 1
        print(f"{PROG}: failure: {e}\n(tracebacks in {Path(args.results) / 'failed'})",
              file=sys.stderr)
        return EXIT_FAILURE
    for name, paths in written.items():
        print(f"{name}: {', '.join(str(p) for p in paths)}")
    return EXIT_OK


@command("automl tasks", "list the training tasks and their hyperparameter search spaces")
def cmd_automl_tasks(args: argparse.Namespace) -> int:
    from .automl.tasks import TASKS

    for task in TASKS.values():
        print(f"{task.name}: {task.description}")
        for name, space in task.space.describe().items():
            print(f"  {name}: {space}")
    return EXIT_OK


@command("automl curves", "train random-search trials of a task for real and write their "
         "learning curves as CSV (an existing file is extended)",
         TASK,
         arg("--trials", type=positive_int, required=True, metavar="N",
             help="trials in the study; a file holding fewer of them gets the missing ones"),
         arg("--epochs", type=positive_int, required=True, metavar="E", help="epochs per trial"),
         arg("--seed", type=non_negative_int, default=0, metavar="S",
             help="study seed: data split, configurations, weights (default 0)"),
         arg("--study", metavar="NAME", help="study name in the CSV (default: the task's name)"),
         PROGRESS_BAR,
         arg("--out", required=True, metavar="FILE", help="curves CSV to write or extend"))
def cmd_automl_curves(args: argparse.Namespace) -> int:
    from .automl.study import generate_curves
    from .automl.tasks import get_task
    from .model.io import FormatError

    task = look_up(get_task, args.task, "--task")
    try:
        run = generate_curves(task, args.trials, args.epochs, args.seed, args.out,
                              study=args.study, progress=args.progress)
    except FormatError as e:
        raise _located(e, args.out) from None
    except ValueError as e:
        raise blame(e, {"trials": "--trials", "epochs": "--epochs", "seed": "--seed",
                        "study": "--study", "out": "--out"}, "--out") from None
    except OSError as e:
        raise CliError("--out", f"cannot write {args.out}: {e.strerror or e}") from None
    print(f"{run.study}: {run.existing} trials were in {args.out}, {run.added} trained now "
          f"({run.seconds:.1f} s) -> {args.out}")
    return EXIT_OK


@command("automl replay", "replay a study of all trials of a curves CSV under an early-stopping "
         "policy and write what it found and spent as JSON",
         arg("curves", metavar="CURVES",
             help="curves CSV (one study, or name it with --study), or the name of a shipped "
                  "curve set: digits-mlp, breast-cancer-mlp, digits-cnn"),
         arg("--policy", required=True, metavar="NAME",
             help="automl-thesis, optuna-median, optuna-sh, optuna-hyperband, asha or no-stop"),
         arg("--budget", type=non_negative_seconds, metavar="SECONDS",
             help="GPU-seconds the study may spend (recorded epoch seconds summed over "
                  "workers; default: no limit)"),
         arg("--workers", type=positive_int, default=4, metavar="N",
             help="parallel workers: the study's resource cap (default 4)"),
         arg("--seed", type=non_negative_int, default=0, metavar="S",
             help="seed of the order the study visits the trials in (default 0)"),
         arg("--study", metavar="NAME", help="the study to replay when CURVES holds several"),
         arg("--option", action="append", default=[], metavar="KEY=VALUE",
             help="a policy option (repeatable), e.g. delta=0.1 for automl-thesis"),
         arg("--out", required=True, metavar="FILE", help="result JSON to write"))
def cmd_automl_replay(args: argparse.Namespace) -> int:
    from .automl.controllers import controller_factory
    from .automl.curves import read_curves, shipped_curves
    from .automl.replay import one_study, replay
    from .model.io import FormatError

    factory = look_up(controller_factory, args.policy, "--policy")
    controller = build_with_options(args.policy, factory, policy_options(args))
    path = Path(args.curves)
    if not path.is_file():
        shipped = shipped_curves()
        if args.curves not in shipped:
            raise CliError("CURVES", f"no such file, nor a shipped curve set: {args.curves!r} "
                           f"(shipped: {', '.join(shipped)})")
        path = shipped[args.curves]
    try:
        curves = one_study(read_curves(path), args.study)
    except FormatError as e:
        raise _located(e, args.curves) from None
    except ValueError as e:
        raise blame(e, {"study": "--study"}, "CURVES") from None
    result = replay(curves, controller, workers=args.workers, budget=args.budget, seed=args.seed)
    doc = {**result.to_json(), "curves": str(args.curves)}
    def save(d: dict, path: str) -> None:
        Path(path).write_text(json.dumps(d, indent=1) + "\n")

    write(args.out, save, doc)
    best = "none" if result.best is None else f"{result.best:.4f}"
    print(f"{result.policy} on {result.study}: best final val_accuracy {best} "
          f"({doc['completed']} of {len(result.trials)} trials completed), "
          f"{result.gpu_seconds:.1f} of {result.total_gpu_seconds:.1f} GPU-seconds -> {args.out}")
    return EXIT_OK


def positive_int_list(text: str) -> tuple[int, ...]:
    """``1,2,4``: comma-separated integers >= 1."""
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") \
            from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected integers >= 1, got {text!r}")
    return values


def json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


@command("execute", "run a schedule for real: parameter-server training on Ray, slot by slot "
         "in wall-clock time, and report real against planned progress",
         arg("instance", metavar="INSTANCE", help="instance JSON (every job the schedule runs "
             "names a training task)"),
         arg("result", metavar="RESULT", help="result JSON (the schedule)"),
         arg("--slot-s", type=positive_seconds, required=True, metavar="S",
             help="wall-clock seconds per slot"),
         arg("--address", metavar="ADDR", help="join this running Ray cluster (its nodes "
             "provide the resources server:<id>; default: a local Ray)"),
         PROGRESS,
         arg("--out", required=True, metavar="REPORT",
             help="execution report JSON to write (oasis-opt/execution@1)"))
def cmd_execute(args: argparse.Namespace) -> int:
    from .runtime.executor import ExecutionError, execute
    from .runtime.plan import ExecutionRefused
    from .runtime.report import save_report

    inst = load_instance(args.instance)
    sched = load_result(inst, args.result, args.instance)
    bar = None
    last = int(sched.allocations.slot.max()) if len(sched.allocations) else 0

    def on_slot(record: dict) -> None:
        nonlocal bar
        if bar is None:
            from tqdm import tqdm

            bar = tqdm(total=last, desc=f"execute {sched.policy}", unit="slot")
        bar.update(1)
        bar.set_postfix_str(f"jobs {record['jobs']}, workers {record['workers']}, PS "
                            f"{record['ps']}, overrun {record['overrun_s']:.2f} s")

    if show_progress(args):
        print(f"{PROG}: starting Ray and warming the containers ...", file=sys.stderr)
    try:
        report = execute(inst, sched, slot_seconds=args.slot_s, address=args.address,
                         on_slot=on_slot if show_progress(args) else None)
    except ExecutionRefused as e:
        raise (CliError(args.result, e.message) if e.field == "schedule"
               else _located(e, args.instance)) from None
    except ExecutionError as e:
        print(f"{PROG}: failure: {_one_line(str(e))}", file=sys.stderr)
        return EXIT_FAILURE
    finally:
        if bar is not None:
            bar.close()
    write(args.out, save_report, report)
    print(report.summary())
    print(f"-> {args.out}")
    return EXIT_OK


@command("profile", "time real synchronous PS training of a task at several worker and PS "
         "counts and fit the Optimus speed model (a profile for `generate --profile`)",
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
         PROGRESS_BAR,
         arg("--out", required=True, metavar="PROFILE", help="profile JSON to write"))
def cmd_profile(args: argparse.Namespace) -> int:
    from .automl.tasks import get_task
    from .costmodel.profile import save_profile
    from .runtime.executor import ExecutionError
    from .runtime.profile import DEFAULT_CONFIGS, profile_points, profile_task

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
    if args.progress:
        from tqdm import tqdm

        bar = tqdm(total=len(points) * (1 + args.repeats), desc=f"profile {task.name}",
                   unit="slot")
    try:
        prof = profile_task({"name": task.name, "config": config, "seed": args.seed},
                            args.workers, args.ps, iterations=args.iterations,
                            repeats=args.repeats, address=args.address,
                            progress=None if bar is None else lambda d, n: bar.update(d - bar.n))
    except ExecutionError as e:
        print(f"{PROG}: failure: {_one_line(str(e))}", file=sys.stderr)
        return EXIT_FAILURE
    finally:
        if bar is not None:
            bar.close()
    write(args.out, save_profile, prof)
    from statistics import median

    from .sim.report import format_table

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

# ---- the scheduling service -------------------------------------------------------------------
TOKEN = arg("--token", metavar="T", help="bearer token for submitting and cancelling (default: "
            "the environment variable OASIS_OPT_TOKEN; none: no token)")


def _token(args: argparse.Namespace) -> str | None:
    from .service.app import TOKEN_ENV

    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV)
    if token is not None and not token.strip():
        raise CliError("--token", "must not be empty")
    return token


@command("serve", "run the online scheduling service: jobs submitted over HTTP are decided "
         "slot by slot in wall-clock time by an online policy and run on Ray (dashboard at /)",
         arg("--cluster", required=True, metavar="SPEC",
             help="instance JSON whose servers, resources, horizon and topology are the "
                  "cluster (its jobs are not submitted)"),
         arg("--policy", default="oasis", metavar="NAME",
             help="online policy (see `oasis-opt policies`; default oasis)"),
         arg("--pricing", metavar="F",
             help="OASiS's pricing file (oasis-opt estimate-pricing); required by oasis, whose "
                  "oracle pricing needs every job in advance"),
         arg("--option", action="append", default=[], metavar="KEY=VALUE",
             help="another policy option (repeatable)"),
         arg("--slot-s", type=positive_seconds, required=True, metavar="S",
             help="wall-clock seconds per slot"),
         arg("--address", metavar="ADDR", help="join this running Ray cluster (default: a "
             "local Ray)"),
         arg("--no-execute", action="store_true",
             help="decide and account progress as the simulator does, run nothing (no Ray)"),
         arg("--state", metavar="DB", help="SQLite state file: a service restarted with it "
             "goes on where it stopped (default: in memory, lost at exit)"),
         arg("--host", default="127.0.0.1", metavar="HOST",
             help="address to listen on (default 127.0.0.1: this machine only)"),
         arg("--port", type=non_negative_int, default=8000, metavar="P",
             help="port (default 8000)"),
         TOKEN)
def cmd_serve(args: argparse.Namespace) -> int:
    from ._extras import require
    from .model.io import FormatError
    from .model.policy import OnlinePolicy
    from .service.app import create_app
    from .service.runner import ServiceRunner
    from .service.scheduler import ReplayMismatch, Scheduler
    from .service.store import StateMismatch, Store

    require("fastapi", extra="service", feature="the scheduling service")
    uvicorn = require("uvicorn", extra="service", feature="the scheduling service")
    if not args.no_execute:  # say it now, not when the first slot runs
        require("ray", extra="ray", feature="running jobs (serve without --no-execute)")
        require("optax", extra="automl", feature="running jobs (serve without --no-execute)")
    token = _token(args)
    cluster = load_instance(args.cluster)
    options = policy_options(args)
    if args.policy in ("oasis", "oasis-topo") and "pricing" not in options:
        raise CliError("--pricing", f"required by policy {args.policy!r}: the service does not "
                       "know its jobs in advance, which oracle pricing needs (`oasis-opt "
                       "estimate-pricing` makes a pricing file from past instances)")
    def fresh() -> OnlinePolicy:
        policy = make_policy(args.policy, options)
        if not isinstance(policy, OnlinePolicy):
            raise CliError("--policy", f"{args.policy!r} is not an online policy (it needs every "
                           "job in advance)")
        return policy

    fresh()  # checks the policy and its options before anything starts
    plain = {k: v for k, (v, _) in options.items()}
    try:
        store = Store(args.state or ":memory:")
    except Exception as e:  # noqa: BLE001 - sqlite3 errors: not a database, unwritable ...
        raise CliError("--state", f"cannot open {args.state}: {e}") from None
    try:
        scheduler = Scheduler(cluster, fresh, store=store,
                              policy=args.policy, options=plain,
                              executes=not args.no_execute)
    except StateMismatch as e:
        raise CliError(e.field, e.message) from None
    except (FormatError, ReplayMismatch) as e:
        raise CliError("--state", f"cannot resume {args.state}: {e}") from None
    runner = ServiceRunner(scheduler, args.slot_s, execute=not args.no_execute,
                           address=args.address)
    app = create_app(scheduler, runner, token)
    resumed = (f", resuming {args.state} at slot {scheduler.finished_slots + 1}"
               if scheduler.resumed else "")
    print(f"{PROG}: serving {args.policy} on http://{args.host}:{args.port} (dashboard /, API "
          f"/docs){resumed}", file=sys.stderr, flush=True)
    # SIGTERM (`kill`, docker stop) shuts down like Ctrl-C: uvicorn re-raises the signal it
    # caught once it has stopped, and with the default handler the process would die before
    # the slot runner stops, leaving its Ray processes behind
    with sigterm_as_interrupt():
        runner.start()
        try:
            uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
        finally:
            runner.stop()
            store.close()
    return EXIT_OK


def _service(method: str, url: str, path: str, **kwargs: Any) -> Any:
    from .service.client import ServiceError, request

    try:
        return request(method, url, path, **kwargs)
    except ServiceError as e:
        raise CliError(e.field, e.message) from None


@command("submit", "submit a job (an instance-format job with its task, JSON) to a running "
         "service",
         arg("job", metavar="JOB", type=existing_file, help="job JSON"),
         arg("--url", default="http://127.0.0.1:8000", metavar="URL",
             help="the service (default http://127.0.0.1:8000)"),
         TOKEN)
def cmd_submit(args: argparse.Namespace) -> int:
    from .model.io import FormatError, read_json

    try:
        doc = read_json(args.job)
    except FormatError as e:
        raise _located(e, args.job) from None
    try:
        view = _service("POST", args.url, "/jobs", json=doc, token=_token(args))
    except CliError as e:
        if e.field == "--url" or e.field.startswith("authorization"):
            raise
        raise CliError(e.field, f"{e.message} (in {args.job})") from None
    print(f"{view['id']}: submitted, arrives in slot {view['arrival']}")
    return EXIT_OK


@command("status", "the jobs and the cluster of a running service, as a table",
         arg("--url", default="http://127.0.0.1:8000", metavar="URL",
             help="the service (default http://127.0.0.1:8000)"),
         arg("--json", action="store_true", help="print the service's summary and jobs as JSON"))
def cmd_status(args: argparse.Namespace) -> int:
    from .sim.report import format_table

    summary = _service("GET", args.url, "/summary")
    jobs = _service("GET", args.url, "/jobs")
    if args.json:
        print(json.dumps({"summary": summary, "jobs": jobs}, indent=1))
        return EXIT_OK
    print(f"slot {summary['slot']} of {summary['horizon']}: {summary['jobs']} jobs, "
          f"{summary['admitted']} admitted, {summary['rejected']} rejected, {summary['completed']} "
          f"completed, utility {summary['utility']:.3f}")

    def cell(v: Any, digits: int = 2) -> str:
        return "" if v is None else f"{v:.{digits}f}" if isinstance(v, float) else str(v)

    rows = [[j["id"], j["state"], j["arrival"], f"{j['now']['workers']}/{j['now']['ps']}",
             f"{100 * j['progress']:.0f} %", cell(j["predicted_completion"]),
             cell(j["completion"]), cell(j["utility"]),
             cell((j["real"] or {}).get("val_accuracy"), 3)] for j in jobs]
    print(format_table(["job", "state", "arrival", "workers/PS", "progress", "predicted",
                        "completion", "utility", "accuracy"], rows))
    return EXIT_OK


@command("case-study", "the computer-vision case study: start the service, run a "
         "hyperparameter search (AutoML early stopping) and training jobs on the digits images, "
         "export the best model and measure it on held-out images",
         arg("--out", default="out/case-study", metavar="DIR",
             help="directory of the outputs: summary.json, model.npz, state.db, serve.log ... "
                  "(default out/case-study)"),
         arg("--trials", type=positive_int, default=8, metavar="N",
             help="trials of the search (default 8)"),
         arg("--concurrent", type=positive_int, default=2, metavar="K",
             help="trials running at once, the study's resource cap (default 2)"),
         arg("--jobs", type=non_negative_int, default=2, metavar="J",
             help="training jobs of other users, at most 4 (default 2)"),
         arg("--epochs", type=positive_int, default=6, metavar="E",
             help="epochs of every job (default 6, at least 2)"),
         arg("--slot-s", type=positive_seconds, default=2.0, metavar="S",
             help="wall-clock seconds per slot (default 2)"),
         arg("--horizon", type=positive_int, default=80, metavar="T",
             help="the service's slots (default 80)"),
         arg("--policy", default="oasis", metavar="NAME",
             help="the service's online policy (default oasis, priced by the plug-in estimate "
                  "on a past study)"),
         arg("--controller", default="automl-thesis", metavar="NAME",
             help="the AutoML controller: automl-thesis (default), optuna-median, optuna-sh, "
                  "optuna-hyperband or no-stop"),
         arg("--option", action="append", default=[], metavar="KEY=VALUE",
             help="a controller option (repeatable), e.g. delta=0.1 for automl-thesis"),
         arg("--seed", type=non_negative_int, default=0, metavar="S",
             help="the search's configurations and the data split (default 0)"),
         arg("--port", type=non_negative_int, default=0, metavar="P",
             help="the service's port (default 0: a free one)"),
         arg("--screenshot", metavar="PNG",
             help="a screenshot of the dashboard while the jobs run (headless Chromium)"),
         PROGRESS)
def cmd_case_study(args: argparse.Namespace) -> int:
    from ._extras import require

    for module, extra in (("fastapi", "service"), ("uvicorn", "service"), ("httpx", "service"),
                          ("ray", "ray"), ("optax", "automl"), ("optuna", "automl")):
        require(module, extra=extra, feature="the case study")
    from .automl.controllers import controller_factory
    from .service.case_study import CaseStudy, format_summary, run_case_study

    from .model.policy import OnlinePolicy

    options = policy_options(args)
    factory = look_up(controller_factory, args.controller, "--controller")
    build_with_options(args.controller, factory, options)  # the options, checked
    if not isinstance(make_policy(args.policy, {}), OnlinePolicy):
        raise CliError("--policy", f"{args.policy!r} is not an online policy (it needs every "
                       "job in advance)")
    try:
        settings = CaseStudy(trials=args.trials, concurrent=args.concurrent, jobs=args.jobs,
                             epochs=args.epochs, slot_s=args.slot_s, horizon=args.horizon,
                             policy=args.policy, controller=args.controller,
                             controller_options={k: v for k, (v, _) in options.items()},
                             seed=args.seed)
    except ValueError as e:
        raise blame(e, {"trials": "--trials", "concurrent": "--concurrent", "jobs": "--jobs",
                        "epochs": "--epochs", "slot_s": "--slot-s", "horizon": "--horizon",
                        "controller": "--controller", "controller_options": "--option",
                        "seed": "--seed"}, "--option") from None
    try:
        summary = run_case_study(settings, args.out, port=args.port or None,
                                 screenshot=args.screenshot, progress=show_progress(args))
    except ValueError as e:
        if str(e).startswith("screenshot: "):
            raise CliError("--screenshot", str(e).partition(": ")[2]) from None
        raise
    except RuntimeError as e:
        print(f"{PROG}: failure: {_one_line(str(e))}", file=sys.stderr)
        return EXIT_FAILURE
    print(format_summary(summary))
    return EXIT_OK if summary["validation"]["ok"] else EXIT_FAILURE


@command("predict", "predict the classes of images with an exported model (the case study's "
         "model.npz) and, given their labels, print the accuracy",
         arg("model", metavar="MODEL", type=existing_file, help="model file (.npz)"),
         arg("images", metavar="IMAGES", type=existing_file,
             help="raw images as a NumPy .npy array, one row per image (digits: 64 pixels in "
                  "0..16, flat or 8x8)"),
         arg("--labels", type=existing_file, metavar="LABELS",
             help="their labels (.npy): print the accuracy instead of the predictions"),
         arg("--out", metavar="JSON", help="write the predictions as JSON"))
def cmd_predict(args: argparse.Namespace) -> int:
    import numpy as np

    from .automl.export import load_model
    from .model.io import FormatError

    try:
        model = load_model(args.model)
    except FormatError as e:
        raise _located(e, args.model) from None

    def array(path: str, field: str) -> Any:
        try:
            return np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise CliError(field, f"not a NumPy .npy array: {path} ({_one_line(str(e))})") \
                from None

    images = array(args.images, "IMAGES")
    try:
        predicted = model.predict(images)
        labels = None if args.labels is None else array(args.labels, "--labels")
        if labels is not None:
            accuracy = model.accuracy(images, labels)
    except ValueError as e:
        raise blame(e, {"images": "IMAGES", "labels": "--labels"}, "IMAGES") from None
    if args.out:
        def save(doc: dict, path: str) -> None:
            Path(path).write_text(json.dumps(doc) + "\n")

        write(args.out, save, {"model": args.model, "predictions": predicted.tolist()})
    if labels is not None:
        hits = int(np.sum(predicted == labels))
        print(f"accuracy {accuracy:.4f} ({hits} of {len(labels)} images, model "
              f"{model.meta.get('job', model.task)})")
    elif not args.out:
        print("\n".join(map(str, predicted.tolist())))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
