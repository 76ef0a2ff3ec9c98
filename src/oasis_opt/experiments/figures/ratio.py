"""The competitive ratio beyond Fig. 5 (not a paper figure): ``oasis-opt reproduce ratio``.

Draws, from ``experiments.ratio.compute``, ``ratio.{png,pdf}``: (a) OPT / OASiS per
instance against the number of jobs, with the median and its bootstrap 95% interval; (b) the same
against the load factor, with per-bucket medians; (c) per instance against Theorem 4's 2 alpha
(the diagonal is the bound); (d) the worst-case search's ratio step by step. Writes the worst
instances found to ``worst_cases/`` (one ``oasis-opt/instance@1`` file per search start and the
pricing document they were searched under, so ``oasis-opt ratio`` recomputes them), and
``ratio.md``: the tables by size, by load and of the worst cases, and the commands.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .. import ratio as exp
from ...model.io import instance_from_dict
from .common import Figure, fmt, markdown_table, new_figure, save, write_markdown

COMMAND = "oasis-opt reproduce ratio"
RULE_LABELS = {"plugin": "plug-in", "searched": "searched floor", "adaptive": "adaptive floor"}
RULE_COLOURS = {"searched": "#ff7f0e", "adaptive": "#d62728"}
WORST_DIR = "worst_cases"


def _finite_or_top(values, top: float) -> tuple[np.ndarray, np.ndarray]:
    """(values with inf drawn at ``top``, mask of those drawn at the top)."""
    v = np.asarray(values, dtype=float)
    return np.where(np.isfinite(v), v, top), ~np.isfinite(v)


def _scatter(ax, x, y, top: float, **kw) -> None:
    y, inf = _finite_or_top(y, top)
    x = np.asarray(x, dtype=float)
    ax.scatter(x[~inf], y[~inf], s=14, alpha=0.6, **kw)
    if inf.any():
        ax.scatter(x[inf], y[inf], s=30, marker="^", color="red",
                   label="OASiS earns 0 (ratio inf)")


def _open(ax, x, rows, top: float) -> None:
    """Rows whose OPT was not proven: their ratio interval [lower, upper] as a grey bar."""
    if not rows:
        return
    lo = np.array([r["ratio"]["lower"] for r in rows], dtype=float)
    hi = np.array([top if r["ratio"]["upper"] is None else min(top, r["ratio"]["upper"])
                   for r in rows], dtype=float)
    ax.vlines(np.asarray(x, dtype=float), lo, np.maximum(hi, lo * 1.01), color="grey", lw=2,
              label="OPT not proven: [incumbent, bound] / OASiS (not in medians)")


def _medians(ax, x, stats: list[dict], colour: str = "black",
             label: str = "median, 95% bootstrap CI") -> None:
    med = np.array([s["median"] for s in stats], dtype=float)
    ok = np.isfinite(med).all(axis=1)
    x = np.asarray(x, dtype=float)[ok]
    m = med[ok]
    ax.errorbar(x, m[:, 0], yerr=np.clip(np.vstack([m[:, 0] - m[:, 1], m[:, 2] - m[:, 0]]), 0,
                                        None),
                fmt="o-", color=colour, capsize=3, label=label)


def _top(rows) -> float:
    finite = [r for r in (exp.exact_ratio(x) for x in rows) if r is not None and math.isfinite(r)]
    return 1.1 * max(finite + [1.0])


def worst_records(data) -> list[dict]:
    return sorted(data["search"], key=lambda s: -_ratio_value(s["best_row"]))


def _ratio_value(row: dict) -> float:
    r = exp.exact_ratio(row)
    return math.nan if r is None else r


def draw(data, summary, out_dir: Path) -> list[Path]:
    rows = [r for r in data["rows"] if exp.exact_ratio(r) is not None]
    open_rows = [r for r in data["rows"]
                 if exp.exact_ratio(r) is None and r["ratio"]["lower"] is not None]
    top = _top(rows)
    for r in open_rows:
        top = max(top, 1.05 * r["ratio"]["lower"])
    fig, axes = new_figure(2, 2, width=5.0, height=3.6)
    (a, b), (c, d) = axes
    size_rows = [r for r in rows if r["sweep"] == "size"]
    jitter = np.random.default_rng(0).uniform(-0.4, 0.4, len(size_rows))
    _scatter(a, np.array([r["jobs"] for r in size_rows]) + jitter,
             [exp.exact_ratio(r) for r in size_rows], top, color="#1f77b4")
    open_size = [r for r in open_rows if r["sweep"] == "size"]
    _open(a, [r["jobs"] + 0.15 for r in open_size], open_size, top)
    sizes = list(summary["size"])
    _medians(a, sizes, [summary["size"][j] for j in sizes],
             label="plug-in (dots): median, 95% bootstrap CI")
    for n, rule in enumerate(exp.RULES):
        per = summary["rules"][rule]
        _medians(a, [j + 0.8 * (n + 1) for j in sizes], [per[j] for j in sizes],
                 colour=RULE_COLOURS[rule], label=f"{RULE_LABELS[rule]}: median, 95% CI")
    a.set_xlabel("jobs")
    a.set_title(f"(a) OPT / OASiS vs size ({data['settings']['servers']} servers, "
                f"T = {data['settings']['horizon']}, proven OPT),\nOASiS priced by each rule",
                fontsize=8)
    _scatter(b, [r["load"] for r in rows], [exp.exact_ratio(r) for r in rows], top,
             color="#2ca02c")
    _open(b, [r["load"] for r in open_rows], open_rows, top)
    buckets = list(summary["load"])
    _medians(b, [summary["load"][k]["load"] for k in buckets],
             [summary["load"][k] for k in buckets])
    b.axvline(1.0, color="grey", lw=0.8, ls=":")
    b.set_yscale("log")
    b.set_xlabel("load factor sum(W) / (capacity x T), bottleneck resource")
    b.set_title("(b) OPT / OASiS vs load (medians at the buckets' mean load)", fontsize=8)
    bound = [r["competitive_bound"] for r in rows]
    _scatter(c, bound, [exp.exact_ratio(r) for r in rows], top, color="#9467bd")
    worst = data["search"]
    _scatter(c, [s["best_row"]["competitive_bound"] for s in worst],
             [exp.exact_ratio(s["best_row"]) for s in worst], top, color="#d62728")
    c.scatter([], [], color="#d62728", s=14, label="worst cases found")
    bounds = bound + [s["best_row"]["competitive_bound"] for s in worst]
    lo, hi = 0.95 * min(bounds), 1.05 * max(bounds)
    c.plot([lo, hi], [lo, hi], color="black", lw=0.8, label="ratio = 2 alpha (Theorem 4)")
    c.set_xlim(lo, hi)
    c.set_yscale("log")
    c.set_xlabel("2 alpha of the pricing in use")
    c.set_title("(c) empirical ratio vs the bound 2 alpha, per instance", fontsize=8)
    for s in worst:
        trace = [1.0 * float(t) for t in s["trace"]]
        start = exp.exact_ratio(s["start_row"])
        y, _ = _finite_or_top([start] + trace, 1.1 * max(
            [v for v in [start] + trace if math.isfinite(v)] + [1.0]))
        d.plot(np.arange(len(y)), y, lw=1, label=f"start seed {s['start']}")
    d.set_xlabel("search step")
    c_ = data["settings"]["search"]
    d.set_title(f"(d) worst-case hill-climb ({c_['jobs']} jobs, {c_['servers']} servers, "
                f"T = {c_['horizon']}); 2 alpha = "
                f"{worst[0]['best_row']['competitive_bound']:.1f}" if worst else "(d)", fontsize=8)
    for ax in (a, b, c, d):
        ax.set_ylabel("OPT / OASiS")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    return save(fig, out_dir, "ratio")


def write_worst_cases(data, out_dir: Path) -> list[Path]:
    """``worst_cases/worst-start<k>.json`` per search start and ``worst_cases/pricing.json``."""
    from ...model.io import write_json_atomic

    folder = Path(out_dir) / WORST_DIR
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / "pricing.json"]
    write_json_atomic(paths[0], data["search_pricing"])
    for s in data["search"]:
        paths.append(folder / f"worst-start{s['start']}.json")
        write_json_atomic(paths[-1], s["instance"])
    return paths


def _ci(t) -> str:
    return f"{fmt(t[0], 2)} [{fmt(t[1], 2)}, {fmt(t[2], 2)}]"


def _stats_cells(s: dict) -> list:
    return [s["n"], s["open"], _ci(s["median"]), _ci(s["of_sums"]), fmt(s["max"], 2),
            fmt(s["load"], 2), fmt(s["bound"], 1),
            f"{fmt(s['admitted_opt'], 1)} / {fmt(s['admitted_oasis'], 1)}"]


STATS_HEAD = ["instances (proven)", "open", "median OPT/OASiS [95% CI]",
              "ratio of sums [95% CI]", "max", "mean load", "mean 2α",
              "admitted OPT / OASiS"]


def rule_table(data, summary) -> list[list]:
    """One line per size: each rule's median ratio [CI], admitted jobs, adaptive switches."""
    rules = ("plugin",) + exp.RULES
    out = []
    for j in summary["size"]:
        rows = [r for r in data["rows"] if r["sweep"] == "size" and r["jobs"] == j
                and exp.exact_ratio(r) is not None]
        per = [summary["rules"][r][j] for r in rules]
        switches = np.mean([r["rules"]["adaptive"]["switches"] for r in rows]) if rows else math.nan
        out.append([j] + [_ci(p["median"]) for p in per]
                   + [f"{fmt(per[0]['admitted_opt'], 1)} / "
                      + " / ".join(fmt(p["admitted_oasis"], 1) for p in per),
                      fmt(float(switches), 1)])
    return out


