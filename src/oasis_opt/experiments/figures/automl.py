"""AutoML early stopping (not a paper figure): ``oasis-opt reproduce automl``.

Draws, from ``experiments.automl.compute``:

* ``automl_replay.{png,pdf}``: regret (the pool's best final accuracy minus the best found) against
  the GPU-seconds spent, as a share of what the study costs without stopping, per policy and
  curve set; mean over the seeds (trial orders) with its 95 % CI as a band, automl-thesis
  drawn on top;
* ``automl_predictors.{png,pdf}``: prediction MAE at 10 / 20 / 40 % of training per predictor;
* ``automl_cluster.{png,pdf}``: the study inside the shared cluster: best accuracy against the
  study's GPU-hours, and the other jobs' completion times with and without the study's cap;
* ``automl_priority.{png,pdf}``: the study under the priority scheduler: regret against hours
  since its submission per policy (elastic automl-thesis, ASHA, successive halving, the same
  cap), and the other jobs' mean and p95 completion times with their 95 % CIs;
* ``automl.md``: every table, and automl-thesis against each rival by budget.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import automl as exp
from .common import Figure, fmt, markdown_table, new_figure, save, write_markdown

COLOURS = {"automl-thesis": "#1f77b4", "automl-thesis-elastic": "#08306b", "automl-thesis-lean": "#17becf",
           "automl-thesis-rank": "#bcbd22", "automl-thesis-rank-value": "#dbdb8d",
           "automl-thesis-second-chance": "#393b79",
           "optuna-median": "#ff7f0e", "optuna-sh": "#2ca02c",
           "optuna-hyperband": "#d62728", "asha": "#9467bd", "tune-asha": "#8c564b",
           "tune-hyperband": "#e377c2", "no-stop": "#7f7f7f"}
# no-stop dashed; automl-thesis-second-chance dotted: its curve is ASHA's up to ASHA's spend,
# and ASHA's line must show beneath it
LINESTYLES = {"no-stop": "--", "automl-thesis-second-chance": ":"}
PREDICTOR_COLOURS = {"last-value": "#7f7f7f", "parametric": "#ff7f0e", "regression": "#1f77b4"}
GRID = np.geomspace(0.005, 1.0, 80)
COMMAND = "oasis-opt reproduce automl"


def _pct(x: float) -> str:
    return f"{100 * x:g} %"


def draw_replay(data, out_dir: Path) -> list[Path]:
    return save(replay_figure(data), out_dir, "automl_replay")


def replay_figure(data):
    """The anytime fronts: regret against GPU-seconds spent, per curve set and policy."""
    s = data["settings"]
    fig, axes = new_figure(len(s["studies"]), 1, width=4.6, height=3.6)
    for ax, study in zip(axes[0], s["studies"]):
        curves = exp.regret_curves(data, study, GRID)
        # automl-thesis drawn last, thick and on top: no rival's line hides it
        for policy in sorted(s["policies"], key=lambda p: p in exp.OURS):
            ours = policy in exp.OURS
            cis = np.array([exp.mean_ci(col) for col in curves[policy].T])
            ax.plot(GRID * 100, cis[:, 0], color=COLOURS[policy], label=policy,
                    lw=2.2 if ours else 1.1, ls=LINESTYLES.get(policy, "-"),
                    zorder=4 if ours else 2)
            ax.fill_between(GRID * 100, np.clip(cis[:, 1], 0, 1), np.clip(cis[:, 2], 0, 1),
                            color=COLOURS[policy], alpha=0.25 if ours else 0.12, lw=0,
                            zorder=3 if ours else 1)
        ax.set_xscale("log")
        ax.set_yscale("symlog", linthresh=0.005)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("GPU-seconds spent, % of the study without stopping")
        ax.set_title(f"{study} ({len(s['seeds'])} seeds, {s['workers']} workers)", fontsize=9)
        ax.grid(alpha=0.3, which="both")
    axes[0][0].set_ylabel("regret: pool best - best found")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center",
               ncol=len(labels) if len(s["studies"]) > 1 else 3, fontsize=7,
               title="policy: mean regret over the seeds (trial orders), band: 95 % CI of the "
                     "mean", title_fontsize=7)
    return fig


def draw_predictors(data, out_dir: Path) -> list[Path]:
    s = data["settings"]
    fig, axes = new_figure(len(s["studies"]), 1, width=4.2, height=3.4)
    for ax, study in zip(axes[0], s["studies"]):
        rows = data["predict"][study]["quality"]
        for name in sorted({r["predictor"] for r in rows}):
            pts = sorted((r["fraction"], r["mae"]) for r in rows if r["predictor"] == name)
            main = name in PREDICTOR_COLOURS
            ax.plot([100 * p[0] for p in pts], [p[1] for p in pts], marker="o" if main else ".",
                    color=PREDICTOR_COLOURS.get(name, "#c7c7c7"), lw=1.6 if main else 0.8,
                    label=name if main else None, zorder=3 if main else 1)
        ax.set_xlabel("training observed, %")
        ax.set_title(study, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("MAE of the final val accuracy")
    axes[0][0].legend(fontsize=7, title="grey: single families", title_fontsize=7)
    return save(fig, out_dir, "automl_predictors")


def draw_cluster(data, out_dir: Path, summary) -> list[Path]:
    return save(cluster_figure(data, summary), out_dir, "automl_cluster")


def cluster_figure(data, summary):
    """The study in the shared cluster: its regret against its GPU-hours, and the other jobs'
    mean completion time per policy and cap."""
    c = data["settings"]["cluster"]
    fig, axes = new_figure(2, 1, width=5.0, height=3.6)
    ax = axes[0][0]
    cap = c["caps"][0]
    right = 0.0
    for policy in c["policies"]:
        recs = [data["cluster"][f"{c['study']}-{policy}-cap{cap or 'none'}-s{seed}"]
                for seed in c["seeds"]]
        top = max(r["gpu_hours"] for r in recs)
        grid = np.linspace(0, top, 200)
        best = np.array([[r["pool_best"] - (exp.best_at(r["trajectory"], g) or 0.0)
                          for g in grid] for r in recs])
        ours = policy in exp.OURS
        ax.plot(grid, best.mean(axis=0), color=COLOURS[policy], label=policy,
                lw=2.2 if ours else 1.1, ls="--" if policy == "no-stop" else "-",
                zorder=4 if ours else 2)
        right = max([right] + [r["trajectory"][-1][0] for r in recs if r["trajectory"]])
    ax.set_xlim(0, 1.3 * right or None)  # to the last rise of any policy's best
    ax.set_yscale("symlog", linthresh=0.005)
    ax.set_ylim(bottom=0)
    ax.set_xlabel(f"the study's GPU-hours (cap {cap} GPUs)")
    ax.set_ylabel("regret: pool best - best found")
    ax.set_title(f"{c['study']} beside a Pollux workload ({len(c['seeds'])} seeds)", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    ax = axes[0][1]
    x = np.arange(len(c["policies"]))
    width = 0.8 / len(c["caps"])
    for k, cap in enumerate(c["caps"]):
        ax.bar(x - 0.4 + width * (k + 0.5),
               [summary[(p, cap)]["jct_mean_h"] for p in c["policies"]], width,
               label=f"cap {cap} GPUs" if cap else "no cap", color=("#1f77b4", "#ff7f0e")[k % 2])
    ax.set_xticks(x, c["policies"], rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("other jobs' mean completion time, h")
    # above the axes: a legend inside would cover the bars
    ax.legend(fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(c["caps"]),
              title="the study's GPU cap", title_fontsize=7, frameon=False)
    ax.grid(alpha=0.3, axis="y")
    return fig


def _predict_rows(data, table: str, cells) -> list[list]:
    """One row per record of the prediction sweep's ``table``: the study, then ``cells(r)``."""
    return [[study, *cells(r)] for study in data["settings"]["studies"]
            for r in data["predict"][study][table]]


