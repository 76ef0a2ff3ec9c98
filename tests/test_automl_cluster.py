"""The study inside a shared cluster: trials as simulator jobs, every schedule validated, the cap
held, stopped trials' servers freed for the other jobs."""
from __future__ import annotations

import numpy as np
import pytest

from oasis_opt.automl.cluster import StudyInCluster, run_study, study_instance, trial_jobs
from oasis_opt.automl.controllers import CONTROLLER_NAMES, get_controller
from oasis_opt.training.curves import Curve
from oasis_opt.costmodel.chunktime import chunk_time_from_provenance
from oasis_opt.model.validate import validate
from oasis_opt.sim.core import simulate
from oasis_opt.workloads.traces import TraceJob, TraceMapping, philly_cluster, trace_instance

E = 12


def curve(trial, acc, seconds=1.0):
    return Curve("s", trial, {"lr": 0.01 * (trial + 1), "width": 8}, tuple(float(a) for a in acc),
                 (1.0,) * len(acc), (float(seconds),) * len(acc))


def rising(top, rate=0.5):
    x = np.arange(1, E + 1)
    return top - (top - 0.1) * np.exp(-rate * x)


def background(jobs, slot_s=600.0, servers=1):
    """``jobs``: (submission s, duration s, GPUs) on ``servers`` 8-GPU servers and 2 PS servers."""
    workers, pss = philly_cluster(racks=1, servers_per_rack=servers, ps_per_rack=2)
    return trace_instance([TraceJob(f"bg-{n}", at, d, g, {}) for n, (at, d, g) in
                           enumerate(jobs)], workers, pss, seed=0, slot_s=slot_s,
                          mapping=TraceMapping(tail=200))


STUDY = [curve(0, rising(0.97))] + [curve(t, rising(0.6 + 0.02 * t)) for t in range(1, 8)] + \
    [curve(t, np.full(E, 0.1)) for t in range(8, 12)]


def trial_gpus_per_slot(inst, schedule):
    first = trial_jobs(inst).first
    y = schedule.allocations.workers_per_job_slot(inst.I, inst.horizon)
    return y[first:].sum(axis=0)


def test_trials_become_jobs_with_cost_model_chunk_times():
    bg = background([(0, 3000, 4)])
    curves = [curve(0, rising(0.9), seconds=1.0), curve(1, rising(0.8), seconds=3.0)]
    inst = study_instance(curves, bg, max_units=4)
    assert inst.I == bg.I + 2 and inst.jobs[:bg.I] == bg.jobs
    t0, t1 = inst.jobs[bg.I:]
    assert (t0.epochs, t0.chunks, t0.arrival) == (E, 4, 1)
    for job in (t0, t1):
        assert job.chunk_time == pytest.approx(chunk_time_from_provenance(job.provenance))
        assert job.worker["gpu"] == 1.0 and job.utility(5) == 0.0
    # the slower trial (3 s per recorded epoch against 1 s) computes 3x longer per mini-batch
    assert t1.provenance["minibatch_time_s"] == pytest.approx(
        3 * t0.provenance["minibatch_time_s"], rel=0.5)
    tj = trial_jobs(inst)
    assert tj.first == bg.I and tj.trials == (0, 1)
    assert tj.epoch_work == pytest.approx((4 * t0.chunk_time, 4 * t1.chunk_time))
    with pytest.raises(ValueError, match="^instance: no AutoML study"):
        trial_jobs(bg)
    with pytest.raises(ValueError, match="^max_units:"):
        study_instance(curves, bg, max_units=0)


@pytest.mark.parametrize("name", CONTROLLER_NAMES)
@pytest.mark.parametrize("cap", [3, None])
def test_every_controller_runs_validated_under_the_cap(name, cap):
    bg = background([(0, 1800, 2), (600, 6000, 4), (1200, 1200, 8)], servers=2)
    inst = study_instance(STUDY, bg, minibatches_per_epoch=3920)
    r = run_study(inst, STUDY, get_controller(name), cap=cap, seed=1)  # asserts validity
    assert validate(inst, r.schedule).ok
    gpus = trial_gpus_per_slot(inst, r.schedule)
    assert gpus.max() <= (cap if cap is not None else 16)
    first = trial_jobs(inst).first
    for n, (trial, t) in enumerate(sorted(r.trials.items())):
        done = r.schedule.completion[first + n] is not None
        assert done == (t["status"] == "completed"), (trial, t)
        assert t["status"] in ("completed", "stopped", "paused"), (trial, t)  # all were run
        assert t["stopped_at_epoch"] == E if done else t["stopped_at_epoch"] < E
    finals = [STUDY[t].val_accuracy[-1] for t, v in r.trials.items() if v["status"] == "completed"]
    assert r.best == (max(finals) if finals else None) and r.background_unfinished == 0
    assert r.gpu_hours == pytest.approx(sum(t["gpu_hours"] for t in r.trials.values()))


