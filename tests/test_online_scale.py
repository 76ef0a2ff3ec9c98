"""The dual subroutine's reading of few servers (cluster scale) against reading all of them.

* ``container_marginals`` / ``place_containers`` (fit counts of the cheapest servers only)
  return exactly what ``cheapest_marginals`` / ``greedy_fill`` return on every server's unit
  price and fit count, on random arrays full of ties and full servers.
* OASiS with its ``touched`` masks (untouched servers read only as candidates,
  ``_dp.candidate_columns``) returns at every decision of seeded paper-sim runs, on clusters
  large enough for the candidates to be used, the plan of the plain call on the same arrays
  (no masks, no slot classes, no kept minima), on the numpy and JAX backends.
"""
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


@settings(max_examples=200, deadline=None)
@given(slots(), st.data())
def test_place_containers_equal_every_server_read(arrs, data):
    price, free, demand = arrs
    u, fit = unit_prices(price, demand), fit_count(free, demand, 20)
    counts = np.array([data.draw(st.integers(0, min(int(f), 15))) for f in fit.sum(axis=1)])
    if not counts.any():
        counts[0] = min(1, int(fit[0].sum()))
    if not counts.any():
        return  # nothing fits anywhere: nothing to place
    want = _dp.greedy_fill(u, fit_count(free, demand, int(counts.max())), counts)
    got = _dp.place_containers(price, free, demand, counts)
    assert all(np.array_equal(g, w) for g, w in zip(got, want))


class PlainToo(OasisPolicy):
    """OASiS that, at every decision, also asks for the plan by the plain call (C-ordered copies
    of the arrays, no ``touched`` / ``slot_class`` / ``price_min``) and compares."""

    backends = ("numpy", "jax")

    def on_arrival(self, job, t, state):
        a = int(self.instance.arrival[job])
        fast = {"price_min": (self.worker_min[a:].min(axis=0), self.ps_min[a:].min(axis=0)),
                "slot_class": self.slot_class, "touched": self.touched}
        arrays = (self.worker_price, self.ps_price, self.worker_free, self.ps_free)
        want = best_schedule(self.instance, job, *(np.ascontiguousarray(x) for x in arrays))
        for b in self.backends:
            got = best_schedule(self.instance, job, *arrays, backend=b, **fast)
            assert (got.completion, got.cost, got.payoff) == \
                (want.completion, want.cost, want.payoff)
            assert np.array_equal(got.rows, want.rows)
        return super().on_arrival(job, t, state)


@pytest.mark.parametrize("seed", range(3))
def test_touched_masks_give_the_plain_plans(seed, monkeypatch):
    pytest.importorskip("jax")
    used = []
    candidates = _dp.candidate_columns

    def spy(*args):
        cols = candidates(*args)
        used.append(cols is not None)
        return cols

    monkeypatch.setattr(_dp, "candidate_columns", spy)
    # jobs of up to 100 workers on 400 worker servers: the candidates are a share of them
    inst = paper_sim(seed, jobs=40, horizon=10, worker_servers=400, ps_servers=200)
    sched = simulate(inst, PlainToo())
    assert validate(inst, sched).ok
    assert any(used) and sum(sched.admitted) > 0