def markdown(data) -> str:
    s = data["settings"]
    c = s["cluster"]
    lines = ["# AutoML early stopping on real learning curves", "",
             f"Made by `{COMMAND}{' --quick' if data['quick'] else ''}` "
             f"({data['computed']} runs computed, {data['loaded']} loaded from the results "
             "folder). Curve sets: the shipped ones (`oasis_opt/data/curves`, real JAX + optax "
             "training); wine-mlp and digits-linear were generated after the controller was "
             "designed and are held out. Policies: `oasis_opt.automl.controllers`.", "",
             "## Prediction quality", "",
             "Final validation accuracy predicted from the first k epochs (k = 10 / 20 / 40 % of "
             "training). The regression is trained on the other trials only: 5-fold "
             "cross-fitting over the study's trials (seeded folds), each fold predicted by a "
             "model fitted on the completed curves of the four others. Coverage: share of true "
             "finals inside mean +- 1.645 std (90 % if calibrated). Single families that cannot "
             "be fitted (too few points) fall back to the last value (`fallback`).", ""]
    lines += [markdown_table(
        ["study", "observed (epochs)", "predictor", "MAE", "Spearman", "90 % coverage",
         "mean std", "fallback"],
        _predict_rows(data, "quality", lambda r: [
            f"{100 * r['fraction']:g} % ({r['observed']})", r["predictor"], fmt(r["mae"], 4),
            fmt(r["spearman"], 3), fmt(r["coverage90"], 2), fmt(r["mean_std"], 3),
            r["fallback"]]))]
    lines += ["## Classification", "",
              "Classes of `oasis_opt.automl.classify` (poor: P(final > best) < 0.05; promising: "
              "P(final >= best - 0.005) >= 0.5; else uncertain) against an incumbent best = the "
              "90th percentile of the other folds' finals. Truth: poor = final below the "
              "incumbent; promising = final within 0.005 of it or above.", ""]
    lines += [markdown_table(
        ["study", "observed", "predictor", "class", "predicted", "true", "precision", "recall"],
        _predict_rows(data, "classification", lambda r: [
            f"{100 * r['fraction']:g} %", r["predictor"], r["class"], r["predicted"], r["true"],
            fmt(r["precision"], 3), fmt(r["recall"], 3)]))]
    lines += ["## Replayed studies", "",
              f"Every trial of the curve set, in a seeded random order (seeds "
              f"{s['seeds'][0]}..{s['seeds'][-1]}), on {s['workers']} workers; regret = the "
              "pool's best final accuracy minus the best final accuracy among trials run to "
              "their last epoch within the budget (0 found counts as accuracy 0). Budgets are "
              "shares of the GPU-seconds the study costs without stopping. `spent`: share the "
              "whole study spends; `to target`: median share spent until the best came within "
              f"{exp.TARGET_GAP} of the pool's best (seeds that got there). Regret cells: "
              "mean ± half-width of its 95 % Student-t interval over the seeds.", ""]
    for study in s["studies"]:
        summ = exp.replay_summary(data, study)
        rows = []
        for policy in s["policies"]:
            m = summ[policy]
            rows.append([policy, *[f"{mean:.4f} ± {sd:.4f}" for mean, sd in m["regret"]],
                         fmt(m["spent_share"], 3), f"{fmt(m['reach_share'], 3)} "
                         f"({m['reached']}/{m['seeds']})", fmt(m["final_regret"], 4)])
        lines += [f"**{study}**", "", markdown_table(
            ["policy", *[f"regret @ {_pct(b)}" for b in exp.BUDGETS], "spent", "to target",
             "final regret"], rows)]
    ours_here = [o for o in exp.OURS if o in s["policies"]]
    lines += ["## The targets: on the front, and stopping at ASHA's spend", "",
              "Per curve set (held out: generated after the controller and "
              "the two values of automl-thesis-lean, of automl-thesis-rank and of "
              "automl-thesis-second-chance were chosen, on "
              "digits-mlp and digits-cnn with seeds 0-1): `front`, the share of the "
              f"{len(GRID)} budgets of the figure (0.5 .. 100 % of the no-stop spend, log-spaced) "
              "where the mean regret is no higher than every rival's (Optuna's three pruners, "
              "ASHA, Ray Tune's ASHA and HyperBand), ✅ when all; `spend`: left to run, its mean spend over ASHA's, ✅ when "
              f"<= {exp.SPEND_FACTOR}; `final regret - ASHA's`: ✅ when <= 0. The last two "
              "columns are the paired differences (the same trial order) with their 95 % "
              "Student-t intervals over the seeds: final regret and share of the no-stop "
              "spend, each minus ASHA's; the budgets where it is on the front, as ranges.", ""]
    rows = []
    for study in s["studies"]:
        for ours in ours_here:
            if "asha" not in s["policies"]:
                continue
            t = exp.targets(data, study, ours, GRID)
            d = exp.paired(data, study, ours, "asha")
            rows.append([study + (" (held out)" if study in exp.HELD_OUT else ""), ours,
                         f"{t['front']:.2f} {'✅' if t['front_all'] else '❌'}",
                         f"{t['spend']:.2f}x {'✅' if t['spend_ok'] else '❌'}",
                         f"{t['final']:+.4f} {'✅' if t['final_ok'] else '❌'}",
                         _ci(d["regret"]), _ci(d["spent"], 3), budget_ranges(t["on_front"])])
    lines += [markdown_table(["curve set", "policy", "front", "spend / ASHA's",
                              "final regret - ASHA's", "final regret - ASHA's [95 % CI]",
                              "spent - ASHA's [95 % CI]",
                              "budgets on the front (% of the no-stop spend)"], rows)]
    lines += ["## automl-thesis against each rival, by budget", "",
              "Paired by seed (the same trial order): seeds where automl-thesis has the lower "
              "regret / the same / a higher one, and the mean regret difference (rival - "
              "thesis; > 0: thesis better) with its 95 % Student-t interval over the seeds, "
              "also in validation examples (one example = the study's accuracy resolution, "
              "1 / n_val). The last column is all the interval supports: a policy is better "
              "only where the interval excludes 0; `< 1 val. example` marks an interval that "
              "lies entirely within one validation example of 0.", ""]
    rows = []
    for study in s["studies"]:
        res = exp.accuracy_resolution(exp._curves(study))
        for ours in ours_here:
            for rival in exp.RIVALS:
                if rival not in s["policies"]:
                    continue
                for w in exp.wins(data, study, rival, ours):
                    rows.append([study, ours, rival, _pct(w["budget"]),
                                 f"{w['wins']} / {w['ties']} / {w['losses']}",
                                 f"{w['gain']:+.4f} [{w['low']:+.4f}, {w['high']:+.4f}]",
                                 f"{w['gain'] / res:+.1f}" if res > 0 else "—",
                                 exp.verdict(w["low"], w["high"], res, ours, rival)])
    lines += [markdown_table(["study", "ours", "rival", "budget", "ours wins / ties / losses",
                              "mean gain [95 % CI]", "gain, val. examples",
                              "what the CI supports"], rows)]
    lines += ablation_section(data)
    lines += tune_section(data)
    summary = exp.cluster_summary(data)
    lines += ["## The study inside a shared cluster", "",
              f"`{c['study']}`'s trials as jobs of the simulator (`oasis_opt.automl.cluster`: a "
              "trial stands for ResNet-18 on CIFAR-10 with this curve, chunk times from the "
              "cost model) submitted at slot 1 beside the Pollux workload 1 + seed (160 trace "
              f"jobs over 8 hours, 128 GPUs), slots of {c['slot_s']:g} s, seeds "
              f"{', '.join(map(str, c['seeds']))}; other jobs first fit in arrival order with "
              "backfilling, never preempted. Every schedule passed `oasis_opt.validate`. "
              "`saved`: share of the no-stop study's GPU-hours not spent; `to target`: median "
              "hours from the study's submission until its best came within "
              f"{exp.TARGET_GAP} of the pool's best; JCT: completion - arrival of the other "
              "jobs.", ""]
    rows = []
    for policy in c["policies"]:
        for cap in c["caps"]:
            m = summary[(policy, cap)]
            rows.append([policy, cap or "none", fmt(m["regret"], 4), fmt(m["gpu_hours"], 1),
                         fmt(m["saved"], 3), f"{fmt(m['reach_h'], 2)} ({m['reached']}/"
                         f"{m['seeds']})", fmt(m["jct_mean_h"], 3), fmt(m["jct_median_h"], 3),
                         m["unfinished"], m["most_gpus"], "yes" if m["valid"] else "NO"])
    lines += [markdown_table(["policy", "cap (GPUs)", "final regret", "study GPU-h", "saved",
                              "to target, h", "other jobs' mean JCT, h", "median JCT, h",
                              "others unfinished", "most GPUs held", "valid"], rows)]
    lines += priority_section(data)
    lines += ["## Commands", "", "```bash", f"{COMMAND}            # results/automl/, "
              "paper_figs/automl*", f"{COMMAND} --quick    # small: one curve set, 2 seeds",
              "oasis-opt automl replay digits-mlp --policy automl-thesis --workers 4 --seed 0 "
              "--out thesis.json", "```", ""]
    return "\n".join(lines)


