"""Estimated OASiS pricing through the runner (``experiments.calibration``) against the
in-process estimator (``online.estimate.estimate_pricing``): same history, same grid, same
chosen floor and the same pricing document."""
from __future__ import annotations

import pytest

from oasis_opt.experiments.calibration import (FloorEstimate, calibration_specs, history_seeds,
                                               resolve_all, scaled_document)
from oasis_opt.experiments.runner import run_sweep
from oasis_opt.online.estimate import estimate_pricing
from oasis_opt.workloads import paper_sim

WORKLOAD = {"jobs": 12, "horizon": 60, "worker_servers": 2, "ps_servers": 2,
            "calibration": "calibrated", "arrivals": "uniform"}
GRID = (1e-5, 1e-3, 1e-1)


def test_runner_calibration_equals_in_process_estimate(tmp_path):
    est = FloorEstimate("paper_sim", WORKLOAD, seeds=(1000, 1001), grid=GRID)
    specs = est.specs()
    assert len(specs) == len(GRID) * 2 and {s.policy for s in specs} == {"oasis"}
    sweep = run_sweep(specs, tmp_path, workers=1, progress=False)  # validated, stored
    doc = est.resolve(sweep.records)
    direct = estimate_pricing([paper_sim(**WORKLOAD, seed=s) for s in (1000, 1001)], GRID)
    assert doc == direct
    calibration = doc.calibration
    assert calibration.scores == direct.calibration.scores
    assert calibration.chosen == direct.calibration.chosen
    assert resolve_all([est], sweep.records)[est.key] == doc
    assert calibration_specs([est, est]) == specs + specs


def test_estimate_key_and_checks():
    a = FloorEstimate("paper_sim", WORKLOAD)
    assert a.key == FloorEstimate("paper_sim", dict(reversed(list(WORKLOAD.items())))).key
    assert a.key != FloorEstimate("paper_sim", WORKLOAD, seeds=(7,)).key
    assert a.key != FloorEstimate("paper_sim", {**WORKLOAD, "jobs": 13}).key
    assert a.seeds == history_seeds(False) and history_seeds(True) == (1000,)
    with pytest.raises(ValueError, match="without its seed"):
        FloorEstimate("paper_sim", {**WORKLOAD, "seed": 0})
    with pytest.raises(ValueError, match="at least one seed"):
        FloorEstimate("paper_sim", WORKLOAD, seeds=())
    with pytest.raises(ValueError, match="grid"):
        FloorEstimate("paper_sim", WORKLOAD, grid=(1e-3, -1.0))


def test_scaled_document():
    doc = {"format": "oasis-opt/pricing@1", "U_worker": {"gpu": 10.0}, "U_ps": {"cpu": 4.0},
           "L_worker": 1e-3, "L_ps": 1e-3}
    both = scaled_document(doc, 5.0, 5.0)
    assert both["U_worker"] == {"gpu": 50.0} and both["U_ps"] == {"cpu": 20.0}
    assert both["L_worker"] == both["L_ps"] == pytest.approx(5e-3)
    u_only = scaled_document(doc, 0.2)
    assert u_only["L_worker"] == 1e-3 and u_only["U_worker"]["gpu"] == pytest.approx(2.0)
    assert doc["U_worker"] == {"gpu": 10.0}  # the original is untouched
