"""The floor grid in one batch (``online.pricing_batch``) against OASiS run floor by floor.

``solve_pricings`` must give, for every pricing, the schedule ``OasisPolicy(pricing=p).solve``
gives (the sequential path stays the reference): the same admissions, allocation rows,
completions, utilities (compared exactly) and per-job payoffs and planned completions; hence
``estimate_pricing(batch=True)`` gives the calibration table and chosen L of ``batch=False``.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from oasis_opt.cli import main
from oasis_opt.model.io import save_instance
from oasis_opt.model.validate import validate
from oasis_opt.online import (DEFAULT_FLOOR_GRID, OasisPolicy, estimate_pricing, history_u,
                              pricing_document)
from oasis_opt.online.pricing_batch import solve_pricings
from oasis_opt.testing import hetero_instances, instances
from oasis_opt.workloads import paper_fig5, paper_sim


def _rows(schedule) -> list[tuple[int, ...]]:
    return sorted(schedule.allocations.rows())


def assert_same_schedule(inst, batch, sequential) -> None:
    """Equal decisions, rows and utilities, float for float (timings aside)."""
    assert validate(inst, batch).ok
    assert batch.policy == sequential.policy
    assert batch.admitted == sequential.admitted
    assert _rows(batch) == _rows(sequential)
    assert batch.completion == sequential.completion
    assert batch.utility == sequential.utility
    assert batch.total_utility == sequential.total_utility
    for key in ("job_payoff", "job_planned_completion", "pricing", "alpha"):
        assert batch.stats[key] == sequential.stats[key], key


def assert_batch_is_sequential(inst, documents, granularity="worker-slot") -> None:
    batch = solve_pricings(inst, documents, granularity=granularity)
    assert len(batch) == len(documents)
    for doc, schedule in zip(documents, batch):
        sequential = OasisPolicy(pricing=doc, granularity=granularity).solve(inst)
        assert_same_schedule(inst, schedule, sequential)


FLOORS = st.lists(st.sampled_from(DEFAULT_FLOOR_GRID), min_size=1, max_size=6, unique=True)


def _documents(inst, floors):
    u = history_u([inst])
    cap = min(v for pool in u.values() for v in pool.values())
    return [pricing_document(u, min(L, cap)) for L in floors]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=instances(max_jobs=6, max_horizon=8), floors=FLOORS,
       granularity=st.sampled_from(("worker-slot", "chunk")))
def test_batch_equals_sequential_on_random_instances(inst, floors, granularity):
    assume(inst.I > 0)
    assert_batch_is_sequential(inst, _documents(inst, floors), granularity)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=hetero_instances(max_jobs=5, max_horizon=6), floors=FLOORS)
def test_batch_equals_sequential_with_accelerator_types(inst, floors):
    assume(inst.I > 0)
    assert_batch_is_sequential(inst, _documents(inst, floors))


def test_batch_equals_sequential_on_a_paper_sim_instance_default_grid():
    inst = paper_sim(1000, jobs=40, horizon=40, worker_servers=6, ps_servers=6)
    u = history_u([inst])
    documents = [pricing_document(u, L) for L in DEFAULT_FLOOR_GRID]
    assert_batch_is_sequential(inst, documents)


def test_batch_with_the_oracle_and_repeated_pricings():
    """Any pricing ``OasisPolicy`` takes, also the same one twice (members are independent)."""
    inst = paper_fig5(3, servers=3)
    assert_batch_is_sequential(inst, ["oracle", "oracle"])
    assert solve_pricings(inst, []) == []


def _same_estimate(history, grid):
    batch = estimate_pricing(history, grid, batch=True)
    sequential = estimate_pricing(history, grid, batch=False)
    assert batch.calibration == sequential.calibration  # every score, exactly
    assert batch.calibration.chosen == sequential.calibration.chosen
    assert dict(batch) == dict(sequential)
    return batch


def test_estimate_batch_equals_sequential_on_paper_sim_history_default_grid():
    history = [paper_sim(s, jobs=30, horizon=50, worker_servers=10, ps_servers=10)
               for s in (1000, 1001)]
    estimated = _same_estimate(history, DEFAULT_FLOOR_GRID)
    # the table is not degenerate: the floors disagree, and some floor earns something
    assert len(set(estimated.calibration.mean)) > 1 and max(estimated.calibration.mean) > 0


def test_estimate_batch_equals_sequential_on_a_typed_history():
    history = [paper_sim(1000, jobs=10, horizon=30, worker_servers=5, ps_servers=5,
                         cluster_mix="v100:p100:k80")]
    _same_estimate(history, DEFAULT_FLOOR_GRID[::2])


def test_estimate_batch_default_follows_the_backend():
    history = [paper_fig5(1000, servers=3)]
    grid = (1e-3, 1e-1)
    assert estimate_pricing(history, grid) == estimate_pricing(history, grid, batch=False)
    with pytest.raises(ValueError, match="^batch: .*numpy"):
        estimate_pricing(history, grid, backend="reference", batch=True)
    with pytest.raises(ValueError, match="^batch: "):
        estimate_pricing(history, grid, batch="yes")  # type: ignore[arg-type]


def test_progress_counts_every_batched_run():
    history = [paper_fig5(s, servers=3) for s in (1000, 1001)]
    calls = []
    estimate_pricing(history, (1e-3, 1e-1, 1.0), batch=True,
                     progress=lambda done, total: calls.append((done, total)))
    assert calls == [(n, 6) for n in range(1, 7)]


@pytest.fixture(scope="module")
def history_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("history")
    paths = []
    for s in (1000, 1001):
        path = root / f"h{s}.json"
        save_instance(paper_fig5(s, servers=3), path)
        paths.append(str(path))
    return paths


def test_cli_batch_and_no_batch_write_the_same_pricing(tmp_path, capsys, history_files):
    outs = {}
    for flag in ("--batch", "--no-batch"):
        out, report = tmp_path / f"p{flag}.json", tmp_path / f"r{flag}.json"
        assert main(["estimate-pricing", *history_files, "--method", "search", flag,
                     "--grid", "1e-4,1e-2,1", "--report", str(report), "--out", str(out),
                     "--no-progress"]) == 0
        outs[flag] = (out.read_text(), report.read_text())
    capsys.readouterr()
    assert outs["--batch"] == outs["--no-batch"]


@pytest.mark.parametrize("args, field", [
    (["--method", "plugin", "--no-batch"], "--batch/--no-batch"),
    (["--method", "search", "--batch", "--backend", "reference"], "--batch"),
])
def test_cli_batch_bad_combinations(tmp_path, capsys, history_files, args, field):
    assert main(["estimate-pricing", *history_files, *args, "--out",
                 str(tmp_path / "p.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"oasis-opt: error: {field}"), err
