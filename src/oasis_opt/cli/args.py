"""Argument types, the flags several commands share, and policy options: how ``--backend``,
``--pricing``, ``--time-limit`` and ``--option KEY=VALUE`` become the library's keywords, and
(``option_field``, the one place) how a library parameter named by an error becomes the flag
that set it.

argparse turns a type's ``ArgumentTypeError`` into ``argument --x: <message>``, which the parser
reports as one line on that field. Only the standard library loads at import time.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NoReturn

from .common import CliError

if TYPE_CHECKING:
    from ..policies import OptionError

Argument = tuple[tuple[str, ...], dict]


def arg(*flags: str, **kwargs: Any) -> Argument:
    """One ``add_argument`` call, kept for ``add``."""
    return flags, kwargs


def adder(*arguments: Argument) -> Callable[[argparse.ArgumentParser], None]:
    """``add_arguments(parser)`` adding the ``arg(...)`` lines, in order."""

    def add_arguments(parser: argparse.ArgumentParser) -> None:
        for flags, kwargs in arguments:
            parser.add_argument(*flags, **kwargs)

    return add_arguments


# ---- argument types ----------------------------------------------------------------------------
def _int_at_least(low: int, high: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if v < low or (high is not None and v > high):
            span = f">= {low}" if high is None else f"in {low}..{high}"
            raise argparse.ArgumentTypeError(f"must be {span}, got {v}")
        return v

    parse.__name__ = f"integer >= {low}" if high is None else f"integer in {low}..{high}"
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
positive_int = _int_at_least(1)
non_negative_int = _int_at_least(0)
port = _int_at_least(0, 65535)  # a TCP port; 0: one the system picks


def floor_grid(text: str) -> tuple[float, ...]:
    """``--grid``: comma-separated floor prices, checked by ``estimate.check_grid``."""
    from ..online.estimate import check_grid  # light: numpy and the pricing module only

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


def slowdown(text: str) -> float:
    """``--slowdown``: a number > 0, or a calibration JSON (``oasis-opt calibrate --out``),
    whose ``slowdown`` it is."""
    try:
        return positive_number(text)
    except argparse.ArgumentTypeError as e:
        if not Path(text).is_file():
            raise argparse.ArgumentTypeError(f"expected a number > 0 or a calibration JSON "
                                             f"(oasis-opt calibrate --out), got {text!r}") from e
    import json

    from ..runtime.calibrate import Calibration

    try:
        return Calibration.from_json(json.loads(Path(text).read_text())).slowdown
    except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
        raise argparse.ArgumentTypeError(f"{text!r} is not a calibration JSON "
                                         f"(oasis-opt calibrate --out): {e}") from None


def quantile(text: str) -> float:
    """``--quantile``: a number in [0, 1]."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}") from None
    if not 0 <= v <= 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {text!r}")
    return v


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


# ---- flags several commands share ----------------------------------------------------------------
MAX_WORK = arg("--max-work", type=work_limit, metavar="N",
               help="refuse instances whose estimated work T x (H+K) x I exceeds N "
                    "slot-server-jobs (default 1e10, minutes to an hour; inf: no limit)")
TASK = arg("--task", required=True, metavar="NAME", help="training task (see `automl tasks`)")
PROGRESS_BAR = arg("--progress", action="store_true", help="show a progress bar")
PROGRESS = arg("--progress", action=argparse.BooleanOptionalAction, default=None,
               help="progress bar on stderr (default: when stderr is a terminal)")
OPTION = arg("--option", action="append", default=[], metavar="KEY=VALUE",
             help="policy option, VALUE parsed as JSON when possible (repeatable)")
TOKEN = arg("--token", metavar="T", help="bearer token for submitting and cancelling (default: "
            "the environment variable OASIS_OPT_TOKEN; none: no token)")
URL = arg("--url", default="http://127.0.0.1:8000", metavar="URL",
          help="the service (default http://127.0.0.1:8000)")


# ---- policy options ------------------------------------------------------------------------------
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


# options with a flag of their own; any other comes from --option KEY=VALUE
OPTION_FLAGS = {"backend": "--backend", "pricing": "--pricing", "time_limit": "--time-limit"}


def policy_options(args: argparse.Namespace) -> dict[str, tuple[Any, str]]:
    """The options given by ``--backend``, ``--pricing``, ``--time-limit`` and ``--option``:
    key -> (value, field that gave it); one given twice is bad input."""
    given = [(key, getattr(args, key), flag) for key, flag in OPTION_FLAGS.items()
             if getattr(args, key, None) is not None]
    for text in getattr(args, "option", ()):
        key, value = parse_option(text)
        given.append((key, value, f"--option {key}"))
    options: dict[str, tuple[Any, str]] = {}
    for key, value, field in given:
        if key in options:
            raise CliError(field, f"option {key!r} given twice (also by {options[key][1]})")
        options[key] = (value, field)
    return options


def values(options: dict[str, tuple[Any, str]]) -> dict[str, Any]:
    """``policy_options``'s keys and values, without their fields."""
    return {k: v for k, (v, _) in options.items()}


def option_field(param: str, options: dict[str, tuple[Any, str]], policy: str) -> str:
    """The command-line field of the library parameter ``param`` (an ``OptionError``'s, or a
    ``TooMuchWork``'s ``max_work``): the field that gave the option, ``--policy`` for the
    policy's name, ``--policy NAME`` for its options as a whole, else the flag of that name."""
    if param in options:
        return options[param][1]
    if param == "policy":
        return "--policy"
    if param == "options":
        return f"--policy {policy}"
    return OPTION_FLAGS.get(param) or f"--{param.replace('_', '-')}"


def option_error(err: OptionError, options: dict[str, tuple[Any, str]], policy: str) -> CliError:
    """An ``OptionError`` as bad input on the field that set its parameter."""
    return CliError(option_field(err.param, options, policy), err.message)


def blame(err: Exception, fields: dict[str, str], default: str) -> CliError:
    """Library errors say ``"<parameter>: <message>"``: name the CLI field that set that
    parameter (``fields``: parameter -> field) when there is one, else ``default``."""
    name, sep, rest = str(err).partition(": ")
    if sep and name in fields:
        return CliError(fields[name], rest)
    return CliError(default, str(err))
