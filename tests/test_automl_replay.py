"""Replaying studies: the engine's accounting, every controller on hand-built curves (a clearly
bad trial stopped at the first rung, a clearly good one never stopped, the cap never exceeded),
Optuna's pruners really driven, ASHA traced by hand, determinism, and the CLI end to end."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import optuna
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_opt.automl.controllers import CONTROLLER_NAMES, available_controllers, get_controller
from oasis_opt.training.curves import Curve, write_curves
from oasis_opt.automl.pruners import AshaController, asha_rungs
from oasis_opt.automl.replay import (COMPLETED, CONTINUE, CUT, NOT_STARTED, PAUSE, PAUSED, STOP,
                                     STOPPED, Controller, ControllerError, TrialInfo, replay,
                                     study_order)
from oasis_opt.automl.thesis import ThesisController
from oasis_opt.cli import main


def curve(trial: int, acc, seconds=1.0, config=None, study: str = "s") -> Curve:
    acc = tuple(float(a) for a in acc)
    secs = tuple(float(s) for s in (seconds if np.ndim(seconds) else [seconds] * len(acc)))
    return Curve(study, trial, config if config is not None else {"lr": 0.01 * (trial + 1)},
                 acc, (1.0,) * len(acc), secs)


def rising(top: float, E: int = 20, rate: float = 0.4, start: float = 0.1):
    x = np.arange(1, E + 1)
    return top - (top - start) * np.exp(-rate * x)


GOOD, BAD = rising(0.97), np.full(20, 0.1)


def mixed_study(n_mid: int = 10, E: int = 20):
    """One clearly good trial, one clearly bad, and mediocre ones (0.80 .. 0.89)."""
    curves = [curve(0, rising(0.97, E)), curve(1, np.full(E, 0.1))]
    curves += [curve(2 + i, rising(0.80 + 0.01 * i, E)) for i in range(n_mid)]
    return curves


class Recorder(Controller):
    """Wraps a controller and records every plan's units."""

    def __init__(self, inner: Controller):
        self.inner, self.name, self.plans = inner, inner.name, []

    def reset(self, trials, workers, seed):
        self.inner.reset(trials, workers, seed)

    def observe(self, *args):
        return self.inner.observe(*args)

    def plan(self, running, capacity, now):
        starts, units = self.inner.plan(running, capacity, now)
        self.plans.append((capacity, dict(units)))
        return starts, units

    def spend_cap(self):
        return self.inner.spend_cap()

    def stats(self):
        return self.inner.stats()


# ---- the engine ---------------------------------------------------------------------------------
def test_no_stop_runs_every_trial_to_its_end():
    curves = [curve(t, rising(0.5 + 0.05 * t, 10)) for t in range(8)]
    r = replay(curves, get_controller("no-stop"), workers=4, seed=0)
    assert all(t["status"] == COMPLETED and t["stopped_at_epoch"] == 10 for t in r.trials)
    assert r.gpu_seconds == pytest.approx(80.0) == r.total_gpu_seconds
    assert r.wall_seconds == pytest.approx(20.0)  # 8 trials of 10 s on 4 workers
    assert r.best == pytest.approx(curves[-1].val_accuracy[-1]) and r.best_trial == 7
    assert r.to_json()["completed"] == 8 and r.to_json()["format"] == "oasis-opt/automl-replay@1"


