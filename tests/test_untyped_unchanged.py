"""Old instance files read unchanged and give identical results.

``data/untyped/paper-sim-seed7.json`` is an ``oasis-opt/instance@1`` file, and
``paper-sim-seed7.results.json`` the sha256 of each policy's result document on it (stats keys
ending in ``_s`` and ``timing``, the wall-clock ones, removed), both written by the package
before accelerator types existed (commit 4c972a8) with ``python tests/test_untyped_unchanged.py
OUT_DIR``. The current code must read the file to the same bytes and reproduce every result.
The offline MILP takes half a minute to solve here, so its model is pinned instead: the sha256
of its arrays, as the code before accelerator types (commit 56cf220) built them; an identical
program gives the solver identical input.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data" / "untyped"
RUNS = [(p, None) for p in ("fifo", "drf", "rrh", "dorm", "tiresias", "optimus", "greedy",
                            "oasis")]
RUNS += [(p, pl) for p in ("fifo", "drf", "rrh", "dorm", "tiresias", "optimus", "greedy")
         for pl in ("packing", "tree")]


def _strip(d):
    if isinstance(d, dict):
        return {k: _strip(v) for k, v in d.items() if k != "timing" and not k.endswith("_s")}
    if isinstance(d, list):
        return [_strip(x) for x in d]
    return d


def digest(inst, policy: str, placement: str | None, schedule=None, as_of=None) -> str:
    """sha256 of the stripped result document (``as_of``: name that instance's fingerprint)."""
    from oasis_opt import solve
    from oasis_opt.model.io import result_to_dict

    opts = {} if placement is None else {"placement": placement}
    doc = _strip(result_to_dict(inst, schedule or solve(inst, policy, **opts)))
    if as_of is not None:
        doc["instance_sha256"] = as_of.fingerprint
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def key(policy: str, placement: str | None) -> str:
    return policy if placement is None else f"{policy}/{placement}"


def test_the_old_file_reads_to_the_same_bytes(tmp_path):
    from oasis_opt.model.io import INSTANCE_FORMAT, load_instance, save_instance

    inst = load_instance(DATA / "paper-sim-seed7.json")
    assert not inst.typed
    save_instance(inst, tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == (DATA / "paper-sim-seed7.json").read_bytes()
    assert json.loads((tmp_path / "again.json").read_text())["format"] == INSTANCE_FORMAT


def test_the_generator_still_writes_the_old_file():
    from oasis_opt.model.io import dumps, instance_to_dict
    from oasis_opt.workloads import generate

    inst = generate("paper-sim", seed=7, jobs=16, horizon=30, servers=4)
    assert dumps(instance_to_dict(inst)) == (DATA / "paper-sim-seed7.json").read_text()


@pytest.mark.parametrize("policy, placement", RUNS, ids=[key(*r) for r in RUNS])
def test_results_are_identical(policy, placement):
    """Identical when no job is preempted. A policy that preempts (Tiresias, RRH's pause) now
    pays the preemption costs (``model.preemption``); with the costs set to nothing (a checkpoint
    every slot, no restart time) it gives the old result again, plus its preemption record."""
    from dataclasses import replace

    from oasis_opt import solve, validate
    from oasis_opt.model.io import load_instance

    expected = json.loads((DATA / "paper-sim-seed7.results.json").read_text())
    inst = load_instance(DATA / "paper-sim-seed7.json")
    opts = {} if placement is None else {"placement": placement}
    sched = solve(inst, policy, **opts)
    if "preemption" not in sched.stats:
        assert digest(inst, policy, placement, sched) == expected[key(policy, placement)]
        return
    assert policy in ("tiresias", "rrh")
    assert validate(inst, sched).ok
    free = replace(inst, meta={"preemption": {"checkpoint_slots": 1, "restart_slots": 0.0}})
    again = solve(free, policy, **opts)
    assert again.stats.pop("preemption")["jobs"]["lost_work"] == [0.0] * inst.I
    assert digest(free, policy, placement, again, as_of=inst) == expected[key(policy, placement)]


MILP_SHA256 = "2162a0914b41f439bb328606b23db1e461918da60a3bf480739936e18a3daf66"


def test_the_offline_milp_is_the_same_program():
    import numpy as np

    from oasis_opt.model.io import load_instance
    from oasis_opt.offline.milp_arrays import build_milp

    m = build_milp(load_instance(DATA / "paper-sim-seed7.json"))
    A = m.lp.A.tocsr()
    A.sort_indices()
    h = hashlib.sha256()
    for a in (m.lp.c, A.indptr, A.indices, A.data, m.lp.row_lower, m.lp.row_upper, m.lp.lower,
              m.lp.upper, m.kind, m.job, m.slot, m.server):
        h.update(np.ascontiguousarray(a).tobytes())
    assert h.hexdigest() == MILP_SHA256


def write(out: Path) -> None:
    """Write the instance file and the digests (run with the code to pin)."""
    from oasis_opt.model.io import load_instance, save_instance
    from oasis_opt.workloads import generate

    out.mkdir(parents=True, exist_ok=True)
    save_instance(generate("paper-sim", seed=7, jobs=16, horizon=30, servers=4),
                  out / "paper-sim-seed7.json")
    inst = load_instance(out / "paper-sim-seed7.json")
    digests = {key(p, pl): digest(inst, p, pl) for p, pl in RUNS}
    (out / "paper-sim-seed7.results.json").write_text(
        json.dumps(digests, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    write(Path(sys.argv[1]))
