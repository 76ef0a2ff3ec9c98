"""The ``oasis-opt`` command: a thin layer over the library.

Exit codes: 0 success; 1 a schedule is invalid (the violations are listed); 2 bad input, reported
as ONE line ``oasis-opt: error: <field>: <message>`` on stderr, never a traceback (an instance too
big to solve within ``--max-work``, a result written for another instance, included); 3 a failure
inside (a bug, an exhausted machine, runs of ``reproduce`` that failed), also one line on stderr
(``OASIS_OPT_TRACEBACK=1`` prints the traceback too). Never 1 for anything but an invalid schedule.

One module per command or family of commands (``solve``, ``generate``, ``service`` ...), each
mapping its flags to one library call; ``main`` holds the parser and the command table
(``main.COMMANDS``: name -> module, summary), ``args`` the argument types, the shared flags and
the one mapping from a library parameter to its flag, ``common`` the rest they share. Adding a
command is a module with ``COMMANDS = {"name": (add_arguments, run)}`` and one line of the
table::

    add_arguments = adder(arg("instance", help="..."), arg("--flag", type=int))

    def run(args) -> int:
        from ..something_heavy import thing   # heavy imports inside, so --help stays instant
        ...
        return EXIT_OK

Raise ``CliError(field, message)`` for bad input; ``FormatError`` from the strict readers and
``MissingExtra`` (a feature whose optional dependencies are not installed) are reported the same
way. Only the standard library loads at import time, and ``oasis-opt --help`` imports no command
module: the model (numpy) loads when a command runs, and networkx, jax, ray, ortools, pyomo,
scipy and matplotlib inside the code that needs them.
"""
from .main import main

__all__ = ["main"]
