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

# The package order of DESIGN.md, as a DAG: each package (a subpackage or a top-level module of
# ``oasis_opt``; "oasis_opt" is the root ``__init__``) and the packages it may import directly;
# what those may import, it may import too (the closure). ``model`` imports nothing of ours (it
# names the cost model, the simulator and the policies above it by ``"module:attr"`` strings,
# ``model.registry``); ``costmodel`` sits on it; ``sim`` imports no policy package (the protocols
# it runs live in ``model.policy``). ``_lazy`` and ``_extras`` are leaves every package may use.
#
#   model <- costmodel <- {online, workloads, sim}; policies <- sizing <- model
#   offline <- online, policies; baselines <- offline, sim; cluster <- baselines;
#   training <- workloads; automl <- sim, training; runtime <- training, sim (the closed loop
#   runs the simulator's slot loop with the executor inside);
#   service <- runtime, sim, policies;
#   experiments <- service, cluster, offline, automl; cli <- everything below
LEAVES = ("_lazy", "_extras")
ROOT = PACKAGE
PACKAGES: dict[str, set[str]] = {
    "_lazy": set(), "_extras": set(),
    "model": set(),
    "costmodel": {"model"},
    "sizing": {"model"},
    "policies": {"model", "sizing"},
    "testing": {"model"},
    ROOT: {"model", "policies"},
    "online": {"costmodel"},
    "workloads": {"costmodel"},
    "offline": {"online", "policies"},
    "sim": {"costmodel"},
    "baselines": {"offline", "sim"},
    "cluster": {"baselines"},
    "training": {"workloads"},
    "automl": {"sim", "training"},
    "runtime": {"training", "sim", ROOT},
    "service": {"runtime", "sim", "policies", ROOT},
    "experiments": {"service", "cluster", "offline", "automl"},
    "cli": {"experiments"},
    "__main__": {"cli"},
}


def closure(dag: dict[str, set[str]]) -> dict[str, set[str]]:
    """Every package each package may import: its own list, theirs, and so on (and the leaves)."""
    out: dict[str, set[str]] = {}

    def reach(p: str, path: tuple[str, ...]) -> set[str]:
        if p in path:
            raise ValueError(f"the package order has a cycle: {' -> '.join(path + (p,))}")
        if p not in out:
            below = set(dag[p])
            for q in dag[p]:
                below |= reach(q, path + (p,))
            out[p] = below | ({*LEAVES} - {p} if p not in LEAVES else set())
        return out[p]

    for p in dag:
        reach(p, ())
    return out


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((SRC / PACKAGE).rglob("*.py"))}


def package_inits() -> set[str]:
    """The modules that are packages (an ``__init__.py``)."""
    return {m for m, path in package_modules().items() if path.name == "__init__.py"}


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


