"""Generate the learning-curve sets shipped in ``src/oasis_opt/data/curves/``.

The study is ``oasis_opt.experiments.automl_curves`` (its docstring says how the curves are
trained and what is printed).

    nice -n 10 .venv/bin/python experiments/automl_curves.py             # the shipped sets
    .venv/bin/python experiments/automl_curves.py --quick --out out/curves  # a minute
"""
from oasis_opt.experiments.automl_curves import main

if __name__ == "__main__":
    main()