class Doubler(Controller):
    name = "doubler"

    def plan(self, running, capacity, now):
        starts, units = super().plan(running, capacity, now)
        return starts, {t: capacity // max(len(units), 1) for t in units}


def test_more_units_run_an_epoch_faster_at_the_same_cost():
    """u units: an epoch of s seconds takes s / u of wall time and s GPU-seconds."""
    one = replay([curve(0, rising(0.9, 10), seconds=2.0)], Doubler(), workers=1)
    four = replay([curve(0, rising(0.9, 10), seconds=2.0)], Doubler(), workers=4)
    assert one.wall_seconds == pytest.approx(20.0) and four.wall_seconds == pytest.approx(5.0)
    assert one.gpu_seconds == pytest.approx(20.0) == four.gpu_seconds


def test_the_budget_is_never_exceeded_and_cuts_running_trials():
    curves = [curve(t, rising(0.9, 10), seconds=1.0 + t) for t in range(5)]
    r = replay(curves, get_controller("no-stop"), workers=2, budget=17.5, seed=0)
    assert r.gpu_seconds == pytest.approx(17.5) and r.stats["budget_exhausted"]
    assert {t["status"] for t in r.trials} <= {COMPLETED, CUT, NOT_STARTED}
    assert replay(curves, get_controller("no-stop"), workers=2, budget=0.0).best is None
    # a budget the whole study fits in is not exhausted
    full = replay(curves, get_controller("no-stop"), workers=2, budget=1e9)
    assert not full.stats["budget_exhausted"] and full.gpu_seconds == full.total_gpu_seconds


def test_the_anytime_curve_matches_budgeted_replays():
    """A replay with budget B is the prefix of the unbudgeted one: best_at(B) is its best."""
    curves = mixed_study()
    for name in ("automl-thesis", "optuna-median", "asha"):
        full = replay(curves, get_controller(name), workers=3, seed=2)
        for b in (5.0, 40.0, 90.0, 150.0):
            cut = replay(curves, get_controller(name), workers=3, seed=2, budget=b)
            assert cut.best == full.best_at(b), (name, b)


def test_replays_are_deterministic_per_seed():
    curves = mixed_study()
    for name in CONTROLLER_NAMES:
        a = replay(curves, get_controller(name), workers=3, seed=5).to_json()
        b = replay(curves, get_controller(name), workers=3, seed=5).to_json()
        assert a == b, name
    orders = {tuple(study_order(12, s)) for s in range(5)}
    assert len(orders) == 5  # the seed draws the study's order


class Greedy(Controller):
    name = "greedy"

    def plan(self, running, capacity, now):
        starts, units = super().plan(running, capacity, now)
        return starts, {t: 2 for t in units}  # two units each: over the cap


class Restart(Controller):
    name = "restart"

    def plan(self, running, capacity, now):
        starts, units = super().plan(running, capacity, now)
        if not running and not starts:
            return [0], {0: 1}  # trial 0 again, after it completed
        return starts, units


class Babble(Controller):
    name = "babble"

    def observe(self, *args):
        return "maybe"


@pytest.mark.parametrize("controller, match", [
    (Greedy(), "units asked, the cap is"), (Restart(), "start of trial 0, which is completed"),
    (Babble(), "observe returned 'maybe'")])
def test_the_engine_refuses_impossible_plans(controller, match):
    with pytest.raises(ControllerError, match=match):
        replay([curve(0, [0.5, 0.6]), curve(1, [0.4, 0.5])], controller, workers=2)


def test_bad_arguments_name_the_field():
    curves = mixed_study(2)
    for kwargs, field in (({"workers": 0}, "workers"), ({"budget": -1.0}, "budget"),
                          ({"budget": math.inf}, "budget"), ({"seed": -1}, "seed")):
        with pytest.raises(ValueError, match=f"^{field}:"):
            replay(curves, Controller(), **kwargs)
    with pytest.raises(ValueError, match="^study:"):
        replay(curves + [curve(0, [0.5], study="other")], Controller())
    with pytest.raises(ValueError, match="^policy: unknown policy 'bogus'"):
        get_controller("bogus")
    assert set(available_controllers()) == {"automl-thesis", "automl-thesis-lean",
                                            "automl-thesis-rank", "automl-thesis-rank-value",
                                            "automl-thesis-second-chance",
                                            "automl-thesis-elastic", "optuna-median", "optuna-sh", "optuna-hyperband",
                                            "asha", "tune-asha", "tune-hyperband",
                                            "no-stop"}


# ---- the cap, on random studies, for every controller ------------------------------------------
@st.composite
def studies(draw):
    n = draw(st.integers(1, 9))
    E = draw(st.integers(1, 9))
    curves = []
    for t in range(n):
        steps = draw(st.lists(st.floats(-0.1, 0.3), min_size=E, max_size=E))
        acc = np.clip(np.cumsum(steps) + 0.1, 0, 1)
        secs = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.5]), min_size=E, max_size=E))
        curves.append(curve(t, acc, secs))
    return curves


@settings(max_examples=12, deadline=None)
@given(studies(), st.integers(1, 4), st.one_of(st.none(), st.floats(0, 60)), st.integers(0, 3))
def test_no_controller_exceeds_the_cap_or_the_budget(curves, workers, budget, seed):
    for name in CONTROLLER_NAMES:
        rec = Recorder(get_controller(name))
        r = replay(curves, rec, workers=workers, budget=budget, seed=seed)
        assert all(sum(u.values()) <= workers for _, u in rec.plans), name
        assert all(u >= 1 for _, units in rec.plans for u in units.values())
        run = sum(math.fsum(c.seconds[:t["stopped_at_epoch"]]) for c, t in
                  zip(sorted(curves, key=lambda c: c.trial), r.trials))
        if budget is None and not r.stats.get("spend_cap_reached"):
            assert r.gpu_seconds == pytest.approx(run, abs=1e-9), name
        else:  # cut by the budget or by the controller's own spend_cap
            if budget is not None:
                assert r.gpu_seconds <= budget * (1 + 1e-12)
            assert run <= r.gpu_seconds + 1e-9  # epochs ended + partial ones cut
        done = [t for t in r.trials if t["status"] == COMPLETED]
        finals = [c.val_accuracy[-1] for c in curves if any(d["trial"] == c.trial for d in done)]
        assert r.best == (max(finals) if finals else None)


