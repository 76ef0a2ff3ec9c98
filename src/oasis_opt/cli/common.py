"""What every command shares: the bad-input error, the exit codes, reading the package's files
with their errors located, writing outputs, and SIGTERM as Ctrl-C.

Only the standard library loads at import time; the model (numpy) loads inside the functions.
"""
from __future__ import annotations

import argparse
import contextlib
import sys
from typing import TYPE_CHECKING, Any, Callable, Iterator, NoReturn

if TYPE_CHECKING:
    from ..costmodel.profile import SpeedProfile
    from ..model import Instance, Schedule, checks
    from ..sizing import WorkEstimate

PROG = "oasis-opt"
EXIT_OK, EXIT_INVALID, EXIT_BAD_INPUT, EXIT_FAILURE = 0, 1, 2, 3


class CliError(Exception):
    """Bad input: reported as ``oasis-opt: error: <field>: <message>`` with exit code 2."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


def one_line(text: str) -> str:
    return " ".join(text.split())


def failure(err: Exception | str) -> int:
    """A failure inside (a run that could not finish), reported in one line: exit code 3."""
    print(f"{PROG}: failure: {one_line(str(err))}", file=sys.stderr)
    return EXIT_FAILURE


def located(err: checks.FormatError, path: str) -> CliError:
    """A reader's error, with the file named: as the field when the whole file is bad."""
    message = str(err)[len(err.field) + 2:] if err.field else str(err)
    if not err.field or err.field == str(path):
        return CliError(str(path), message)
    return CliError(err.field, f"{message} (in {path})")


def load_instance(path: str) -> Instance:
    from ..model.io import FormatError, load_instance as load

    try:
        return load(path)
    except FormatError as e:
        raise located(e, path) from None


def load_result(instance: Instance, path: str, instance_path: str = "INSTANCE") -> Schedule:
    from ..model.io import FormatError, InstanceMismatch
    from ..model.io import load_result as load

    try:
        return load(instance, path)
    except InstanceMismatch as e:  # the pair is wrong, not a field: say so of the file
        raise CliError(str(path), f"this result belongs to another instance, not to "
                       f"{instance_path} (written for sha256 {e.theirs[:12]}..., "
                       f"{instance_path} is {e.ours[:12]}...)") from None
    except FormatError as e:
        raise located(e, path) from None


def load_profile(path: str) -> SpeedProfile:
    from ..costmodel.profile import load_profile as load
    from ..model.io import FormatError

    try:
        return load(path)
    except FormatError as e:
        raise located(e, path) from None


def check_size(estimate: WorkEstimate, max_work: float | None, where: str) -> None:
    """Refuse work beyond ``--max-work`` (field ``--max-work``) or the machine's memory
    (field ``where``: the instance)."""
    from ..sizing import DEFAULT_MAX_WORK, TooMuchWork, check_work

    try:
        check_work(estimate, DEFAULT_MAX_WORK if max_work is None else max_work)
    except TooMuchWork as e:
        raise CliError("--max-work" if e.field == "max_work" else where, e.message) from None


def write(path: str, save: Callable[..., None], *what: Any, field: str = "--out") -> None:
    """``save(*what, path)``; an unwritable destination is bad input on ``field``."""
    try:
        save(*what, path)
    except OSError as e:
        raise CliError(field, f"cannot write {path}: {e.strerror or e}") from None


def show_progress(args: argparse.Namespace) -> bool:
    """``--progress`` / ``--no-progress``; by default a bar when stderr is a terminal."""
    return sys.stderr.isatty() if args.progress is None else args.progress


def look_up(registry: Callable[[str], Any], name: str, field: str) -> Any:
    """``registry(name)``; its ValueError ("<parameter>: unknown ...") is bad input on
    ``field``."""
    try:
        return registry(name)
    except ValueError as e:
        raise CliError(field, str(e).partition(": ")[2]) from None


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
