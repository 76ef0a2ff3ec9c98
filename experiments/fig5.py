"""Reproduce Fig. 5: OPT / OASiS for 10 jobs, T = 10, 3/6/9/12 servers, four gamma1 ranges.

Every OPT is the exact optimum of problem (1) (linearised MILP, HiGHS), proven optimal. OASiS
runs under each pricing of --pricing, as `reproduce fig5` does: plugin (eqs. 23-26 on the
group's history, seeds 1000-1009), searched (the floor tuned on the same history, default grid)
and oracle (eqs. 23-26 on the evaluated instance). One table per pricing prints our mean ratio
over the seeds beside the paper's bar (paper_figs/reference/fig5_performance_ratio.csv), with
alpha and 2 alpha of the constants used and the admitted counts of OPT and OASiS.

    .venv/bin/python experiments/fig5.py                 # 5 seeds (80 MILPs, a few minutes)
    .venv/bin/python experiments/fig5.py --seeds 0 1     # fewer seeds
    .venv/bin/python experiments/fig5.py --quick         # 1 seed
    .venv/bin/python experiments/fig5.py --pricing plugin --out paper_figs/fig5_table.md

Per-instance rows (utilities, ratio and alpha per pricing, MILP status, build / hand-off / solve
times) go to --json.

The study is ``oasis_opt.experiments.fig5``, drawn by
``oasis_opt.experiments.figures.fig5``.
"""
from oasis_opt.experiments.figures.fig5 import main

if __name__ == "__main__":
    raise SystemExit(main())
