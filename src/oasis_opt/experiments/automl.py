"""The AutoML experiment: prediction quality, early-stopping policies on replayed studies, and
the study inside a shared cluster. ``oasis-opt reproduce automl`` draws it
(``figures.automl``).

Three kinds of runs, each stored once as ``<results>/automl/<kind>/<key>.json`` (written
atomically; stored runs are reused, so a killed sweep resumes; delete the folder after changing
the code):

* ``predict/<study>``: every predictor on every trial at 10 / 20 / 40 % of training
  (``automl.evaluate``: regression by 5-fold cross-fitting), with the quality and the
  classification tables;
* ``replay/<study>-<policy>-w<workers>-s<seed>``: one replay of the whole study
  (``automl.replay``, no budget: a replay with budget B is the prefix of this one up to B
  GPU-seconds, since no controller looks at the budget, so one run gives the anytime curve);
* ``cluster/<study>-<policy>-cap<cap>-s<seed>``: the study (``CLUSTER["study"]``) beside the
  Pollux workload ``1 + seed % 8`` on its 128-GPU cluster (slots of ``CLUSTER["slot_s"]``),
  with the study's cap or none (``automl.cluster``); the schedule is validated;
* ``priority/<study>-<policy>-cap<cap>-size<size>-s<seed>``: the same study and workload with
  every job under the priority scheduler, the trials as ``automl`` jobs
  (``experiments.automl_priority``): ``automl-thesis-elastic`` sizes its trials by their class
  (unjudged and new ones at ``size`` workers), the rivals run every trial at ``size`` workers;
  the schedule is validated.

Runs go to a process pool when ``workers`` > 1 (deterministic: every run depends on its own
parameters only), in-process otherwise.
"""
from __future__ import annotations

import math
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..model.io import jsonable, read_json, write_json_atomic
from ..model.numerics import NOISE_RTOL

POLICIES = ("automl-thesis", "automl-thesis-lean", "automl-thesis-rank",
            "automl-thesis-rank-value", "automl-thesis-second-chance", "optuna-median",
            "optuna-sh", "optuna-hyperband", "asha", "tune-asha", "tune-hyperband", "no-stop")
OURS = ("automl-thesis", "automl-thesis-lean", "automl-thesis-rank",
        "automl-thesis-second-chance")
RIVALS = ("optuna-median", "optuna-sh", "optuna-hyperband", "asha", "tune-asha",
          "tune-hyperband")
# a controller and its ablation: the same rules but one (automl-thesis-rank's rungs ranked by
# the current value instead of the predicted final)
ABLATIONS = (("automl-thesis-rank", "automl-thesis-rank-value"),)
# Ray Tune's schedulers and the implementations they are compared with (ours, then Optuna's)
TUNE_PAIRS = (("tune-asha", "asha"), ("tune-asha", "optuna-sh"),
              ("tune-hyperband", "optuna-hyperband"))
CLUSTER_POLICIES = ("automl-thesis", "automl-thesis-lean", "automl-thesis-rank",
                    "optuna-median", "optuna-sh", "optuna-hyperband", "asha", "no-stop")
STUDIES = ("digits-mlp", "breast-cancer-mlp", "digits-cnn", "wine-mlp", "digits-linear")
HELD_OUT = ("wine-mlp", "digits-linear")  # generated after the controller was designed
ELASTIC = "automl-thesis-elastic"
PRIORITY_POLICIES = (ELASTIC, "asha", "optuna-sh")
SPEND_FACTOR = 1.2  # target: left to run, at most 1.2 x ASHA's spend
BUDGETS = (0.02, 0.05, 0.1, 0.2, 0.5, 1.0)  # shares of the no-stop study's GPU-seconds
TARGET_GAP = 0.005  # the target accuracy: the pool's best final minus this

FULL = {"studies": STUDIES, "seeds": tuple(range(20)), "workers": 4, "policies": POLICIES,
        "fractions": (0.1, 0.2, 0.4),
        "cluster": {"study": "digits-mlp", "seeds": tuple(range(5)), "caps": (16, None),
                    "policies": CLUSTER_POLICIES, "slot_s": 300.0},
        "priority": {"study": "digits-mlp", "seeds": tuple(range(5)), "cap": 16, "size": 2,
                     "policies": PRIORITY_POLICIES, "slot_s": 300.0}}
