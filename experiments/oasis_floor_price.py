"""How good is OASiS's estimated floor price L? The calibrated L against hindsight (a diagnostic).

The study, ``oasis_opt.experiments.oasis_floor_price`` (its docstring says what runs), is drawn
by ``oasis_opt.experiments.figures.oasis_floor_price``.

Runs go through the experiment runner into the same results folder as ``oasis-opt reproduce``.
Writes ``<out>/oasis_floor_price.{png,pdf,md}``.

    .venv/bin/python experiments/oasis_floor_price.py [--quick] [--workers N] [--results DIR] [--out DIR]
"""
import numpy as np

from oasis_opt.experiments.figures.oasis_floor_price import main

if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