# ---- automl-thesis on hand-built curves ---------------------------------------------------------
def infos(curves):
    return [TrialInfo(c.trial, c.config, c.epochs) for c in curves]


def test_thesis_stops_a_clearly_bad_trial_at_its_first_rung():
    c = ThesisController()
    good, bad = curve(0, GOOD), curve(1, BAD)
    c.reset(infos([good, bad]), 1, 0)
    assert c.rungs(20) == [2, 4, 8, 16]
    for e, v in enumerate(good.val_accuracy, 1):
        assert c.observe(0, e, v, 1.0, e) == CONTINUE  # the first trial: nothing to beat
    assert c.best == pytest.approx(GOOD[-1])
    assert c.observe(1, 1, 0.1, 1.0, 21) == CONTINUE  # warm-up
    assert c.observe(1, 2, 0.1, 1.0, 22) == STOP  # first rung: 10 % of 20 epochs
    assert c.stats()["stopped_at"] == {2: 1}


def test_thesis_never_stops_a_clearly_good_trial():
    curves = mixed_study(12)
    for seed in range(8):
        r = replay(curves, ThesisController(), workers=2, seed=seed)
        good = next(t for t in r.trials if t["trial"] == 0)
        assert good["status"] == COMPLETED and good["stopped_at_epoch"] == 20, seed
        assert r.best == pytest.approx(GOOD[-1])
        bad = next(t for t in r.trials if t["trial"] == 1)
        if r.trials[0]["position"] > 0 and bad["position"] > good["position"]:
            assert bad["status"] == STOPPED and bad["stopped_at_epoch"] == 2


def test_thesis_water_fills_spare_units_to_promising_trials():
    # a long good trial, and short ones that complete early and leave units free
    curves = [curve(0, rising(0.97, 20), seconds=1.0)]
    curves += [curve(t, rising(0.5, 20, rate=0.8), seconds=0.2) for t in range(1, 6)]
    rec = Recorder(ThesisController(max_units=3))
    replay(curves, rec, workers=4, seed=0)
    assert max(max(u.values()) for _, u in rec.plans if u) == 3
    assert all(sum(u.values()) <= 4 for _, u in rec.plans)
    one = Recorder(ThesisController(max_units=1))
    replay(curves, one, workers=4, seed=0)
    assert max(max(u.values()) for _, u in one.plans if u) == 1


def test_thesis_uses_the_regression_once_enough_trials_completed():
    curves = [curve(t, rising(0.6 + 0.02 * t, 10)) for t in range(16)]
    r = replay(curves, ThesisController(min_completed=5), workers=2, seed=0)
    assert r.stats["by_method"].get("regression", 0) > 0 and r.stats["refits"] >= 1
    with pytest.raises(ValueError, match="^min_completed:"):
        ThesisController(min_completed=1)
    with pytest.raises(ValueError, match="^warmup:"):
        ThesisController(warmup=0.0)


# ---- Optuna, driven through its own API ---------------------------------------------------------
def test_optuna_median_pruner_is_really_driven():
    curves = [curve(t, rising(0.9 + 0.01 * t, 10)) for t in range(6)] + [curve(6, np.full(10, .1))]
    seed = next(s for s in range(100) if study_order(7, s)[-1] == 6)  # the bad trial last
    ctl = get_controller("optuna-median")
    r = replay(curves, ctl, workers=1, seed=seed)
    assert isinstance(ctl.study.pruner, optuna.pruners.MedianPruner)
    states = [t.state for t in ctl.study.trials]
    assert states.count(optuna.trial.TrialState.COMPLETE) == 6
    assert states.count(optuna.trial.TrialState.PRUNED) == 1
    bad = next(t for t in r.trials if t["trial"] == 6)
    assert bad["status"] == STOPPED and bad["stopped_at_epoch"] == 1  # below the median at once
    # Optuna's trials are the replayed ones, in start order, with the recorded values reported
    by_position = sorted(r.trials, key=lambda t: t["position"])
    for ot, t in zip(ctl.study.trials, by_position):
        c = curves[t["trial"]]
        assert ot.intermediate_values == {e: c.val_accuracy[e - 1]
                                          for e in range(1, t["stopped_at_epoch"] + 1)}