# about a minute on 2 cores: the smallest curve set, 2 seeds, one cap in the cluster
QUICK = {"studies": ("digits-cnn",), "seeds": (0, 1), "workers": 4,
         "policies": tuple(p for p in POLICIES
                           if p not in ("automl-thesis-lean", "automl-thesis-rank",
                                        "automl-thesis-rank-value")),
         "fractions": (0.2,),
         "cluster": {"study": "digits-cnn", "seeds": (0,), "caps": (16,),
                     "policies": ("automl-thesis", "asha", "no-stop"), "slot_s": 300.0},
         "priority": {"study": "digits-cnn", "seeds": (0,), "cap": 16, "size": 2,
                      "policies": PRIORITY_POLICIES, "slot_s": 300.0}}


def settings(quick: bool) -> dict:
    return QUICK if quick else FULL


def _curves(study: str):
    from ..training.curves import read_curves, shipped_curves

    return read_curves(shipped_curves()[study])


# ---- the three kinds of runs (top-level functions: they go to worker processes) -------------
def predict_run(study: str, fractions: tuple[float, ...]) -> dict:
    from ..automl.evaluate import classification_quality, prediction_quality, predict_study

    preds = predict_study(_curves(study), fractions)
    return {"study": study, "fractions": list(fractions), "quality": prediction_quality(preds),
            "classification": classification_quality(preds)}


def replay_run(study: str, policy: str, workers: int, seed: int) -> dict:
    from ..automl.controllers import get_controller
    from ..automl.replay import replay

    curves = _curves(study)
    result = replay(curves, get_controller(policy), workers=workers, seed=seed).to_json()
    result["pool_best"] = max(c.val_accuracy[-1] for c in curves)
    return result


def background(seed: int, slot_s: float):
    from ..workloads.traces import pollux_instance

    return pollux_instance(1 + seed % 8, seed, slot_s=slot_s)


def cluster_run(study: str, policy: str, cap: int | None, seed: int, slot_s: float) -> dict:
    from ..automl.cluster import run_study, study_instance
    from ..automl.controllers import get_controller

    curves = _curves(study)
    bg = background(seed, slot_s)
    inst = study_instance(curves, bg, horizon=3 * bg.horizon)
    r = run_study(inst, curves, get_controller(policy), cap=cap, seed=seed)
    status: dict[str, int] = {}
    for t in r.trials.values():
        status[t["status"]] = status.get(t["status"], 0) + 1
    return {"study": study, "policy": policy, "cap": cap, "seed": seed, "slot_s": slot_s,
            "workload": bg.meta.get("workload"), "valid": True, "best": r.best,
            "pool_best": max(c.val_accuracy[-1] for c in curves), "gpu_hours": r.gpu_hours,
            "trajectory": [list(p) for p in r.trajectory], "status": status,
            "background_jobs": bg.I, "background_jct_h": r.background_jct_h,
            "background_unfinished": r.background_unfinished,
            "most_gpus_held": r.stats.get("most_gpus_held")}


def priority_run(study: str, policy: str, cap: int, size: int, seed: int, slot_s: float) -> dict:
    """The study beside the Pollux workload, every job under the priority scheduler (module
    docstring); the other jobs' JCT counted over all of them, an unfinished one at the horizon
    (completion = the last slot)."""
    from ..automl.cluster import study_instance
    from ..automl.controllers import get_controller
    from .automl_priority import run_priority_study

    curves = _curves(study)
    bg = background(seed, slot_s)
    inst = study_instance(curves, bg, horizon=3 * bg.horizon)
    elastic = policy == ELASTIC
    controller = get_controller(policy, base=size) if elastic else get_controller(policy)
    r = run_priority_study(inst, curves, controller, cap=cap, size=1 if elastic else size,
                           seed=seed)
    slot_h = slot_s / 3600.0
    jct_all = [((r.schedule.completion[i] or inst.horizon) - inst.jobs[i].arrival + 1) * slot_h
               for i in range(bg.I)]
    status: dict[str, int] = {}
    for t in r.trials.values():
        status[t["status"]] = status.get(t["status"], 0) + 1
    return {"study": study, "policy": policy, "cap": cap, "size": size, "seed": seed,
            "slot_s": slot_s, "workload": bg.meta.get("workload"), "valid": True,
            "best": r.best, "pool_best": max(c.val_accuracy[-1] for c in curves),
            "gpu_hours": r.gpu_hours, "trajectory": [list(p) for p in r.trajectory],
            "status": status, "background_jobs": bg.I, "background_jct_all_h": jct_all,
            "background_unfinished": r.background_unfinished,
            "trial_stops": r.stats["trial_stops"], "most_gpus_held": r.stats["most_gpus_held"],
            "horizon": inst.horizon}


