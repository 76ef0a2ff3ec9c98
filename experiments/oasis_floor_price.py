"""OASiS's total utility vs the floor price L, on Fig. 3's instances (a diagnostic, not a paper figure).

Why: with the paper's sigmoid utilities, the oracle L of eqs. (25)-(26) is the minimum of
f_i(T - a_i), which for a time-critical job (decay 4-6) finishing at T = 300 is about
gamma1 exp(-5 * 280), i.e. below 1e-300. Every price then stays ~0 until a server is almost full,
the admission test "payoff > 0" accepts plans whose utility is ~0, and those plans reserve
capacity later jobs need. The paper says U and L are "estimated values (based on past
experience)", so this sweep keeps the oracle U (eqs. 23-24) and sets L1 = L2 = L explicitly
(OASiS's ``pricing`` option, an ``oasis-opt/pricing@1`` document), for several L; then repeats
Fig. 6 (U scaled by 20%-1000%, ``u_scale``) and Fig. 4 (timeliness) at L = 1e-3. With L ~ 1e-300, scaling U by kappa
changes ln(U/L) ~ 700 by at most ln 10 = 2.3, which is why the plain Fig. 6 is flat.

Runs go through the experiment runner into the same results folder as ``oasis-opt reproduce``
(Fig. 3's runs are reused when stored). Writes ``<out>/oasis_floor_price.{png,pdf,md}``.

    .venv/bin/python experiments/oasis_floor_price.py [--quick] [--workers N] [--results DIR] [--out DIR]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from oasis_opt.experiments.figures import fig3, fig4, fig6
from oasis_opt.experiments.figures.common import (CLASSES, COLOURS, PAPER_POLICIES, box_stats,
                                                  display, markdown_table, mean_sd, new_figure,
                                                  save, write_markdown)
from oasis_opt.experiments.reproduce import default_out
from oasis_opt.experiments.runner import run_sweep
from oasis_opt.experiments.spec import RunSpec
from oasis_opt.online.pricing import oracle_pricing
from oasis_opt.workloads import paper_sim

FLOORS = (1e-6, 1e-4, 1e-3, 1e-2)
FIG6_FLOOR = 1e-3  # Fig. 6's U scaling repeated at this L


def floor_specs(quick: bool) -> list[RunSpec]:
    """OASiS at each L of ``FLOORS``, and at ``FIG6_FLOOR`` with Fig. 6's U scales."""
    s = fig3.settings(quick)
    out = []
    for n in s["jobs"]:
        for seed in s["seeds"]:
            params = fig3.sim_params(n, seed, quick)
            oracle = oracle_pricing(paper_sim(**params)).to_dict()
            for L in FLOORS:
                pricing = {**oracle, "L_worker": L, "L_ps": L}
                out.append(RunSpec("paper_sim", params, "oasis", {"pricing": pricing},
                                   tags={"jobs": n, "seed": seed, "L": L, "pct": 100}))
            pricing = {**oracle, "L_worker": FIG6_FLOOR, "L_ps": FIG6_FLOOR}
            for pct in fig6.PERCENTS:
                if pct != 100:
                    out.append(RunSpec("paper_sim", params, "oasis",
                                       {"pricing": pricing, "u_scale": pct / 100},
                                       tags={"jobs": n, "seed": seed, "L": FIG6_FLOOR,
                                             "pct": pct}))
    return out


def fig4_specs(quick: bool) -> list[RunSpec]:
    """Fig. 4's OASiS runs again, with L = ``FIG6_FLOOR``."""
    out = []
    for spec in fig4.runs(quick):
        if spec.policy == "oasis":
            oracle = oracle_pricing(paper_sim(**spec.params)).to_dict()
            pricing = {**oracle, "L_worker": FIG6_FLOOR, "L_ps": FIG6_FLOOR}
            out.append(RunSpec(spec.generator, spec.params, "oasis", {"pricing": pricing},
                               spec.metrics, tags={**spec.tags, "L": FIG6_FLOOR}))
    return out


