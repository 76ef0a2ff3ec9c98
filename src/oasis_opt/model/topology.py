"""Cluster topology: a tree of servers under racks (optionally pods) under one core switch.

Wraps a networkx graph whose nodes carry ``kind`` in {"core", "pod", "rack", "server"} and whose
edges carry ``bandwidth`` in Gbps. Instances may give one explicitly; otherwise a default is built
from the servers' ``rack`` fields (servers without a rack share the rack "rack-0"), with server
links at the server's NIC bandwidth ("bw" capacity) and rack uplinks at the sum of their servers'
NICs divided by an oversubscription ratio (1 by default).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:  # for the annotations only
    import networkx as nx

    from .instance import Instance

from .checks import FormatError, number

# networkx is imported by the methods that build or walk a graph, not at import: loading the
# model (and the solvers above it) must not pay for it
NODE_KINDS = ("core", "pod", "rack", "server")
DEFAULT_RACK = "rack-0"
CORE = "core"


@dataclass(frozen=True, eq=False)
class Topology:
    graph: nx.Graph
    root: str = CORE

    @staticmethod
    def from_racks(instance: Instance, oversubscription: float = 1.0) -> "Topology":
        import networkx as nx

        if oversubscription <= 0:
            raise ValueError("oversubscription must be > 0")
        g = nx.Graph()
        g.add_node(CORE, kind="core")
        bw = instance.bw_index
        for s, cap in zip(instance.servers, instance.capacity):
            rack = s.rack or DEFAULT_RACK
            if rack not in g:
                g.add_node(rack, kind="rack")
                g.add_edge(rack, CORE, bandwidth=0.0)
            g.add_node(s.id, kind="server")
            g.add_edge(s.id, rack, bandwidth=float(cap[bw]))
            g.edges[rack, CORE]["bandwidth"] += float(cap[bw]) / oversubscription
        return Topology(g, CORE)

    @staticmethod
    def from_pods(instance: Instance, pod_of: Mapping[str, str], oversubscription: float = 1.0,
                  pod_oversubscription: float = 1.0) -> "Topology":
        """core -> pods -> racks -> servers (racks from the servers' ``rack`` fields).

        ``pod_of`` maps every rack id to its pod id. A rack uplink carries the sum of its servers'
        NICs / ``oversubscription``; a pod uplink the sum of its racks' uplinks /
        ``pod_oversubscription`` (so a flow leaving a pod gets 1 / (o * o_pod) of its NIC when
        every uplink is saturated).
        """
        import networkx as nx

        if pod_oversubscription <= 0:
            raise ValueError("pod_oversubscription must be > 0")
        racks = Topology.from_racks(instance, oversubscription).graph
        g = nx.Graph()
        g.add_node(CORE, kind="core")
        for rack in (n for n, k in racks.nodes(data="kind") if k == "rack"):
            if rack not in pod_of:
                raise ValueError(f"pod_of: rack {rack!r} has no pod")
            pod = str(pod_of[rack])
            if pod in racks:
                raise ValueError(f"pod_of: pod id {pod!r} clashes with a rack or server id")
            if pod not in g:
                g.add_node(pod, kind="pod")
                g.add_edge(pod, CORE, bandwidth=0.0)
            up = racks.edges[rack, CORE]["bandwidth"]
            g.add_node(rack, kind="rack")
            g.add_edge(rack, pod, bandwidth=up)
            g.edges[pod, CORE]["bandwidth"] += up / pod_oversubscription
            for server in racks.neighbors(rack):
                if server != CORE:
                    g.add_node(server, kind="server")
                    g.add_edge(server, rack, bandwidth=racks.edges[server, rack]["bandwidth"])
        return Topology(g, CORE)

    def check(self, server_ids: set[str], path: str = "topology") -> None:
        """``FormatError`` unless this is a tree with one core, known node kinds, links of finite
        bandwidth > 0, and exactly the instance's servers (``server_ids``) as server nodes.
        Fields are named as in the instance file: ``topology.nodes[n].id``, ``topology.links[n]``.
        """
        import networkx as nx

        g = self.graph
        for n, (nid, kind) in enumerate(g.nodes(data="kind")):
            p = f"{path}.nodes[{n}]"
            if not isinstance(nid, str) or not nid:
                raise FormatError(f"{p}.id", f"expected a non-empty string, got {nid!r}")
            if kind not in NODE_KINDS:
                raise FormatError(f"{p}.kind", f"unknown node kind {kind!r} "
                                  f"(known: {', '.join(NODE_KINDS)})")
            if kind == "server" and nid not in server_ids:
                raise FormatError(f"{p}.id", f"unknown server id {nid!r}")
        for n, (_, _, bw) in enumerate(g.edges(data="bandwidth")):
            number(bw, f"{path}.links[{n}].bandwidth", strict=True)
        cores = [n for n, k in g.nodes(data="kind") if k == "core"]
        if len(cores) != 1:
            raise FormatError(f"{path}.nodes", f"need exactly one core node, found {len(cores)}")
        if self.root != cores[0]:
            raise FormatError(f"{path}.root", f"{self.root!r} is not the core node {cores[0]!r}")
        if not nx.is_tree(g):
            raise FormatError(f"{path}.links", "the topology must be a connected tree")
        missing = server_ids - {n for n, k in g.nodes(data="kind") if k == "server"}
        if missing:
            raise FormatError(f"{path}.nodes", f"server {sorted(missing)[0]!r} is not in the "
                              "topology")

    def to_json(self) -> dict:
        return {
            "nodes": [{"id": n, "kind": d["kind"]} for n, d in self.graph.nodes(data=True)],
            "links": [{"a": a, "b": b, "bandwidth": d["bandwidth"]}
                      for a, b, d in self.graph.edges(data=True)],
        }

    @cached_property
    def parent(self) -> dict[str, str | None]:
        """Parent of each node in the tree rooted at the core."""
        import networkx as nx

        par: dict[str, str | None] = {self.root: None}
        for a, b in nx.bfs_edges(self.graph, self.root):
            par[b] = a
        return par

    def path_to_root(self, node: str) -> list[str]:
        out = [node]
        while (up := self.parent[out[-1]]) is not None:
            out.append(up)
        return out

    def link_bandwidth(self, a: str, b: str) -> float:
        return float(self.graph.edges[a, b]["bandwidth"])

    @cached_property
    def tree(self) -> nx.DiGraph:
        """The graph as a tree directed away from the core."""
        import networkx as nx

        return nx.bfs_tree(self.graph, self.root)

    def servers_under(self, node: str) -> list[str]:
        """Server ids in the subtree of ``node``, in depth-first order."""
        import networkx as nx

        return [n for n in nx.dfs_preorder_nodes(self.tree, node)
                if self.graph.nodes[n]["kind"] == "server"]
