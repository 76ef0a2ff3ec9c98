"""Every command block of README.md runs as written.

Each ```bash block runs line by line, in order, in a fresh directory (as a user in a fresh clone
would: the paths are relative, e.g. ``out/inst.json``); each ```python block runs as a script.
A command is run unless it is in ``SKIP`` below, which says why; a bash line that is neither
an ``oasis-opt`` command nor in ``SKIP`` fails the test, so a new README command is covered
(or consciously skipped) the day it is written.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

# command (as written, without its comment) -> why the test does not run it
SKIP = {
    "make demo": "the Makefile itself (CI runs make test; make demo runs the same CLI commands)",
    "make test": "the Makefile itself: this test runs inside it",
    "make docs": "the Makefile itself (CI runs make docs)",
    "oasis-opt reproduce fig3 fig6": "documented as full size (hours)",
    "oasis-opt reproduce all --address HOST:PORT": "needs a running Ray cluster at HOST:PORT",
    # the two-machine recipe: tests/test_ray_cluster.py starts the same two nodes on this machine
    # (with their own ports and token) and runs execute and reproduce --quick through --address
    "ray get-auth-token --generate": "writes the user's ~/.ray/auth_token; the cluster test "
                                     "gives its nodes a token of their own",
    "export RAY_AUTH_MODE=token": "sets the shell's environment; tests/test_ray_cluster.py sets "
                                  "it for its nodes and drivers",
    'ray start --head --port 6379 --resources {"server:w-00": 64, "server:w-01": 64}':
        "a Ray node on fixed ports, shared by every user of the machine; "
        "tests/test_ray_cluster.py starts its head on free ports",
    'ray start --address HEAD:6379 --resources {"server:ps-00": 64}':
        "needs the head above; tests/test_ray_cluster.py starts its second node",
    "oasis-opt execute inst.json drf.json --slot-s 2 --address HEAD:6379 --out drf-cluster.json":
        "needs the cluster above; tests/test_ray_cluster.py runs execute --address on its "
        "two-node cluster",
    "oasis-opt reproduce testbed --quick --address HEAD:6379":
        "needs the cluster above; tests/test_ray_cluster.py runs this sweep on its two-node "
        "cluster",
    "oasis-opt automl curves --task digits-mlp --trials 250 --epochs 40 --seed 0 --progress "
    "--out curves.csv": "documented as 7 minutes of training (the shipped digits-mlp set); "
                        "tests/test_automl_tasks.py runs the same command on a small study",
    "oasis-opt reproduce testbed-real": "documented as minutes of real training (its output is "
                                        "paper_figs/testbed-real.md); the executor and the "
                                        "profile run in this block and in "
                                        "tests/test_runtime_executor.py",
    "oasis-opt execute degrade.json degrade-sched.json --open-loop --slot-s 0.5 --out degrade-report.json":
        "tests/test_runtime_degrade.py runs this schedule on Ray (in process, keeping the "
        "executor for its parameters); test_runtime_executor.py runs `oasis-opt execute`",
    "oasis-opt serve --cluster cluster.json --policy oasis --pricing pricing.json --slot-s 4 "
    "--state state.db": "a server that runs until stopped: tests/test_service_live.py runs it "
                        "(killed and restarted), with submit and status against it",
    "oasis-opt submit job.json --url http://127.0.0.1:8000": "needs the running service above",
    "oasis-opt status --url http://127.0.0.1:8000": "needs the running service above",
    "make case-study": "the Makefile itself: it runs `oasis-opt case-study`, which "
                       "tests/test_case_study.py runs (small) and checks",
    "oasis-opt case-study --trials 16 --concurrent 3 --jobs 4 --horizon 200 --out out/cs-big":
        "minutes of real training on Ray; tests/test_case_study.py runs a small case study",
    "oasis-opt predict out/case-study/model.npz out/case-study/heldout-images.npy --labels "
    "out/case-study/heldout-labels.npy": "needs the outputs of the case study above; "
                                         "tests/test_case_study.py runs it on them",
    "jupyter lab notebooks/": "starts a server for a browser; tests/test_notebooks.py opens "
                              "the notebooks through a real Jupyter server",
    "jupytext --to ipynb --execute notebooks/01_api_tour.py":
        "tests/test_notebooks.py runs this command on every notebook",
}


def blocks(lang: str) -> list[tuple[str, str]]:
    """(section heading, code) of every ```lang block of the README, in order."""
    out, heading = [], ""
    text = (ROOT / "README.md").read_text()
    for m in re.finditer(r"^(#+ [^\n]*)$|^```(\w*)\n(.*?)^```$", text, re.M | re.S):
        if m.group(1):
            heading = m.group(1).lstrip("# ")
        elif m.group(2) == lang:
            out.append((heading, m.group(3)))
    return out


def commands(code: str) -> list[str]:
    """The commands of a bash block: one per line, comments and continuation lines dropped."""
    out = []
    for line in code.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            out.append(" ".join(words))
    return out


BASH = blocks("bash")
PYTHON = blocks("python")


def test_the_readme_has_the_blocks_this_test_expects():
    assert len(BASH) >= 4 and len(PYTHON) >= 1
    written = {c for _, code in BASH for c in commands(code)}
    assert set(SKIP) <= written, f"SKIP names commands the README no longer has: {set(SKIP) - written}"


def slug(heading: str) -> str:
    return re.sub(r"\W+", "-", heading.lower()).strip("-")


# Hang guards only (seconds), never speed checks: a README block may run the whole quick
# reproduction, 2-3 minutes on 2 idle cores and over 10 with both cores busy elsewhere.
COMMAND_GUARD_S = 1800
BLOCK_GUARD_S = 7200


# commands that start a local Ray (their blocks join the suite's Ray unit, tests/conftest.py)
RAY_COMMANDS = ("oasis-opt execute", "oasis-opt profile", "oasis-opt calibrate",
                "oasis-opt case-study", "oasis-opt serve", "oasis-opt reproduce testbed-real")


def starts_ray(code: str) -> bool:
    """Whether a block runs a command of ``RAY_COMMANDS`` (one not in ``SKIP``)."""
    return any(c.startswith(RAY_COMMANDS) for c in commands(code) if c not in SKIP)


@pytest.mark.timeout(BLOCK_GUARD_S)
@pytest.mark.parametrize("heading, code", [
    pytest.param(h, c, marks=[pytest.mark.ray] if starts_ray(c) else [],
                 id=f"bash{n}-{slug(h)}") for n, (h, c) in enumerate(BASH)])
def test_bash_block_runs_as_written(heading, code, tmp_path):
    env = {**os.environ, "MPLBACKEND": "Agg", "JAX_PLATFORMS": "cpu"}
    ran = 0
    for command in commands(code):
        if command in SKIP:
            continue
        argv = shlex.split(command)
        assert argv[0] == "oasis-opt", (f"README section {heading!r}: {command!r} is neither an "
                                        "oasis-opt command nor in SKIP")
        res = subprocess.run([str(BIN / "oasis-opt"), *argv[1:]], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=COMMAND_GUARD_S)
        assert res.returncode == 0, f"{command}\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}"
        ran += 1
    if ran == 0:
        assert all(c in SKIP for c in commands(code))


@pytest.mark.timeout(BLOCK_GUARD_S)
@pytest.mark.parametrize("heading, code", PYTHON, ids=[f"python-{n}" for n in range(len(PYTHON))])
def test_python_block_runs_as_written(heading, code, tmp_path):
    env = {**os.environ, "MPLBACKEND": "Agg", "JAX_PLATFORMS": "cpu"}
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=COMMAND_GUARD_S)
    assert res.returncode == 0, res.stderr[-3000:]
