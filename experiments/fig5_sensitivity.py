"""Fig. 5's sensitivity to the generator choices that break Theorem 4's assumptions.

The study, ``oasis_opt.experiments.fig5_sensitivity`` (its docstring says which variants of the
``paper_fig5`` preset), is drawn by ``oasis_opt.experiments.figures.fig5_sensitivity``.

    nice -n 10 .venv/bin/python experiments/fig5_sensitivity.py --seeds 0 1 2 3 4 5 6 7 8 9

Rows go to --rows (JSON lines; the preset's to --preset-rows), reused when rerun, computed seed
by seed over the variants, so that an interrupted run leaves every variant with the same seeds.
Writes --out (markdown), and the figure as PNG and PDF beside it.
"""
from oasis_opt.experiments.figures.fig5_sensitivity import main

if __name__ == "__main__":
    raise SystemExit(main())
