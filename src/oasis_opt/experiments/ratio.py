"""The competitive ratio OPT / OASiS: of one instance beside Theorem 4's bound 2 alpha, and the
study beyond Fig. 5, against size, load and 2 alpha, with worst cases (``reproduce ratio``).

**One instance** (``oasis-opt ratio``). ``ratio_row(instance, pricing, ...)`` runs OASiS (priced
by ``pricing``: "oracle", a pricing file or document) and the offline optimum of problem (1), and
reports:

* **OPT**: the exact MILP (section 2.1, HiGHS) when it is proven optimal (``opt.method`` =
  "milp"); otherwise (time limit hit, or ``opt="bracket"``) the bracket ``lower <= OPT <= upper``
  (``opt.method`` = "bracket"), where ``lower`` is the best schedule known of any solver run here
  (MILP incumbent, column generation's integer schedule, seeded with every baseline's and OASiS's
  schedule, OASiS's own schedule; ``opt.from`` says which, e.g. "colgen:dorm+fill@0") and
  ``upper`` the smallest proven bound (the MILP's best bound, column generation's Lagrangian
  bound).
* **ratio** = OPT / OASiS (``fig5.performance_ratio``: 1 when both earn 0; ``null`` in JSON when
  OASiS earns 0 and OPT does not), or the interval [lower / OASiS, upper / OASiS] of a bracket.
* **alpha**, **2 alpha** of the constants OASiS used (``Pricing.alpha``, Theorem 4).
* **load** and **largest container**: :mod:`oasis_opt.model.load` (the fraction of the
  bottleneck resource the whole workload needs over the horizon; the largest container against
  its server, which Theorem 4 assumes small). ``load_resource`` names the bottleneck.

The report (``oasis-opt/ratio@1``)::

    {"format": "oasis-opt/ratio@1", "pricing": "oracle", "time_limit": null,
     "rows": [{"instance": "a.json", "jobs": 10, "horizon": 10,
               "oasis": {"utility": 80.1, "admitted": 6},
               "opt": {"method": "milp", "proven": true, "lower": 95.3, "upper": 95.3,
                       "admitted": 8},
               "ratio": {"value": 1.19, "lower": 1.19, "upper": 1.19},
               "alpha": 17.2, "competitive_bound": 34.4, "load": 1.8, "load_resource": "gpu",
               "largest_container": 0.5}]}

For an exact OPT, ``lower == upper`` and ``ratio.value`` is the ratio; for a bracket
``ratio.value`` is null and the interval is [``ratio.lower``, ``ratio.upper``]. ``opt.admitted``
counts the jobs admitted by the best schedule found. ``read_ratio_report`` reads it back
strictly.

**The study** (``reproduce ratio``, drawn by ``oasis_opt.experiments.figures.ratio``).
``compute`` runs, on ``workloads.paper_fig5`` instances (Fig. 5's generator with ``jobs`` and
``horizon`` varied, ``servers`` fixed):

* **size**: jobs in ``sizes`` (10 -> 30 in the full run) over ``seeds``;
* **load**: smaller instances (``small`` jobs) on the same cluster, so that the load factor
  sum(W) / (capacity x T) (:func:`load_factor`) spans below and above 1; the load figure pools
  them with the size rows;
* **worst cases**: ``worst_case.hill_climb`` from ``paper_fig5`` instances of the search's
  (jobs, servers, horizon) at ``search.starts`` (search seed = start seed).

Every row is :func:`ratio_row` (the exact MILP; under ``time_limit`` a row whose optimum is not
proven keeps the MILP's [incumbent, bound] and is left out of the statistics and counted), plus
the seed and the sweep it belongs to. **Pricing**: OASiS is priced by the plug-in estimate
(``online.plugin.plugin_pricing``, eqs. (23)-(26) without search) on the history of each (jobs,
servers, horizon) group, ``paper_fig5`` at seeds ``calibration.history_seeds(quick,
small=True)`` (1000-1009; evaluated seeds are below 1000): fixed before any evaluated instance is
seen (``fig5.group_pricings``). Beside it every size/load row runs OASiS under the other rules
of :data:`RULES`, fixed in the same way (``rules`` in the row, :func:`rule_runs`): the searched
floor (``estimate-pricing``'s default, on the same history) and the adaptive floor
(``oasis-adaptive`` started from it, the history's calibration table as its prior);
:func:`summarize` gives their ratios per size against the
same OPT (``summary["rules"]``). For the worst cases, the ratio under the oracle constants of the
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
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..model.load import largest_container, load_factor
from .fig5 import performance_ratio

if TYPE_CHECKING:
    from ..online.estimate import EstimatedPricing

RATIO_FORMAT = "oasis-opt/ratio@1"
OPT_METHODS = ("auto", "milp", "bracket")


def _finite(x: float) -> float | None:
    """``x``, or None (JSON null) when it is infinite."""
    return x if math.isfinite(x) else None


def _best_opt(instance: Any, time_limit: float | None, opt: str, oasis: Any) -> dict:
    """OPT by the MILP (proven) or the bracket, the latter seeded with every baseline's schedule
    and ``oasis`` (OASiS's schedule under the row's pricing); every schedule validated."""
    from ..offline.colgen import bracket, policy_schedules
    from ..offline.exact import OfflinePolicy
    from ..offline.lp import MIP_GAP

    lower, upper, admitted, parts = 0.0, math.inf, 0, []
    if opt in ("auto", "milp"):
        milp = OfflinePolicy().solve(instance, time_limit=time_limit)
        st = milp.stats
        lower, admitted = float(milp.total_utility), int(sum(milp.admitted))
        if st["bound"] is not None:
            upper = float(st["bound"])
        parts.append("milp")
        if st["proven_optimal"]:
            return {"method": "milp", "proven": True, "lower": lower, "upper": lower,
                    "admitted": admitted}
    if opt in ("auto", "bracket"):
        seeds = {**policy_schedules(instance), "oasis-priced": oasis}
        b = bracket(instance, time_limit=time_limit, seeds=seeds)
        if b.lower > lower:
            lower, admitted = float(b.lower), int(sum(b.schedule.admitted))
        upper = min(upper, float(b.upper))
        parts.append(f"colgen:{b.source}")
    return {"method": "bracket", "proven": bool(upper <= lower * (1 + MIP_GAP)), "lower": lower,
            "upper": upper, "admitted": admitted, "from": "+".join(parts)}


def ratio_row(instance: Any, pricing: Any = "oracle", *, time_limit: float | None = None,
              opt: str = "auto", name: str = "") -> dict:
    """One row of the report (module docstring) for ``instance``, named ``name``.

    ``opt``: "auto" (MILP, then the bracket if not proven within ``time_limit``), "milp" (the
    MILP's incumbent and bound only), "bracket" (column generation only). ``time_limit``:
    seconds per solver run (None: until proven / converged).
    """
    from ..model.validate import assert_valid
    from ..online.oasis import OasisPolicy

    if opt not in OPT_METHODS:
        raise ValueError(f"opt: expected one of {', '.join(OPT_METHODS)}, got {opt!r}")
    t0 = time.perf_counter()
    oasis = OasisPolicy(pricing=pricing).solve(instance)
    assert_valid(instance, oasis)
    oasis_s = time.perf_counter() - t0
    u = float(oasis.total_utility)
    best = _best_opt(instance, time_limit, opt, oasis)
    if u > best["lower"]:  # OASiS's schedule is a feasible schedule too
        best.update(lower=u, admitted=int(sum(oasis.admitted)))
        best["from"] = best.get("from", "milp") + "+oasis"
    best["upper"] = max(best["upper"], best["lower"])  # only float noise could invert them

    lo, hi = performance_ratio(best["lower"], u), performance_ratio(best["upper"], u)
    exact = best["method"] == "milp"
    stats = oasis.stats["pricing"]
    load, where = load_factor(instance)
    return {"instance": name, "jobs": instance.I, "horizon": instance.horizon,
            "oasis": {"utility": u, "admitted": int(sum(oasis.admitted)), "solve_s": oasis_s},
            "opt": {**best, "upper": _finite(best["upper"])},
            "ratio": {"value": _finite(lo) if exact else None, "lower": _finite(lo),
                      "upper": _finite(hi)},
            "alpha": float(stats["alpha"]), "competitive_bound": float(stats["competitive_bound"]),
            "pricing_source": str(stats["source"]), "load": load, "load_resource": where,
            "largest_container": largest_container(instance)}


def ratio_report(rows: Sequence[dict], pricing: str, time_limit: float | None) -> dict:
    return {"format": RATIO_FORMAT, "pricing": pricing, "time_limit": time_limit,
            "rows": list(rows)}


def table(rows: Sequence[dict]) -> tuple[list[str], list[list[Any]]]:
    """Header and rows for ``sim.report.format_table``: one line per instance."""
    def ratio(r: dict) -> str:
        q = r["ratio"]
        if q["value"] is not None:
            return f"{q['value']:.3f}"
        if q["lower"] is None:
            return "inf (OASiS 0)"
        return f"[{q['lower']:.3f}, {'inf' if q['upper'] is None else format(q['upper'], '.3f')}]"

    def opt(r: dict) -> str:
        o = r["opt"]
        if o["method"] == "milp":
            return f"{o['lower']:.4g}"
        return f"[{o['lower']:.4g}, {'inf' if o['upper'] is None else format(o['upper'], '.4g')}]*"

    head = ["instance", "jobs", "OPT", "OASiS", "admitted OPT/OASiS", "OPT/OASiS", "alpha",
            "2 alpha", "load"]
    body = [[r["instance"], r["jobs"], opt(r), f"{r['oasis']['utility']:.4g}",
             f"{r['opt']['admitted']}/{r['oasis']['admitted']}", ratio(r), f"{r['alpha']:.2f}",
             f"{r['competitive_bound']:.2f}", f"{r['load']:.2f}"] for r in rows]
    return head, body


# ---- strict reader ------------------------------------------------------------------------------
_ROW = {"instance": str, "jobs": int, "horizon": int, "oasis": dict, "opt": dict, "ratio": dict,
        "alpha": float, "competitive_bound": float, "pricing_source": str, "load": float,
        "load_resource": str, "largest_container": float}
_OASIS = {"utility": float, "admitted": int, "solve_s": float}
_OPT = {"method": str, "proven": bool, "lower": float, "upper": (float, type(None)),
        "admitted": int}
_RATIO = {"value": (float, type(None)), "lower": (float, type(None)),
          "upper": (float, type(None))}


def _check(obj: Any, fields: dict, path: str, optional: tuple[str, ...] = ()) -> None:
    from ..model.io import FormatError

    def at(key: str) -> str:
        return f"{path}.{key}" if path else key

    if not isinstance(obj, dict):
        raise FormatError(path, "expected an object")
    extra = sorted(set(obj) - set(fields) - set(optional))
    if extra:
        raise FormatError(at(extra[0]), "unknown field")
    for key, kind in fields.items():
        if key not in obj:
            raise FormatError(at(key), "missing field")
        v = obj[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        ok = any((isinstance(v, (int, float)) and not isinstance(v, bool) if k is float else
                  isinstance(v, int) and not isinstance(v, bool) if k is int else
                  isinstance(v, k)) for k in kinds)
        if not ok:
            raise FormatError(at(key), f"expected {' or '.join(k.__name__ for k in kinds)}"
                              f", got {type(v).__name__}")


def read_ratio_report(path: str | Path) -> dict:
    """Read an ``oasis-opt/ratio@1`` file; ``FormatError`` names the first bad field."""
    from ..model.io import FormatError, read_json

    doc = read_json(path)
    if not isinstance(doc, dict):
        raise FormatError("", "a ratio report must be a JSON object")
    if doc.get("format") != RATIO_FORMAT:
        raise FormatError("format", f"expected {RATIO_FORMAT!r}, got {doc.get('format')!r}")
    _check(doc, {"format": str, "pricing": str, "time_limit": (float, type(None)),
                 "rows": list}, "")
    for n, row in enumerate(doc["rows"]):
        p = f"rows[{n}]"
        _check(row, _ROW, p)
        _check(row["oasis"], _OASIS, f"{p}.oasis")
        _check(row["opt"], _OPT, f"{p}.opt", optional=("from",))
        _check(row["ratio"], _RATIO, f"{p}.ratio")
        o = row["opt"]
        if o["method"] not in ("milp", "bracket"):
            raise FormatError(f"{p}.opt.method", f"expected 'milp' or 'bracket', got "
                              f"{o['method']!r}")
        if o["upper"] is not None and o["upper"] < o["lower"]:
            raise FormatError(f"{p}.opt.upper", "below opt.lower")
    return doc


# ---- the study (``reproduce ratio``) -----------------------------------------------------------
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


# the other pricing rules run on every study row beside the plug-in headline (module docstring)
RULES = ("searched", "adaptive")
# the rules' runs of a stored row are redone when its ``rules_version`` differs (2: the adaptive
# floor has the history's prior; rows of version 1 ran it without)
RULES_VERSION = 2


def group_searched(jobs: int, servers: int, horizon: int, quick: bool) -> EstimatedPricing:
    """The searched-floor pricing document of one (jobs, servers, horizon) group, with the
    calibration table that chose it: the default ``estimate-pricing`` rule
    (``online.estimate.estimate_pricing``) on the same history as :func:`group_pricing`."""
    from ..online.estimate import estimate_pricing
    from .fig5 import group_history

    return estimate_pricing(group_history(servers, PRIORITY, quick, jobs=jobs, horizon=horizon))


def rule_runs(instance: Any, searched: EstimatedPricing) -> dict[str, dict]:
    """OASiS on ``instance`` under each rule of :data:`RULES`: the searched floor ``searched``
    (``oasis``) and the adaptive floor started from it (``oasis-adaptive``, its calibration
    table as the prior, as in the pricing study); each schedule validated. ``{rule:
    {"utility", "admitted", "floor", "switches"}}``, the adaptive rule's also with
    ``prior_weight``; ``floor`` is the floor the run ended on (the searched floor itself; the
    adaptive rule's last leader), ``switches`` how often the adaptive floor changed (0 for the
    searched floor)."""
    from ..model.validate import assert_valid
    from ..online.adaptive import AdaptiveOasisPolicy, floor_of
    from ..online.oasis import OasisPolicy

    out = {}
    for rule, policy in (("searched", OasisPolicy(pricing=searched)),
                         ("adaptive", AdaptiveOasisPolicy(pricing=dict(searched),
                                                          prior=searched.calibration))):
        res = policy.solve(instance)
        assert_valid(instance, res)
        ada = res.stats.get("adaptive", {})
        out[rule] = {"utility": float(res.total_utility), "admitted": int(sum(res.admitted)),
                     "floor": float(ada.get("final_floor", floor_of(searched))),
                     "switches": int(ada.get("switches", 0))}
        if rule == "adaptive":  # provenance: the prior's weight (None: run without a prior)
            out[rule]["prior_weight"] = (ada.get("prior") or {}).get("weight")
    return out


def rule_row(row: dict, rule: str) -> dict:
    """``row`` with OASiS replaced by its run under ``rule`` ("plugin": the row itself): the
    ratio recomputed against the same OPT, so :func:`stats` applies unchanged."""
    if rule == "plugin":
        return row
    o = row["rules"][rule]
    lo = performance_ratio(row["opt"]["lower"], o["utility"])
    up = row["opt"]["upper"]
    hi = math.inf if up is None else performance_ratio(up, o["utility"])

    exact = row["opt"]["method"] == "milp"
    return {**row, "oasis": {**row["oasis"], "utility": o["utility"], "admitted": o["admitted"]},
            "ratio": {"value": _finite(lo) if exact else None, "lower": _finite(lo),
                      "upper": _finite(hi)}}


def sweep_rows(s: dict, quick: bool, results: Path | None, progress: bool) -> list[dict]:
    """The size and load rows (module docstring), each stored / reused under ``results``; a
    stored row without the other rules' runs (``rules``) gets them, its OPT reused."""
    from tqdm import tqdm

    from ..model.io import read_json, write_json_atomic
    from ..workloads import paper_fig5

    todo = ([("size", j, seed) for j in s["sizes"] for seed in s["seeds"]]
            + [("load", j, seed) for j in s["small"] for seed in s["seeds"]])
    store = None if results is None else Path(results) / "ratio-study"
    pricing: dict[int, dict] = {}
    searched: dict[int, dict] = {}
    rows = []
    bar = tqdm(todo, desc=f"ratio size/load{' (quick)' if quick else ''}", unit="inst",
               disable=not progress)
    for sweep, jobs, seed in bar:
        key = _row_key(jobs, s["servers"], s["horizon"], seed, quick)
        path = None if store is None else store / f"{key}.json"
        row = read_json(path) if path is not None and path.is_file() else None
        fresh = row is None or not _reusable(row, s["time_limit"])
        if fresh or "rules" not in row or row.get("rules_version") != RULES_VERSION:
            inst = paper_fig5(seed, servers=s["servers"], priority=PRIORITY, jobs=jobs,
                              horizon=s["horizon"])
            if jobs not in searched:
                searched[jobs] = group_searched(jobs, s["servers"], s["horizon"], quick)
            if fresh:
                if jobs not in pricing:
                    pricing[jobs] = group_pricing(jobs, s["servers"], s["horizon"], quick)
                row = {**ratio_row(inst, pricing[jobs], time_limit=s["time_limit"], opt="milp",
                                   name=key), "seed": seed, "servers": s["servers"],
                       "time_limit": s["time_limit"]}
            row = {**row, "rules": rule_runs(inst, searched[jobs]), "rules_version": RULES_VERSION}
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
    """``{"size": {jobs: stats}, "load": {bucket index: stats}, "rules": {rule: {jobs:
    stats}}}`` (size: the size sweep's rows, OASiS under the plug-in; load: every row; rules:
    the size sweep's rows with OASiS under each rule, "plugin" and :data:`RULES`, against the
    same OPT)."""
    size: dict[int, list] = {}
    for r in rows:
        if r["sweep"] == "size":
            size.setdefault(r["jobs"], []).append(r)
    load: dict[int, list] = {}
    for r in rows:
        load.setdefault(load_bucket(r["load"]), []).append(r)
    return {"size": {j: stats(rs, **kw) for j, rs in sorted(size.items())},
            "load": {b: stats(rs, **kw) for b, rs in sorted(load.items())},
            "rules": {rule: {j: stats([rule_row(r, rule) for r in rs], **kw)
                             for j, rs in sorted(size.items())}
                      for rule in ("plugin",) + RULES}}
