"""OASiS decision time per job, per backend, on the paper's simulation workload.

For every cell (calibration, T, H + K) it generates a paper-sim instance (H = K = (H+K)/2) and
runs OASiS with the numpy backend; at a sample of decisions (evenly spaced over the run, so the
cluster is at every stage of filling up) it times ``best_schedule`` of every backend on the SAME
prices and free capacities, in rotating order, so ratios between backends are measured in one
run. JAX kernels are compiled before timing (compile time reported separately). Memory per
decision is the tracemalloc peak of one numpy ``best_schedule`` call (numpy and Python
allocations; XLA's own buffers are not visible to tracemalloc). Then whole 400-job runs
(T = 300, H = K = 50) are timed end to end for each calibration and backend. All backends
return the same plan (the tie rule of ``oasis_opt.online.dual``): only their speed differs.

Jobs per cell follow the paper's load (400 jobs per 100 servers per 300 slots), capped at
``--max-jobs``; the printed table says when a cell was capped. The reference backend is timed
only in the calibrated cell T = 100, H + K = 80, at every 4th timed decision (its DP is a
readable O(T W N) Python loop: about 0.3 s per job there, minutes per literal-calibration job).

    .venv/bin/python benchmarks/bench_oasis.py --quick      # T in {100, 300}, H+K in {80, 800}
    .venv/bin/python benchmarks/bench_oasis.py              # the full grid (long)
    .venv/bin/python benchmarks/bench_oasis.py --jax-platform auto   # JAX on its default device

JAX runs on the CPU unless ``--jax-platform`` says otherwise (``auto``: JAX's own choice, i.e. an
accelerator when one is installed; ``gpu``/``tpu``: that one or an error). The device every JAX
time was taken on is written in the table's header.

Writes the table to benchmarks/results/oasis.md (and the raw numbers to oasis.json).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
import tracemalloc
from datetime import datetime, timezone
from pathlib import Path

import numpy as np  # noqa: E402
from tqdm import tqdm  # noqa: E402

from oasis_opt.online.dual import Market, best_schedule  # noqa: E402
from oasis_opt.online.oasis import OasisPolicy  # noqa: E402
from oasis_opt.sim import simulate  # noqa: E402
from oasis_opt.workloads import paper_sim  # noqa: E402

RESULTS = Path(__file__).parent / "results"
PAPER_LOAD = 400 / (100 * 300)  # jobs per server per slot in the paper's largest run
REFERENCE_EVERY = 4  # the (slow) reference backend is timed at every 4th timed decision


class TimedOasis(OasisPolicy):
    """OASiS (numpy decisions) that times every backend at the sampled decisions."""

    def __init__(self, timed: set[int], backends: tuple[str, ...], reference_every: int,
                 bar=None):
        super().__init__(backend="numpy")
        self.timed, self.backends, self.bar = timed, backends, bar
        self.reference_every = reference_every
        self.times: list[dict[str, float]] = []  # one {backend: seconds} per timed decision
        self.memory: list[int] = []

    def on_arrival(self, job, t, state):
        if job in self.timed:
            args = (self.instance, job, Market(self.worker_price, self.ps_price,
                                               self.worker_free, self.ps_free))
            n = len(self.times)
            use = [b for b in self.backends if b != "reference" or n % self.reference_every == 0]
            times = {}
            for b in use[n % len(use):] + use[:n % len(use)]:  # rotating order
                t0 = time.perf_counter()
                best_schedule(*args, backend=b)
                times[b] = time.perf_counter() - t0
            self.times.append(times)
            tracemalloc.start()
            best_schedule(*args, backend="numpy")
            self.memory.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
        if self.bar is not None:
            self.bar.update(1)
        return super().on_arrival(job, t, state)


def run_cell(calibration: str, T: int, servers: int, max_jobs: int, timed_n: int, seed: int):
    from oasis_opt.online.dual_jax import warmup

    wanted = max(1, round(PAPER_LOAD * servers * T))
    jobs = min(wanted, max_jobs)
    inst = paper_sim(seed, jobs=jobs, horizon=T, worker_servers=servers // 2,
                     ps_servers=servers // 2, calibration=calibration)
    t0 = time.perf_counter()
    kernels = warmup(inst)
    compile_s = time.perf_counter() - t0
    order = sorted(range(inst.I), key=lambda i: (inst.arrival[i], i))
    step = max(1, len(order) // timed_n)
    timed = set(order[::step][:timed_n])
    small = calibration == "calibrated" and T <= 100 and servers <= 80
    backends = ("numpy", "jax") + (("reference",) if small else ())
    bar = tqdm(total=inst.I, desc=f"{calibration} T={T} H+K={servers}", unit="job", leave=False)
    policy = TimedOasis(timed, backends, REFERENCE_EVERY, bar)
    gc.collect()
    t0 = time.perf_counter()
    sched = simulate(inst, policy)
    run_s = time.perf_counter() - t0
    bar.close()
    own = [d for d in policy.decision_s if d is not None]
    cell = {"calibration": calibration, "T": T, "servers": servers, "jobs": inst.I,
            "jobs_paper_load": wanted, "capped": jobs < wanted, "timed": len(timed),
            "admitted": int(sum(sched.admitted)), "run_s": run_s,
            "jax_kernels": kernels, "jax_compile_s": compile_s,
            "numpy_all_median_ms": 1e3 * float(np.median(own)),
            "memory_peak_kib": {"median": float(np.median(policy.memory)) / 1024,
                                "max": float(np.max(policy.memory)) / 1024}}
    for b in backends:
        ts = 1e3 * np.array([d[b] for d in policy.times if b in d])
        cell[b] = {"median_ms": float(np.median(ts)), "p95_ms": float(np.percentile(ts, 95)),
                   "n": len(ts)}
    for b in backends[1:]:  # ratio of medians over the decisions where both were timed
        both = [d for d in policy.times if b in d]
        cell[f"{b}_over_numpy"] = (float(np.median([d[b] for d in both]))
                                   / float(np.median([d["numpy"] for d in both])))
    return cell


def whole_runs(seed: int, calibrations) -> list[dict]:
    """400 jobs, T = 300, H = K = 50, end to end (instance built, OASiS simulated, validated)."""
    from oasis_opt.model import validate
    from oasis_opt.online.dual_jax import warmup

    out = []
    for calibration in calibrations:
        inst = paper_sim(seed, jobs=400, horizon=300, worker_servers=50, ps_servers=50,
                         calibration=calibration)
        for backend in ("numpy", "jax"):
            compile_s = 0.0
            if backend == "jax":
                t0 = time.perf_counter()
                warmup(inst)
                compile_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            sched = simulate(inst, OasisPolicy(backend=backend))
            run_s = time.perf_counter() - t0
            assert validate(inst, sched).ok
            out.append({"calibration": calibration, "backend": backend, "run_s": run_s,
                        "compile_s": compile_s, "admitted": int(sum(sched.admitted)),
                        "total_utility": sched.total_utility})
    return out


def jax_device() -> str:
    """The device JAX computes on, e.g. ``cpu (TFRT_CPU_0)`` or ``gpu (NVIDIA H200)``."""
    import jax

    d = jax.devices()[0]
    return f"{d.platform} ({d.device_kind})"


def _fmt(d) -> str:
    return f"{d['median_ms']:.2f} / {d['p95_ms']:.2f}"


def table(cells: list[dict], runs: list[dict], args) -> str:
    lines = [
        "# OASiS decision time per job (dual subroutine), by backend",
        "",
        f"Written {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.machine()}, "
        f"{os.cpu_count()} CPUs (shared), Python {platform.python_version()}, "
        f"numpy {np.__version__}, jax {__import__('jax').__version__} (float64; JAX device: "
        f"{args.jax_device}). "
        "Cells measured by: " + "; ".join(f"`python {c}`" for c in args.commands) + ".",
        "",
        "Per cell: one paper-sim instance (H = K = (H+K)/2, seed "
        f"{args.seed}), OASiS run with numpy decisions; at evenly spaced decisions (column "
        "`timed`) every backend is timed on the same prices and free capacities (rotating "
        "order). "
        "Times are median / p95 in ms; ratios are medians over the same decisions. Memory: "
        "tracemalloc peak of one numpy decision (median / max, KiB). JAX kernels are compiled "
"before timing (compile column: compile time in that cell, 0 when an earlier cell of "
        "the same run already compiled the same shapes). Jobs follow the paper's load (400 "
        "jobs / 100 servers / 300 slots), capped per run (`--max-jobs`): a `*` marks a capped "
        "cell (paper load in brackets). Reference timed only in the calibrated cell T = 100, H+K = 80, at every "
        f"{REFERENCE_EVERY}th timed decision (its ratio over those decisions only).",
        "",
        "| calibration | T | H+K | jobs | admitted | timed | numpy ms (med / p95) | jax ms "
        "| jax/numpy | reference ms | ref/numpy | mem KiB (med / max) | jax compile s "
        "(kernels) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        jobs = f"{c['jobs']}" + (f"* ({c['jobs_paper_load']})" if c["capped"] else "")
        ref = c.get("reference")
        ref_cols = (f"{_fmt(ref)} | {c['reference_over_numpy']:.0f}x" if ref else "- | -")
        mem = c["memory_peak_kib"]
        lines.append(
            f"| {c['calibration']} | {c['T']} | {c['servers']} | {jobs} | {c['admitted']} | "
            f"{c['timed']} | {_fmt(c['numpy'])} | {_fmt(c['jax'])} | {c['jax_over_numpy']:.2f} | {ref_cols} | "
            f"{mem['median']:.0f} / {mem['max']:.0f} | "
            f"{c['jax_compile_s']:.1f} ({c['jax_kernels']}) |")
    if runs:
        lines += ["", "## Whole paper-sim runs: 400 jobs, T = 300, H = K = 50 (target <= 20 s)",
                  "", "| calibration | backend | run s | jax compile s (before the run) | "
                  "admitted | total utility |", "|---|---|---|---|---|---|"]
        for r in runs:
            lines.append(f"| {r['calibration']} | {r['backend']} | {r['run_s']:.2f} | "
                         f"{r['compile_s']:.1f} | {r['admitted']} | {r['total_utility']:.1f} |")
    targets = [c for c in cells if c["T"] == 100 and c["servers"] == 80]
    if targets:
        lines += ["", "Target: median <= 10 ms per job at T = 100, H + K = 80 (numpy: " +
                  ", ".join(f"{c['calibration']} {c['numpy']['median_ms']:.2f} ms"
                            for c in targets) + ")."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="T in {100, 300}, H+K in {80, 800}, at most 150 jobs per cell")
    ap.add_argument("--calibrations", default="calibrated,literal")
    ap.add_argument("--horizons", default=None, help="comma list (default 100,300,1000)")
    ap.add_argument("--servers", default=None, help="H+K, comma list (default 80,800,8000)")
    ap.add_argument("--max-jobs", type=int, default=None, help="cap per cell (default 400)")
    ap.add_argument("--timed", type=int, default=40, help="timed decisions per cell")
    ap.add_argument("--no-whole-runs", action="store_true")
    ap.add_argument("--whole-runs-only", action="store_true")
    ap.add_argument("--table-only", action="store_true",
                    help="only re-render OUT from OUT's .json")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jax-platform", default="cpu", choices=("cpu", "gpu", "tpu", "auto"),
                    help="where JAX runs (default cpu; auto: JAX's default device)")
    ap.add_argument("--out", default=str(RESULTS / "oasis.md"))
    ap.add_argument("--merge", action="store_true",
                    help="add to the cells already in OUT's .json (run the grid in pieces)")
    args = ap.parse_args(argv)
    if args.jax_platform != "auto":  # before jax is first imported (dual_jax imports it lazily)
        os.environ["JAX_PLATFORMS"] = args.jax_platform
    horizons = [int(x) for x in (args.horizons or ("100,300" if args.quick else
                                                   "100,300,1000")).split(",")]
    servers = [int(x) for x in (args.servers or ("80,800" if args.quick else
                                                 "80,800,8000")).split(",")]
    args.max_jobs = args.max_jobs or (150 if args.quick else 400)
    calibrations = args.calibrations.split(",")
    if args.table_only:  # re-render the markdown from the .json of earlier runs
        old = json.loads(Path(args.out).with_suffix(".json").read_text())
        args.commands = old.get("commands", [])
        args.jax_device = old.get("jax_device", "cpu (not recorded)")
        Path(args.out).write_text(table(old["cells"], old.get("whole_runs", []), args))
        print(Path(args.out).read_text())
        return 0
    args.jax_device = jax_device()
    print(f"JAX device: {args.jax_device}", flush=True)
    cells = []
    for calibration in ([] if args.whole_runs_only else calibrations):
        for T in horizons:
            for n in servers:
                cells.append(run_cell(calibration, T, n, args.max_jobs, args.timed, args.seed))
                c = cells[-1]
                print(f"{calibration:10s} T={T:5d} H+K={n:5d} jobs={c['jobs']:4d} "
                      f"numpy {_fmt(c['numpy'])} ms  jax {_fmt(c['jax'])} ms  "
                      f"jax/numpy {c['jax_over_numpy']:.2f}  run {c['run_s']:.1f} s", flush=True)
    runs = [] if args.no_whole_runs else whole_runs(args.seed, calibrations)
    out = Path(args.out)
    if args.merge and out.with_suffix(".json").exists():  # keep cells measured by earlier runs
        old = json.loads(out.with_suffix(".json").read_text())
        key = (lambda c: (c["calibration"], c["T"], c["servers"]))
        mine = {key(c) for c in cells}
        cells = [c for c in old["cells"] if key(c) not in mine] + cells
        cells.sort(key=lambda c: (c["calibration"], c["T"], c["servers"]))
        runs = runs or old.get("whole_runs", [])
        if old.get("jax_device", args.jax_device) != args.jax_device:
            raise SystemExit(f"--merge: {out} was measured with JAX on "
                             f"{old['jax_device']}, this run on {args.jax_device}")
        args.commands = old.get("commands", []) + [" ".join(sys.argv)]
    else:
        args.commands = [" ".join(sys.argv)]
    text = table(cells, runs, args)
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    out.with_suffix(".json").write_text(json.dumps({"cells": cells, "whole_runs": runs,
                                                    "commands": args.commands,
                                                    "jax_device": args.jax_device}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
