"""The command line as a package: a lazy command table (``--help`` imports no command module),
every command's module and summary in one table, and a policy's refused option named by the flag
that set it (the one mapping in ``cli.args``)."""
from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from oasis_opt.cli import main
from oasis_opt.cli.main import COMMANDS
from oasis_opt.model.io import save_instance
from oasis_opt.workloads import paper_fig5

MAIN_MODULES = {"oasis_opt.cli", "oasis_opt.cli.main", "oasis_opt.cli.common"}


def _cli_modules_after(argv: list[str]) -> set[str]:
    code = ("import contextlib, io, json, sys\n"
            "from oasis_opt.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    code = main({argv!r})\n"
            "print(json.dumps([code, sorted(m for m in sys.modules "
            "if m.startswith('oasis_opt.cli'))]))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    code, modules = json.loads(proc.stdout.strip().splitlines()[-1])
    assert code == 0
    return set(modules)


def test_help_imports_no_command_module():
    """Catches a parser that imports every command module to list the commands (``--help``
    then pays for all of them, and an import error in one command breaks every other)."""
    assert _cli_modules_after(["--help"]) <= MAIN_MODULES | {"oasis_opt.cli.args"}


def test_a_commands_help_imports_that_command_only():
    """Catches subparsers filled eagerly: ``solve --help`` must load the solve module (its
    flags) and no other command's."""
    loaded = _cli_modules_after(["solve", "--help"])
    assert "oasis_opt.cli.solve" in loaded
    commands = {module for module, _ in COMMANDS.values()}
    assert loaded & commands == {"oasis_opt.cli.solve"}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_table_entry_names_a_module_that_implements_it(command):
    """Catches a command whose table line and module disagree (a renamed module or command
    would fail only when that command is run)."""
    module, summary = COMMANDS[command]
    add_arguments, run = importlib.import_module(module).COMMANDS[command]
    assert callable(add_arguments) and callable(run) and summary


def test_no_cli_module_is_over_400_lines():
    """Catches the command line growing back into one long module."""
    import oasis_opt.cli
    from pathlib import Path

    folder = Path(oasis_opt.cli.__file__).parent
    long = {p.name: n for p in folder.glob("*.py")
            if (n := len(p.read_text().splitlines())) > 400}
    assert long == {}


@pytest.fixture
def fig5_file(tmp_path):
    path = tmp_path / "fig5.json"
    save_instance(paper_fig5(0, servers=3), path)
    return path


@pytest.mark.parametrize("argv, field", [
    (["--policy", "oasis", "--time-limit", "5"], "--time-limit"),
    (["--policy", "greedy", "--backend", "jax"], "--backend"),
    (["--policy", "greedy", "--option", "backend=jax"], "--option backend"),
    (["--policy", "offline", "--option", "memory_budget_gb=0.001"], "--option memory_budget_gb"),
    (["--policy", "greedy", "--option", "placement=nowhere"], "--policy greedy"),
    (["--policy", "nope"], "--policy"),
    (["--policy", "greedy", "--max-work", "1"], "--max-work"),
])
def test_solve_names_the_flag_of_the_refused_parameter(tmp_path, capsys, fig5_file, argv, field):
    """Catches an ``OptionError`` reported on the wrong field: the parameter ``policies.build``
    names (``time_limit``, ``backend`` ...) must come back as the flag the user typed, whether
    an option's own flag or ``--option KEY``."""
    code = main(["solve", str(fig5_file), *argv, "--out", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert code == 2, err
    line, = err.splitlines()
    assert line.startswith(f"oasis-opt: error: {field}: "), line
    assert not (tmp_path / "r.json").exists()


def test_serve_names_the_flag_of_the_refused_parameter(tmp_path, capsys, fig5_file):
    """Catches the service's wiring refusing in its own words only: ``build_service``'s
    ``OptionError`` on ``pricing`` / ``policy`` must reach the user as ``--pricing`` /
    ``--policy``."""
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    for argv, field in ((["--policy", "oasis"], "--pricing"), (["--policy", "offline"],
                                                                "--policy")):
        code = main(["serve", "--cluster", str(fig5_file), *argv, "--slot-s", "1",
                     "--no-execute"])
        err = capsys.readouterr().err
        assert code == 2, err
        assert err.startswith(f"oasis-opt: error: {field}: "), err
