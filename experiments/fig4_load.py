"""Fig. 4 diagnosed: why the baselines land 8-31 slots past their targets here and 43-98 in the paper.

The study, ``oasis_opt.experiments.fig4_load`` (its docstring says what runs and why), is drawn
by ``oasis_opt.experiments.figures.fig4_load``.

    nice -n 10 .venv/bin/python experiments/fig4_load.py                # 48 runs
    nice -n 10 .venv/bin/python experiments/fig4_load.py --workers 2

Runs are stored in --results and reused when rerun (``experiments.runner``). Writes --out
(markdown) and the figure as PNG and PDF beside it.
"""
from oasis_opt.experiments.figures.fig4_load import main

if __name__ == "__main__":
    raise SystemExit(main())
