"""``benchmarks/bench_service.py`` runs: a real ``oasis-opt serve --no-execute`` on loopback,
eight clients, a hundred jobs back to back. The numbers are the benchmark's (no test asserts on
seconds); this holds its plumbing: every job accepted, none refused, OASiS never replayed, one
latency window, the slot lines parsed, and the results files written."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

ROOT = Path(__file__).resolve().parents[1]


def test_the_service_load_benchmark_runs_end_to_end(tmp_path):
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_service.py"), "--jobs", "100",
         "--rate", "0", "--no-reference", "--no-saturated", "--poll-rounds", "1", "--max-s", "120",
         "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert out.returncode in (0, 1), out.stderr[-3000:]  # 1: the target missed on a busy box
    doc = json.loads((tmp_path / "service_100.json").read_text())
    (row,) = doc["rows"]
    assert row["policy"] == "oasis" and row["accepted"] == 100 and row["refused"] == 0
    assert row["replays"] == 0
    assert [w["jobs"] for w in row["windows"]] == ["1-100"]
    assert row["slots_decided"] >= 1  # the service's slot lines were read
    md = (tmp_path / "service_100.md").read_text()
    assert "| oasis, back to back | 100 | 0 |" in md
