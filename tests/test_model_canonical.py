"""``model.canonical``: what "the same result" means on two machines (README "Testing")."""
from __future__ import annotations

import math

import pytest

from oasis_opt.model import canonical

DOC = {"jobs": [{"id": "j0", "completion": 3, "utility": 2.5, "admitted": True},
                {"id": "j1", "completion": None, "utility": 0.0, "admitted": False}],
       "total_utility": 2.5, "stats": {"alpha": 1.25, "events": [[1, "start", 0]]}}


def test_split_names_every_float_and_keeps_every_decision():
    decisions, values = canonical.split(DOC)
    assert values == [(".jobs[0].utility", 2.5), (".jobs[1].utility", 0.0), (".stats.alpha", 1.25),
                      (".total_utility", 2.5)]
    assert decisions["jobs"][0] == {"admitted": True, "completion": 3, "id": "j0",
                                    "utility": None}
    assert decisions["stats"]["events"] == [[1, "start", 0]]


def test_key_order_does_not_count_but_every_decision_does():
    """A mutant that hashes the document in insertion order gives the reordered copy another
    digest; one that drops ints with the floats misses the changed completion slot."""
    reordered = {k: DOC[k] for k in reversed(list(DOC))}
    assert canonical.fingerprint(reordered) == canonical.fingerprint(DOC)
    later = {**DOC, "jobs": [{**DOC["jobs"][0], "completion": 4}, DOC["jobs"][1]]}
    assert canonical.differences(later, canonical.fingerprint(DOC)) == \
        ["decisions differ (decisions_sha256)"]
    flipped = {**DOC, "jobs": [{**DOC["jobs"][0], "admitted": 1}, DOC["jobs"][1]]}
    assert canonical.decisions_sha256(flipped) != canonical.decisions_sha256(DOC)  # 1 is not True


def test_floats_compare_to_the_stated_tolerance():
    assert canonical.same_float(23.51170574241823, 23.511705742418222)  # the AVX2/AVX-512 pair
    assert not canonical.same_float(1.0, 1.0 + 1e-11)
    assert canonical.same_float(0.0, 2.6e-310)  # underflowed next to zero
    assert not canonical.same_float(0.0, 1e-290)
    assert canonical.same_float(math.inf, math.inf) and not canonical.same_float(math.inf, 1e308)
    assert canonical.same_float(math.nan, math.nan) and not canonical.same_float(math.nan, 0.0)
    want = canonical.fingerprint(DOC)
    assert canonical.differences({**DOC, "total_utility": 2.5 + 1e-9}, want) == \
        [".total_utility: 2.500000001 != stored 2.5"]
    assert canonical.differences({**DOC, "stats": {**DOC["stats"], "beta": 1.0}}, want)[:2] == \
        ["decisions differ (decisions_sha256)", "5 floats, stored 4"]


def test_a_non_json_leaf_is_named():
    with pytest.raises(TypeError, match=r"\.stats\.x: not a JSON value \(complex\)"):
        canonical.split({"stats": {"x": 1j}})
