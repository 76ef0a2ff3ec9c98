"""Shared test configuration: hypothesis profile for CI, the --runslow flag, JAX on CPU, and the
order in which ``make test``'s two workers (pytest-xdist, ``--dist loadfile``) take the files."""
from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# jit compiles and solver start-up blow hypothesis's 200 ms deadline; derandomize for
# reproducible CI runs (every failure replays exactly).
settings.register_profile("ci", deadline=None, derandomize=True, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow,
                                                 HealthCheck.data_too_large])
settings.register_profile("dev", deadline=None, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="run heavy cases")


# The files that take minutes (real Ray runs, the README's blocks, the child-process golden run),
# longest first. ``make test`` runs the suite on two workers, each taking whole files in
# collection order; starting these first keeps one of them from being the last thing that runs
# (a long file taken last is the suite's tail: about 5 minutes when test_readme.py came last).
HEAVY_FIRST = ("test_readme.py", "test_case_study.py", "test_runtime_executor.py",
               "test_service_ray.py", "test_online_backends.py", "test_online_golden.py",
               "test_experiments_figures.py")


def heavy_first(items: list) -> list:
    """``items`` with the files of ``HEAVY_FIRST`` moved to the front, in its order; everything
    else, and the order inside each file, unchanged."""
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    return sorted(items, key=lambda item: rank.get(item.path.name, len(rank)))


def pytest_collection_modifyitems(config, items):
    items[:] = heavy_first(items)
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="heavy case: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
