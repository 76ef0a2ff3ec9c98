"""The empirical competitive ratio OPT / OASiS of one instance, beside Theorem 4's bound 2 alpha.

``ratio_row(instance, pricing, ...)`` runs OASiS (priced by ``pricing``: "oracle", a pricing file
or document) and the offline optimum of problem (1), and reports:

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
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..model.load import largest_container, load_factor
from .fig5 import performance_ratio

RATIO_FORMAT = "oasis-opt/ratio@1"
OPT_METHODS = ("auto", "milp", "bracket")


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

    def finite(x: float) -> float | None:
        return x if math.isfinite(x) else None

    lo, hi = performance_ratio(best["lower"], u), performance_ratio(best["upper"], u)
    exact = best["method"] == "milp"
    stats = oasis.stats["pricing"]
    load, where = load_factor(instance)
    return {"instance": name, "jobs": instance.I, "horizon": instance.horizon,
            "oasis": {"utility": u, "admitted": int(sum(oasis.admitted)), "solve_s": oasis_s},
            "opt": {**best, "upper": finite(best["upper"])},
            "ratio": {"value": finite(lo) if exact else None, "lower": finite(lo),
                      "upper": finite(hi)},
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
