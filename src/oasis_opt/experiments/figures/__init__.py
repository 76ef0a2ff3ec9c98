"""The paper's figures as experiment definitions: one module per figure, each with a ``FIGURE``.

``get_figure(name)`` imports the module on demand (Fig. 5 pulls in the offline solvers).
``EXTRA_FIGURES`` are run only when named (not by ``all``): they train for real for minutes.
"""
from __future__ import annotations

import importlib

from .common import Figure

FIGURE_MODULES = {
    "fig3": "oasis_opt.experiments.figures.fig3",
    "fig4": "oasis_opt.experiments.figures.fig4",
    "fig5": "oasis_opt.experiments.figures.fig5",
    "fig6": "oasis_opt.experiments.figures.fig6",
    "testbed": "oasis_opt.experiments.figures.testbed",
    "testbed-real": "oasis_opt.experiments.figures.testbed_real",
}
EXTRA_FIGURES = ("testbed-real",)
FIGURE_NAMES = tuple(n for n in FIGURE_MODULES if n not in EXTRA_FIGURES)  # what "all" runs


def get_figure(name: str) -> Figure:
    if name not in FIGURE_MODULES:
        raise ValueError(f"figure: unknown figure {name!r} (known: {', '.join(FIGURE_MODULES)})")
    return importlib.import_module(FIGURE_MODULES[name]).FIGURE


__all__ = ["EXTRA_FIGURES", "FIGURE_MODULES", "FIGURE_NAMES", "Figure", "get_figure"]
