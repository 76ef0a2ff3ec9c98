"""``serve`` (the online scheduling service, ``service.wiring.build_service``), ``submit`` and
``status`` (its HTTP client)."""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from .args import (TOKEN, URL, adder, arg, existing_file, option_error, policy_options, port,
                   positive_seconds, values)
from .common import EXIT_OK, PROG, CliError, load_instance, located, sigterm_as_interrupt

add_serve = adder(
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
    arg("--open-loop", action="store_true",
        help="credit each slot the progress the plan promised, not the progress the executor "
             "measured (default with an executor: the closed loop, jobs that fall behind "
             "re-planned; see oasis_opt.service.scheduler)"),
    arg("--state", metavar="DB", help="SQLite state file: a service restarted with it "
        "goes on where it stopped (default: in memory, lost at exit)"),
    arg("--host", default="127.0.0.1", metavar="HOST",
        help="address to listen on (default 127.0.0.1: this machine only)"),
    arg("--port", type=port, default=8000, metavar="P",
        help="port, 0..65535 (default 8000; 0: one the system picks, printed)"),
    TOKEN)
add_submit = adder(arg("job", metavar="JOB", type=existing_file, help="job JSON"), URL, TOKEN)
add_status = adder(URL, arg("--json", action="store_true",
                            help="print the service's summary and jobs as JSON"))


def _token(args: argparse.Namespace) -> str | None:
    from ..service.app import TOKEN_ENV

    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV)
    if token is not None and not token.strip():
        raise CliError("--token", "must not be empty")
    return token


def serve(args: argparse.Namespace) -> int:
    from ..model.io import FormatError
    from ..policies import OptionError
    from ..service.store import StateMismatch
    from ..service.wiring import build_service, listen, require_extras

    require_extras(execute=not args.no_execute)
    if args.open_loop and args.no_execute:
        raise CliError("--open-loop", "a service that runs nothing (--no-execute) credits the "
                       "plan's progress already; --open-loop is for one with an executor")
    token = _token(args)
    cluster = load_instance(args.cluster)
    options = policy_options(args)
    try:  # the address first: one in use is said before anything starts
        sock = listen(args.host, args.port)
    except OptionError as e:
        raise CliError(f"--{e.param}", e.message) from None
    try:
        service = build_service(cluster, args.policy, values(options), slot_s=args.slot_s,
                                state=args.state, execute=not args.no_execute,
                                address=args.address, token=token, report=_print_slot,
                                open_loop=args.open_loop)
    except OptionError as e:
        raise option_error(e, options, args.policy) from None
    except StateMismatch as e:
        raise CliError(e.field, e.message) from None
    except FormatError as e:
        if isinstance(args.pricing, str):  # the pricing file is bad
            raise located(e, args.pricing) from None
        raise
    resumed = (f", resuming {args.state} at slot {service.scheduler.finished_slots + 1}"
               if service.scheduler.resumed else "")
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"{PROG}: serving {args.policy} on http://{host}:{sock.getsockname()[1]} (dashboard "
          f"/, API /docs){resumed}", file=sys.stderr, flush=True)
    if not args.no_execute:
        print(f"{PROG}: starting Ray; the first slot runs once its workers have started and "
              "compiled (minutes on a small machine; /health says how long it has run)",
              file=sys.stderr, flush=True)
    # SIGTERM (`kill`, docker stop) shuts down like Ctrl-C: uvicorn re-raises the signal it
    # caught once it has stopped, and with the default handler the process would die before
    # the slot runner stops, leaving its Ray processes behind
    with sigterm_as_interrupt():
        service.serve(sock)
    return EXIT_OK


def _print_slot(line: str) -> None:
    print(f"{PROG}: {line}", file=sys.stderr, flush=True)


def _service(method: str, url: str, path: str, **kwargs: Any) -> Any:
    from ..service.client import ServiceError, request

    try:
        return request(method, url, path, **kwargs)
    except ServiceError as e:
        raise CliError(e.field, e.message) from None


def submit(args: argparse.Namespace) -> int:
    from ..model.io import FormatError, read_json

    try:
        doc = read_json(args.job)
    except FormatError as e:
        raise located(e, args.job) from None
    try:
        view = _service("POST", args.url, "/jobs", json=doc, token=_token(args))
    except CliError as e:
        if e.field == "--url" or e.field.startswith("authorization"):
            raise
        raise CliError(e.field, f"{e.message} (in {args.job})") from None
    print(f"{view['id']}: submitted, arrives in slot {view['arrival']}")
    return EXIT_OK


def status(args: argparse.Namespace) -> int:
    from ..sim.report import format_table

    summary = _service("GET", args.url, "/summary")
    jobs = _service("GET", args.url, "/jobs")
    if args.json:
        print(json.dumps({"summary": summary, "jobs": jobs}, indent=1))
        return EXIT_OK
    # the words of /health and the dashboard: slots done, and the one decided and running
    running = (f", slot {summary['decided']} running" if summary["decided"] > summary["slot"]
               else "")
    print(f"slot {summary['slot']} of {summary['horizon']} done{running}: {summary['jobs']} jobs, "
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


COMMANDS = {"serve": (add_serve, serve), "submit": (add_submit, submit),
            "status": (add_status, status)}
