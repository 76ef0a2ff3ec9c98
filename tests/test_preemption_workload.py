"""Preemption costs from the cost model, the Philly workload with priority classes, the metrics
(chain lengths, lost GPU-time, per class) and ``oasis-opt reproduce preemption`` end to end."""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from oasis_opt import solve, validate
from oasis_opt.costmodel.preemption import (CONTAINER_START_S, checkpoint_mb, job_costs,
                                            preemption_costs, restart_share, transfer_seconds,
                                            write_slots)
from oasis_opt.model import Allocations, Schedule
from oasis_opt.sim.preemption import (chain_lengths, chain_lengths_and_links, chain_summary,
                                      preemption_metrics)
from oasis_opt.workloads.priority import job_type_of, priority_instance


# ---- costs ---------------------------------------------------------------------------------------
def test_costs_follow_model_size_and_storage_bandwidth():
    """BERT (440 MB): checkpoint 3 x 440 MB = 1320 MB, written in 1320 x 8 / 1000 = 10.56 s at
    1 Gbps; Young's interval sqrt(2 x 10.56 x 604800) = 3574 s: 6 slots of 600 s, 1 of 3600 s;
    restart (60 + 10.56) / 600 slots; a promotion's checkpoint write 10.56 / 600 slots."""
    inst = priority_instance(1.0, 0, max_jobs=30)
    job = next(j for j in inst.jobs if j.provenance["model"] == "bert")
    assert checkpoint_mb(job) == pytest.approx(1320.0)
    assert transfer_seconds(1320.0) == pytest.approx(10.56)
    c, rho = job_costs(job)
    assert c == round(math.sqrt(2 * 10.56 * 7 * 24 * 3600) / 600) == 6
    assert rho == pytest.approx((CONTAINER_START_S + 10.56) / 600)
    assert write_slots(job) == pytest.approx(10.56 / 600)
    hour = replace(job, provenance={**job.provenance, "slot_s": 3600.0})
    assert job_costs(hour)[0] == 1


def test_meta_overrides_and_their_errors():
    inst = priority_instance(1.0, 0, max_jobs=5)
    costs = preemption_costs(replace(inst, meta={"preemption": {"checkpoint_slots": 4,
                                                                "restart_slots": 2.5,
                                                                "write_slots": 0.25}}))
    assert costs.checkpoint_slots.tolist() == [4] * 5 and costs.restart_slots.tolist() == [2.5] * 5
    assert costs.write_slots.tolist() == [0.25] * 5
    for bad, match in (({"checkpoint_slots": 0}, "checkpoint_slots"),
                       ({"restart_slots": -1}, "restart_slots"),
                       ({"write_slots": float("nan")}, "write_slots"), ({"x": 1}, "preemption.x")):
        with pytest.raises(ValueError, match=match):
            preemption_costs(replace(inst, meta={"preemption": bad}))


@pytest.mark.parametrize("n, rho, share", [(0, 0.0, 1.0), (0, 0.25, 0.75), (0, 1.5, 0.0),
                                           (1, 1.5, 0.5), (2, 1.5, 1.0)])
def test_restart_share(n, rho, share):
    assert restart_share(n, rho) == pytest.approx(share)


# ---- the workload -------------------------------------------------------------------------------
def test_job_types_by_shape():
    assert job_type_of(1, 600) == "automl"
    assert job_type_of(1, 3600) == "dev"
    assert job_type_of(2, 600) == "prod-train" and job_type_of(1, 5 * 3600) == "prod-train"


def test_the_workload_is_seeded_typed_and_scaled_by_load():
    a, b = priority_instance(1.0, 3, max_jobs=50), priority_instance(1.0, 3, max_jobs=50)
    assert a.fingerprint == b.fingerprint
    assert a.typed and set(a.types) == {"p100", "cpu"}
    assert all(set(j.types) == {"p100", "cpu"} for j in a.jobs)
    # CPU 10-50x slower than a V100, the P100 slower than a V100: CPU/P100 within 1/50 .. 1/5
    ratio = a.type_speed[:, a.types.index("cpu")] / a.type_speed[:, a.types.index("p100")]
    assert ((ratio > 1 / 55) & (ratio < 1 / 5)).all()
    classes = Counter(j.provenance["user_class"] for j in a.jobs)
    assert set(classes) == {"high", "mid", "low"}
    fast = priority_instance(2.0, 3, max_jobs=50)
    assert [j.id for j in fast.jobs] == [j.id for j in a.jobs]
    assert (fast.arrival <= a.arrival).all() and fast.arrival.max() < a.arrival.max()
    with pytest.raises(ValueError, match="load"):
        priority_instance(0.0, 0)


