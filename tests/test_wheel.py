"""The wheel, installed with only the core dependencies into a fresh venv, does what a library
user needs: build an instance in code, solve its MILP with HiGHS through the documented API,
validate it, and name the extra of any feature whose dependencies are missing (here they are
really missing, not simulated).

Uses uv (installed into .venv by ``make``) with ``--offline``: the versions come from
requirements/lock.txt and the wheels from uv's cache, which ``make install`` fills.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = {"oasis-opt", "numpy", "scipy", "networkx", "highspy", "tqdm"}

pytestmark = pytest.mark.packaging

# a user's script: two jobs that each need both worker-slots of the only GPU; OPT admits the
# more valuable one (utility 5), and the LP relaxation cannot do better
SCRIPT = textwrap.dedent('''
    import json, sys
    from importlib import metadata, resources

    import oasis_opt
    from oasis_opt.model import DEFAULT_RESOURCES, Instance, Job, Server, Utility
    from oasis_opt.offline import OfflinePolicy, build_milp, lp_bound

    worker = Server("w0", {"gpu": 1, "cpu": 8, "mem": 32, "storage": 100, "bw": 10})
    ps = Server("p0", {"cpu": 8, "mem": 32, "storage": 100, "bw": 10})
    demand = {"gpu": 1, "cpu": 2, "mem": 4, "storage": 1, "bw": 1}
    ps_demand = {"cpu": 1, "mem": 2, "storage": 1, "bw": 1}
    jobs = tuple(Job(name, 1, 1, 2, 1.0, demand, ps_demand, Utility.constant(value))
                 for name, value in (("small", 3.0), ("large", 5.0)))
    inst = Instance(2, DEFAULT_RESOURCES, (worker,), (ps,), jobs)
    model = build_milp(inst)
    sched = OfflinePolicy().solve(inst)
    report = oasis_opt.validate(inst, sched)
    print(json.dumps({
        "valid": report.ok, "utility": sched.total_utility, "admitted": list(map(bool, sched.admitted)),
        "proven": sched.stats["proven_optimal"], "lp_bound": lp_bound(inst),
        "columns": model.lp.n_cols, "py_typed": resources.files("oasis_opt").joinpath("py.typed").is_file(),
        "installed": sorted(d.metadata["Name"].lower() for d in metadata.distributions()),
    }))
''')


def run(*cmd: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory) -> Path:
    uv = Path(sys.executable).with_name("uv")
    if not uv.exists():
        uv = Path(shutil.which("uv") or "")
    if not uv.is_file():
        pytest.fail("uv not found (make install puts it into .venv)")
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src-copy"  # build from a copy: no build/ or egg-info left in the checkout
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "src", src / "src", ignore=shutil.ignore_patterns(
        "__pycache__", "*.egg-info"))
    steps = [
        (uv, "build", "--offline", "--wheel", "--out-dir", tmp / "dist", src),
        (uv, "venv", "--offline", "--quiet", "--python", sys.executable, tmp / "venv"),
    ]
    for cmd in steps:
        res = run(*cmd, cwd=tmp)
        assert res.returncode == 0, f"{cmd[1]} failed (offline: run make install first):\n{res.stderr}"
    wheels = list((tmp / "dist").glob("oasis_opt-*.whl"))
    assert len(wheels) == 1
    res = run(uv, "pip", "install", "--offline", "--python", tmp / "venv" / "bin" / "python",
              "--constraints", ROOT / "requirements" / "lock.txt", wheels[0], cwd=tmp)
    assert res.returncode == 0, res.stderr
    return tmp / "venv"


def test_core_wheel_solves_an_instance_built_in_code(core_venv, tmp_path):
    res = run(core_venv / "bin" / "python", "-c", SCRIPT, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert set(out["installed"]) - {"pip"} == CORE  # the core and nothing else
    assert out["valid"] and out["proven"]
    assert out["admitted"] == [False, True]
    assert out["utility"] == pytest.approx(5.0)
    assert out["lp_bound"] == pytest.approx(5.0, abs=1e-6)
    assert out["columns"] > 0 and out["py_typed"]


@pytest.mark.parametrize("argv, extra", [
    (["solve", "{inst}", "--policy", "oasis", "--backend", "jax", "--out", "r.json"], "jax"),
    (["solve", "{inst}", "--policy", "offline-cpsat", "--out", "r.json"], "cpsat"),
    (["reproduce", "testbed", "--quick", "--workers", "1"], "plots"),
    (["automl", "tasks"], "automl"),
])
def test_core_cli_names_the_missing_extra(core_venv, tmp_path, argv, extra):
    cli = core_venv / "bin" / "oasis-opt"
    inst = tmp_path / "inst.json"
    gen = run(cli, "generate", "--preset", "paper-sim", "--jobs", "3", "--horizon", "10",
              "--seed", "1", "--out", inst, cwd=tmp_path)
    assert gen.returncode == 0, gen.stderr
    res = run(cli, *[a.format(inst=inst) for a in argv], cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("oasis-opt: error: ")
    assert res.stderr.rstrip().endswith(f"install oasis-opt[{extra}]")


def test_core_testing_module_names_the_dev_extra(core_venv, tmp_path):
    res = run(core_venv / "bin" / "python", "-c", "import oasis_opt.testing", cwd=tmp_path)
    assert res.returncode == 1
    assert res.stderr.rstrip().splitlines()[-1] == (
        "oasis_opt._extras.MissingExtra: oasis_opt.testing needs hypothesis: "
        "install oasis-opt[dev]")
