"""The trace loaders' parameter objects (issue #28): ``PhillyCluster`` and ``PhillyFilter``
(``philly_instance``), ``TraceMapping`` (``trace_instance``, and through it every trace loader).

Each field's check raises ``ValueError`` naming the field (every check of the objects has a case
below: drop one and its case fails); the defaults are the old keyword defaults; a call through the
objects gives the instance the flat keyword call gave before the objects existed (fingerprints
recorded at commit fa77b62 with the flat calls quoted in ``FLAT``).
"""
from __future__ import annotations

import dataclasses
import inspect
import math

import numpy as np
import pytest

import oasis_opt.workloads as workloads
from oasis_opt.workloads.priority import priority_instance
from oasis_opt.workloads.traces import (PHILLY_FULL_SIZE, PhillyCluster, PhillyFilter,
                                        TraceJob, TraceMapping, philly_cluster, philly_instance,
                                        pollux_instance, tiresias_instance, trace_instance)

# ---- every check, one bad value each: ValueError naming the field ---------------------------
BAD = [
    (PhillyCluster, {"kind": "aws"}, "kind"),
    (PhillyCluster, {"racks": 0}, "racks"),
    (PhillyCluster, {"racks": 2.0}, "racks"),
    (PhillyCluster, {"servers_per_rack": 0}, "servers_per_rack"),
    (PhillyCluster, {"ps_per_rack": True}, "ps_per_rack"),
    (PhillyCluster, {"kind": "pai", "pai_machines": 0}, "pai_machines"),
    (PhillyFilter, {"source": "year"}, "source"),
    (PhillyFilter, {"clusters": "6c71a0"}, "clusters"),  # a name, not a list of names
    (PhillyFilter, {"clusters": []}, "clusters"),
    (PhillyFilter, {"clusters": ["6c71a0", ""]}, "clusters"),
    (PhillyFilter, {"clusters": 3}, "clusters"),
    (PhillyFilter, {"max_jobs": 0}, "max_jobs"),
    (PhillyFilter, {"max_jobs": 1.5}, "max_jobs"),
    (TraceMapping, {"tail": -1}, "tail"),
    (TraceMapping, {"horizon": 0}, "horizon"),
    (TraceMapping, {"horizon": 10.0}, "horizon"),
    (TraceMapping, {"class_mix": (0.5, 0.5)}, "class_mix"),
    (TraceMapping, {"class_mix": (0.5, 0.5, 0.5)}, "class_mix"),
    (TraceMapping, {"priority": (5.0, 1.0)}, "priority"),
    (TraceMapping, {"oversubscription": 0.0}, "oversubscription"),
    (TraceMapping, {"oversubscription": math.inf}, "oversubscription"),
    (TraceMapping, {"progress": "fluid"}, "progress"),
]


@pytest.mark.parametrize("cls, kwargs, field", BAD,
                         ids=[f"{c.__name__}-{f}-{i}" for i, (c, _, f) in enumerate(BAD)])
def test_a_bad_value_raises_a_value_error_naming_the_field(cls, kwargs, field):
    with pytest.raises(ValueError, match=f"^{field}: "):
        cls(**kwargs)


def test_good_values_are_kept():
    c = PhillyCluster(kind="pai", racks=np.int64(3), pai_machines=None)
    assert (c.kind, c.racks, c.pai_machines) == ("pai", 3, None)
    f = PhillyFilter(clusters=["a", "b"], max_jobs=np.int64(2))
    assert f.clusters == ("a", "b") and f.max_jobs == 2  # a tuple: the object hashes
    assert hash(f) == hash(PhillyFilter(clusters=("a", "b"), max_jobs=2))
    m = TraceMapping(class_mix=[0.2, 0.5, 0.3], priority=[1, 10], tail=0, horizon=5)
    assert m.class_mix == (0.2, 0.5, 0.3) and m.priority == (1.0, 10.0)
    assert m == TraceMapping(class_mix=(0.2, 0.5, 0.3), priority=(1.0, 10.0), tail=0, horizon=5)
    hash(m)


