"""Regenerate paper_figs/placement-bracket.md: oasis-topo, OASiS and greedy + tree placement
against the placement-aware bracket [offline-topo, topology-free bound] on a Philly window with
4:1 oversubscribed racks.

    .venv/bin/python experiments/placement_bracket.py --jobs 30 100 --time-limit 300

One JSON per instance under results/placement-bracket (a rerun skips stored ones).
"""
from oasis_opt.experiments.placement_bracket import main

if __name__ == "__main__":
    raise SystemExit(main())
