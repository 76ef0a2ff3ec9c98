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
largest container (``model.load``). :func:`bootstrap` gives percentile confidence
intervals over the seeds of a group (resampling seeds with replacement, seeded). Its tables and
bars are drawn by ``oasis_opt.experiments.figures.fig5_diagnosis``.
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path
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
                  u: dict, grid: Sequence[float], options: dict | None = None,
                  time_limit: float | None = None) -> dict:
    """One instance: OPT, and per pricing of ``pricings`` (name -> OASiS options, from
    ``fig5.group_pricings``) plus ``hindsight`` (``u``: the history's U, ``grid``: the floors);
    ``options``: further ``paper_fig5`` options (recorded in the row). ``oasis_s`` and
    ``hindsight_s`` time the OASiS runs (``solve_s``: the MILP). ``time_limit``: seconds for
    the MILP (None: until proven); a row whose OPT is not proven within it has
    ``proven_optimal`` false, keeps the incumbent as ``opt`` and its ``bound``, and is left out
    of the statistics (:func:`summary_entry` counts it as ``unproven``)."""
    from .fig5 import fig5_row
    from ..model.load import largest_container, load_factor
    from ..workloads import paper_fig5

    options = dict(options or {})
    row = fig5_row(seed, servers, priority, pricings=pricings, options=options,
                   time_limit=time_limit)
    inst = paper_fig5(seed, servers=servers, priority=tuple(priority), **options)
    t0 = time.perf_counter()
    floor, utility, admitted = hindsight_floor(inst, u, grid)
    hindsight_s = time.perf_counter() - t0
    by = row["by_pricing"]
    by["hindsight"] = {"oasis": utility, "ratio": performance_ratio(row["opt"], utility),
                       "oasis_admitted": admitted, "floor": floor,
                       "alpha": max([1.0] + [math.log(v / floor) for key in ("U_worker", "U_ps")
                                             for v in u[key].values()])}
    load, where = load_factor(inst)
    keep = ("servers", "priority_lo", "priority_hi", "seed", "opt", "opt_admitted",
            "proven_optimal", "solve_s", "bound")
    return {**{k: row[k] for k in keep}, "by_pricing": by, "load": load, "load_resource": where,
            "largest_container": largest_container(inst), "options": options,
            "oasis_s": row["oasis_s"], "hindsight_s": hindsight_s,
            **({} if time_limit is None else {"time_limit": float(time_limit)})}


def row_key(row: dict) -> tuple:
    """(servers, gamma1 low, gamma1 high, seed, generator options as canonical JSON): what
    identifies a row (a row without ``options`` has the preset's defaults)."""
    return (int(row["servers"]), float(row["priority_lo"]), float(row["priority_hi"]),
            int(row["seed"]), json.dumps(row.get("options") or {}, sort_keys=True))


def group_inputs(servers: int, priority: tuple[float, float], options: dict | None = None,
                 cache: Path | None = None) -> tuple[dict, dict]:
    """(pricings, U) of one group, estimated once on its history (``fig5.group_pricings`` and
    ``estimate.history_u`` of ``fig5.group_history``): read from ``cache`` (JSON lines) when it
    holds the group, else computed and appended to it. JSON keeps every float exactly, so a
    cached group prices as a fresh one."""
    from ..online.estimate import history_u
    from .fig5 import group_history, group_pricings

    key = [int(servers), [float(priority[0]), float(priority[1])], dict(options or {})]
    if cache is not None and cache.is_file():
        for line in cache.read_text().splitlines():
            doc = json.loads(line)
            if doc["group"] == key:
                return doc["pricings"], doc["u"]
    pricings = group_pricings(servers, tuple(priority), options=options)
    u = history_u(group_history(servers, tuple(priority), options=options))
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        with cache.open("a") as f:
            f.write(json.dumps({"group": key, "pricings": pricings, "u": u}) + "\n")
    return pricings, u


def read_rows(path: Path) -> dict[tuple, dict]:
    """The rows stored in ``path`` (JSON lines) by :func:`row_key`; none when it is missing."""
    rows: dict[tuple, dict] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                rows[row_key(r)] = r
    return rows


