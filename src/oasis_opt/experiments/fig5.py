"""Fig. 5: performance ratio OPT / OASiS, 10 jobs, T = 10, 3/6/9/12 servers, four gamma1 ranges.

Setting (reference section 13, choice A9): ``workloads.paper_fig5(seed, servers=n,
priority=(lo, hi))`` (n servers split into ceil(n/2) worker and floor(n/2) PS hosts, jobs small
enough to finish by T); OPT is the exact optimum of problem (1) by the linearised MILP
(policy ``offline``, each solve proven optimal to a relative gap of 1e-6 unless a time limit
cuts it short, which the row records); OASiS is the ``oasis`` policy under each pricing of
:data:`PRICINGS`, all fixed before any evaluated instance is seen except the oracle:

* ``plugin``: ``online.plugin.plugin_pricing`` on the group's history (the paper's estimate);
* ``searched``: ``online.estimate.estimate_pricing`` on the same history, default grid (tuning);
* ``oracle``: eqs. (23)-(26) on the evaluated instance itself.

The history of a group (servers x gamma1 range) is ``paper_fig5`` at seeds
``calibration.history_seeds(quick, small=True)`` (1000-1009; the evaluated seeds are below
1000), as ``reproduce fig5`` uses. Every row carries alpha (Theorem 4) of the constants used,
and the tables print alpha and 2 alpha beside every ratio. The paper averages over runs without
saying how; :func:`summarize` reports both the mean of the per-seed ratios (the headline) and the
ratio of the summed utilities.

``fig5_row`` is one unit of work (one instance, both solvers), so a runner can spread the rows
over workers; ``fig5_rows`` runs them in order with a progress bar.

For ``reproduce fig5`` (:func:`runs`) each instance becomes two runs, the exact MILP (policy
``offline``) and ``oasis``, so they spread over the workers, are stored and resumed like every
other run, and both schedules pass the validator; :func:`rows` rebuilds the rows
:func:`fig5_row` would return from the two stored records. OASiS runs there under the three
pricings, each a series: the plug-in estimate (series :data:`PLUGIN`), the searched floor (series
"oasis", the claims' headline as in the other figures) and the oracle (series ``ORACLE``); and
as ``oasis-adaptive`` (series :data:`ADAPTIVE`, ``online.adaptive``), whose floor starts at the
searched floor and follows, job by job, the best of plain OASiS runs over the grid, with the
history's calibration table as its prior (``figures.common.adaptive_options``).
"""
from __future__ import annotations

import json
import math
import time
from functools import lru_cache
from pathlib import Path

import numpy as np

from .calibration import FloorEstimate, history_seeds
from .figures.common import adaptive_options, oasis_runs, series
from .spec import RunSpec

SERVERS = (3, 6, 9, 12)
# the paper's printed bar order within each group
PRIORITIES = ((50.0, 100.0), (75.0, 100.0), (1.0, 100.0), (25.0, 100.0))
FULL = {"servers": SERVERS, "priorities": PRIORITIES, "seeds": (0, 1, 2, 3, 4)}
QUICK = {"servers": SERVERS, "priorities": PRIORITIES, "seeds": (0,)}


# the pricings of OASiS, in table order (module docstring)
PRICINGS = ("plugin", "searched", "oracle")


def settings(quick: bool) -> dict:
    return QUICK if quick else FULL


def group_history(servers: int, priority: tuple[float, float], quick: bool = False, *,
                  jobs: int = 10, horizon: int = 10, options: dict | None = None) -> list:
    """The group's past instances: ``paper_fig5`` (with these ``jobs`` and ``horizon``, and the
    generator ``options``, e.g. ``e_max_scale``, which may also set ``jobs`` and ``horizon``) at
    the history seeds (disjoint from the evaluated seeds)."""
    from ..workloads import paper_fig5
    from .calibration import history_seeds

    kwargs = {"jobs": jobs, "horizon": horizon, **(options or {})}
    return [paper_fig5(s, servers=servers, priority=tuple(priority), **kwargs)
            for s in history_seeds(quick, small=True)]