def budget_ranges(on: list[bool]) -> str:
    """The budgets of ``GRID`` where ``on`` holds, as ranges of % of the no-stop spend
    ("0.5-1.2 %, 40-100 %"); "none" when it never holds."""
    def pct(x: float) -> str:
        return f"{100 * x:.2g}" if x < 0.1 else f"{100 * x:.0f}"

    out, start = [], None
    for j, flag in enumerate([*on, False]):
        if flag and start is None:
            start = j
        elif not flag and start is not None:
            lo, hi = pct(GRID[start]), pct(GRID[j - 1])
            out.append(f"{lo} %" if start == j - 1 else f"{lo}-{hi} %")
            start = None
    return ", ".join(out) or "none"


def _ci(m: tuple[float, float, float], digits: int = 4) -> str:
    return f"{m[0]:+.{digits}f} [{m[1]:+.{digits}f}, {m[2]:+.{digits}f}]"


def paired_rows(data, pairs) -> list[list]:
    """Per curve set and pair (a, b): a - b paired by trial order, in final regret and spent
    share (mean [95 % CI]), and what the regret CI supports."""
    rows = []
    for study in data["settings"]["studies"]:
        res = exp.accuracy_resolution(exp._curves(study))
        for a, b in pairs:
            d = exp.paired(data, study, a, b)
            # verdict reads (rival - ours) > 0 as ours better: here a - b > 0 is b better
            rows.append([study, a, b, _ci(d["regret"]), _ci(d["spent"], 3),
                         exp.verdict(d["regret"][1], d["regret"][2], res, b, a)])
    return rows


