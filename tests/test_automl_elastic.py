"""Elastic trials (``automl.elastic``) and the study inside the priority scheduler
(``experiments.automl_priority``): the rule's invariants, the cap, poor trials stopped, and
trials preempted before production jobs."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_opt.automl.classify import POOR, PROMISING, UNCERTAIN
from oasis_opt.automl.cluster import study_instance, trial_jobs
from oasis_opt.automl.controllers import get_controller
from oasis_opt.automl.elastic import ElasticThesisController, elastic_units
from oasis_opt.experiments.automl_priority import StudyPriority, run_priority_study
from oasis_opt.model.validate import validate
from oasis_opt.sim.core import simulate

from test_automl_cluster import STUDY, background, curve, rising, trial_gpus_per_slot


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([PROMISING, UNCERTAIN, None]), max_size=12),
       st.lists(st.floats(0.0, 10.0), min_size=12, max_size=12),
       st.integers(0, 40), st.integers(1, 4), st.integers(0, 3))
def test_the_elastic_rule_holds_its_invariants(cls, gains, capacity, base, more):
    """Catches: a plan over the capacity, a running trial given 0 workers, a trial over its
    chunks, an uncertain trial not lowered to one worker, a promising trial given fewer workers
    than an uncertain one or a not-yet-judged one given more than the fixed size."""
    max_units = base + more
    running = list(range(len(cls)))
    classes = {t: c for t, c in zip(running, cls) if c is not None}
    gain = {t: gains[t] for t, c in classes.items() if c == PROMISING}
    units = elastic_units(running, classes, gain, capacity, base=base, max_units=max_units)
    assert set(units) == set(running)
    assert sum(units.values()) <= max(capacity, len(running))
    assert all(1 <= u <= max_units for u in units.values())
    assert all(units[t] == 1 for t, c in classes.items() if c == UNCERTAIN)
    assert all(units[t] <= base for t in running if t not in classes)
    prom = [units[t] for t, c in classes.items() if c == PROMISING]
    unc = [units[t] for t, c in classes.items() if c == UNCERTAIN]
    if prom and unc:
        assert min(prom) >= max(unc)
    # nothing left idle that a trial could take: spare workers only when every trial is full
    if sum(units.values()) < capacity:
        assert all(units[t] == max_units for t, c in classes.items()
                   if c == PROMISING and gain[t] > 0)
        assert all(units[t] == base for t in running if t not in classes)


def test_the_elastic_rule_by_hand():
    """Four trials hold one each. Capacity 9: the 5 spare go to the promising ones by
    water-filling on gains 3:1 (a: 3/1, 3/2, then 3/3 against b's 1/1, a tie to a: a full at 4,
    b gets the last 2), none to the unjudged n. Capacity 10, at most 3 each: a and b full, n
    grows to base 2, and the last worker is left, not given to the uncertain u."""
    trials = ["a", "b", "u", "n"]
    classes = {"a": PROMISING, "b": PROMISING, "u": UNCERTAIN}
    gain = {"a": 3.0, "b": 1.0}
    assert elastic_units(trials, classes, gain, 9, base=2, max_units=4) == \
        {"a": 4, "b": 3, "u": 1, "n": 1}
    assert elastic_units(trials, classes, gain, 10, base=2, max_units=3) == \
        {"a": 3, "b": 3, "u": 1, "n": 2}
    assert elastic_units(["u", "n"], {"u": UNCERTAIN}, {}, 1, base=2, max_units=4) == \
        {"u": 1, "n": 1}  # over the capacity only by the running trials' one worker each
    with pytest.raises(ValueError, match="poor"):
        elastic_units(["p"], {"p": POOR}, {}, 4, base=2, max_units=4)
    with pytest.raises(ValueError, match="^base:"):
        ElasticThesisController(base=5)


def _study_in_priority(controller, cap, size=1, seed=1):
    bg = background([(0, 1800, 2), (600, 6000, 4), (1200, 1200, 8)], servers=2)
    inst = study_instance(STUDY, bg, minibatches_per_epoch=3920)
    return inst, run_priority_study(inst, STUDY, controller, cap=cap, size=size, seed=seed)


@pytest.mark.parametrize("cap", [3, 8])
def test_elastic_trials_stay_under_the_cap_and_poor_ones_stop(cap):
    """Catches: the study's GPUs over its cap in some slot, a trial the controller stopped
    still given servers, a schedule the validator rejects."""
    c = ElasticThesisController(min_completed=3)
    inst, r = _study_in_priority(c, cap)
    assert validate(inst, r.schedule).ok
    gpus = trial_gpus_per_slot(inst, r.schedule)
    assert gpus.max() <= cap
    y = r.schedule.allocations.workers_per_job_slot(inst.I, inst.horizon)
    first = trial_jobs(inst).first
    stopped = [n for n, t in enumerate(sorted(r.trials)) if r.trials[t]["status"] == "stopped"]
    assert stopped and c.counts["stopped"] == len(stopped)
    for n in stopped:
        last = int(np.flatnonzero(y[first + n])[-1])
        # no workers after the slot its stopping epoch ended in (the flat trials 8-11 stop)
        assert y[first + n, last + 1:].sum() == 0
        assert r.trials[sorted(r.trials)[n]]["stopped_at_epoch"] < STUDY[n].epochs
    assert r.best == pytest.approx(0.97 - (0.97 - 0.1) * np.exp(-0.5 * 12))


def test_promising_trials_get_more_workers_than_uncertain_ones():
    """Catches: the classes not reaching the worker counts: a promising trial must run on more
    than one worker at some slot, an uncertain one on one at most once judged."""
    c = ElasticThesisController(min_completed=3)
    inst, r = _study_in_priority(c, 8)
    y = r.schedule.allocations.workers_per_job_slot(inst.I, inst.horizon)
    first = trial_jobs(inst).first
    assert y[first:].max() > 2  # some trial grew above the fixed size 2
    assert c.counts["sized_by_class"][PROMISING] > 0


def test_fixed_size_study_runs_each_trial_on_size_workers():
    """Catches: the fixed-size adaptor not scaling the controller's units (ASHA with size 2
    must place 2 workers per trial, never more, and at most cap // 2 trials at once)."""
    inst, r = _study_in_priority(get_controller("asha"), 6, size=2)
    y = r.schedule.allocations.workers_per_job_slot(inst.I, inst.horizon)
    first = trial_jobs(inst).first
    assert set(np.unique(y[first:])) <= {0, 2}
    assert ((y[first:] > 0).sum(axis=0)).max() <= 3


