"""A feature whose optional dependency is missing fails with one line naming the extra.

Each case runs in a fresh interpreter in which the dependency is made unimportable
(``sys.modules[name] = None``, Python's own way to block an import), so the real code path runs,
with everything else installed as usual.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from oasis_opt import save_instance
from oasis_opt._extras import MissingExtra, require
from oasis_opt.workloads import generate


def run_without(modules: list[str], code: str, cwd: Path) -> subprocess.CompletedProcess:
    block = f"import sys\nfor _m in {modules!r}:\n    sys.modules[_m] = None\n"
    return subprocess.run([sys.executable, "-c", block + code], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def cli(*argv: str) -> str:
    return f"from oasis_opt.cli import main\nsys.exit(main({list(argv)!r}))\n"


@pytest.fixture(scope="module")
def instance_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("extras") / "inst.json"
    save_instance(generate("paper-sim", seed=1, jobs=4, horizon=12), path)
    return path


CLI_CASES = {
    "jax-backend": (["jax"], ["solve", "{inst}", "--policy", "oasis", "--backend", "jax",
                              "--out", "r.json"], "the 'jax' backend needs jax", "jax"),
    "cpsat": (["ortools"], ["solve", "{inst}", "--policy", "offline-cpsat", "--out", "r.json"],
              "the CP-SAT backend (policy offline-cpsat) needs ortools", "cpsat"),
    "reproduce-ray": (["ray"], ["reproduce", "testbed", "--quick", "--results", "res",
                                "--out", "figs"], "running on Ray", "ray"),
    "reproduce-plots": (["matplotlib"], ["reproduce", "testbed", "--quick", "--workers", "1",
                                         "--results", "res", "--out", "figs"],
                        "reproduce (figures) needs matplotlib", "plots"),
    "automl": (["optax"], ["automl", "tasks"],
               "AutoML training (oasis_opt.automl) needs optax", "automl"),
    "serve": (["fastapi"], ["serve", "--cluster", "{inst}", "--policy", "drf", "--slot-s", "1"],
              "the scheduling service needs fastapi", "service"),
    "status": (["httpx"], ["status"], "the service's client needs httpx", "service"),
    "serve-ray": (["ray"], ["serve", "--cluster", "{inst}", "--policy", "drf", "--slot-s", "1"],
                  "running jobs (serve without --no-execute) needs ray", "ray"),
}


@pytest.mark.parametrize("case", sorted(CLI_CASES))
def test_cli_names_the_missing_extra(case, instance_file, tmp_path):
    blocked, argv, says, extra = CLI_CASES[case]
    argv = [a.format(inst=instance_file) for a in argv]
    res = run_without(blocked, cli(*argv), tmp_path)
    assert res.returncode == 2, res.stderr
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr  # one line, no traceback
    assert lines[0].startswith("oasis-opt: error: " + says)
    assert lines[0].endswith(f"install oasis-opt[{extra}]")
    assert not (tmp_path / "r.json").exists()


LIBRARY_CASES = {
    "testing": (["hypothesis"], "import oasis_opt.testing", "oasis_opt.testing needs hypothesis",
                "dev"),
    "pyomo": (["pyomo"], "from oasis_opt.offline import build_pyomo",
              "the Pyomo model of the MILP needs pyomo", "pyomo"),
    "jax-policy": (["jax"], "import oasis_opt\noasis_opt.get_policy('oasis', backend='jax')",
                   "the 'jax' backend needs jax", "jax"),
    "figures": (["matplotlib"], "from oasis_opt.experiments.figures.common import new_figure\n"
                "new_figure()", "figures needs matplotlib", "plots"),
    "service-app": (["prometheus_client"], "import oasis_opt.service.app",
                    "the scheduling service needs prometheus_client", "service"),
}


@pytest.mark.parametrize("case", sorted(LIBRARY_CASES))
def test_library_raises_missing_extra(case, tmp_path):
    blocked, code, says, extra = LIBRARY_CASES[case]
    probe = ("from oasis_opt._extras import MissingExtra\n"
             f"try:\n    exec({code!r})\nexcept MissingExtra as e:\n"
             "    print(e.extra)\n    print(e)\nelse:\n    print('no error')\n")
    res = run_without(blocked, probe, tmp_path)
    assert res.returncode == 0, res.stderr
    got_extra, message = res.stdout.splitlines()
    assert got_extra == extra
    assert message == f"{says}: install oasis-opt[{extra}]"


def test_require_returns_the_module_and_is_an_import_error():
    import json

    assert require("json", extra="none") is json
    with pytest.raises(ImportError, match=r"^x needs no_such_module_xyz: install oasis-opt\[e\]$"):
        require("no_such_module_xyz", extra="e", feature="x")


def test_a_broken_install_is_quoted(tmp_path):
    """A dependency of the extra missing underneath it: the same fix, with the cause shown."""
    (tmp_path / "brokenpkg.py").write_text("import no_such_dependency_xyz\n")
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(MissingExtra) as err:
            require("brokenpkg", extra="e", feature="f")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("brokenpkg", None)
    assert str(err.value) == ("f needs brokenpkg (No module named 'no_such_dependency_xyz'): "
                              "install oasis-opt[e]")
