"""Gavel's own simulator on the validation traces: the reference numbers in
``src/oasis_opt/data/traces/gavel/validation`` (issue #34).

Runs Gavel's unmodified scripts (repository ``stanford-futuredata/gavel``, commit
``c4fa40097339e9608ab71fd64c8bdea96a5e4a4c``, MIT; its dependencies as ``traces/gavel/README.md``
of the shared notes says: numpy, scipy, cvxpy 1.9 + ECOS 2.0, matrix-completion 0.0.2,
scikit-learn, psutil, grpcio-tools to build its RPC stubs with ``make rpc_stubs``), from
Gavel's ``scheduler`` folder:

    python scripts/utils/generate_trace.py --num_jobs N --lam LAM --seed SEED \
        --generate-multi-gpu-jobs --throughputs_file simulation_throughputs.json \
        --output_file NAME.trace
    python scripts/drivers/simulate_scheduler_with_trace.py --trace_file NAME.trace \
        --policy POLICY --throughputs_file simulation_throughputs.json --cluster_spec V:P:K \
        --num_gpus_per_server 4:4:4 --time_per_iteration 360 --seed 11 > NAME.POLICY.log

for every row of ``traces.csv`` and every policy of ``POLICIES``, then parses the logs into
``results.csv`` (one row per trace and policy, the dev results' columns) and ``jcts.csv`` (one
row per completed job: Gavel's printed ``Job N: JCT``).

    python experiments/gavel_reference.py --gavel GAVEL/scheduler --python GAVEL_PY \
        --logs DIR [--run]

Without ``--run`` it only parses logs already in ``--logs`` (default: a temporary folder is not
kept, so give one). Nothing of Gavel's code is imported here: it runs as a separate process.
"""
from __future__ import annotations

import argparse
import csv
import re
import subprocess
import time
from pathlib import Path

VALIDATION = Path(__file__).resolve().parents[1] / "data" / "traces" / "gavel" / "validation"
POLICIES = ("fifo", "max_min_fairness_perf", "max_min_fairness", "finish_time_fairness_perf",
            "min_total_duration_perf")


def traces() -> list[dict[str, str]]:
    with open(VALIDATION / "traces.csv") as f:
        return list(csv.DictReader(f))


def run(gavel: Path, python: str, logs: Path) -> dict[tuple[str, str], float]:
    """Generate each trace and simulate each policy; wall seconds per (trace, policy)."""
    walls = {}
    for t in traces():
        trace = VALIDATION / f"{t['name']}.trace"
        if not trace.exists():
            subprocess.run([python, "scripts/utils/generate_trace.py", "--num_jobs", t["num_jobs"],
                            "--lam", t["lam"], "--seed", t["seed"], "--generate-multi-gpu-jobs",
                            "--throughputs_file", "simulation_throughputs.json",
                            "--output_file", str(trace)], cwd=gavel, check=True)
        for policy in POLICIES:
            t0 = time.perf_counter()
            with open(logs / f"{t['name']}.{policy}.log", "w") as out:
                subprocess.run([python, "scripts/drivers/simulate_scheduler_with_trace.py",
                                "--trace_file", str(trace), "--policy", policy,
                                "--throughputs_file", "simulation_throughputs.json",
                                "--cluster_spec", t["cluster_spec"], "--num_gpus_per_server",
                                "4:4:4", "--time_per_iteration", "360", "--seed", "11"],
                               cwd=gavel, stdout=out, stderr=subprocess.STDOUT, check=True)
            walls[t["name"], policy] = time.perf_counter() - t0
    return walls


def parse(logs: Path, walls: dict[tuple[str, str], float]) -> None:
    rows, jcts = [], []
    for t in traces():
        for policy in POLICIES:
            text = (logs / f"{t['name']}.{policy}.log").read_text()
            avg = float(re.search(r"^Average job completion time: ([\d.]+) seconds", text,
                                  re.M).group(1))
            span = float(re.search(r"^Total duration: ([\d.]+) seconds", text, re.M).group(1))
            util = float(re.search(r"^Cluster utilization: ([\d.]+)", text, re.M).group(1))
            done = re.findall(r"^Job (\d+): ([\d.]+)$", text, re.M)
            jcts += [[t["name"], policy, int(j), float(v)] for j, v in done]
            n = int(t["num_jobs"])
            rows.append([t["name"], policy, t["cluster_spec"], f"{avg:.3f}", f"{span:.3f}",
                         f"{util:.3f}", f"{walls.get((t['name'], policy), float('nan')):.2f}",
                         f"{avg / 3600:.4f}", f"{span / 3600:.4f}", n, n - len(done)])
    with open(VALIDATION / "results.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["trace", "policy", "cluster_spec", "avg_jct_s", "makespan_s", "utilisation",
                    "wall_s", "avg_jct_h", "makespan_h", "num_jobs", "num_failed"])
        w.writerows(rows)
    with open(VALIDATION / "jcts.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["trace", "policy", "job", "jct_s"])
        w.writerows(jcts)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gavel", type=Path, help="Gavel's scheduler folder (with --run)")
    ap.add_argument("--python", default="python", help="the Python that runs Gavel")
    ap.add_argument("--logs", type=Path, required=True, help="folder of the simulator's logs")
    ap.add_argument("--walls", type=Path, help="optional 'trace policy seconds' lines")
    ap.add_argument("--run", action="store_true", help="run Gavel (else parse --logs only)")
    args = ap.parse_args(argv)
    walls: dict[tuple[str, str], float] = {}
    if args.walls:
        for line in args.walls.read_text().split("\n"):
            parts = line.split()
            if len(parts) == 3:
                walls[parts[0], parts[1]] = float(parts[2])
    if args.run:
        if args.gavel is None:
            ap.error("--run needs --gavel")
        args.logs.mkdir(parents=True, exist_ok=True)
        walls = run(args.gavel, args.python, args.logs)
    parse(args.logs, walls)
    print(f"wrote {VALIDATION / 'results.csv'} and {VALIDATION / 'jcts.csv'}")


if __name__ == "__main__":
    main()