def ablation_section(data) -> list[str]:
    """What ranking by the predicted final buys: each controller of ``exp.ABLATIONS`` minus
    its ablation, paired by trial order (empty when the run has neither)."""
    s = data["settings"]
    pairs = [(a, b) for a, b in exp.ABLATIONS if a in s["policies"] and b in s["policies"]]
    if not pairs:
        return []
    lines = ["## Ranking by the predicted final against ranking by the current value", "",
             "`automl-thesis-rank-value` is `automl-thesis-rank` with one change: its rungs "
             "rank the trials by their current value, as successive halving does, instead of "
             "their predicted final (the same rungs, quota, poor rule and allocation). Paired "
             "by trial order, the controller minus its ablation (< 0: ranking by the "
             "prediction lower), mean [95 % CI over the seeds].", ""]
    return lines + [markdown_table(["curve set", "controller", "ablation",
                                    "final regret difference", "spent difference",
                                    "what the regret CI supports"],
                                   paired_rows(data, pairs))]


def tune_section(data) -> list[str]:
    """The section on Ray Tune's schedulers (empty when the run has none of them)."""
    s = data["settings"]
    pairs = [(a, b) for a, b in exp.TUNE_PAIRS if a in s["policies"] and b in s["policies"]]
    if not pairs:
        return []
    shown = [p for p in ("tune-asha", "asha", "optuna-sh", "tune-hyperband", "optuna-hyperband",
                         *exp.OURS) if p in s["policies"]]
    lines = ["## Ray Tune's schedulers against ours and Optuna's", "",
             "`tune-asha` and `tune-hyperband` are Ray Tune's own `ASHAScheduler` and "
             "`HyperBandScheduler` (defaults, `max_t` = the epochs) driven through Tune's "
             "trial-scheduler API on the same replayed curves (`oasis_opt.automl.tune`): each "
             "trial reports its recorded curve epoch by epoch to `on_trial_result`, free units "
             "go to `choose_trial_to_run`, decisions are executed as Tune's controller does; "
             "spend is the GPU-seconds of the epochs run, as for every policy. Tune's ASHA is "
             "the stopping variant (a trial below the rung's 1 - 1/eta quantile stops), our "
             "`asha` the promotion variant; Tune's HyperBand is synchronous (trials pause at a "
             "milestone until their bracket gets there). Cells: mean [95 % CI over the "
             f"{len(s['seeds'])} trial orders]; `spent`: share of the no-stop GPU-seconds the "
             "whole study spends.", ""]
    rows = []
    for study in s["studies"]:
        for policy in shown:
            recs = [data["replay"][f"{study}-{policy}-w{s['workers']}-s{seed}"]
                    for seed in s["seeds"]]
            final = exp.mean_ci([r["pool_best"] - (r["best_val_accuracy"] or 0.0) for r in recs])
            spent = exp.mean_ci([r["seconds_spent"] / r["seconds_without_stopping"]
                                 for r in recs])
            rows.append([study, policy, _ci(final), _ci(spent, 3),
                         f"{sum(r['completed'] for r in recs) / len(recs):.1f}"])
    lines += [markdown_table(["curve set", "policy", "final regret", "spent",
                              "trials completed (mean)"], rows)]
    lines += ["Paired by trial order: Tune's scheduler minus the other implementation (< 0: "
              "Tune's lower). `what the CI supports` reads the regret difference as the tables "
              "above do.", ""]
    rows = paired_rows(data, pairs)
    lines += [markdown_table(["curve set", "Tune", "against", "final regret difference",
                              "spent difference", "what the regret CI supports"], rows)]
    return lines