def test_a_stopped_trial_gets_no_servers_after_its_stop():
    bg = background([(0, 600, 1)])
    inst = study_instance(STUDY, bg, minibatches_per_epoch=3920)
    policy = StudyInCluster(get_controller("asha"), STUDY, cap=4, seed=0)
    schedule = simulate(inst, policy)
    assert validate(inst, schedule).ok
    y = schedule.allocations.workers_per_job_slot(inst.I, inst.horizon)
    first = trial_jobs(inst).first
    work = trial_jobs(inst).epoch_work
    for n, trial in enumerate(trial_jobs(inst).trials):
        if policy.study.ended.get(trial) != "paused":
            continue
        # paused at its rung: it got what that rung needs and at most one slot more
        got = y[first + n].sum()
        rung = policy.study.epochs_done[trial]
        assert rung * work[n] <= got + 1e-9
        assert got <= rung * work[n] + 4 + 1e-9


def test_the_cap_lets_later_jobs_start_at_once():
    """Eight long trials fill an 8-GPU server without a cap; a 4-GPU job arriving in slot 2
    waits for them. With a cap of 4 GPUs it starts on arrival."""
    bg = background([(700, 1200, 4)], slot_s=600.0)
    study = [curve(t, rising(0.8 + 0.01 * t)) for t in range(8)]
    inst = study_instance(study, bg, minibatches_per_epoch=39200, max_units=1, horizon=400)
    free = run_study(inst, study, get_controller("no-stop"), cap=None, seed=0)
    capped = run_study(inst, study, get_controller("no-stop"), cap=4, seed=0)
    assert trial_gpus_per_slot(inst, free.schedule).max() == 8
    assert trial_gpus_per_slot(inst, capped.schedule).max() == 4
    assert capped.background_jct_h[0] < free.background_jct_h[0]
    assert capped.background_jct_h[0] == pytest.approx(2 * 600 / 3600)  # its own 2 slots
    # the study itself ends later under the cap, and finds the same best
    first = trial_jobs(inst).first
    assert max(capped.schedule.completion[first:]) > max(free.schedule.completion[first:])
    assert capped.best == free.best


def test_other_jobs_start_in_arrival_order_with_backfilling():
    """A (12 GPUs) runs; B (8 GPUs) must wait for it; C (2 GPUs), behind B, starts at once."""
    bg = background([(0, 3000, 12), (600, 1200, 8), (1200, 1200, 2)], servers=2)
    study = [curve(0, rising(0.9))]
    inst = study_instance(study, bg, horizon=bg.horizon + 20)
    r = run_study(inst, study, get_controller("no-stop"), cap=1, seed=0)
    start = [int(np.flatnonzero(r.schedule.allocations.workers_per_job_slot(
        inst.I, inst.horizon)[j])[0]) for j in range(3)]
    assert start[0] == 1 and start[2] == 3 and start[1] > start[2]
    assert start[1] == r.schedule.completion[0] + 1  # B takes A's servers when A is done


def test_stopping_trials_frees_servers_for_the_other_jobs():
    bg = background([(700, 1200, 6)], slot_s=600.0)
    study = [curve(t, rising(0.5 + 0.05 * t)) for t in range(8)]
    inst = study_instance(study, bg, minibatches_per_epoch=39200, max_units=1)
    nostop = run_study(inst, study, get_controller("no-stop"), cap=None, seed=0)
    asha = run_study(inst, study, get_controller("asha"), cap=None, seed=0)
    assert asha.gpu_hours < nostop.gpu_hours
    assert asha.background_jct_h[0] < nostop.background_jct_h[0]


def test_cluster_studies_are_deterministic():
    bg = background([(0, 1800, 2), (900, 3000, 4)], servers=2)
    inst = study_instance(STUDY, bg, minibatches_per_epoch=3920)
    a = run_study(inst, STUDY, get_controller("automl-thesis"), cap=4, seed=2)
    b = run_study(inst, STUDY, get_controller("automl-thesis"), cap=4, seed=2)
    assert list(a.schedule.allocations.rows()) == list(b.schedule.allocations.rows())
    assert a.trials == b.trials and a.trajectory == b.trajectory
    with pytest.raises(ValueError, match="^cap:"):
        StudyInCluster(get_controller("no-stop"), STUDY, cap=0)