def test_the_objects_are_frozen_keyword_only_and_exported():
    for cls in (PhillyCluster, PhillyFilter, TraceMapping):
        obj = cls()
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, dataclasses.fields(obj)[0].name, None)
        with pytest.raises(TypeError):
            cls("x")
        assert getattr(workloads, cls.__name__) is cls
    with pytest.raises(ValueError, match="^racks: "):  # replace() checks again
        dataclasses.replace(PhillyCluster(), racks=0)


def test_at_most_eight_parameters():
    for fn in (philly_instance, trace_instance):
        assert len(inspect.signature(fn).parameters) <= 8, fn.__name__


def test_the_loaders_refuse_anything_else_naming_the_parameter():
    jobs = [TraceJob("j", 0.0, 60.0, 1, {})]
    with pytest.raises(ValueError, match="^cluster: expected PhillyCluster, got str"):
        philly_instance("2017-11-01", 0.1, cluster="pai")  # the old flat keyword's value
    with pytest.raises(ValueError, match="^select: expected PhillyFilter, got dict"):
        philly_instance("2017-11-01", 0.1, select={"max_jobs": 3})
    with pytest.raises(ValueError, match="^mapping: expected TraceMapping, got dict"):
        philly_instance("2017-11-01", 0.1, mapping={"tail": 3})
    with pytest.raises(ValueError, match="^mapping: expected TraceMapping, got int"):
        trace_instance(jobs, *philly_cluster(1, 1, 1), seed=0, slot_s=60.0, mapping=3)
    with pytest.raises(TypeError, match="'racks'"):  # the old flat keywords are gone
        philly_instance("2017-11-01", 0.1, racks=2)
    # the horizon's lower end depends on the jobs: checked when they are mapped
    with pytest.raises(ValueError, match="^horizon: must be >= 3"):
        trace_instance([TraceJob("j", 0.0, 150.0, 1, {})], *philly_cluster(1, 1, 1), seed=0,
                       slot_s=60.0, mapping=TraceMapping(horizon=2))


def test_defaults_are_the_old_keyword_defaults():
    assert (PhillyCluster().racks, PhillyCluster().servers_per_rack,
            PhillyCluster().ps_per_rack, PhillyCluster().pai_machines) == (10, 8, 4, 128)
    assert PhillyFilter() == PhillyFilter(source="month", clusters=None, max_jobs=None)
    m = TraceMapping()
    assert (m.tail, m.horizon, m.oversubscription, m.progress) == (24, None, None, "chunk-time")
    assert (m.class_mix, m.priority) == ((0.10, 0.55, 0.35), (1.0, 100.0))
    full = PhillyCluster(**PHILLY_FULL_SIZE)
    assert [len(s) for s in full.servers()] == [440, 110]
    a = philly_instance("2017-11-01", 0.2, 1)
    b = philly_instance("2017-11-01", 0.2, 1, cluster=PhillyCluster(), select=PhillyFilter(),
                        mapping=TraceMapping())
    assert a.fingerprint == b.fingerprint


# ---- the old flat calls and the calls through the objects: the same instance -----------------
def _jobs():
    return [TraceJob(f"j{n}", 60.0 * n, 900.0 + n, 1 + n % 3, {}) for n in range(6)]


