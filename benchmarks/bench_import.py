"""Start-up cost of ``import oasis_opt`` and ``oasis-opt --help``, against references timed in
the same run.

Each case is a fresh interpreter (``python -c CODE``), timed wall-clock from spawn to exit,
``--repeat`` times in rotating order; the table gives the median, the median minus the bare
interpreter (``python -c pass``), and the ratio to the reference ``import numpy, networkx``
(what ``import oasis_opt`` loaded before the package became lazy).

    .venv/bin/python benchmarks/bench_import.py [--repeat 15]

Writes benchmarks/results/import.md and import.json.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
CASES = {
    "bare interpreter (python -c pass)": "pass",
    "reference: import numpy, networkx": "import numpy, networkx",
    "import oasis_opt": "import oasis_opt",
    "oasis-opt --help": "from oasis_opt.cli import main; main(['--help'])",
    "import oasis_opt; oasis_opt.Instance (the model)": "import oasis_opt; oasis_opt.Instance",
    "from oasis_opt.offline import OfflinePolicy": "from oasis_opt.offline import OfflinePolicy",
}
REFERENCE = "reference: import numpy, networkx"
BARE = "bare interpreter (python -c pass)"


def time_once(code: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    names = list(CASES)
    times: dict[str, list[float]] = {n: [] for n in names}
    for name in names:  # warm the OS file cache and the bytecode once
        time_once(CASES[name])
    for r in range(args.repeat):
        for k in range(len(names)):
            name = names[(k + r) % len(names)]
            times[name].append(time_once(CASES[name]))
    med = {n: statistics.median(v) for n, v in times.items()}
    rows = [(n, med[n], med[n] - med[BARE], med[n] / med[REFERENCE]) for n in names]
    header = "| case | median wall (s) | minus bare interpreter (s) | / reference |\n|---|---|---|---|\n"
    table = header + "".join(f"| {n} | {m:.3f} | {d:.3f} | {q:.2f} |\n" for n, m, d, q in rows)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = (f"# Start-up time\n\n`benchmarks/bench_import.py --repeat {args.repeat}`, {stamp}, "
            f"Python {platform.python_version()} on {platform.machine()}; each case a fresh "
            "interpreter, median of the runs.\n\n" + table)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "import.md").write_text(text)
    (RESULTS / "import.json").write_text(json.dumps(
        {"repeat": args.repeat, "when": stamp, "python": platform.python_version(),
         "cases": CASES, "seconds": times, "median": med}, indent=1) + "\n")


if __name__ == "__main__":
    main()
