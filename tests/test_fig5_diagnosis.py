"""The Fig. 5 diagnosis (``oasis_opt.experiments.fig5_diagnosis``): the hindsight floor, the
bootstrap intervals and the per-group summary."""
from __future__ import annotations

import numpy as np
import pytest

from oasis_opt.experiments.fig5 import group_history, group_pricings
from oasis_opt.experiments.fig5_diagnosis import (DIAGNOSIS_PRICINGS, bootstrap, diagnosis_row,
                                                  hindsight_floor, markdown, summarize)
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
