"""The figure definitions end to end, on tiny settings: every figure's runs validate, each is
drawn as PNG + PDF + markdown beside the paper's values, and a second reproduce reuses the runs."""
from __future__ import annotations

import itertools
import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oasis_opt.cli import main
from oasis_opt.experiments import fig3, fig4, fig5, fig6, testbed
from oasis_opt.experiments.figures import FIGURE_NAMES, get_figure
from oasis_opt.experiments.figures import common as figures_common
from oasis_opt.experiments.figures.common import (BOX_CAPTION, PAPER_POLICIES, bars_caption,
                                                  box_stats, display, grouped_bars, mean_range,
                                                  mean_sd, new_figure, read_reference)
from oasis_opt.experiments.calibration import calibration_specs, resolve_all
from oasis_opt.experiments.reproduce import figure_names, lpt_makespan, reproduce
from oasis_opt.experiments.runner import run_sweep
from oasis_opt.online.estimate import EstimatedPricing, FloorCalibration, pricing_document

RUNNER_FIGURES = list(FIGURE_NAMES)


@pytest.fixture
def tiny(monkeypatch):
    """Shrink the quick settings further, so that every figure runs in seconds."""
    monkeypatch.setattr(fig3, "QUICK", {"jobs": (4, 8), "horizon": 40, "servers": 2, "seeds": (0,)})
    monkeypatch.setattr(fig4, "QUICK", {"jobs": 8, "horizon": 40, "servers": 2, "seeds": (0,)})
    monkeypatch.setattr(testbed, "QUICK", {"seeds": (0,)})
    monkeypatch.setattr(fig5, "QUICK", {"servers": (3,), "priorities": ((50.0, 100.0),),
                                               "seeds": (0,)})


