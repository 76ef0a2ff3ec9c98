"""pyproject.toml's dependencies are ranges, ``all`` is every extra, and requirements/lock.txt
(the exact tested set that ``make`` installs) satisfies every range."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS: dict[str, list[str]] = PROJECT["optional-dependencies"]
CORE = {"numpy", "scipy", "networkx", "highspy", "tqdm"}


def requirements() -> list[tuple[str, Requirement]]:
    out = [("core", Requirement(r)) for r in PROJECT["dependencies"]]
    out += [(extra, Requirement(r)) for extra, reqs in EXTRAS.items() for r in reqs]
    return [(where, r) for where, r in out if canonicalize_name(r.name) != "oasis-opt"]


def lock() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements" / "lock.txt").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
        if m:
            pins[canonicalize_name(m.group(1))] = m.group(2)
    return pins


def test_the_core_is_light():
    assert {canonicalize_name(Requirement(r).name) for r in PROJECT["dependencies"]} == CORE


def test_every_dependency_is_a_range_with_both_bounds():
    for where, req in requirements():
        ops = {s.operator for s in req.specifier}
        assert ">=" in ops and "<" in ops, f"{where}: {req} is not a >=x,<y range"


def test_all_is_every_other_extra():
    (all_req,) = [Requirement(r) for r in EXTRAS["all"]]
    assert canonicalize_name(all_req.name) == "oasis-opt"
    assert all_req.extras == set(EXTRAS) - {"all"}


def test_the_lock_satisfies_every_range():
    pins = lock()
    for where, req in requirements():
        name = canonicalize_name(req.name)
        assert name in pins, f"{where}: {req.name} missing from the lock (run make lock)"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"{where}: locked {req.name}=={pins[name]} is outside {req.specifier} (run make lock)")
