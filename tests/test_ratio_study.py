"""``reproduce ratio`` and the worst-case search (``experiments.ratio``, ``worst_case``).

The search is held to its contract on random tiny instances: the result's ratio is never below
the start's and the trace never decreases, the same seed gives the same instance, the reported
OPT is the brute-force optimum (``test_offline_milp``'s search, written independently of the
MILP), and the reported OASiS utility is a fresh run's. ``reproduce ratio --quick`` writes the
figure, the tables and the worst-case files, and each saved worst case, solved again from its
file by a fresh MILP and a fresh OASiS run, gives the ratio stored with it.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_offline_milp import brute_force, tiny
from test_ratio import _oracle_defined

from oasis_opt.experiments import ratio as study
from oasis_opt.experiments.fig5_diagnosis import bootstrap
from oasis_opt.experiments.reproduce import figure_names, reproduce
from oasis_opt.experiments.worst_case import MUTATIONS, hill_climb, mutate, ratio_key
from oasis_opt.model import validate
from oasis_opt.model.io import instance_to_dict, load_instance, read_json
from oasis_opt.offline.exact import OfflinePolicy
from oasis_opt.online import OasisPolicy, oracle_pricing
from oasis_opt.workloads import paper_fig5


def _fresh_ratio(inst, pricing) -> float:
    """OPT / OASiS from a fresh MILP and a fresh OASiS run, each schedule validated."""
    opt = OfflinePolicy().solve(inst)
    assert opt.stats["proven_optimal"] and validate(inst, opt).ok
    oasis = OasisPolicy(pricing=pricing).solve(inst)
    assert validate(inst, oasis).ok
    if oasis.total_utility > 0:
        return opt.total_utility / oasis.total_utility
    return math.inf if opt.total_utility > 0 else 1.0


@settings(max_examples=12, deadline=None)
@given(tiny, st.integers(0, 2**16))
def test_search_never_goes_below_its_start_and_reports_the_brute_force_optimum(inst, seed):
    assume(_oracle_defined(inst))
    pricing = oracle_pricing(inst).to_dict()  # fixed before the search, as a rule would be
    res = hill_climb(inst, pricing, steps=4, seed=seed, priority=(1.0, 10.0))
    start = ratio_key(res.start_row)
    assert res.ratio >= start
    assert all(b >= a for a, b in zip((start,) + res.trace, res.trace))
    assert res.best_row["opt"]["lower"] == pytest.approx(brute_force(res.best), rel=1e-6,
                                                         abs=1e-9)
    assert res.ratio == pytest.approx(_fresh_ratio(res.best, pricing), rel=1e-9)
    again = hill_climb(inst, pricing, steps=4, seed=seed, priority=(1.0, 10.0))
    assert instance_to_dict(again.best) == instance_to_dict(res.best)
    assert again.accepted == res.accepted


def test_mutations_stay_in_the_generator_ranges():
    inst = paper_fig5(3, servers=3, jobs=5, horizon=5)
    rng = np.random.default_rng(7)
    kinds = set()
    for _ in range(60):
        new, what = mutate(inst, rng, max_epochs=200)
        kinds.add(what.split(":")[0])
        assert sorted(j.id for j in new.jobs) == sorted(j.id for j in inst.jobs)
        for j in new.jobs:
            assert 1 <= j.arrival <= inst.horizon and 1 <= j.epochs <= 200
            assert 50 <= j.utility.priority <= 100 and 1 <= j.utility.target <= 15
        inst = new
    assert kinds == set(MUTATIONS)


def test_median_bootstrap_and_load_buckets():
    assert bootstrap([1.0, 2.0, 10.0], median=True)[0] == 2.0
    est, lo, hi = bootstrap([1.0, 2.0, 3.0, 4.0, 100.0], median=True, seed=1)
    assert est == 3.0 and 1.0 <= lo <= est <= hi <= 100.0
    assert [study.load_bucket(x) for x in (0.2, 1.0, 1.7, 2.5, 4.0, 9.0)] == \
        [0, 1, 2, 3, 4, 5]


def test_reproduce_ratio_quick(tmp_path):
    assert figure_names(["ratio"]) == ["ratio"] and "ratio" not in figure_names(["all"])
    out, results = tmp_path / "figs", tmp_path / "results"
    written = reproduce(["ratio"], quick=True, out=out, results=results, progress=False)["ratio"]
    assert {p.name for p in written} >= {"ratio.png", "ratio.pdf", "ratio.md", "pricing.json"}
    text = (out / "ratio.md").read_text()
    for heading in ("## (a) By size", "## (a') By size and pricing rule",
                    "## (b) By load factor", "## (c) Ratio against 2α",
                    "## (d) Worst cases found", "## Commands"):
        assert heading in text
    s = study.QUICK
    stored = sorted((results / "ratio-study").glob("paper-fig5-*.json"))
    assert len(stored) == len(s["seeds"]) * (len(s["sizes"]) + len(s["small"]))
    _rules_are_fresh_runs(stored, s)
    pricing = read_json(out / "worst_cases" / "pricing.json")
    for start in s["search"]["starts"]:
        inst = load_instance(out / "worst_cases" / f"worst-start{start}.json")
        recomputed = _fresh_ratio(inst, pricing)
        assert inst.meta["ratio"] == pytest.approx(recomputed, rel=1e-9)
        record = read_json(next((results / "ratio-study").glob(f"search-*seed{start}-*.json")))
        assert ratio_key(record["start_row"]) < recomputed  # this start does get worse
        assert f"{recomputed:.3f}" in text
    # rerun: rows and search loaded from the results folder, the same page
    reproduce(["ratio"], quick=True, out=tmp_path / "again", results=results, progress=False)
    assert (tmp_path / "again" / "ratio.md").read_text() == text
    assert json.loads((tmp_path / "again" / "worst_cases" / "worst-start1.json").read_text()) \
        == json.loads((out / "worst_cases" / "worst-start1.json").read_text())


def _rules_are_fresh_runs(stored, s) -> None:
    """Each stored row's other rules (``rules``) are what a fresh run of OASiS under the
    group's searched floor, and of ``oasis-adaptive`` started from it (its calibration table
    the prior), earns on the row's instance; and the rule's ratio is OPT over that utility
    (catches a rule run on another instance or pricing, or a ratio taken against the plug-in's
    utility)."""
    from oasis_opt.online.adaptive import AdaptiveOasisPolicy

    for path in stored[:3]:
        row = read_json(path)
        inst = paper_fig5(row["seed"], servers=s["servers"], priority=study.PRIORITY,
                          jobs=row["jobs"], horizon=s["horizon"])
        searched = study.group_searched(row["jobs"], s["servers"], s["horizon"], True)
        for rule, policy in (("searched", OasisPolicy(pricing=searched)),
                             ("adaptive", AdaptiveOasisPolicy(pricing=dict(searched),
                                                              prior=searched.calibration))):
            res = policy.solve(inst)
            assert validate(inst, res).ok
            assert row["rules"][rule]["utility"] == pytest.approx(res.total_utility, rel=1e-12)
            assert row["rules"][rule]["admitted"] == sum(res.admitted)
            ratio = study.exact_ratio(study.rule_row(row, rule))
            if row["opt"]["method"] == "milp" and res.total_utility > 0:
                assert ratio == pytest.approx(row["opt"]["lower"] / res.total_utility)
        # the adaptive floor ran with the history's prior, at the policy's default weight
        assert row["rules"]["adaptive"]["prior_weight"] == 1.0


def test_stored_rows_gain_the_rules_without_a_new_opt(tmp_path):
    """A row stored before the rules were added (no ``rules``) keeps its OPT and gets the
    rules' runs (catches a rerun that re-solves every MILP, or one that never adds them)."""
    s = {**study.QUICK, "sizes": (4,), "small": (), "seeds": (0,)}
    rows = study.sweep_rows(s, True, tmp_path, progress=False)
    path = next((tmp_path / "ratio-study").glob("paper-fig5-*.json"))
    row = read_json(path)
    del row["rules"]
    row["opt"]["lower"] = row["opt"]["upper"] = 12345.0  # marks the stored OPT
    path.write_text(json.dumps(row))
    again = study.sweep_rows(s, True, tmp_path, progress=False)
    assert again[0]["opt"]["lower"] == 12345.0
    assert again[0]["rules"] == rows[0]["rules"]
    assert read_json(path)["rules"] == rows[0]["rules"]


