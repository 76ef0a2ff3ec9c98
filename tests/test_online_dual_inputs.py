"""The dual subroutine's three input objects (``online.dual_inputs``): ``DualJob``, ``Market``,
``Hints``: what each refuses, and that they carry the arrays through unchanged."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from oasis_opt.model import Instance, Job, Server, Utility
from oasis_opt.online import DualJob, Hints, Market, best_schedule, best_schedule_arrays
from oasis_opt.online.dual_inputs import check_hints


def _cluster(typed: bool = False) -> Instance:
    """Two worker servers, one PS server, one job (N = 2, W = 4 worker-slots) over 4 slots; with
    ``typed`` the worker servers carry two accelerator types."""
    kinds = ("v100", "k80") if typed else (None, None)
    ws = tuple(Server(f"w{h}", {"cpu": 4, "bw": 10}, accelerator=kinds[h]) for h in range(2))
    ps = (Server("p0", {"cpu": 4, "bw": 20}),)
    job = Job("j", 1, 2, 2, 1.0, {"cpu": 1, "bw": 2}, {"cpu": 1, "bw": 5}, Utility.constant(10.0))
    return Instance(4, ("cpu", "bw"), ws, ps, (job,))


def _market(inst: Instance, price: float = 0.1) -> Market:
    T, H, K, R = inst.horizon, inst.H, inst.K, inst.R
    return Market(np.full((T + 1, H, R), price), np.full((T + 1, K, R), price),
                  np.broadcast_to(inst.worker_capacity, (T + 1, H, R)).copy(),
                  np.broadcast_to(inst.ps_capacity, (T + 1, K, R)).copy())


def _arrays(inst: Instance) -> dict[str, np.ndarray]:
    m = _market(inst)
    return {f.name: getattr(m, f.name) for f in dataclasses.fields(Market)}


@pytest.mark.parametrize("field, shape", [("ps_price", (5, 1, 3)), ("worker_free", (4, 2, 2)),
                                          ("ps_free", (5, 1, 3)), ("worker_price", (5, 2))])
def test_a_market_of_mismatched_shapes_is_refused_naming_the_field(field, shape):
    """Catches a ``Market`` whose arrays come from different clusters or horizons (one server
    or one slot off): unchecked, numpy would broadcast or index past the end deep in the cost
    curves; the error must name the offending field, not the first array (``worker_price``
    fixes T, H and R, ``ps_price`` K)."""
    arrays = {**_arrays(_cluster()), field: np.zeros(shape)}
    with pytest.raises(ValueError, match=f"^{field}: expected shape"):
        Market(**arrays)


def test_a_market_of_another_cluster_is_refused_by_best_schedule():
    """Catches a self-consistent market whose shape is not the instance's (one worker server
    too few): ``Market`` itself cannot know the instance, so ``best_schedule`` must check it,
    naming the first array that disagrees."""
    inst = _cluster()
    small = {k: v[:, :1] if k.startswith("worker") else v for k, v in _arrays(inst).items()}
    with pytest.raises(ValueError, match=r"^worker_price: expected shape \(5, 2, 2\)"):
        best_schedule(inst, 0, Market(**small))


def test_a_job_of_another_market_is_refused_naming_the_field():
    """Catches a ``DualJob`` whose arrays disagree with the market it is scheduled against
    (demands with one resource too many, a utility table one slot short, a PS table for the
    wrong N): each error names the job's field."""
    inst = _cluster()
    market = _market(inst)
    job = DualJob.from_instance(inst, 0)
    for change, field in ((dict(worker_demand=[1.0, 2.0, 3.0]), "worker_demand"),
                          (dict(utility=np.zeros(4)), "utility"),
                          (dict(ps_need=[0, 1]), "ps_need")):
        with pytest.raises(ValueError, match=f"^{field}: expected shape"):
            best_schedule_arrays(dataclasses.replace(job, **change), market)
    with pytest.raises(ValueError, match="^job: expected a DualJob"):
        best_schedule_arrays({"arrival": 1}, market)