def group_pricings(servers: int, priority: tuple[float, float], quick: bool = False,
                   names: tuple[str, ...] = PRICINGS, *, jobs: int = 10,
                   horizon: int = 10, options: dict | None = None) -> dict[str, dict]:
    """name -> OASiS options for each pricing of ``names`` (module docstring), one group
    (``jobs`` and ``horizon``: of the group's instances, Fig. 5's 10 and 10 by default;
    ``options``: further ``paper_fig5`` options of the group's instances)."""
    from ..online.estimate import estimate_pricing
    from ..online.plugin import plugin_pricing

    unknown = sorted(set(names) - set(PRICINGS))
    if unknown:
        raise ValueError(f"pricing: unknown {unknown[0]!r} (known: {', '.join(PRICINGS)})")
    history = (group_history(servers, priority, quick, jobs=jobs, horizon=horizon,
                             options=options)
               if set(names) - {"oracle"} else [])
    out: dict[str, dict] = {}
    for name in names:
        if name == "plugin":
            out[name] = {"pricing": dict(plugin_pricing(history))}
        elif name == "searched":
            out[name] = {"pricing": dict(estimate_pricing(history))}
        else:
            out[name] = {}
    return out


def with_pricing(rows: list[dict], name: str) -> list[dict]:
    """The rows with OASiS's fields (``oasis``, ``ratio``, ``oasis_admitted``, ``alpha``) taken
    from pricing ``name`` of ``by_pricing``, for :func:`summarize` / :func:`markdown`."""
    return [{**r, **r["by_pricing"][name]} for r in rows]


def performance_ratio(u_opt: float, u_oasis: float) -> float:
    """OPT / OASiS; infinite when OASiS earns nothing and OPT something, 1 when both earn 0."""
    return u_opt / u_oasis if u_oasis > 0 else (math.inf if u_opt > 0 else 1.0)


def fig5_row(seed: int, servers: int, priority: tuple[float, float], *, backend: str = "highs",
             time_limit: float | None = None, oasis_options: dict | None = None,
             pricings: dict[str, dict] | None = None, options: dict | None = None) -> dict:
    """OPT and OASiS on one Fig. 5 instance: utilities, ratio and the MILP's solve record
    (``options``: further ``paper_fig5`` options of the instance).

    ``pricings``: name -> OASiS options (e.g. :func:`group_pricings`); OASiS runs once per
    entry, each reported under ``by_pricing[name]`` (``oasis``, ``ratio``, ``oasis_admitted``,
    ``alpha``) and the first also at the top level. Without it, one run with ``oasis_options``
    (named "oasis").
    """
    from ..offline.exact import OfflinePolicy
    from ..policies import get_policy
    from ..workloads import paper_fig5

    inst = paper_fig5(seed, servers=servers, priority=priority, **(options or {}))
    opt = OfflinePolicy(backend=backend).solve(inst, time_limit=time_limit)
    st = opt.stats
    by_pricing, oasis_s = {}, 0.0
    for name, options in (pricings or {"oasis": oasis_options or {}}).items():
        t0 = time.perf_counter()
        oasis = get_policy("oasis", **options).solve(inst)
        oasis_s += time.perf_counter() - t0
        by_pricing[name] = {"oasis": oasis.total_utility,
                            "ratio": performance_ratio(opt.total_utility, oasis.total_utility),
                            "oasis_admitted": int(sum(oasis.admitted)),
                            "alpha": float(oasis.stats["pricing"]["alpha"])}
    first = next(iter(by_pricing.values()))
    return {"servers": servers, "priority_lo": priority[0], "priority_hi": priority[1],
            "seed": seed, "jobs": inst.I, "horizon": inst.horizon, "opt": opt.total_utility,
            **first, "by_pricing": by_pricing, "opt_admitted": int(sum(opt.admitted)),
            "proven_optimal": st["proven_optimal"],
            "status": st["status"], "bound": st["bound"], "gap": st["gap"],
            "build_s": st["build_s"], "handoff_s": st["handoff_s"], "solve_s": st["solve_s"],
            "columns": st.get("columns"), "rows": st.get("rows"), "oasis_s": oasis_s,
            "backend": backend}


