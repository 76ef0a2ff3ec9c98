"""Results the speed work must not change.

* Stored results (``oasis_golden``): every case reproduces the result file (its decisions exactly,
  its floats to 1e-12 relative: ``oasis_opt.model.canonical``), admissions, completions, planned
  completions and decision-time payoffs written by ``tests/oasis_golden.py``; the other OASiS
  backends reproduce numpy's digests. The comparison catches a changed decision: mutants that
  drop the dual's payoff margin or its per-slot tie costs fail it, each naming the first job
  that differs (``test_a_changed_tie_rule_fails``), and so does a result file with one
  allocation row moved or one utility off by 1e-9 (``test_the_comparison_fails_on_...``).
* The same decisions with numpy's wider SIMD kernels disabled (``NPY_DISABLE_CPU_FEATURES``, in
  a child process): the stored results were written on a CPU with AVX-512, and must come out
  the same on every other.
* OASiS's shortcuts (``price_min``: its kept minimum prices; ``slot_class``: untouched slots
  share one cost curve and one placement; resource-major arrays) return, at every decision of
  random runs and on every backend, the plan the plain call on the same arrays returns.
"""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from oasis_golden import (BACKEND_CASES, CASES, SLOW_BACKEND_CASES, STORED, differences,
                          run_case)

from oasis_opt import validate
from oasis_opt.online.dual import BACKENDS, Hints, Market, best_schedule
from oasis_opt.online.oasis import OasisPolicy
from oasis_opt.sim import simulate
from oasis_opt.testing import hetero_instances, instances

STORED_CASES = json.loads(STORED.read_text())["cases"]


def _check(name: str, **extra) -> None:
    assert differences(run_case(name, **extra), STORED_CASES[name]) == []


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


def test_a_changed_tie_rule_fails(monkeypatch):
    """Mutants of the dual's tie rule change decisions, and the comparison names the first job:
    a later completion slot that wins on float noise (no payoff margin), and DP steps that
    compare the plain costs (no k eta_t tie costs)."""
    from oasis_opt.online import _dp, dual_numpy

    with monkeypatch.context() as m:
        m.setattr(_dp, "payoff_margin", lambda best: 0.0)
        got = differences(run_case("paper-chunk-T60-60"), STORED_CASES["paper-chunk-T60-60"])
    assert got and got[0].startswith("job 10: [True, 32, 32,")
    with monkeypatch.context() as m:
        m.setattr(dual_numpy, "tie_costs", lambda C: C + 0.0)
        got = differences(run_case("paper-literal-T100-80"),
                          STORED_CASES["paper-literal-T100-80"])
    assert got and got[0].startswith("job 38: [True, 61, 61,")


def test_the_comparison_fails_on_a_moved_row_or_a_changed_float():
    """The result-file fingerprint: one allocation row on another server is a changed
    decision, one utility 1e-9 off a changed value, one ulp on every float the same result."""
    from oasis_opt import solve
    from oasis_opt.model import canonical
    from oasis_opt.model.io import result_to_dict

    build, policy, options = CASES["typed-small-span"]
    inst = build()
    doc = result_to_dict(inst, solve(inst, policy, **options))
    stored = canonical.fingerprint(doc)
    assert canonical.differences(doc, stored) == []
    moved = copy.deepcopy(doc)
    row = moved["allocations"][0]
    assert row["server"] == "w0"
    row["server"] = "w1"
    assert canonical.differences(moved, stored) == ["decisions differ (decisions_sha256)"]
    off = copy.deepcopy(doc)
    u = off["jobs"][3]["utility"]
    off["jobs"][3]["utility"] = u * (1 + 1e-9)
    assert canonical.differences(off, stored) == [f".jobs[3].utility: {u * (1 + 1e-9)!r} != "
                                                  f"stored {u!r}"]
    noise = json.loads(json.dumps(doc), parse_float=lambda x: float(np.nextafter(float(x), 2e300)))
    assert canonical.differences(noise, stored) == []


def _wider_simd() -> list[str]:
    """numpy's dispatched SIMD feature groups this CPU has beyond numpy's build baseline."""
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    return [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]


@pytest.mark.skipif(not _wider_simd(), reason="this CPU runs numpy's baseline kernels only")
def test_the_same_decisions_with_the_wider_simd_disabled():
    """The stored results (written on a CPU with AVX-512) and the pinned untyped results again,
    in a child process whose numpy runs without its wider kernels (``NPY_DISABLE_CPU_FEATURES``
    = every dispatched group this CPU has: AVX-512 and AVX2 on an AVX-512 machine, AVX2 on an
    AVX2 one). Both paths must reproduce the stored decisions, so they agree with each other.
    """
    features = _wider_simd()
    env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": " ".join(features), "JAX_PLATFORMS": "cpu"}
    probe = subprocess.run([sys.executable, "-c", "from numpy._core._multiarray_umath import "
                            "__cpu_features__ as f; print(' '.join(k for k, v in f.items() if v))"],
                           env=env, capture_output=True, text=True, check=True)
    assert not set(features) & set(probe.stdout.split()), probe.stdout  # really disabled
    tests = Path(__file__).parent
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          f"{tests / 'test_online_golden.py'}::test_stored_results",
                          f"{tests / 'test_untyped_unchanged.py'}"],
                         env=env, capture_output=True, text=True, cwd=tests.parent)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]


class PlainToo(OasisPolicy):
    """OASiS that, at every decision, also asks each backend for the plan by the plain call (no
    ``price_min`` / ``slot_class``, C-ordered copies of the arrays): the same plan."""

    def on_arrival(self, job, t, state):
        a = int(self.instance.arrival[job])
        fast = Hints(price_min=(self.worker_min[a:].min(axis=0), self.ps_min[a:].min(axis=0)),
                     slot_class=self.slot_class)
        arrays = (self.worker_price, self.ps_price, self.worker_free, self.ps_free)
        plain = tuple(np.ascontiguousarray(x) for x in arrays)
        for b in BACKENDS:
            want = best_schedule(self.instance, job, Market(*plain), backend=b,
                                 granularity=self.granularity)
            got = best_schedule(self.instance, job, Market(*arrays), fast, backend=b,
                                granularity=self.granularity)
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
            best_schedule(inst, 0, Market(pol.worker_price, pol.ps_price, pol.worker_free,
                                          pol.ps_free), Hints(slot_class=bad))
