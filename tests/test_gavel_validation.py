"""Our Gavel policies against Gavel's own simulator on the validation traces (issue #34).

Gavel's numbers (``data/traces/gavel/validation``) come from its unmodified simulator on traces
its generator made (sizes 120-200 jobs, three cluster mixes). Each LP policy of ours must land
within 5 % of Gavel's average JCT and makespan on every trace, and its per-job JCTs must track
Gavel's (Pearson r). Gavel's FIFO (the last test) is held on both too, and per job.
"""
from __future__ import annotations

import csv

import numpy as np
import pytest

from oasis_opt.model import validate
from oasis_opt.policies import solve
from oasis_opt.sim.metrics import job_jcts, jct_metrics
from oasis_opt.workloads.gavel import gavel_files, gavel_instance, gavel_validation

TOLERANCE = 0.05
POLICIES = {"gavel-las": "max_min_fairness_perf", "gavel-ftf": "finish_time_fairness_perf",
            "gavel-makespan": "min_total_duration_perf", "max-min-fairness": "max_min_fairness"}
TRACES = gavel_validation()


def _gavel(trace: dict, policy: str) -> tuple[dict[str, float], dict[int, float]]:
    with open(trace["results"]) as f:
        row = next(r for r in csv.DictReader(f)
                   if r["trace"] == trace["name"] and r["policy"] == policy)
    with open(trace["jcts"]) as f:
        jcts = {int(r["job"]): float(r["jct_s"]) for r in csv.DictReader(f)
                if r["trace"] == trace["name"] and r["policy"] == policy}
    return {k: float(row[k]) for k in ("avg_jct_s", "makespan_s")}, jcts


@pytest.fixture(scope="module")
def instances():
    thr = gavel_files()["throughputs"]
    return {t["name"]: gavel_instance(t["trace"], thr, cluster=str(t["cluster"])) for t in TRACES}


def test_validation_set_is_complete():
    """Every trace has Gavel's result and per-job JCTs for every policy held here, and the
    cluster mixes differ (a set of one mix could not catch a type-order or mix bug)."""
    assert len(TRACES) >= 4
    assert len({t["cluster"] for t in TRACES}) >= 3
    for t in TRACES:
        for policy in POLICIES.values():
            ref, jcts = _gavel(t, policy)
            assert ref["avg_jct_s"] > 0 and len(jcts) >= int(str(t["num_jobs"])) - 3


@pytest.mark.parametrize("trace", TRACES, ids=[str(t["name"]) for t in TRACES])
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_policy_within_five_percent_of_gavel(instances, trace, policy):
    """Catches a policy modelled differently from Gavel's source: FTF with a water-filled
    isolated share or elapsed time in its denominator ran 9 % below Gavel on v120-888, and the
    type-blind max-min on HiGHS's interior point 6-7 % above on v120-v100heavy."""
    inst = instances[trace["name"]]
    sched = solve(inst, policy)
    assert validate(inst, sched).ok
    m = jct_metrics(inst, sched)
    ref, jcts = _gavel(trace, POLICIES[policy])
    assert m["avg_jct_s"] == pytest.approx(ref["avg_jct_s"], rel=TOLERANCE)
    assert m["makespan_s"] == pytest.approx(ref["makespan_s"], rel=TOLERANCE)
    ours = job_jcts(inst, sched)
    both = sorted(jcts)
    r = np.corrcoef([jcts[j] for j in both], ours[both])[0, 1]
    # per-job JCTs track Gavel's; gavel-makespan's least: Gavel keeps *any* point of "all done by
    # M", so which job finishes when is not pinned (r 0.76-0.85 there, >= 0.9 elsewhere)
    assert r >= (0.7 if policy == "gavel-makespan" else 0.9)


@pytest.mark.parametrize("trace", TRACES, ids=[str(t["name"]) for t in TRACES])
def test_gavel_fifo_within_five_percent_of_gavel(instances, trace):
    """Gavel's FIFO (``variant=gavel``) on average JCT *and* makespan, and per job. Its makespan
    rides on the random type it closes when a type fills up: with another generator's draws
    (numpy's, the earlier version) it was off by 27-67 % on v120-888, v120-v100heavy,
    v120-k80heavy and v200-121212, and with Gavel's generator but seed 0 instead of its 11 by
    67 % on v200-121212. Gavel's steps matter too: a job that needs one more, nearly empty
    round there than our work units say must keep its type and GPUs for it (without that the
    makespan is 25-74 % off on three traces even with Gavel's draws), and so do its deficits,
    summed over the jobs it knows (a late job starting with the credits of the computations
    before its arrival: 14 % and 47 % off on v120-k80heavy and v120-888). The textbook FIFO (``variant=textbook``,
    strict head-of-line on the fastest type) lands 23 % and 10 % below Gavel on
    v120-v100heavy and v200-121212 average JCT: the over-commit and the type rule are held."""
    inst = instances[trace["name"]]
    sched = solve(inst, "gavel-fifo", variant="gavel")
    assert validate(inst, sched).ok
    ref, jcts = _gavel(trace, "fifo")
    m = jct_metrics(inst, sched)
    assert m["avg_jct_s"] == pytest.approx(ref["avg_jct_s"], rel=TOLERANCE)
    assert m["makespan_s"] == pytest.approx(ref["makespan_s"], rel=TOLERANCE)
    ours = job_jcts(inst, sched)
    both = sorted(jcts)
    diff = np.abs(ours[both] - np.array([jcts[j] for j in both]))
    # per job within 2 rounds (a job that Gavel ends in one more, nearly empty round ends
    # here at the end of the slot before), and most within a round
    assert diff.max() <= 2 * 360 + 10 and np.median(diff) <= 360
