"""Regenerate paper_figs/placement.{png,pdf,md}: tree vs round-robin, random and packing
placement at 1:1, 2:1 and 4:1 rack oversubscription, on paper-sim and the Philly month.

    .venv/bin/python experiments/placement.py                      # everything (long: ~1 h)
    .venv/bin/python experiments/placement.py --quick              # seconds
    .venv/bin/python experiments/placement.py --workloads philly-month --oversubscription 4

Runs are stored under results/placement and skipped when present, so the grid can be filled in
several invocations; the report covers every stored run.
"""
from oasis_opt.experiments.placement import main

if __name__ == "__main__":
    raise SystemExit(main())