def _priority_recs(data, policy: str) -> list[dict]:
    p = data["settings"]["priority"]
    return [data["priority"][exp.priority_key(p, policy, seed)] for seed in p["seeds"]]


def priority_figure(data, summary):
    """The study under the priority scheduler: regret against hours since its submission, and
    the other jobs' mean and p95 JCT, per policy."""
    p = data["settings"]["priority"]
    fig, axes = new_figure(2, 1, width=5.0, height=3.6)
    ax = axes[0][0]
    recs = {policy: _priority_recs(data, policy) for policy in p["policies"]}
    right = max([r["trajectory"][-1][1] * r["slot_s"] / 3600.0 for rs in recs.values()
                 for r in rs if r["trajectory"]] + [1.0])
    grid = np.linspace(0, 1.3 * right, 200)
    for policy in p["policies"]:
        ours = policy == exp.ELASTIC
        reg = np.array([[r["pool_best"] - (next((q[2] for q in reversed(r["trajectory"])
                                                  if q[1] * r["slot_s"] / 3600.0 <= h), None)
                                             or 0.0) for h in grid] for r in recs[policy]])
        label = policy if ours else f"{policy} ({p['size']} GPUs per trial)"
        ax.plot(grid, reg.mean(axis=0), color=COLOURS[policy], label=label,
                lw=2.2 if ours else 1.1, zorder=4 if ours else 2)
    ax.set_yscale("symlog", linthresh=0.005)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("hours since the study's submission")
    ax.set_ylabel("regret: pool best - best found")
    ax.set_title(f"{p['study']} as automl jobs, cap {p['cap']} GPUs "
                 f"({len(p['seeds'])} seeds)", fontsize=9)
    ax.legend(fontsize=7, title="policy: mean regret over the seeds", title_fontsize=7)
    ax.grid(alpha=0.3)
    ax = axes[0][1]
    x = np.arange(len(p["policies"]))
    for k, (metric, name) in enumerate((("jct_mean_h", "mean"), ("jct_p95_h", "p95"))):
        m = np.array([summary[pol][metric] for pol in p["policies"]])
        ax.bar(x - 0.2 + 0.4 * k, m[:, 0], 0.4, yerr=[m[:, 0] - m[:, 1], m[:, 2] - m[:, 0]],
               capsize=3, label=name, color=("#1f77b4", "#ff7f0e")[k])
    ax.set_xticks(x, p["policies"], rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("other jobs' completion time, h")
    ax.legend(fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2,
              title="other jobs' JCT over all of them (bars: 95 % CI over the seeds)",
              title_fontsize=7, frameon=False)
    ax.grid(alpha=0.3, axis="y")
    return fig


def _mci(m, digits: int) -> str:
    """(mean, low, high) as "mean [low, high]"."""
    if not np.isfinite(m[0]):
        return "—"
    return f"{m[0]:.{digits}f} [{m[1]:.{digits}f}, {m[2]:.{digits}f}]"


def priority_section(data) -> list[str]:
    """The section on the study inside the priority scheduler (empty without one)."""
    p = data["settings"].get("priority")
    if not p or not data.get("priority"):
        return []
    summary = exp.priority_summary(data)
    rivals = [r for r in p["policies"] if r != exp.ELASTIC]
    lines = ["## Resources follow the prediction: the study as automl jobs of the priority "
             "scheduler", "",
             f"`{p['study']}`'s trials (as in the section above) beside the Pollux workload "
             "1 + seed % 8, every job under the priority scheduler "
             "(`oasis_opt.cluster.priority`, priority-degrade at its defaults; "
             "`oasis_opt.experiments.automl_priority`): trials are jobs of type `automl`, so a "
             "production job that does not fit preempts trials first; trials never preempt. "
             f"The study's cap is {p['cap']} GPUs for every policy. "
             f"`{exp.ELASTIC}` (`oasis_opt.automl.elastic`) sizes each trial from its class, "
             "at its start and at each of its rung decisions: "
             f"promising trials grow up to 4 workers (the trial's data chunks), uncertain ones "
             f"shrink to 1, poor ones stop, unjudged and new ones run on {p['size']}; a change "
             "of size is a `resize` stop (the work since the last checkpoint is lost, the "
             f"restart paid). ASHA and successive halving (`optuna-sh`) run every trial on "
             f"{p['size']} workers. Speed from the chunk-time cost model: an epoch costs the "
             "same GPU-hours on any number of workers (no free speed-up), more workers only "
             f"finish it sooner. Seeds {', '.join(map(str, p['seeds']))}; cells: mean "
             "[95 % Student-t CI over the seeds]. `to target`: hours from the study's "
             f"submission until its best came within {exp.TARGET_GAP} of the pool's best "
             "(over the seeds that got there); other jobs' JCT: completion - arrival over "
             "all of them, an unfinished job counted at the horizon (their number shown). "
             "Every schedule passed `oasis_opt.validate`.", ""]
    rows = []
    for policy in p["policies"]:
        m = summary[policy]
        rows.append([policy, _mci(m["regret"], 4),
                     f"{_mci(m['reach_h'], 2)} ({m['reached']}/{m['seeds']})",
                     _mci(m["gpu_hours"], 1), _mci(m["jct_mean_h"], 3),
                     _mci(m["jct_p95_h"], 3),
                     f"{m['unfinished']} of {m['background_jobs']}",
                     f"{m['preemptions']:.1f} / {m['degradations']:.1f} / {m['resizes']:.1f}",
                     m["most_gpus"], "yes" if m["valid"] else "NO"])
    lines += [markdown_table(["policy", "final regret", "to target, h", "study GPU-h",
                              "other jobs' mean JCT, h", "p95 JCT, h", "others unfinished",
                              "trial preemptions / degradations / resizes per run",
                              "most GPUs held", "valid"], rows)]
    lines += [f"Paired by seed: {exp.ELASTIC} minus the rival (< 0: {exp.ELASTIC} lower), "
              "mean [95 % CI]; the claims are checked on the means (✅ holds, ❌ does not), "
              "the CI says whether the data separate the two.", ""]
    rows, claims = [], []
    for rival in rivals:
        d = exp.priority_paired(data, exp.ELASTIC, rival)
        for metric, name, digits in (("regret", "final regret", 4),
                                     ("reach_h", "to target, h", 2),
                                     ("gpu_hours", "study GPU-h", 1),
                                     ("jct_mean_h", "other jobs' mean JCT, h", 3),
                                     ("jct_p95_h", "other jobs' p95 JCT, h", 3)):
            m = d[metric]
            said = ("no data" if not np.isfinite(m[0]) else f"{exp.ELASTIC} lower"
                    if m[2] < -exp.NOISE_RTOL else f"{rival} lower" if m[1] > exp.NOISE_RTOL
                    else "no difference shown")
            rows.append([rival, name, _mci(m, digits), said])
        mine, theirs = summary[exp.ELASTIC], summary[rival]
        ratio = mine["gpu_hours"][0] / theirs["gpu_hours"][0]
        checks = [
            (f"final regret no higher than {rival}'s",
             mine["regret"][0] <= theirs["regret"][0] + exp.NOISE_RTOL,
             f"{mine['regret'][0]:.4f} against {theirs['regret'][0]:.4f}"),
            (f"reaches the target sooner than {rival}",
             mine["reached"] == mine["seeds"] and (
                 theirs["reached"] < theirs["seeds"] or d["reach_h"][0] < 0),
             f"{mine['reach_h'][0]:.2f} h ({mine['reached']}/{mine['seeds']}) against "
             f"{theirs['reach_h'][0]:.2f} h ({theirs['reached']}/{theirs['seeds']})"),
            (f"GPU-hours at most {exp.SPEND_FACTOR}x {rival}'s", ratio <= exp.SPEND_FACTOR,
             f"{ratio:.2f}x"),
            (f"other jobs' mean JCT no higher than under {rival}",
             d["jct_mean_h"][0] <= exp.NOISE_RTOL, f"{d['jct_mean_h'][0]:+.3f} h"),
            (f"other jobs' p95 JCT no higher than under {rival}",
             d["jct_p95_h"][0] <= exp.NOISE_RTOL, f"{d['jct_p95_h'][0]:+.3f} h")]
        claims += [f"- {'✅' if ok else '❌'} {exp.ELASTIC}: {text} ({value})"
                   for text, ok, value in checks]
    lines += [markdown_table(["rival", "metric", f"{exp.ELASTIC} - rival", "what the CI "
                              "supports"], rows)]
    lines += claims + [""]
    return lines


def render(data, out_dir: Path, reference_dir=None, quick: bool = False) -> list[Path]:
    out_dir = Path(out_dir)
    summary = exp.cluster_summary(data)
    paths = draw_replay(data, out_dir) + draw_predictors(data, out_dir) + \
        draw_cluster(data, out_dir, summary)
    if data["settings"].get("priority") and data.get("priority"):
        paths += save(priority_figure(data, exp.priority_summary(data)), out_dir,
                      "automl_priority")
    return paths + [write_markdown(out_dir, "automl", markdown(data))]


FIGURE = Figure("automl", "AutoML early stopping on real learning curves", None, render,
                compute=exp.compute)
