"""Tree-based, utilisation-aware placement (the thesis' first contribution, reference 3.7).

A job's k workers and p = ceil(k b_i / B_i) PSs go to the **smallest subtree** of the topology
(rack, then pod, then the whole cluster) that can hold them all, so its traffic stays under one
ToR switch whenever possible and never crosses an oversubscribed uplink it does not have to:

1. Candidate subtrees: the nodes of the lowest level (rack < pod < core) whose free capacity fits
   k workers (on its worker servers) and p PSs (on its PS servers), counted in whole containers
   of this job (``fit_count`` summed over the subtree's servers).
2. Among candidates, by the key (risky, leftover, predicted utilisation, depth-first order):
   *risky*: the subtree's **predicted** free capacity (its capacity times 1 - the predictor's
   forecast of its utilisation) holds fewer than k workers or p PSs, i.e. it is expected to be
   too busy; *leftover*: free containers left after placing, relative to the subtree's size
   (**best fit**: pack busy subtrees first and keep whole subtrees free, limiting fragmentation,
   as HiveD and Volcano do); then the lower predicted utilisation.
   A job keeps its previous subtree while it still fits at the lowest level that fits (*sticky*:
   the simulator re-places jobs every slot, and a real job would not migrate for nothing).
3. Inside the chosen subtree the workers are packed recursively: into the best-fitting child that
   holds them all, down to a single server when one suffices; when no child holds them all,
   children are filled largest-first (fewest children spanned). The PSs go under the lowest
   ancestor of the workers' servers that fits them, packed the same way. (The reference suggests
   spreading PSs over nodes to avoid NIC hot spots; here every PS container reserves its own
   bandwidth B_i, constraint (5), so co-located PSs cannot overload a NIC and we pack them.)

Prediction: the placement records every subtree's utilisation (max over resources of used /
capacity) each time it is handed a new free-capacity array (the simulator's per-slot scratch
``state.free`` for slot-by-slot policies, the recomputed view of event policies), taking the final
state of the previous array, and feeds a ``cluster.predictors`` predictor (default: P95 of the
last 6 observations). ``observe(free)`` records one explicitly.
"""
from __future__ import annotations

import numpy as np

from ..model.numerics import fit_count
from ..sim.placement import Placement
from .predictors import get_predictor

LEVELS = ("server", "rack", "pod", "core")


