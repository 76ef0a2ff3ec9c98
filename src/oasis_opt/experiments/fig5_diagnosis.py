"""Fig. 5 diagnosed: per group, OPT / OASiS under four pricings, admitted counts, load, sizes.

For one instance, :func:`diagnosis_row` reports the exact OPT (MILP, proven) and OASiS under

* ``plugin``, ``searched``, ``oracle``: the pricings of ``experiments.fig5`` (the first two fixed
  on the group's history before the instance is seen);
* ``hindsight``: U as ``searched`` (eqs. 23-24 over the history) and the floor L1 = L2 of the
  search grid under which OASiS earns the most *on this instance* (ties: the smaller L). It uses
  the evaluated instance, so it is no pricing rule: it measures how much of the gap a better
  floor alone could close. Since the searched floor is one point of the same grid with the same
  U, hindsight earns at least what searched earns.

with, per pricing, the ratio, alpha and the admitted count; and the instance's load factor and
largest container (``experiments.ratio``). :func:`bootstrap` gives percentile confidence
intervals over the seeds of a group (resampling seeds with replacement, seeded).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from .fig5 import performance_ratio

DIAGNOSIS_PRICINGS = ("plugin", "searched", "oracle", "hindsight")


def hindsight_floor(instance: Any, u: dict, grid: Sequence[float]) -> tuple[float, float, int]:
    """(best floor, OASiS utility, admitted) over ``grid`` on ``instance`` itself."""
    from ..model.validate import assert_valid
    from ..online.estimate import check_grid, pricing_document
    from ..online.oasis import OasisPolicy

    best = (math.nan, -math.inf, 0)
    for floor in check_grid(grid):
        schedule = OasisPolicy(pricing=pricing_document(u, floor)).solve(instance)
        assert_valid(instance, schedule)
        if schedule.total_utility > best[1]:
            best = (floor, float(schedule.total_utility), int(sum(schedule.admitted)))
    return best


def diagnosis_row(seed: int, servers: int, priority: tuple[float, float], pricings: dict,
                  u: dict, grid: Sequence[float]) -> dict:
    """One instance: OPT, and per pricing of ``pricings`` (name -> OASiS options, from
    ``fig5.group_pricings``) plus ``hindsight`` (``u``: the history's U, ``grid``: the floors)."""
    from .fig5 import fig5_row
    from .ratio import largest_container, load_factor
    from ..workloads import paper_fig5

    row = fig5_row(seed, servers, priority, pricings=pricings)
    inst = paper_fig5(seed, servers=servers, priority=tuple(priority))
    floor, utility, admitted = hindsight_floor(inst, u, grid)
    by = row["by_pricing"]
    by["hindsight"] = {"oasis": utility, "ratio": performance_ratio(row["opt"], utility),
                       "oasis_admitted": admitted, "floor": floor,
                       "alpha": max([1.0] + [math.log(v / floor) for key in ("U_worker", "U_ps")
                                             for v in u[key].values()])}
    load, where = load_factor(inst)
    keep = ("servers", "priority_lo", "priority_hi", "seed", "opt", "opt_admitted",
            "proven_optimal", "solve_s")
    return {**{k: row[k] for k in keep}, "by_pricing": by, "load": load, "load_resource": where,
            "largest_container": largest_container(inst)}


def bootstrap(values: Sequence[float], weights: Sequence[float] | None = None, *,
              resamples: int = 2000, seed: int = 0, level: float = 0.95,
              median: bool = False) -> tuple[float, float, float]:
    """(estimate, low, high): the mean of ``values`` (the median with ``median``; with
    ``weights``, the ratio of sums sum(values) / sum(weights)) and its percentile bootstrap
    interval at ``level``, resampling the indices with replacement (numpy
    ``default_rng(seed)``: reproducible)."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return math.nan, math.nan, math.nan
    w = None if weights is None else np.asarray(weights, dtype=float)

    def stat(idx: np.ndarray) -> np.ndarray:
        if w is not None:
            return v[idx].sum(axis=-1) / w[idx].sum(axis=-1)
        return np.median(v[idx], axis=-1) if median else v[idx].mean(axis=-1)

    rng = np.random.default_rng(seed)
    draws = stat(rng.integers(0, v.size, size=(resamples, v.size)))
    tail = (1 - level) / 2
    return (float(stat(np.arange(v.size))), float(np.quantile(draws, tail)),
            float(np.quantile(draws, 1 - tail)))


def summarize(rows: list[dict], *, resamples: int = 2000, seed: int = 0) -> list[dict]:
    """Per group and pricing: median ratio, mean ratio with its CI, ratio of sums with its CI,
    mean alpha and admitted counts; per group: mean load and largest container."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["servers"], r["priority_lo"], r["priority_hi"]), []).append(r)
    out = []
    for (n, lo, hi), rs in groups.items():
        entry: dict[str, Any] = {"servers": n, "priority_lo": lo, "priority_hi": hi,
                                 "seeds": len(rs), "opt_admitted": float(np.mean(
                                     [r["opt_admitted"] for r in rs])),
                                 "load": float(np.mean([r["load"] for r in rs])),
                                 "largest_container": float(np.mean(
                                     [r["largest_container"] for r in rs]))}
        opt = [r["opt"] for r in rs]
        for name in DIAGNOSIS_PRICINGS:
            p = [r["by_pricing"][name] for r in rs]
            ratios = [x["ratio"] for x in p]
            entry[name] = {"median": float(np.median(ratios)),
                           "mean": bootstrap(ratios, resamples=resamples, seed=seed),
                           "of_sums": bootstrap(opt, [x["oasis"] for x in p],
                                                resamples=resamples, seed=seed),
                           "alpha": float(np.mean([x["alpha"] for x in p])),
                           "admitted": float(np.mean([x["oasis_admitted"] for x in p]))}
        out.append(entry)
    return out


def markdown(summary: list[dict]) -> str:
    """Two tables: the ratio per pricing (mean [95% CI], median, ratio of sums [CI], 2 alpha),
    and the admitted counts, load and largest container per group."""
    def ci(t: tuple[float, float, float]) -> str:
        return f"{t[0]:.2f} [{t[1]:.2f}, {t[2]:.2f}]"

    head = ["servers", "gamma1", "seeds"]
    cols = [f"{name}: mean [CI] / median / sums [CI] / 2α" for name in DIAGNOSIS_PRICINGS]
    lines = ["| " + " | ".join(head + cols) + " |", "|---" * (len(head) + len(cols)) + "|"]
    for s in summary:
        cells = [str(s["servers"]), f"[{s['priority_lo']:g},{s['priority_hi']:g}]",
                 str(s["seeds"])]
        for name in DIAGNOSIS_PRICINGS:
            p = s[name]
            cells.append(f"{ci(p['mean'])} / {p['median']:.2f} / {ci(p['of_sums'])} / "
                         f"{2 * p['alpha']:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    second = ["| servers | gamma1 | admitted OPT | " + " | ".join(
        f"admitted {name}" for name in DIAGNOSIS_PRICINGS)
        + " | load sum(W)/(cap x T) | largest container / server |",
        "|---" * (5 + len(DIAGNOSIS_PRICINGS)) + "|"]
    for s in summary:
        second.append(f"| {s['servers']} | [{s['priority_lo']:g},{s['priority_hi']:g}] | "
                      f"{s['opt_admitted']:.1f} | "
                      + " | ".join(f"{s[name]['admitted']:.1f}" for name in DIAGNOSIS_PRICINGS)
                      + f" | {s['load']:.2f} | {s['largest_container']:.2f} |")
    return "\n".join(lines) + "\n\n" + "\n".join(second) + "\n"
