"""Results the speed work must not change.

* Stored results (``oasis_golden``): every case reproduces, digest for digest, the result file,
  admissions, completions, planned completions and decision-time payoffs written by
  ``tests/oasis_golden.py``; the other OASiS backends reproduce numpy's digests.
* OASiS's shortcuts (``price_min``: its kept minimum prices; ``slot_class``: untouched slots
  share one cost curve and one placement; resource-major arrays) return, at every decision of
  random runs and on every backend, the plan the plain call on the same arrays returns.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from oasis_golden import BACKEND_CASES, CASES, SLOW_BACKEND_CASES, STORED, run_case

from oasis_opt import validate
from oasis_opt.online.dual import BACKENDS, best_schedule
from oasis_opt.online.oasis import OasisPolicy
from oasis_opt.sim import simulate
from oasis_opt.testing import hetero_instances, instances

STORED_CASES = json.loads(STORED.read_text())["cases"]


def _check(name: str, **extra) -> None:
    got, want = run_case(name, **extra), STORED_CASES[name]
    first = next((i for i, (g, w) in enumerate(zip(got["jobs"], want["jobs"])) if g != w), None)
    assert first is None, f"job {first}: {got['jobs'][first]} != stored {want['jobs'][first]}"
    assert got == want


def test_every_case_is_stored():
    assert set(STORED_CASES) == set(CASES)


@pytest.mark.parametrize("name", list(CASES))
def test_stored_results(name):
    _check(name)


@pytest.mark.parametrize("backend,name", [(b, n) for b, ns in BACKEND_CASES.items() for n in ns])
def test_stored_results_other_backends(backend, name):
    _check(name, backend=backend)


@pytest.mark.slow
@pytest.mark.parametrize("backend,name",
                         [(b, n) for b, ns in SLOW_BACKEND_CASES.items() for n in ns])
def test_stored_results_other_backends_slow(backend, name):
    _check(name, backend=backend)


class PlainToo(OasisPolicy):
    """OASiS that, at every decision, also asks each backend for the plan by the plain call (no
    ``price_min`` / ``slot_class``, C-ordered copies of the arrays): the same plan."""

    def on_arrival(self, job, t, state):
        a = int(self.instance.arrival[job])
        fast = {"price_min": (self.worker_min[a:].min(axis=0), self.ps_min[a:].min(axis=0)),
                "slot_class": self.slot_class}
        arrays = (self.worker_price, self.ps_price, self.worker_free, self.ps_free)
        plain = tuple(np.ascontiguousarray(x) for x in arrays)
        for b in BACKENDS:
            want = best_schedule(self.instance, job, *plain, backend=b,
                                 granularity=self.granularity)
            got = best_schedule(self.instance, job, *arrays, backend=b,
                                granularity=self.granularity, **fast)
            assert (got.completion, got.cost, got.payoff) == \
                (want.completion, want.cost, want.payoff)
            assert np.array_equal(got.rows, want.rows)
        return super().on_arrival(job, t, state)


@settings(max_examples=15, deadline=None)
@given(instances())
def test_shortcuts_give_the_plain_plans(inst):
    sched = simulate(inst, PlainToo())
    assert validate(inst, sched).ok


@settings(max_examples=15, deadline=None)
@given(hetero_instances())
def test_shortcuts_give_the_plain_plans_typed(inst):
    sched = simulate(inst, PlainToo())
    assert validate(inst, sched).ok


def test_slot_class_is_checked():
    inst = CASES["typed-small-span"][0]()
    pol = PlainToo()
    pol.start(inst, None)
    for bad in (np.zeros(inst.horizon, dtype=np.int64), np.zeros(inst.horizon + 1)):
        with pytest.raises(ValueError, match="slot_class"):
            best_schedule(inst, 0, pol.worker_price, pol.ps_price, pol.worker_free,
                          pol.ps_free, slot_class=bad)
