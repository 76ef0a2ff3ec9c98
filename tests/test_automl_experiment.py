"""``oasis-opt reproduce automl`` end to end on a tiny study: every run stored and reused, the
figures and the markdown drawn, the paired comparison and the summaries consistent."""
from __future__ import annotations

import numpy as np
import pytest

from oasis_opt.training.curves import Curve
from oasis_opt.experiments import automl as exp
from oasis_opt.experiments.reproduce import figure_names, reproduce
from oasis_opt.workloads.traces import TraceJob, TraceMapping, philly_cluster, trace_instance


def tiny_study():
    rng = np.random.default_rng(0)
    out = []
    for t in range(20):
        top = rng.uniform(0.2, 0.95)
        acc = np.clip(top - (top - 0.1) * np.exp(-0.5 * np.arange(1, 11))
                      + rng.normal(0, 0.005, 10), 0, 1)
        out.append(Curve("tiny", t, {"lr": float(rng.uniform(0.001, 0.1)), "opt": "sgd"},
                         tuple(float(a) for a in acc), (1.0,) * 10,
                         tuple(float(s) for s in rng.uniform(0.5, 2.0, 10))))
    return out


def tiny_background(seed, slot_s):
    workers, pss = philly_cluster(racks=1, servers_per_rack=2, ps_per_rack=2)
    jobs = [TraceJob(f"bg-{n}", 600.0 * n, 1800.0, g, {}) for n, g in enumerate((2, 8, 4))]
    return trace_instance(jobs, workers, pss, seed=seed, slot_s=slot_s,
                          mapping=TraceMapping(tail=30))


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(exp, "_curves", lambda study: tiny_study())
    monkeypatch.setattr(exp, "background", tiny_background)
    monkeypatch.setattr(exp, "QUICK", {
        "studies": ("tiny",), "seeds": (0, 1), "workers": 3, "policies": exp.POLICIES,
        "fractions": (0.2, 0.4),
        "cluster": {"study": "tiny", "seeds": (0,), "caps": (16, None),
                    "policies": ("automl-thesis", "asha", "no-stop"), "slot_s": 300.0},
        "priority": {"study": "tiny", "seeds": (0, 1), "cap": 6, "size": 2,
                     "policies": exp.PRIORITY_POLICIES, "slot_s": 300.0}})


def test_reproduce_automl_draws_and_resumes(tiny, tmp_path):
    assert figure_names(["automl"]) == ["automl"]
    assert "automl" not in figure_names(["all"])  # all: the paper's figures
    out, results = tmp_path / "figs", tmp_path / "results"
    written = reproduce(["automl"], quick=True, workers=1, results=results, out=out,
                        progress=False)
    names = sorted(p.name for p in written["automl"])
    assert names == sorted(["automl.md", "automl_cluster.pdf", "automl_cluster.png",
                            "automl_predictors.pdf", "automl_predictors.png",
                            "automl_priority.pdf", "automl_priority.png",
                            "automl_replay.pdf", "automl_replay.png"])
    for p in written["automl"]:
        if p.suffix == ".png":
            assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = (out / "automl.md").read_text()
    for heading in ("## Prediction quality", "## Classification", "## Replayed studies",
                    "## automl-thesis against each rival", "## Ray Tune's schedulers",
                    "## Ranking by the predicted final against ranking by the current value",
                    "## The study inside a shared cluster", "## Resources follow the prediction",
                    "## Commands"):
        assert heading in text
    stored = sorted(p.relative_to(results / "automl").as_posix()
                    for p in (results / "automl").rglob("*.json"))
    assert len(stored) == 1 + 2 * len(exp.POLICIES) + 2 * 3 + 2 * 3
    assert "replay/tiny-automl-thesis-w3-s1.json" in stored
    assert "cluster/tiny-asha-capnone-s0.json" in stored
    data = exp.compute(quick=True, results=results, workers=1, progress=False)
    assert data["computed"] == 0 and data["loaded"] == len(stored)  # a second run reuses all
    # the tables agree with the stored runs
    summary = exp.replay_summary(data, "tiny")
    nostop = summary["no-stop"]
    assert nostop["spent_share"] == pytest.approx(1.0) and nostop["final_regret"] == 0.0
    assert nostop["regret"][-1] == (0.0, 0.0)  # at 100 %: every trial done
    for rival in exp.RIVALS:
        rows = exp.wins(data, "tiny", rival)
        assert [r["budget"] for r in rows] == list(exp.BUDGETS)
        assert all(r["wins"] + r["ties"] + r["losses"] == 2 for r in rows)
        curves = exp.regret_curves(data, "tiny", np.array(exp.BUDGETS))
        np.testing.assert_allclose([r["gain"] for r in rows],
                                   (curves[rival] - curves["automl-thesis"]).mean(axis=0))
    # Tune's schedulers against ours, paired by seed: no-stop spends the whole study and
    # finds the pool's best, so the differences are the Tune policy's own share and regret
    recs = [data["replay"][f"tiny-tune-asha-w3-s{seed}"] for seed in (0, 1)]
    d = exp.paired(data, "tiny", "tune-asha", "no-stop")
    assert d["spent"][0] == pytest.approx(np.mean([r["seconds_spent"] /
                                                   r["seconds_without_stopping"] - 1
                                                   for r in recs]))
    assert d["regret"][0] == pytest.approx(np.mean([r["pool_best"] - r["best_val_accuracy"]
                                                    for r in recs]))
    assert d["spent"][0] < 0  # Tune's ASHA stopped something
    assert exp.paired(data, "tiny", "asha", "asha")["spent"] == (0.0, 0.0, 0.0)
    # the ablation's rows: the controller minus its ablation, one row per curve set
    ablation = text[text.index("## Ranking by the predicted final"):]
    d = exp.paired(data, "tiny", "automl-thesis-rank", "automl-thesis-rank-value")
    row = next(ln for ln in ablation.splitlines() if ln.startswith("| tiny |"))
    assert f"{d['regret'][0]:+.4f} [{d['regret'][1]:+.4f}, {d['regret'][2]:+.4f}]" in row
    cluster = exp.cluster_summary(data)
    assert all(m["valid"] for m in cluster.values())
    assert cluster[("no-stop", 16)]["saved"] == 0.0
    assert cluster[("asha", 16)]["saved"] > 0.0
    assert cluster[("no-stop", 16)]["most_gpus"] <= 16
    # the priority study: every schedule valid, the cap held, the claims computed from the data
    assert "priority/tiny-automl-thesis-elastic-cap6-size2-s1.json" in stored
    prio = exp.priority_summary(data)
    assert all(m["valid"] and m["most_gpus"] <= 6 for m in prio.values())
    recs = [data["priority"][f"tiny-asha-cap6-size2-s{seed}"] for seed in (0, 1)]
    jct = [np.mean(r["background_jct_all_h"]) for r in recs]
    assert prio["asha"]["jct_mean_h"][0] == pytest.approx(np.mean(jct))
    assert all(len(r["background_jct_all_h"]) == r["background_jobs"] == 3 for r in recs)
    d = exp.priority_paired(data, exp.ELASTIC, "asha")
    assert d["gpu_hours"][0] == pytest.approx(prio[exp.ELASTIC]["gpu_hours"][0]
                                              - prio["asha"]["gpu_hours"][0])
    section = text[text.index("## Resources follow the prediction"):]
    claims = [ln for ln in section.splitlines() if ln.startswith(("- ✅", "- ❌"))]
    assert len(claims) == 2 * 5  # five claims against each of ASHA and successive halving