# ---- metrics ------------------------------------------------------------------------------------
def _with_events(inst, events):
    """A schedule whose only content is a preemption record (for chain_lengths)."""
    n = inst.I
    return Schedule("x", (True,) * n, Allocations.empty(), (None,) * n, (0.0,) * n, 0.0,
                    {"preemption": {"events": events}})


def test_chain_lengths_count_downstream_preemptions():
    """a preempts b (1); b later preempts c (2), c later preempts d (3): lengths 3, 2, 1. A
    preemption of d by a is a chain of its own (d preempts nobody later): 1. In chains longer
    than 1: the first three (the third has an ancestor), not the fourth: share 3/4; a suspend
    counts as a stop."""
    inst = priority_instance(1.0, 0, max_jobs=5)
    a, b, c, d, _ = (j.id for j in inst.jobs)
    ev = [[b, 3, "preempt", a], [c, 5, "degrade", b], [d, 8, "suspend", c], [d, 12, "preempt", a],
          [a, 20, "preempt", None]]
    sched = _with_events(inst, ev)
    assert chain_lengths(inst, sched) == [3, 2, 1, 1]
    lengths, links = chain_lengths_and_links(inst, sched)
    assert links == [True, True, True, False]
    summary = chain_summary(lengths, links)
    assert summary["share_in_chains"] == 0.75 and summary["max"] == 3
    assert summary["mean"] == pytest.approx(7 / 4)
    assert chain_summary([], [])["share_in_chains"] == 0.0


def test_metrics_on_a_run():
    inst = priority_instance(4.0, 0, max_jobs=60)
    s = solve(inst, "priority-kill", cap=0.5, delta=0.0)
    assert validate(inst, s).ok
    m = preemption_metrics(inst, s, 600.0)
    assert sum(c["jobs"] for c in m["per_class"].values()) == inst.I
    assert m["completed"] == sum(c["completed"] for c in m["per_class"].values())
    assert m["useful_gpu_hours"] == pytest.approx(m["gpu_hours"] - m["lost_gpu_hours"])
    assert 0 < m["gpu_utilisation"] <= 1
    assert m["stops"]["preemptions"] == sum(s.stats["preemption"]["jobs"]["preemptions"]) > 0
    assert m["lost_gpu_hours"] > 0
    for c in m["per_class"].values():
        if c["completed"] > 1:
            assert c["jct_p50_h"] <= c["jct_p95_h"]
        # over all jobs: an unfinished job counts at the horizon, so never below the completed'
        assert c["unfinished"] == c["jobs"] - c["completed"]
        assert c["jct_all_mean_h"] >= (c["jct_mean_h"] or 0) - 1e-9 or c["unfinished"] == 0
        assert c["slowdown_mean"] >= 1.0 - 1e-9
    hours = inst.horizon * 600.0 / 3600.0
    assert m["per_hour"]["preemptions"] == pytest.approx(m["stops"]["preemptions"] / hours)
    none = solve(inst, "priority-nopreempt")
    mn = preemption_metrics(inst, none, 600.0)
    assert mn["lost_gpu_hours"] == 0 and mn["chain_lengths"] == []


