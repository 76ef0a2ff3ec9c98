"""Workload generators: the paper's simulation settings, Fig. 5 instances and the testbed.

Every generator is deterministic in its ``seed`` and returns an ``oasis_opt.model.Instance``;
``generate(preset, seed=...)`` is the entry point the CLI uses (``PRESETS`` lists the names).
"""
from .paper import CALIBRATIONS, PAPER_RANGES, paper_fig5, paper_sim
from .presets import PRESETS, generate
from .testbed import MODEL_GRADIENT_MB, testbed
from .testbed_real import testbed_real
from .traces import philly_instance, pollux_instance, tiresias_instance  # noqa: F401 (real traces)

__all__ = ["CALIBRATIONS", "PAPER_RANGES", "PRESETS", "MODEL_GRADIENT_MB", "generate",
           "paper_fig5", "paper_sim", "testbed", "testbed_real"]