# ---- running them ---------------------------------------------------------------------------
def _tasks(quick: bool) -> list[tuple[str, str, Callable, tuple]]:
    """(kind, key, function, arguments) of every run of the experiment."""
    s = settings(quick)
    out: list[tuple[str, str, Callable, tuple]] = []
    for study in s["studies"]:
        out.append(("predict", study, predict_run, (study, tuple(s["fractions"]))))
    for study in s["studies"]:
        for policy in s["policies"]:
            for seed in s["seeds"]:
                out.append(("replay", f"{study}-{policy}-w{s['workers']}-s{seed}", replay_run,
                            (study, policy, s["workers"], seed)))
    c = s["cluster"]
    for policy in c["policies"]:
        for cap in c["caps"]:
            for seed in c["seeds"]:
                out.append(("cluster", f"{c['study']}-{policy}-cap{cap or 'none'}-s{seed}",
                            cluster_run, (c["study"], policy, cap, seed, c["slot_s"])))
    p = s.get("priority")
    if p:
        for policy in p["policies"]:
            for seed in p["seeds"]:
                out.append(("priority", priority_key(p, policy, seed), priority_run,
                            (p["study"], policy, p["cap"], p["size"], seed, p["slot_s"])))
    return out


def priority_key(p: dict, policy: str, seed: int) -> str:
    return f"{p['study']}-{policy}-cap{p['cap']}-size{p['size']}-s{seed}"


def compute(quick: bool = False, results: str | Path = "results", workers: int | None = None,
            address: str | None = None, progress: bool = True) -> dict[str, Any]:
    """Every run of the experiment, computed or loaded: {kind: {key: record}} plus settings.

    ``address`` is not used: the runs are short and go to local processes."""
    import os

    root = Path(results) / "automl"
    tasks = _tasks(quick)
    data: dict[str, Any] = {"quick": quick, "settings": settings(quick),
                            "predict": {}, "replay": {}, "cluster": {},
                            "priority": {}}
    todo = []
    for kind, key, fn, args in tasks:
        path = root / kind / f"{key}.json"
        if path.is_file():
            data[kind][key] = read_json(path)
        else:
            todo.append((kind, key, fn, args, path))
    data["computed"], data["loaded"] = len(todo), len(tasks) - len(todo)
    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), desc=f"automl{' (quick)' if quick else ''}", unit="run")

    def store(kind, key, path, record):
        record = jsonable(record)  # NaN (a rank correlation of constant predictions) -> null
        write_json_atomic(path, record)
        data[kind][key] = record
        if bar is not None:
            bar.update()

    n = workers if workers is not None else (os.cpu_count() or 1)
    try:
        if n <= 1 or len(todo) <= 1:
            for kind, key, fn, args, path in todo:
                store(kind, key, path, fn(*args))
        else:
            with ProcessPoolExecutor(max_workers=n) as pool:
                # long runs first: the predictor sweep, then the thesis's replays
                order = sorted(todo, key=lambda t: (t[0] != "predict",
                                                    "automl-thesis" not in t[1]))
                futures = {pool.submit(fn, *args): (kind, key, path)
                           for kind, key, fn, args, path in order}
                for fut in as_completed(futures):
                    kind, key, path = futures[fut]
                    store(kind, key, path, fut.result())
    finally:
        if bar is not None:
            bar.close()
    return data