def timeliness_table(rep, base4, floor4) -> str:
    """Median actual - target per class: completed only / unfinished counted at T (Fig. 4)."""
    values = fig4.collect(base4, rep.records)
    floored = fig4.collect(floor4, rep.records)
    rows = []
    for c in CLASSES:
        for label, vals, p in ([(display(p), values, p) for p in PAPER_POLICIES]
                               + [(f"OASiS, L = {FIG6_FLOOR:g}", floored, "oasis")]):
            rows.append([c, label, len(vals[("completed", c, p)]),
                         f"{box_stats(vals[('completed', c, p)])['median']:.1f}",
                         f"{box_stats(vals[('with_unfinished', c, p)])['median']:.1f}"])
    return markdown_table(["class", "policy", "completed", "median, completed",
                           "median, unfinished at T"], rows)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--results", default="results")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    out = Path(args.out) if args.out else default_out(args.quick)
    base, base4 = fig3.runs(args.quick), fig4.runs(args.quick)
    floors, floor4 = floor_specs(args.quick), fig4_specs(args.quick)
    rep = run_sweep(base + floors + base4 + floor4, args.results, workers=args.workers,
                    desc="floor price")
    jobs = sorted(fig3.settings(args.quick)["jobs"])

    def series(specs, key):
        vals: dict[tuple, list[float]] = {}
        for s in specs:
            vals.setdefault((s.tags["jobs"], key(s)), []).append(
                rep.record(s)["metrics"]["total_utility"])
        return {k: mean_sd(v) for k, v in vals.items()}

    ours = series(base, lambda s: s.policy)
    by_L = series([s for s in floors if s.tags["pct"] == 100], lambda s: s.tags["L"])
    by_pct = series([s for s in floors if s.tags["L"] == FIG6_FLOOR], lambda s: s.tags["pct"])
    paper = fig3.paper_values()
    fig, ax = new_figure(2, 1, width=7.0, height=4.4)
    a = ax[0, 0]
    for p in PAPER_POLICIES:
        a.errorbar(jobs, [ours[(n, p)][0] for n in jobs], [ours[(n, p)][1] for n in jobs],
                   color=COLOURS[p], marker="o", capsize=2,
                   label=f"{display(p)}" + (" (oracle L)" if p == "oasis" else ""))
    cmap = __import__("matplotlib").colormaps["cividis"]
    for k, L in enumerate(FLOORS):
        a.errorbar(jobs, [by_L[(n, L)][0] for n in jobs], [by_L[(n, L)][1] for n in jobs],
                   color=cmap(k / (len(FLOORS) - 1)), marker="s", ls="--", capsize=2,
                   label=f"OASiS, L = {L:g}")
    if not args.quick:
        a.plot(jobs, [paper[(n, "oasis")] for n in jobs], "kD", label="paper OASiS")
    a.set(xlabel="number of jobs", ylabel="total utility",
          title="OASiS with an estimated floor price L vs the oracle L (Fig. 3 instances)")
    a.legend(fontsize=7, ncols=2)
    b = ax[0, 1]
    rel = {(n, p): by_pct[(n, p)][0] / by_pct[(n, 100)][0] for n in jobs for p in fig6.PERCENTS}
    paper6 = fig6.paper_values()
    for k, p in enumerate(fig6.PERCENTS):
        colour = __import__("matplotlib").colormaps["viridis"](k / (len(fig6.PERCENTS) - 1))
        b.plot(jobs, [rel[(n, p)] for n in jobs], marker="o", color=colour, label=f"{p}%")
        if not args.quick:
            b.plot(jobs, [paper6[(n, p)] / paper6[(n, 100)] for n in jobs], marker="D", ls=":",
                   color=colour, markersize=4)
    b.axhline(1, color="grey", lw=0.6)
    b.set(xlabel="number of jobs", ylabel="utility / utility at 100%",
          title=f"Fig. 6 repeated with L = {FIG6_FLOOR:g} (dotted ◆: paper)")
    b.legend(fontsize=7, ncols=3, title="U/L estimate", title_fontsize=7)
    paths = save(fig, out, "oasis_floor_price")
    rows = []
    for n in jobs:
        best = max((p for p in PAPER_POLICIES if p != "oasis"), key=lambda p: ours[(n, p)][0])
        rows.append([n, f"{ours[(n, 'oasis')][0]:.0f}"]
                    + [f"{by_L[(n, L)][0]:.0f}" for L in FLOORS]
                    + [f"{display(best)} {ours[(n, best)][0]:.0f}",
                       "—" if args.quick else f"{paper[(n, 'oasis')]:.0f}"])
    text = ("# OASiS vs the floor price L (diagnostic)\n\n"
            f"Fig. 3 instances{' (quick)' if args.quick else ''}, mean over seeds "
            f"{list(fig3.settings(args.quick)['seeds'])}; U from the oracle (eqs. 23-24), "
            "L1 = L2 = L.\n\n"
            + markdown_table(["jobs", "OASiS, oracle L"] + [f"L = {L:g}" for L in FLOORS]
                             + ["best baseline", "paper OASiS"], rows))
    rows6 = [[n] + [f"{by_pct[(n, p)][0]:.0f} ({rel[(n, p)]:.2f})" for p in fig6.PERCENTS]
             for n in jobs]
    claim = fig6.claims(rel, jobs)
    text += (f"\n## Fig. 6 repeated with L = {FIG6_FLOOR:g}\n\nOASiS utility (relative to the "
             "100% estimate of U) with U scaled as in Fig. 6 and L fixed.\n\n"
             + markdown_table(["jobs"] + [f"{p}%" for p in fig6.PERCENTS], rows6) + "\n"
             + "\n".join(f"- {'✅' if ok else '❌'} {c} — {d}" for c, ok, d in claim) + "\n")
    text += (f"\n## Fig. 4 repeated with L = {FIG6_FLOOR:g}\n\nActual minus target completion "
             "time (slots), pooled over Fig. 4's seeds; the baselines are Fig. 4's runs.\n\n"
             + timeliness_table(rep, base4, floor4))
    paths.append(write_markdown(out, "oasis_floor_price", text))
    print("\n".join(str(p) for p in paths))


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
