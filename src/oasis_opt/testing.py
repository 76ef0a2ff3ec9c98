"""Hypothesis strategies for random, valid problem instances (needs the ``dev`` extra).

Shared by every test suite that property-tests a policy: ``instances()`` draws small instances
whose jobs are individually feasible on an empty cluster, sized so that exact solvers stay fast;
``hetero_instances()`` draws the same with accelerator types (GPU generations and, in some, a CPU
type), per-type speeds and demands, units and ``span_types``.
"""
# no ``from __future__ import annotations``: @st.composite keeps these functions' annotations,
# which the API reference resolves in hypothesis's namespace unless they are objects already
from ._extras import require

require("hypothesis", extra="dev", feature="oasis_opt.testing")
from hypothesis import strategies as st  # noqa: E402

from .model import DEFAULT_RESOURCES, Instance, Job, JobType, Server, Utility

_CLASSES = ("time-insensitive", "time-sensitive", "time-critical")


@st.composite
def utilities(draw) -> tuple[Utility, str]:
    cls = draw(st.sampled_from(_CLASSES))
    decay = {"time-insensitive": st.just(0.0),
             "time-sensitive": st.floats(0.01, 1.0),
             "time-critical": st.floats(4.0, 6.0)}[cls]
    return Utility.sigmoid(draw(st.floats(1.0, 100.0)), draw(decay), draw(st.floats(1.0, 15.0))), cls


@st.composite
def servers(draw, prefix: str, n: int, gpus: bool) -> tuple[Server, ...]:
    out = []
    for h in range(n):
        cap = {"cpu": float(draw(st.integers(4, 16))), "mem": float(draw(st.integers(16, 64))),
               "storage": 100.0, "bw": float(draw(st.integers(10, 40)))}
        cap["gpu"] = float(draw(st.integers(0, 4))) if gpus else 0.0
        out.append(Server(f"{prefix}{h}", cap, rack=f"rack-{h % 2}"))
    return tuple(out)


@st.composite
def instances(draw, max_jobs: int = 4, max_horizon: int = 6, max_servers: int = 3,
              max_work: int = 12) -> Instance:
    """Small valid instances: every job fits one worker and its PSs on some server."""
    T = draw(st.integers(1, max_horizon))
    H = draw(st.integers(1, max_servers))
    K = draw(st.integers(1, max_servers))
    ws = draw(servers("w", H, True))
    ps = draw(servers("p", K, False))
    jobs = []
    for i in range(draw(st.integers(0, max_jobs))):
        host = draw(st.sampled_from(ws))
        phost = draw(st.sampled_from(ps))
        # per-container demands no larger than one chosen host, so each job can run
        worker = {r: float(draw(st.integers(0, int(host.capacity[r])))) for r in ("gpu", "cpu", "mem")}
        worker["storage"] = 5.0
        worker["bw"] = float(draw(st.integers(1, min(5, int(host.capacity["bw"])))))
        pdem = {"cpu": float(draw(st.integers(1, int(phost.capacity["cpu"])))),
                "mem": float(draw(st.integers(1, int(phost.capacity["mem"])))),
                "storage": 5.0,
                "bw": float(draw(st.integers(max(5, int(worker["bw"])), max(5, int(phost.capacity["bw"])))))}
        u, cls = draw(utilities())
        chunks = draw(st.integers(1, 4))
        epochs = draw(st.integers(1, 3))
        # chunk_time chosen so total work stays within max_work worker-slots
        chunk_time = draw(st.sampled_from([0.25, 0.5, 1.0, 1.5, 2.0]))
        while epochs * chunks * chunk_time > max_work and chunk_time > 0.25:
            chunk_time /= 2
        jobs.append(Job(f"j{i}", draw(st.integers(1, T)), epochs, chunks, chunk_time, worker, pdem,
                        u, cls))
    return Instance(T, DEFAULT_RESOURCES, ws, ps, tuple(jobs))


ACCELERATOR_NAMES = ("v100", "p100", "k80", "cpu")


