"""Gavel's own simulator on the validation traces: ``src/oasis_opt/data/traces/gavel/validation``.

    .venv/bin/python experiments/gavel_reference.py --gavel GAVEL/scheduler --python GAVEL_PY \
        --logs DIR [--run]

(``oasis_opt.experiments.gavel_reference``: Gavel's generator and driver as separate processes,
their logs parsed into ``results.csv`` and ``jcts.csv``.)
"""
from oasis_opt.experiments.gavel_reference import main

if __name__ == "__main__":
    main()