def _stopped_once(last_slot: int, lost_work: float) -> tuple:
    """The instance of ``test_cluster_priority.two_jobs_one_server`` (checkpoints every 3 slots,
    restarts of 0.5 slots) and a schedule written by hand: "low" on the V100 server in slots 1-2
    and 5..``last_slot``, preempted by "high" (slots 3-4) in slot 3, completing in
    ``last_slot``; its counters claim ``lost_work``."""
    from test_cluster_priority import two_jobs_one_server

    from oasis_opt.model import PS, WORKER

    inst = two_jobs_one_server(3)
    v0, p0 = inst.server_index["v0"], inst.server_index["p0"]
    low = [1, 2, *range(5, last_slot + 1)]
    rows = [(j, t, server, role, 1) for j, slots in ((0, low), (1, [3, 4])) for t in slots
            for server, role in ((v0, WORKER), (p0, PS))]
    completion = (last_slot, 4)
    utility = tuple(inst.utility_of(i, c) for i, c in enumerate(completion))
    counters = {"preemptions": [1, 0], "degradations": [0, 0], "promotions": [0, 0],
                "resizes": [0, 0], "lost_work": [lost_work, 0.0], "restart_slots": [1, 0]}
    stats = {"preemption": {"events": [["low", 3, "preempt", "high"]], "jobs": counters}}
    return inst, Schedule("hand", (True, True), Allocations.from_rows(rows), completion, utility,
                          float(sum(utility)), stats)


def test_lost_work_by_hand_in_the_validator_and_the_metrics():
    """"low" (10 units a slot on the V100, W = 80) runs in slots 1-2 and is preempted in slot 3
    with no checkpoint yet (2 < 3 slots): it loses 10 + 10 = 20 units. Slot 5 is its restart
    (rho = 0.5): floor(10 x 0.5) = 5 credited, 5 withheld; 5 + 10 k >= 80 at k = 8: slots 6..13,
    completion 13. The validator accepts that schedule, and rejects both the same counters with
    lost_work 0 and the runs ending in slot 11, which 20 + 5 + 60 = 85 >= 80 would allow if
    nothing were lost. The metrics: (20 lost + 5 withheld) units x 4 GPUs / 10 units a worker-slot
    = 10 GPU-hours in 1-hour slots. A ledger that loses no work at a stop fails here."""
    inst, good = _stopped_once(13, 20.0)
    report = validate(inst, good)
    assert report.ok, str(report)
    claims_nothing_lost = _stopped_once(13, 0.0)[1]
    assert validate(inst, claims_nothing_lost).rules() == {"lost-work"}
    inst, early = _stopped_once(11, 20.0)  # 20 - 20 + 5 + 6 x 10 = 65 units: not complete
    assert [(v.rule, v.job, v.message) for v in validate(inst, early).violations] == [
        ("lost-work", "low", "completed with 65 work units < 80 needed")]
    m = preemption_metrics(inst, good, 3600.0)
    assert m["lost_gpu_hours"] == pytest.approx(10.0)
    # held: "low" 2 + 9 slots and "high" 2 slots of one 4-GPU worker = 52 GPU-hours
    assert m["gpu_hours"] == pytest.approx(52.0)
    assert m["useful_gpu_hours"] == pytest.approx(42.0)


# ---- reproduce preemption -----------------------------------------------------------------------
def test_reproduce_preemption_draws_and_resumes(tmp_path, monkeypatch):
    """The quick study end to end (every policy, one seed, 30 jobs); the figure (issue #31):
    a legend naming every policy on every panel, linear axes (a symlog axis hid the zero bars),
    the Tiresias caveat, no clipped title; stored runs reused."""
    from oasis_opt.experiments import preemption as exp
    from oasis_opt.experiments.figures import common
    from oasis_opt.experiments.figures import preemption as figure
    from oasis_opt.experiments.reproduce import figure_names, reproduce

    monkeypatch.setattr(exp, "QUICK", {**exp.QUICK, "seeds": (0,), "max_jobs": 30})
    n = len(exp.POLICIES)
    seen = []
    real = common.save

    def recording(fig, out_dir, stem):
        for ax in fig.axes:
            legend = ax.get_legend()
            assert legend is not None, ax.get_ylabel()
            assert [t.get_text() for t in legend.get_texts()] == list(exp.POLICIES)
            assert ax.get_yscale() == "linear"
        seen.append(" ".join(ax.get_title() for ax in fig.axes))
        assert common.clipped_titles(fig) == []
        return real(fig, out_dir, stem)

    monkeypatch.setattr(figure, "save", recording)
    assert figure_names(["preemption"]) == ["preemption"]
    results, out = tmp_path / "results", tmp_path / "figs"
    written = reproduce(["preemption"], quick=True, workers=1, results=results, out=out)
    assert sorted(p.name for p in written["preemption"]) == ["preemption.md", "preemption.pdf",
                                                             "preemption.png"]
    assert len(seen) == 1 and "Tiresias" in seen[0]
    text = (out / "preemption.md").read_text()
    for head in ("## Per class, over all jobs", "## Overall", "## Chain lengths",
                 "**The claims", "**The defaults**", "**Where a baseline wins.**",
                 "**The band rule.**"):
        assert head in text
    assert "passed `oasis_opt.validate`: yes" in text
    stored = sorted(p.name for p in (results / "preemption").glob("*.json"))
    assert len(stored) == n and "priority-degrade-sat1.5-s0-n30.json" in stored
    again = exp.compute(quick=True, results=results, progress=False)
    assert again["computed"] == 0 and len(again["runs"]) == n
    assert np.isfinite([r["gpu_hours"] for r in again["runs"].values()]).all()


