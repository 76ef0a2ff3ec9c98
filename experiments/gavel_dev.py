"""Gavel's policies on Gavel's dev trace beside Gavel's own numbers: ``paper_figs/gavel.*``.

    .venv/bin/python experiments/gavel_dev.py [--out DIR]

(``oasis_opt.experiments.gavel``: every Gavel policy, its spread over equally optimal LP points
and seeds, Gavel's ``results.csv`` side by side.)
"""
from __future__ import annotations

import argparse

from oasis_opt.experiments.gavel import write_gavel


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="paper_figs")
    args = ap.parse_args(argv)
    for path in write_gavel(args.out):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