def test_a_dual_job_is_keyword_only_and_frozen():
    """Catches positional construction (arrival, chunks and work are three ints in a row: a
    swap would be accepted and schedule the wrong job) and in-place changes (OASiS-topo
    re-plans with a larger ``work`` through ``replace``: a mutable spec would leak the larger
    target into the caller's object)."""
    inst = _cluster()
    job = DualJob.from_instance(inst, 0)
    with pytest.raises(TypeError):
        DualJob(1, 2, 4, [1.0, 2.0], [1.0, 5.0], np.zeros(5))
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.work = 9
    with pytest.raises(dataclasses.FrozenInstanceError):
        _market(inst).worker_price = np.zeros((5, 2, 2))
    bigger = dataclasses.replace(job, work=9)
    assert (job.work, bigger.work) == (4, 9)


def test_the_objects_compare_and_hash_by_identity():
    """Catches the dataclass default ``__eq__`` / ``__hash__`` over array fields: comparing two
    markets would raise numpy's "truth value of an array is ambiguous", and hashing would fail,
    so neither could sit in a set or a cache key."""
    inst = _cluster()
    a, b = _market(inst), _market(inst)
    assert a == a and a != b and len({a, b, a}) == 2
    job = DualJob.from_instance(inst, 0)
    assert job == job and job != DualJob.from_instance(inst, 0)
    assert len({Hints(), Hints()}) == 2


def test_a_market_holds_float_arrays_without_copying_them():
    """Catches a ``Market`` that copies its arrays: OASiS builds one per decision over its
    (T+1, servers, R) arrays (4,000 servers at cluster scale), and a caller that changes its
    arrays in place must see the change through the market; integer arrays become floats."""
    inst = _cluster()
    arrays = _arrays(inst)
    market = Market(**arrays)
    assert all(getattr(market, k) is v for k, v in arrays.items())
    ints = Market(**{k: v.astype(np.int64) for k, v in arrays.items()})
    assert all(getattr(ints, k).dtype == np.float64 for k in arrays)
    assert market.dims == (4, 2, 1, 2) and market.horizon == 4


def test_from_instance_gives_the_instance_plan_through_the_array_entry_point():
    """Catches ``DualJob.from_instance`` dropping a field the instance path reads (the PS
    table, the accelerator types): the array-level call with it must return the plan
    ``best_schedule`` returns, on an untyped and a typed cluster."""
    for typed in (False, True):
        inst = _cluster(typed)
        job = DualJob.from_instance(inst, 0)
        assert (job.server_type is not None) == typed
        market = _market(inst)
        want = best_schedule(inst, 0, market)
        got = best_schedule_arrays(job, market)
        assert want.feasible and (got.completion, got.cost, got.payoff) == \
            (want.completion, want.cost, want.payoff)
        assert np.array_equal(got.rows, want.rows)


def test_hints_are_checked_against_the_market():
    """Catches hints that do not fit the market (a one-element ``price_min``, a ``slot_class``
    one slot short) or a plain dict passed where ``Hints`` belong (the old keyword arguments,
    silently ignored otherwise); and, for valid hints, that the checked ones always carry the
    price minima the completion scan's bound needs."""
    inst = _cluster()
    market = _market(inst)
    for hints, field in ((Hints(price_min=(np.zeros(2),)), "price_min"),
                         (Hints(slot_class=np.zeros(4, dtype=np.int64)), "slot_class"),
                         ({"slot_class": np.zeros(5, dtype=np.int64)}, "hints")):
        with pytest.raises(ValueError, match=f"^{field}: "):
            best_schedule(inst, 0, market, hints)
    checked = check_hints(None, market, 2)
    assert [m.tolist() for m in checked.price_min] == [[0.1, 0.1], [0.1, 0.1]]
    assert checked.slot_class is None and checked.server_index is None


# ---- every check of dual_inputs, one row each ---------------------------------------------------
def _plain_job(**change) -> DualJob:
    """The job of ``_cluster()`` as a caller without an ``Instance`` gives it (the PS rule as
    b_i / B_i, no ``ps_need``), with the named fields changed."""
    job = DualJob(arrival=1, chunks=2, work=4, worker_demand=[1.0, 2.0], ps_demand=[1.0, 5.0],
                  utility=np.full(5, 10.0), worker_bw=2.0, ps_bw=5.0, epochs=2, chunk_time=1.0)
    return dataclasses.replace(job, **change)


