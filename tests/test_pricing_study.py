"""The pricing study (``experiments.pricing``, ``oasis-opt reproduce pricing``; issue #29).

Its stored utilities are held against direct solves (the runner's calibration against
``online.estimate_pricing``, the plug-in against ``plugin_pricing``, a baseline against its own
solve), its summary against hand-computed means and paired differences, its claims against
numbers that make them fail, and its seeds against every other figure's.
"""
from __future__ import annotations

import math

import pytest

from oasis_opt.experiments import fig3, fig4, fig5, hetero, pricing, ratio, testbed
from oasis_opt.experiments.calibration import (HISTORY_SEEDS, SMALL_HISTORY_SEEDS,
                                               calibration_specs, history_seeds, resolve_all)
from oasis_opt.experiments.figures import EXTRA_NAMES, FIGURE_NAMES
from oasis_opt.experiments.figures import pricing as figure
from oasis_opt.experiments.reproduce import reproduce
from oasis_opt.experiments.runner import run_sweep
from oasis_opt.online import (DEFAULT_FLOOR_GRID, OasisPolicy, estimate_pricing, history_u,
                              plugin_pricing, pricing_document)
from oasis_opt.online.adaptive import AdaptiveOasisPolicy
from oasis_opt.policies import get_policy
from oasis_opt.workloads import paper_fig5, paper_sim

TINY = {
    **pricing.QUICK,
    "seeds": (500,),
    "workloads": (
        pricing.Workload("paper-sim 6 jobs", "paper-sim", "paper_sim",
                         {"jobs": 6, "horizon": 30, "worker_servers": 2, "ps_servers": 2,
                          "calibration": "calibrated", "arrivals": "uniform"}),
        pricing.Workload("paper-fig5 3 servers", "paper-fig5", "paper_fig5", {"servers": 3},
                         small=True, opt=True),
    )}


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(pricing, "QUICK", TINY)


