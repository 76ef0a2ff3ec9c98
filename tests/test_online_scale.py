"""The cost curves' reading of few fit counts (cluster scale) against reading all of them:
``container_marginals`` (fit counts of the n cheapest servers by unit price only) returns
exactly what ``cheapest_marginals`` returns on every server's unit price and fit count, on
random arrays full of ties and full servers (the rows where the cheapest servers hold too few
containers included), and OASiS's plan at every decision of seeded paper-sim runs on 400
worker servers is the one built from every server's fit count."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from oasis_opt import validate
from oasis_opt.model.numerics import fit_count, unit_prices
from oasis_opt.online import _dp
from oasis_opt.online.dual import best_schedule
from oasis_opt.online.oasis import OasisPolicy
from oasis_opt.sim import simulate
from oasis_opt.workloads import paper_sim

R = 3


@st.composite
def slots(draw):
    """(price, free, demand): S slots x H servers x R resources, prices from a few values (ties)
    and free amounts that leave some servers full."""
    S, H = draw(st.integers(1, 4)), draw(st.integers(1, 12))
    price = draw(arrays(float, (S, H, R), elements=st.sampled_from([1.0, 1.5, 2.0, 4.0])))
    free = draw(arrays(float, (S, H, R), elements=st.sampled_from([0.0, 1.0, 2.0, 3.0, 7.0])))
    demand = np.array(draw(st.lists(st.sampled_from([0.0, 1.0, 2.0]), min_size=R, max_size=R)))
    return price, free, demand


@settings(max_examples=200, deadline=None)
@given(slots(), st.integers(0, 15))
def test_container_marginals_equal_every_server_read(arrs, n):
    price, free, demand = arrs
    want = _dp.cheapest_marginals(unit_prices(price, demand), fit_count(free, demand, n), n)
    assert np.array_equal(_dp.container_marginals(price, free, demand, n), want)


class BothReadings(OasisPolicy):
    """OASiS that, at every decision, also asks for the plan with the cost curves built from
    every server's fit count (the previous reading) and compares it with its own."""

    def on_arrival(self, job, t, state):
        args = (self.instance, job, self.worker_price, self.ps_price, self.worker_free,
                self.ps_free)
        got = best_schedule(*args)
        fast, _dp.container_marginals = _dp.container_marginals, every_server
        try:
            want = best_schedule(*args)
        finally:
            _dp.container_marginals = fast
        assert (got.completion, got.cost, got.payoff) == (want.completion, want.cost, want.payoff)
        assert np.array_equal(got.rows, want.rows)
        return super().on_arrival(job, t, state)


def every_server(price, free, demand, n):
    return _dp.cheapest_marginals(unit_prices(price, demand), fit_count(free, demand, n), n)


@pytest.mark.parametrize("seed", range(2))
def test_decisions_equal_the_every_server_reading(seed):
    # 400 worker servers, jobs of up to 100 workers: the cheapest-servers reading is used
    inst = paper_sim(seed, jobs=40, horizon=10, worker_servers=400, ps_servers=200)
    sched = simulate(inst, BothReadings())
    assert validate(inst, sched).ok and sum(sched.admitted) > 0
