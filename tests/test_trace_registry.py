"""The trace registry: every registered trace resolves to its loader, the loaders are the ones
``oasis_opt.workloads.traces`` has always exported, and ``generate --trace`` offers exactly the
registered names."""
from __future__ import annotations

import subprocess
import sys

import pytest

from oasis_opt.workloads import traces
from oasis_opt.workloads.trace_registry import TRACES, available_traces, trace_loader


@pytest.mark.parametrize("name", sorted(TRACES))
def test_every_registered_trace_resolves_to_a_loader(name):
    """Catches a registry line naming a module or function that moved (it would fail only when
    that trace is generated)."""
    assert callable(trace_loader(name)) and available_traces()[name]


def test_an_unknown_trace_is_named():
    """Catches a lookup that fails with a bare KeyError instead of naming the trace and the
    known ones."""
    with pytest.raises(ValueError, match="^trace: unknown trace 'nope' \\(known: philly, gavel"):
        trace_loader("nope")


def test_the_traces_module_keeps_every_name_where_it_was():
    """Catches a name lost in splitting the traces into one module each: importers of
    ``oasis_opt.workloads.traces`` (experiments, automl, tests) keep working."""
    assert trace_loader("philly") is traces.philly_instance
    for name in traces.__all__ + ["parse_float", "parse_int", "parse_str", "_window"]:
        assert getattr(traces, name) is not None, name


def test_generate_offers_the_registered_traces_and_lists_them_without_numpy():
    """Catches ``--trace`` choices kept apart from the registry, and a registry whose import
    loads the generators (numpy) just to list the names."""
    code = ("import sys\nfrom oasis_opt.workloads.trace_registry import TRACES\n"
            "print('numpy' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout.split()
    assert out == ["False"]
    from oasis_opt.cli.generate import add_generate
    import argparse

    parser = argparse.ArgumentParser()
    add_generate(parser)
    trace, = [a for a in parser._actions if a.dest == "trace"]
    assert tuple(trace.choices) == tuple(TRACES)


def test_every_registered_trace_has_its_generate_flags():
    """Catches a trace registered in ``TRACES`` without its entry in ``cli.generate``'s
    ``_TRACE_FLAGS`` (how ``generate --trace NAME`` maps its flags to the loader): ``--trace
    NAME`` would then be offered by the parser and fail with a KeyError when run. (The README's
    "where a new trace goes" names both places.)"""
    from oasis_opt.cli.generate import _TRACE_FLAGS

    assert set(_TRACE_FLAGS) == set(TRACES)
