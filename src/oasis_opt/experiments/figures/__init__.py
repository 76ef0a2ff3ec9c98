"""The figures: ``figures.<study>`` draws the study ``experiments.<study>`` (its runs live there)
and writes its markdown. The registered ones have a ``FIGURE``: the paper's figures
(``FIGURE_NAMES``, drawn by ``reproduce all``) and beyond them the extra experiments
(``EXTRA_NAMES``: ``automl``, ``testbed-real``, ``preemption``, ``hetero``, ``ratio``, ``pricing``), requested
by name (not by ``all``: they train for real or run for minutes). The others (``fig4_load``,
``fig5_diagnosis``, ``fig5_sensitivity``, ``oasis_floor_price``) are drawn by their scripts in
``experiments/`` (their ``main``).

``get_figure(name)`` imports the module on demand (a study's solvers load with it).
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
}
FIGURE_NAMES = tuple(FIGURE_MODULES)
# Experiments beyond the paper, drawn by name only (``all`` stays the paper's figures).
EXTRA_MODULES = {
    "automl": "oasis_opt.experiments.figures.automl",
    "testbed-real": "oasis_opt.experiments.figures.testbed_real",
    "preemption": "oasis_opt.experiments.figures.preemption",
    "hetero": "oasis_opt.experiments.figures.hetero",
    "ratio": "oasis_opt.experiments.figures.ratio",
    "pricing": "oasis_opt.experiments.figures.pricing",
}
EXTRA_NAMES = tuple(EXTRA_MODULES)


def get_figure(name: str) -> Figure:
    modules = {**FIGURE_MODULES, **EXTRA_MODULES}
    if name not in modules:
        raise ValueError(f"figure: unknown figure {name!r} "
                         f"(known: {', '.join(FIGURE_NAMES + EXTRA_NAMES)})")
    return importlib.import_module(modules[name]).FIGURE


__all__ = ["EXTRA_MODULES", "EXTRA_NAMES", "FIGURE_MODULES", "FIGURE_NAMES", "Figure",
           "get_figure"]
