"""The OASiS policy (Alg. 1): valid schedules, the admission rule, committed prices, Appendix A."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from oasis_opt import solve, validate
from oasis_opt.model.io import result_from_dict, result_to_dict
from oasis_opt.model.schedule import WORKER
from oasis_opt.online.dual import Market, best_schedule
from oasis_opt.online.oasis import OasisPolicy
from oasis_opt.online.pricing import oracle_pricing
from oasis_opt.policies import get_policy
from oasis_opt.sim import simulate
from oasis_opt.testing import instances


class RecordingOasis(OasisPolicy):
    """OASiS that also keeps every plan it computed and the order it decided jobs in."""

    def start(self, instance, state):
        super().start(instance, state)
        self.plans, self.order = {}, []

    def on_arrival(self, job, t, state):
        # the plan OASiS is about to use, at the same prices (pure function: no side effects)
        market = Market(self.worker_price, self.ps_price, self.worker_free, self.ps_free)
        self.plans[job] = best_schedule(instance := self.instance, job, market,
                                        backend=self.backend, granularity=self.granularity)
        self.order.append((t, job))
        assert instance.arrival[job] == t
        return super().on_arrival(job, t, state)


def run(inst, **options):
    policy = RecordingOasis(**options)
    return policy, simulate(inst, policy)


@st.composite
def pricings(draw, resources=("gpu", "cpu", "mem", "storage", "bw")):
    """"oracle", or an explicit pricing document whose floor prices are high enough that some
    jobs have a negative best payoff and are rejected for it."""
    if draw(st.booleans()):
        return "oracle"
    L = 10.0 ** draw(st.floats(-3.5, 0))
    U = L * 10.0 ** draw(st.floats(0.5, 3))
    return {"format": "oasis-opt/pricing@1", "U_worker": {r: U for r in resources},
            "U_ps": {r: U for r in resources}, "L_worker": L, "L_ps": L}


@settings(max_examples=80)
@given(instances(), st.sampled_from(["worker-slot", "chunk"]), pricings())
def test_oasis_schedules_are_valid_and_follow_alg1(inst, granularity, pricing):
    policy, sched = run(inst, granularity=granularity, pricing=pricing)
    report = validate(inst, sched)
    assert report.ok, str(report)
    # decided one at a time in arrival order, ties in instance order
    assert policy.order == sorted(policy.order)
    assert [j for _, j in policy.order] == sorted(range(inst.I),
                                                  key=lambda i: (inst.arrival[i], i))
    payoff = sched.stats["job_payoff"]
    for i in range(inst.I):
        plan = policy.plans[i]
        # admitted iff the best payoff is > 0; a rejected job's best payoff is <= 0
        assert sched.admitted[i] == (plan.payoff > 0)
        assert payoff[i] == (plan.payoff if plan.completion is not None else None)
        if sched.admitted[i]:
            assert payoff[i] > 0
            assert sched.completion[i] is not None
            if granularity == "worker-slot":  # the plan runs exactly as committed
                assert sched.completion[i] == plan.completion
                assert sched.utility[i] == pytest.approx(plan.utility)
            else:  # surplus rows after the work is done are skipped: never later
                assert sched.completion[i] <= plan.completion
        else:
            assert sched.completion[i] is None
            assert payoff[i] is None or payoff[i] <= 0
        assert sched.stats["timing"]["job_decision_s"][i] >= 0


@settings(max_examples=40)
@given(instances())
def test_committed_amounts_and_prices_match_the_schedule(inst):
    assume(inst.I > 0)
    policy, sched = run(inst)
    T, H = inst.horizon, inst.H
    used_w = np.zeros((T + 1, H, inst.R))
    used_p = np.zeros((T + 1, inst.K, inst.R))
    a = sched.allocations
    for j, t, s, role, n in a.rows():
        if role == WORKER:
            used_w[t, s] += n * inst.worker_demand[j]
        else:
            used_p[t, s - H] += n * inst.ps_demand[j]
    np.testing.assert_allclose(policy.worker_used, used_w, atol=1e-9)
    np.testing.assert_allclose(policy.ps_used, used_p, atol=1e-9)
    pricing = policy.pricing
    np.testing.assert_allclose(policy.worker_price,
                               pricing.worker_prices(used_w, inst.worker_capacity), rtol=1e-12)
    np.testing.assert_allclose(policy.ps_price, pricing.ps_prices(used_p, inst.ps_capacity),
                               rtol=1e-12)
    np.testing.assert_allclose(policy.worker_free, inst.worker_capacity - used_w, atol=1e-9)
    # the result reports the constants, alpha and the 2 alpha bound, as strict JSON
    st_ = sched.stats
    assert st_["alpha"] == pytest.approx(pricing.alpha)
    assert st_["competitive_bound"] == pytest.approx(2 * pricing.alpha)
    for key in ("U_worker", "U_ps", "L_worker", "L_ps", "eta_worker", "eta_ps"):
        assert key in st_["pricing"]
    doc = result_to_dict(inst, sched)
    assert result_to_dict(inst, result_from_dict(inst, doc)) == doc


@settings(max_examples=60)
@given(instances())
def test_empty_cluster_admits_every_job_of_feasible_size(inst):
    """Appendix A: at the floor prices L1, L2 every job that can finish by T has payoff >=
    f(T - a)/2 > 0 (the eta conditions make L W sum_r w <= f(T - a)/4 per pool)."""
    assume(inst.I > 0)
    p = oracle_pricing(inst)
    T, H, K, R = inst.horizon, inst.H, inst.K, inst.R
    wprice = np.full((T + 1, H, R), p.L_worker)
    pprice = np.full((T + 1, K, R), p.L_ps)
    wfree = np.broadcast_to(inst.worker_capacity, (T + 1, H, R)).copy()
    pfree = np.broadcast_to(inst.ps_capacity, (T + 1, K, R)).copy()
    for i in range(inst.I):
        plan = best_schedule(inst, i, Market(wprice, pprice, wfree, pfree))
        if plan.completion is None:
            continue  # too big to finish by T even alone
        low = inst.jobs[i].utility(T - inst.arrival[i])
        assert plan.payoff >= low / 2 - 1e-12 and plan.payoff > 0
        # and OASiS, run on the job alone, admits it
        alone = inst.with_jobs([inst.jobs[i]])
        assert solve(alone, "oasis", pricing=p).admitted == (True,)


def test_bad_options_are_rejected():
    with pytest.raises(ValueError, match="backend"):
        get_policy("oasis", backend="cuda")
    with pytest.raises(ValueError, match="u_scale"):
        get_policy("oasis", u_scale=0)
    with pytest.raises(ValueError, match="granularity"):
        get_policy("oasis", granularity="epoch")
    with pytest.raises(ValueError, match="pricing"):
        get_policy("oasis", pricing=3)


@pytest.mark.parametrize("calibration", ["calibrated", "literal"])
def test_paper_sim_runs_valid(calibration):
    from oasis_opt.workloads import paper_sim

    inst = paper_sim(7, jobs=30, horizon=40, worker_servers=6, ps_servers=6,
                     calibration=calibration)
    sched = solve(inst, "oasis")
    assert validate(inst, sched).ok
    assert sched.total_utility == pytest.approx(sum(sched.utility))
    # u_scale (Fig. 6) changes the prices OASiS sees, never validity
    low = solve(inst, "oasis", u_scale=0.2)
    assert validate(inst, low).ok
    assert low.stats["pricing"]["u_scale"] == 0.2


def test_chunk_granularity_surplus_rows_are_skipped():
    """Literal Alg. 2 with x = 0.6 and room for one worker per slot: one chunk per slot, so the
    plan takes E N = 5 slots (5 worker-slots) while W = ceil(5 * 0.6) = 3 worker-slots are done
    after 3 slots; the simulator completes the job there and OASiS skips the rest."""
    from oasis_opt.model import Instance, Job, Server, Utility

    inst = Instance(8, ("cpu", "bw"), (Server("w0", {"cpu": 1, "bw": 10}),),
                    (Server("p0", {"cpu": 4, "bw": 20}),),
                    (Job("j", 2, 1, 5, 0.6, {"cpu": 1, "bw": 1}, {"cpu": 1, "bw": 5},
                         Utility.sigmoid(50, 0.2, 6)),))
    policy, sched = run(inst, granularity="chunk")
    assert policy.plans[0].completion == 6 and policy.plans[0].workers.sum() == 5
    assert sched.completion == (4,) and validate(inst, sched).ok
    assert sched.utility[0] == pytest.approx(inst.utility_of(0, 4))
    ws = solve(inst, "oasis")
    assert ws.completion == (4,) and len(ws.allocations) == len(sched.allocations)