def package_of(module: str) -> str:
    """The package a module belongs to: ``oasis_opt.online.dual`` -> "online", the root
    ``oasis_opt`` -> "oasis_opt", a top-level module ``oasis_opt.policies`` -> "policies"."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def package_graph(*graphs: Graph) -> Graph:
    """Package -> the other packages its modules import (in any of ``graphs``)."""
    out: Graph = {}
    for graph in graphs:
        for module, targets in graph.items():
            here = package_of(module)
            out.setdefault(here, set())
            out[here] |= {package_of(t) for t in targets} - {here}
    return out


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


def outside_order(graph: Graph, dag: dict[str, set[str]] | None = None) -> list[str]:
    """Imports the package order does not allow (a module importing a package that is not below
    its own)."""
    allowed = closure(PACKAGES if dag is None else dag)
    bad = []
    for module, targets in sorted(graph.items()):
        here = package_of(module)
        for target in sorted(targets):
            there = package_of(target)
            if there != here and there not in allowed.get(here, set()):
                bad.append(f"{module} -> {target}")
    return bad


def private_imports(sources: dict[str, str], packages: set[str]) -> list[str]:
    """``from X import _name`` (or an import of a ``_module``) where the private thing belongs to
    another package than the importer's. A private name of a package is for its own modules; of
    the root package (``oasis_opt._extras``), for every module of ``oasis_opt``. ``packages``: the
    modules that are packages (an ``__init__``: their relative imports start from themselves)."""
    bad = []
    for module, text in sorted(sources.items()):
        is_package = module in packages
        here = package_of(module)
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(node, ast.ImportFrom) and node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            elif isinstance(node, ast.ImportFrom):
                origin = node.module or ""
            else:
                origin = ""
            names = ([f"{origin}.{a.name}" for a in node.names] if origin
                     else [a.name for a in node.names])
            for full in names:
                if not full.startswith(PACKAGE + "."):
                    continue
                parts = full.split(".")
                private = [i for i, part in enumerate(parts)
                           if part.startswith("_") and not part.startswith("__")]
                if not private:
                    continue
                owner = ".".join(parts[:private[0]])  # the module or package that holds it
                if owner == PACKAGE:  # a private module of the root: shared by the package
                    continue
                if package_of(owner) != here:
                    bad.append(f"{module}: {full}")
    return bad


def test_every_package_has_a_place_in_the_order():
    """A new subpackage or top-level module must be placed in ``PACKAGES`` (else the order says
    nothing of it)."""
    names = {package_of(m) for m in package_modules()}
    assert names <= set(PACKAGES), sorted(names - set(PACKAGES))


def test_the_package_order_is_a_dag():
    """The order itself has no cycle, and ``closure`` would say so if it had one."""
    allowed = closure(PACKAGES)
    assert "model" not in allowed["costmodel"] or "costmodel" not in allowed["model"]
    assert allowed["model"] == set(LEAVES)
    with pytest.raises(ValueError, match="cycle: a -> b -> a"):
        closure({"a": {"b"}, "b": {"a"}, "_lazy": set(), "_extras": set()})


# Cycles through a deferred import, each with its reason. Nothing else may import in a circle.
DEFERRED_CYCLES = {
    ("oasis_opt.model.instance", "oasis_opt.model.io"):
        "Instance.fingerprint hashes the instance exactly as model.io writes it",
    ("oasis_opt.model.preemption", "oasis_opt.model.schedule"):
        "derive_outcome credits work through the preemption ledger, which reads allocations",
    ("oasis_opt.experiments.ratio", "oasis_opt.experiments.worst_case"):
        "the ratio study runs the worst-case search, whose objective is the study's ratio_row",
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


def test_no_package_cycle():
    """No two packages import each other, through any chain, counting every kind of import
    (module level, in a function, for annotations): the package graph is acyclic. (``model`` <->
    ``costmodel`` through the validator's deferred imports, and ``sim`` -> ``cluster`` -> ``sim``
    through ``sim.preemption`` reading ``cluster.priority.user_class``, were such cycles.)"""
    top, deferred, typing = import_graph()
    assert cycles(package_graph(top, deferred, typing)) == []


@pytest.mark.parametrize("level", ["module", "function", "type-checking"])
def test_imports_follow_the_package_order(level):
    """Every import of another package is one the order allows (e.g. ``model`` importing
    ``costmodel``, or ``sim`` importing ``cluster``, fails here)."""
    top, deferred, typing = import_graph()
    graph = {"module": top, "function": deferred, "type-checking": typing}[level]
    assert outside_order(graph) == []


def test_no_module_imports_another_packages_private_names():
    """What is shared is public: no ``from ..costmodel.placement import _progress_kernel`` (nor a
    trace parser ``_parse_float`` taken by ``automl``, nor ``model.io._jsonable`` taken by the
    experiments)."""
    modules = package_modules()
    sources = {m: path.read_text() for m, path in modules.items()}
    assert private_imports(sources, package_inits()) == []


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
        ("model",): set(PACKAGES) - set(LEAVES) - {"model"},
        ("costmodel",): set(PACKAGES) - set(LEAVES) - {"model", "costmodel"},
        ("sim",): {"online", "offline", "baselines", "cluster", "automl"},  # no policy package
        ("online", "offline", "workloads"): {"sim", "cluster", "baselines", "experiments",
                                             "runtime", "cli"},
    }
    bad = []
    for graph in (top, deferred, typing):
        for module, targets in graph.items():
            for lower, above in forbidden.items():
                if package_of(module) in lower:
                    bad += [f"{module} -> {t}" for t in targets if package_of(t) in above]
    assert sorted(bad) == []


def test_the_checks_catch_a_cycle_an_import_out_of_order_and_a_private_import():
    """The checkers are not vacuous: a hand-made module cycle, package cycle, import against the
    order and cross-package private import are each reported; a package's own private names and
    the root's private leaves are not."""
    graph = {"oasis_opt.online.a": {"oasis_opt.sim.core"}, "oasis_opt.sim.core":
             {"oasis_opt.online.a"}}
    assert cycles(graph) == [["oasis_opt.online.a", "oasis_opt.sim.core"]]
    assert cycles(package_graph(graph)) == [["online", "sim"]]
    assert outside_order(graph) == ["oasis_opt.online.a -> oasis_opt.sim.core",
                                    "oasis_opt.sim.core -> oasis_opt.online.a"]
    assert outside_order({"oasis_opt.model.schedule": {"oasis_opt.costmodel.placement"}}) == \
        ["oasis_opt.model.schedule -> oasis_opt.costmodel.placement"]
    assert outside_order({"oasis_opt.cluster.tree": {"oasis_opt.sim.placement"}}) == []
    sources = {
        "oasis_opt.cluster.oasis_topo": "from ..costmodel.placement import _progress_kernel\n",
        "oasis_opt.training.curves": "from oasis_opt.workloads.traces import _parse_float, read_csv\n",
        "oasis_opt.experiments.runner": "def f():\n    from ..model.io import _jsonable\n",
        "oasis_opt.cluster.tree": "from ..online import _dp\n",
        "oasis_opt.online.dual_numpy": "from ._dp import _private_helper\n",
        "oasis_opt.offline.exact": "from .._extras import require\nfrom .. import _lazy\n",
    }
    assert private_imports(sources, package_inits()) == [
        "oasis_opt.cluster.oasis_topo: oasis_opt.costmodel.placement._progress_kernel",
        "oasis_opt.cluster.tree: oasis_opt.online._dp",
        "oasis_opt.experiments.runner: oasis_opt.model.io._jsonable",
        "oasis_opt.training.curves: oasis_opt.workloads.traces._parse_float",
    ]
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


def test_the_models_names_of_the_cost_model_resolve():
    """``model`` reaches the cost model by ``"module:attr"`` names only (``model.registry``): each
    must name a function that exists there, else a placement-aware run fails only when it
    first validates (a renamed ``placement_work_remaining`` would pass every import check)."""
    from oasis_opt.costmodel import placement, preemption
    from oasis_opt.model import registry

    names = {n: getattr(registry, n) for n in ("PLACEMENT_PROGRESS", "PLACEMENT_WORK_REMAINING",
                                               "PREEMPTION_COSTS", "RESTART_SHARE")}
    expected = {"PLACEMENT_PROGRESS": placement.placement_progress,
                "PLACEMENT_WORK_REMAINING": placement.placement_work_remaining,
                "PREEMPTION_COSTS": preemption.preemption_costs,
                "RESTART_SHARE": preemption.restart_share}
    assert {n: registry.resolve(v) for n, v in names.items()} == expected
    with pytest.raises(AttributeError):
        registry.resolve("oasis_opt.costmodel.placement:no_such_function")