def test_an_automl_trial_is_preempted_before_a_production_job():
    """One 8-GPU server (the scheduler may preempt half its GPUs per slot). A production job A
    (4 GPUs, low user class) and a trial (4 GPUs, the same class, job type automl) fill it;
    production job B (4 GPUs, high class) arrives in slot 3. Both may be preempted by B
    (priority gap >= delta). The trial is nearer its end (49 of A's 232 remaining worker-slots:
    its remaining-work term is 0.075 higher), so as a production job it would outrank A (0.273
    against 0.25) and A would be the victim; typed ``automl`` it sits at 0.133 and is taken.
    Catches: trials not typed ``automl``, or a production job stopped while an automl trial
    could make room."""
    bg = background([(0, 36000, 4), (1200, 36000, 4)], slot_s=600.0)
    study = [curve(0, rising(0.9))]
    inst = study_instance(study, bg, minibatches_per_epoch=13830, horizon=120)
    jobs = list(inst.jobs)
    for j, cls in ((0, "low"), (1, "high"), (2, "low")):
        jobs[j] = replace(jobs[j], provenance={**jobs[j].provenance, "user_class": cls})
    inst = replace(inst, jobs=tuple(jobs))
    policy = StudyPriority(get_controller("no-stop"), study, cap=4, size=4, seed=0,
                           preempt_cap=0.5)
    schedule = simulate(inst, policy)
    assert validate(inst, schedule).ok
    assert policy.k[:2].tolist() == [4, 4]
    y = schedule.allocations.workers_per_job_slot(inst.I, inst.horizon)  # column t: slot t
    assert y[0, 1] == 4 and y[2, 1] == 4  # slot 1: A and the trial
    assert y[1, 3] == 4 and y[2, 3] == 0  # B starts on arrival in slot 3, in the trial's place
    events = schedule.stats["preemption"]["events"]
    assert events[0] == [inst.jobs[2].id, 3, "preempt", inst.jobs[1].id]
    assert all(e[0] != inst.jobs[0].id for e in events)  # A, production, is never stopped
    assert (y[0, 1:schedule.completion[0] + 1] == 4).all()


