"""experiments/fig4_load.py: the ceiling argument of the Fig. 4 diagnosis, on small instances."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from oasis_opt.experiments.runner import compute_run
from oasis_opt.experiments.spec import RunSpec

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("fig4_load_script",
                                                  REPO / "experiments" / "fig4_load.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("calibration", ["calibrated", "literal"])
@pytest.mark.parametrize("policy", ["fifo", "drf"])
def test_no_policy_median_exceeds_the_nothing_completes_ceiling(script, calibration, policy):
    seeds = (0, 1)
    records = [compute_run(RunSpec("paper_sim", script.params(calibration, 30, s), policy,
                                   metrics=("timeliness",))) for s in seeds]
    row = script.policy_row(records)
    ceiling = script.instance_row(calibration, 30, seeds)
    for c in script.CLASSES:
        # every job of the class is counted once, completed or at T
        jobs = sum(len(r["metrics"]["timeliness"]["completed"].get(c, []))
                   + len(r["metrics"]["timeliness"]["censored"].get(c, [])) for r in records)
        assert row[c]["jobs"] == jobs > 0
        assert row[c]["completed"] <= row[c]["jobs"]
        # a completed job's lateness is at most its own T - a - gamma3, so the median is too
        assert row[c]["median_at_T"] <= ceiling["never"][c] + 1e-9
    assert ceiling["load"] > 0
