"""The Fig. 5 diagnosis (``oasis_opt.experiments.fig5_diagnosis``): the hindsight floor, the
bootstrap intervals and the per-group summary."""
from __future__ import annotations

import numpy as np
import pytest

from oasis_opt.experiments.fig5 import group_history, group_pricings
from oasis_opt.experiments.fig5_diagnosis import (DIAGNOSIS_PRICINGS, bootstrap, diagnosis_row,
                                                  hindsight_floor, summarize)
from oasis_opt.experiments.figures.fig5_diagnosis import markdown
from oasis_opt.online import OasisPolicy, history_u, pricing_document
from oasis_opt.workloads import paper_fig5

GRID = (1e-4, 1e-2, 1e-1)


def test_hindsight_is_the_best_floor_of_the_grid_on_the_instance():
    group = (12, (1.0, 100.0))
    u = history_u(group_history(*group, quick=True))
    inst = paper_fig5(1, servers=12, priority=(1.0, 100.0))
    floor, utility, admitted = hindsight_floor(inst, u, GRID)
    each = [OasisPolicy(pricing=pricing_document(u, L)).solve(inst).total_utility for L in GRID]
    assert utility == max(each) and floor == GRID[int(np.argmax(each))]


def test_row_and_summary():
    group = (12, (50.0, 100.0))
    pricings = group_pricings(*group, quick=True)
    u = history_u(group_history(*group, quick=True))
    rows = [diagnosis_row(s, *group, pricings, u, GRID + (pricings["searched"]["pricing"]
                                                          ["L_worker"],)) for s in (0, 1)]
    for row in rows:
        by = row["by_pricing"]
        assert set(by) == set(DIAGNOSIS_PRICINGS) and row["proven_optimal"]
        # the searched floor is in the hindsight grid, with the same U: hindsight earns at least
        assert by["hindsight"]["oasis"] >= by["searched"]["oasis"] - 1e-9
        for p in by.values():
            assert p["ratio"] == pytest.approx(row["opt"] / p["oasis"])
            assert p["ratio"] >= 1 - 1e-6
        assert row["load"] > 0 and 0 < row["largest_container"] <= 1
    (s,) = summarize(rows, resamples=200)
    assert s["seeds"] == 2
    for name in DIAGNOSIS_PRICINGS:
        ratios = [r["by_pricing"][name]["ratio"] for r in rows]
        assert s[name]["mean"][0] == pytest.approx(np.mean(ratios))
        assert s[name]["median"] == pytest.approx(np.median(ratios))
        assert s[name]["of_sums"][0] == pytest.approx(
            sum(r["opt"] for r in rows) / sum(r["by_pricing"][name]["oasis"] for r in rows))
    text = markdown([s])
    assert text.count("| 12 | [50,100] |") == 2


