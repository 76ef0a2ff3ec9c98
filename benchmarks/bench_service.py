"""Load on the scheduling service: 8 clients submit 2,000 jobs to a policy-only service on loopback.

Starts ``oasis-opt serve --no-execute --port 0`` as its own process (policy-only: decisions and
the simulator's progress, no Ray) on the paper-sim cluster (T slots of ``--slot-s`` wall-clock
seconds), OASiS priced by a pricing file (the oracle pricing of a paper-sim history instance of
another seed, as ``estimate-pricing`` would write one). ``--clients`` threads, each with its own
keep-alive HTTP connection to 127.0.0.1, submit paper-sim jobs (no arrival: the next slot) until
``--jobs`` are accepted or ``--max-s`` seconds pass; then each polls ``GET /summary`` and
``GET /jobs``. The service's own slot lines say how long each slot's decision took. The
clients together send ``--rate`` submissions per second (each its share, on a fixed schedule, as
independent users would: 2,000 jobs at 40/s is 50 s); ``--rate 0`` sends each as soon as the
last answer came (the service's saturation throughput, and latency that is mostly queueing).

Reported, per window of accepted jobs (the 1st-100th, the 901st-1,000th, the 1,901st-2,000th):
p50 and p99 submit latency (request sent to response read, on the client), and the median and
largest slot-decision time of the slots decided while those jobs were accepted; throughput; and
the status polls' latency at the end. Target: p99 submit latency under 50 ms in every window,
and flat (the last window's p99 at most 2x the first's).

The same jobs are then sent back to back (``--no-saturated`` skips it). As a reference in the
same run, the same load with ``--reference-policy`` (default DRF, whose
start reads every job, so each slot after a submission rebuilds it and replays the slots decided
so far; ``/health``'s ``replays``) on ``--reference-jobs`` jobs: the submit path is the same,
the slot decisions grow.

    .venv/bin/python benchmarks/bench_service.py                      # 2,000 jobs, 8 clients
    .venv/bin/python benchmarks/bench_service.py --jobs 300 --no-reference   # a quick look

Bounded in count (``--jobs``) and time (``--max-s`` per run); loopback only. Writes
benchmarks/results/service.md (and .json).
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402

from oasis_opt.model.io import instance_to_dict, save_instance  # noqa: E402
from oasis_opt.online.pricing import oracle_pricing, save_pricing  # noqa: E402
from oasis_opt.workloads import generate  # noqa: E402

RESULTS = Path(__file__).parent / "results"
TARGET_P99_MS = 50.0
FLAT = 2.0  # the last window's p99 at most this times the first's
WINDOWS = ((1, 100), (901, 1000), (1901, 2000))
SERVING = re.compile(r"serving \S+ on http://127\.0\.0\.1:(\d+)")
SLOT_LINE = re.compile(r"slot (\d+) of \d+ done in [\d.]+ s \(decided in ([\d.]+) ms\)")


class Server:
    """``oasis-opt serve`` in a child process; its stderr read by a thread, slot lines stamped
    with the time they came."""

    def __init__(self, cluster: Path, pricing: Path, policy: str, slot_s: float):
        cmd = [sys.executable, "-m", "oasis_opt", "serve", "--cluster", str(cluster),
               "--policy", policy, "--slot-s", str(slot_s), "--no-execute", "--port", "0"]
        if policy in ("oasis", "oasis-topo"):
            cmd += ["--pricing", str(pricing)]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     text=True)
        self.port: int | None = None
        self.slots: list[tuple[float, int, float]] = []  # (time, slot, decision ms)
        self.log: list[str] = []
        self._ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(120) or self.port is None:
            self.stop()
            raise RuntimeError("the service did not start:\n" + "".join(self.log[-20:]))
        # the port is bound before the service starts; it answers once uvicorn listens
        for _ in range(600):
            try:
                health(self.port)
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("the service never answered /health:\n" + "".join(self.log[-20:]))

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)
            if self.port is None and (m := SERVING.search(line)):
                self.port = int(m.group(1))
                self._ready.set()
            elif m := SLOT_LINE.search(line):
                self.slots.append((time.monotonic(), int(m.group(1)), float(m.group(2))))
        self._ready.set()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def load(port: int, docs: list[dict], clients: int, max_s: float, rate: float) -> dict:
    """``clients`` threads submitting ``docs`` until all are in or ``max_s`` passes, job n at
    ``n / rate`` seconds from the start (``rate`` 0: at once); returns the accepted submissions
    ``(time, latency s)`` in acceptance order and the refusals. A latency runs from the moment
    the request was sent, not from its planned time."""
    lock = threading.Lock()
    accepted: list[tuple[float, float]] = []
    refused: list[tuple[int, str]] = []
    start = time.monotonic()
    deadline = start + max_s

    def client(c: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for n in range(c, len(docs), clients):
            if rate > 0:
                time.sleep(max(0.0, start + n / rate - time.monotonic()))
            if time.monotonic() >= deadline:
                break
            body = json.dumps(docs[n])
            t0 = time.monotonic()
            conn.request("POST", "/jobs", body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            text = resp.read()
            t1 = time.monotonic()
            with lock:
                if resp.status == 201:
                    accepted.append((t1, t1 - t0))
                else:
                    refused.append((resp.status, text.decode()[:200]))
        conn.close()

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return {"accepted": sorted(accepted), "refused": refused,
            "wall_s": time.monotonic() - start}


def polls(port: int, clients: int, rounds: int) -> dict[str, list[float]]:
    """Each client polls ``/summary`` and ``/jobs`` ``rounds`` times: latencies in seconds."""
    out: dict[str, list[float]] = {"/summary": [], "/jobs": []}
    lock = threading.Lock()

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        for _ in range(rounds):
            for path in out:
                t0 = time.monotonic()
                conn.request("GET", path)
                resp = conn.getresponse()
                resp.read()
                with lock:
                    out[path].append(time.monotonic() - t0)
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return out


def health(port: int) -> dict:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/health")
    doc = json.loads(conn.getresponse().read())
    conn.close()
    return doc


def run(policy: str, n_jobs: int, rate: float, args, cluster: Path, pricing: Path,
        docs: list[dict]) -> dict:
    server = Server(cluster, pricing, policy, args.slot_s)
    try:
        assert server.port is not None
        got = load(server.port, docs[:n_jobs], args.clients, args.max_s, rate)
        polled = polls(server.port, args.clients, args.poll_rounds)
        state = health(server.port)
    finally:
        server.stop()
    accepted = got["accepted"]
    lat_ms = np.array([lat for _, lat in accepted]) * 1e3
    times = np.array([t for t, _ in accepted])
    windows = []
    for lo, hi in WINDOWS:
        if len(accepted) < hi:
            continue
        w = lat_ms[lo - 1:hi]
        start, end = times[lo - 1], times[hi - 1]
        # slots whose decision ended while these jobs were accepted (or the next after)
        dec = [ms for when, _, ms in server.slots if start <= when <= end] or \
              [ms for when, _, ms in server.slots if when > end][:1]
        windows.append({"jobs": f"{lo}-{hi}", "submit_p50_ms": float(np.median(w)),
                        "submit_p99_ms": float(np.percentile(w, 99)),
                        "submit_max_ms": float(w.max()),
                        "decision_median_ms": float(np.median(dec)) if dec else None,
                        "decision_max_ms": float(max(dec)) if dec else None,
                        "slots": len(dec)})
    return {"policy": policy, "rate": rate, "jobs_asked": n_jobs, "accepted": len(accepted),
            "refused": len(got["refused"]), "refusals": got["refused"][:3],
            "wall_s": got["wall_s"], "throughput_per_s": len(accepted) / got["wall_s"],
            "windows": windows, "slots_decided": len(server.slots),
            "replays": state.get("replays"),
            "poll_summary_p50_ms": 1e3 * float(np.median(polled["/summary"])),
            "poll_jobs_p50_ms": 1e3 * float(np.median(polled["/jobs"]))}


def _label(row: dict) -> str:
    return f"{row['policy']}, " + (f"{row['rate']:g}/s" if row["rate"] else "back to back")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--rate", type=float, default=40.0,
                    help="submissions per second, all clients together (0: back to back)")
    ap.add_argument("--slot-s", type=float, default=0.25)
    ap.add_argument("--horizon", type=int, default=300)
    ap.add_argument("--max-s", type=float, default=180.0, help="bound on each run's load phase")
    ap.add_argument("--poll-rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=11, help="the submitted jobs' paper-sim seed")
    ap.add_argument("--reference-policy", default="drf")
    ap.add_argument("--reference-jobs", type=int, default=300)
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument("--no-saturated", action="store_true",
                    help="skip the back-to-back run of OASiS (its saturation throughput)")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="bench-service-"))
    history = generate("paper-sim", seed=1, jobs=100, horizon=args.horizon)
    cluster = tmp / "cluster.json"
    save_instance(history.with_jobs(()), cluster)
    pricing = tmp / "pricing.json"
    save_pricing(oracle_pricing(history), pricing)
    jobs = generate("paper-sim", seed=args.seed, jobs=args.jobs, horizon=args.horizon)
    docs = []
    for n, d in enumerate(instance_to_dict(jobs)["jobs"]):
        d.pop("arrival")
        d["id"] = f"bench-{n + 1}"
        docs.append(d)

    rows = [run("oasis", args.jobs, args.rate, args, cluster, pricing, docs)]
    if args.rate and not args.no_saturated:
        rows.append(run("oasis", args.jobs, 0.0, args, cluster, pricing, docs))
    if not args.no_reference:
        rows.append(run(args.reference_policy, args.reference_jobs, args.rate, args, cluster,
                        pricing, docs))
    main_row = rows[0]
    w = main_row["windows"]
    met = bool(w) and all(x["submit_p99_ms"] < TARGET_P99_MS for x in w) and \
        w[-1]["submit_p99_ms"] <= FLAT * w[0]["submit_p99_ms"]
    machine = {"cpus": os.cpu_count(), "platform": platform.platform(),
               "python": platform.python_version(),
               "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
               "when": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    lines = [f"# The scheduling service under load ({args.clients} clients, loopback)", "",
             f"Policy-only `oasis-opt serve` (no Ray) on the paper-sim cluster, T = "
             f"{args.horizon} slots of {args.slot_s:g} s; jobs from paper-sim seed "
             f"{args.seed}, sent at the rate of each run (jobs/s sent; 'back to back': each "
             f"client sends when its last answer came). Machine: {machine['cpus']} CPUs, "
             f"{machine['platform']}, Python {machine['python']}, load average at the end "
             f"{machine['load_average']}.", "",
             "| run | jobs accepted | refused | wall s | jobs/s | slots | replays | "
             "/summary p50 ms | /jobs p50 ms |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {_label(r)} | {r['accepted']} | {r['refused']} | {r['wall_s']:.1f} | "
                     f"{r['throughput_per_s']:.0f} | {r['slots_decided']} | {r['replays']} | "
                     f"{r['poll_summary_p50_ms']:.0f} | {r['poll_jobs_p50_ms']:.0f} |")
    lines += ["", "| run | accepted jobs | submit p50 ms | submit p99 ms | submit max ms | "
              "slot decision median ms | slot decision max ms | slots |",
              "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        for x in r["windows"]:
            dm = "-" if x["decision_median_ms"] is None else f"{x['decision_median_ms']:.1f}"
            dx = "-" if x["decision_max_ms"] is None else f"{x['decision_max_ms']:.1f}"
            lines.append(f"| {_label(r)} | {x['jobs']} | {x['submit_p50_ms']:.1f} | "
                         f"{x['submit_p99_ms']:.1f} | {x['submit_max_ms']:.1f} | {dm} | {dx} | "
                         f"{x['slots']} |")
    lines += ["", f"Target: OASiS's p99 submit latency at {_label(main_row)} under "
              f"{TARGET_P99_MS:.0f} ms in every window and the last window's at most {FLAT:g}x "
              f"the first's: {'met' if met else 'NOT met'}. Back to back, latency is mostly "
              "queueing (eight requests in flight for one server)."]
    if not args.no_reference:
        ref = rows[-1]
        lines.append(f"Reference: {ref['policy']} replays its policy after each submission "
                     f"({ref['replays']} replays for {ref['accepted']} jobs).")
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    suffix = "" if args.jobs == 2000 else f"_{args.jobs}"
    (out / f"service{suffix}.md").write_text(text)
    (out / f"service{suffix}.json").write_text(json.dumps(
        {"rows": rows, "target_met": met, "machine": machine,
         "args": vars(args)}, indent=1, default=str) + "\n")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