# (mutation the row catches: the check that, removed, lets the row through) -> field changed,
# granularity, the field the error must name (and its words, where a later check would name the
# same field). Rows on ``typed`` change the typed cluster's job.
JOB_CHECKS = {
    "no upper bound on arrival": (dict(arrival=5), "worker-slot", "arrival"),
    "no lower bound on arrival": (dict(arrival=0), "worker-slot", "arrival"),
    "a bool taken for an integer": (dict(arrival=True), "worker-slot", "arrival"),
    "chunks not checked >= 1": (dict(chunks=0), "worker-slot", "chunks"),
    "work not checked >= 0": (dict(work=-1), "worker-slot", "work"),
    "job index not checked >= 0": (dict(job=-1), "worker-slot", "job"),
    "demands not checked >= 0": (dict(worker_demand=[-1.0, 0.0]), "worker-slot",
                                 "worker_demand"),
    "demands not checked finite": (dict(ps_demand=[np.nan, 0.0]), "worker-slot", "ps_demand"),
    "utility not checked finite": (dict(utility=[0.0, 10.0, np.nan, 1.0, 1.0]), "worker-slot",
                                   "utility"),
    "utility not checked non-increasing": (dict(utility=np.arange(5.0)), "worker-slot",
                                           "utility"),
    "ps_need and b_i / B_i both taken": (dict(ps_need=[0, 1, 1]), "worker-slot", "ps_need"),
    "ps_need[0] not checked 0": (dict(ps_need=[1, 1, 1], worker_bw=None, ps_bw=None),
                                 "worker-slot", "ps_need"),
    "ps_need not checked non-decreasing": (dict(ps_need=[0, 2, 1], worker_bw=None, ps_bw=None),
                                           "worker-slot", "ps_need"),
    "ps_need not checked integer": (dict(ps_need=[0, 0.5, 1], worker_bw=None, ps_bw=None),
                                    "worker-slot", "ps_need"),
    "worker_bw not checked > 0": (dict(worker_bw=0.0), "worker-slot", "worker_bw"),
    "ps_bw not checked finite": (dict(ps_bw=np.inf), "worker-slot", "ps_bw"),
    "ps_bw not required without ps_need": (dict(ps_bw=None), "worker-slot", "ps_bw"),
    "epochs not checked in chunk granularity": (dict(epochs=0), "chunk", "epochs"),
    "chunk_time not checked in chunk granularity": (dict(chunk_time=0.0), "chunk", "chunk_time"),
    "span_types taken without types": (dict(span_types=True), "worker-slot", "span_types"),
    "typed: a missing type_demand not noticed": (dict(type_demand=None), "worker-slot",
                                                 "type_demand: needed"),
    "typed: a missing server_type not noticed": (dict(server_type=None), "worker-slot",
                                                 "server_type: needed"),
    "typed: type_speed without a usable type": (dict(type_speed=[0, 0]), "worker-slot",
                                                "type_speed"),
    "typed: type_speed not checked integer": (dict(type_speed=[1.5, 1]), "worker-slot",
                                              "type_speed"),
    "typed: server_type index not checked < G": (dict(server_type=[0, 2]), "worker-slot",
                                                 "server_type"),
    "typed: server_type shape not checked": (dict(server_type=[0]), "worker-slot",
                                             "server_type"),
    "typed: type_demand shape not checked": (dict(type_demand=np.ones((1, 2))), "worker-slot",
                                             "type_demand"),
    "typed: type_demand not checked >= 0": (dict(type_demand=-np.ones((2, 2))), "worker-slot",
                                            "type_demand"),
    "typed: span_types not checked bool": (dict(span_types="yes"), "worker-slot", "span_types"),
    "typed: chunk granularity taken with types": ({}, "chunk", "granularity"),
}


@pytest.mark.parametrize("mutation", sorted(JOB_CHECKS))
def test_every_job_check_names_its_field(mutation):
    """One row per check of ``check_job`` (and its helpers ``_integer``, ``_vector``,
    ``_ps_need``, ``_positive``, ``_types``): the row's id is the mutation it catches, the check
    removed or loosened (an unchecked value would reach the DP as a wrong plan, a numpy error
    deep in the cost curves, or nothing at all); the error must be a ``ValueError`` that names
    the job's field."""
    change, granularity, field = JOB_CHECKS[mutation]
    typed = mutation.startswith("typed:")
    inst = _cluster(typed)
    base = DualJob.from_instance(inst, 0) if typed else _plain_job()
    # the unchanged job is taken (the typed one in worker-slot granularity: chunk refuses types)
    assert best_schedule_arrays(base, _market(inst),
                                granularity="worker-slot" if typed else granularity).feasible
    with pytest.raises(ValueError, match=rf"^{field}\b"):
        best_schedule_arrays(dataclasses.replace(base, **change), _market(inst),
                             granularity=granularity)


