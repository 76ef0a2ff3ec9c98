"""The placement bracket experiment on a tiny Philly window: every policy inside the bracket."""
import pytest

from oasis_opt.experiments.placement_bracket import (POLICIES, history_pricing, markdown,
                                                     run_one)
from oasis_opt.offline.solver import MIP_GAP

TINY = {"racks": 2, "servers_per_rack": 1, "ps_per_rack": 1}


def test_policies_fall_inside_the_bracket_and_the_report_renders():
    rec = run_one(8, **TINY, time_limit=None, node_limit=200)
    lower = rec["lower"]
    tops = [u for u in (rec["upper"]["upper"], rec["upper_lp"]["upper"]) if u is not None]
    top = min(tops) * (1 + MIP_GAP) + 1e-9
    assert lower["utility"] <= top
    assert lower["utility"] >= lower["start_utility"]  # never below the start
    feasible = [lower["utility"]] + [p["utility"] for p in rec["policies"].values()]
    assert rec["best_known"]["utility"] == max(feasible)
    assert rec["best_known"]["utility"] <= top
    assert set(rec["policies"]) == {name for name, *_ in POLICIES}
    for name, p in rec["policies"].items():  # validated schedules: none beats OPT <= upper
        assert p["utility"] <= top, name
    for name in ("oasis-topo", "oasis-topo plugin"):
        loss = rec["loss"][name]
        assert loss["both_done"] + loss["not_done_but_reference_done"] <= rec["jobs"]
    # the plug-in constants are the history's (other seeds), not the evaluated instance's
    doc = history_pricing(8, **TINY)
    assert rec["plugin"]["document"] == dict(doc)
    assert rec["plugin"]["history_seeds"] and 0 not in rec["plugin"]["history_seeds"]
    assert rec["policies"]["oasis-topo plugin"]["alpha"] == pytest.approx(rec["plugin"]["alpha"])
    page = markdown([rec], "cmd", "## title")
    assert page.startswith("## title") and f"| {rec['jobs']} |" in page
    assert "| 8 | plug-in |" in page


def test_a_stored_record_keeps_its_bounds_and_reruns_the_same_policies():
    rec = run_one(6, **TINY, time_limit=None, node_limit=50)
    marked = {**rec, "lower": {**rec["lower"], "status": "stored"}}
    again = run_one(6, **TINY, time_limit=None, node_limit=50, stored=marked)
    assert again["lower"]["status"] == "stored"  # reused, not re-solved
    assert {k: p["utility"] for k, p in again["policies"].items()} == \
        {k: p["utility"] for k, p in rec["policies"].items()}


def test_floor_sweep_accounts_for_every_lost_unit_of_utility():
    from oasis_opt.experiments.placement_bracket import floor_sweep, sweep_markdown

    rec = floor_sweep(6, **TINY, floors=(1e-3,), history_seeds=(1000,))
    assert [r["pricing"] for r in rec["rows"]] == ["oracle", "plug-in", "L = 0.001"]
    for r in rec["rows"]:  # no schedule beats every job at its earliest slot
        assert r["lost_urgent"] >= -1e-9 and r["lost_other"] >= -1e-9
        assert r["utility"] == pytest.approx(rec["best_case"] - r["lost_urgent"]
                                             - r["lost_other"])
    assert "| L = 0.001 |" in sweep_markdown(rec, "cmd")