# ---- analysis ---------------------------------------------------------------------------------
def best_at(trajectory, spent: float) -> float | None:
    """Best final accuracy found within ``spent`` (trajectory points are (spent, time, best))."""
    out = None
    for point in trajectory:
        if point[0] > spent * (1 + NOISE_RTOL):
            break
        out = point[2]
    return out


def regret_curves(data: dict, study: str, grid: np.ndarray) -> dict[str, np.ndarray]:
    """Per policy, regret (pool best - best found) at each share of the no-stop GPU-seconds in
    ``grid``, shape (seeds, len(grid)); before the first completed trial the best found is 0,
    so the regret is the pool's best."""
    s = data["settings"]
    out = {}
    for policy in s["policies"]:
        rows = []
        for seed in s["seeds"]:
            r = data["replay"][f"{study}-{policy}-w{s['workers']}-s{seed}"]
            total = r["seconds_without_stopping"]
            row = [best_at(r["trajectory"], g * total) for g in grid]
            rows.append([r["pool_best"] - (b or 0.0) for b in row])
        out[policy] = np.array(rows, dtype=float)
    return out


def replay_summary(data: dict, study: str) -> dict[str, dict]:
    """Per policy: regret at ``BUDGETS`` (mean, half-width of its 95 % CI over seeds), share of the no-stop cost spent
    by the whole study, share needed to reach the target (median over seeds), final regret."""
    s = data["settings"]
    curves = regret_curves(data, study, np.array(BUDGETS))
    out = {}
    for policy in s["policies"]:
        recs = [data["replay"][f"{study}-{policy}-w{s['workers']}-s{seed}"] for seed in s["seeds"]]
        target = recs[0]["pool_best"] - TARGET_GAP
        reach = []
        for r in recs:
            hit = next((p[0] for p in r["trajectory"] if p[2] >= target), math.inf)
            reach.append(hit / r["seconds_without_stopping"])
        reg = curves[policy]
        out[policy] = {
            "regret": [(m, m - low) for m, low, _ in map(mean_ci, reg.T)],
            "spent_share": float(np.mean([r["seconds_spent"] / r["seconds_without_stopping"]
                                          for r in recs])),
            "wall_s": float(np.mean([r["wall_seconds"] for r in recs])),
            "final_regret": float(np.mean([r["pool_best"] - r["best_val_accuracy"]
                                           for r in recs])),
            "reach_share": float(np.median(reach)), "reached": int(np.isfinite(reach).sum()),
            "target": target, "seeds": len(recs)}
    return out


def accuracy_resolution(curves) -> float:
    """One validation example, as accuracy: the smallest gap between two distinct recorded
    validation accuracies of the curve set (accuracies are multiples of 1 / n_val), 0 when
    every recorded value is the same."""
    values = np.unique(np.round([a for c in curves for a in c.val_accuracy], 6))
    return float(np.diff(values).min()) if values.size > 1 else 0.0