def diagnose(cells: Sequence[tuple[int, tuple[float, float], int]], rows: Path, *,
             options: dict | None = None, grid: Sequence[float] | None = None, workers: int = 1,
             progress: bool = False, time_limit: float | None = None) -> list[dict]:
    """The :func:`diagnosis_row` of every (servers, gamma1 range, seed) of ``cells`` with the
    generator ``options``, in the order of ``cells``.

    Rows already in ``rows`` (JSON lines) are reused; each new row is appended as soon as it is
    computed, so a killed run loses only the rows in flight and a rerun computes exactly the
    missing ones. Each group's pricings and U are estimated once and cached beside the rows
    (``<rows>.groups.jsonl``, :func:`group_inputs`). ``workers`` > 1 computes rows in a process
    pool (each row is deterministic: the same rows in any order, but for a row whose MILP a
    ``time_limit`` cut short: its incumbent depends on the machine's speed). ``time_limit``:
    of each new row's MILP (:func:`diagnosis_row`); stored rows are reused whatever limit they
    ran under."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from tqdm import tqdm

    from ..online.estimate import DEFAULT_FLOOR_GRID

    options = dict(options or {})
    grid = tuple(DEFAULT_FLOOR_GRID if grid is None else grid)
    done = read_rows(rows)
    keyed = [(row_key({"servers": n, "priority_lo": pr[0], "priority_hi": pr[1], "seed": s,
                       "options": options}), (n, tuple(pr), s)) for n, pr, s in cells]
    todo = list(dict((k, c) for k, c in keyed if k not in done).items())
    cache = rows.with_name(rows.name.removesuffix(".jsonl") + ".groups.jsonl")
    groups = {(n, pr): group_inputs(n, pr, options, cache) for _, (n, pr, _s) in todo}
    rows.parent.mkdir(parents=True, exist_ok=True)
    with rows.open("a") as sink, tqdm(total=len(todo), desc="Fig. 5 diagnosis", unit="inst",
                                      disable=not progress) as bar:
        def keep(key: tuple, row: dict) -> None:
            done[key] = row
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            bar.update()
            bar.set_postfix(servers=row["servers"], seed=row["seed"],
                            priority=f"{row['priority_lo']:g}-{row['priority_hi']:g}")

        args = [(key, (s, n, pr, *groups[(n, pr)], grid, options, time_limit))
                for key, (n, pr, s) in todo]
        if workers > 1 and len(args) > 1:
            # spawned, not forked: a forked child inherits HiGHS's thread pool without its
            # threads, and its solves then never return
            with ProcessPoolExecutor(max_workers=workers,
                                     mp_context=multiprocessing.get_context("spawn")) as pool:
                futures = {pool.submit(diagnosis_row, *a): key for key, a in args}
                for future in as_completed(futures):
                    keep(futures[future], future.result())
        else:
            for key, a in args:
                keep(key, diagnosis_row(*a))
    return [done[k] for k, _ in keyed]


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
    # an infinite ratio (OASiS earned nothing) has no interpolated quantile: take order statistics
    method = "linear" if np.isfinite(draws).all() else "inverted_cdf"
    return (float(stat(np.arange(v.size))), float(np.quantile(draws, tail, method=method)),
            float(np.quantile(draws, 1 - tail, method=method)))


def summarize(rows: list[dict], *, resamples: int = 2000, seed: int = 0) -> list[dict]:
    """Per group (servers, gamma1 range), :func:`summary_entry` of its rows."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["servers"], r["priority_lo"], r["priority_hi"]), []).append(r)
    return [summary_entry(rs, {"servers": n, "priority_lo": lo, "priority_hi": hi},
                          resamples=resamples, seed=seed)
            for (n, lo, hi), rs in groups.items()]


def summary_entry(rows: list[dict], head: dict | None = None, *, resamples: int = 2000,
                  seed: int = 0) -> dict:
    """``head`` plus, per pricing: median ratio, mean ratio with its CI, ratio of sums with its
    CI, mean alpha and admitted counts; and the mean load and largest container. Only rows
    whose MILP was proven optimal count (``unproven``: how many were left out)."""
    rs = [r for r in rows if r["proven_optimal"]]
    entry: dict[str, Any] = {**(head or {}), "seeds": len(rs), "unproven": len(rows) - len(rs),
                             "opt_admitted": float(np.mean([r["opt_admitted"] for r in rs])),
                             "load": float(np.mean([r["load"] for r in rs])),
                             "largest_container": float(np.mean(
                                 [r["largest_container"] for r in rs]))}
    opt = [r["opt"] for r in rs]
    for name in DIAGNOSIS_PRICINGS:
        p = [r["by_pricing"][name] for r in rs]
        ratios = [x["ratio"] for x in p]
        entry[name] = {"median": float(np.median(ratios)),
                       "mean": bootstrap(ratios, resamples=resamples, seed=seed),
                       "median_ci": bootstrap(ratios, resamples=resamples, seed=seed,
                                              median=True),
                       "of_sums": bootstrap(opt, [x["oasis"] for x in p],
                                            resamples=resamples, seed=seed),
                       "alpha": float(np.mean([x["alpha"] for x in p])),
                       "admitted": float(np.mean([x["oasis_admitted"] for x in p])),
                       "in_paper_range": float(np.mean([1.1 <= x <= 1.5 for x in ratios]))}
    return entry


def binned(rows: list[dict], field: str, edges: Sequence[float], **kw: Any) -> list[dict]:
    """:func:`summary_entry` of the rows with ``edges[k] <= row[field] < edges[k + 1]``, per
    bin with rows (``low`` and ``high`` in each entry)."""
    out = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        rs = [r for r in rows if lo <= r[field] < hi]
        if rs:
            out.append(summary_entry(rs, {"field": field, "low": lo, "high": hi}, **kw))
    return out
