"""Generate the learning-curve sets shipped in ``src/oasis_opt/data/curves/``.

Each study is a random search over its task's space (``oasis_opt.training.tasks``), every trial
trained for real with JAX + optax on the CPU (``oasis_opt.training.study.generate_curves``, the
same code as ``oasis-opt automl curves``). A killed run resumes: finished trials stay in the CSV
and only the missing ones are trained. Prints a markdown table (trials, epochs, rows, size,
generation time, final accuracies) for the README beside the CSVs. :func:`main` is
``experiments/automl_curves.py``.

    nice -n 10 .venv/bin/python experiments/automl_curves.py             # the shipped sets
    .venv/bin/python experiments/automl_curves.py --quick --out out/curves  # a minute
"""
from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np

from ..training.curves import read_curves
from ..training.study import generate_curves

# (task, trials, epochs): the shipped curve sets
STUDIES = [("digits-mlp", 250, 40), ("breast-cancer-mlp", 250, 40), ("digits-cnn", 100, 30)]
QUICK = [("digits-mlp", 6, 10), ("breast-cancer-mlp", 6, 10), ("digits-cnn", 3, 5)]
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "data" / "curves"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder of the CSVs")
    parser.add_argument("--seed", type=int, default=0, help="study seed (default 0)")
    parser.add_argument("--quick", action="store_true", help="tiny studies, to try the script")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")

    rows = []
    for task, trials, epochs in QUICK if args.quick else STUDIES:
        path = args.out / f"{task}.csv"
        run = generate_curves(task, trials, epochs, args.seed, path)
        curves = [c for c in read_curves(path) if c.study == task]
        final = np.array([c.val_accuracy[-1] for c in curves])
        train_s = sum(sum(c.seconds) for c in curves)
        rows.append([task, trials, epochs, sum(c.epochs for c in curves),
                     f"{path.stat().st_size / 1e6:.2f}", f"{run.seconds:.0f}",
                     f"{train_s:.1f}", run.existing, f"{np.median(final):.3f}",
                     f"{final.max():.3f}", f"{np.mean(final < 0.5):.2f}"])
    headers = ["study", "trials", "epochs", "rows", "MB", "generation s (this run)",
               "sum of epoch seconds", "trials already there", "median final acc",
               "best final acc", "share final acc < 0.5"]
    print(f"\nseed {args.seed}; {platform.platform()}; {_cpu()}; {os.cpu_count()} CPUs; "
          f"{time.strftime('%Y-%m-%d')}")
    print("| " + " | ".join(headers) + " |")
    print("|" + "---|" * len(headers))
    for row in rows:
        print("| " + " | ".join(map(str, row)) + " |")


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
