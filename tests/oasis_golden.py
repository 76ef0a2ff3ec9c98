"""Stored policy results: what OASiS (and the simulator's baselines) decided on fixed instances,
to hold every speed change to.

``CASES`` are small to mid-size instances, untyped and typed: paper-sim at the paper's load in
both calibrations, chunk granularity, a raised floor price, U scaled, constant utilities only,
a Philly slice, the topology-aware variant; paper-sim on mixed clusters (V100/K80/CPU,
V100/P100/K80) and small seeded clusters with accelerator types whose jobs may span types; and
FIFO / DRF on untyped and typed paper-sim (their runs exercise the simulator loop, the
validator and the ledger alone). ``BACKEND_CASES`` name the OASiS cases each other backend must
reproduce (the stored digests come from numpy; backends return the same plans).

``digest`` reduces a run to what must never change, in the sense of ``oasis_opt.model.canonical``
(decisions exactly, floats to 1e-12 relative: the same result on every CPU, README "Testing"):
the result file's ``fingerprint`` (``stats.timing`` blanked: wall clock; the backend named as
the default one), and, per job, admitted / completion / planned completion / the payoff at
decision time (``repr``; compared within the tolerance), so that a mismatch names the first job
that differs. ``tests/data/oasis_golden.json`` holds the digests written by

    .venv/bin/python tests/oasis_golden.py            # rewrite the stored file (on purpose only)

which keeps the stored jobs of a case whose result is the same, and refuses to store one whose
decisions or payoffs differ (``--decisions-changed`` stores them, for a change that means to
change decisions), and ``test_online_golden.py``
recomputes them with the current code. The stored decisions and payoffs were written on a CPU
with AVX-512; the fingerprints (format of stop 27) on one without, from runs whose decisions and
payoffs matched the stored ones.
"""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

from oasis_opt import solve
from oasis_opt.model import DEFAULT_RESOURCES, Instance, Job, JobType, Server, Topology, Utility
from oasis_opt.model import canonical
from oasis_opt.model.io import result_to_dict
from oasis_opt.workloads import paper_sim

STORED = Path(__file__).parent / "data" / "oasis_golden.json"


def _topo() -> Instance:
    inst = paper_sim(2, jobs=30, horizon=40)
    return dataclasses.replace(inst, topology=Topology.from_racks(inst, 4.0))


def _philly() -> Instance:
    from oasis_opt.workloads.traces import philly_instance

    return philly_instance("2017-11-01", 2, seed=0)


def small_typed(seed: int, *, jobs: int, horizon: int, H: int, K: int,
                span: float = 0.5) -> Instance:
    """A seeded cluster with accelerator types (V100 / K80 / CPU servers) whose jobs list per-type
    speeds 1..4 (CPU: speed 1, its own demand), units 1..3 and, with probability ``span``, may
    span types; every job fits one worker on a server of each type it lists."""
    rng = np.random.default_rng(seed)
    accs = ("v100", "k80", "cpu")
    ws = []
    for h in range(H):
        acc = accs[h % 3]
        cap = {"gpu": 0.0 if acc == "cpu" else float(rng.integers(2, 9)),
               "cpu": float(rng.integers(16, 65)), "mem": float(rng.integers(64, 257)),
               "storage": 500.0, "bw": float(rng.integers(20, 41))}
        ws.append(Server(f"w{h}", cap, rack=f"rack-{h % 4}", accelerator=acc))
    ps = tuple(Server(f"p{k}", {"gpu": 0.0, "cpu": float(rng.integers(8, 33)),
                                "mem": float(rng.integers(32, 129)), "storage": 500.0,
                                "bw": float(rng.integers(20, 41))}, rack=f"rack-{k % 4}")
               for k in range(K))
    out = []
    for i in range(jobs):
        bw = float(rng.integers(1, 6))
        worker = {"gpu": float(rng.integers(1, 3)), "cpu": float(rng.integers(1, 9)),
                  "mem": float(rng.integers(2, 33)), "storage": 5.0, "bw": bw}
        types = {"v100": JobType(int(rng.integers(2, 5))), "k80": JobType(1)}
        if rng.random() < 0.5:
            types["cpu"] = JobType(1, {**worker, "gpu": 0.0, "cpu": float(rng.integers(4, 17))})
        pdem = {"cpu": float(rng.integers(1, 5)), "mem": float(rng.integers(2, 17)),
                "storage": 5.0, "bw": float(rng.integers(max(5, int(bw)), 11))}
        decay = [0.0, float(rng.uniform(0.01, 1.0)), float(rng.uniform(4.0, 6.0))]
        c = int(rng.integers(0, 3))
        u = Utility.sigmoid(float(rng.uniform(1.0, 100.0)), decay[c], float(rng.uniform(1, 15)))
        cls = ("time-insensitive", "time-sensitive", "time-critical")[c]
        out.append(Job(f"j{i}", int(rng.integers(1, horizon + 1)), int(rng.integers(1, 4)),
                       int(rng.integers(1, 6)), float(rng.choice([0.25, 0.5, 1.0, 1.5])),
                       worker, pdem, u, cls, unit=int(rng.integers(1, 4)), types=types,
                       span_types=bool(rng.random() < span)))
    out.sort(key=lambda j: j.arrival)
    return Instance(horizon, DEFAULT_RESOURCES, tuple(ws), ps, tuple(out))


