"""Imports go down the layers, never up or around (DESIGN.md), checked on the source itself.

The package's import graph is read with ``ast`` from ``src/oasis_opt``: module-level imports,
imports inside functions (deferred, for heavy or optional dependencies) and imports under
``if TYPE_CHECKING:`` (for annotations only: never run, so they cannot close an import cycle,
but a type from a higher layer is still a dependency on it) are listed separately.
Importing a package's module also runs the package's ``__init__``; that implicit edge is not
listed (every package depends on its own modules that way). A registry's ``"module:attr"``
string is not an import: it is how a lower layer names something above it.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "oasis_opt"

# DESIGN.md: model and costmodel at the bottom; online, offline, workloads above them; baselines,
# cluster, automl, sim above those; runtime, service, experiments, cli on top. Top-level modules
# of the package: the policy registry, the work estimate and the test strategies sit at the
# bottom (they import only the model; the registry names policies by string); ``_lazy`` (the
# lazy exports of the packages' ``__init__``) and ``_extras`` (``require``, ``MissingExtra``) at
# the bottom too, as leaves (standard library only, checked below: every layer uses them);
# ``__main__`` with the CLI on top. ``automl`` sits with the policies above the solvers: it reads
# learning curves with the trace readers of ``workloads`` and is driven by ``experiments``/cli.
LEAVES = ("_lazy", "_extras")
LAYERS = {
    "model": 0, "costmodel": 0, "policies": 0, "sizing": 0, "testing": 0,
    "_lazy": 0, "_extras": 0,
    "online": 1, "offline": 1, "workloads": 1,
    "baselines": 2, "cluster": 2, "automl": 2, "sim": 2,
    "runtime": 3, "service": 3, "experiments": 3, "cli": 3, "__main__": 3,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((SRC / PACKAGE).rglob("*.py"))}


def _targets(node, module: str, is_package: bool, modules) -> list[str]:
    """Package modules an import statement loads (``from pkg import mod`` loads ``pkg.mod``)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        origin = ".".join(base + ([node.module] if node.module else []))
    else:
        origin = node.module or ""
    return [f"{origin}.{a.name}" if f"{origin}.{a.name}" in modules else origin
            for a in node.names]


Graph = dict[str, set[str]]


def import_graph() -> tuple[Graph, Graph, Graph]:
    """(module-level imports, imports inside functions, ``TYPE_CHECKING`` imports) between the
    package's modules."""
    modules = package_modules()
    top: Graph = {m: set() for m in modules}
    deferred: Graph = {m: set() for m in modules}
    typing: Graph = {m: set() for m in modules}
    for module, path in modules.items():
        is_package = path.name == "__init__.py"

        class Visitor(ast.NodeVisitor):
            depth = 0
            types = False  # inside ``if TYPE_CHECKING:``

            def visit_FunctionDef(self, node):
                self.depth += 1
                self.generic_visit(node)
                self.depth -= 1

            visit_AsyncFunctionDef = visit_FunctionDef

            def visit_If(self, node):
                test = node.test
                name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
                if name != "TYPE_CHECKING":
                    self.generic_visit(node)
                    return
                self.types = True
                for child in node.body:
                    self.visit(child)
                self.types = False
                for child in node.orelse:
                    self.visit(child)

            def visit_Import(self, node):
                graph = deferred if self.depth else typing if self.types else top
                for target in _targets(node, module, is_package, modules):
                    if target == PACKAGE or target.startswith(PACKAGE + "."):
                        graph[module].add(target)

            visit_ImportFrom = visit_Import

        Visitor().visit(ast.parse(path.read_text(), str(path)))
    return top, deferred, typing


def layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.get(parts[1]) if len(parts) > 1 else None  # the root package: no layer


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Edges from a module to one of a higher layer."""
    bad = []
    for module, targets in sorted(graph.items()):
        here = layer(module)
        for target in sorted(targets):
            there = layer(target)
            if here is not None and there is not None and there > here:
                bad.append(f"{module} -> {target}")
    return bad


def test_every_subpackage_has_a_layer():
    names = {m.split(".")[1] for m in package_modules() if "." in m}
    assert names <= set(LAYERS), sorted(names - set(LAYERS))


# Cycles through a deferred import, each with its reason. Nothing else may import in a circle.
DEFERRED_CYCLES = {
    ("oasis_opt.model.instance", "oasis_opt.model.io"):
        "Instance.fingerprint hashes the instance exactly as model.io writes it",
}


def test_no_import_cycles():
    """No cycle among module-level imports; with the deferred (in-function) imports added, only
    the listed ones (one package each, never two layers). ``TYPE_CHECKING`` imports never run
    (e.g. ``Topology`` and ``Instance`` name each other in annotations only)."""
    top, deferred, _ = import_graph()
    assert cycles(top) == []
    both = {m: top[m] | deferred[m] for m in top}
    assert sorted(tuple(c) for c in cycles(both)) == sorted(DEFERRED_CYCLES)
    for cycle in DEFERRED_CYCLES:
        assert len({".".join(m.split(".")[:2]) for m in cycle}) == 1, cycle


@pytest.mark.parametrize("level", ["module", "function", "type-checking"])
def test_imports_go_down_the_layers(level):
    top, deferred, typing = import_graph()
    assert upward({"module": top, "function": deferred, "type-checking": typing}[level]) == []


def test_leaf_modules_import_nothing_of_the_package():
    """``_lazy`` and ``_extras`` are loaded by ``import oasis_opt`` and by every layer: they
    import no package module, at module level, in a function or for annotations."""
    top, deferred, typing = import_graph()
    leaves = [f"{PACKAGE}.{name}" for name in LEAVES]
    assert set(leaves) <= set(top)
    assert {m: sorted(top[m] | deferred[m] | typing[m]) for m in leaves} == {m: [] for m in leaves}


def test_named_layer_rules():
    """The rules DESIGN.md spells out, stated once more by name (a failure says which)."""
    top, deferred, typing = import_graph()
    forbidden = {
        ("model", "costmodel"): ("online", "offline", "workloads", "baselines", "cluster",
                                 "automl", "sim", "runtime", "service", "experiments", "cli"),
        ("online", "offline", "workloads"): ("sim", "cluster", "baselines", "experiments",
                                             "runtime", "cli"),
    }
    bad = []
    for graph in (top, deferred, typing):
        for module, targets in graph.items():
            for lower, above in forbidden.items():
                if layer(module) is not None and module.split(".")[1] in lower:
                    bad += [f"{module} -> {t}" for t in targets
                            if len(t.split(".")) > 1 and t.split(".")[1] in above]
    assert sorted(bad) == []


def test_the_checks_catch_a_cycle_and_an_upward_import():
    """The graph helpers are not vacuous: a hand-made cycle and upward edge are reported."""
    graph = {"oasis_opt.online.a": {"oasis_opt.sim.core"}, "oasis_opt.sim.core":
             {"oasis_opt.online.a"}}
    assert cycles(graph) == [["oasis_opt.online.a", "oasis_opt.sim.core"]]
    assert upward(graph) == ["oasis_opt.online.a -> oasis_opt.sim.core"]
    top, deferred, typing = import_graph()
    assert "oasis_opt.online.dual_numpy" in top  # the real graph is read, each kind apart
    assert "oasis_opt.online._dp" in top["oasis_opt.online.dual_numpy"]
    assert "oasis_opt.model.instance" in typing["oasis_opt.model.topology"]
    assert "oasis_opt.model.instance" not in top["oasis_opt.model.topology"]
    assert "oasis_opt.model.io" in deferred["oasis_opt.model.instance"]


def test_importing_the_dual_subroutine_loads_no_simulator_cluster_or_networkx():
    code = ("import sys, oasis_opt.online.dual; "
            "print('\\n'.join(sorted(m for m in sys.modules if m.startswith("
            "('oasis_opt.sim', 'oasis_opt.cluster', 'networkx')))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == []
    # and the check itself sees such modules when they are loaded
    code = code.replace("oasis_opt.online.dual", "oasis_opt.cluster.tree")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert "oasis_opt.cluster.tree" in out.stdout.split()