def fig5_rows(seeds=FULL["seeds"], servers=SERVERS, priorities=PRIORITIES, *,
              backend: str = "highs", time_limit: float | None = None, progress: bool = False,
              oasis_options: dict | None = None, pricings: tuple[str, ...] | None = None,
              quick: bool = False) -> list[dict]:
    """Every (servers, priority range, seed) row of Fig. 5, in the paper's order; with
    ``pricings`` (names of :data:`PRICINGS`) OASiS runs under each (:func:`group_pricings`,
    history by ``quick``)."""
    from tqdm import tqdm

    grid = [(n, pr, s) for n in servers for pr in priorities for s in seeds]
    rows: list[dict] = []
    groups: dict[tuple, dict] = {}
    with tqdm(grid, desc="Fig. 5 (MILP + OASiS)", unit="inst", disable=not progress) as bar:
        for n, pr, s in bar:
            if pricings is not None and (n, pr) not in groups:
                groups[(n, pr)] = group_pricings(n, pr, quick, tuple(pricings))
            rows.append(fig5_row(s, n, pr, backend=backend, time_limit=time_limit,
                                 oasis_options=oasis_options, pricings=groups.get((n, pr))))
            bar.set_postfix(servers=n, priority=f"{pr[0]:g}-{pr[1]:g}", seed=s,
                            ratio=f"{rows[-1]['ratio']:.3f}")
    return rows


def summarize(rows: list[dict]) -> list[dict]:
    """Per (servers, priority range): mean/min/max of the per-seed ratios, the ratio of summed
    utilities, how many seeds, and whether every MILP was proven optimal."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["servers"], r["priority_lo"], r["priority_hi"]), []).append(r)
    out = []
    for (n, lo, hi), rs in groups.items():
        ratios = np.array([r["ratio"] for r in rs], dtype=float)
        oasis = sum(r["oasis"] for r in rs)
        alpha = [r["alpha"] for r in rs if r.get("alpha") is not None]
        out.append({"servers": n, "priority_lo": lo, "priority_hi": hi, "seeds": len(rs),
                    "alpha_mean": float(np.mean(alpha)) if alpha else math.nan,
                    "opt_admitted_mean": float(np.mean([r["opt_admitted"] for r in rs])),
                    "oasis_admitted_mean": float(np.mean([r["oasis_admitted"] for r in rs])),
                    "ratio_mean": float(ratios.mean()), "ratio_min": float(ratios.min()),
                    "ratio_max": float(ratios.max()),
                    "ratio_of_sums": sum(r["opt"] for r in rs) / oasis if oasis > 0 else math.inf,
                    "all_proven": all(r["proven_optimal"] for r in rs),
                    "max_solve_s": max(r["build_s"] + r["handoff_s"] + r["solve_s"] for r in rs)})
    return out


def paper_ratios(reference_dir: str | Path | None = None) -> dict[tuple[int, float, float], float]:
    """(servers, gamma1_min, gamma1_max) -> the paper's ratio, from ``fig5_performance_ratio.csv``
    (``paper_figs/reference/`` of the repository unless ``reference_dir`` is given)."""
    import csv

    base = Path(reference_dir) if reference_dir else (Path(__file__).resolve().parents[3]
                                                        / "paper_figs" / "reference")
    path = base / "fig5_performance_ratio.csv"
    if not path.is_file():
        raise FileNotFoundError(f"paper reference values not found: {path} (pass reference_dir)")
    with path.open(newline="") as f:
        return {(int(r["num_servers"]), float(r["gamma1_min"]), float(r["gamma1_max"])):
                float(r["performance_ratio"]) for r in csv.DictReader(f)}


def markdown(summary: list[dict], paper: dict | None = None) -> str:
    """The summary as a markdown table, with the paper's value beside ours when given."""
    head = ("| servers | gamma1 | seeds | OPT/OASiS mean | min | max | ratio of sums | paper "
            "| alpha | 2 alpha | admitted OPT / OASiS | all proven | max MILP s |")
    lines = [head, "|---" * 13 + "|"]
    for s in summary:
        p = (paper or {}).get((s["servers"], s["priority_lo"], s["priority_hi"]))
        alpha = s.get("alpha_mean", math.nan)
        lines.append(f"| {s['servers']} | [{s['priority_lo']:g},{s['priority_hi']:g}] | "
                     f"{s['seeds']} | {s['ratio_mean']:.3f} | {s['ratio_min']:.3f} | "
                     f"{s['ratio_max']:.3f} | {s['ratio_of_sums']:.3f} | "
                     f"{'-' if p is None else f'{p:.2f}'} | {alpha:.2f} | {2 * alpha:.2f} | "
                     f"{s['opt_admitted_mean']:.1f} / {s['oasis_admitted_mean']:.1f} | "
                     f"{'yes' if s['all_proven'] else 'NO'} | {s['max_solve_s']:.2f} |")
    return "\n".join(lines) + "\n"


