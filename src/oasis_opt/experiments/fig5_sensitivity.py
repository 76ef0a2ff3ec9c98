"""Fig. 5's sensitivity to the generator choices that break Theorem 4's assumptions.

The ``paper_fig5`` preset sizes each job from the work it could do *alone* on the empty cluster
by T (E_i ~ U{1..E_max_i}) and draws the utility's target gamma3 ~ U[1, 15] against T = 10. Here
the diagnosis of ``oasis_opt.experiments.fig5_diagnosis`` (OPT / OASiS under plug-in, searched,
oracle and hindsight-best L, admitted counts, load, largest container) runs on variants of the
preset: ``e_max_scale`` 0.5 and 0.25 (E_i ~ U{1..floor(s E_max_i)}), ``target_range`` (1, T/2),
and both together, beside the preset itself (rows shared with ``fig5_diagnosis.py``). Each
variant's plug-in and searched pricings are estimated on the variant's own history (seeds
1000-1009), as the preset's are.

:func:`compute` runs them (``experiments/fig5_sensitivity.py``): rows go to ``rows`` (JSON lines;
the preset's to ``preset_rows``), reused when rerun, computed seed by seed over the variants, so
that an interrupted run leaves every variant with the same seeds.
``oasis_opt.experiments.figures.fig5_sensitivity`` draws them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from .fig5_diagnosis import diagnose

HORIZON = 10
# (label, paper_fig5 options); the first is the preset itself
VARIANTS = (
    ("preset: E_max x1, γ₃ in [1,15]", {}),
    ("E_max x0.5", {"e_max_scale": 0.5}),
    ("E_max x0.25", {"e_max_scale": 0.25}),
    ("γ₃ in [1,T/2]", {"target_range": [1.0, HORIZON / 2]}),
    ("E_max x0.5, γ₃ in [1,T/2]", {"e_max_scale": 0.5, "target_range": [1.0, HORIZON / 2]}),
    ("E_max x0.25, γ₃ in [1,T/2]", {"e_max_scale": 0.25, "target_range": [1.0, HORIZON / 2]}),
)


def compute(seeds: Sequence[int], servers: Sequence[int], priority: tuple[float, float],
            rows: Path, preset_rows: Path, workers: int = 1) -> list[tuple[str, list[dict]]]:
    """(label, diagnosis rows) per variant of :data:`VARIANTS` (module docstring), for every
    (servers, ``priority``, seed); the preset's rows in ``preset_rows``, the others' in ``rows``."""
    for seed in seeds:  # seed by seed over the variants (module docstring)
        for _, options in VARIANTS:
            diagnose([(n, priority, seed) for n in servers],
                     preset_rows if not options else rows, options=options,
                     workers=workers, progress=True)
    cells = [(n, priority, s) for s in seeds for n in servers]
    return [(label, diagnose(cells, preset_rows if not options else rows, options=options))
            for label, options in VARIANTS]
