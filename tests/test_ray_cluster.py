"""``--address``: the executor and a sweep join a real two-node Ray cluster on this machine.

The cluster is what the README's "Running schedules for real" tells a user to start: a head node
(``ray start --head``) declaring the worker servers of a small instance as custom resources
``server:<id>``, and a second node (``ray start --address HEAD``) declaring its PS server, so a
job's workers and PSs can only run on different nodes. Both nodes are children of this test
(``ray start --block``, each in its own process group) and are stopped by their pids, never by
``ray stop`` (which stops every Ray of the machine). The drivers (``python -m oasis_opt execute /
reproduce ... --address``) run in subprocesses, as a user runs them.

Nothing asserts on seconds: the waits are hang guards. What is checked is what ``--address``
promises whatever the load: the execution report is the schedule's (workers, PSs and
mini-batches per job-slot, as the containers reported them), the containers of a job held the
servers' resources on the nodes that declare them (the Ray node ids each container reported),
and the sweep's runs are computed on the cluster and stored.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from oasis_opt.model import PS, WORKER, Instance, Job, ScheduleBuilder, Server, Utility, validate
from oasis_opt.model.io import save_instance, save_result
from oasis_opt.runtime.ray_pool import descendants

pytestmark = [pytest.mark.ray,
              pytest.mark.skipif(not os.path.isdir("/proc/self/task") or not hasattr(os, "waitid"),
                                 reason="stops the nodes' processes via Linux /proc and waitid")]

RAY = Path(sys.executable).parent / "ray"
HEAD_SERVERS = ("w0", "w1")  # worker servers: resources of the head node
OTHER_SERVERS = ("p0",)  # the PS server: a resource of the second node only
UNITS = 16  # containers each node may hold per server (the schedule needs at most 2)
# hang guards (seconds), never speed checks: a node's start, a driver's run, a driver that must
# fail before it joins anything (the bug it catches is a hang of many minutes)
JOIN_GUARD_S = 300
DRIVER_GUARD_S = 900
REFUSED_GUARD_S = 300
# seconds the nodes get to stop their Ray processes after SIGTERM before the rest of their groups
# is killed (a graceful stop takes half a minute on a busy machine and buys this test nothing)
STOP_GRACE_S = 10
START_ATTEMPTS = 4  # a node that fails to start is started again (fresh ports), at most this often
STARTED = "This command will now block forever"  # what ``ray start --block`` says once it is up

CONFIG = {"learning_rate": 0.01, "weight_decay": 1e-4, "width": 16, "depth": 1,
          "batch_size": 32, "optimizer": "adam"}
# digits: 1,078 training examples in 4 chunks -> M = 1078 // (4 * 32) = 8 mini-batches per chunk
# pass; x = 0.5 worker-slots per chunk -> one worker-slot = M / x = 16 mini-batches
PER_WORKER_SLOT = 16
# job a: 2 workers (w0, w1) + 1 PS (p0), then restarted with 2 PSs (re-sharded): E N x = 2 * 4 *
# 0.5 = 4 worker-slots; job b: 1 worker (w0) + 1 PS (p0) in both slots (it keeps its containers):
# 1 * 4 * 0.5 = 2 worker-slots. Both complete in slot 2; every job-slot has its workers on the head
# node and its PSs on the other one.
ROWS = {"a": [(1, "w0", WORKER, 1), (1, "w1", WORKER, 1), (1, "p0", PS, 1),
              (2, "w0", WORKER, 1), (2, "w1", WORKER, 1), (2, "p0", PS, 2)],
        "b": [(1, "w0", WORKER, 1), (1, "p0", PS, 1), (2, "w0", WORKER, 1), (2, "p0", PS, 1)]}
EPOCHS = {"a": 2, "b": 1}


def small():
    """The instance (2 worker servers, 1 PS server, 2 jobs on the digits task) and its schedule."""
    dem = {"cpu": 1.0, "mem": 1.0, "bw": 1.0}
    ps_dem = {"cpu": 1.0, "mem": 1.0, "bw": 2.0}  # a PS serves 2 workers' bandwidth
    u = Utility.sigmoid(10.0, 1.0, 2.0)
    jobs = tuple(Job(name, 1, EPOCHS[name], 4, 0.5, dem, ps_dem, u,
                     task={"name": "digits-mlp", "config": CONFIG, "seed": seed})
                 for name, seed in (("a", 1), ("b", 2)))
    worker = {"cpu": 2.0, "mem": 8.0, "bw": 10.0}
    ps = {"cpu": 4.0, "mem": 8.0, "bw": 10.0}
    inst = Instance(3, ("cpu", "mem", "bw"), tuple(Server(s, worker) for s in HEAD_SERVERS),
                    tuple(Server(s, ps) for s in OTHER_SERVERS), jobs)
    b = ScheduleBuilder(inst)
    for job in ROWS:
        b.admit(inst.job_index[job])
    b.add_array([(inst.job_index[job], t, inst.server_index[server], role, count)
                 for job, rows in ROWS.items() for t, server, role, count in rows])
    sched = b.build("hand")
    assert validate(inst, sched).ok and sched.completion == (2, 2)
    return inst, sched


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports free now (bound to port 0 together, then released)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def node_flags(servers, temp_dir: str) -> list[str]:
    """What every node of the test cluster is started with: one CPU, a small object store, the
    servers' resources, its own free ports (so that it meets no other Ray of the machine), Ray's
    files in ``temp_dir``, and ``--block`` (it runs as this test's child until stopped)."""
    ports = free_ports(6)
    names = ("--node-manager-port", "--object-manager-port", "--dashboard-agent-listen-port",
             "--dashboard-agent-grpc-port", "--metrics-export-port", "--runtime-env-agent-port")
    return ["--num-cpus", "1", "--object-store-memory", str(100 * 2**20),
            "--min-worker-port", "0", "--max-worker-port", "0",  # workers: ports the OS gives
            "--resources", json.dumps({f"server:{s}": UNITS for s in servers}),
            "--temp-dir", temp_dir, "--disable-usage-stats",
            *[x for name, port in zip(names, ports) for x in (name, str(port))], "--block"]


class Cluster:
    """A head node and a second node, ``ray start --block`` children of this process, each in
    its own process group; ``stop()`` ends both by their pids (``_stop``)."""

    def __init__(self, root: Path):
        self.temp_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's sockets: short paths
        self.root = root
        # the cluster's own token (Ray's token authentication, its default), not ~/.ray's
        self.env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
        self.nodes: list[subprocess.Popen] = []
        self.port = 0
        self.address = ""
        self.servers: dict[str, str] = {}

    def start(self) -> None:
        """The head, then the second node joining it; ``servers``: which node has which server."""
        def head() -> list[str]:
            self.port, dashboard = free_ports(2)
            self.address = f"127.0.0.1:{self.port}"
            return ["--head", "--port", str(self.port), "--include-dashboard=false",
                    "--dashboard-port", str(dashboard)]

        self._start("head", head, HEAD_SERVERS)
        self._start("other", lambda: ["--address", self.address], OTHER_SERVERS)
        self.servers = self.node_of()

    def _start(self, name: str, args, servers) -> None:
        """Start a node (``args()`` its own flags), again when it fails to start: Ray's start-up
        has fixed waits that a loaded machine can exceed (``runtime.ray_pool``), a node then
        exits; what it left running is killed (``_stop``)."""
        for attempt in range(1, START_ATTEMPTS + 1):
            path = self.root / f"{name}-{attempt}.log"
            with open(path, "w") as log:
                node = subprocess.Popen([str(RAY), "start", *args(),
                                         *node_flags(servers, self.temp_dir)],
                                        env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
            self.nodes.append(node)
            deadline = time.monotonic() + JOIN_GUARD_S
            while node.poll() is None and STARTED not in path.read_text():
                assert time.monotonic() < deadline, f"{name} did not start: {path}"
                time.sleep(0.5)
            if node.returncode is None:
                return
            self.nodes.remove(node)
            _stop(node, 0)
        raise AssertionError(f"{name} did not start in {START_ATTEMPTS} attempts: "
                             f"{path.read_text()[-3000:]}")

    def node_of(self) -> dict[str, str]:
        """``{server id: Ray node id}`` once both nodes are alive with their resources (asked
        of the cluster by a driver in a subprocess: this process may hold a local Ray)."""
        script = (
            "import json, sys, time, ray\n"
            "ray.init(address=sys.argv[1], include_dashboard=False, logging_level='ERROR')\n"
            "deadline = time.monotonic() + float(sys.argv[2])\n"
            "while True:\n"
            "    alive = [n for n in ray.nodes() if n['Alive']]\n"
            "    found = {r.split(':', 1)[1]: n['NodeID'] for n in alive for r in n['Resources']\n"
            "             if r.startswith('server:')}\n"
            "    if len(alive) == 2 and len(found) == int(sys.argv[3]) or "
            "time.monotonic() > deadline:\n"
            "        break\n"
            "    time.sleep(0.5)\n"
            "print(json.dumps({'nodes': len(alive), 'servers': found}))\n")
        res = subprocess.run([sys.executable, "-c", script, self.address, str(JOIN_GUARD_S),
                              str(len(HEAD_SERVERS + OTHER_SERVERS))], env=self.env,
                             capture_output=True, text=True, timeout=2 * JOIN_GUARD_S)
        assert res.returncode == 0, res.stderr[-3000:]
        seen = json.loads(res.stdout.strip().splitlines()[-1])
        assert seen["nodes"] == 2, (seen, sorted(p.name for p in self.root.iterdir()))
        return seen["servers"]

    def stop(self) -> None:
        """Both nodes (``_stop``), then Ray's files."""
        for node in self.nodes:
            _signal_group(node.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for node in self.nodes:
            _stop(node, deadline - time.monotonic())
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _stop(node: subprocess.Popen, grace_s: float) -> None:
    """End a node by its pid: SIGTERM to its process group (``ray start`` then stops its Ray
    processes), and once ``ray start`` ended or after ``grace_s`` SIGKILL to what is left: the
    group and the node's descendants (Ray's workers, the containers, run in process groups of
    their own under the node's raylet); then reap it. Until then its pid, the group's id, cannot
    be reused."""
    _signal_group(node.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while (time.monotonic() < deadline
           and os.waitid(os.P_PID, node.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None):
        time.sleep(0.2)
    left = descendants({node.pid}) - {node.pid}
    _signal_group(node.pid, signal.SIGKILL)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:  # ended meanwhile
            pass
    node.wait()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:  # the group is gone
        pass


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The two-node cluster: head (the worker servers) and a second node (the PS server)."""
    pytest.importorskip("ray")
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        c.start()
        yield c
    finally:
        c.stop()


def run_driver(cluster, args: list[str], cwd: Path, env: dict | None = None,
               ok: bool = True) -> subprocess.CompletedProcess:
    """``python -m oasis_opt ARGS --address HEAD`` in ``cwd``: the user's command, in a process of
    its own, by default with the cluster's token and ``RAY_AUTH_MODE=token`` in its environment
    (Ray sends its token to an address given explicitly only when told to); ``ok``: it must
    succeed."""
    env = {**(cluster.env if env is None else env), "MPLBACKEND": "Agg", "JAX_PLATFORMS": "cpu"}
    res = subprocess.run([sys.executable, "-m", "oasis_opt", *args, "--address", cluster.address],
                         cwd=cwd, env=env, capture_output=True, text=True, timeout=DRIVER_GUARD_S)
    assert res.returncode == 0 or not ok, f"{args}\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}"
    return res


def test_execute_runs_each_job_across_both_nodes(cluster, tmp_path):
    """Bug caught: ``execute --address`` not joining the cluster, or placing a container off the
    node that declares its server (the report's node ids), or running other counts than the
    schedule's on a cluster."""
    from oasis_opt.runtime.report import load_report

    inst, sched = small()
    save_instance(inst, tmp_path / "inst.json")
    save_result(inst, sched, tmp_path / "sched.json")
    run_driver(cluster, ["execute", "inst.json", "sched.json", "--slot-s", "1", "--open-loop",
                         "--no-progress", "--out", "report.json"], tmp_path)
    doc = load_report(tmp_path / "report.json").doc
    assert doc["ray"] == {"address": cluster.address, "nodes": 2}
    head, other = cluster.servers["w0"], cluster.servers["p0"]
    assert cluster.servers == {"w0": head, "w1": head, "p0": other} and head != other
    for job in doc["jobs"]:
        rows = ROWS[job["id"]]
        assert job["real"]["completion_slot"] == 2
        assert (job["minibatches"]["real"] == job["minibatches"]["planned"]
                == EPOCHS[job["id"]] * 2 * PER_WORKER_SLOT)
        assert [s["slot"] for s in job["slots"]] == [1, 2]
        for s in job["slots"]:
            planned = sorted((server, ("worker", "ps")[role], count)
                             for t, server, role, count in rows if t == s["slot"])
            assert sorted((x["server"], x["role"], x["count"]) for x in s["servers"]) == planned
            # each container on the node that declares its server: workers on the head, PSs not
            assert {(x["role"], x["node"]) for x in s["servers"]} == {("worker", head),
                                                                    ("ps", other)}
            workers = sum(c for t, _, role, c in rows if t == s["slot"] and role == WORKER)
            ps = sum(c for t, _, role, c in rows if t == s["slot"] and role == PS)
            assert (s["workers"], s["ps"]) == (workers, ps)
            assert s["real_minibatches"] == s["planned_minibatches"] == PER_WORKER_SLOT * workers
            assert s["gradients"] == [workers] * s["iterations"]


def test_reproduce_quick_sweep_runs_on_both_nodes(cluster, tmp_path):
    """Bug caught: ``reproduce --address`` starting a Ray of its own (or running in-process)
    instead of joining the cluster, or a sweep that does not use the second node's CPU."""
    res = run_driver(cluster, ["reproduce", "testbed", "--quick", "--results", "results",
                               "--out", "figs"], tmp_path)
    assert "testbed:" in res.stdout and (tmp_path / "figs" / "testbed.md").is_file()
    records = [json.loads(p.read_text()) for p in (tmp_path / "results").glob("*.json")]
    # the calibration's sweep and the figure's, every run computed now and stored
    log = (tmp_path / "figs" / "reproduce.md").read_text()
    sweeps = [(int(n), int(m)) for n, m in re.findall(r"(\d+) runs, (\d+) computed now", log)]
    assert len(sweeps) == 2 and all(n == m for n, m in sweeps)
    assert len(records) == sum(n for n, _ in sweeps) > 2
    # every run ran on a node of the cluster; with one CPU a node and several runs in flight,
    # on both of them
    assert {r["env"]["ray_node"] for r in records} == set(cluster.servers.values())


def test_a_driver_without_the_token_mode_is_told_what_to_set(cluster, tmp_path):
    """Bug caught: ``--address`` to a cluster with token authentication from an environment
    without ``RAY_AUTH_MODE=token`` (the cluster refuses the driver) ending in an "internal
    error" instead of a failure that says what to set."""
    env = {k: v for k, v in cluster.env.items() if k != "RAY_AUTH_MODE"}
    res = run_driver(cluster, ["reproduce", "testbed", "--quick", "--results", "results",
                               "--out", "figs"], tmp_path, env=env, ok=False)
    assert res.returncode == 3, res.stderr[-3000:]
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith(f"oasis-opt: failure: --address: could not join the Ray cluster at "
                           f"{cluster.address}"), last
    assert "RAY_AUTH_MODE=token" in last and "internal error" not in last
    assert not (tmp_path / "results").exists()  # nothing ran


def test_an_address_where_nothing_listens_fails_at_once(tmp_path):
    """Bug caught: ``--address`` naming no running cluster (a typo, a head that is down) left to
    ``ray.init``, which retries for many minutes, instead of failing in one line."""
    address = f"127.0.0.1:{free_ports(1)[0]}"  # free: nothing listens there
    res = subprocess.run([sys.executable, "-m", "oasis_opt", "reproduce", "testbed", "--quick",
                          "--results", "results", "--out", "figs", "--address", address],
                         cwd=tmp_path, capture_output=True, text=True, timeout=REFUSED_GUARD_S)
    assert res.returncode == 3, res.stderr[-3000:]
    assert res.stderr.strip().splitlines()[-1] == (
        f"oasis-opt: failure: --address: could not join the Ray cluster at {address} "
        "(ConnectionRefusedError: [Errno 111] Connection refused): nothing accepts connections "
        "there (is the head node running?)")
    assert not (tmp_path / "results").exists()
