"""Placement-aware cost model: how long one training iteration takes where the containers landed.

The paper charges every worker the same time per mini-batch, tau_i + 2 e_i / b_i (p.3-4): the
worker's own link b_i is the only network cost, the PS side is never the bottleneck (constraint
(6)) and the network core is non-blocking. Here the cluster is a tree (``model.topology``:
server NICs, rack uplinks with an oversubscription ratio, optionally pod uplinks, a core), and a
job's iteration time depends on where its workers and PSs are (reference section 3.7):

    T_iter = T_comp + T_comm,    T_comp = tau_i / min over its worker servers of speed(GPU type)

**PS, synchronous (bottleneck link).** Each phase (push, then pull) moves S = e_i from every
worker, shard j (fraction f_j of S; balanced f_j = 1/p) to PS j. A phase lasts as long as the
most loaded resource needs:

    T_phase = max over resources l of bytes_l / cap_l,   T_comm = T_push + T_pull + 2 alpha hops

and pull mirrors push, so T_push = T_pull. Resources are per container (the bandwidth a
container reserves, b_i for a worker and B_i for a PS, is its NIC share) on every link of its
path to the core [choice: the "hose" model of a saturated, oversubscribed tree]:

* link l above subtree X (the server's own NIC link, the rack uplink, the pod uplink) gives each
  container under X the share ``reservation * r_l`` with ``r_l = min(1, bw_l / sum of the NICs
  under X)``: 1 for a server link and for a non-blocking uplink, ``1/o`` for an uplink with
  oversubscription o:1 when every server under it sends (the reference's "per-flow B_nic / o");
* a worker under X sends ``S (1 - F_X)`` across l (F_X: the shards held under X); a PS holding
  shard f_j under X receives ``f_j S (W - W_X)`` across l (W, W_X: workers in all and under X);
* traffic between a worker and a PS on the same server stays inside it, at ``node_bw``.

**Ring allreduce** [option]: ranks = workers in the topology's depth-first order, so each
subtree's ranks are contiguous and a ring crosses each partly used link once per direction:
``T_comm = 2 (n - 1) alpha + 2 ((n - 1) / n) S / min over crossed links (b_i r_l)``, hops inside a
server at ``node_bw``.

**Progress in the simulator** (``Instance.progress == "placement"``). With k workers in a slot
the paper credits k worker-slots. We credit

    progress = k * T_ref / T_actual                                            [worker-slots]

where T_ref is the same job (same k, same PS count p, same collective) on a non-blocking fabric
(every r_l = 1, traffic inside a server at the container's own bandwidth) with reference-speed
accelerators, and T_actual is its placement's time. For the PS model with constraint (6)
(p B_i >= k b_i) and balanced shards, ``T_ref = tau_i + 2 e_i / b_i``: exactly the paper's
per-mini-batch time, so a job placed with no crossing bottleneck progresses exactly as in the
paper (k worker-slots, bit for bit), and a job spread over oversubscribed uplinks progresses
slower: its effective chunk time in that slot is ``x_i * T_actual / T_ref``. Faster accelerators
(speed > 1) can give more than k. Jobs with no PS in a slot (PS model) or no workers progress 0.

Job parameters come from ``Job.provenance`` (``minibatch_time_s`` = tau_i and ``gradient_mb`` =
e_i, as the paper workloads record them; else ``model``, a name in ``costmodel.models``; else the
instance's ``meta["costmodel"]["default_model"]``, else ``models.DEFAULT_MODEL``). Options in
``instance.meta["costmodel"]``: ``collective`` ("ps" | "allreduce"), ``default_model``,
``gpu_speed`` ({server kind: speed}, overriding ``models.GPU_SPEED``). Latency (alpha) is 0 in
the simulator (microseconds against slots); the standalone ``iteration_time`` takes it.

Two implementations: ``iteration_time`` walks the topology graph (readable reference, also for
hand-computed examples); ``progress_kernel`` works on arrays for many (job, slot) groups at once
and is what the simulator (``placement_progress``) and the validator
(``placement_work_remaining``) both call, so they agree bit for bit. Tests hold them against each
other.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from .chunktime import MBIT_PER_MB, MBPS_PER_GBPS
from .models import DEFAULT_MODEL, GPU_SPEED, MODELS, get_model

SECONDS_PER_MB_PER_GBPS = MBIT_PER_MB / MBPS_PER_GBPS  # t [s] = size [MB] * 8 / (1000 * bw [Gbps])
COLLECTIVES = ("ps", "allreduce")
COSTMODEL_OPTIONS = ("collective", "default_model", "gpu_speed")
WORKER, PS = 0, 1


def transfer_s(size_mb: float, bw_gbps: float) -> float:
    """Seconds to move ``size_mb`` MB over ``bw_gbps`` Gbps."""
    return size_mb * SECONDS_PER_MB_PER_GBPS / bw_gbps


# ---- the readable reference: one placement, walking the topology graph -----------------------
@dataclass(frozen=True)
class IterationTime:
    """One iteration's time split (seconds). For allreduce, push = reduce-scatter half and
    pull = all-gather half. ``bottleneck`` names the most loaded resource."""

    compute_s: float
    push_s: float
    pull_s: float
    latency_s: float
    bottleneck: str

    @property
    def comm_s(self) -> float:
        return self.push_s + self.pull_s + self.latency_s

    @property
    def total_s(self) -> float:
        return self.compute_s + self.comm_s


def tensor_shards(tensors_mb, p: int) -> list[float]:
    """PS shard sizes when tensor i goes to PS i mod p (the Tiresias simulator's rule)."""
    if p < 1:
        raise ValueError(f"p: need at least one PS, got {p}")
    out = [0.0] * p
    for i, size in enumerate(tensors_mb):
        out[i % p] += float(size)
    return out


def _check_counts(name: str, counts: Mapping[str, int] | None, topology) -> dict[str, int]:
    out = {}
    for s, c in (counts or {}).items():
        if s not in topology.graph or topology.graph.nodes[s]["kind"] != "server":
            raise ValueError(f"{name}: {s!r} is not a server of the topology")
        if isinstance(c, bool) or int(c) != c or c < 0:
            raise ValueError(f"{name}[{s!r}]: count must be a non-negative integer, got {c!r}")
        if c:
            out[s] = int(c)
    return out


def _ratio(topology, node: str) -> float:
    """r_l of the link above ``node``: its bandwidth / the NICs under it, capped at 1."""
    parent = topology.parent[node]
    nic = sum(topology.link_bandwidth(s, topology.parent[s]) for s in topology.servers_under(node))
    return 1.0 if nic <= 0 else min(1.0, topology.link_bandwidth(node, parent) / nic)


def iteration_time(topology, workers: Mapping[str, int], ps: Mapping[str, int] | None = None, *,
                   model_mb: float, worker_bw_gbps: float, ps_bw_gbps: float | None = None,
                   compute_s: float = 0.0, speed: Mapping[str, float] | None = None,
                   collective: str = "ps", shards_mb=None, node_bw_gbps: float = math.inf,
                   latency_s: float = 0.0) -> IterationTime:
    """Time of one synchronous iteration of a job placed as ``workers`` / ``ps`` ({server id:
    containers}) on ``topology`` (reference section 3.7; see the module docstring).

    ``model_mb``: S, MB moved per worker per phase. ``worker_bw_gbps`` / ``ps_bw_gbps``: the
    bandwidth each worker / PS container reserves (its NIC share; the reference's B_nic when a
    task owns its node). ``compute_s``: compute time of one iteration at speed 1; ``speed``:
    {server id: accelerator speed} (missing = 1). ``shards_mb``: PS shard sizes in container
    order (servers in ``ps`` order, containers of one server consecutive; default S/p each;
    see ``tensor_shards``). ``node_bw_gbps``: bandwidth inside one server (PCIe / NVLink).
    ``latency_s``: alpha per message hop.
    """
    if collective not in COLLECTIVES:
        raise ValueError(f"collective: unknown {collective!r} (known: {', '.join(COLLECTIVES)})")
    if model_mb < 0 or not math.isfinite(model_mb):
        raise ValueError(f"model_mb: must be a finite number >= 0, got {model_mb!r}")
    if not worker_bw_gbps > 0:
        raise ValueError(f"worker_bw_gbps: must be > 0, got {worker_bw_gbps!r}")
    w = _check_counts("workers", workers, topology)
    p = _check_counts("ps", ps, topology)
    n = sum(w.values())
    if n == 0:
        raise ValueError("workers: a job needs at least one worker")
    speed = speed or {}
    compute = compute_s / min(float(speed.get(s, 1.0)) for s in w)
    up = {s: topology.path_to_root(s)[:-1] for s in set(w) | set(p)}  # nodes whose uplink is used

    def hops(a: str, b: str) -> int:
        pa, pb = topology.path_to_root(a), topology.path_to_root(b)
        common = len(set(pa) & set(pb))
        return (len(pa) - common) + (len(pb) - common)

    if collective == "allreduce":
        if n == 1:
            return IterationTime(compute, 0.0, 0.0, 0.0, "none (one worker)")
        order = [s for s in topology.servers_under(topology.root) for _ in range(w.get(s, 0))]
        chunk = model_mb / n  # bytes per ring step per rank
        worst, where = 0.0, ""
        for r in range(n):
            a, b = order[r], order[(r + 1) % n]
            if a == b:
                t, name = transfer_s(chunk, node_bw_gbps), f"intra-node {a}"
            else:
                crossed = ([v for v in up[a] if v not in up[b]]
                           + [v for v in up[b] if v not in up[a]])
                t, name = max((transfer_s(chunk, worker_bw_gbps * _ratio(topology, v)),
                               f"link above {v}") for v in crossed)
            if t > worst:
                worst, where = t, name
        steps = n - 1
        return IterationTime(compute, steps * worst, steps * worst, 2 * steps * latency_s, where)

    # PS: bottleneck-link model
    if not p:
        raise ValueError("ps: the PS model needs at least one PS")
    if ps_bw_gbps is None or not ps_bw_gbps > 0:
        raise ValueError(f"ps_bw_gbps: must be > 0, got {ps_bw_gbps!r}")
    containers = [s for s in p for _ in range(p[s])]
    shards = ([model_mb / len(containers)] * len(containers) if shards_mb is None
              else [float(x) for x in shards_mb])
    if len(shards) != len(containers):
        raise ValueError(f"shards_mb: {len(shards)} shards for {len(containers)} PS containers")
    if not math.isclose(sum(shards), model_mb, rel_tol=1e-9, abs_tol=1e-12):
        raise ValueError(f"shards_mb: shards sum to {sum(shards):g} MB, "
                         f"the model is {model_mb:g} MB")

    def under(v: str, s: str) -> bool:
        return v in up[s]

    loads: list[tuple[float, str]] = [(0.0, "none")]
    for s in w:  # every worker container on s: to the PSs outside each subtree on its path
        for v in up[s]:
            out = sum(f for f, q in zip(shards, containers) if not under(v, q))
            loads.append((transfer_s(out, worker_bw_gbps * _ratio(topology, v)),
                          f"worker on {s}, link above {v}"))
        local = sum(f for f, q in zip(shards, containers) if q == s)
        if local:
            loads.append((transfer_s(local, node_bw_gbps), f"intra-node {s}"))
    for f, q in zip(shards, containers):  # each PS container: its shard from the workers outside
        for v in up[q]:
            outside = sum(c for s, c in w.items() if not under(v, s))
            loads.append((transfer_s(f * outside, ps_bw_gbps * _ratio(topology, v)),
                          f"PS on {q}, link above {v}"))
        if w.get(q, 0):
            loads.append((transfer_s(f * w[q], node_bw_gbps), f"intra-node {q}"))
    phase, where = max(loads)
    max_hops = max(hops(s, q) for s in w for q in p)
    return IterationTime(compute, phase, phase, 2 * max_hops * latency_s, where)


# ---- instance context: arrays of the topology and of the jobs, cached per instance ------------
@dataclass(frozen=True)
class _Context:
    links: np.ndarray      # (S, D) ids of the links above each server (server link first), -1 pad
    link_nodes: tuple      # (L,) the topology node below each link (a link is named by its child)
    ratio: np.ndarray      # (L,) r_l
    speed: np.ndarray      # (S,) accelerator speed of each server's kind
    compute_s: np.ndarray  # (I,) tau_i at speed 1
    model_mb: np.ndarray   # (I,) S = e_i
    uses_gpu: np.ndarray   # (I,) worker demands a GPU (speed applies)
    allreduce: bool
    # the same as Python tuples, for the per-call path (a few rows: numpy overhead dominates)
    links_py: tuple = ()
    ratio_py: tuple = ()
    speed_py: tuple = ()


_CACHE: "OrderedDict[int, tuple[object, _Context]]" = OrderedDict()
_CACHE_SIZE = 8


def costmodel_options(instance) -> dict:
    """``instance.meta["costmodel"]``, checked: ValueError naming ``meta.costmodel.<key>``."""
    opts = dict(instance.meta.get("costmodel", {}) or {})
    for key in opts:
        if key not in COSTMODEL_OPTIONS:
            raise ValueError(f"meta.costmodel.{key}: unknown option "
                             f"(known: {', '.join(COSTMODEL_OPTIONS)})")
    if opts.get("collective", "ps") not in COLLECTIVES:
        raise ValueError(f"meta.costmodel.collective: unknown {opts['collective']!r} "
                         f"(known: {', '.join(COLLECTIVES)})")
    if "default_model" in opts:
        get_model(opts["default_model"])
    speeds = opts.get("gpu_speed", {})
    if not isinstance(speeds, Mapping) or any(
            isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0
            for v in speeds.values()):
        raise ValueError("meta.costmodel.gpu_speed: expected {server kind: speed > 0}")
    return opts


def job_profile(instance, job: int, opts: Mapping | None = None) -> tuple[float, float]:
    """(compute_s, model_mb) of job ``job`` (see the module docstring for the precedence)."""
    opts = costmodel_options(instance) if opts is None else opts
    prov = instance.jobs[job].provenance or {}
    if "minibatch_time_s" in prov and "gradient_mb" in prov:
        out = []
        for key in ("minibatch_time_s", "gradient_mb"):
            v = prov[key]
            if (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                    or v < 0):
                raise ValueError(f"jobs[{job}].provenance.{key}: the placement-aware cost model "
                                 f"needs a finite number >= 0, got {v!r}")
            out.append(float(v))
        return out[0], out[1]
    name = prov.get("model", opts.get("default_model", DEFAULT_MODEL))
    if name not in MODELS:
        raise ValueError(f"jobs[{job}].provenance.model: unknown model {name!r} "
                         f"(known: {', '.join(MODELS)})")
    m = MODELS[name]
    return m.compute_s, m.size_mb


def _build_context(instance) -> _Context:
    topo = instance.get_topology()
    opts = costmodel_options(instance)
    speeds = {**GPU_SPEED, **opts.get("gpu_speed", {})}
    link_id: dict[str, int] = {}
    paths = []
    for s in instance.servers:
        path = topo.path_to_root(s.id)[:-1]
        for v in path:
            link_id.setdefault(v, len(link_id))
        paths.append([link_id[v] for v in path])
    depth = max((len(p) for p in paths), default=1)
    links = np.full((len(paths), depth), -1, dtype=np.int64)
    for n, p in enumerate(paths):
        links[n, : len(p)] = p
    nic_under = np.zeros(len(link_id))
    for n, s in enumerate(instance.servers):
        nic = topo.link_bandwidth(s.id, topo.parent[s.id])
        nic_under[links[n][links[n] >= 0]] += nic
    bw = np.array([topo.link_bandwidth(v, topo.parent[v]) for v in link_id])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(nic_under > 0, np.minimum(1.0, bw / nic_under), 1.0)
    profiles = np.array([job_profile(instance, i, opts) for i in range(instance.I)],
                        dtype=float).reshape(-1, 2)
    gpu = instance.resources.index("gpu") if "gpu" in instance.resources else None
    uses_gpu = (instance.worker_demand[:, gpu] > 0 if gpu is not None
                else np.zeros(instance.I, dtype=bool))
    speed = np.array([float(speeds.get(s.kind, 1.0)) if s.kind else 1.0
                      for s in instance.servers])
    return _Context(links, tuple(link_id), ratio, speed, profiles[:, 0].copy(),
                    profiles[:, 1].copy(), uses_gpu, opts.get("collective", "ps") == "allreduce",
                    tuple(tuple(int(x) for x in row if x >= 0) for row in links),
                    tuple(ratio.tolist()), tuple(speed.tolist()))


def context(instance) -> _Context:
    """The cached arrays of ``instance`` (built once; an instance is immutable)."""
    key = id(instance)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is instance:
        _CACHE.move_to_end(key)
        return hit[1]
    ctx = _build_context(instance)
    _CACHE[key] = (instance, ctx)
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return ctx


# ---- the array kernel: many (job, slot) groups at once ---------------------------------------
def progress_kernel(instance, ctx: _Context, group: np.ndarray, n_groups: int,
                     group_job: np.ndarray, server: np.ndarray, role: np.ndarray,
                     count: np.ndarray) -> np.ndarray:
    """Worker-slots credited to each group: k T_ref / T_actual (module docstring).

    ``group`` (n,) maps each allocation row to its group 0..n_groups-1; ``group_job`` the job of
    each group. Every reduction is a max or an integer sum, so the result does not depend on the
    order of the rows.
    """
    is_w = role == WORKER
    W = np.bincount(group, weights=np.where(is_w, count, 0), minlength=n_groups)
    P = np.bincount(group, weights=np.where(is_w, 0, count), minlength=n_groups)
    # (row, link) pairs -> per (group, link) worker and PS counts
    L = len(ctx.ratio)
    lk = ctx.links[server]
    ok = lk >= 0
    rows = np.broadcast_to(np.arange(len(server))[:, None], lk.shape)[ok]
    keys = group[rows] * L + lk[ok]
    uniq, inv = np.unique(keys, return_inverse=True)
    Wl = np.bincount(inv, weights=np.where(is_w[rows], count[rows], 0), minlength=len(uniq))
    Pl = np.bincount(inv, weights=np.where(is_w[rows], 0, count[rows]), minlength=len(uniq))
    kg, kl = uniq // L, uniq % L
    r = ctx.ratio[kl]
    b = instance.worker_bw[group_job]
    B = instance.ps_bw[group_job]
    S = ctx.model_mb[group_job]
    tau = ctx.compute_s[group_job]
    worst = np.zeros(n_groups)  # per-phase (PS) or per-step (ring) time, in units of S * 8/1000 s
    if ctx.allreduce:
        cross = (Wl > 0) & (Wl < W[kg])
        np.maximum.at(worst, kg[cross], 1.0 / (b[kg[cross]] * r[cross]))
        worst = np.where(W >= 2, np.maximum(worst, 1.0 / b), worst)  # hops inside a server
        frac = np.where(W > 0, 2.0 * (W - 1) / np.maximum(W, 1), 0.0)
        t_ref = tau + frac * S * SECONDS_PER_MB_PER_GBPS * (1.0 / b)
        t_comm = frac * S * SECONDS_PER_MB_PER_GBPS * worst
        usable = W > 0
    else:
        Pk = np.maximum(P[kg], 1)
        term_w = np.where(Wl > 0, (1.0 - Pl / Pk) / (b[kg] * r), 0.0)
        term_p = np.where(Pl > 0, (W[kg] - Wl) / (Pk * B[kg] * r), 0.0)
        np.maximum.at(worst, kg, np.maximum(term_w, term_p))
        Pg = np.maximum(P, 1)
        t_ref = tau + 2.0 * S * SECONDS_PER_MB_PER_GBPS * np.maximum(1.0 / b, W / (Pg * B))
        t_comm = 2.0 * S * SECONDS_PER_MB_PER_GBPS * worst
        usable = (W > 0) & (P > 0)
    # compute: the slowest worker's accelerator (speed only matters for jobs that use GPUs)
    spd = np.full(n_groups, np.inf)
    wrows = is_w & (count > 0)
    np.minimum.at(spd, group[wrows], ctx.speed[server[wrows]])
    spd = np.where(ctx.uses_gpu[group_job] & np.isfinite(spd), spd, 1.0)
    t_act = tau / spd + t_comm
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(usable & (t_act > 0), W * (t_ref / t_act), np.where(usable, W, 0.0))
    return out


def placement_progress(instance, job: int, rows, t: int) -> float:
    """Worker-slots job ``job`` gains in slot ``t`` from its containers ``rows`` = [(global
    server, role, count)]: k T_ref / T_actual (module docstring). The simulator's progress
    function when ``instance.progress == "placement"``.

    The arithmetic of ``progress_kernel`` for one group, on Python floats (a job has a handful
    of rows; numpy's per-call overhead would dominate): the same operations in the same order,
    so the result equals the kernel's bit for bit (tests hold them to ==).
    """
    ctx = context(instance)
    W = P = 0
    spd = math.inf
    per_link: dict[int, list[int]] = {}
    for server, role, count in rows:
        if count <= 0:
            continue
        worker = role == WORKER
        if worker:
            W += count
            spd = min(spd, ctx.speed_py[server])
        else:
            P += count
        for link in ctx.links_py[server]:
            acc = per_link.setdefault(link, [0, 0])
            acc[0 if worker else 1] += count
    b, B = float(instance.worker_bw[job]), float(instance.ps_bw[job])
    S, tau = float(ctx.model_mb[job]), float(ctx.compute_s[job])
    ratio = ctx.ratio_py
    worst = 0.0
    if ctx.allreduce:
        for link, (Wl, _) in per_link.items():
            if 0 < Wl < W:
                worst = max(worst, 1.0 / (b * ratio[link]))
        if W >= 2:
            worst = max(worst, 1.0 / b)
        frac = 2.0 * (W - 1) / max(W, 1) if W > 0 else 0.0
        t_ref = tau + frac * S * SECONDS_PER_MB_PER_GBPS * (1.0 / b)
        t_comm = frac * S * SECONDS_PER_MB_PER_GBPS * worst
        usable = W > 0
    else:
        Pk = max(P, 1)
        for link, (Wl, Pl) in per_link.items():
            r = ratio[link]
            term_w = (1.0 - Pl / Pk) / (b * r) if Wl > 0 else 0.0
            term_p = (W - Wl) / (Pk * B * r) if Pl > 0 else 0.0
            worst = max(worst, term_w, term_p)
        t_ref = tau + 2.0 * S * SECONDS_PER_MB_PER_GBPS * max(1.0 / b, W / (Pk * B))
        t_comm = 2.0 * S * SECONDS_PER_MB_PER_GBPS * worst
        usable = W > 0 and P > 0
    if not (ctx.uses_gpu[job] and math.isfinite(spd)):
        spd = 1.0
    t_act = tau / spd + t_comm
    if not usable:
        return 0.0
    return float(W * (t_ref / t_act)) if t_act > 0 else float(W)


def placement_worker_slots(instance, allocations):
    """Progress of every (job, slot) group of ``allocations``: arrays (job, slot, worker-slots),
    sorted by job then slot (same numbers as ``placement_progress`` gives the simulator)."""
    a = allocations
    m = (a.count > 0)
    job, slot, server, role, count = a.job[m], a.slot[m], a.server[m], a.role[m], a.count[m]
    if not len(job):
        z = np.zeros(0, dtype=np.int64)
        return z, z, np.zeros(0)
    lo = int(slot.min())
    key = job * (int(slot.max()) - lo + 1) + (slot - lo)  # sorts by job, then slot
    uniq, first, group = np.unique(key, return_index=True, return_inverse=True)
    gjob, gslot = job[first], slot[first]
    progress = progress_kernel(instance, context(instance), group, len(uniq), gjob, server,
                                role, count)
    return gjob, gslot, progress


def placement_work_remaining(instance, allocations) -> tuple[np.ndarray, np.ndarray]:
    """(credited, remaining) per job: placement-aware worker-slots received and ``work``
    minus them, subtracted slot by slot in slot order exactly as the simulator does (so a job is
    complete iff ``remaining <= model.numerics.DONE_EPS``, the simulator's test)."""
    gjob, _, progress = placement_worker_slots(instance, allocations)
    remaining = instance.work.astype(float)
    credited = np.zeros(instance.I)
    for j, g in zip(gjob.tolist(), progress.tolist()):  # sequential: bitwise the simulator's sums
        remaining[j] -= g
        credited[j] += g
    return credited, remaining


def ideal_and_actual(instance, job: int, rows) -> tuple[float, float]:
    """(T_ref, T_actual) in seconds of one slot's placement of ``job`` (for reports and tests)."""
    ctx = context(instance)
    a = np.asarray(rows, dtype=np.int64).reshape(-1, 3)
    k = int(a[a[:, 1] == WORKER, 2].sum())
    if k == 0:
        raise ValueError("rows: no workers")
    progress = placement_progress(instance, job, rows, 0)
    b, B = instance.worker_bw[job], instance.ps_bw[job]
    S, tau = ctx.model_mb[job], ctx.compute_s[job]
    if ctx.allreduce:
        t_ref = tau + 2.0 * (k - 1) / k * S * SECONDS_PER_MB_PER_GBPS * (1.0 / b)
    else:
        p = max(int(a[a[:, 1] == PS, 2].sum()), 1)
        t_ref = tau + 2.0 * S * SECONDS_PER_MB_PER_GBPS * max(1.0 / b, k / (p * B))
    return t_ref, (t_ref * k / progress if progress > 0 else math.inf)
