"""``automl tasks``, ``automl dataset`` (the preprocessing step), ``automl curves`` (real
learning curves) and ``automl replay`` (a study under an early-stopping controller)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from .args import (PROGRESS_BAR, TASK, adder, arg, blame, non_negative_int, non_negative_seconds,
                   option_error, policy_options, positive_int, values)
from .common import EXIT_OK, CliError, located, look_up, write

add_curves = adder(
    TASK,
    arg("--trials", type=positive_int, required=True, metavar="N",
        help="trials in the study; a file holding fewer of them gets the missing ones"),
    arg("--epochs", type=positive_int, required=True, metavar="E", help="epochs per trial"),
    arg("--seed", type=non_negative_int, default=0, metavar="S",
        help="study seed: data split, configurations, weights (default 0)"),
    arg("--study", metavar="NAME", help="study name in the CSV (default: the task's name)"),
    PROGRESS_BAR,
    arg("--out", required=True, metavar="FILE", help="curves CSV to write or extend"))
add_replay = adder(
    arg("curves", metavar="CURVES",
        help="curves CSV (one study, or name it with --study), or the name of a shipped "
             "curve set: digits-mlp, breast-cancer-mlp, digits-cnn, wine-mlp, digits-linear"),
    arg("--policy", required=True, metavar="NAME",
        help="automl-thesis, automl-thesis-lean, automl-thesis-rank, "
             "automl-thesis-second-chance, optuna-median, "
             "optuna-sh, optuna-hyperband, asha or no-stop"),
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


def tasks(args: argparse.Namespace) -> int:
    from ..training.tasks import TASKS

    for task in TASKS.values():
        print(f"{task.name}: {task.description}")
        for name, space in task.space.describe().items():
            print(f"  {name}: {space}")
    return EXIT_OK


def curves(args: argparse.Namespace) -> int:
    from ..training.study import generate_curves
    from ..training.tasks import get_task
    from ..model.io import FormatError

    task = look_up(get_task, args.task, "--task")
    try:
        run = generate_curves(task, args.trials, args.epochs, args.seed, args.out,
                              study=args.study, progress=args.progress)
    except FormatError as e:
        raise located(e, args.out) from None
    except ValueError as e:
        raise blame(e, {"trials": "--trials", "epochs": "--epochs", "seed": "--seed",
                        "study": "--study", "out": "--out"}, "--out") from None
    except OSError as e:
        raise CliError("--out", f"cannot write {args.out}: {e.strerror or e}") from None
    print(f"{run.study}: {run.existing} trials were in {args.out}, {run.added} trained now "
          f"({run.seconds:.1f} s) -> {args.out}")
    return EXIT_OK


def replay(args: argparse.Namespace) -> int:
    from ..automl.controllers import controller_factory
    from ..training.curves import read_curves, shipped_curves
    from ..automl.replay import one_study, replay
    from ..model.io import FormatError
    from ..policies import OptionError, construct

    factory = look_up(controller_factory, args.policy, "--policy")
    options = policy_options(args)
    try:
        controller = construct(args.policy, factory, values(options))
    except OptionError as e:
        raise option_error(e, options, args.policy) from None
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
        raise located(e, args.curves) from None
    except ValueError as e:
        raise blame(e, {"study": "--study"}, "CURVES") from None
    result = replay(curves, controller, workers=args.workers, budget=args.budget, seed=args.seed)
    doc = {**result.to_json(), "curves": str(args.curves)}

    def save(d: dict, path: str) -> None:
        Path(path).write_text(json.dumps(d, indent=1) + "\n")

    write(args.out, save, doc)
    best = "none" if result.best is None else f"{result.best:.4f}"
    if result.best is None:
        why = (f"the budget of {args.budget:g} GPU-seconds ran out first"
               if result.stats.get("budget_exhausted") else controller.why_none_completed())
        if why:
            print(f"no trial reached its last epoch: {why}")
    print(f"{result.policy} on {result.study}: best final val_accuracy {best} "
          f"({doc['completed']} of {len(result.trials)} trials completed), "
          f"{result.gpu_seconds:.1f} of {result.total_gpu_seconds:.1f} GPU-seconds -> {args.out}")
    return EXIT_OK


add_dataset = adder(
    arg("task", metavar="TASK", help="a training task (`oasis-opt automl tasks`)"),
    arg("--seed", type=int, default=0, metavar="S", help="the data seed of the split (default 0)"),
    arg("--out", required=True, metavar="JSON", help="where to write the dataset description"))


def dataset(args: argparse.Namespace) -> int:
    from ..training.dataset import describe, prepare, save_dataset

    try:
        doc = prepare(args.task, args.seed)
    except ValueError as e:
        field, _, message = str(e).partition(": ")
        raise CliError("--seed" if field == "seed" else "TASK", message) from None
    write(args.out, save_dataset, doc)
    print(describe(doc))
    return EXIT_OK


COMMANDS = {"automl tasks": (adder(), tasks), "automl curves": (add_curves, curves),
            "automl dataset": (add_dataset, dataset),
            "automl replay": (add_replay, replay)}
