"""OASiS with an online floor (``online.adaptive``, policy ``oasis-adaptive``; issue #29).

Held to the invariants of its docstring: with one floor it is OASiS, plan for plan; every
admitted plan paid at the prices it saw; the floor for job k is the leader of plain OASiS runs
(a second implementation: one ``OasisPolicy`` per floor, run on its own) over jobs 1..k-1; cut
after job k, an instance gets the same first k decisions; after any switch the prices are eq.
(22) of the committed amounts at the floor in force; a cancellation leaves every score.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from oasis_opt.model.numerics import payoff_positive
from oasis_opt.model.validate import assert_valid
from oasis_opt.online import OasisPolicy
from oasis_opt.online.adaptive import AdaptiveOasisPolicy
from oasis_opt.online.estimate import history_u, pricing_document
from oasis_opt.policies import get_policy
from oasis_opt.sim.core import SlotLoop
from oasis_opt.testing import instances
from oasis_opt.workloads import paper_fig5

GRID = (1e-5, 1e-4, 1e-3, 1e-2, 3e-2, 1e-1)


def _pricing(servers: int = 6) -> dict:
    """U from paper-fig5 history instances (seeds 1000-1009), L 1e-3."""
    return pricing_document(history_u(paper_fig5(s, servers=servers) for s in range(1000, 1010)),
                            1e-3)


def _order(inst) -> list[int]:
    """The order OASiS decides jobs in: arrival slot, then instance order."""
    return sorted(range(inst.I), key=lambda i: (int(inst.arrival[i]), i))


def _leaders(inst, pricing: dict, grid, start: int, prior=None, weight: float = 1.0) -> list[int]:
    """The floor index each job should be decided at, from plain OASiS runs, one per floor;
    with ``prior`` = (m_g, n), the k-th decision (k from 0) adds w * m_g * max(0, 1 - k/n)."""
    runs = [OasisPolicy(pricing={**pricing, "L_worker": L, "L_ps": L}).solve(inst) for L in grid]
    scores = np.zeros(len(grid))
    current, out = start, [0] * inst.I
    for k, i in enumerate(_order(inst)):
        total = scores.copy()
        if prior is not None:
            mean, n = prior
            total = total + weight * max(0.0, 1.0 - k / n) * np.asarray(mean, dtype=float)
        best = np.flatnonzero(total == total.max())
        current = current if current in best else int(best[0])
        out[i] = current
        for g, sched in enumerate(runs):
            if sched.admitted[i]:
                scores[g] += sched.utility[i]
    return out


@pytest.mark.parametrize("seed", [500, 502, 506, 508])
def test_the_floor_is_the_leader_of_plain_oasis_runs(seed):
    """Catches a shadow that scores a job before the real decision (look-ahead), a score from
    the wrong utility, ties broken away from the current floor, and a switch that does not
    reprice (the final prices are checked against eq. (22) of the committed amounts)."""
    inst = paper_fig5(seed, servers=6)
    pricing = _pricing()
    policy = AdaptiveOasisPolicy(pricing=pricing, grid=GRID)
    sched = policy.solve(inst)
    assert_valid(inst, sched)
    ad = sched.stats["adaptive"]
    assert ad["start_floor"] == 1e-3
    expected = _leaders(inst, pricing, GRID, GRID.index(1e-3))
    assert ad["job_floor"] == [GRID[g] for g in expected]
    assert ad["switches"] == sum(1 for a, b in zip([2] + [expected[i] for i in _order(inst)],
                                                   [expected[i] for i in _order(inst)]) if a != b)
    final = policy.pricing
    assert final is not None
    np.testing.assert_array_equal(policy.worker_price,
                                  final.worker_prices(policy.worker_used, inst.worker_capacity))
    np.testing.assert_array_equal(policy.ps_price,
                                  final.ps_prices(policy.ps_used, inst.ps_capacity))


def test_some_instance_switches_floor():
    """The cases above must exercise switches, or the repricing check proves nothing."""
    switches = [AdaptiveOasisPolicy(pricing=_pricing(), grid=GRID).solve(
        paper_fig5(s, servers=6)).stats["adaptive"]["switches"] for s in (500, 502, 506, 508)]
    assert sum(n >= 1 for n in switches) >= 3 and max(switches) >= 2


def test_one_floor_is_oasis_plan_for_plan():
    inst = paper_fig5(501, servers=6)
    doc = {**_pricing(), "L_worker": 1e-2, "L_ps": 1e-2}
    a = AdaptiveOasisPolicy(pricing=doc, grid=(1e-2,)).solve(inst)
    b = OasisPolicy(pricing=doc).solve(inst)
    assert a.admitted == b.admitted and a.completion == b.completion
    assert a.total_utility == b.total_utility
    for col in ("job", "slot", "server", "role", "count"):
        np.testing.assert_array_equal(getattr(a.allocations, col), getattr(b.allocations, col))
    assert a.stats["adaptive"]["switches"] == 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=instances(max_jobs=5), cut=st.integers(1, 5), scale=st.sampled_from([1e-6, 1e-3]))
def test_invariants_on_random_instances(inst, cut, scale):
    """Every admitted plan had payoff > 0 at the prices it saw; the first ``cut`` decisions are
    those of the instance cut after them (no look-ahead); the schedule is valid."""
    assume(inst.I >= 1)
    u = history_u([inst])
    lowest = min(v for pool in u.values() for v in pool.values())
    grid = (lowest * scale, lowest * 1e-2, lowest)
    doc = pricing_document(u, lowest * 1e-2)
    policy = AdaptiveOasisPolicy(pricing=doc, grid=grid)
    sched = policy.solve(inst)
    assert_valid(inst, sched)
    for i in range(inst.I):
        if sched.admitted[i]:
            assert sched.stats["job_payoff"][i] is not None and sched.stats["job_payoff"][i] > 0
    order = _order(inst)
    keep = sorted(order[:min(cut, inst.I)])
    short = inst.with_jobs([inst.jobs[i] for i in keep])
    cut_sched = AdaptiveOasisPolicy(pricing=doc, grid=grid).solve(short)
    assert list(cut_sched.admitted) == [sched.admitted[i] for i in keep]
    assert cut_sched.stats["adaptive"]["job_floor"] == [
        sched.stats["adaptive"]["job_floor"][i] for i in keep]
    assert list(cut_sched.completion) == [sched.completion[i] for i in keep]


def test_payoff_rule_is_oasis_rule():
    """The admitted plans pass ``payoff_positive`` against their cost, not just payoff > 0."""
    inst = paper_fig5(502, servers=6)
    policy = AdaptiveOasisPolicy(pricing=_pricing(), grid=GRID)
    sched = policy.solve(inst)
    for i in range(inst.I):
        p = sched.stats["job_payoff"][i]
        if sched.admitted[i]:
            assert p is not None and payoff_positive(p, 0.0)


def test_a_cancelled_job_leaves_every_score():
    """Hand check: the shadows that had admitted the job lose exactly its planned utility, and
    release its slots from the cancellation on."""
    inst = paper_fig5(502, servers=6)
    policy = AdaptiveOasisPolicy(pricing=_pricing(), grid=GRID)
    loop = SlotLoop(inst, policy)

    def running() -> list[int]:
        """Admitted by the real policy and some shadow, not completed, planned past now."""
        t = loop.state.t
        return [i for i in range(inst.I) if loop.state.admitted[i]
                and loop.state.completion[i] < 0
                and any(s.parts_by_job.get(i) and s.planned[i] > t + 1 for s in policy.shadows)]

    while not running():
        loop.step()
    job = running()[0]
    before = policy.scores.copy()
    a = int(inst.arrival[job])
    had = [g for g, s in enumerate(policy.shadows) if s.parts_by_job.get(job)]
    loop.cancel(job)
    for g in range(len(GRID)):
        lost = float(inst.jobs[job].utility(policy.shadows[g].planned[job] - a)) if g in had else 0
        assert policy.scores[g] == pytest.approx(before[g] - lost, abs=1e-12)
        assert all(t <= loop.state.t for t, *_ in policy.shadows[g].plan(job) or [])


def test_bad_options_are_refused_by_name():
    with pytest.raises(ValueError, match="pricing: oasis-adaptive needs a pricing file"):
        AdaptiveOasisPolicy().solve(paper_fig5(500, servers=3))  # constructible, never run
    with pytest.raises(ValueError, match="not 'oracle'"):
        AdaptiveOasisPolicy(pricing="oracle")
    with pytest.raises(ValueError, match=r"grid\[1\]: "):
        AdaptiveOasisPolicy(pricing=_pricing(), grid=(1e-3, 1e9))
    with pytest.raises(ValueError, match="grid"):
        AdaptiveOasisPolicy(pricing=_pricing(), grid=())


def test_registered_and_solved_through_the_registry():
    inst = paper_fig5(500, servers=3)
    pricing = pricing_document(history_u(paper_fig5(s, servers=3) for s in range(1000, 1010)),
                               1e-3)
    sched = get_policy("oasis-adaptive", pricing=pricing, grid=[1e-4, 1e-3]).solve(inst)
    assert_valid(inst, sched)
    assert sched.stats["adaptive"]["grid"] == [1e-4, 1e-3]


def test_the_solve_line_names_the_pricing_file(tmp_path, capsys):
    """The result says which file priced the run (it said "dict": the floors' documents are
    built from the file's U)."""
    from oasis_opt.cli import main
    from oasis_opt.model.io import save_instance
    from oasis_opt.online import save_pricing

    inst, pricing = tmp_path / "i.json", tmp_path / "p.json"
    save_instance(paper_fig5(500, servers=6), inst)
    save_pricing(_pricing(), pricing)
    assert main(["solve", str(inst), "--policy", "oasis-adaptive", "--pricing", str(pricing),
                 "--option", "grid=[0.001, 0.01]", "--out", str(tmp_path / "r.json")]) == 0
    assert f"; pricing: the file {pricing} -> " in capsys.readouterr().out


# -- the prior from the history (``prior=``) ------------------------------------------------

def _calibrated(servers: int = 6):
    """``estimate_pricing`` on paper-fig5 history seeds 1000-1009 over GRID."""
    from oasis_opt.online.estimate import estimate_pricing

    return estimate_pricing([paper_fig5(s, servers=servers) for s in range(1000, 1010)], GRID)


def test_the_calibration_records_the_history_job_counts():
    """The prior needs n; a calibration that forgot the job counts (or counted jobs of the
    wrong instances) would fade the prior at the wrong time."""
    est = _calibrated()
    hist = [paper_fig5(s, servers=6) for s in range(1000, 1010)]
    assert est.calibration.jobs == tuple(h.I for h in hist)
    prior = est.calibration.prior()
    assert prior["history_jobs"] == pytest.approx(np.mean([h.I for h in hist]))
    assert prior["mean_utility"] == list(est.calibration.mean)
    assert est.calibration.to_dict()["history_jobs"] == [h.I for h in hist]


@pytest.mark.parametrize("seed", [500, 506])
def test_with_a_prior_the_floor_is_the_leader_of_score_plus_prior(seed):
    """Second implementation of the prior-weighted leader (``_leaders`` with the prior):
    catches a prior that does not fade with k, fades with the instance's own job count (look-
    ahead), or is added with the wrong weight."""
    inst = paper_fig5(seed, servers=6)
    est = _calibrated()
    prior = est.calibration.prior()
    for weight in (1.0, 0.25):
        policy = AdaptiveOasisPolicy(pricing=dict(est), grid=GRID, prior=est.calibration,
                                     prior_weight=weight)
        sched = policy.solve(inst)
        assert_valid(inst, sched)
        expected = _leaders(inst, dict(est), GRID, GRID.index(est.calibration.chosen),
                            prior=(prior["mean_utility"], prior["history_jobs"]), weight=weight)
        assert sched.stats["adaptive"]["job_floor"] == [GRID[g] for g in expected]
        assert sched.stats["adaptive"]["prior"]["weight"] == weight


def test_a_strong_prior_holds_its_floor_and_a_spent_one_is_the_plain_leader():
    """Hand cases: a prior whose mean is huge at one floor keeps every job there while it lasts
    (n above the job count); with n = 1 it counts for the first decision only (k = 0), so from
    the second job on the floors are the plain leader's; weight 0 is the plain policy."""
    inst = paper_fig5(502, servers=6)
    pricing = _pricing()
    big = [0.0] * len(GRID)
    big[4] = 1e9
    strong = {"grid": list(GRID), "mean_utility": big, "history_jobs": 1000}
    s = AdaptiveOasisPolicy(pricing=pricing, grid=GRID, prior=strong).solve(inst)
    assert s.stats["adaptive"]["job_floor"] == [GRID[4]] * inst.I
    spent = {**strong, "history_jobs": 1}
    s1 = AdaptiveOasisPolicy(pricing=pricing, grid=GRID, prior=spent).solve(inst)
    plain = AdaptiveOasisPolicy(pricing=pricing, grid=GRID).solve(inst)
    first = _order(inst)[0]
    assert s1.stats["adaptive"]["job_floor"][first] == GRID[4]
    assert s1.stats["adaptive"]["job_floor"] == [GRID[g] for g in _leaders(
        inst, pricing, GRID, GRID.index(1e-3), prior=(big, 1))]
    zero = AdaptiveOasisPolicy(pricing=pricing, grid=GRID, prior=strong,
                               prior_weight=0).solve(inst)
    assert zero.admitted == plain.admitted and zero.completion == plain.completion
    assert zero.stats["adaptive"]["job_floor"] == plain.stats["adaptive"]["job_floor"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=instances(max_jobs=5), cut=st.integers(1, 5),
       mean=st.lists(st.floats(0, 1e3), min_size=3, max_size=3), n=st.integers(1, 8))
def test_prior_invariants_on_random_instances(inst, cut, mean, n):
    """With any prior: plans paid at the prices they saw, valid schedules, and the first
    ``cut`` decisions are those of the instance cut after them (the prior reads k, never the
    instance's own job count)."""
    assume(inst.I >= 1)
    u = history_u([inst])
    lowest = min(v for pool in u.values() for v in pool.values())
    grid = (lowest * 1e-6, lowest * 1e-2, lowest)
    doc = pricing_document(u, lowest * 1e-2)
    prior = {"grid": list(grid), "mean_utility": mean, "history_jobs": n}
    sched = AdaptiveOasisPolicy(pricing=doc, grid=grid, prior=prior).solve(inst)
    assert_valid(inst, sched)
    for i in range(inst.I):
        if sched.admitted[i]:
            assert sched.stats["job_payoff"][i] is not None and sched.stats["job_payoff"][i] > 0
    keep = sorted(_order(inst)[:min(cut, inst.I)])
    short = inst.with_jobs([inst.jobs[i] for i in keep])
    cut_sched = AdaptiveOasisPolicy(pricing=doc, grid=grid, prior=prior).solve(short)
    assert cut_sched.stats["adaptive"]["job_floor"] == [
        sched.stats["adaptive"]["job_floor"][i] for i in keep]
    assert list(cut_sched.admitted) == [sched.admitted[i] for i in keep]


def test_bad_priors_are_refused_by_name(tmp_path):
    pricing = _pricing()
    ok = {"grid": list(GRID), "mean_utility": [1.0] * len(GRID), "history_jobs": 10}
    with pytest.raises(ValueError, match="prior: missing history_jobs"):
        AdaptiveOasisPolicy(pricing=pricing, grid=GRID,
                            prior={"grid": list(GRID), "mean_utility": [1.0] * len(GRID)})
    with pytest.raises(ValueError, match="prior: its grid"):
        AdaptiveOasisPolicy(pricing=pricing, grid=GRID[:-1], prior=ok)
    with pytest.raises(ValueError, match="prior: mean_utility"):
        AdaptiveOasisPolicy(pricing=pricing, grid=GRID, prior={**ok, "mean_utility": [1.0]})
    with pytest.raises(ValueError, match="prior: history_jobs"):
        AdaptiveOasisPolicy(pricing=pricing, grid=GRID, prior={**ok, "history_jobs": 0})
    with pytest.raises(ValueError, match="prior_weight"):
        AdaptiveOasisPolicy(pricing=pricing, grid=GRID, prior=ok, prior_weight=-1)
    with pytest.raises(ValueError, match="prior: cannot read"):
        AdaptiveOasisPolicy(pricing=pricing, grid=GRID, prior=str(tmp_path / "missing.json"))


def test_estimate_pricing_report_is_a_prior_on_the_command_line(tmp_path, capsys):
    """The documented path: `estimate-pricing --report R` then `solve --policy oasis-adaptive
    --option prior=R`; the run's floors are those of the prior-weighted leader."""
    import json

    from oasis_opt.cli import main
    from oasis_opt.model.io import load_result, save_instance

    hist = []
    for s in range(1000, 1004):
        path = tmp_path / f"h{s}.json"
        save_instance(paper_fig5(s, servers=6), path)
        hist.append(str(path))
    pricing, report = tmp_path / "p.json", tmp_path / "cal.json"
    grid = "[1e-05, 0.001, 0.1]"
    assert main(["estimate-pricing", *hist, "--grid", "1e-05,0.001,0.1",
                 "--out", str(pricing), "--report", str(report)]) == 0
    table = json.loads(report.read_text())
    assert table["history_jobs"] == [paper_fig5(s, servers=6).I for s in range(1000, 1004)]
    inst = tmp_path / "i.json"
    save_instance(paper_fig5(506, servers=6), inst)
    assert main(["solve", str(inst), "--policy", "oasis-adaptive", "--pricing", str(pricing),
                 "--option", f"grid={grid}", "--option", f"prior={report}",
                 "--out", str(tmp_path / "r.json")]) == 0
    sched = load_result(paper_fig5(506, servers=6), tmp_path / "r.json")
    doc = json.loads(pricing.read_text())
    floors = tuple(json.loads(grid))
    expected = _leaders(paper_fig5(506, servers=6), doc, floors,
                        floors.index(table["chosen"]),
                        prior=(table["mean_utility"], float(np.mean(table["history_jobs"]))))
    assert sched.stats["adaptive"]["job_floor"] == [floors[g] for g in expected]