def mean_ci(x, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): the Student-t interval of the mean of ``x`` (low = high = mean for
    fewer than two values or no spread)."""
    from scipy.stats import t as student

    x = np.asarray(x, dtype=float)
    m = float(x.mean())
    if x.size < 2:
        return m, m, m
    half = float(student.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size))
    return m, m - half, m + half


def verdict(low: float, high: float, resolution: float, ours: str = "automl-thesis",
            rival: str = "rival") -> str:
    """What a CI of the regret difference (rival - ours) supports: one better when the CI
    excludes 0, "no difference shown" otherwise; "(< 1 val. example)" when the whole CI lies
    within one validation example of 0."""
    if low > NOISE_RTOL:
        said = f"{ours} better"
    elif high < -NOISE_RTOL:
        said = f"{rival} better"
    else:
        said = "no difference shown"
    if resolution > 0 and max(abs(low), abs(high)) < resolution:
        said += " (< 1 val. example)"
    return said


def wins(data: dict, study: str, rival: str, ours: str = "automl-thesis") -> list[dict]:
    """Per budget share, ``ours`` against ``rival`` paired by seed (the same trial order):
    seeds where ours has the lower regret, the same, a higher one, the mean regret difference
    ``gain`` = rival - ours (> 0: ours better) with its 95 % Student-t interval over the seeds
    (``low``, ``high``)."""
    curves = regret_curves(data, study, np.array(BUDGETS))
    a, b = curves[ours], curves[rival]
    rows = []
    for j, g in enumerate(BUDGETS):
        d = b[:, j] - a[:, j]
        mean, low, high = mean_ci(d)
        rows.append({"budget": g, "wins": int(np.sum(d > NOISE_RTOL)),
                     "ties": int(np.sum(np.abs(d) <= NOISE_RTOL)),
                     "losses": int(np.sum(d < -NOISE_RTOL)),
                     "gain": mean, "low": low, "high": high})
    return rows


def targets(data: dict, study: str, ours: str, grid: np.ndarray) -> dict:
    """Part 1's targets for ``ours`` on ``study``: ``front``, the share of the budgets of
    ``grid`` where its mean regret is no higher than every rival's (``on_front``: per budget
    of ``grid``, whether it is; ``front_all``: all of
    them); ``spend``, its mean spend left to run over ASHA's (target <= ``SPEND_FACTOR``);
    ``final``, its mean final regret minus ASHA's (target <= 0)."""
    curves = regret_curves(data, study, grid)
    mine = curves[ours].mean(axis=0)
    rivals = np.min([curves[r].mean(axis=0) for r in RIVALS if r in curves], axis=0)
    below = mine <= rivals + NOISE_RTOL
    summ = replay_summary(data, study)
    spend = summ[ours]["spent_share"] / summ["asha"]["spent_share"]
    final = summ[ours]["final_regret"] - summ["asha"]["final_regret"]
    return {"front": float(below.mean()), "front_all": bool(below.all()),
            "on_front": below.tolist(), "spend": spend,
            "spend_ok": spend <= SPEND_FACTOR, "final": final,
            "final_ok": final <= NOISE_RTOL}


def paired(data: dict, study: str, a: str, b: str) -> dict:
    """``a`` against ``b`` on ``study``, paired by seed (the same trial order): mean and 95 %
    Student-t interval of the differences a - b in final regret (``regret``) and in the share
    of the no-stop GPU-seconds spent left to run (``spent``), as (mean, low, high)."""
    s = data["settings"]
    rows = {p: [data["replay"][f"{study}-{p}-w{s['workers']}-s{seed}"] for seed in s["seeds"]]
            for p in (a, b)}

    def final(r):
        return r["pool_best"] - (r["best_val_accuracy"] or 0.0)

    def share(r):
        return r["seconds_spent"] / r["seconds_without_stopping"]

    return {"regret": mean_ci([final(x) - final(y) for x, y in zip(rows[a], rows[b])]),
            "spent": mean_ci([share(x) - share(y) for x, y in zip(rows[a], rows[b])])}


def cluster_summary(data: dict) -> dict[tuple[str, Any], dict]:
    """Per (policy, cap): means over seeds of the study's metrics and the background JCT."""
    c = data["settings"]["cluster"]
    out = {}
    for policy in c["policies"]:
        for cap in c["caps"]:
            recs = [data["cluster"][f"{c['study']}-{policy}-cap{cap or 'none'}-s{seed}"]
                    for seed in c["seeds"]]
            nostop = [data["cluster"][f"{c['study']}-no-stop-cap{cap or 'none'}-s{seed}"]
                      for seed in c["seeds"]] if "no-stop" in c["policies"] else None
            target = recs[0]["pool_best"] - TARGET_GAP
            reach = [next((p[1] * r["slot_s"] / 3600.0 for p in r["trajectory"]
                           if p[2] >= target), math.inf) for r in recs]
            out[(policy, cap)] = {
                "best": float(np.mean([r["best"] for r in recs])),
                "regret": float(np.mean([r["pool_best"] - r["best"] for r in recs])),
                "gpu_hours": float(np.mean([r["gpu_hours"] for r in recs])),
                "saved": (float(np.mean([1 - r["gpu_hours"] / n["gpu_hours"]
                                         for r, n in zip(recs, nostop)])) if nostop else
                          math.nan),
                "reach_h": float(np.median(reach)), "reached": int(np.isfinite(reach).sum()),
                "jct_mean_h": float(np.mean([np.mean(r["background_jct_h"]) for r in recs])),
                "jct_median_h": float(np.mean([np.median(r["background_jct_h"])
                                               for r in recs])),
                "unfinished": int(sum(r["background_unfinished"] for r in recs)),
                "incomplete_trials": int(sum(v for r in recs for k, v in r["status"].items()
                                             if k in ("running", "not started"))),
                "most_gpus": int(max(r["most_gpus_held"] for r in recs)),
                "valid": all(r["valid"] for r in recs), "seeds": len(recs)}
    return out