def test_tiny_study_is_drawn_and_its_numbers_are_the_direct_solves(tiny, tmp_path, monkeypatch):
    """Catches a rule priced from the wrong history or the wrong document (the runner's
    searched floor must be online.estimate_pricing's, the plug-in plugin_pricing's), a run
    filed under the wrong series or seed, a page without its claims, and titles cut at the
    figure's edges."""
    from oasis_opt.experiments.figures import common

    clipped: list[str] = []
    real = common.save

    def recording(fig, out_dir, stem):
        paths = real(fig, out_dir, stem)
        clipped.extend(common.clipped_titles(fig))
        return paths

    monkeypatch.setattr(figure, "save", recording)
    results, out = tmp_path / "results", tmp_path / "out"
    written = reproduce(["pricing"], quick=True, workers=1, results=results, out=out,
                        progress=False)
    paths = {p.suffix: p for p in written["pricing"]}
    assert set(paths) == {".png", ".pdf", ".md"}
    assert paths[".png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = paths[".md"].read_text()
    assert "The study's claims, checked on these runs:" in text
    assert text.count("✅") + text.count("❌") == len(figure.claims(_summary(results)))
    assert not (out / "reproduce.md").exists()  # an extra experiment's page is its own log
    assert clipped == []

    specs, records, estimated = _sweeps(results)
    values = pricing.collect(specs, records)
    for w in TINY["workloads"]:
        gen = paper_sim if w.generator == "paper_sim" else paper_fig5
        history = [gen(**w.params, seed=s) for s in history_seeds(True, w.small)]
        inst = gen(**w.params, seed=500)
        searched = OasisPolicy(pricing=estimate_pricing(history)).solve(inst)
        plugin = OasisPolicy(pricing=plugin_pricing(history)).solve(inst)
        est = estimate_pricing(history)
        adaptive = AdaptiveOasisPolicy(pricing=dict(est), prior=est.calibration).solve(inst)
        by_floor = [OasisPolicy(pricing=pricing_document(history_u(history), L)).solve(
            inst).total_utility for L in DEFAULT_FLOOR_GRID]
        hindsight = max(by_floor)
        if w.opt:  # the per-instance diagnosis: the first (smallest) best floor, admissions
            (diag,) = [d for d in pricing.floor_diagnostics(specs, records,
                                                                  estimated, True)
                       if d["workload"] == w.name]
            assert diag["hindsight_floor"] == DEFAULT_FLOOR_GRID[by_floor.index(hindsight)]
            assert diag["searched_floor"] == estimate_pricing(history)["L_worker"]
            assert diag["admitted"][pricing.SEARCHED] == sum(searched.admitted)
            assert diag["admitted"]["offline"] == sum(get_policy("offline").solve(inst).admitted)
            assert diag["switches"] == adaptive.stats["adaptive"]["switches"]
            assert f"| {w.name} | 500 | {diag['hindsight_floor']:.2g} |" in text
        oracle = OasisPolicy().solve(inst)
        assert values[(w.name, pricing.SEARCHED)][500] == pytest.approx(searched.total_utility,
                                                                        abs=1e-9)
        assert values[(w.name, pricing.PLUGIN)][500] == pytest.approx(plugin.total_utility,
                                                                      abs=1e-9)
        assert values[(w.name, pricing.ORACLE)][500] == pytest.approx(oracle.total_utility,
                                                                      abs=1e-9)
        assert values[(w.name, pricing.ADAPTIVE)][500] == pytest.approx(
            adaptive.total_utility, abs=1e-9)
        # the study's adaptive run has the history's calibration as its prior (catches the
        # prior dropped on the way, which on some instances earns the same)
        (spec,) = [sp for sp in specs if sp.tags == {"workload": w.name, "seed": 500,
                                                     "series": pricing.ADAPTIVE}]
        prior = records[spec.key]["stats"]["adaptive"]["prior"]
        assert prior is not None and prior["mean_utility"] == list(est.calibration.mean)
        assert prior["history_jobs"] == pytest.approx(sum(h.I for h in history) / len(history))
        # the hindsight floor: the best plain OASiS run over the grid, on the instance itself
        assert values[(w.name, pricing.HINDSIGHT)][500] == pytest.approx(hindsight, abs=1e-9)
        assert values[(w.name, "rrh")][500] == pytest.approx(
            get_policy("rrh").solve(inst).total_utility, abs=1e-9)
        assert ((w.name, "offline") in values) == w.opt
    opt = values[("paper-fig5 3 servers", "offline")][500]
    assert all(values[("paper-fig5 3 servers", s)][500] <= opt + 1e-6
               for s in pricing.RULES + pricing.BASELINES)


def _values(results):
    return pricing.collect(*_sweeps(results)[:2])


def _sweeps(results):
    s = pricing.settings(True)
    estimates = pricing.estimates(True)
    calibration = run_sweep(calibration_specs(estimates), results, workers=1, progress=False)
    assert not calibration.computed  # all stored by the reproduce above
    estimated = resolve_all(estimates, calibration.records)
    specs = pricing.runs(True, estimated)
    sweep = run_sweep(specs, results, workers=1, progress=False)
    assert not sweep.computed
    assert len(specs) == sum(10 + w.opt for w in s["workloads"]) * len(s["seeds"])
    return specs, sweep.records, estimated


def _summary(results):
    s = pricing.settings(True)
    return figure.summarize(_values(results), s["workloads"], s["seeds"])


def _workloads():
    return (pricing.Workload("sim A", pricing.FIG3_FAMILY, "paper_sim"),
            pricing.Workload("f5", "paper-fig5", "paper_fig5", small=True, opt=True))


def _hand_values(oasis_a=(10.0, 14.0, 12.0)):
    """Three seeds; on "sim A" DRF (mean 11) is the best baseline; on "f5" RRH (mean 5)."""
    v = {}
    seeds = (1, 2, 3)
    per = {"sim A": {pricing.SEARCHED: oasis_a, pricing.PLUGIN: (9.0, 9.0, 9.0),
                     pricing.ADAPTIVE: (11.0, 11.0, 11.0), pricing.HINDSIGHT: (12.0, 15.0, 13.0),
                     pricing.ORACLE: (1.0, 2.0, 3.0), "drf": (10.0, 12.0, 11.0),
                     "dorm": (10.0, 10.0, 10.0)},
           "f5": {pricing.SEARCHED: (4.0, 6.0, 5.0), pricing.PLUGIN: (5.0, 5.0, 5.0),
                  pricing.ADAPTIVE: (4.0, 4.0, 4.0), pricing.HINDSIGHT: (6.0, 6.0, 6.0),
                  pricing.ORACLE: (2.0, 2.0, 0.0), "rrh": (5.0, 5.0, 5.0),
                  "offline": (8.0, 9.0, 10.0)}}
    for w, rows in per.items():
        for b in pricing.BASELINES:
            rows.setdefault(b, (0.5, 0.5, 0.5))
        for series, us in rows.items():
            v[(w, series)] = dict(zip(seeds, us))
    return v, seeds


def test_summary_is_the_hand_computed_means_and_paired_differences():
    """Catches a best baseline picked by something other than its mean, an unpaired
    difference (difference of means is the same, but its interval is not: held below), and
    OPT/OASiS computed on sums, or with OASiS at 0 treated as anything but infinite."""
    v, seeds = _hand_values()
    s = figure.summarize(v, _workloads(), seeds)
    a, f5 = s["sim A"], s["f5"]
    assert a["best_baseline"] == "drf" and f5["best_baseline"] == "rrh"
    assert a["series"][pricing.SEARCHED][0] == pytest.approx(12.0)
    assert a["vs_best"][pricing.SEARCHED][0] == pytest.approx(1.0)   # (0 + 2 + 1) / 3
    assert a["vs_best"][pricing.PLUGIN][0] == pytest.approx(-2.0)
    # paired: the per-seed differences 0, 2, 1 bound the interval; unpaired would not
    lo, hi = a["vs_best"][pricing.SEARCHED][1:]
    assert 0.0 <= lo <= 1.0 <= hi <= 2.0
    assert "opt_ratio" not in a
    assert f5["opt_ratio"][pricing.SEARCHED][0] == pytest.approx((2 + 1.5 + 2) / 3)
    assert f5["opt_ratio"][pricing.PLUGIN][0] == pytest.approx((1.6 + 1.8 + 2.0) / 3)
    assert math.isinf(f5["opt_ratio"][pricing.ORACLE][0])
    ranking = figure.rule_ranking(s)
    # geometric means: searched sqrt(12/11 * 5/5), plug-in sqrt(9/11 * 5/5), oracle ~0
    # adaptive: sqrt(11/11 * 4/5) = 0.894 < plug-in's 0.905
    assert [r for r, _, _ in ranking] == [pricing.SEARCHED, pricing.PLUGIN, pricing.ADAPTIVE,
                                          pricing.ORACLE]
    assert a["of_hindsight"][0] == pytest.approx(33 / 40)  # ratio of sums
    assert f5["opt_ratio"][pricing.HINDSIGHT][0] == pytest.approx((8 + 9 + 10) / 18)
    assert ranking[0][1] == pytest.approx(math.sqrt(12 / 11))
    assert ranking[0][2] == 2 and ranking[1][2] == 0  # f5: a tie (5 = 5), the first rule wins
    assert ranking[2][2] == 0


def test_claims_fail_when_the_numbers_say_so():
    """The Fig. 3 claim is the issue's "Done when": it must turn ❌ when the default rule's mean
    falls below the best baseline's at one size, and its CI claim when the interval reaches 0."""
    v, seeds = _hand_values()
    claims = {c[0][:40]: c[1] for c in figure.claims(figure.summarize(v, _workloads(), seeds))}
    fig3_claim = next(k for k in claims if k.startswith("With the default rule OASiS's mean t"))
    assert claims[fig3_claim]
    v, seeds = _hand_values(oasis_a=(10.0, 11.0, 11.5))  # mean 10.83 < DRF's 11
    claims = {c[0][:40]: c[1] for c in figure.claims(figure.summarize(v, _workloads(), seeds))}
    assert not claims[fig3_claim]
    v, seeds = _hand_values(oasis_a=(9.0, 14.0, 12.0))   # mean above, one seed below: CI reaches 0
    checked = figure.claims(figure.summarize(v, _workloads(), seeds))
    assert checked[1][1] and not checked[2][1]


def test_an_unproven_milp_is_no_opt():
    spec = pricing.RunSpec("paper_fig5", {"servers": 3, "seed": 500}, "offline",
                           tags={"workload": "f5", "seed": 500})
    record = {"stats": {"proven_optimal": False}, "metrics": {"total_utility": 1.0}}
    with pytest.raises(ValueError, match="f5 seed 500: the MILP was not proven optimal"):
        pricing.collect([spec], {spec.key: record})


def test_evaluated_seeds_are_used_by_no_other_figure_nor_the_history():
    """The study's point is seeds nobody chose a rule on: catches an overlap with the history
    or with any figure's seeds (Figs. 3-5, the testbed, hetero, the ratio study, Fig. 5's
    diagnosis, which used 0-21)."""
    ours = set(pricing.EVAL_SEEDS) | set(pricing.QUICK_EVAL_SEEDS)
    assert len(pricing.EVAL_SEEDS) >= 10
    assert ours.isdisjoint(HISTORY_SEEDS) and ours.isdisjoint(SMALL_HISTORY_SEEDS)
    others = set(range(22))
    for m in (fig3, fig4, fig5, testbed, ratio):
        for quick in (True, False):
            others |= set(m.settings(quick)["seeds"])
    for quick in (True, False):
        others |= set(hetero.settings(quick)["sim_seeds"])
    assert ours.isdisjoint(others)


def test_pricing_is_an_extra_figure_requested_by_name():
    assert "pricing" in EXTRA_NAMES and "pricing" not in FIGURE_NAMES
    full = pricing.settings(False)
    sizes = [w.params["jobs"] for w in full["workloads"] if w.family == pricing.FIG3_FAMILY]
    assert sizes == list(fig3.FULL["jobs"])
    assert {w.family for w in full["workloads"]} == {"paper-sim", "paper-fig5", "testbed",
                                                     "mixed"}