def check_outputs(paths, name):
    by_suffix = {p.suffix: p for p in paths}
    assert set(by_suffix) == {".png", ".pdf", ".md"}, paths
    assert by_suffix[".png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert by_suffix[".pdf"].read_bytes()[:5] == b"%PDF-"
    text = by_suffix[".md"].read_text()
    assert text.startswith("# ") and "|---|" in text and "claims, checked" in text
    if name not in ("fig5", "fig6"):
        for p in PAPER_POLICIES:
            assert f"| {display(p)} |" in text


@pytest.fixture
def figure_texts(monkeypatch) -> dict[str, str]:
    """stem -> the suptitle and axes titles of every figure saved (what the PNG says)."""
    from oasis_opt.experiments.figures import fig3, fig4, fig5, fig6, testbed

    texts: dict[str, str] = {}
    real = figures_common.save

    def recording(fig, out_dir, stem):
        texts[stem] = " ".join([fig.get_suptitle()] + [a.get_title() for a in fig.axes])
        paths = real(fig, out_dir, stem)  # drawn: the titles have their extents
        texts[f"{stem}:clipped"] = " | ".join(figures_common.clipped_titles(fig))
        return paths

    for module in (fig3, fig4, fig5, fig6, testbed):
        monkeypatch.setattr(module, "save", recording)
    return texts


def test_quick_figures_are_drawn_and_resume(tiny, figure_texts, tmp_path):
    out, results = tmp_path / "figs", tmp_path / "results"
    written = reproduce(RUNNER_FIGURES, quick=True, workers=1, results=results, out=out,
                        progress=False)
    for name in RUNNER_FIGURES:
        check_outputs(written[name], name)
    # every PNG says what its bars / boxes are (the tiny settings have one seed)
    for name in ("fig3", "fig6", "testbed"):
        assert bars_caption(1) in figure_texts[name], name
    assert "mean, min … max" in figure_texts["fig5"]
    # no title cut at the figure's edges (Fig. 5's "priced by ..." titles were, issue #29)
    assert {k: v for k, v in figure_texts.items() if k.endswith(":clipped") and v} == {}
    for title in ("plug-in U, L", "searched floor L", "oracle U, L"):
        assert title in figure_texts["fig5"]
    for name in ("fig4", "testbed"):
        assert " ".join(BOX_CAPTION.split()) in " ".join(figure_texts[name].split()), name
    n_runs = len(list(results.glob("*.json")))
    estimates = {e.key: e for f in RUNNER_FIGURES if get_figure(f).estimates is not None
                 for e in get_figure(f).estimates(True)}
    cal = run_sweep(calibration_specs(estimates.values()), results, workers=1, progress=False)
    assert not cal.computed  # every calibration run was stored by reproduce
    estimated = resolve_all(estimates.values(), cal.records)
    expected = {s.key for f in RUNNER_FIGURES for s in get_figure(f).runs(True, estimated)}
    # fig3 and fig6 share the plain OASiS runs; calibration runs are stored like any run
    assert n_runs == len(expected | set(cal.records))
    log = written["reproduce"][0].read_text()
    assert f"{len(expected)} computed now" in log and "Calibration" in log
    for name in ("fig3", "fig4", "fig5", "testbed"):
        text = next(p for p in written[name] if p.suffix == ".md").read_text()
        assert "chosen L" in text and "OASiS (oracle U, L)" in text
    # Fig. 5 rebuilt from the runner's stored runs = the offline track's one-call row, for
    # OASiS with the estimated pricing and with the oracle's
    specs = fig5.runs(True, estimated)
    records = run_sweep(specs, results, workers=1, progress=False).records
    doc = estimated[fig5.estimate(3, (50.0, 100.0), True).key]
    plugin = fig5.plugin_document(3, (50.0, 100.0), True)
    assert plugin == fig5.group_pricings(3, (50.0, 100.0), True)["plugin"]["pricing"]
    for series, options in (("oasis", {"pricing": doc}), ("oasis-oracle", None),
                            ("oasis-plugin", {"pricing": plugin})):
        (row,) = fig5.rows(specs, records, series)
        direct = fig5.fig5_row(0, 3, (50.0, 100.0), oasis_options=options)
        for k in ("opt", "oasis", "ratio", "jobs", "opt_admitted", "oasis_admitted",
                  "proven_optimal", "alpha"):
            assert row[k] == pytest.approx(direct[k], rel=1e-9), (series, k)
    # the adaptive series: oasis-adaptive from the searched floor, with the calibration table
    # that chose it as the prior (catches the prior dropped between estimate and run)
    from oasis_opt.online.adaptive import AdaptiveOasisPolicy
    from oasis_opt.workloads import paper_fig5

    (ada,) = [s for s in specs if s.tags.get("series") == fig5.ADAPTIVE
              and s.tags["servers"] == 3 and s.tags["priority"] == [50.0, 100.0]
              and s.tags["seed"] == 0]
    direct_ada = AdaptiveOasisPolicy(pricing=dict(doc), prior=doc.calibration).solve(
        paper_fig5(0, servers=3, priority=(50.0, 100.0)))
    assert records[ada.key]["metrics"]["total_utility"] == pytest.approx(
        direct_ada.total_utility, abs=1e-9)
    assert records[ada.key]["stats"]["adaptive"]["prior"]["mean_utility"] == list(
        doc.calibration.mean)
    again = reproduce(RUNNER_FIGURES, quick=True, workers=1, results=results, out=out,
                      progress=False)
    assert "0 computed now" in again["reproduce"][0].read_text()
    assert len(list(results.glob("*.json"))) == n_runs


def test_cli_reproduce(tiny, tmp_path, capsys):
    rc = main(["reproduce", "testbed", "--quick", "--workers", "1",
               "--results", str(tmp_path / "r"), "--out", str(tmp_path / "o")])
    assert rc == 0
    assert (tmp_path / "o" / "testbed.pdf").is_file()
    assert "testbed:" in capsys.readouterr().out
    assert main(["reproduce", "fig9", "--quick"]) == 2
    assert "unknown figure 'fig9'" in capsys.readouterr().err


def given_floor(estimates, floor=1e-3):
    """Pricing documents at a given floor for ``estimates`` (the specs' shape, not a result)."""
    calibration = FloorCalibration((floor,), ((0.0,),))
    return {e.key: EstimatedPricing(pricing_document(e.u, floor), calibration) for e in estimates}


def test_reproduce_help_names_every_figure(capsys, monkeypatch):
    """``reproduce --help`` lists every figure it accepts (catches a figure registered in
    ``EXTRA_MODULES`` that the help never mentions, as ``pricing`` once was)."""
    from oasis_opt.experiments.figures import EXTRA_NAMES

    monkeypatch.setenv("COLUMNS", "2000")  # one line per option: no name split by wrapping
    assert main(["reproduce", "--help"]) == 0
    out = capsys.readouterr().out
    missing = [n for n in FIGURE_NAMES + EXTRA_NAMES
               if not re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", out)]
    assert missing == []


def test_figure_specs_and_names():
    assert figure_names(["all"]) == list(FIGURE_NAMES)
    assert figure_names(["testbed", "fig3"]) == ["fig3", "testbed"]
    with pytest.raises(ValueError, match="unknown figure"):
        figure_names(["fig7"])
    with pytest.raises(ValueError, match="no calibration"):
        fig3.runs(True)
    for quick in (True, False):
        estimated = given_floor(fig3.estimates(quick))
        s3 = {s.key for s in fig3.runs(quick, estimated)
              if s.policy == "oasis" and s.tags.get("series") is None}
        s6 = {s.key for s in fig6.runs(quick, estimated) if s.tags["pct"] == 100}
        assert s3 == s6  # the 100% bars of Fig. 6 are Fig. 3's OASiS runs
        keys = [s.key for s in fig3.runs(quick, estimated)]
        assert len(keys) == len(set(keys))
        # history seeds never overlap the evaluated ones
        assert all(set(e.seeds).isdisjoint(fig3.settings(quick)["seeds"])
                   for e in fig3.estimates(quick))
    full = fig3.runs(False, estimated)
    assert {s.tags["jobs"] for s in full} == {100, 200, 300, 400}
    assert all(s.params["horizon"] == 300 and s.params["worker_servers"] == 50 for s in full)
    oracle = [s for s in full if s.tags.get("series") == "oasis-oracle"]
    assert len(oracle) == 12 and all(s.options == {} for s in oracle)
    # Fig. 6: every price scaled by kappa ("both"), or U only
    for s in fig6.runs(False, estimated):
        base = estimated[fig3.estimate(s.tags["jobs"], False).key]
        kappa = s.tags["pct"] / 100
        doc = s.options["pricing"]
        assert doc["U_worker"]["gpu"] == pytest.approx(kappa * base["U_worker"]["gpu"])
        l_kappa = kappa if s.tags["scaling"] == "both" else 1.0
        assert doc["L_worker"] == doc["L_ps"] == pytest.approx(l_kappa * base["L_worker"])


def test_paper_reference_values_are_complete():
    from oasis_opt.experiments.figures import fig3, fig4, fig6, testbed

    assert len(fig3.paper_values()) == 20
    assert fig3.paper_values()[(400, "oasis")] == pytest.approx(7550)
    assert len(fig6.paper_values()) == 24
    f4 = fig4.paper_values()
    assert f4[("time-critical", "rrh")]["median"] == 98
    assert math.isnan(f4[("time-sensitive", "dorm")]["lo"])
    assert testbed.paper_values()["drf"]["utility"] == pytest.approx(90)
    assert len(read_reference("fig5_performance_ratio")) == 16


def test_box_stats_matches_matplotlib():
    from matplotlib.cbook import boxplot_stats

    data = [-7.0, -2, 0, 0, 1, 3, 4, 8, 40]
    ours, ref = box_stats(data), boxplot_stats(data)[0]
    assert (ours["median"], ours["q1"], ours["q3"]) == (ref["med"], ref["q1"], ref["q3"])
    assert (ours["lo"], ours["hi"]) == (ref["whislo"], ref["whishi"])


@given(st.lists(st.floats(0.0, 100.0), max_size=7), st.integers(1, 3))
def test_lpt_makespan_is_within_four_thirds_of_optimal(durations, workers):
    opt = min((max(sum(d for d, m in zip(durations, assign) if m == w) for w in range(workers))
               for assign in itertools.product(range(workers), repeat=len(durations))),
              default=0.0)
    lpt = lpt_makespan(durations, workers)
    assert opt - 1e-9 <= lpt <= 4 / 3 * opt + 1e-9


@given(st.lists(st.floats(0.0, 1e6), min_size=1, max_size=8))
def test_bars_over_seeds_stay_within_the_data(values):
    m, lo, hi = mean_range(values)
    assert lo == min(values) >= 0 and hi == max(values)
    assert lo - 1e-9 * hi <= m <= hi + 1e-9 * hi


def test_a_bar_whose_sd_would_go_below_zero_draws_min_to_max():
    from matplotlib.container import ErrorbarContainer

    values = [0.0, 0.0, 10.0]  # utility on three seeds
    mean, sd = mean_sd(values)
    assert mean - sd < 0  # mean ± sd would draw a negative utility
    fig, ax = new_figure()
    grouped_bars(ax[0, 0], [1], ["p"], {(1, "p"): mean_range(values)}, {}, {"p": "C0"},
                 {"p": "p"})
    (bars,) = [c for c in ax[0, 0].containers if isinstance(c, ErrorbarContainer)]
    ys = [y for seg in bars.lines[2][0].get_segments() for _, y in seg]
    assert (min(ys), max(ys)) == (0.0, 10.0)


def test_one_seed_draws_no_whiskers_and_says_so():
    from matplotlib.container import ErrorbarContainer

    fig, ax = new_figure()
    grouped_bars(ax[0, 0], [1], ["p"], {(1, "p"): mean_range([4.0])}, {}, {"p": "C0"},
                 {"p": "p"})
    assert not [c for c in ax[0, 0].containers if isinstance(c, ErrorbarContainer)]
    assert bars_caption(1) == "bars: one seed (no whiskers)"
    assert bars_caption(3) == "bars: mean over 3 seeds, whiskers: min … max"
