"""The notebooks (jupytext percent-format .py files) run as the README says, from the
``notebooks`` extra: executed by ``jupytext --to ipynb --execute`` (nbconvert + ipykernel), and
opened as notebooks by a real Jupyter server (jupytext's contents manager)."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.py"))
BIN = Path(sys.executable).parent


def test_there_are_notebooks():
    assert {p.stem for p in NOTEBOOKS} >= {"01_api_tour", "02_oasis_pricing"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes_with_the_readme_command(path, tmp_path):
    # a copy, so the .ipynb it writes stays out of the checkout
    (tmp_path / "notebooks").mkdir()
    shutil.copy(path, tmp_path / "notebooks" / path.name)
    rel = f"notebooks/{path.name}"
    env = {**os.environ, "MPLBACKEND": "Agg", "JAX_PLATFORMS": "cpu"}
    res = subprocess.run([str(BIN / "jupytext"), "--to", "ipynb", "--execute", rel],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    nb = nbformat.read(tmp_path / "notebooks" / f"{path.stem}.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.get("execution_count") for c in code)
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, token: str) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, b""


def test_notebooks_open_as_notebooks_in_jupyter(tmp_path):
    """``jupyter lab notebooks/`` in the README: the server (the one JupyterLab runs on, with
    the extensions the extra installs) serves each .py as a notebook with a Python kernel."""
    port, token = _free_port(), "oasis-opt-test"
    base = f"http://127.0.0.1:{port}"
    with open(tmp_path / "server.log", "w") as log:
        server = subprocess.Popen(
            [str(BIN / "jupyter"), "server", "--no-browser", "--allow-root", f"--port={port}",
             "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}",
             f"--ServerApp.root_dir={ROOT}", "--ServerApp.port_retries=0"],
            stdout=subprocess.DEVNULL, stderr=log,
            env={**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")})
    try:
        for _ in range(600):  # up to a minute for the server to answer
            if server.poll() is not None:
                pytest.fail("jupyter server exited:\n" + (tmp_path / "server.log").read_text())
            try:
                if _get(f"{base}/api/status", token)[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        else:
            pytest.fail("jupyter server did not answer within a minute")
        assert _get(f"{base}/lab", token)[0] == 200  # the JupyterLab application
        kernels = json.loads(_get(f"{base}/api/kernelspecs", token)[1])["kernelspecs"]
        for path in NOTEBOOKS:
            status, body = _get(f"{base}/api/contents/notebooks/{path.name}"
                                "?type=notebook&content=1", token)
            assert status == 200, path.name
            model = json.loads(body)
            assert model["type"] == "notebook"
            assert sum(c["cell_type"] == "code" for c in model["content"]["cells"]) > 0
            assert model["content"]["metadata"]["kernelspec"]["name"] in kernels
    finally:
        server.terminate()
        server.wait(timeout=30)
