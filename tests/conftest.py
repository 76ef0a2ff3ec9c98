"""Shared test configuration: hypothesis profile for CI, the --runslow flag, JAX on CPU."""
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


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="heavy case: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