def rule_sentence(summary) -> str:
    """Which rule has the lowest median ratio at each size, and where its CI separates it
    from the plug-in's (intervals that do not overlap)."""
    rules = ("plugin",) + exp.RULES
    parts = []
    for j in summary["size"]:
        med = {r: summary["rules"][r][j]["median"] for r in rules}
        if not all(math.isfinite(m[0]) for m in med.values()):
            continue
        best = min(rules, key=lambda r: (med[r][0], rules.index(r)))
        apart = [r for r in exp.RULES if med[r][2] < med["plugin"][1]]
        parts.append(f"{j} jobs: {RULE_LABELS[best]} ({fmt(med[best][0], 2)})"
                     + (f", CI below the plug-in's: {', '.join(RULE_LABELS[r] for r in apart)}"
                        if apart else ""))
    return ("Lowest median OPT / OASiS per size: " + "; ".join(parts) + ". Rules whose 95% CI "
            "lies wholly below the plug-in's are named; elsewhere the intervals overlap and "
            "the seeds do not separate the rules.") if parts else ""


def _ratio_text(row: dict) -> str:
    r = exp.exact_ratio(row)
    return "—" if r is None else ("inf" if math.isinf(r) else f"{r:.3f}")


def markdown(data, summary) -> str:
    s = data["settings"]
    c = s["search"]
    q = " --quick" if data["quick"] else ""
    rows = data["rows"]
    exact = [r for r in rows if exp.exact_ratio(r) is not None]
    ratios = [exp.exact_ratio(r) for r in exact]
    over = sum(1 for r in exact if exp.exact_ratio(r) > r["competitive_bound"])
    worst = worst_records(data)
    limits = sorted({r["time_limit"] for r in rows if r.get("time_limit") is not None})
    size_table = [[j] + _stats_cells(st) for j, st in summary["size"].items()]
    load_table = [[exp.bucket_label(k)] + _stats_cells(st) for k, st in summary["load"].items()]
    worst_table, above = [], []
    for w in worst:
        b, o = w["best_row"], w["oracle"]
        inst = instance_from_dict(w["instance"])
        floor, cap = exp.against_oracle(data["search_pricing"], inst)
        if exp.exact_ratio(b) > b["competitive_bound"]:
            above.append((w, floor, cap))
        worst_table.append([
            f"`{WORST_DIR}/worst-start{w['start']}.json`", w["start"], _ratio_text(w["start_row"]),
            _ratio_text(b), f"{b['opt']['lower']:.4g} / {b['oasis']['utility']:.4g}",
            f"{b['opt']['admitted']} / {b['oasis']['admitted']}", f"{b['alpha']:.2f}",
            f"{b['competitive_bound']:.2f}",
            "—" if "error" in o else _ratio_text(o),
            "—" if "error" in o else f"{o['competitive_bound']:.2f}",
            f"{floor:.3g} / {cap:.3g}", f"{b['load']:.2f}", f"{b['largest_container']:.2f}",
            len(w["accepted"])])
    w_max = worst[0] if worst else None
    finite = [x for x in ratios if math.isfinite(x)]
    lines = [
        "# The competitive ratio beyond Fig. 5: size, load, 2α, worst cases", "",
        f"Made by `nice -n 10 {COMMAND}{q}` (rows stored in `results/ratio-study/`, reused when "
        "rerun). Not a paper figure.", "",
        f"**Instances.** `paper_fig5(seed, servers={s['servers']}, priority={exp.PRIORITY}, "
        f"jobs=J, horizon={s['horizon']})` (Fig. 5's generator: every job can finish alone by T), "
        f"seeds {', '.join(map(str, s['seeds']))}; size sweep J in "
        f"{', '.join(map(str, s['sizes']))}, and J in {', '.join(map(str, s['small']))} added "
        "for the load axis (the load figure and table pool all rows). With the cluster fixed, "
        "the load grows with J: the two axes are not independent.", "",
        "**OPT** is the exact MILP (HiGHS), proven optimal"
        + (f" within a {s['time_limit']:g} s limit per instance; a row not proven in time "
           "keeps the MILP's [incumbent, bound] bracket and is left out of the statistics "
           "(column `open`)" if s["time_limit"] else "")
        + (" (limits of the stored rows: " + ", ".join(f"{t:g} s" for t in limits) + "; a "
           "proven optimum does not depend on the limit)" if len(limits) > 1 else "")
        + ". **OASiS** is priced by the plug-in estimate (`oasis_opt.online.plugin`, eqs. "
        "(23)-(26) with capacity-normalised demands and the 10th percentile as floor, no search "
        "on utility), estimated per (J, servers, T) on history instances of the same generator "
        "at seeds 1000-1009, disjoint from the evaluated seeds, so fixed before any evaluated "
        "instance is seen. α = max_r ln(U^r / L^r) of those constants; 2α is Theorem 4's bound.",
        "", "![ratio](ratio.png)", "",
        "## (a) By size", "",
        markdown_table(["jobs"] + STATS_HEAD, size_table),
        "## (a') By size and pricing rule", "",
        "OASiS on the same instances and against the same proven OPT under each rule fixed "
        "before the evaluated instance: the plug-in (the rows above), the **searched floor** "
        "(`estimate-pricing`'s default, `oasis_opt.online.estimate_pricing`, on the same "
        "history) and the **adaptive floor** (`oasis-adaptive`, started at the searched floor, "
        "following the best of its shadows job by job, with the history's calibration as its "
        "prior; `oasis_opt.online.adaptive`).", "",
        markdown_table(["jobs"] + [f"median OPT/OASiS, {RULE_LABELS[r]} [95% CI]"
                                   for r in ("plugin",) + exp.RULES]
                       + ["admitted OPT / " + " / ".join(RULE_LABELS[r]
                                                         for r in ("plugin",) + exp.RULES),
                          "adaptive: mean switches"],
                       rule_table(data, summary)),
        rule_sentence(summary), "",
        "## (b) By load factor (all rows)", "",
        markdown_table(["load bucket"] + STATS_HEAD, load_table),
        "CIs: percentile bootstrap over the instances of the row (2,000 resamples, seed 0); "
        "the ratio of sums is sum OPT / sum OASiS.", "",
        "## (c) Ratio against 2α", "",
        f"Over all {len(exact)} proven instances the ratio ranges "
        f"{fmt(min(finite), 2) if finite else '—'}-{fmt(max(finite), 2) if finite else '—'}"
        f"{' (and inf on ' + str(len(ratios) - len(finite)) + ')' if len(finite) < len(ratios) else ''}"
        f" against 2α = {fmt(min(r['competitive_bound'] for r in exact), 1)}-"
        f"{fmt(max(r['competitive_bound'] for r in exact), 1)}; instances above their 2α: "
        f"{over}; median ratio / 2α "
        f"{fmt(float(np.median([exp.exact_ratio(r) / r['competitive_bound'] for r in exact])), 3)}"
        f", largest {fmt(max(exp.exact_ratio(r) / r['competitive_bound'] for r in exact), 2)}. "
        "Theorem 4 assumes containers small against their servers; here the largest container "
        f"is {fmt(min(r['largest_container'] for r in exact), 2)}-"
        f"{fmt(max(r['largest_container'] for r in exact), 2)} of its server.",
        "",
        "## (d) Worst cases found", "",
        f"A seeded hill-climb (`oasis_opt.experiments.worst_case.hill_climb`) from "
        f"`paper_fig5(k, servers={c['servers']}, jobs={c['jobs']}, horizon={c['horizon']})` for "
        f"each start seed k in {', '.join(map(str, c['starts']))} (search seed = k), "
        f"{c['steps']} steps each: one random change per step (a job's arrival, its epochs x2 "
        "or /2, its γ1 in the priority range or γ3 in [1, 15], or two jobs exchanging "
        "arrival slots and places), kept when the exact OPT / OASiS does not decrease. OASiS "
        f"is priced by the plug-in estimate of this group (`{WORST_DIR}/pricing.json`); every "
        "OPT is a proven MILP optimum (no time limit). The found instances are in "
        f"`{WORST_DIR}/`; the oracle columns price OASiS with eqs. (23)-(26) of the found "
        "instance itself, the constants Theorem 4 is stated for.", "",
        markdown_table(["instance", "start seed", "start ratio", "worst ratio",
                        "OPT / OASiS utility", "admitted OPT / OASiS", "α", "2α",
                        "oracle ratio", "oracle 2α", "L / oracle L, oracle U / U (max)", "load",
                        "largest container", "changes kept"], worst_table),
    ]
    if w_max is not None:
        r = exp.exact_ratio(w_max["best_row"])
        lines += [f"Largest ratio found: {_ratio_text(w_max['best_row'])} (start seed "
                  f"{w_max['start']}), against its 2α = "
                  f"{w_max['best_row']['competitive_bound']:.2f}: "
                  + ("above the bound" if r > w_max["best_row"]["competitive_bound"]
                     else f"{r / w_max['best_row']['competitive_bound']:.2f} of the bound")
                  + ". `L / oracle L, oracle U / U`: the largest ratio, over pools and "
                  "resources, of the plug-in floor to the floor of eqs. (25)-(26) on the found "
                  "instance, and of that instance's U (eqs. (23)-(24)) to the plug-in U. "
                  "Theorem 4's proof needs the prices to span the instance's values per unit "
                  "(L at most, U at least the oracle's): when either exceeds 1 the plug-in "
                  "constants are outside the theorem and 2α is no bound for that instance.", ""]
        oracle_over = [w for w in worst if "error" not in w["oracle"]
                       and exp.exact_ratio(w["oracle"]) > w["oracle"]["competitive_bound"]]
        lines += [f"Found instances above their plug-in 2α: {len(above)}"
                  + (" (" + ", ".join(f"start {w['start']}: L / oracle L = {f:.3g}, oracle U "
                                      f"/ U = {c:.3g}" for w, f, c in above) + ")"
                     if above else "")
                  + f"; above their oracle 2α under the oracle constants: {len(oracle_over)}.",
                  ""]
    lines += [
        "## Commands", "", "```bash",
        f"nice -n 10 {COMMAND}            # paper_figs/ratio.{{png,pdf,md}} and "
        f"paper_figs/{WORST_DIR}/",
        f"{COMMAND} --quick    # tiny instances, one short search (paper_figs/quick/)",
        "# the worst cases, recomputed from their files (fresh MILP + OASiS):",
        f"oasis-opt ratio paper_figs/{WORST_DIR}/worst-start*.json --pricing "
        f"paper_figs/{WORST_DIR}/pricing.json --opt milp --out worst.json",
        "```", ""]
    return "\n".join(lines)


def render(data, out_dir: Path, reference_dir=None, quick: bool = False) -> list[Path]:
    out_dir = Path(out_dir)
    summary = exp.summarize(data["rows"])
    return (draw(data, summary, out_dir) + write_worst_cases(data, out_dir)
            + [write_markdown(out_dir, "ratio", markdown(data, summary))])


FIGURE = Figure("ratio", "The competitive ratio against size, load and 2 alpha; worst cases",
                None, render, compute=exp.compute)
