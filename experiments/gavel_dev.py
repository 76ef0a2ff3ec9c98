"""Gavel's policies on Gavel's dev trace beside Gavel's own numbers: ``paper_figs/gavel.*``.

    .venv/bin/python experiments/gavel_dev.py [--out DIR]

(``oasis_opt.experiments.gavel``: every Gavel policy, its spread over equally optimal LP points
and seeds, Gavel's ``results.csv`` side by side.)
"""
from oasis_opt.experiments.gavel import main

if __name__ == "__main__":
    main()
