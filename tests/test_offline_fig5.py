"""Fig. 5 computation (OPT / OASiS on paper_fig5 instances) and its script."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from oasis_opt.experiments.fig5 import (PRIORITIES, SERVERS, fig5_row, markdown, paper_ratios,
                                        summarize)

REPO = Path(__file__).resolve().parents[1]


def test_paper_numbers_are_read_from_the_repository_copy():
    paper = paper_ratios()
    assert len(paper) == len(SERVERS) * len(PRIORITIES)
    assert paper[(3, 50.0, 100.0)] == pytest.approx(1.27)
    assert all(1.0 < v < 1.6 for v in paper.values())
    with pytest.raises(FileNotFoundError, match="reference"):
        paper_ratios(REPO / "no-such-dir")


def test_one_row_is_proven_optimal_and_its_ratio_is_opt_over_oasis():
    row = fig5_row(0, 12, (50.0, 100.0))
    assert row["jobs"] == 10 and row["horizon"] == 10
    assert row["proven_optimal"] and row["status"] == "optimal"
    assert row["opt"] >= row["oasis"] - 1e-6  # OPT is optimal, OASiS feasible
    assert row["ratio"] == pytest.approx(row["opt"] / row["oasis"])
    assert row["bound"] == pytest.approx(row["opt"], rel=1e-5)
    summary = summarize([row, {**row, "seed": 1, "opt": 2 * row["opt"], "ratio": 2 * row["ratio"]}])
    assert len(summary) == 1 and summary[0]["seeds"] == 2
    assert summary[0]["ratio_mean"] == pytest.approx(1.5 * row["ratio"])
    assert summary[0]["ratio_of_sums"] == pytest.approx(1.5 * row["ratio"])
    table = markdown(summary, paper_ratios())
    assert "| 12 | [50,100] | 2 |" in table and "1.21" in table


def test_script_prints_the_table_beside_the_paper(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("fig5_script", REPO / "experiments" / "fig5.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--servers", "12", "--seeds", "1", "--quick", "--pricing", "plugin",
                        "oracle", "--out", str(tmp_path / "t.md"),
                        "--json", str(tmp_path / "rows.json")]) == 0
    out = capsys.readouterr().out
    assert "OPT/OASiS" in out and "paper" in out and "2 alpha" in out
    text = (tmp_path / "t.md").read_text()
    assert text.count("\n| 12 |") == 2 * len(PRIORITIES)
    assert "priced by plugin" in text and "priced by oracle" in text
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert len(rows) == len(PRIORITIES) and all(r["proven_optimal"] for r in rows)
    assert all(set(r["by_pricing"]) == {"plugin", "oracle"} for r in rows)


def test_pricings_of_a_group_are_fixed_on_its_history():
    """The plug-in and searched pricings come from the group's history seeds only, and the
    row's OASiS utility, ratio and alpha under each are those of a direct run."""
    from oasis_opt.experiments.fig5 import group_history, group_pricings
    from oasis_opt.online import OasisPolicy, estimate_pricing, plugin_pricing, resolve_pricing
    from oasis_opt.workloads import paper_fig5

    group = (6, (1.0, 100.0))
    history = group_history(*group, quick=True)
    assert [h.meta["seed"] for h in history] == [1000, 1001, 1002]
    pricings = group_pricings(*group, quick=True)
    assert pricings["plugin"]["pricing"] == dict(plugin_pricing(history))
    assert pricings["searched"]["pricing"] == dict(estimate_pricing(history))
    assert pricings["oracle"] == {}
    row = fig5_row(2, *group, pricings=pricings)
    inst = paper_fig5(2, servers=6, priority=(1.0, 100.0))
    for name, options in pricings.items():
        direct = OasisPolicy(**options).solve(inst)
        got = row["by_pricing"][name]
        assert got["oasis"] == pytest.approx(direct.total_utility, rel=1e-12)
        assert got["ratio"] == pytest.approx(row["opt"] / direct.total_utility, rel=1e-12)
        assert got["alpha"] == pytest.approx(
            resolve_pricing(options.get("pricing", "oracle"), inst).alpha, rel=1e-12)
    assert row["ratio"] == row["by_pricing"]["plugin"]["ratio"]  # the first is the headline
