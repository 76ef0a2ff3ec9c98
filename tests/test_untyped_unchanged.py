"""Old instance files read unchanged and give identical results.

``data/untyped/paper-sim-seed7.json`` is an ``oasis-opt/instance@1`` file written by the package
before accelerator types existed (commit 4c972a8), and ``paper-sim-seed7.results.json`` each
policy's result document on it (stats keys ending in ``_s`` and ``timing``, the wall-clock ones,
removed) as ``oasis_opt.model.canonical`` fingerprints it: the SHA-256 of its decisions and its
floats, which match to 1e-12 relative (the same result on every CPU, README "Testing"). The
current code must read the file to the same bytes and reproduce every result.

The offline MILP takes half a minute to solve here, so its model is pinned instead:
``paper-sim-seed7.milp.npz`` holds its arrays as the code before accelerator types (commit
56cf220) built them; integer arrays must be equal, float arrays (utilities in the objective)
equal to 1e-12 relative. An identical program gives the solver identical input.

Until stop 27 both were SHA-256 digests of the exact bytes, written on a CPU with AVX-512, where
numpy's float64 ``exp`` takes an AVX-512 kernel: on an AVX2 CPU ``tiresias/tree`` and the MILP's
objective differed in the last place. The fingerprints and arrays were rewritten on an AVX2 CPU
from commits 4c972a8 and 56cf220 themselves, whose documents and arrays there are byte for byte
the current code's (and the other 21 digests matched the old exact ones there too).
"""
from __future__ import annotations

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


def document(inst, policy: str, placement: str | None, schedule=None, as_of=None) -> dict:
    """The stripped result document (``as_of``: name that instance's fingerprint)."""
    from oasis_opt import solve
    from oasis_opt.model.io import result_to_dict

    opts = {} if placement is None else {"placement": placement}
    doc = _strip(result_to_dict(inst, schedule or solve(inst, policy, **opts)))
    if as_of is not None:
        doc["instance_sha256"] = as_of.fingerprint
    return json.loads(json.dumps(doc))  # JSON types only (tuples as lists)


def differences(doc: dict, name: str) -> list[str]:
    """How ``doc`` differs from the stored result ``name`` ([] when it is the same result)."""
    from oasis_opt.model import canonical

    stored = json.loads((DATA / "paper-sim-seed7.results.json").read_text())[name]
    return canonical.differences(doc, stored)


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

    inst = load_instance(DATA / "paper-sim-seed7.json")
    opts = {} if placement is None else {"placement": placement}
    sched = solve(inst, policy, **opts)
    if "preemption" not in sched.stats:
        assert differences(document(inst, policy, placement, sched), key(policy, placement)) == []
        return
    assert policy in ("tiresias", "rrh")
    assert validate(inst, sched).ok
    free = replace(inst, meta={"preemption": {"checkpoint_slots": 1, "restart_slots": 0.0}})
    again = solve(free, policy, **opts)
    assert again.stats.pop("preemption")["jobs"]["lost_work"] == [0.0] * inst.I
    assert differences(document(free, policy, placement, again, as_of=inst),
                       key(policy, placement)) == []


def milp_arrays(inst) -> dict:
    """The offline MILP's arrays (CSR with sorted indices), by name."""
    from oasis_opt.offline.milp_arrays import build_milp

    m = build_milp(inst)
    A = m.lp.A.tocsr()
    A.sort_indices()
    return {"c": m.lp.c, "indptr": A.indptr, "indices": A.indices, "data": A.data,
            "row_lower": m.lp.row_lower, "row_upper": m.lp.row_upper, "lower": m.lp.lower,
            "upper": m.lp.upper, "kind": m.kind, "job": m.job, "slot": m.slot,
            "server": m.server}


def milp_differences(got: dict, want) -> list[str]:
    """Arrays of ``got`` that differ from the stored ones: integers exactly, floats beyond
    ``canonical.SAME_RTOL`` (relative) / ``SAME_ATOL``."""
    import numpy as np

    from oasis_opt.model.canonical import SAME_ATOL, SAME_RTOL

    out = [] if set(got) == set(want.files) else [f"arrays {sorted(got)} != {want.files}"]
    for name in sorted(set(got) & set(want.files)):
        g, w = np.asarray(got[name]), want[name]
        if g.dtype != w.dtype or g.shape != w.shape:
            out.append(f"{name}: {g.dtype}{g.shape} != stored {w.dtype}{w.shape}")
        elif g.dtype.kind == "f":
            if not np.allclose(g, w, rtol=SAME_RTOL, atol=SAME_ATOL, equal_nan=True):
                out.append(f"{name}: {int((~np.isclose(g, w, SAME_RTOL, SAME_ATOL)).sum())} "
                           f"entries differ")
        elif not np.array_equal(g, w):
            out.append(f"{name}: {int((g != w).sum())} entries differ")
    return out


def test_the_offline_milp_is_the_same_program():
    """A program with one coefficient changed (a mutant that prices a slot's utility 1e-9
    higher, or drops a row) is named by its array."""
    import numpy as np

    from oasis_opt.model.io import load_instance

    got = milp_arrays(load_instance(DATA / "paper-sim-seed7.json"))
    with np.load(DATA / "paper-sim-seed7.milp.npz") as want:
        assert milp_differences(got, want) == []
        nudged = {**got, "c": got["c"] * np.where(np.arange(len(got["c"])) == 7, 1 + 1e-9, 1)}
        assert milp_differences(nudged, want) == ["c: 1 entries differ"]
        noise = {**got, "c": np.nextafter(got["c"], np.inf)}  # one ulp everywhere: the same
        assert milp_differences(noise, want) == []


def write(out: Path) -> None:
    """Write the instance file, the fingerprints and the MILP's arrays (run with the code to
    pin)."""
    import numpy as np

    from oasis_opt.model import canonical
    from oasis_opt.model.io import load_instance, save_instance
    from oasis_opt.workloads import generate

    out.mkdir(parents=True, exist_ok=True)
    save_instance(generate("paper-sim", seed=7, jobs=16, horizon=30, servers=4),
                  out / "paper-sim-seed7.json")
    inst = load_instance(out / "paper-sim-seed7.json")
    prints = {key(p, pl): canonical.fingerprint(document(inst, p, pl)) for p, pl in RUNS}
    (out / "paper-sim-seed7.results.json").write_text(
        "{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(prints[k], separators=(',', ':'))}"
                            for k in sorted(prints)) + "\n}\n")
    np.savez_compressed(out / "paper-sim-seed7.milp.npz", **milp_arrays(inst))


if __name__ == "__main__":
    write(Path(sys.argv[1]))