_FLOOR = {"format": "oasis-opt/pricing@1",
          "U_worker": {"gpu": 60.0, "cpu": 30.0, "mem": 10.0, "storage": 10.0, "bw": 30.0},
          "U_ps": {"cpu": 30.0, "mem": 10.0, "storage": 10.0, "bw": 30.0},
          "L_worker": 1e-3, "L_ps": 1e-3}

# name -> (instance builder, policy, options)
CASES: dict[str, tuple[Callable[[], Instance], str, dict]] = {
    "paper-calibrated-T100-80": (
        lambda: paper_sim(0, jobs=107, horizon=100, worker_servers=40, ps_servers=40),
        "oasis", {}),
    "paper-literal-T100-80": (
        lambda: paper_sim(0, jobs=107, horizon=100, worker_servers=40, ps_servers=40,
                          calibration="literal"), "oasis", {}),
    "paper-calibrated-T300-100": (
        lambda: paper_sim(2, jobs=400, horizon=300, worker_servers=50, ps_servers=50),
        "oasis", {}),
    "paper-chunk-T60-60": (
        lambda: paper_sim(1, jobs=80, horizon=60, worker_servers=30, ps_servers=30),
        "oasis", {"granularity": "chunk"}),
    "paper-floor-1e-3": (
        lambda: paper_sim(3, jobs=200, horizon=150, worker_servers=25, ps_servers=25),
        "oasis", {"pricing": _FLOOR}),
    "paper-u-scale-0.5": (
        lambda: paper_sim(4, jobs=150, horizon=120, worker_servers=25, ps_servers=25),
        "oasis", {"u_scale": 0.5}),
    "paper-constant-utilities": (
        lambda: paper_sim(5, jobs=150, horizon=120, worker_servers=25, ps_servers=25,
                          class_mix=(1.0, 0.0, 0.0)), "oasis", {}),
    "philly-2-days": (_philly, "oasis", {}),
    "topo-racks-4to1": (_topo, "oasis-topo", {}),
    "typed-v100-k80-cpu": (
        lambda: paper_sim(3, jobs=40, horizon=40, worker_servers=8, ps_servers=8,
                          cluster_mix="v100:k80:cpu"), "oasis", {}),
    "typed-v100-p100-k80": (
        lambda: paper_sim(8, jobs=30, horizon=30, worker_servers=9, ps_servers=6,
                          cluster_mix="v100=2:p100:k80"), "oasis", {}),
    "typed-small-span": (
        lambda: small_typed(0, jobs=40, horizon=12, H=6, K=3), "oasis", {}),
    "typed-small-span-floor": (
        lambda: small_typed(1, jobs=30, horizon=10, H=5, K=3, span=1.0), "oasis",
        {"pricing": _FLOOR}),
}
for _policy in ("fifo", "drf"):  # the simulator loop, validator and ledger without the dual
    CASES[f"{_policy}-paper-200"] = (
        lambda: paper_sim(1, jobs=200, horizon=300, worker_servers=50, ps_servers=50),
        _policy, {})
    CASES[f"{_policy}-typed"] = (
        lambda: paper_sim(3, jobs=60, horizon=60, worker_servers=12, ps_servers=8,
                          cluster_mix="v100:k80:cpu"), _policy, {})