def test_rows_of_an_older_rules_version_are_rerun(tmp_path):
    """A row whose rules ran before the adaptive floor had its prior (no ``rules_version``)
    gets them run again, its OPT kept (catches stale adaptive results reused from an earlier
    sweep's results folder)."""
    s = {**study.QUICK, "sizes": (4,), "small": (), "seeds": (0,)}
    rows = study.sweep_rows(s, True, tmp_path, progress=False)
    assert rows[0]["rules_version"] == study.RULES_VERSION
    path = next((tmp_path / "ratio-study").glob("paper-fig5-*.json"))
    row = read_json(path)
    del row["rules_version"]
    row["rules"]["adaptive"]["utility"] = -1.0  # marks the stale rule
    row["opt"]["lower"] = row["opt"]["upper"] = 12345.0  # marks the stored OPT
    path.write_text(json.dumps(row))
    again = study.sweep_rows(s, True, tmp_path, progress=False)
    assert again[0]["opt"]["lower"] == 12345.0
    assert again[0]["rules"] == rows[0]["rules"]
    assert read_json(path)["rules_version"] == study.RULES_VERSION


def test_constants_against_the_oracle():
    inst = paper_fig5(0, servers=3, jobs=4, horizon=4)
    doc = oracle_pricing(inst).to_dict()
    assert study.against_oracle(doc, inst) == pytest.approx((1.0, 1.0))
    raised = {**doc, "L_ps": {r: 10 * doc["L_ps"] for r in doc["U_ps"]},
              "U_worker": {r: u / 2 for r, u in doc["U_worker"].items()}}
    assert study.against_oracle(raised, inst) == pytest.approx((10.0, 2.0))


def test_committed_worst_cases_recompute():
    """The worst instances in paper_figs/worst_cases give, from their files, the stored ratio."""
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "paper_figs" / "worst_cases"
    files = sorted(folder.glob("worst-start*.json"))
    assert files
    pricing = read_json(folder / "pricing.json")
    for path in files:
        inst = load_instance(path)
        assert inst.meta["ratio"] == pytest.approx(_fresh_ratio(inst, pricing), rel=1e-9), path