@pytest.mark.parametrize("name, pruner", [("optuna-sh", optuna.pruners.SuccessiveHalvingPruner),
                                          ("optuna-hyperband", optuna.pruners.HyperbandPruner)])
def test_optuna_halving_pruners_are_really_driven(name, pruner):
    curves = [curve(t, rising(0.5 + 0.4 * ((t * 7) % 20) / 20, 16)) for t in range(20)]
    ctl = get_controller(name)
    r = replay(curves, ctl, workers=2, seed=1)
    assert isinstance(ctl.study.pruner, pruner)
    states = [t.state for t in ctl.study.trials]
    stopped = sum(t["status"] == STOPPED for t in r.trials)
    assert stopped > 0 and states.count(optuna.trial.TrialState.PRUNED) == stopped
    assert states.count(optuna.trial.TrialState.COMPLETE) == sum(
        t["status"] == COMPLETED for t in r.trials)
    assert r.stats["pruned"] == stopped and r.stats["pruner"] == pruner.__name__


def test_optuna_options_reach_the_pruner():
    ctl = get_controller("optuna-median", n_startup_trials=50)
    r = replay(mixed_study(), ctl, workers=2, seed=0)
    assert all(t["status"] == COMPLETED for t in r.trials)  # never enough completed trials
    with pytest.raises(ValueError, match="^options: MedianPruner"):
        get_controller("optuna-median", bogus=1)


# ---- ASHA ---------------------------------------------------------------------------------------
def test_asha_rungs():
    assert asha_rungs(40, 1, 4) == [1, 4, 16, 40]
    assert asha_rungs(30, 1, 3) == [1, 3, 9, 27, 30]
    assert asha_rungs(1, 1, 4) == [1]
    with pytest.raises(ValueError, match="^reduction_factor:"):
        AshaController(reduction_factor=1)


def test_asha_promotes_as_algorithm_2_by_hand():
    """Four trials of constant accuracy A=.1, B=.4, C=.2, D=.3 on one worker, eta = 2, rungs at
    1, 2, 4 epochs: traced by hand from Li et al.'s get_job."""
    acc = {0: 0.1, 1: 0.4, 2: 0.2, 3: 0.3}
    c = AshaController(grace_period=1, reduction_factor=2)
    c.reset([TrialInfo(t, {}, 4) for t in (0, 1, 2, 3)], 1, 0)
    done = dict.fromkeys(acc, 0)
    starts = []
    while True:
        new, _ = c.plan({}, 1, 0.0)
        if not new:
            break
        t = new[0]
        starts.append(t)
        while True:
            done[t] += 1
            if c.observe(t, done[t], acc[t], 1.0, 0.0) == PAUSE or done[t] == 4:
                break
    assert starts == [0, 1, 1, 2, 3, 3, 1]
    assert done == {0: 1, 1: 4, 2: 1, 3: 2}
    r = replay([curve(t, [acc[t]] * 4) for t in acc], AshaController(1, 2), workers=1, seed=0)
    assert sum(t["status"] == COMPLETED for t in r.trials) == 1
    assert {t["status"] for t in r.trials} == {COMPLETED, PAUSED}
    assert r.best == 0.4


# ---- the CLI end to end -------------------------------------------------------------------------
@pytest.fixture
def small_csv(tmp_path):
    path = tmp_path / "curves.csv"
    write_curves(mixed_study(8), path)
    return path


def test_cli_replay_end_to_end(small_csv, tmp_path, capsys):
    out = tmp_path / "r.json"
    argv = ["automl", "replay", str(small_csv), "--policy", "automl-thesis", "--workers", "2",
            "--seed", "3", "--budget", "300", "--out", str(out)]
    assert main(argv) == 0
    doc = json.loads(out.read_text())
    assert doc["policy"] == "automl-thesis" and doc["workers"] == 2 and doc["seed"] == 3
    assert doc["best_val_accuracy"] == pytest.approx(GOOD[-1]) and doc["budget_s"] == 300.0
    assert 0 < doc["seconds_spent"] <= 300.0
    assert [t["trial"] for t in doc["trials"]] == list(range(10))
    assert all(1 <= t["stopped_at_epoch"] <= 20 for t in doc["trials"])
    assert f"best final val_accuracy {GOOD[-1]:.4f}" in capsys.readouterr().out
    first = out.read_text()
    assert main(argv) == 0 and out.read_text() == first  # deterministic
    for policy in CONTROLLER_NAMES:
        assert main(["automl", "replay", str(small_csv), "--policy", policy, "--out",
                     str(tmp_path / f"{policy}.json")]) == 0


