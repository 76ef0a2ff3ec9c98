"""The experiments in one shape (``oasis_opt.experiments``' docstring, README "Architecture").

A study's runs live in ``oasis_opt/experiments/<study>.py``; its drawing and markdown in
``oasis_opt/experiments/figures/<study>.py``, the same name on both sides; a repository script
``experiments/<name>.py`` only calls ``main`` of its study's figure module (or of the study).
Checked on the source with ``ast``, and on the registered ``FIGURE``s themselves.

The mutations each test catches (each was tried by hand):

* a run moved back into a figure module, e.g. ``runs`` / ``estimates`` / ``settings`` of Fig. 3
  defined in ``figures/fig3.py`` again (a figure module defining a run function, building
  ``RunSpec``s, importing ``spec`` / ``runner`` / ``calibration``; ``FIGURE.runs`` then no longer
  comes from the study): ``test_figure_modules_hold_no_runs``,
  ``test_registered_figures_take_their_runs_from_their_study``;
* a figure module that solves or simulates (``from ...policies import solve``, ``from ... import
  solve``, ``from ...runtime.executor import execute``): ``test_figure_modules_import_no_policy_solver_or_simulator``;
* a figure module without a study of its name (``figures/fig7.py`` alone, or a study renamed on
  one side only): ``test_every_figure_module_has_its_study``;
* drawing moved into a study that has a figure module (matplotlib, ``figures.<x>``, a ``render``
  / ``plot`` / ``markdown``): ``test_studies_with_a_figure_do_not_draw``;
* a script that computes or draws itself (a ``def``, its own ``RunSpec``s), or that runs a study
  of another name: ``test_every_script_calls_main_of_its_study``.
"""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXPERIMENTS = REPO / "src" / "oasis_opt" / "experiments"
FIGURES = EXPERIMENTS / "figures"
SCRIPTS = REPO / "experiments"
NOT_FIGURES = ("__init__", "common")  # the registry and the shared drawing pieces
# the packages that solve, simulate or execute: a figure module imports none of them (nor the
# root package, whose ``solve`` is the policies'); its runs belong to its study
RUN_PACKAGES = ("policies", "sim", "online", "offline", "baselines", "cluster", "runtime",
                "service", "training", "automl", "workloads", "costmodel")
# the run machinery of the experiments: only a study imports it
RUN_MODULES = ("spec", "runner", "calibration")
# what a study defines for its runs (``Figure.runs`` / ``.estimates`` / ``.compute``)
RUN_FUNCTIONS = ("runs", "estimates", "estimate", "compute", "settings", "sim_params", "workload",
                 "collect", "plan")
DRAWING_FUNCTIONS = ("render", "draw", "plot", "markdown", "figure")
# drawing a study keeps, each with its reason
STUDY_DRAWING = {("fig5", "markdown"): "paper_figs/fig5.md cites `oasis_opt.experiments.fig5."
                                       "markdown` for its tables"}
# script stem -> the study it runs, where the names differ, each with its reason
SCRIPT_STUDY = {"gavel_dev": "gavel"}  # paper_figs/gavel.md names experiments/gavel_dev.py


def figure_names() -> list[str]:
    return sorted(p.stem for p in FIGURES.glob("*.py") if p.stem not in NOT_FIGURES)


def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def imported(module: ast.Module, package: str) -> set[str]:
    """Every module an import in ``module`` (at any depth) names, resolved to a dotted name
    (``package``: the importing module's package, for relative imports); ``from x import y``
    gives both ``x`` and ``x.y``."""
    out: set[str] = set()
    for node in ast.walk(module):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            out.add(origin)
            out |= {f"{origin}.{a.name}" for a in node.names}
    return out


