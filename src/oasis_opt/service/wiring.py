"""The service put together: ``build_service`` wires the state store, the scheduler with its
online policy, the slot runner and the FastAPI application; ``Service.serve`` runs it.

Every refusal is an ``oasis_opt.policies.OptionError`` naming the parameter at fault: ``policy``
(unknown, or not online), one of the policy's options, ``pricing`` (required by OASiS: the
service does not know its jobs in advance) or ``state`` (a state file that cannot be opened or
resumed). A state file made for another cluster or policy raises the store's ``StateMismatch``;
a malformed pricing file its ``FormatError``.
"""
from __future__ import annotations

import errno
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from fastapi import FastAPI

    from ..model import Instance
    from ..model.policy import OnlinePolicy
    from .runner import ServiceRunner
    from .scheduler import Scheduler
    from .store import Store

# online policies priced from every job in advance unless given a pricing file
NEEDS_PRICING = ("oasis", "oasis-topo")


@dataclass
class Service:
    """A wired service: ``app`` over ``scheduler``, whose slots ``runner`` paces."""

    store: Store
    scheduler: Scheduler
    runner: ServiceRunner
    app: FastAPI

    def serve(self, sock: socket.socket) -> None:
        """Run the slot runner and the HTTP server on ``sock`` (``listen``'s) until the server
        stops (Ctrl-C), then stop the runner and close the state."""
        from .._extras import require

        uvicorn = require("uvicorn", extra="service", feature="the scheduling service")
        self.runner.start()
        try:
            server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning"))
            try:
                server.run(sockets=[sock])
            except KeyboardInterrupt:  # Ctrl-C (or SIGTERM, re-raised once it stopped): a
                pass  # clean stop, as uvicorn.run takes it
        finally:
            self.runner.stop()
            self.store.close()
            sock.close()


def listen(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (``port`` 0: one the system picks; the bound port is
    ``sock.getsockname()[1]``), made before the service starts anything: an address in use, a
    port this user may not open or a host this machine does not have is an ``OptionError`` on
    ``port`` or ``host``, said before any "serving" line, Ray start or traceback."""
    from ..policies import OptionError

    if not (isinstance(port, int) and 0 <= port <= 65535):
        raise OptionError("port", f"expected an integer in 0..65535, got {port!r}")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as e:
        raise OptionError("host", f"cannot listen on {host!r}: {e.strerror}") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
    try:
        sock.bind(address)
    except OSError as e:
        sock.close()
        field = "port" if e.errno in (errno.EADDRINUSE, errno.EACCES) else "host"
        raise OptionError(field, f"cannot listen on {host}:{port}: {e.strerror}") from None
    return sock


def require_extras(execute: bool = True) -> None:
    """``MissingExtra`` unless the service's dependencies are installed (``execute``: and those
    of running jobs), said before anything starts rather than when the first slot runs."""
    from .._extras import require

    require("fastapi", extra="service", feature="the scheduling service")
    require("uvicorn", extra="service", feature="the scheduling service")
    if execute:
        require("ray", extra="ray", feature="running jobs (serve without --no-execute)")
        require("optax", extra="automl", feature="running jobs (serve without --no-execute)")


def online_policy(name: str, options: dict[str, Any]) -> OnlinePolicy:
    """The online policy ``name`` built with ``options`` (``policies.build``); one that needs
    every job in advance is an ``OptionError`` on ``policy``, a run option (the service runs
    the policy slot by slot itself) one on that option."""
    from ..model.policy import OnlinePolicy
    from ..policies import OptionError, build

    policy, run = build(name, options)
    if run:
        key = next(iter(run))
        raise OptionError(key, f"policy {name!r}: {key!r} is a run option, which the service "
                               "sets itself")
    if not isinstance(policy, OnlinePolicy):
        raise OptionError("policy", f"{name!r} is not an online policy (it needs every job in "
                                    "advance)")
    return policy


def build_service(cluster: Instance, policy: str, options: dict[str, Any], *, slot_s: float,
                  state: str | None = None, execute: bool = True, address: str | None = None,
                  token: str | None = None, report: Callable[[str], None] | None = None,
                  open_loop: bool = False) -> Service:
    """The service deciding jobs on ``cluster`` (its servers, resources, horizon and topology;
    its jobs are not submitted) with the online policy ``policy`` and its ``options``, a slot
    every ``slot_s`` wall-clock seconds, its state in the SQLite file ``state`` (None: in
    memory) so that a service restarted with it goes on where it stopped. ``execute``: run the
    jobs on Ray (``address``: a running Ray cluster), else account progress as the simulator
    does. ``token``: required on mutating requests when set. ``report``: called with a line
    per slot run (``ServiceRunner``). An executing service runs the closed loop (each slot
    credited the progress the executor measured, jobs that fall behind re-planned:
    ``scheduler`` module docstring) unless ``open_loop``."""
    from ..model.io import FormatError
    from ..policies import OptionError
    from .app import create_app
    from .runner import ServiceRunner
    from .scheduler import ReplayMismatch, Scheduler
    from .store import StateMismatch, Store

    require_extras(execute)
    if policy in NEEDS_PRICING and "pricing" not in options:
        raise OptionError("pricing", f"required by policy {policy!r}: the service does not "
                          "know its jobs in advance, which oracle pricing needs (`oasis-opt "
                          "estimate-pricing` makes a pricing file from past instances)")
    online_policy(policy, options)  # checks the policy and its options before anything starts
    try:
        store = Store(state or ":memory:")
    except Exception as e:  # noqa: BLE001 - sqlite3 errors: not a database, unwritable ...
        raise OptionError("state", f"cannot open {state}: {e}") from None
    try:
        scheduler = Scheduler(cluster, lambda: online_policy(policy, options), store=store,
                              policy=policy, options=dict(options), executes=execute,
                              closed_loop=execute and not open_loop)
    except StateMismatch:
        raise
    except (FormatError, ReplayMismatch) as e:
        raise OptionError("state", f"cannot resume {state}: {e}") from None
    runner = ServiceRunner(scheduler, slot_s, execute=execute, address=address, report=report)
    return Service(store, scheduler, runner, create_app(scheduler, runner, token))