class TreePlacement(Placement):
    """Smallest-fitting-subtree placement with best fit and predicted utilisation (module doc)."""

    name = "tree"

    def __init__(self, predictor: str = "p95", sticky: bool = True, **predictor_options):
        self.predictor_name = predictor
        self.predictor_options = dict(predictor_options)
        self.sticky = bool(sticky)
        get_predictor(predictor, **predictor_options)  # fail fast on a bad name / option

    # ---- structure of the tree, built once per instance ------------------------------------------
    def reset(self, instance) -> None:
        topo = instance.get_topology()
        H = instance.H
        order = [n for n in _dfs(topo)]  # depth-first: subtrees are contiguous
        self._nodes = order
        self._pos = {n: i for i, n in enumerate(order)}
        kind = [topo.graph.nodes[n]["kind"] for n in order]
        self._level = np.array([LEVELS.index(k) for k in kind])
        self._children = [[self._pos[c] for c in topo.tree.successors(n)] for n in order]
        self._parent = np.array([-1 if topo.parent[n] is None else self._pos[topo.parent[n]]
                                 for n in order])
        S = instance.H + instance.K
        self._leaf = np.full(len(order), -1)  # node -> global server index (servers only)
        member = np.zeros((len(order), S))
        for n, name in enumerate(order):
            if kind[n] == "server":
                s = instance.server_index[name]
                self._leaf[n] = s
                # mark the server in itself and every ancestor
                a = n
                while a >= 0:
                    member[a, s] = 1.0
                    a = self._parent[a]
        self._member = member
        self._member_w, self._member_p = member[:, :H], member[:, H:]
        self._cap = member @ instance.capacity
        self._instance = instance
        self._predictor = get_predictor(self.predictor_name, **self.predictor_options)
        self._predictor.reset()
        self._home: dict[int, int] = {}
        self._full: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._last_free = None
        self._pred = None

    # ---- utilisation history --------------------------------------------------------------------
    def utilisation(self, free: np.ndarray) -> np.ndarray:
        """Per tree node: max over resources of used / capacity (0 where a node has none)."""
        used = self._member @ (self._instance.capacity - free).clip(min=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            u = np.where(self._cap > 0, used / self._cap, 0.0)
        return u.max(axis=1)

    def observe(self, free: np.ndarray) -> None:
        """Record the utilisation of every subtree under ``free`` (one observation)."""
        self._predictor.update(self.utilisation(free))
        self._pred = None

    def predicted_utilisation(self) -> np.ndarray:
        """The predictor's forecast per node (0 where it has none yet); cached until the next
        observation."""
        if self._pred is None:
            u = np.asarray(self._predictor.predict(), dtype=float)
            self._pred = (np.zeros(len(self._nodes)) if u.ndim == 0
                          else np.nan_to_num(u, nan=0.0).clip(0.0, 1.0))
        return self._pred

    def _see(self, free: np.ndarray) -> None:
        if free is not self._last_free:
            if self._last_free is not None:
                self.observe(self._last_free)
            self._last_free = free

    # ---- placement ------------------------------------------------------------------------------
    def _fits(self, instance, job: int, free: np.ndarray, wfit=None, pfit=None):
        H = instance.H
        if wfit is None:
            wfit = fit_count(free[:H], instance.worker_demand[job])
            pfit = fit_count(free[H:], instance.ps_demand[job])
        wfit, pfit = wfit.astype(float), pfit.astype(float)
        if job not in self._full:
            cw = fit_count(instance.capacity[:H], instance.worker_demand[job]).astype(float)
            cp = fit_count(instance.capacity[H:], instance.ps_demand[job]).astype(float)
            self._full[job] = (self._member_w @ cw, self._member_p @ cp)
        return wfit, pfit, self._member_w @ wfit, self._member_p @ pfit

    def place(self, instance, job: int, k: int, free: np.ndarray, _fit=(None, None)):
        if k <= 0:
            return []
        self._see(free)
        p = int(instance.ps_needed(job, k))
        wfit, pfit, fw, fp = self._fits(instance, job, free, *_fit)
        root = 0
        if fw[root] < k or fp[root] < p:
            return None
        full_w, full_p = self._full[job]
        pred = self.predicted_utilisation()
        fits = (fw >= k) & (fp >= p)
        home = root
        for level in range(1, len(LEVELS)):  # rack, pod, core (a server is in one pool only)
            cand = np.flatnonzero(fits & (self._level == level))
            if not len(cand):
                continue
            prev = self._home.get(job)
            if self.sticky and prev is not None and prev in set(cand.tolist()):
                home = prev
            else:
                home = self._best(cand, fw - k, fp - p, full_w, full_p, pred, k, p)
            break
        self._home[job] = int(home)
        H = instance.H
        wleaf = np.concatenate([wfit, np.zeros(instance.K)])
        workers = self._pack(home, k, self._member @ wleaf, full_w, pred)
        # PSs: under the lowest ancestor of the workers' servers that fits them
        node = self._lca([self._pos[instance.servers[s].id] for s, _ in workers])
        while fp[node] < p:
            node = self._parent[node]
        pleaf = np.concatenate([np.zeros(H), pfit])
        pss = self._pack(node, p, self._member @ pleaf, full_p, pred)
        return [(int(s), 0, int(n)) for s, n in workers] + [(int(s), 1, int(n)) for s, n in pss]

    def place_most(self, instance, job: int, k_max: int, free: np.ndarray):
        """The largest k <= k_max whose workers and PSs fit in total: ``place`` never fails then
        (the core always holds them), so one call suffices."""
        H = instance.H
        wfit = fit_count(free[:H], instance.worker_demand[job])
        pfit = fit_count(free[H:], instance.ps_demand[job])
        wcap, pcap = int(wfit.sum()), int(pfit.sum())
        k = min(int(k_max), wcap)
        while k > 0 and instance.ps_needed(job, k) > pcap:
            k -= 1
        if k <= 0:
            return 0, []
        rows = self.place(instance, job, k, free, (wfit, pfit))
        return (k, rows) if rows is not None else (0, [])

    # ---- helpers ---------------------------------------------------------------------------------
    def _best(self, cand, left_w, left_p, full_w, full_p, pred, k, p) -> int:
        """Best candidate by (risky, relative leftover, predicted utilisation, order)."""
        avail = 1.0 - pred[cand]
        risky = (np.floor(full_w[cand] * avail) < k) | (np.floor(full_p[cand] * avail) < p)
        leftover = (left_w[cand] / np.maximum(full_w[cand], 1)
                    + left_p[cand] / np.maximum(full_p[cand], 1))
        best = np.lexsort((cand, pred[cand], leftover, risky))[0]
        return int(cand[best])

    def _pack(self, node: int, count: int, fit: np.ndarray, full: np.ndarray,
              pred: np.ndarray) -> list[tuple[int, int]]:
        """``count`` containers under ``node`` (fit: per-node free container counts)."""
        if count <= 0:
            return []
        if self._leaf[node] >= 0:
            return [(int(self._leaf[node]), count)]
        kids = np.array(self._children[node], dtype=np.int64)
        kids = kids[fit[kids] > 0]
        whole = kids[fit[kids] >= count]
        if len(whole):
            avail = 1.0 - pred[whole]
            risky = np.floor(full[whole] * avail) < count
            leftover = (fit[whole] - count) / np.maximum(full[whole], 1)
            best = whole[np.lexsort((whole, pred[whole], leftover, risky))[0]]
            return self._pack(int(best), count, fit, full, pred)
        out = []
        for c in kids[np.lexsort((kids, -fit[kids]))]:  # largest first: fewest children spanned
            n = int(min(fit[c], count))
            out += self._pack(int(c), n, fit, full, pred)
            count -= n
            if count <= 0:
                break
        if count > 0:
            raise AssertionError("tree placement: subtree fit count was wrong")  # pragma: no cover
        return out

    def _lca(self, nodes: list[int]) -> int:
        paths = []
        for n in nodes:
            path = []
            while n >= 0:
                path.append(n)
                n = self._parent[n]
            paths.append(path[::-1])
        common = 0
        for level in zip(*paths):
            if len(set(level)) != 1:
                break
            common = level[0]
        return int(common)


def _dfs(topology):
    import networkx as nx

    return list(nx.dfs_preorder_nodes(topology.tree, topology.root))


def subtree_span(instance, rows) -> str:
    """The smallest level (server, rack, pod, core) holding every container of ``rows``."""
    topo = instance.get_topology()
    servers = {instance.servers[s].id for s, _, n in rows if n > 0}
    if not servers:
        raise ValueError("rows: no containers")
    paths = [topo.path_to_root(s)[::-1] for s in servers]
    lca = topo.root
    for level in zip(*paths):
        if len(set(level)) != 1:
            break
        lca = level[0]
    return topo.graph.nodes[lca]["kind"]


__all__ = ["TreePlacement", "LEVELS", "subtree_span"]