def defined(module: ast.Module) -> set[str]:
    return {n.name for n in module.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


def names(module: ast.Module) -> set[str]:
    return {n.id for n in ast.walk(module) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(module) if isinstance(n, ast.Attribute)}


def figure_problems(name: str, module: ast.Module) -> list[str]:
    """What in the figure module ``name`` is a run, or a solver, simulator or executor."""
    got = imported(module, "oasis_opt.experiments.figures")
    bad = [f"{name} imports {m}" for m in sorted(got)
           if m == "oasis_opt" or any(m == f"oasis_opt.{p}" or m.startswith(f"oasis_opt.{p}.")
                                      for p in RUN_PACKAGES)
           or any(m == f"oasis_opt.experiments.{r}" for r in RUN_MODULES)]
    bad += [f"{name} defines {f}" for f in sorted(defined(module) & set(RUN_FUNCTIONS))]
    if "RunSpec" in names(module):
        bad.append(f"{name} builds RunSpecs")
    return bad


def test_every_figure_module_has_its_study():
    """``figures/<name>.py`` draws the study ``experiments/<name>.py`` and imports it."""
    missing, unused = [], []
    for name in figure_names():
        if not (EXPERIMENTS / f"{name}.py").is_file():
            missing.append(name)
            continue
        got = imported(tree(FIGURES / f"{name}.py"), "oasis_opt.experiments.figures")
        if f"oasis_opt.experiments.{name}" not in got:
            unused.append(name)
    assert missing == [] and unused == [], (missing, unused)


def test_figure_modules_hold_no_runs():
    """No figure module defines a run function, builds a ``RunSpec`` or imports the run
    machinery (``spec``, ``runner``, ``calibration``)."""
    bad = [p for name in figure_names() for p in figure_problems(name, tree(FIGURES / f"{name}.py"))]
    assert bad == []


def test_figure_modules_import_no_policy_solver_or_simulator():
    """The packages that solve or run (``policies``, ``sim``, ``online``, ``offline``,
    ``baselines``, ``cluster``, ``runtime``, ``service``, ...) are the studies' to import."""
    bad = [p for name in figure_names() for p in figure_problems(name, tree(FIGURES / f"{name}.py"))
           if " imports " in p]
    assert bad == []


def test_the_checks_catch_a_run_in_a_figure_module():
    """Not vacuous: Fig. 3's runs pasted back into its figure module, or a figure that solves,
    are reported."""
    study = (EXPERIMENTS / "fig3.py").read_text()
    mutated = ast.parse((FIGURES / "fig3.py").read_text() + "\n" + study.replace(
        "from .calibration", "from ..calibration").replace("from .spec", "from ..spec"))
    assert figure_problems("fig3", mutated) == [
        "fig3 imports oasis_opt.experiments.calibration", "fig3 imports oasis_opt.experiments.spec",
        "fig3 defines collect", "fig3 defines estimate", "fig3 defines estimates",
        "fig3 defines runs", "fig3 defines settings", "fig3 defines sim_params",
        "fig3 builds RunSpecs"]
    solving = ast.parse("def render():\n    from ... import solve\n    from ...sim import x\n")
    assert figure_problems("f", solving) == ["f imports oasis_opt", "f imports oasis_opt.sim",
                                             "f imports oasis_opt.sim.x"]


@pytest.mark.parametrize("name", ["fig3", "fig4", "fig5", "fig6", "testbed", "automl",
                                  "testbed-real", "preemption", "hetero", "ratio", "pricing"])
def test_registered_figures_take_their_runs_from_their_study(name):
    """A registered ``FIGURE`` is ``figures.<study>``'s; its runs or compute are the study's
    functions (its estimates a study's: Fig. 6 prices as Fig. 3), its render the figure
    module's own."""
    from oasis_opt.experiments.figures import EXTRA_MODULES, FIGURE_MODULES, get_figure

    modules = {**FIGURE_MODULES, **EXTRA_MODULES}
    assert set(modules) == {"fig3", "fig4", "fig5", "fig6", "testbed", "automl", "testbed-real",
                            "preemption", "hetero", "ratio", "pricing"}
    module = modules[name]
    stem = module.rsplit(".", 1)[1]
    assert module == f"oasis_opt.experiments.figures.{stem}"
    fig = get_figure(name)
    study = importlib.import_module(f"oasis_opt.experiments.{stem}")
    assert fig.render.__module__ == module
    for part in ("runs", "compute"):
        fn = getattr(fig, part)
        if fn is not None:
            assert fn.__module__ == study.__name__, (name, part, fn.__module__)
    if fig.estimates is not None:
        where = fig.estimates.__module__
        assert where.startswith("oasis_opt.experiments.") and ".figures." not in where, where


def test_studies_with_a_figure_do_not_draw():
    """A study that has a figure module leaves the drawing to it: no matplotlib, no figure
    module but ``figures.common``, no render / draw / plot / markdown (but ``STUDY_DRAWING``)."""
    bad = []
    for name in figure_names():
        module = tree(EXPERIMENTS / f"{name}.py")
        got = imported(module, "oasis_opt.experiments")
        bad += [f"{name} imports {m}" for m in sorted(got)
                if m.startswith("matplotlib") or (m.startswith("oasis_opt.experiments.figures.")
                                                  and not m.startswith(
                                                      "oasis_opt.experiments.figures.common"))]
        bad += [f"{name} defines {f}" for f in sorted(defined(module) & set(DRAWING_FUNCTIONS))
                if (name, f) not in STUDY_DRAWING]
    assert bad == []


def script_problems(path: Path) -> list[str]:
    """What makes the script ``path`` more than a call of its study's ``main``."""
    module = tree(path)
    study = SCRIPT_STUDY.get(path.stem, path.stem)
    ours = {m for m in imported(module, "") if m.startswith("oasis_opt")}
    callee = {f"oasis_opt.experiments.{study}", f"oasis_opt.experiments.figures.{study}"}
    bad = [f"{path.name} defines {d}" for d in sorted(defined(module))]
    roots = {m for m in ours if not m.endswith(".main")}
    if len(roots) != 1 or not roots <= callee:
        bad.append(f"{path.name} imports {sorted(ours)}, not main of the study {study!r}")
    elif f"{next(iter(roots))}.main" not in ours:
        bad.append(f"{path.name} does not call main")
    return bad


def test_every_script_calls_main_of_its_study():
    """``experiments/<name>.py`` imports ``main`` from ``oasis_opt.experiments.figures.<name>``
    (a study with a figure module) or ``oasis_opt.experiments.<name>`` and defines nothing;
    the study of that name exists (``SCRIPT_STUDY``: the exceptions to the name)."""
    scripts = sorted(SCRIPTS.glob("*.py"))
    assert scripts
    bad = [p for s in scripts for p in script_problems(s)]
    assert bad == []
    for s in scripts:
        study = SCRIPT_STUDY.get(s.stem, s.stem)
        assert (EXPERIMENTS / f"{study}.py").is_file(), s.name
        # a study with a figure module is run through it (the drawing is there)
        wants = "figures." if (FIGURES / f"{study}.py").is_file() else ""
        assert f"oasis_opt.experiments.{wants}{study}.main" in imported(tree(s), ""), s.name


def test_the_script_check_catches_a_script_that_computes(tmp_path):
    """Not vacuous: a script that defines its own runs, or runs another study, is reported."""
    thick = tmp_path / "fig4_load.py"
    thick.write_text("from oasis_opt.experiments.spec import RunSpec\n"
                     "from oasis_opt.experiments.figures.fig4_load import main\n"
                     "def specs():\n    return [RunSpec('paper_sim', {}, 'fifo')]\n")
    assert script_problems(thick) == [
        "fig4_load.py defines specs",
        "fig4_load.py imports ['oasis_opt.experiments.figures.fig4_load', "
        "'oasis_opt.experiments.figures.fig4_load.main', 'oasis_opt.experiments.spec', "
        "'oasis_opt.experiments.spec.RunSpec'], not main of the study 'fig4_load'"]
    other = tmp_path / "fig5.py"
    other.write_text("from oasis_opt.experiments.fig4 import main\nmain()\n")
    assert script_problems(other) == [
        "fig5.py imports ['oasis_opt.experiments.fig4', 'oasis_opt.experiments.fig4.main'], "
        "not main of the study 'fig5'"]
