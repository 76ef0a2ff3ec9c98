"""Shared test configuration: hypothesis profile for CI, the --runslow flag, JAX on CPU, and the
units and order in which ``make test``'s two workers (pytest-xdist) take the tests."""
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


# ``make test`` runs the suite on two pytest-xdist workers; each takes whole units (``unit``, the
# scheduler below). Every test that starts a local Ray is in one unit, "ray", so two Ray
# instances never run at once on the 2 cores: with them side by side (one per worker), an
# executor's ``ray.wait`` in test_service_ray.py waited 15 minutes for containers that never
# ran. Every other test's unit is its file (a module's fixtures run once). The controller that
# schedules sees node ids only, so the Ray files are named here, and the collection (which sees
# the marks) refuses a Ray-marked test outside them.
RAY_UNIT = "ray"
RAY_FILES = ("test_case_study.py", "test_closed_loop.py", "test_experiments_runner.py",
             "test_runtime_executor.py", "test_runtime_degrade.py", "test_ray_cluster.py",
             "test_service_ray.py",
             "test_service_ray_kill.py")
# files whose tests each run on their own (a README block in a fresh directory): only their
# Ray-marked tests join the Ray unit (``separable_ray_tests``)
SEPARABLE = ("test_readme.py",)
# the files that take minutes, longest first: they start first, so that none of them is the last
# thing left running (the Ray unit, about half the suite, first of all)
HEAVY_FIRST = ("test_readme.py", "test_case_study.py", "test_runtime_executor.py",
               "test_service_ray.py", "test_online_backends.py", "test_online_golden.py",
               "test_experiments_figures.py")


def separable_ray_tests() -> set:
    """Node ids of the README blocks that start Ray (``test_readme.starts_ray``)."""
    from test_readme import BASH, slug, starts_ray

    return {f"tests/test_readme.py::test_bash_block_runs_as_written[bash{n}-{slug(h)}]"
            for n, (h, c) in enumerate(BASH) if starts_ray(c)}


def unit(nodeid: str, separable_ray: set) -> str:
    """The unit of a test: ``RAY_UNIT`` for a test of ``RAY_FILES`` or one of
    ``separable_ray``, else its file's name."""
    name = nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    return RAY_UNIT if name in RAY_FILES or nodeid in separable_ray else name


def pytest_xdist_make_scheduler(config, log):
    """Whole units to a worker, in collection order (xdist's loadscope, split by ``unit``)."""
    from xdist.scheduler import LoadScopeScheduling

    separable_ray = separable_ray_tests()

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit(nodeid, separable_ray)

    return UnitScheduling(config, log)


def check_ray_marks(items: list, separable_ray: set) -> None:
    """Refuse a Ray-marked test the scheduler would not keep in the Ray unit."""
    stray = [item.nodeid for item in items if item.get_closest_marker("ray") is not None
             and unit(item.nodeid, separable_ray) != RAY_UNIT]
    if stray:
        raise pytest.UsageError(f"Ray-marked tests outside conftest.RAY_FILES: {stray[:5]} (add "
                                "their file there, or to SEPARABLE's Ray tests)")


def heavy_first(items: list) -> list:
    """``items`` with the Ray unit first, then the files of ``HEAVY_FIRST`` in its order;
    everything else, and the order inside each file, unchanged."""
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    return sorted(items, key=lambda item: (item.path.name not in RAY_FILES
                                           and item.get_closest_marker("ray") is None,
                                           rank.get(item.path.name, len(rank))))


def pytest_collection_modifyitems(config, items):
    check_ray_marks(items, separable_ray_tests())
    items[:] = heavy_first(items)
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="heavy case: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
