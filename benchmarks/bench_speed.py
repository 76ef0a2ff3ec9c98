"""Whole-run CPU time of OASiS, FIFO and DRF: HEAD against a baseline commit, in one run.

The ``src`` of HEAD (commit first) and of the baseline are extracted with ``git archive REF`` into a temporary folder; every
measurement runs in a fresh subprocess (same interpreter and packages) with ``PYTHONPATH`` set to
one tree or the other, the two trees alternating run by run, so both see the same machine load.
A run times ``solve(instance, policy)`` with ``time.process_time`` (instance generation and
imports excluded) and reports OASiS's per-decision wall-clock median / p95
(``stats.timing.decision_s``). The two trees must agree on admissions and total utility (the
script stops otherwise). Cases: paper-sim 200 jobs (T = 300, H = K = 50) under each policy, and
OASiS on calibrated paper-sim cells T x H+K at the paper's load (400 jobs per 100 servers per
300 slots), capped at ``--max-jobs`` (0: uncapped). ``--cells T:HK,...`` picks the OASiS cells
(and drops the FIFO / DRF cases); ``--first N`` builds the whole paper-load instance but lets
OASiS decide only its first N arrivals (the rest are declined undecided, in both trees), for a
cell too long to run whole: its whole-run time is then projected, not measured. OASiS runs also
report the decisions' CPU time (``time.process_time`` around each decision: the wall clock of a
shared machine is inflated by the other processes) and the setup (``start``: pricing, arrays).

    nice -n 10 .venv/bin/python benchmarks/bench_speed.py            # baseline: main
    nice -n 10 .venv/bin/python benchmarks/bench_speed.py --baseline 56cf220 --quick
    nice -n 10 .venv/bin/python benchmarks/bench_speed.py --cells 1000:8000 --max-jobs 0 \
        --first 800 --repeats 1 --out /tmp/oasis_scale.md   # then a section of speed.md

Writes benchmarks/results/speed.md (and the raw numbers to speed.json), replacing both; the named
runs kept there (sections of speed.md, ``runs`` in speed.json) are added by hand from an ``--out``
elsewhere, as in the last example.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from tqdm import tqdm

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PAPER_LOAD = 400 / (100 * 300)

WORKER = r"""
import json, sys, time
import numpy as np
from oasis_opt import solve
from oasis_opt.online.oasis import OasisPolicy
from oasis_opt.sim import simulate
from oasis_opt.workloads import paper_sim
policy, seed, jobs, T, HK, first = sys.argv[1], *map(int, sys.argv[2:7])
inst = paper_sim(seed, jobs=jobs, horizon=T, worker_servers=HK // 2, ps_servers=HK // 2)


class Timed(OasisPolicy):
    decided, cpu, start_s = 0, [], 0.0

    def start(self, instance, state):
        t0 = time.process_time()
        super().start(instance, state)
        self.start_s = time.process_time() - t0

    def on_arrival(self, job, t, state):
        if first and self.decided >= first:
            return False
        self.decided += 1
        t0 = time.process_time()
        admit = super().on_arrival(job, t, state)
        self.cpu.append(time.process_time() - t0)
        return admit


t0 = time.process_time()
if policy == "oasis":
    pol = Timed()
    s = simulate(inst, pol)
else:
    s = solve(inst, policy)
cpu = time.process_time() - t0
out = {"cpu_s": cpu, "admitted": int(sum(s.admitted)), "total_utility": repr(s.total_utility),
       "decision_ms": None}
if policy == "oasis":
    dec = [d for d in pol.decision_s if d is not None]
    c = 1e3 * np.array(pol.cpu)
    out.update(decision_ms=[1e3 * float(np.median(dec)), 1e3 * float(np.percentile(dec, 95))],
               decision_cpu_ms=[float(np.median(c)), float(np.percentile(c, 95))],
               decisions_cpu_s=float(c.sum()) / 1e3, start_cpu_s=pol.start_s, decided=len(c),
               jobs_total=inst.I)
print(json.dumps(out))
"""


def cases(quick: bool, max_jobs: int, cells: str | None = None, first: int = 0
          ) -> list[tuple[str, int, int, int, int, int]]:
    """(policy, seed, jobs, T, H+K, first) per case (max_jobs 0: uncapped)."""
    out = [] if cells else [(p, 1, 200, 300, 100, 0) for p in ("oasis", "fifo", "drf")]
    grid = [(100, 80), (100, 800), (300, 80), (300, 800)]
    if not quick:
        grid += [(100, 8000), (300, 8000), (1000, 80), (1000, 800)]
    if cells:
        grid = [tuple(int(x) for x in c.split(":")) for c in cells.split(",")]
    for T, hk in grid:
        jobs = round(PAPER_LOAD * hk * T)
        out.append(("oasis", 0, min(max_jobs, jobs) if max_jobs else jobs, T, hk, first))
    return out


def extract(ref: str, where: Path) -> Path:
    """``git archive REF src`` unpacked under ``where``; returns its ``src``."""
    where.mkdir()
    tar = where / "src.tar"
    subprocess.run(["git", "archive", "-o", str(tar), ref, "src"], cwd=ROOT, check=True)
    with tarfile.open(tar) as f:
        f.extractall(where, filter="data")
    return where / "src"


def run(src: Path, case: tuple) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", WORKER, *map(str, case)], env=env, check=True,
                         capture_output=True, text=True, cwd=src.parent)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="main",
                    help="git ref to compare with (default main; none: HEAD alone, for runs "
                         "too long to repeat)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-jobs", type=int, default=200, help="cap per cell (0: uncapped)")
    ap.add_argument("--quick", action="store_true", help="the small cells only")
    ap.add_argument("--cells", default=None, help="OASiS cells only, as T:HK,T:HK,...")
    ap.add_argument("--first", type=int, default=0,
                    help="OASiS decides only the first N arrivals of each cell (0: all)")
    ap.add_argument("--out", default=str(RESULTS / "speed.md"))
    args = ap.parse_args()
    alone = args.baseline == "none"
    commit = "-" if alone else subprocess.run(
        ["git", "rev-parse", "--short", args.baseline], cwd=ROOT, check=True,
        capture_output=True, text=True).stdout.strip()
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout.strip()
    todo = cases(args.quick, args.max_jobs, args.cells, args.first)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        trees = {name: extract(ref, Path(tmp) / name)
                 for name, ref in (("baseline", args.baseline), ("current", "HEAD"))
                 if not (alone and name == "baseline")}
        bar = tqdm(total=len(todo) * args.repeats * len(trees), desc="runs")
        for case in todo:
            got: dict[str, list[dict]] = {name: [] for name in trees}
            for r in range(args.repeats):
                order = ("baseline", "current") if r % 2 == 0 else ("current", "baseline")
                for name in order:
                    if name in trees:
                        got[name].append(run(trees[name], case))
                        bar.update()
            c = got["current"][0]
            b = got["baseline"][0] if "baseline" in got else c
            if (b["admitted"], b["total_utility"]) != (c["admitted"], c["total_utility"]):
                raise SystemExit(f"{case}: results differ: baseline {b} current {c}")
            med = {k: statistics.median(x["cpu_s"] for x in v) for k, v in got.items()}
            dec = {k: [statistics.median(x["decision_ms"][i] for x in v) for i in (0, 1)]
                   if v[0]["decision_ms"] else None for k, v in got.items()}
            row = {"policy": case[0], "seed": case[1], "jobs": case[2], "T": case[3],
                   "HK": case[4], "first": case[5], "admitted": c["admitted"],
                   "total_utility": c["total_utility"], "cpu_s": med,
                   "ratio": None if alone else med["baseline"] / med["current"],
                   "decision_ms": dec}
            if c["decision_ms"]:
                for key in ("decision_cpu_ms",):
                    row[key] = {k: [statistics.median(x[key][i] for x in v) for i in (0, 1)]
                                for k, v in got.items()}
                for key in ("decisions_cpu_s", "start_cpu_s"):
                    row[key] = {k: statistics.median(x[key] for x in v) for k, v in got.items()}
                row["decided"] = c["decided"]
                # the whole run projected from the decided share: setup + decisions scaled
                row["projected_cpu_s"] = {
                    k: row["start_cpu_s"][k] + row["decisions_cpu_s"][k] * case[2] / c["decided"]
                    for k in got} if c["decided"] < case[2] else None
            rows.append(row)
        bar.close()
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cmd = "python benchmarks/bench_speed.py " + " ".join(sys.argv[1:])
    lines = [f"# Whole-run CPU time: HEAD ({head}) against {args.baseline} ({commit})", "",
             f"Written {stamp} on {platform.machine()}, {os.cpu_count()} CPUs (shared, "
             f"`nice -n 10`), Python {platform.python_version()}, by `{cmd.strip()}`.", "",
             f"Median over {args.repeats} runs per tree of `time.process_time()` around "
             "`solve(instance, policy)`, each run a fresh subprocess, the trees alternating. "
             "Decision ms: OASiS's per-decision wall clock (median / p95 of a run, median over "
             "runs). " + ("Only HEAD ran (`--baseline none`)." if alone else
                          "Both trees gave the same admissions and total utility in every case."),
             "",
             "Decision CPU ms: `time.process_time` around each decision (median / p95). Jobs: "
             "the cell's jobs; `decided` < jobs: OASiS decided only the first arrivals "
             "(`--first`), and the projected CPU s is setup + decisions x jobs / decided.", "",
             "| policy | seed | T | H+K | jobs | decided | admitted | baseline CPU s | "
             "current CPU s | speed-up | baseline decision ms (med / p95) | current decision ms "
             "| baseline decision CPU ms | current decision CPU ms | setup CPU s (base / cur) "
             "| projected whole-run CPU s (base / cur) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        d, dc = r["decision_ms"], r.get("decision_cpu_ms") or {}
        fmt = (lambda x: f"{x[0]:.2f} / {x[1]:.2f}" if x else "-")
        base = (lambda x, f: format(x["baseline"], f) if "baseline" in x else "-")
        setup = (f"{base(r['start_cpu_s'], '.1f')} / {r['start_cpu_s']['current']:.1f}"
                 if "start_cpu_s" in r else "-")
        proj = r.get("projected_cpu_s")
        proj = f"{base(proj, '.0f')} / {proj['current']:.0f}" if proj else "-"
        ratio = f"{r['ratio']:.2f}x" if r["ratio"] else "-"
        lines.append(f"| {r['policy']} | {r['seed']} | {r['T']} | {r['HK']} | {r['jobs']} | "
                     f"{r.get('decided', '-')} | "
                     f"{r['admitted']} | {base(r['cpu_s'], '.2f')} | "
                     f"{r['cpu_s']['current']:.2f} | {ratio} | {fmt(d.get('baseline'))} | "
                     f"{fmt(d['current'])} | {fmt(dc.get('baseline'))} | "
                     f"{fmt(dc.get('current'))} | {setup} | {proj} |")
    out = Path(args.out)
    out.write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps(
        {"written": stamp, "baseline": args.baseline, "baseline_commit": commit, "head": head,
         "command": cmd.strip(), "rows": rows}, indent=1) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
