"""``case-study``: the computer-vision case study (``experiments.case_study.run_case_study``)."""
from __future__ import annotations

import argparse

from .args import (PROGRESS, adder, arg, blame, non_negative_int, option_error, policy_options,
                   positive_int, positive_seconds, values)
from .common import EXIT_FAILURE, EXIT_OK, CliError, failure, look_up, show_progress

add_case_study = adder(
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

# CaseStudy's parameters -> the flags that set them
FIELDS = {"trials": "--trials", "concurrent": "--concurrent", "jobs": "--jobs",
          "epochs": "--epochs", "slot_s": "--slot-s", "horizon": "--horizon",
          "controller": "--controller", "controller_options": "--option", "seed": "--seed"}


def case_study(args: argparse.Namespace) -> int:
    from .._extras import require

    for module, extra in (("fastapi", "service"), ("uvicorn", "service"), ("httpx", "service"),
                          ("ray", "ray"), ("optax", "automl"), ("optuna", "automl")):
        require(module, extra=extra, feature="the case study")
    from ..automl.controllers import controller_factory
    from ..policies import OptionError, construct
    from ..experiments.case_study import CaseStudy, format_summary, run_case_study
    from ..service.wiring import online_policy

    options = policy_options(args)
    factory = look_up(controller_factory, args.controller, "--controller")
    try:
        construct(args.controller, factory, values(options))  # the options, checked
    except OptionError as e:
        raise option_error(e, options, args.controller) from None
    try:
        online_policy(args.policy, {})
    except OptionError as e:
        raise option_error(e, {}, args.policy) from None
    try:
        settings = CaseStudy(trials=args.trials, concurrent=args.concurrent, jobs=args.jobs,
                             epochs=args.epochs, slot_s=args.slot_s, horizon=args.horizon,
                             policy=args.policy, controller=args.controller,
                             controller_options=values(options), seed=args.seed)
    except ValueError as e:
        raise blame(e, FIELDS, "--option") from None
    try:
        summary = run_case_study(settings, args.out, port=args.port or None,
                                 screenshot=args.screenshot, progress=show_progress(args))
    except ValueError as e:
        if str(e).startswith("screenshot: "):
            raise CliError("--screenshot", str(e).partition(": ")[2]) from None
        raise
    except RuntimeError as e:
        return failure(e)
    print(format_summary(summary))
    return EXIT_OK if summary["validation"]["ok"] else EXIT_FAILURE


COMMANDS = {"case-study": (add_case_study, case_study)}
