"""Fig. 3: total job utility vs number of jobs, T = 300, OASiS against FIFO, DRF, RRH and Dorm.

Setting (paper §10, choices A1-A4): ``paper_sim`` with H = K = 50 servers, T = 300, uniform
arrivals, the calibrated job sizes, class mix 10/55/35 %; 100-400 jobs; each (jobs, seed) is one
instance that every policy solves. Metric (§12): sum of f_i(t_hat_i - a_i) over completed jobs.
The quick variant keeps the load per server-slot (jobs / (H T)) of the full one with 5 + 5
servers and a tenth of the jobs. Runs are listed largest first, Dorm (the slowest) first, so
the pool starts the long runs early (longest-processing-time-first balances the workers).

OASiS is priced with U and L estimated on history instances of the same size (seeds 1000-1002,
``calibration.FloorEstimate``); the literal oracle constants are drawn beside it
("OASiS (oracle U, L)", see ``online.estimate`` for why they are not the headline).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..calibration import FloorEstimate, history_seeds
from ..spec import RunSpec
from .common import (COLOURS, PAPER_POLICIES, SERIES, Figure, bars_caption, calibration_markdown,
                     checks_markdown, display, fmt, grouped_bars, markdown_table, mean_range,
                     mean_sd, new_figure, number, oasis_runs, ratio, read_reference, save,
                     series, write_markdown)

FULL = {"jobs": (100, 200, 300, 400), "horizon": 300, "servers": 50, "seeds": (0, 1, 2)}
QUICK = {"jobs": (10, 20, 30, 40), "horizon": 300, "servers": 5, "seeds": (0,)}
PAPER_JOBS = (100, 200, 300, 400)


def settings(quick: bool) -> dict:
    return QUICK if quick else FULL


def sim_params(jobs: int, seed: int, quick: bool) -> dict:
    """``paper_sim`` arguments of one Fig. 3 / Fig. 6 instance (shared so the runs are shared)."""
    s = settings(quick)
    return {"seed": seed, "jobs": jobs, "horizon": s["horizon"], "worker_servers": s["servers"],
            "ps_servers": s["servers"], "calibration": "calibrated", "arrivals": "uniform"}


SLOWEST_FIRST = ("dorm", "drf", "oasis", "fifo", "rrh")


def estimate(jobs: int, quick: bool) -> FloorEstimate:
    """OASiS's U and L for ``jobs`` jobs, estimated on history instances of that size."""
    params = sim_params(jobs, 0, quick)
    del params["seed"]
    return FloorEstimate("paper_sim", params, history_seeds(quick))


def estimates(quick: bool) -> list[FloorEstimate]:
    return [estimate(n, quick) for n in sorted(settings(quick)["jobs"], reverse=True)]


def runs(quick: bool, estimated=None) -> list[RunSpec]:
    s = settings(quick)
    out = []
    for n in sorted(s["jobs"], reverse=True):
        for policy in SLOWEST_FIRST:
            for seed in s["seeds"]:
                tags = {"jobs": n, "seed": seed}
                if policy == "oasis":
                    out += oasis_runs(estimate(n, quick), estimated, sim_params(n, seed, quick),
                                      tags=tags)
                else:
                    out.append(RunSpec("paper_sim", sim_params(n, seed, quick), policy, tags=tags))
    return out


def paper_values(reference_dir=None) -> dict[tuple[int, str], float]:
    """(jobs, policy) -> the paper's total utility (not scaled)."""
    names = {display(p): p for p in PAPER_POLICIES}
    return {(int(r["num_jobs"]), names[r["policy"]]): number(r["total_utility_x1e4"]) * 1e4
            for r in read_reference("fig3_total_utility", reference_dir)}


def collect(specs, records) -> dict[tuple[int, str], list[float]]:
    out: dict[tuple[int, str], list[float]] = {}
    for s in specs:
        out.setdefault((s.tags["jobs"], series(s)), []).append(
            records[s.key]["metrics"]["total_utility"])
    return out


