"""``import oasis_opt`` and ``oasis-opt --help`` load only the standard library; the public
subpackages load no solver front end they do not need. Measured as the set of modules a fresh
interpreter has loaded (``sys.modules``), never in seconds."""
from __future__ import annotations

import functools
import json
import subprocess
import sys

import pytest

import oasis_opt
import oasis_opt.offline

# what the top-level package and the CLI's parser may load of their own (``solve --help``: the
# solve command's module, with the argument types)
LIGHT = {"oasis_opt", "oasis_opt._lazy", "oasis_opt._extras", "oasis_opt.policies",
         "oasis_opt.cli", "oasis_opt.cli.main", "oasis_opt.cli.common", "oasis_opt.cli.args",
         "oasis_opt.cli.solve"}


def loaded_by(code: str) -> set[str]:
    """Modules loaded by ``code`` in a fresh interpreter (recorded at exit: SystemExit too)."""
    probe = ("import atexit, json, sys\n"
             "atexit.register(lambda: print('\\n' + json.dumps(sorted(sys.modules))))\n" + code)
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120)
    return set(json.loads(res.stdout.strip().splitlines()[-1]))


@functools.cache
def at_startup() -> frozenset[str]:
    """What the interpreter loads before any code (site hooks such as ``_distutils_hack``)."""
    return frozenset(loaded_by("pass"))


def third_party(modules: set[str]) -> set[str]:
    tops = {m.partition(".")[0] for m in modules - at_startup()}
    return tops - set(sys.stdlib_module_names) - {"oasis_opt", "__main__"}


@pytest.mark.parametrize("code", [
    "import oasis_opt",
    "import oasis_opt; oasis_opt.available_policies(); oasis_opt.__version__",
    "from oasis_opt.cli import main; main(['--help'])",
    "from oasis_opt.cli import main; main(['solve', '--help'])",
    "from oasis_opt.cli import main; main(['--version'])",
    "from oasis_opt.cli import main; main(['solve'])",  # a usage error: one line, exit 2
], ids=["import", "registry", "help", "solve-help", "version", "usage-error"])
def test_import_and_cli_help_load_only_the_standard_library(code):
    modules = loaded_by(code)
    assert third_party(modules) == set()  # in particular neither numpy nor networkx
    assert {m for m in modules if m.startswith("oasis_opt")} <= LIGHT


def test_a_lazy_name_loads_its_module_on_first_use():
    modules = loaded_by("import oasis_opt; oasis_opt.Instance")
    assert {"numpy", "oasis_opt.model"} <= modules
    assert "networkx" not in modules  # loaded by the code that builds or walks a topology


def test_networkx_loads_when_a_topology_is_built():
    make = "from oasis_opt.workloads import generate; inst = generate('paper-sim', seed=0, jobs=2)"
    assert "networkx" not in loaded_by(make)
    assert "networkx" in loaded_by(make + "; inst.get_topology()")


@pytest.mark.parametrize("code, absent", [
    ("import oasis_opt.offline", {"numpy", "scipy", "highspy", "pyomo", "ortools"}),
    ("from oasis_opt.offline import OfflinePolicy, bracket, lp_bound, solve_program",
     {"pyomo", "ortools", "jax", "ray", "matplotlib"}),
    ("import oasis_opt.online", {"jax", "pyomo", "ortools", "ray", "matplotlib"}),
    ("from oasis_opt.cli import main; main(['policies'])", {"jax", "pyomo", "ortools", "ray"}),
], ids=["offline-package", "offline-highs", "online", "cli-policies"])
def test_heavy_libraries_load_only_when_needed(code, absent):
    tops = {m.partition(".")[0] for m in loaded_by(code)}
    assert not tops & absent


@pytest.mark.parametrize("package", [oasis_opt, oasis_opt.offline], ids=lambda p: p.__name__)
def test_every_exported_name_resolves(package):
    for name in package.__all__:
        assert getattr(package, name) is not None, name
        assert name in dir(package)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        package.no_such_name  # noqa: B018


def test_lazy_names_are_the_defining_objects():
    from oasis_opt.model import Instance
    from oasis_opt.offline.colgen import bracket
    from oasis_opt.offline.solver import solve_program

    assert oasis_opt.Instance is Instance
    assert oasis_opt.offline.bracket is bracket
    assert oasis_opt.offline.solve_program is solve_program


def test_a_lazy_name_spelled_like_its_submodule_survives_that_submodules_import():
    """``workloads.testbed_real`` (the generator, defined in ``workloads/testbed_real.py``): a
    child that imports the submodule first must still get the function from the package, as an
    eager ``from .testbed_real import testbed_real`` gave it (with plain PEP 562 laziness the
    import system binds the package attribute to the module: "'module' object is not
    callable")."""
    code = ("import oasis_opt.workloads.testbed_real, oasis_opt.workloads.testbed\n"
            "from oasis_opt.workloads import testbed_real, testbed\n"
            "import oasis_opt.workloads as w\n"
            "print(callable(testbed_real), callable(testbed), callable(w.testbed_real),\n"
            "      type(__import__('sys').modules['oasis_opt.workloads.testbed_real']).__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True", "True", "module"]


@pytest.mark.parametrize("policy", ["gavel-ftf", "max-min-fairness"])
def test_gavel_generate_and_solve_load_no_jax_ray_or_matplotlib(tmp_path, policy):
    """The path benchmarks/bench_gavel.py times against Gavel's driver (issue #34): a whole
    ``generate --trace gavel`` and ``solve`` with a Gavel policy load only what the policy and
    the validator need; a module-level import of JAX, Ray, matplotlib or tqdm anywhere on it
    (policies, sim, validator, result writer) would cost start-up seconds and fails here; so
    would scipy (~0.2 s: the Gavel LPs hand HiGHS their CSR arrays, ``RowwiseMatrix``)."""
    inst, res = tmp_path / "i.json", tmp_path / "r.json"
    heavy = {"jax", "jaxlib", "ray", "matplotlib", "tqdm", "pandas", "pyomo", "ortools", "scipy"}
    gen = loaded_by(f"from oasis_opt.cli import main; main(['generate', '--trace', 'gavel', "
                    f"'--seed', '0', '--out', {str(inst)!r}])")
    assert inst.exists() and not {m.partition('.')[0] for m in gen} & heavy
    solve = loaded_by(f"from oasis_opt.cli import main; main(['solve', {str(inst)!r}, "
                      f"'--policy', {policy!r}, '--out', {str(res)!r}])")
    assert json.loads(res.read_text())["format"].startswith("oasis-opt/result")
    assert "oasis_opt.model.validate" in solve  # the validator ran
    assert not {m.partition('.')[0] for m in solve} & heavy