@st.composite
def hetero_instances(draw, max_jobs: int = 4, max_horizon: int = 6, max_servers: int = 3,
                     max_work: int = 24, min_jobs: int = 0) -> Instance:
    """Small valid instances with accelerator types: 1 to 3 types drawn from
    ``ACCELERATOR_NAMES`` over 1 to ``max_servers`` worker servers ("cpu" servers have no GPU);
    ``min_jobs`` to ``max_jobs`` jobs, each listing some types with speeds 1..6 (a CPU type with
    its own demand and the slowest speed) or none (every type at its unit speed), with a unit u_i
    in 1..3, maybe spanning types, needing at most ``max_work`` work units; every job fits one
    worker and its PSs on a server of a type it can use."""
    T = draw(st.integers(1, max_horizon))
    names = draw(st.lists(st.sampled_from(ACCELERATOR_NAMES), min_size=1, max_size=3,
                          unique=True))
    H = draw(st.integers(1, max_servers))
    K = draw(st.integers(1, max_servers))
    ws = []
    for h in range(H):
        acc = names[h] if h < len(names) else draw(st.sampled_from(names))
        gpus = 0.0 if acc == "cpu" else float(draw(st.integers(1, 4)))
        cap = {"gpu": gpus, "cpu": float(draw(st.integers(4, 32))),
               "mem": float(draw(st.integers(16, 64))), "storage": 100.0,
               "bw": float(draw(st.integers(10, 40)))}
        ws.append(Server(f"w{h}", cap, rack=f"rack-{h % 2}", accelerator=acc))
    present = list(dict.fromkeys(s.accelerator for s in ws))
    ps = draw(servers("p", K, False))
    jobs = []
    for i in range(draw(st.integers(min_jobs, max_jobs))):
        host = draw(st.sampled_from(ws))
        phost = draw(st.sampled_from(ps))
        bw = float(draw(st.integers(1, min(5, int(host.capacity["bw"])))))

        def demand(server: Server) -> dict:
            d = {r: float(draw(st.integers(0, int(server.capacity[r])))) for r in ("cpu", "mem")}
            d["gpu"] = float(draw(st.integers(1 if server.capacity["gpu"] else 0,
                                              int(server.capacity["gpu"]))))
            return {**d, "storage": 5.0, "bw": bw}

        worker = demand(host)
        types = None
        if draw(st.booleans()):  # per-type speeds; the host's type always among them
            chosen = [host.accelerator] + draw(st.lists(st.sampled_from(present), unique=True))
            types = {}
            for t in dict.fromkeys(chosen):
                speed = 1 if t == "cpu" else draw(st.integers(1, 6))
                if t == "cpu":  # CPU mode: no GPU, its own demand
                    cpu_host = next(s for s in ws if s.accelerator == "cpu")
                    own = {**demand(cpu_host), "gpu": 0.0}
                    types[t] = JobType(speed, own)
                elif t == host.accelerator or draw(st.booleans()):
                    types[t] = JobType(speed)  # the job's own worker demand
                else:
                    types[t] = JobType(speed, {**worker, "gpu": float(draw(st.integers(1, 4)))})
        pdem = {"cpu": float(draw(st.integers(1, int(phost.capacity["cpu"])))),
                "mem": float(draw(st.integers(1, int(phost.capacity["mem"])))),
                "storage": 5.0,
                "bw": float(draw(st.integers(max(5, int(bw)), max(5, int(phost.capacity["bw"])))))}
        u, cls = draw(utilities())
        chunks = draw(st.integers(1, 4))
        epochs = draw(st.integers(1, 3))
        unit = draw(st.integers(1, 3))
        chunk_time = draw(st.sampled_from([0.25, 0.5, 1.0, 1.5, 2.0]))
        while epochs * chunks * chunk_time * unit > max_work and chunk_time > 0.25:
            chunk_time /= 2
        jobs.append(Job(f"j{i}", draw(st.integers(1, T)), epochs, chunks, chunk_time, worker, pdem,
                        u, cls, unit=unit, types=types, span_types=draw(st.booleans())))
    return Instance(T, DEFAULT_RESOURCES, tuple(ws), ps, tuple(jobs))