def claims(ours: dict[tuple[int, str], tuple[float, float]], jobs) -> list[tuple[str, bool, str]]:
    """OASiS best at every size; its margin over the best baseline grows with the jobs."""
    best_base = {n: max(ours[(n, p)][0] for p in PAPER_POLICIES if p != "oasis") for n in jobs}
    margin = [ours[(n, "oasis")][0] - best_base[n] for n in jobs]
    highest = all(m > 0 for m in margin)
    grows = bool(np.all(np.diff(margin) > 0))
    return [
        ("OASiS has the highest total utility at every number of jobs", highest,
         "margins over the best baseline: " + ", ".join(f"{n}: {m:+.0f}" for n, m in zip(jobs, margin))),
        ("OASiS's margin grows with the number of jobs", grows,
         "margin at each size increases" if grows else "margin is not monotone in the jobs"),
    ]


def render(specs, records, out_dir: Path, reference_dir=None, quick: bool = False,
           estimated=None) -> list[Path]:
    s = settings(quick)
    jobs = list(s["jobs"])
    values = collect(specs, records)
    ours = {k: mean_sd(v) for k, v in values.items()}
    bars = {k: mean_range(v) for k, v in values.items()}
    paper = paper_values(reference_dir)
    # In the quick variant the job counts are scaled; the paper's bars sit at the same position.
    paper_at = {(n, p): paper.get((pn, p), np.nan)
                for n, pn in zip(jobs, PAPER_JOBS) for p in PAPER_POLICIES}
    labels = {p: display(p) for p in SERIES}

    fig, ax = new_figure(2, 1, width=6.2)
    # quick: our values are about a tenth of the paper's scale, so no paper markers in (a)
    grouped_bars(ax[0, 0], jobs, SERIES, bars, {} if quick else paper_at, COLOURS,
                 labels, scale=1 if quick else 1e4)
    ax[0, 0].set(xlabel="number of jobs",
                 ylabel="total utility" + ("" if quick else " (×10⁴)"),
                 title="(a) total utility" + (" (quick: paper values in (b) only)" if quick else ""))
    ax[0, 0].legend(fontsize=7, ncols=3)
    # the series' mean, min and max, each divided by OASiS's mean at that size
    rel_ours = {k: tuple(ratio(v, bars[(k[0], "oasis")][0]) for v in b) for k, b in bars.items()}
    rel_paper = {(n, p): ratio(paper_at[(n, p)], paper_at[(n, "oasis")])
                 for n in jobs for p in PAPER_POLICIES}
    grouped_bars(ax[0, 1], jobs, SERIES, rel_ours, rel_paper, COLOURS, labels)
    ax[0, 1].set(xlabel="number of jobs" + (" (paper: 100-400)" if quick else ""),
                 ylabel="utility / OASiS utility", title="(b) relative to OASiS; ◆ = paper")
    fig.suptitle(f"Fig. 3 — total utility vs jobs, T = {s['horizon']}, "
                 f"{s['servers']}+{s['servers']} servers; {bars_caption(len(s['seeds']))} "
                 "(in (b) divided by OASiS's mean)")
    paths = save(fig, out_dir, "fig3")

    rows = []
    for n, pn in zip(jobs, PAPER_JOBS):
        for p in SERIES:
            m, sd = ours[(n, p)]
            rows.append([n, display(p), f"{m:.0f} ± {sd:.0f}", fmt(paper.get((pn, p), np.nan), 0),
                         fmt(rel_ours[(n, p)][0], 2), fmt(rel_paper.get((n, p), np.nan), 2)])
    text = (f"# Fig. 3 — total utility vs number of jobs{' (quick)' if quick else ''}\n\n"
            f"T = {s['horizon']}, {s['servers']} worker + {s['servers']} PS servers, seeds "
            f"{list(s['seeds'])}; ours = mean ± sd over seeds."
            + (" Quick run: job counts scaled with the servers; the paper column is the paper's "
               "value at the corresponding size (100-400 jobs, 50+50 servers)." if quick else "")
            + "\n\n"
            + markdown_table(["jobs", "policy", "ours", "paper", "ours / OASiS", "paper / OASiS"],
                             rows)
            + "\n" + checks_markdown(claims(ours, jobs))
            + "\n" + calibration_markdown(
                [(f"{n} jobs", estimated[estimate(n, quick).key].calibration) for n in jobs]
                if estimated else []))
    return paths + [write_markdown(out_dir, "fig3", text)]


FIGURE = Figure("fig3", "Total utility vs number of jobs (T = 300)", runs, render,
                estimates=estimates)
