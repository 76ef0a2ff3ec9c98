"""The Philly month replay with OASiS: HEAD against a baseline commit, in one run, as CPU seconds.

The Philly digest of November 2017 (21,318 jobs, ``workloads.traces.philly_instance``: 1-hour
slots) on two cluster sizes: the default Philly-like cluster (10 racks of 8 GPU servers and 4 PS
servers: H + K = 120) and the full Philly size, 550 servers (55 racks of 8 GPU servers and 2 PS
servers: H = 440 servers with 3,520 GPUs, K = 110). The ``src`` of HEAD and of the baseline are
extracted with ``git archive`` (``bench_speed.extract``); every measurement is a fresh subprocess
(same interpreter and packages, ``PYTHONPATH`` set to one tree), the trees alternating, so both
see the same machine load. A run times, with ``time.process_time``, building the instance and
``solve(instance, "oasis")`` separately, and reduces the result to the digest the golden tests
use (``tests/oasis_golden.digest``: SHA-256 of the result file with ``stats.timing`` removed,
per-job admission, completion, planned completion and payoff); the two trees must give the same
digest (the script stops otherwise). HEAD's schedule of each case is also validated.

    nice -n 10 .venv/bin/python benchmarks/bench_philly.py              # baseline: main
    nice -n 10 .venv/bin/python benchmarks/bench_philly.py --days 3     # a quick look
    nice -n 10 .venv/bin/python benchmarks/bench_philly.py --full-baseline  # main on 550 too
    nice -n 10 .venv/bin/python benchmarks/bench_philly.py --profile   # and where the time goes

Writes benchmarks/results/philly.md (and the raw numbers to philly.json; other ``--days`` go to
philly_<days>d.md).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from bench_speed import ROOT, extract

RESULTS = ROOT / "benchmarks" / "results"
# name -> PhillyCluster keyword arguments (philly_instance's cluster)
CLUSTERS = {"philly-120": {},
            "philly-550": {"racks": 55, "servers_per_rack": 8, "ps_per_rack": 2}}

WORKER = r"""
import json, sys, time
sys.path.insert(0, sys.argv[3])  # tests/, for the golden digest
import numpy as np
from oasis_golden import digest
from oasis_opt import solve, validate
from oasis_opt.workloads.traces import PhillyCluster, philly_instance
days, cluster, check = float(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[4] == "1"
t0 = time.process_time()
inst = philly_instance("2017-11-01", days, seed=0, cluster=PhillyCluster(**cluster))
load = time.process_time() - t0
t0 = time.process_time()
s = solve(inst, "oasis", max_work=float("inf"))  # 550 servers: over the default limit
cpu = time.process_time() - t0
dec = [d for d in s.stats["timing"]["job_decision_s"] if d is not None]
d = digest(inst, s)
print(json.dumps({"load_s": load, "cpu_s": cpu, "jobs": inst.I, "T": inst.horizon,
                  "H": inst.H, "K": inst.K, "admitted": d["admitted"],
                  "total_utility": d["total_utility"], "sha256": d["sha256"],
                  "jobs_digest": json.dumps(d["jobs"]),
                  "valid": validate(inst, s).ok if check else None,
                  "decision_ms": [1e3 * float(np.median(dec)),
                                  1e3 * float(np.percentile(dec, 95)), 1e3 * max(dec)]}))
"""


PROFILE = r"""
import cProfile, json, pstats, sys
from oasis_opt import solve
from oasis_opt.workloads.traces import philly_instance


def top(prof, n):
    st = pstats.Stats(prof)
    total = st.total_tt
    rows = []
    for (path, line, fn), (cc, nc, tt, ct, _) in st.stats.items():
        where = path.split("oasis_opt/")[-1] if "oasis_opt/" in path else fn
        rows.append((f"{where}:{line}({fn})" if "oasis_opt/" in path else fn, nc, tt, ct,
                     "oasis_opt/" in path))
    own = sorted(rows, key=lambda r: -r[2])[:n]
    cum = sorted((r for r in rows if r[4]), key=lambda r: -r[3])[:n]
    pack = (lambda rs: [[r[0], r[1], r[2] / total, r[3] / total] for r in rs])
    return {"total_s": total, "own": pack(own), "cumulative": pack(cum)}


days = float(sys.argv[1])
load = cProfile.Profile()
load.enable()
inst = philly_instance("2017-11-01", days, seed=0)
load.disable()
run = cProfile.Profile()
run.enable()
solve(inst, "oasis")
run.disable()
print(json.dumps({"load": top(load, 10), "solve": top(run, 16)}))
"""


def profile(src: Path, days: float) -> dict:
    """cProfile of building the month's instance and of OASiS's solve (the 120-server cluster):
    the functions with the largest own time and, among the package's, cumulative time."""
    env = {**os.environ, "PYTHONPATH": str(src), "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", PROFILE, str(days)], env=env,
                         capture_output=True, text=True, cwd=src.parent)
    if out.returncode:
        raise SystemExit(f"{src}: the profile failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def profile_lines(name: str, prof: dict) -> list[str]:
    lines = []
    for part, title in (("load", "building the instance"), ("solve", "`solve(instance, \"oasis\")`")):
        p = prof[part]
        lines += ["", f"**{name}: {title}** (cProfile, {p['total_s']:.1f} s under the profiler; "
                  "shares of that total)", "",
                  "| function (own time) | calls | own | cumulative |", "|---|---:|---:|---:|"]
        lines += [f"| `{f}` | {n} | {own:.1%} | {cum:.1%} |" for f, n, own, cum in p["own"]]
        lines += ["", "| package function (cumulative) | calls | own | cumulative |",
                  "|---|---:|---:|---:|"]
        lines += [f"| `{f}` | {n} | {own:.1%} | {cum:.1%} |" for f, n, own, cum in p["cumulative"]]
    return lines


def run(src: Path, days: float, cluster: dict, check: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", WORKER, str(days), json.dumps(cluster),
                          str(ROOT / "tests"), "1" if check else "0"],
                         env=env, capture_output=True, text=True, cwd=src.parent)
    if out.returncode:
        raise SystemExit(f"{src}: the run failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="main", help="git ref to compare with (default main)")
    ap.add_argument("--days", type=float, default=30.0, help="days of submissions (default 30)")
    ap.add_argument("--repeats", type=int, default=1, help="runs per tree and case")
    ap.add_argument("--full-baseline", action="store_true",
                    help="also run the baseline on the 550-server cluster (slow)")
    ap.add_argument("--profile", action="store_true",
                    help="also profile both trees (120 servers) and add where the time goes")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    git = (lambda *a: subprocess.run(["git", *a], cwd=ROOT, check=True, capture_output=True,
                                     text=True).stdout.strip())
    base, head = git("rev-parse", "--short", args.baseline), git("rev-parse", "--short", "HEAD")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        trees = {name: extract(ref, Path(tmp) / name)
                 for name, ref in (("baseline", args.baseline), ("current", "HEAD"))}
        for name, cluster in CLUSTERS.items():
            which = ("baseline", "current") if name == "philly-120" or args.full_baseline \
                else ("current",)
            got: dict[str, list[dict]] = {w: [] for w in which}
            for r in range(args.repeats):
                for w in (which if r % 2 == 0 else which[::-1]):
                    got[w].append(run(trees[w], args.days, cluster, check=w == "current" and r == 0))
                    x = got[w][-1]
                    print(f"{name} {w}: load {x['load_s']:.1f} s, solve {x['cpu_s']:.1f} CPU s, "
                          f"{x['admitted']} admitted", flush=True)
            c = got["current"][0]
            if "baseline" in got:
                b = got["baseline"][0]
                keys = ("sha256", "jobs_digest", "admitted", "total_utility")
                if any(b[k] != c[k] for k in keys):
                    raise SystemExit(f"{name}: results differ: baseline {b['sha256']} "
                                     f"{b['total_utility']}, current {c['sha256']} "
                                     f"{c['total_utility']}")
            med = {w: statistics.median(x["cpu_s"] for x in v) for w, v in got.items()}
            load = {w: statistics.median(x["load_s"] for x in v) for w, v in got.items()}
            dec = {w: [statistics.median(x["decision_ms"][i] for x in v) for i in range(3)]
                   for w, v in got.items()}
            rows.append({"cluster": name, **{k: c[k] for k in ("jobs", "T", "H", "K", "admitted",
                                                             "total_utility", "sha256", "valid")},
                         "cpu_s": med, "load_s": load, "decision_ms": dec,
                         "ratio": med["baseline"] / med["current"] if "baseline" in med else None})
        profiles = ({w: profile(trees[w], args.days) for w in ("baseline", "current")}
                    if args.profile else {})
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cmd = "python benchmarks/bench_philly.py " + " ".join(sys.argv[1:])
    lines = [f"# Philly replay with OASiS ({args.days:g} days from 2017-11-01): HEAD ({head}) "
             f"against {args.baseline} ({base})", "",
             f"Written {stamp} on {platform.machine()}, {os.cpu_count()} CPUs (shared), Python "
             f"{platform.python_version()}, by `{cmd.strip()}`.", "",
             f"CPU seconds (`time.process_time()`, median over {args.repeats} run(s) per tree, "
             "each a fresh subprocess, the trees alternating) of building the instance (load) and "
             "of `solve(instance, \"oasis\")`. Decision ms: OASiS's per-decision wall clock "
             "(median / p95 / max). `sha256`: the result file with `stats.timing` removed "
             "(`tests/oasis_golden.digest`); where both trees ran, their digests (file and per "
             "job) are equal. `valid`: HEAD's schedule passes `oasis_opt.validate`.", "",
             "| cluster | H | K | jobs | T | admitted | total utility | valid | baseline load s "
             "| current load s | baseline solve CPU s | current solve CPU s | speed-up | "
             "baseline decision ms | current decision ms | sha256 |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    fmt = (lambda x: "-" if x is None else f"{x:.1f}")
    fmd = (lambda x: "-" if x is None else f"{x[0]:.2f} / {x[1]:.1f} / {x[2]:.0f}")
    for r in rows:
        lines.append(f"| {r['cluster']} | {r['H']} | {r['K']} | {r['jobs']} | {r['T']} | "
                     f"{r['admitted']} | {float(r['total_utility']):.1f} | {r['valid']} | "
                     f"{fmt(r['load_s'].get('baseline'))} | {fmt(r['load_s']['current'])} | "
                     f"{fmt(r['cpu_s'].get('baseline'))} | {fmt(r['cpu_s']['current'])} | "
                     + (f"{r['ratio']:.2f}x" if r["ratio"] else "-") + " | "
                     f"{fmd(r['decision_ms'].get('baseline'))} | "
                     f"{fmd(r['decision_ms']['current'])} | `{r['sha256'][:16]}` |")
    if profiles:
        lines += ["", "## Where the time goes", ""]
        lines += [f"Profiled with cProfile (its overhead inflates many small calls, so shares, "
                  f"not seconds, are what to read), 120 servers, each tree once."]
        for w, ref in (("baseline", f"{args.baseline} ({base})"), ("current", f"HEAD ({head})")):
            lines += profile_lines(ref, profiles[w])
    suffix = "" if args.days == 30 else f"_{args.days:g}d"
    out = Path(args.out) if args.out else RESULTS / f"philly{suffix}.md"
    out.write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps(
        {"written": stamp, "baseline": args.baseline, "baseline_commit": base, "head": head,
         "command": cmd.strip(), "days": args.days, "clusters": CLUSTERS, "rows": rows,
         "profiles": profiles},
        indent=1) + "\n")
    print("\n".join(lines))
    return 0 if all(r["valid"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