def test_the_paper_sim_variant_runs_valid():
    """paper-sim with a CPU type: its utility classes are the user classes (README)."""
    from oasis_opt.cluster.priority import user_class
    from oasis_opt.workloads import generate

    inst = generate("paper-sim", seed=2, jobs=20, horizon=40, servers=4,
                    cluster_mix="v100=3:cpu=1")
    assert "cpu" in inst.types
    assert {user_class(j) for j in inst.jobs} <= {"high", "mid", "low"}
    for policy in ("priority-degrade", "priority-kill", "priority-nopreempt"):
        assert validate(inst, solve(inst, policy, cap=1.0, delta=0.0)).ok


# ---- the chain workload and the presets ---------------------------------------------------------
def test_the_chain_workload_is_seeded_saturated_and_in_waves():
    """Arrivals scaled so that offered GPU-time / (span x 32 GPUs) = saturation (so twice the
    saturation halves the arrival span); 80 % of each wave's jobs are of the wave's class (low,
    mid, high thirds of 3-hour periods), far above the base mix; the same seed, the same
    instance; reachable as the philly-chains preset."""
    from oasis_opt.workloads import generate
    from oasis_opt.workloads.priority import WAVE_ORDER, chain_instance

    a = chain_instance(2, max_jobs=120)
    assert a.fingerprint == chain_instance(2, max_jobs=120).fingerprint
    assert a.fingerprint == generate("philly-chains", seed=2, jobs=120).fingerprint
    assert a.meta["saturation"] == 1.5 and a.meta["generator"] == "philly-chains"
    fast = chain_instance(2, max_jobs=120, saturation=3.0)
    assert fast.meta["load"] == pytest.approx(2 * a.meta["load"])
    in_wave = []
    for j in a.jobs:  # arrival slots of 10 minutes from slot 1
        phase = (((j.arrival - 1) * 600.0 / 3600.0) % 3.0) / 3.0
        in_wave.append(j.provenance["user_class"] == WAVE_ORDER[min(int(phase * 3), 2)])
    assert np.mean(in_wave) > 0.7  # slots round arrivals down: a few jobs change third
    other = chain_instance(2, max_jobs=120, wave_share=0.0)
    assert np.mean([j.provenance["user_class"] == k.provenance["user_class"]
                    for j, k in zip(a.jobs, other.jobs)]) < 0.8
    for bad, match in (({"saturation": 0}, "saturation"), ({"wave_share": 2}, "wave_share")):
        with pytest.raises(ValueError, match=match):
            chain_instance(0, max_jobs=10, **bad)
    p = generate("philly-priority", seed=3, jobs=50)
    assert p.fingerprint == priority_instance(1.0, 3, max_jobs=50).fingerprint