# backend -> OASiS cases it reruns against the stored (numpy) digests; "slow" ones need --runslow
BACKEND_CASES = {
    "jax": ["paper-calibrated-T100-80", "paper-literal-T100-80", "paper-calibrated-T300-100",
            "topo-racks-4to1", "typed-small-span"],
    "reference": ["typed-small-span", "typed-small-span-floor"],
}
SLOW_BACKEND_CASES = {
    "jax": ["paper-chunk-T60-60", "typed-v100-k80-cpu", "typed-v100-p100-k80"],
    "reference": ["topo-racks-4to1"],
}


def digest(inst: Instance, sched: Any) -> dict:
    """What a run must reproduce (module docstring)."""
    doc = result_to_dict(inst, sched)
    stats = doc["stats"]
    stats.pop("timing", None)
    # the stored files come from the default backend: another backend's file may differ only in
    # naming itself (``stats.backend``, ``stats.options.backend``)
    if "backend" in stats:
        stats["backend"] = "numpy"
    stats.get("options", {}).pop("backend", None)
    completion = [j["completion"] for j in doc["jobs"]]
    planned = sched.stats.get("job_planned_completion", [None] * len(completion))
    payoff = sched.stats.get("job_payoff", [None] * len(completion))
    jobs = [[bool(a), c, p, None if x is None else repr(float(x))]
            for a, c, p, x in zip(sched.admitted, completion, planned, payoff)]
    return {**canonical.fingerprint(doc), "admitted": int(sum(sched.admitted)),
            "total_utility": repr(sched.total_utility), "jobs": jobs}


def job_differences(got: list, want: list) -> list[str]:
    """Per-job differences of two digests' ``jobs``: a decision (admitted, completion, planned
    completion) that is not equal, or a payoff beyond the float tolerance; the first few."""
    out = [] if len(got) == len(want) else [f"{len(got)} jobs, stored {len(want)}"]
    for i, (g, w) in enumerate(zip(got, want)):
        if g[:3] != w[:3] or (g[3] is None) != (w[3] is None) or (
                g[3] is not None and not canonical.same_float(float(g[3]), float(w[3]))):
            out.append(f"job {i}: {g} != stored {w}")
        if len(out) >= 3:
            break
    return out


def differences(got: dict, want: dict) -> list[str]:
    """How a digest differs from a stored one: [] when it is the same result (``canonical``):
    per-job decisions first (naming the first job), then the counts, the total utility within
    the tolerance, the decisions hash and the floats of the result file."""
    out = job_differences(got["jobs"], want["jobs"])
    if got["admitted"] != want["admitted"]:
        out.append(f"admitted {got['admitted']} != stored {want['admitted']}")
    if not canonical.same_float(float(got["total_utility"]), float(want["total_utility"])):
        out.append(f"total utility {got['total_utility']} != stored {want['total_utility']}")
    if got["decisions_sha256"] != want["decisions_sha256"]:
        out.append("result file: decisions differ (decisions_sha256)")
    if len(got["values"]) != len(want["values"]):
        out.append(f"result file: {len(got['values'])} floats, stored {len(want['values'])}")
    bad = [i for i, (g, w) in enumerate(zip(got["values"], want["values"]))
           if not canonical.same_float(g, w)]
    if bad:
        i = bad[0]
        out.append(f"result file: {len(bad)} floats differ, the first (#{i}) "
                   f"{got['values'][i]!r} != stored {want['values'][i]!r}")
    return out


def run_case(name: str, **extra: Any) -> dict:
    build, policy, options = CASES[name]
    inst = build()
    return digest(inst, solve(inst, policy, **{**options, **extra}))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    changed_ok = "--decisions-changed" in args
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    before = json.loads(STORED.read_text())["cases"] if STORED.exists() else {}
    out: dict[str, Any] = {"commit": commit, "cases": {}}
    for name in CASES:
        got = out["cases"][name] = run_case(name)
        print(name, got["admitted"], got["total_utility"], flush=True)
        moved = job_differences(got["jobs"], before[name]["jobs"]) if name in before else []
        if moved and not changed_ok:
            print(f"{name}: the decisions or payoffs differ from the stored ones ({moved[0]}); "
                  f"nothing written (--decisions-changed stores them)", file=sys.stderr)
            return 1
        if name in before and not moved:  # the same result: keep the stored jobs and total
            got.update({k: before[name][k] for k in ("admitted", "total_utility", "jobs")})
    lines = [f"{json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}"
             for k, v in out["cases"].items()]  # one case per line
    STORED.write_text(f'{{"commit": "{commit}", "cases": {{\n' + ",\n".join(lines) + "}}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