def _indexes(inst: Instance, servers: int = 0) -> tuple:
    """(worker, PS) ``ServerIndex`` over ``_market(inst)``'s arrays laid out resource-major, as
    ``OasisPolicy`` keeps them; ``servers`` extra worker servers make the worker index wrong."""
    from oasis_opt.online.server_index import ServerIndex

    def major(x: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(x.transpose(0, 2, 1)).transpose(0, 2, 1)

    m = _market(inst)
    wp, wf = (np.concatenate([x] + [x[:, :1]] * servers, axis=1)
              for x in (m.worker_price, m.worker_free))
    return (ServerIndex(major(wp), major(wf)),
            ServerIndex(major(m.ps_price), major(m.ps_free)))


def test_every_hints_and_price_check_names_its_field():
    """One case per check of ``check_hints`` and of the price scan, each named by the mutation
    it catches: a negative or NaN price not refused when no ``price_min`` is given (the greedy
    and the DP's pruning assume prices >= 0), a given ``price_min`` not checked per resource,
    float ``slot_class``es taken (classes are compared as integers), a list of indexes or an
    index over another number of servers taken as ``server_index`` (the placement would read
    servers the arrays do not have). A valid index is taken and changes nothing."""
    inst = _cluster()
    bad_prices = []
    for name, value in (("worker_price", -1.0), ("ps_price", np.nan)):
        arrays = _arrays(inst)
        arrays[name][3, 0, 1] = value
        bad_prices.append((Market(**arrays), None, name))
    market = _market(inst)
    cases = bad_prices + [
        (market, Hints(price_min=(np.zeros(2), -np.ones(2))), "price_min"),
        (market, Hints(price_min=(np.zeros(3), np.zeros(2))), "price_min"),
        (market, Hints(slot_class=np.zeros(5)), "slot_class"),
        (market, Hints(server_index=list(_indexes(inst))), "server_index"),
        (market, Hints(server_index=_indexes(inst, servers=1)), "server_index")]
    for m, hints, field in cases:
        with pytest.raises(ValueError, match=f"^{field}: "):
            best_schedule(inst, 0, m, hints)
        with pytest.raises(ValueError, match=f"^{field}: "):
            best_schedule_arrays(_plain_job(), m, hints)
    indexed = best_schedule(inst, 0, market, Hints(server_index=_indexes(inst)))
    assert np.array_equal(indexed.rows, best_schedule(inst, 0, market).rows)


def test_a_market_without_a_slot_or_of_the_wrong_rank_is_refused():
    """Catches a ``Market`` check that reads T, H, R off ``worker_price`` without checking it
    first (T = 0: no slot to schedule in; a 2-D array) or K off a ``ps_price`` that is not 3-D
    (it would index a shape that is not there)."""
    arrays = _arrays(_cluster())
    for name, shape in (("worker_price", (1, 2, 2)), ("worker_price", (5, 2)),
                        ("ps_price", (5, 1))):
        with pytest.raises(ValueError, match=f"^{name}: expected shape"):
            Market(**{**arrays, name: np.zeros(shape)})
    small = {k: v if k.startswith("worker") else np.concatenate([v, v], axis=1)
             for k, v in arrays.items()}
    with pytest.raises(ValueError, match=r"^ps_price: expected shape \(5, 1, 2\)"):
        best_schedule(_cluster(), 0, Market(**small))


def test_loose_arrays_where_a_market_belongs_are_refused_naming_market():
    """Catches a missing ``check_market``: the four arrays passed loose, as the old signature
    took them (``best_schedule(inst, job, wp, pp, wf, pf)`` is a ``TypeError`` by arity, but one
    array in the ``market`` place is not), would fail with an ``AttributeError`` deep in the
    checks instead of an error naming ``market``."""
    inst = _cluster()
    wp = _arrays(inst)["worker_price"]
    with pytest.raises(ValueError, match="^market: expected a Market"):
        best_schedule(inst, 0, wp)
    with pytest.raises(ValueError, match="^market: expected a Market"):
        best_schedule_arrays(_plain_job(), wp)
    with pytest.raises(TypeError):
        best_schedule(inst, 0, *_arrays(inst).values())
