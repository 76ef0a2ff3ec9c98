"""The plan's speed calibration (``runtime.calibrate``) without Ray: the quantile by hand, the
refusals, the stored document, and the study's reuse rule. Its real run is in
``test_runtime_executor.py`` (the quick fidelity study calibrates before planning) and
``test_calibration_measures_a_profile_that_is_too_fast`` there."""
from __future__ import annotations

import json

import pytest

from oasis_opt.runtime.calibrate import Calibration, calibration_instances, slowdown_of


def test_the_slowdown_is_the_quantile_of_the_ratios():
    """Ratios 1, 2, 3, 4, 5: the 0.9 quantile by linear interpolation is 4 + 0.6 = 4.6, the
    median 3, the top 5. Non-finite, zero and missing ratios are left out (a job-slot without a
    prediction). Bug caught: the median or the mean planned with, or a slot without a
    prediction counted as a ratio of 0 or inf."""
    r = [3.0, 1.0, 5.0, None, float("nan"), 0.0, 2.0, 4.0, float("inf")]
    assert slowdown_of(r, 0.9) == pytest.approx(4.6)
    assert slowdown_of(r, 0.5) == pytest.approx(3.0)
    assert slowdown_of(r, 1.0) == pytest.approx(5.0)


@pytest.mark.parametrize("ratios, quantile, field", [
    ([], 0.9, "ratios"), ([0.0, None], 0.9, "ratios"), ([1.0], 0.0, "quantile"),
    ([1.0], 1.5, "quantile"), ([1.0], True, "quantile")])
def test_a_calibration_without_ratios_or_with_a_bad_quantile_is_refused(ratios, quantile,
                                                                        field):
    """Bug caught: a calibration that ran no job-slot silently planning at slowdown 1 (or nan),
    or a quantile of 0 (the fastest job-slot) accepted."""
    with pytest.raises(ValueError, match=field):
        slowdown_of(ratios, quantile)


def test_the_stored_calibration_round_trips_and_is_reused_only_for_its_instance(tmp_path):
    """The study stores each load's calibration and reuses it only when it was measured for the
    same calibration instance (profiles and slot length) and quantile. Bug caught: a calibration
    measured with another profile, slot length or quantile reused for a new plan."""
    from oasis_opt.experiments import testbed_real as study
    from test_costmodel_profile import profile as synthetic_profile

    s = dict(study.QUICK)
    profiles = [synthetic_profile()]
    runs = calibration_instances(profiles, slot_s=s["slot_s"])
    cal = Calibration(1.7, s["quantile"], (1.0, 1.5, 1.8), (0.5, 1.0), 12.0,
                      {"instances_sha256": [inst.fingerprint for _, inst in runs]})
    assert Calibration.from_json(json.loads(json.dumps(cal.to_json()))) == cal
    path = tmp_path / "calibration-quiet.json"
    path.write_text(json.dumps(cal.to_json()))
    assert study._stored_calibration(path, profiles, s) == cal
    assert study._stored_calibration(path, profiles, {**s, "slot_s": 2 * s["slot_s"]}) is None
    assert study._stored_calibration(path, profiles, {**s, "quantile": 0.5}) is None
    assert study._stored_calibration(tmp_path / "missing.json", profiles, s) is None
    # a calibration measured on the full slots alone (before the (4, 2)-alone run was added)
    path.write_text(json.dumps(Calibration(
        1.7, s["quantile"], (1.0,), (0.5, 1.0), 12.0,
        {"instances_sha256": [runs[0][1].fingerprint]}).to_json()))
    assert study._stored_calibration(path, profiles, s) is None
    path.write_text(json.dumps({**cal.to_json(), "format": "other"}))
    assert study._stored_calibration(path, profiles, s) is None


def test_the_calibration_runs_cover_the_full_slot_and_the_big_job_alone():
    """The calibration runs the packings the policies give the preset's jobs: under DRF, two
    jobs of 2 workers and 1 PS side by side fill every slot (4 worker and 2 PS containers, as
    the preset's chunk times assume; 10 job-slots), and under FIFO one job of 4 workers and 2
    PSs runs alone in every slot (4 job-slots). Bug caught: a calibration on full slots alone,
    which planned the study's first jobs (alone on the cluster, the packing the contention
    model predicts worst) too fast, so their completions moved a slot; or a calibration too
    small to load the machine as the plans do."""
    from oasis_opt import solve
    from test_costmodel_profile import profile as synthetic_profile

    packings = []
    for policy, inst in calibration_instances([synthetic_profile()], slot_s=1.0):
        sched = solve(inst, policy)
        w = sched.allocations.workers_per_job_slot(inst.I, inst.horizon)[:, 1:]
        p = sched.allocations.ps_per_job_slot(inst.I, inst.horizon)[:, 1:]
        packings.append((policy, [sorted((int(w[j, t]), int(p[j, t])) for j in range(inst.I)
                                         if w[j, t]) for t in range(inst.horizon)]))
    assert packings == [("drf", [[(2, 1), (2, 1)]] * 5), ("fifo", [[(4, 2)]] * 4)]


def test_generate_plans_with_a_calibrations_slowdown(tmp_path):
    """``generate --slowdown CALIBRATION`` multiplies the chunk times by the calibration's
    slowdown (the same jobs: epochs unchanged); a file that is not a calibration and a word
    that is neither are refused naming the option. Bug caught: the file's slowdown ignored
    (chunk times unchanged) or a stray file read as slowdown 1."""
    from oasis_opt.cli import main
    from oasis_opt.costmodel.profile import save_profile
    from oasis_opt.model.io import load_instance
    from test_costmodel_profile import profile as synthetic_profile

    save_profile(synthetic_profile(), tmp_path / "p.json")
    (tmp_path / "cal.json").write_text(json.dumps(
        Calibration(1.75, 0.9, (1.0, 1.75), (0.0, 0.0), 1.0).to_json()))
    base = ["generate", "--preset", "testbed-real", "--profile", str(tmp_path / "p.json"),
            "--seed", "1"]
    assert main(base + ["--out", str(tmp_path / "plain.json")]) == 0
    assert main(base + ["--slowdown", str(tmp_path / "cal.json"),
                        "--out", str(tmp_path / "slow.json")]) == 0
    plain, slow = load_instance(tmp_path / "plain.json"), load_instance(tmp_path / "slow.json")
    assert [j.chunk_time for j in slow.jobs] == pytest.approx(
        [1.75 * j.chunk_time for j in plain.jobs])
    assert [j.epochs for j in slow.jobs] == [j.epochs for j in plain.jobs]
    (tmp_path / "other.json").write_text("{}")
    for bad in (str(tmp_path / "other.json"), "fast"):
        assert main(base + ["--slowdown", bad, "--out", str(tmp_path / "x.json")]) == 2
        assert not (tmp_path / "x.json").exists()
