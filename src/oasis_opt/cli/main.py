"""The parser and the command table: ``oasis-opt COMMAND ...``.

``COMMANDS`` maps each command to the module that implements it and a one-line summary. The
parser lists every command from this table alone; only the command being run is imported, its
``COMMANDS[name] = (add_arguments, run)`` filling its subparser as argparse reaches it. So
``oasis-opt --help`` imports no command module, and ``oasis-opt solve --help`` only ``solve``.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import time
from typing import Any, NoReturn, Sequence

from .._extras import MissingExtra
from .common import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, PROG, CliError, failure, one_line

_C = "oasis_opt.cli."
COMMANDS: dict[str, tuple[str, str]] = {
    "generate": (_C + "generate", "generate a problem instance from a workload preset or a real "
                 "trace"),
    "solve": (_C + "solve", "run a policy on an instance, validate the schedule and write the "
              "result"),
    "estimate-pricing": (_C + "pricing", "estimate OASiS's U and L from past instances (paper "
                         "p.6) and write a pricing file for `solve --pricing`"),
    "ratio": (_C + "ratio", "the empirical competitive ratio OPT / OASiS per instance, beside "
              "alpha and Theorem 4's bound 2 alpha, and the load (oasis-opt/ratio@1 JSON and a "
              "table)"),
    "validate": (_C + "results", "check a result against its instance (constraints (2)-(10), "
                 "utilities)"),
    "policies": (_C + "solve", "list the registered policies"),
    "presets": (_C + "generate", "list the workload presets of `generate`"),
    "summary": (_C + "results", "compare results on one instance: policy and options, utility, "
                "admissions, validity, solver status, timeliness (exit 1 when one is invalid)"),
    "reproduce": (_C + "reproduce", "run the paper's experiments and draw its figures beside the "
                  "paper's values"),
    "automl tasks": (_C + "automl", "list the training tasks and their hyperparameter search "
                     "spaces"),
    "automl dataset": (_C + "automl", "the preprocessing step: load a task's dataset, split it "
                       "train/validation/test by a seed, fit its scaling on the train split, and "
                       "write the description (and digest) training jobs name"),
    "automl curves": (_C + "automl", "train random-search trials of a task for real and write "
                      "their learning curves as CSV (an existing file is extended)"),
    "automl replay": (_C + "automl", "replay a study of all trials of a curves CSV under an "
                      "early-stopping policy and write what it found and spent as JSON"),
    "execute": (_C + "execute", "run a schedule for real: parameter-server training on Ray, "
                "slot by slot in wall-clock time, and report real against planned progress"),
    "profile": (_C + "execute", "time real synchronous PS training of a task at several worker "
                "and PS counts and fit the Optimus speed model (a profile for `generate "
                "--profile`)"),
    "calibrate": (_C + "execute", "measure with a short real run how much slower than its "
                  "profile the machine trains now: the slowdown to plan with (`generate "
                  "--slowdown`)"),
    "serve": (_C + "service", "run the online scheduling service: jobs submitted over HTTP are "
              "decided slot by slot in wall-clock time by an online policy and run on Ray "
              "(dashboard at /)"),
    "submit": (_C + "service", "submit a job (an instance-format job with its task, JSON) to a "
               "running service"),
    "status": (_C + "service", "the jobs and the cluster of a running service, as a table"),
    "case-study": (_C + "case_study", "the computer-vision case study: start the service, run a "
                   "hyperparameter search (AutoML early stopping) and training jobs on the "
                   "digits images, export the best model and measure it on held-out images"),
    "predict": (_C + "predict", "predict the classes of images with an exported model (the case "
                "study's model.npz) and, given their labels, print the accuracy"),
}

# command groups: a command registered as "group leaf" is ``oasis-opt group leaf``
GROUPS: dict[str, str] = {
    "automl": "AutoML: real training tasks, their learning curves, early-stopping studies",
}
LOG_LEVELS = ("debug", "info", "warning", "error")


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


class _LazyCommands(argparse._SubParsersAction):
    """Subparsers whose arguments are added when the command is chosen (``pending``: subparser
    name -> full command name, until its module has filled it)."""

    pending: dict[str, str]

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        name = values[0] if values else None
        if name in self.pending:
            command = self.pending.pop(name)
            module = importlib.import_module(COMMANDS[command][0])
            add_arguments, run = module.COMMANDS[command]
            chosen = self._name_parser_map[name]
            add_arguments(chosen)
            chosen.set_defaults(func=run)
        super().__call__(parser, namespace, values, option_string)


def _commands(parser: argparse.ArgumentParser, dest: str, metavar: str) -> _LazyCommands:
    sub = parser.add_subparsers(dest=dest, metavar=metavar, required=True, action=_LazyCommands)
    assert isinstance(sub, _LazyCommands)
    sub.pending = {}
    return sub


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Schedule distributed ML training jobs on shared "
                     "clusters: generate instances, run policies, validate and compare schedules.",
                     epilog="exit codes: 0 ok, 1 invalid schedule, 2 bad input, 3 failure")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument("--log-level", choices=LOG_LEVELS, default="warning",
                        help="messages of the library (solver logs: debug) on stderr "
                             "(default: warning)")
    sub = _commands(parser, "command", "COMMAND")
    groups: dict[str, _LazyCommands] = {}
    for command, (_, help_text) in COMMANDS.items():
        target, name = sub, command
        group, _, leaf = command.partition(" ")
        if leaf:  # "group leaf": a subcommand of the command group ``group`` (see GROUPS)
            if group not in groups:
                g = sub.add_parser(group, help=GROUPS[group], description=GROUPS[group])
                groups[group] = _commands(g, "subcommand", "SUBCOMMAND")
            target, name = groups[group], leaf
        target.add_parser(name, help=help_text, description=help_text)
        target.pending[name] = command
    return parser


def _version() -> str:
    from .. import __version__

    return __version__


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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    started = time.perf_counter()  # a time limit counts from here (solve --time-limit)
    try:
        args = build_parser().parse_args(None if argv is None else list(argv))
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
        print(f"{PROG}: failure: internal error {type(e).__name__}: {one_line(str(e))} "
              "(OASIS_OPT_TRACEBACK=1 shows the traceback)", file=sys.stderr)
        return EXIT_FAILURE


def _run(args: argparse.Namespace) -> int:
    from ..model.io import FormatError  # the model loads here, not for --help
    from ..runtime.ray_pool import RayJoinError

    try:
        return int(args.func(args))
    except FormatError as e:
        return _bad_input(e)
    except RayJoinError as e:  # --address: a cluster that is not there or refuses this driver
        return failure(f"--address: {e}")


def _bad_input(err: Exception) -> int:
    print(f"{PROG}: error: {one_line(str(err))}", file=sys.stderr)
    return EXIT_BAD_INPUT
