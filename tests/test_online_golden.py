"""Stored results (``oasis_golden``): every case reproduces, digest for digest, the result file,
admissions, completions, planned completions and decision-time payoffs written by
``tests/oasis_golden.py``; the other OASiS backends reproduce numpy's digests."""
from __future__ import annotations

import json

import pytest
from oasis_golden import BACKEND_CASES, CASES, SLOW_BACKEND_CASES, STORED, run_case

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