# ---- the runs of ``reproduce fig5`` -------------------------------------------------------------
POLICIES = ("offline", "oasis")  # the MILP first: the longer runs start early
PLUGIN = "oasis-plugin"
ADAPTIVE = "oasis-adaptive"  # the floor learnt online, starting at the searched floor
_STATS = ("proven_optimal", "status", "bound", "gap", "build_s", "handoff_s", "solve_s",
          "columns", "rows")


def estimate(servers: int, priority, quick: bool) -> FloorEstimate:
    return FloorEstimate("paper_fig5", {"servers": servers, "priority": list(priority)},
                         history_seeds(quick, small=True))


@lru_cache(maxsize=None)
def _plugin(servers: int, priority: tuple[float, float], quick: bool) -> str:
    doc = group_pricings(servers, priority, quick, ("plugin",))["plugin"]["pricing"]
    return json.dumps(doc)


def plugin_document(servers: int, priority, quick: bool) -> dict:
    """The plug-in pricing of a group, from the same history seeds as its ``estimate``."""
    return json.loads(_plugin(servers, tuple(priority), quick))


def estimates(quick: bool) -> list[FloorEstimate]:
    s = settings(quick)
    return [estimate(n, pr, quick) for n in s["servers"] for pr in s["priorities"]]


def runs(quick: bool, estimated=None) -> list[RunSpec]:
    s = settings(quick)
    out = []
    for policy in POLICIES:
        for n in s["servers"]:
            for pr in s["priorities"]:
                for seed in s["seeds"]:
                    params = {"seed": seed, "servers": n, "priority": list(pr)}
                    tags = {"servers": n, "priority": list(pr), "seed": seed}
                    if policy == "oasis":
                        out += oasis_runs(estimate(n, pr, quick), estimated, params, tags=tags)
                        out.append(RunSpec("paper_fig5", params, "oasis",
                                           {"pricing": plugin_document(n, pr, quick)},
                                           tags={**tags, "series": PLUGIN}))
                        out.append(RunSpec("paper_fig5", params, "oasis-adaptive",
                                           adaptive_options(estimated, estimate(n, pr, quick)),
                                           tags={**tags, "series": ADAPTIVE}))
                    else:
                        out.append(RunSpec("paper_fig5", params, policy, tags=tags))
    return out


def rows(specs, records, oasis: str = "oasis") -> list[dict]:
    """One row per instance, with the keys of :func:`fig5_row`; ``oasis`` names the OASiS series
    the ratio is taken against ("oasis": estimated pricing, ``ORACLE``)."""
    by_instance: dict[tuple, dict[str, dict]] = {}
    for s in specs:
        inst = (s.tags["servers"], tuple(s.tags["priority"]), s.tags["seed"])
        by_instance.setdefault(inst, {})[series(s)] = records[s.key]
    out = []
    for (n, (lo, hi), seed), rec in by_instance.items():
        opt, oasis_rec = rec["offline"], rec[oasis]
        u_opt, u_oasis = opt["metrics"]["total_utility"], oasis_rec["metrics"]["total_utility"]
        ratio = performance_ratio(u_opt, u_oasis)
        out.append({"servers": n, "priority_lo": lo, "priority_hi": hi, "seed": seed,
                    "jobs": opt["summary"]["jobs"], "opt": u_opt, "oasis": u_oasis,
                    "ratio": ratio, "opt_admitted": opt["summary"]["admitted"],
                    "oasis_admitted": oasis_rec["summary"]["admitted"],
                    "alpha": oasis_rec["stats"]["pricing"]["alpha"],
                    **{k: opt["stats"].get(k) for k in _STATS},
                    "oasis_s": oasis_rec["timing"]["solve_s"],
                    "backend": opt["stats"].get("backend")})
    return out
