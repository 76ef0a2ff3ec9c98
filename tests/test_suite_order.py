"""The order in which ``make test``'s workers take the files (``conftest.heavy_first``)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from conftest import HEAVY_FIRST, heavy_first

TESTS = Path(__file__).resolve().parent


def test_every_heavy_file_exists():
    """A renamed heavy file would silently fall back to its alphabetical place (the tail)."""
    assert [name for name in HEAVY_FIRST if not (TESTS / name).is_file()] == []


def test_heavy_files_come_first_in_their_order_and_nothing_else_moves():
    def item(file, name):
        return SimpleNamespace(path=TESTS / file, name=name)

    items = [item("test_a.py", "a1"), item(HEAVY_FIRST[1], "h1"), item("test_a.py", "a2"),
             item(HEAVY_FIRST[0], "r1"), item("test_b.py", "b1"), item(HEAVY_FIRST[1], "h2")]
    assert [i.name for i in heavy_first(items)] == ["r1", "h1", "h2", "a1", "a2", "b1"]
