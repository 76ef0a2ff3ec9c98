"""The placement components added for the baselines: Random (seeded) and Packing (best fit),
and ``place_counts`` (explicit worker and PS counts), against the fit-count rules."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_opt.model import DEFAULT_RESOURCES, Instance, Job, Server, Utility
from oasis_opt.model.numerics import fit_count
from oasis_opt.sim.placement import PLACEMENTS, FirstFit, Packing, Random, apply, get_placement
from oasis_opt.testing import instances


def _instance(worker_gpus, ps_cpus=(8.0,)):
    ws = tuple(Server(f"w{h}", {"gpu": g, "cpu": 64.0, "mem": 256.0, "storage": 100.0,
                                "bw": 100.0}) for h, g in enumerate(worker_gpus))
    ps = tuple(Server(f"p{k}", {"cpu": c, "mem": 64.0, "storage": 100.0, "bw": 100.0})
               for k, c in enumerate(ps_cpus))
    job = Job("j", 1, 1, 16, 1.0, {"gpu": 1.0, "cpu": 1.0, "bw": 5.0},
              {"cpu": 1.0, "bw": 10.0}, Utility.constant(1.0))
    return Instance(3, DEFAULT_RESOURCES, ws, ps, (job,))


def test_packing_fills_the_fullest_server_that_fits_first():
    inst = _instance([4.0, 4.0, 4.0])
    free = inst.capacity.copy()
    free[0, 0] = 4.0  # empty
    free[1, 0] = 1.0  # fullest that still fits one worker
    free[2, 0] = 2.0
    rows = Packing().place(inst, 0, 3, free)
    workers = [(s, n) for s, role, n in rows if role == 0]
    assert workers == [(1, 1), (2, 2)]  # fullest first; the empty server stays empty


def test_packing_puts_servers_that_fit_nothing_last():
    inst = _instance([4.0, 4.0])
    free = inst.capacity.copy()
    free[0, 0] = 0.0  # full (rel. free 0 on GPU, but no room): must not come first
    order = Packing().worker_order(inst, 0, free)
    assert order.tolist() == [1, 0]


def test_random_placement_is_seeded():
    inst = _instance([8.0] * 6)
    a, b, c = Random(seed=1), Random(seed=1), Random(seed=2)
    for p in (a, b, c):
        p.reset(inst)
    ra = [a.place(inst, 0, 2, inst.capacity) for _ in range(5)]
    rb = [b.place(inst, 0, 2, inst.capacity) for _ in range(5)]
    rc = [c.place(inst, 0, 2, inst.capacity) for _ in range(5)]
    assert ra == rb and ra != rc
    a.reset(inst)
    assert [a.place(inst, 0, 2, inst.capacity) for _ in range(5)] == ra  # reset restarts
    assert get_placement("random", seed=1).seed == 1
    assert isinstance(get_placement("packing", seed=7), Packing)


def test_get_placement_rejects_unknown_names():
    with pytest.raises(ValueError, match="unknown placement"):
        get_placement("tetris")


@settings(max_examples=60)
@given(inst=instances(max_jobs=3), name=st.sampled_from(sorted(PLACEMENTS)),
       workers=st.integers(0, 6), ps=st.integers(0, 4), fill_frac=st.floats(0.0, 1.0),
       seed=st.integers(0, 5))
def test_place_counts_places_exactly_what_fits(inst, name, workers, ps, fill_frac, seed):
    """Any placement either places exactly the requested counts within the free capacity, or
    returns None only when the pool's fit counts cannot hold them."""
    if inst.I == 0:
        return
    p = get_placement(name, seed=seed)
    p.reset(inst)
    used = fill_frac * np.random.default_rng(seed).random(inst.capacity.shape)
    free = inst.capacity * (1.0 - used)
    H = inst.H
    rows = p.place_counts(inst, 0, workers, ps, free)
    wcap = int(fit_count(free[:H], inst.worker_demand[0]).sum())
    pcap = int(fit_count(free[H:], inst.ps_demand[0]).sum())
    if rows is None:
        assert workers > wcap or ps > pcap
        return
    assert sum(n for s, r, n in rows if r == 0) == workers
    assert sum(n for s, r, n in rows if r == 1) == ps
    assert all((r == 0) == (s < H) for s, r, n in rows)
    after = free.copy()
    apply(inst, 0, rows, after)
    assert (after >= -1e-9 * np.maximum(1, inst.capacity)).all()
    # place(k) is place_counts with the constraint-(6) PS number
    if workers:
        q = get_placement(name, seed=seed)
        q.reset(inst)
        r1 = q.place(inst, 0, workers, free)
        q.reset(inst)
        r2 = q.place_counts(inst, 0, workers, inst.ps_needed(0, workers), free)
        assert r1 == r2


def test_first_fit_unchanged():
    inst = _instance([2.0, 2.0])
    rows = FirstFit().place(inst, 0, 3, inst.capacity)
    assert rows == [(0, 0, 2), (1, 0, 1), (2, 1, 2)]  # 3 workers * 5 / 10 -> 2 PSs