def test_summary_shows_the_preemption_record():
    """oasis-opt summary's table: stops, degradations, promotions, lost work, restarts and chain
    length from stats.preemption (the counters summed); none for a schedule without a record."""
    from oasis_opt.sim.metrics import compare
    from oasis_opt.workloads.priority import chain_instance

    inst = chain_instance(0, max_jobs=60, saturation=3.0)
    kill, none = solve(inst, "priority-kill"), solve(inst, "priority-nopreempt")
    table = compare(inst, [kill, none], ["kill", "none"])
    pre = table.rows[0]["preemption"]
    counters = kill.stats["preemption"]["jobs"]
    assert pre["preemptions"] == sum(counters["preemptions"]) > 0
    assert pre["lost_work"] == pytest.approx(sum(counters["lost_work"]))
    assert pre["chains"]["mean"] >= 1.0
    assert table.rows[1]["preemption"] is None
    text = str(table)
    for head in ("stops", "degraded", "lost work", "chain mean", "chain max"):
        assert head in text.splitlines()[0]


def test_the_failing_claims_are_explained_from_the_runs():
    """The page's explanations of the lost-GPU-hours and utilisation claims are sums and means of
    the stored runs (two seeds, made-up numbers), not fixed prose: degrade 3 + 2 stops, 2 + 1 of
    them losing work (60 %), 2 + 1 GPU-h lost at stops and 0.2 + 0.3 by restarts; kill 6 + 4
    stops, 1 + 1 losing (20 %), 1 + 1 and 0.5 + 0.5; so degradation stops less often but more of
    its stops lose work (80 % of killing's stops hit a checkpoint, 40 % of degradation's).
    Held GPU-h: degrade 100, 102 against 104, 104 (-3 a run), its CPU-mode work 4 a run: the
    gap is work done on CPU; work done (useful + CPU mode) 99 + 4, 101 + 4 against 104, 104.
    Caught: a fixed text, sums over the wrong policy, the CPU-mode work left out."""
    from oasis_opt.experiments import preemption as exp
    from oasis_opt.experiments.figures.preemption import lost_why, utilisation_why

    s = {"policies": ("priority-degrade", "priority-kill", "priority-nopreempt"),
         "loads": (1.0,), "seeds": (0, 1), "max_jobs": 5}

    def run(stops, losing, at_stops, restarts, held, useful, cpu, kind="preemptions"):
        other = "degradations" if kind == "preemptions" else "preemptions"
        return {"stops": {kind: stops, other: 0, "promotions": 0}, "stops_losing_work": losing,
                "lost_gpu_hours_at_stops": at_stops, "lost_gpu_hours_restarts": restarts,
                "gpu_hours": held, "useful_gpu_hours": useful, "cpu_work_gpu_hours": cpu}

    rows = {"priority-degrade": [run(3, 2, 2.0, 0.2, 100.0, 99.0, 4.0, "degradations"),
                                 run(2, 1, 1.0, 0.3, 102.0, 101.0, 4.0, "degradations")],
            "priority-kill": [run(6, 1, 1.0, 0.5, 104.0, 103.0, 0.0),
                              run(4, 1, 1.0, 0.5, 104.0, 103.0, 0.0)],
            "priority-nopreempt": [run(0, 0, 0.0, 0.0, 104.0, 104.0, 0.0)] * 2}
    data = {"settings": s, "runs": {exp.key(p, 1.0, seed, 5): r[seed]
                                    for p, r in rows.items() for seed in (0, 1)}}
    assert lost_why(data, [1.0]) == (
        "saturation 1, over the seeds: priority-degrade 5 stops, 60 % of them losing work, "
        "3.00 GPU-h lost at the stops and 0.50 withheld by restarts; priority-kill 10 stops, "
        "20 %, 2.00 and 1.00: degradation stops less often and restarts more cheaply, but more "
        "of the jobs it stops carry unsaved work (80 % of killing's stops hit a job at its "
        "checkpoint, 40 % of degradation's)")
    text = utilisation_why(data, [1.0])
    assert text.startswith("saturation 1: GPU-hours held, degrade - nopreempt, -3.00 [")
    assert "victims do 4.00 GPU-h of their work in CPU mode" in text
    assert "degrade - nopreempt, 0.00 [" in text
    assert text.endswith("not work left undone")