def test_best_at_reads_the_anytime_curve():
    trajectory = [[1.0, 0.5, 0.3], [4.0, 2.0, 0.6], [9.0, 3.0, 0.8]]
    assert exp.best_at(trajectory, 0.5) is None
    assert exp.best_at(trajectory, 4.0) == 0.6
    assert exp.best_at(trajectory, 100.0) == 0.8


def test_resolution_ci_and_verdict():
    """Bug: gains below one validation example (1/360 on the digits) were reported as wins.
    The resolution of the shipped digits set is one of its 360 validation images; a CI that
    contains 0 supports no difference, one inside +-1 example is flagged."""
    from oasis_opt.training.curves import read_curves, shipped_curves

    res = exp.accuracy_resolution(read_curves(shipped_curves()["digits-mlp"]))
    assert res == pytest.approx(1 / 360, abs=1e-6)
    mean, low, high = exp.mean_ci([0.0005, 0.001, 0.0015, -0.0005])
    assert mean == pytest.approx(0.000625) and low < 0 < high
    assert high - mean == pytest.approx(3.182446 * np.std([0.0005, 0.001, 0.0015, -0.0005], ddof=1)
                                        / 2, rel=1e-5)
    assert exp.verdict(low, high, res) == "no difference shown (< 1 val. example)"
    assert exp.verdict(0.001, 0.004, res) == "automl-thesis better"
    assert exp.verdict(-0.02, -0.01, res, rival="asha") == "asha better"


def test_budget_ranges_name_the_budgets_on_the_front():
    """Bug caught: the targets table naming budgets where the controller is not on the front
    (an off-by-one at a range's end, a lone budget printed as a range, a last range that runs
    to the grid's end dropped)."""
    from oasis_opt.experiments.figures.automl import GRID, budget_ranges

    assert (GRID[0], GRID[-1], len(GRID)) == (0.005, 1.0, 80)

    n = len(GRID)
    on = [False] * n
    assert budget_ranges(on) == "none"
    on[0] = on[1] = on[2] = True
    on[10] = True
    on[n - 2] = on[n - 1] = True
    # GRID: 80 budgets log-spaced from 0.5 % to 100 %
    assert budget_ranges(on) == "0.5-0.57 %, 0.98 %, 94-100 %"
    assert budget_ranges([True] * n) == "0.5-100 %"


def test_figures_show_the_controller_and_keep_legends_off_the_bars(tiny, tmp_path):
    """Bugs: automl-thesis's line hid under no-stop's; the cluster figure's legend covered a
    bar."""
    from oasis_opt.experiments.figures import automl as figs

    data = exp.compute(quick=True, results=tmp_path, workers=1, progress=False)
    fig = figs.replay_figure(data)
    lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
    ours = lines["automl-thesis"]
    assert all(ours.get_zorder() > ln.get_zorder() for k, ln in lines.items()
               if k not in exp.OURS)
    assert ours.get_linewidth() > lines["no-stop"].get_linewidth()
    fig = figs.cluster_figure(data, exp.cluster_summary(data))
    fig.draw_without_rendering()
    bars_ax = fig.axes[1]
    legend = bars_ax.get_legend().get_window_extent()
    for bar in bars_ax.patches:
        assert not legend.overlaps(bar.get_window_extent())
