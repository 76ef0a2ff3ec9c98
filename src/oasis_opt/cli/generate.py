"""``generate`` (an instance from a workload preset or a real trace) and ``presets``."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Callable

from ..workloads.trace_registry import TRACES, trace_loader
from .args import (MAX_WORK, adder, arg, blame, existing_file, non_negative_int, positive_int,
                   positive_seconds, slowdown)
from .common import EXIT_OK, CliError, check_size, load_profile, write

if TYPE_CHECKING:
    from ..model import Instance

add_generate = adder(
    arg("--preset", metavar="NAME",
        help="workload preset (see `oasis-opt presets`), e.g. paper-sim"),
    arg("--trace", choices=tuple(TRACES),
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
    arg("--slowdown", type=slowdown, metavar="C|CALIBRATION",
        help="multiply the profiles' iteration times in chunk times by C, or by the slowdown "
             "of a calibration JSON (oasis-opt calibrate --out: the machine's speed now; "
             "testbed-real)"),
    arg("--speed", choices=("contention", "own"),
        help="testbed-real: the profile's speed model for chunk times: contention (default; "
             "the slot's jobs share the machine's cores) or own (the job alone)"),
    arg("--seed", type=non_negative_int, required=True, metavar="S", help="random seed"),
    MAX_WORK,
    arg("--out", required=True, metavar="FILE", help="instance JSON to write"))


def generate(args: argparse.Namespace) -> int:
    from ..model.io import FormatError, save_instance
    from ..workloads import PRESETS, generate

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
    if args.speed is not None:
        options["speed"] = args.speed
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
    from ..model.io import FormatError, save_instance

    if args.preset is not None:
        raise CliError("--trace", "give either --preset or --trace")
    if args.profile or args.slowdown is not None or args.speed is not None:
        raise CliError("--profile" if args.profile else
                       "--slowdown" if args.slowdown is not None else "--speed",
                       "a trace takes no speed profile")
    for name in ("file", "throughputs"):
        if getattr(args, name) is not None and args.trace not in _TAKES_FILES:
            raise CliError(f"--{name}", f"only for --trace {', '.join(_TAKES_FILES)}")
    build, line, fields = _TRACE_FLAGS[args.trace]
    try:
        inst = build(args, trace_loader(args.trace))
    except FormatError:
        raise
    except ValueError as e:
        raise blame(e, fields, f"--trace {args.trace}") from None
    _check_generated(inst, args)
    write(args.out, save_instance, inst)
    print(f"wrote {args.out}: {line(args, inst)}")
    return EXIT_OK


def _philly(args: argparse.Namespace, load: Callable[..., Instance]) -> Instance:
    if not args.days > 0:
        raise CliError("--days", f"must be > 0, got {args.days}")
    return load(args.start, args.days, args.seed,
                slot_s=3600.0 if args.slot_s is None else args.slot_s, root=args.trace_root)


def _philly_line(args: argparse.Namespace, inst: Instance) -> str:
    return (f"Philly trace from {args.start} for {args.days:g} days, {inst.I} jobs, "
            f"T={inst.horizon}, {inst.H} worker + {inst.K} PS servers")


def _gavel(args: argparse.Namespace, load: Callable[..., Instance]) -> Instance:
    from ..workloads.gavel import ROUND_S, gavel_files

    shipped = gavel_files()  # the dev trace and its table, shipped with the package
    return load(args.file or shipped["trace"], args.throughputs or shipped["throughputs"],
                cluster=args.cluster, gpus_per_server=args.gpus_per_server,
                slot_s=ROUND_S if args.slot_s is None else args.slot_s, seed=args.seed)


def _gavel_line(args: argparse.Namespace, inst: Instance) -> str:
    return (f"Gavel trace {inst.meta['trace']}, {inst.I} jobs, T={inst.horizon} slots of "
            f"{inst.meta['slot_s']:g} s, {inst.H} worker servers "
            f"({', '.join(map(str, inst.types))}) + {inst.K} PS")


# each registered trace: its flags -> its loader's call, its summary line, and the loader's
# parameters whose errors name a flag of their own (the others: --trace NAME)
_TRACE_FLAGS: dict[str, tuple[Callable[[argparse.Namespace, Callable[..., Instance]], Instance],
                              Callable[[argparse.Namespace, Instance], str], dict[str, str]]] = {
    "philly": (_philly, _philly_line, {}),
    "gavel": (_gavel, _gavel_line, {"cluster": "--cluster", "gpus_per_server": "--gpus-per-server",
                                    "slot_s": "--slot-s"}),
}
_TAKES_FILES = ("gavel",)  # the traces read from --file / --throughputs


def _check_generated(inst: Instance, args: argparse.Namespace) -> None:
    """Refuse to write an instance no policy could solve within ``--max-work``."""
    from ..sizing import estimate_work

    check_size(estimate_work(inst), args.max_work, "--horizon")


def presets(args: argparse.Namespace) -> int:
    from ..workloads import PRESETS

    width = max(map(len, PRESETS), default=0)
    for name, description in PRESETS.items():
        print(f"{name.ljust(width)}  {description}")
    return EXIT_OK


COMMANDS = {"generate": (add_generate, generate), "presets": (adder(), presets)}