# name -> (the flat call at commit fa77b62, as written then; the call now; its fingerprint then)
FLAT = {
    "philly-default-2d": (
        'philly_instance("2017-11-01", 2, seed=0)',
        lambda: philly_instance("2017-11-01", 2, seed=0),
        "8f486ffce83ad93c0b69394bd4f3fa09d62d61a43387e4004514c26e66ad13a5"),
    "philly-every-keyword": (
        'philly_instance("2017-11-02", 0.5, 3, slot_s=1800.0, source="month", cluster="philly", '
        'racks=3, servers_per_rack=4, ps_per_rack=2, clusters=None, max_jobs=40, tail=5, '
        'horizon=None, oversubscription=2.0, progress="placement")',
        lambda: philly_instance(
            "2017-11-02", 0.5, 3, slot_s=1800.0,
            cluster=PhillyCluster(kind="philly", racks=3, servers_per_rack=4, ps_per_rack=2),
            select=PhillyFilter(source="month", clusters=None, max_jobs=40),
            mapping=TraceMapping(tail=5, horizon=None, oversubscription=2.0,
                                 progress="placement")),
        "d105a6481d68d3bc2688b71728de361bcd5d364fdc4e53485fd901463fcdc79d"),
    "philly-pai": (
        'philly_instance("2017-11-01", 0.25, 1, cluster="pai", pai_machines=16, max_jobs=20, '
        'horizon=400)',
        lambda: philly_instance("2017-11-01", 0.25, 1,
                                cluster=PhillyCluster(kind="pai", pai_machines=16),
                                select=PhillyFilter(max_jobs=20),
                                mapping=TraceMapping(horizon=400)),
        "7ed3e25f72550b7c8d17f9388422b61f4fe9516b7d4f9005870cf45ac8c46676"),
    "philly-multigpu": (
        'philly_instance("2017-09-04", 19, source="multigpu", max_jobs=5)',
        lambda: philly_instance("2017-09-04", 19,
                                select=PhillyFilter(source="multigpu", max_jobs=5)),
        "fd1b6bf98f7ba6f577d9277e9be3b8291fd8f9dd8532a82084651f0bbe0a7595"),
    "philly-virtual-clusters": (
        'philly_instance("2017-11-01", 1, 4, clusters=["6214e9", "ed69ec"], max_jobs=30, '
        'tail=0)',
        lambda: philly_instance("2017-11-01", 1, 4,
                                select=PhillyFilter(clusters=["6214e9", "ed69ec"], max_jobs=30),
                                mapping=TraceMapping(tail=0)),
        "433e81a1b07cfa648bddcb5aaf1fe51e8754fe9226b6cfa0cf2c2941c6be9d61"),
    "trace-instance": (
        'trace_instance(jobs, *philly_cluster(1, 2, 2), seed=2, slot_s=300.0, tail=7, '
        'class_mix=(0.2, 0.5, 0.3), priority=(2.0, 50.0), oversubscription=3.0, '
        'progress="placement", meta={"x": 1})',
        lambda: trace_instance(_jobs(), *philly_cluster(1, 2, 2), seed=2, slot_s=300.0,
                               mapping=TraceMapping(tail=7, class_mix=(0.2, 0.5, 0.3),
                                                    priority=(2.0, 50.0), oversubscription=3.0,
                                                    progress="placement"),
                               meta={"x": 1}),
        "533be209212e6737655e62570b021a1644888a71556409e00262f57cc373ef71"),
    # priority_instance keeps its flat keywords; it builds its TraceMapping itself
    "priority-default": (
        "priority_instance(1.0, 0, max_jobs=30)",
        lambda: priority_instance(1.0, 0, max_jobs=30),
        "eb013ba238ea2a4f545ff2f71c13b3c99d5a87efa2e2c78348b1bebc73b8addb"),
    "priority-every-keyword": (
        'priority_instance(2.0, 1, start="2017-11-03", days=1.0, max_jobs=25, max_hours=6.0, '
        'slot_s=900.0, racks=3, servers_per_rack=1, ps_per_rack=1, cpu_per_rack=2, tail=10, '
        'class_mix={"high": 0.5, "mid": 0.3, "low": 0.2})',
        lambda: priority_instance(2.0, 1, start="2017-11-03", days=1.0, max_jobs=25,
                                  max_hours=6.0, slot_s=900.0, racks=3, servers_per_rack=1,
                                  ps_per_rack=1, cpu_per_rack=2, tail=10,
                                  class_mix={"high": 0.5, "mid": 0.3, "low": 0.2}),
        "6405a8de4097c00e9bad4860cf40fc7d893adaf68edcacc5c29af0937d98504e"),
}


@pytest.mark.parametrize("name", FLAT)
def test_the_call_through_the_objects_gives_the_flat_calls_instance(name):
    _, call, fingerprint = FLAT[name]
    assert call().fingerprint == fingerprint


def test_pollux_and_tiresias_build_their_mapping_from_their_keywords():
    for inst, (tail, over) in ((pollux_instance(1, 0, tail=3, oversubscription=2.0,
                                                progress="placement"), (3, 2.0)),
                               (tiresias_instance(0, tail=5), (5, None))):
        last = max(a + d - 1 for a, d in zip(inst.arrival, inst.min_duration))
        assert inst.horizon == last + tail
        assert inst.meta.get("oversubscription") == over
    with pytest.raises(ValueError, match="^progress: "):
        pollux_instance(1, 0, progress="fluid")
