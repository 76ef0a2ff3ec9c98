"""The Fig. 4 diagnosis (``oasis_opt.experiments.fig4_load``, run by ``experiments/fig4_load.py``):
its ceiling argument, on small instances."""
from __future__ import annotations

import pytest

from oasis_opt.experiments import fig4_load as study
from oasis_opt.experiments.runner import compute_run
from oasis_opt.experiments.spec import RunSpec


@pytest.mark.parametrize("calibration", ["calibrated", "literal"])
@pytest.mark.parametrize("policy", ["fifo", "drf"])
def test_no_policy_median_exceeds_the_nothing_completes_ceiling(calibration, policy):
    seeds = (0, 1)
    records = [compute_run(RunSpec("paper_sim", study.params(calibration, 30, s), policy,
                                   metrics=("timeliness",))) for s in seeds]
    row = study.policy_row(records)
    ceiling = study.instance_row(calibration, 30, seeds)
    for c in study.CLASSES:
        # every job of the class is counted once, completed or at T
        jobs = sum(len(r["metrics"]["timeliness"]["completed"].get(c, []))
                   + len(r["metrics"]["timeliness"]["censored"].get(c, [])) for r in records)
        assert row[c]["jobs"] == jobs > 0
        assert row[c]["completed"] <= row[c]["jobs"]
        # a completed job's lateness is at most its own T - a - gamma3, so the median is too
        assert row[c]["median_at_T"] <= ceiling["never"][c] + 1e-9
    assert ceiling["load"] > 0