def test_bootstrap():
    assert bootstrap([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0)
    values = [1.0, 1.5, 3.0, 1.2, 2.2]
    a, b = bootstrap(values, seed=3), bootstrap(values, seed=3)
    assert a == b and a[1] <= a[0] <= a[2] and a[0] == pytest.approx(np.mean(values))
    assert min(values) <= a[1] and a[2] <= max(values)
    est, lo, hi = bootstrap([2.0, 6.0], [1.0, 2.0])
    assert est == pytest.approx(8 / 3) and 2.0 <= lo <= est <= hi <= 3.0


# ---- the rows against an independent computation, and their cache -----------------------------
TINY = {"jobs": 3, "horizon": 4}  # paper_fig5 options: instances small enough for CP-SAT


def _without_timings(row: dict) -> dict:
    return {k: v for k, v in row.items() if not k.endswith("_s")}


def test_row_on_a_tiny_instance_is_opt_over_oasis_computed_independently():
    from oasis_opt.offline.exact import OfflinePolicy
    from oasis_opt.policies import get_policy

    group = (3, (1.0, 100.0))
    pricings = group_pricings(*group, quick=True, jobs=3, horizon=4)
    u = history_u(group_history(*group, quick=True, jobs=3, horizon=4))
    for seed in (0, 1):
        row = diagnosis_row(seed, *group, pricings, u, GRID, TINY)
        inst = paper_fig5(seed, servers=3, priority=group[1], **TINY)
        assert row["options"] == TINY and row["proven_optimal"]
        # OPT by the other exact backend (CP-SAT), OASiS by the policies themselves
        opt = OfflinePolicy(backend="cpsat").solve(inst)
        assert opt.stats["proven_optimal"]
        assert row["opt"] == pytest.approx(opt.total_utility, rel=1e-6, abs=1e-9)
        oasis = {name: get_policy("oasis", **options).solve(inst).total_utility
                 for name, options in pricings.items()}
        oasis["hindsight"] = max(OasisPolicy(pricing=pricing_document(u, L)).solve(inst)
                                 .total_utility for L in GRID)
        for name, utility in oasis.items():
            p = row["by_pricing"][name]
            assert p["oasis"] == pytest.approx(utility, rel=1e-12)
            want = opt.total_utility / utility if utility > 0 else (
                1.0 if opt.total_utility <= 1e-9 else float("inf"))
            assert p["ratio"] == pytest.approx(want, rel=1e-6)


def test_diagnose_caches_rows_and_groups_and_resumes(tmp_path):
    from oasis_opt.experiments.fig5_diagnosis import diagnose, group_inputs, read_rows

    cells = [(3, (50.0, 100.0), s) for s in (0, 1, 2)]
    first = tmp_path / "a" / "rows.jsonl"
    rows = diagnose(cells[:2], first, options=TINY, grid=GRID, workers=2)
    assert [r["seed"] for r in rows] == [0, 1] and len(first.read_text().splitlines()) == 2
    # a rerun computes nothing and returns the stored rows; a longer one only the new seed
    assert diagnose(cells[:2], first, options=TINY, grid=GRID) == rows
    assert len(first.read_text().splitlines()) == 2
    more = diagnose(cells, first, options=TINY, grid=GRID)
    assert more[:2] == rows and len(first.read_text().splitlines()) == 3
    # the file holds every row once, in the order the pool finished them
    stored = read_rows(first)
    assert len(stored) == 3 and sorted(stored.values(), key=lambda r: r["seed"]) == more
    # the same rows computed afresh, in one process, without any cache
    fresh = diagnose(cells, tmp_path / "b" / "rows.jsonl", options=TINY, grid=GRID)
    assert [_without_timings(r) for r in fresh] == [_without_timings(r) for r in more]
    # the group's pricings and U: once, cached beside the rows, and read back exactly
    cache = tmp_path / "a" / "rows.groups.jsonl"
    assert len(cache.read_text().splitlines()) == 1
    assert group_inputs(3, (50.0, 100.0), TINY, cache) == group_inputs(3, (50.0, 100.0), TINY)
    # other generator options are other rows
    other = diagnose(cells[:1], first, options={**TINY, "e_max_scale": 0.5}, grid=GRID)
    assert other[0]["options"] == {**TINY, "e_max_scale": 0.5}
    assert len(first.read_text().splitlines()) == 4


def _row(load: float, ratio: float, proven: bool = True) -> dict:
    by = {name: {"oasis": 100.0 / ratio, "ratio": ratio, "oasis_admitted": 3, "alpha": 2.0}
          for name in DIAGNOSIS_PRICINGS}
    return {"servers": 6, "priority_lo": 1.0, "priority_hi": 100.0, "seed": 0, "opt": 100.0,
            "opt_admitted": 5, "proven_optimal": proven, "by_pricing": by, "load": load,
            "largest_container": 0.5}


def test_binned_entries_and_unproven_rows_left_out():
    from oasis_opt.experiments.fig5_diagnosis import binned, summary_entry
    from oasis_opt.experiments.figures.fig5_diagnosis import overview

    rows = [_row(0.5, 1.2), _row(1.2, 1.4), _row(1.3, 2.0), _row(2.5, 3.0), _row(1.1, 9.0, False)]
    bins = binned(rows, "load", (0.0, 1.0, 2.0, 3.0), resamples=100)
    assert [(b["low"], b["seeds"], b["unproven"]) for b in bins] == [(0.0, 1, 0), (1.0, 2, 1),
                                                                     (2.0, 1, 0)]
    assert bins[1]["plugin"]["median"] == pytest.approx(1.7)
    assert bins[1]["plugin"]["in_paper_range"] == pytest.approx(0.5)
    pooled = summary_entry(rows, resamples=100)
    assert pooled["seeds"] == 4 and pooled["hindsight"]["mean"][0] == pytest.approx(1.9)
    assert pooled["oracle"]["of_sums"][0] == pytest.approx(400 / sum(100 / r for r in
                                                                     (1.2, 1.4, 2.0, 3.0)))
    text = overview(bins, ["a", "b", "c"], "load")
    assert text.count("\n") == 5 and "| b | 2 (1 unproven left out) |" in text


def test_bootstrap_with_an_infinite_ratio():
    est, lo, hi = bootstrap([1.0, 2.0, float("inf")], resamples=200)
    assert est == float("inf") and lo >= 1.0 and hi == float("inf")


def test_a_time_limit_cut_row_is_recorded_unproven_and_left_out(tmp_path):
    """A row whose MILP hits ``time_limit`` says so (``proven_optimal`` false, the limit and
    the MILP's bound recorded, the bound at least the incumbent) and the summary leaves it out
    (catches a time limit that is dropped on the way to the MILP, or a cut-short incumbent
    counted as OPT)."""
    from oasis_opt.experiments.fig5_diagnosis import diagnose, summary_entry

    cells = [(12, (50.0, 100.0), 0)]
    cut = diagnose(cells, tmp_path / "cut.jsonl", grid=GRID, time_limit=1e-3)[0]
    assert cut["time_limit"] == 1e-3 and cut["proven_optimal"] is False
    assert cut["bound"] is None or cut["bound"] >= cut["opt"] - 1e-6
    full = diagnose(cells, tmp_path / "full.jsonl", grid=GRID, options=TINY)[0]
    assert full["proven_optimal"] is True and "time_limit" not in full
    entry = summary_entry([cut, full])
    assert (entry["seeds"], entry["unproven"]) == (1, 1)
    assert entry["searched"]["median"] == full["by_pricing"]["searched"]["ratio"]
