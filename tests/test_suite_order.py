"""The units and the order in which ``make test``'s workers take the tests (``conftest``)."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import (HEAVY_FIRST, RAY_FILES, RAY_UNIT, SEPARABLE, check_ray_marks, heavy_first,
                      separable_ray_tests, unit)

TESTS = Path(__file__).resolve().parent


class Item:
    """What the conftest helpers read of a pytest item: its path, node id and marks."""

    def __init__(self, file: str, name: str, ray: bool = False):
        self.path, self.name, self.ray = TESTS / file, name, ray
        self.nodeid = f"tests/{file}::{name}"

    def get_closest_marker(self, name: str):
        return pytest.mark.ray if name == "ray" and self.ray else None


def test_every_named_file_exists():
    """A renamed file would silently lose its place (or its Ray tests their unit)."""
    named = HEAVY_FIRST + RAY_FILES + SEPARABLE
    assert [n for n in named if not (TESTS / n).is_file()] == []


def test_the_ray_unit_comes_first_then_heavy_files_and_nothing_else_moves():
    items = [Item("test_a.py", "a1"), Item(HEAVY_FIRST[4], "h1"), Item("test_a.py", "a2"),
             Item(SEPARABLE[0], "r1"), Item("test_b.py", "b1"), Item(HEAVY_FIRST[4], "h2"),
             Item(RAY_FILES[0], "c1"), Item(SEPARABLE[0], "r2", ray=True)]
    assert [i.name for i in heavy_first(items)] == ["r2", "c1", "r1", "h1", "h2", "a1", "a2",
                                                    "b1"]


def test_units():
    """Every test of a Ray file, and a separable file's Ray tests, are one unit; the rest go
    by file (a module's fixtures must not run on two workers)."""
    ray_readme = separable_ray_tests()
    assert len(ray_readme) == 1 and "running-schedules-for-real" in next(iter(ray_readme))
    assert unit("tests/test_a.py::t", ray_readme) == "test_a.py"
    assert unit(f"tests/{RAY_FILES[1]}::t[x]", ray_readme) == RAY_UNIT
    assert unit(next(iter(ray_readme)), ray_readme) == RAY_UNIT
    other = f"tests/{SEPARABLE[0]}::test_bash_block_runs_as_written[bash1-the-command-line]"
    assert unit(other, ray_readme) == SEPARABLE[0]


def test_a_ray_marked_test_outside_the_ray_files_is_refused():
    """It would run its Ray beside another worker's."""
    check_ray_marks([Item(RAY_FILES[0], "c", ray=True), Item("test_a.py", "a")], set())
    with pytest.raises(pytest.UsageError, match="test_a.py::a"):
        check_ray_marks([Item("test_a.py", "a", ray=True)], set())