@pytest.mark.parametrize("args, message", [
    (["--policy", "bogus"], "--policy: unknown policy 'bogus'"),
    (["--policy", "asha", "--option", "eta=3"], "--option eta: policy 'asha' does not accept"),
    (["--policy", "automl-thesis", "--option", "delta=2"], "--option delta: must be in [0, 1]"),
    (["--policy", "asha", "--workers", "0"], "--workers: must be >= 1"),
    (["--policy", "asha", "--budget", "nan"], "--budget: must be a finite number >= 0"),
    (["--policy", "asha", "--study", "nope"], "--study: no study 'nope'"),
    (["--policy", "asha", "--bogus"], "--bogus: unrecognized argument"),
])
def test_cli_replay_bad_input_is_one_line(small_csv, tmp_path, capsys, args, message):
    rc = main(["automl", "replay", str(small_csv), "--out", str(tmp_path / "x.json"), *args])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert err.startswith(f"oasis-opt: error: {message}"), err


def test_cli_replay_bad_files(tmp_path, capsys):
    out = str(tmp_path / "x.json")
    assert main(["automl", "replay", str(tmp_path / "none.csv"), "--policy", "asha",
                 "--out", out]) == 2
    assert "CURVES: no such file, nor a shipped curve set" in capsys.readouterr().err
    assert main(["automl", "replay", "digits-cnn", "--policy", "no-stop", "--budget", "5",
                 "--out", out]) == 0  # a shipped curve set by name
    doc = json.loads(Path(out).read_text())
    assert doc["study"] == "digits-cnn" and doc["seconds_spent"] == pytest.approx(5.0)
    bad = tmp_path / "bad.csv"
    bad.write_text("study,trial,epoch,val_accuracy,val_loss,seconds,config\n"
                   's,0,1,1.5,0.1,0.1,"{}"\n')
    assert main(["automl", "replay", str(bad), "--policy", "asha", "--out", out]) == 2
    err = capsys.readouterr().err
    assert "row 2 column val_accuracy" in err and err.count("\n") == 1
    two = tmp_path / "two.csv"
    write_curves([curve(0, [0.5]), curve(0, [0.6], study="t")], two)
    assert main(["automl", "replay", str(two), "--policy", "asha", "--out", out]) == 2
    assert "--study: the curves hold 2 studies" in capsys.readouterr().err
    assert main(["automl", "replay", str(two), "--policy", "asha", "--study", "t",
                 "--out", out]) == 0


def test_asha_says_why_no_trial_completed(tmp_path, capsys):
    """Bug: ``asha`` on 8 trials printed "none (0 of 8 trials completed)" with no word on why.
    With eta 4 and rungs 1, 4, 16, 40 a trial reaches epoch 40 only after 4^3 = 64 trials;
    with eta 2 on 8 trials of 4 epochs (rungs 1, 2, 4: 2^2 = 4 trials) one completes, and
    nothing is said."""
    from oasis_opt.training.curves import read_curves, shipped_curves

    path = tmp_path / "eight.csv"
    write_curves([c for c in read_curves(shipped_curves()["digits-mlp"]) if c.trial < 8], path)
    assert main(["automl", "replay", str(path), "--policy", "asha",
                 "--out", str(tmp_path / "a.json")]) == 0
    out = capsys.readouterr().out
    assert "no trial reached its last epoch" in out
    assert "4^3 = 64 trials, and the study has 8" in out and "epochs 1, 4, 16, 40" in out
    short = [curve(t, rising(0.5 + 0.05 * t, 4)) for t in range(8)]
    asha = AshaController(reduction_factor=2)
    result = replay(short, asha, workers=2)
    assert result.best is not None and asha.why_none_completed() is None


def test_the_lean_controller_is_the_thesis_with_its_two_values():
    """automl-thesis-lean: delta 0.4 and warmup 0.05 unless given, calibrated, own name
    (a registry entry pointing at the plain controller would fail here)."""
    lean = get_controller("automl-thesis-lean")
    assert isinstance(lean, ThesisController) and lean.name == "automl-thesis-lean"
    assert (lean.thresholds.delta, lean.warmup, lean.calibrate) == (0.4, 0.05, True)
    assert get_controller("automl-thesis-lean", delta=0.3).thresholds.delta == 0.3
    assert lean.rungs(40) == [2, 4, 8, 16, 32]
