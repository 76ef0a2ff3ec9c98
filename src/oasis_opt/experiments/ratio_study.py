"""The competitive ratio beyond Fig. 5: OPT / OASiS against size, load and 2 alpha; worst cases.

``compute`` (``oasis-opt reproduce ratio``) runs, on ``workloads.paper_fig5`` instances (Fig. 5's
generator with ``jobs`` and ``horizon`` varied, ``servers`` fixed):

* **size**: jobs in ``sizes`` (10 -> 30 in the full run) over ``seeds``;
* **load**: smaller instances (``small`` jobs) on the same cluster, so that the load factor
  sum(W) / (capacity x T) (``experiments.ratio.load_factor``) spans below and above 1; the load
  figure pools them with the size rows;
* **worst cases**: ``worst_case.hill_climb`` from ``paper_fig5`` instances of the search's
  (jobs, servers, horizon) at ``search.starts`` (search seed = start seed).

Every row is ``experiments.ratio.ratio_row`` (the exact MILP; under ``time_limit`` a row whose
optimum is not proven keeps the MILP's [incumbent, bound] and is left out of the statistics and
counted), plus the seed and the sweep it belongs to. **Pricing**: OASiS is priced by the plug-in
estimate (``online.plugin.plugin_pricing``, eqs. (23)-(26) without search) on the history of each
(jobs, servers, horizon) group, ``paper_fig5`` at seeds ``calibration.history_seeds(quick,
small=True)`` (1000-1009; evaluated seeds are below 1000): fixed before any evaluated instance is
seen (``fig5.group_pricings``). For the worst cases, the ratio under the oracle constants of the
found instance itself (for which Theorem 4's 2 alpha is stated) is reported beside.

Rows are stored one JSON file each under ``<results>/ratio-study/`` (named by the instance and
the history) and reused when rerun: a proven row always, an open one only under a time limit no
longer than its own; so are the search's records (named by start and steps).
:func:`summarize` gives, per size and per load bucket (:data:`LOAD_BINS`), the median ratio with
its bootstrap 95% interval and the ratio of summed utilities with its interval
(``fig5_diagnosis.bootstrap``, resampling instances).
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

PRIORITY = (50.0, 100.0)
FULL = {"servers": 6, "horizon": 10, "sizes": (10, 15, 20, 25, 30), "small": (4, 6, 8),
        "seeds": (0, 1, 2, 3, 4, 5), "time_limit": 60.0,
        "search": {"jobs": 6, "servers": 4, "horizon": 6, "starts": (0, 1, 2, 3, 4, 5),
                   "steps": 200}}
QUICK = {"servers": 3, "horizon": 5, "sizes": (4, 6), "small": (2,), "seeds": (0, 1),
         "time_limit": None,
         "search": {"jobs": 4, "servers": 3, "horizon": 4, "starts": (1,), "steps": 8}}
# load buckets of sum(W) / (capacity x T) on the bottleneck resource
LOAD_BINS = (0.0, 1.0, 1.5, 2.0, 3.0, 5.0, math.inf)


def settings(quick: bool) -> dict:
    return QUICK if quick else FULL


def group_pricing(jobs: int, servers: int, horizon: int, quick: bool) -> dict:
    """The plug-in pricing document of one (jobs, servers, horizon) group (module docstring)."""
    from .fig5 import group_pricings

    return group_pricings(servers, PRIORITY, quick, ("plugin",), jobs=jobs,
                          horizon=horizon)["plugin"]["pricing"]


def exact_ratio(row: dict) -> float | None:
    """The proven OPT / OASiS of a row (``inf``: OASiS earns 0); None when OPT is not proven."""
    if row["opt"]["method"] != "milp":
        return None
    value = row["ratio"]["value"]
    return math.inf if value is None else float(value)


def _row_key(jobs: int, servers: int, horizon: int, seed: int, quick: bool) -> str:
    from .calibration import history_seeds

    h = history_seeds(quick, small=True)
    return f"paper-fig5-j{jobs}-s{servers}-T{horizon}-seed{seed}-hist{h[0]}-{h[-1]}"


def _reusable(row: dict, time_limit: float | None) -> bool:
    """A stored row serves: a proven optimum under any limit, an open one under a limit no
    longer than the one it ran with."""
    if row["opt"]["proven"]:
        return True
    ran = row["time_limit"]
    return time_limit is not None and (ran is None or ran >= time_limit)


def sweep_rows(s: dict, quick: bool, results: Path | None, progress: bool) -> list[dict]:
    """The size and load rows (module docstring), each stored / reused under ``results``."""
    from tqdm import tqdm

    from ..model.io import read_json, write_json_atomic
    from ..workloads import paper_fig5
    from .ratio import ratio_row

    todo = ([("size", j, seed) for j in s["sizes"] for seed in s["seeds"]]
            + [("load", j, seed) for j in s["small"] for seed in s["seeds"]])
    store = None if results is None else Path(results) / "ratio-study"
    pricing: dict[int, dict] = {}
    rows = []
    bar = tqdm(todo, desc=f"ratio size/load{' (quick)' if quick else ''}", unit="inst",
               disable=not progress)
    for sweep, jobs, seed in bar:
        key = _row_key(jobs, s["servers"], s["horizon"], seed, quick)
        path = None if store is None else store / f"{key}.json"
        row = read_json(path) if path is not None and path.is_file() else None
        if row is None or not _reusable(row, s["time_limit"]):
            if jobs not in pricing:
                pricing[jobs] = group_pricing(jobs, s["servers"], s["horizon"], quick)
            inst = paper_fig5(seed, servers=s["servers"], priority=PRIORITY, jobs=jobs,
                              horizon=s["horizon"])
            row = {**ratio_row(inst, pricing[jobs], time_limit=s["time_limit"], opt="milp",
                               name=key), "seed": seed, "servers": s["servers"],
                   "time_limit": s["time_limit"]}
            if path is not None:
                write_json_atomic(path, row)
        rows.append({**row, "sweep": sweep})
        r = exact_ratio(row)
        bar.set_postfix(jobs=jobs, seed=seed, ratio="open" if r is None else f"{r:.3f}")
    return rows


def search_runs(s: dict, quick: bool, progress: bool,
                results: Path | None = None) -> tuple[dict, list[dict]]:
    """(pricing document, one record per start): the worst-case search of the module
    docstring; each record holds the worst instance found (``instance``, the
    ``oasis-opt/instance@1`` document) and the oracle-priced ratio on it. Records are stored /
    reused under ``results`` as the rows are."""
    from tqdm import tqdm

    from ..model.io import instance_to_dict, read_json, write_json_atomic
    from ..workloads import paper_fig5
    from .ratio import ratio_row
    from .worst_case import hill_climb

    c = s["search"]
    pricing = group_pricing(c["jobs"], c["servers"], c["horizon"], quick)
    out = []
    for start in tqdm(c["starts"], desc=f"worst-case search{' (quick)' if quick else ''}",
                      unit="start", disable=not progress):
        key = "search-" + _row_key(c["jobs"], c["servers"], c["horizon"], start, quick)
        path = None if results is None else Path(results) / "ratio-study" / \
            f"{key}-steps{c['steps']}.json"
        if path is not None and path.is_file():
            out.append(read_json(path))
            continue
        inst = paper_fig5(start, servers=c["servers"], priority=PRIORITY, jobs=c["jobs"],
                          horizon=c["horizon"])
        res = hill_climb(inst, pricing, steps=c["steps"], seed=start, name=f"start {start}",
                         progress=progress)
        try:
            oracle = ratio_row(res.best, "oracle", opt="milp")
        except ValueError as e:  # eqs. (23)-(26) undefined on the found instance
            oracle = {"error": str(e)}
        meta = {"generator": "worst-case search (oasis_opt.experiments.worst_case)",
                "start": dict(inst.meta), "search_seed": start, "steps": c["steps"],
                "pricing": "plug-in (worst_cases/pricing.json)",
                "ratio": res.ratio if math.isfinite(res.ratio) else "inf"}
        best = dataclasses.replace(res.best, meta=meta)
        out.append({"start": start, "seed": start, "steps": c["steps"],
                    "start_row": res.start_row, "best_row": res.best_row,
                    "trace": [t if math.isfinite(t) else "inf" for t in res.trace],
                    "accepted": list(res.accepted), "oracle": oracle,
                    "instance": instance_to_dict(best)})
        if path is not None:
            write_json_atomic(path, out[-1])
    return pricing, out


def compute(quick: bool = False, results=None, workers=None, address=None,
            progress: bool = True) -> dict[str, Any]:
    """``{"quick", "settings", "rows", "search_pricing", "search"}`` (module docstring);
    ``workers`` and ``address`` are not used (in-process)."""
    s = settings(quick)
    results = None if results is None else Path(results)
    rows = sweep_rows(s, quick, results, progress)
    pricing, search = search_runs(s, quick, progress, results)
    return {"quick": quick, "settings": s, "rows": rows, "search_pricing": dict(pricing),
            "search": search}


def against_oracle(pricing: dict, instance: Any) -> tuple[float, float]:
    """(max over pools and priced resources r of L^r / L_oracle^r, max of U_oracle^r / U^r):
    ``pricing``'s constants against those of eqs. (23)-(26) on ``instance``. Theorem 4's proof
    needs every floor at most the oracle's and every U at least the oracle's (the prices must
    span the instance's values per unit); when either number exceeds 1 the constants are outside
    the theorem and 2 alpha is not a bound for this instance."""
    from ..online import oracle_pricing

    oracle = oracle_pricing(instance).to_dict()
    floor, cap = 0.0, 0.0
    for pool in ("worker", "ps"):
        ours, theirs = pricing[f"L_{pool}"], oracle[f"L_{pool}"]
        for r, u in pricing[f"U_{pool}"].items():
            mine = ours[r] if isinstance(ours, dict) else ours
            base = theirs[r] if isinstance(theirs, dict) else theirs
            floor = max(floor, mine / base)
            if r in oracle[f"U_{pool}"]:
                cap = max(cap, oracle[f"U_{pool}"][r] / u)
    return floor, cap


def load_bucket(load: float) -> int:
    """Index of the :data:`LOAD_BINS` bucket [lo, hi) holding ``load``."""
    return int(np.searchsorted(LOAD_BINS, load, side="right")) - 1


def bucket_label(n: int) -> str:
    lo, hi = LOAD_BINS[n], LOAD_BINS[n + 1]
    return f"[{lo:g}, {hi:g})" if math.isfinite(hi) else f">= {lo:g}"


def stats(rows: Sequence[dict], *, resamples: int = 2000, seed: int = 0) -> dict:
    """Over the proven rows: median ratio [95% CI], ratio of sums OPT / OASiS [CI], mean load,
    2 alpha and admitted counts; ``open``: rows whose OPT was not proven (left out)."""
    from .fig5_diagnosis import bootstrap

    exact = [r for r in rows if exact_ratio(r) is not None]
    ratios = [exact_ratio(r) for r in exact]
    mean = (lambda xs: float(np.mean(xs)) if len(xs) else math.nan)
    return {"n": len(exact), "open": len(rows) - len(exact),
            "median": bootstrap(ratios, resamples=resamples, seed=seed, median=True),
            "of_sums": bootstrap([r["opt"]["lower"] for r in exact],
                                 [r["oasis"]["utility"] for r in exact],
                                 resamples=resamples, seed=seed),
            "max": max(ratios) if ratios else math.nan,
            "load": mean([r["load"] for r in exact]),
            "bound": mean([r["competitive_bound"] for r in exact]),
            "admitted_opt": mean([r["opt"]["admitted"] for r in exact]),
            "admitted_oasis": mean([r["oasis"]["admitted"] for r in exact])}


def summarize(rows: Sequence[dict], **kw) -> dict:
    """``{"size": {jobs: stats}, "load": {bucket index: stats}}`` (size: the size sweep's rows;
    load: every row)."""
    size: dict[int, list] = {}
    for r in rows:
        if r["sweep"] == "size":
            size.setdefault(r["jobs"], []).append(r)
    load: dict[int, list] = {}
    for r in rows:
        load.setdefault(load_bucket(r["load"]), []).append(r)
    return {"size": {j: stats(rs, **kw) for j, rs in sorted(size.items())},
            "load": {b: stats(rs, **kw) for b, rs in sorted(load.items())}}