def test_trials_never_preempt():
    """Catches: a waiting trial outranking a running production job (a long wait raises its
    priority) and preempting it."""
    bg = background([(0, 36000, 8)], slot_s=600.0)
    study = [curve(0, rising(0.9))]
    inst = study_instance(study, bg, minibatches_per_epoch=3920, horizon=80)
    jobs = list(inst.jobs)
    jobs[0] = replace(jobs[0], provenance={**jobs[0].provenance, "user_class": "low"})
    jobs[1] = replace(jobs[1], provenance={**jobs[1].provenance, "user_class": "high"})
    inst = replace(inst, jobs=tuple(jobs))
    policy = StudyPriority(get_controller("no-stop"), study, cap=4, size=4, seed=0)
    schedule = simulate(inst, policy)
    assert validate(inst, schedule).ok
    assert not (schedule.stats or {}).get("preemption")
    y = schedule.allocations.workers_per_job_slot(inst.I, inst.horizon)
    assert y[1, :schedule.completion[0] + 1].sum() == 0  # the trial waits for the job's servers


def test_priority_studies_are_deterministic():
    a = _study_in_priority(ElasticThesisController(min_completed=3), 8)[1]
    b = _study_in_priority(ElasticThesisController(min_completed=3), 8)[1]
    assert list(a.schedule.allocations.rows()) == list(b.schedule.allocations.rows())
    assert a.trials == b.trials and a.stats["trial_stops"] == b.stats["trial_stops"]


def test_a_trial_is_sized_at_its_start_and_at_its_rungs_only():
    """Catches: sizes re-planned every slot (each change is a resize that loses work in the
    cluster): a trial keeps its size while room grows, and is sized again only once judged."""
    from oasis_opt.automl.predict import Prediction
    from oasis_opt.automl.replay import TrialInfo

    c = ElasticThesisController(base=2, max_units=4)
    c.reset([TrialInfo(t, {"lr": 0.1}, 40) for t in range(10)], 12, 0)
    starts, units = c.plan({}, 8, 0.0)
    assert starts == [0, 1, 2, 3] and units == {0: 2, 1: 2, 2: 2, 3: 2}
    # trial 0 turns promising, but nobody judged it at a rung yet: sizes kept, room -> new trials
    c.best, c.cls[0] = 0.9, PROMISING
    c.pred[0] = Prediction(0.95, 0.01, 100.0, 1.0, "regression")
    c.values[0], c.seconds[0] = [0.5] * 4, [1.0] * 4
    starts, units = c.plan(units, 12, 1.0)
    assert starts == [4, 5] and all(units[t] == 2 for t in range(6))
    # judged at its rung: sized again from the room the others leave (14 - 5 x 2 = 4): the
    # promising trial grows to 4
    c.due.add(0)
    starts, units = c.plan(units, 14, 2.0)
    assert starts == [] and units[0] == 4 and sum(units.values()) == 14
    # trial 1 judged uncertain: shrinks to 1, the worker it gives back starts trial 6
    c.due.add(1)
    c.cls[1] = UNCERTAIN
    starts, units = c.plan(units, 14, 3.0)
    assert units[1] == 1 and units[0] == 4 and starts == [6] and units[6] == 1
    assert sum(units.values()) == 14
