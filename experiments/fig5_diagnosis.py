"""Fig. 5 diagnosed: per group, OPT / OASiS under plug-in, searched, oracle and hindsight-best L.

Per (servers, gamma1 range) group and seed: the exact OPT (MILP, proven), OASiS under the four
pricings of ``oasis_opt.experiments.fig5_diagnosis`` with alpha, the admitted counts, the load
factor and the largest container relative to its server; per group the median, the mean and the
ratio of sums with 95% bootstrap intervals over the seeds (2000 resamples, seed 0).

    nice -n 10 .venv/bin/python experiments/fig5_diagnosis.py --seeds 0 1 2 3 4
    nice -n 10 .venv/bin/python experiments/fig5_diagnosis.py --seeds 0 --servers 12   # quick

Rows are appended to --rows (JSON lines) as they finish, and rows already there are reused, so
more seeds can be added later and a killed run resumes. Writes --out (markdown), and the
figure as PNG and PDF beside it.

The study is ``oasis_opt.experiments.fig5_diagnosis``, drawn by
``oasis_opt.experiments.figures.fig5_diagnosis``.
"""
from oasis_opt.experiments.figures.fig5_diagnosis import main

if __name__ == "__main__":
    raise SystemExit(main())
