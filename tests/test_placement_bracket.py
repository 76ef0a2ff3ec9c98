"""The placement bracket experiment on a tiny Philly window: every policy inside the bracket."""
from oasis_opt.experiments.placement_bracket import markdown, run_one
from oasis_opt.offline.solver import MIP_GAP


def test_policies_fall_inside_the_bracket_and_the_report_renders():
    rec = run_one(8, racks=2, servers_per_rack=1, ps_per_rack=1, time_limit=None, node_limit=200)
    lower = rec["lower"]
    tops = [u for u in (rec["upper"]["upper"], rec["upper_lp"]["upper"]) if u is not None]
    top = min(tops) * (1 + MIP_GAP) + 1e-9
    assert lower["utility"] <= top
    assert lower["utility"] >= lower["start_utility"]  # never below the start
    for name, p in rec["policies"].items():  # validated schedules: none beats OPT <= upper
        assert p["utility"] <= top, name
    loss = rec["loss"]["oasis-topo"]
    assert loss["both_done"] + loss["not_done_but_reference_done"] <= rec["jobs"]
    page = markdown([rec], "cmd", "## title")
    assert page.startswith("## title") and f"| {rec['jobs']} |" in page