PRIORITY_METRICS = ("regret", "reach_h", "gpu_hours", "jct_mean_h", "jct_p95_h")


def _priority_metrics(r: dict) -> dict[str, float]:
    """One priority run's metrics: final regret, hours from the study's submission until its
    best came within ``TARGET_GAP`` of the pool's best (inf if never), GPU-hours, the other
    jobs' mean and 95th-percentile JCT over all of them (unfinished ones at the horizon)."""
    target = r["pool_best"] - TARGET_GAP
    jct = np.asarray(r["background_jct_all_h"], dtype=float)
    return {"regret": r["pool_best"] - (r["best"] or 0.0),
            "reach_h": next((p[1] * r["slot_s"] / 3600.0 for p in r["trajectory"]
                             if p[2] >= target), math.inf),
            "gpu_hours": r["gpu_hours"], "jct_mean_h": float(jct.mean()),
            "jct_p95_h": float(np.percentile(jct, 95))}


def priority_summary(data: dict) -> dict[str, dict]:
    """Per policy of the priority study: each metric of ``_priority_metrics`` as (mean, low,
    high) over the seeds (Student-t 95 %; ``reach_h`` over the seeds that reached the target,
    with ``reached``), the unfinished other jobs summed over seeds, the trials' preemptions,
    degradations and resizes (mean per seed), the most GPUs the study held."""
    p = data["settings"]["priority"]
    out = {}
    for policy in p["policies"]:
        recs = [data["priority"][priority_key(p, policy, seed)] for seed in p["seeds"]]
        ms = [_priority_metrics(r) for r in recs]
        row: dict[str, Any] = {}
        for k in PRIORITY_METRICS:
            vals = [m[k] for m in ms if math.isfinite(m[k])]
            row[k] = mean_ci(vals) if vals else (math.inf, math.inf, math.inf)
        row["reached"] = sum(math.isfinite(m["reach_h"]) for m in ms)
        row["unfinished"] = int(sum(r["background_unfinished"] for r in recs))
        row["background_jobs"] = int(sum(r["background_jobs"] for r in recs))
        for k in ("preemptions", "degradations", "resizes"):
            row[k] = float(np.mean([r["trial_stops"][k] for r in recs]))
        row["most_gpus"] = int(max(r["most_gpus_held"] for r in recs))
        row["valid"] = all(r["valid"] for r in recs)
        row["seeds"] = len(recs)
        out[policy] = row
    return out


def priority_paired(data: dict, a: str, b: str) -> dict[str, tuple[float, float, float]]:
    """``a`` minus ``b`` in the priority study, paired by seed (the same workload and trial
    order): per metric of ``_priority_metrics``, (mean, low, high) of the differences (the
    time to target over the seeds where both reached it; NaNs when none did)."""
    p = data["settings"]["priority"]
    out = {}
    pairs = [(_priority_metrics(data["priority"][priority_key(p, a, seed)]),
              _priority_metrics(data["priority"][priority_key(p, b, seed)]))
             for seed in p["seeds"]]
    for k in PRIORITY_METRICS:
        d = [x[k] - y[k] for x, y in pairs if math.isfinite(x[k]) and math.isfinite(y[k])]
        out[k] = mean_ci(d) if d else (math.nan, math.nan, math.nan)
    return out
