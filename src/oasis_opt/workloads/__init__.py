"""Workload generators: the paper's simulation settings, Fig. 5 instances, the testbed and real
traces (one module per trace; ``trace_registry`` names those an instance is built from).

Every generator is deterministic in its ``seed`` and returns an ``oasis_opt.model.Instance``;
``generate(preset, seed=...)`` is the entry point the CLI uses (``PRESETS`` lists the names).
Each name below imports its module on first use, so ``trace_registry`` and the names of the
presets' module load without numpy.
"""
from typing import TYPE_CHECKING

from .._lazy import lazy_exports

_EXPORTS = {
    "CALIBRATIONS": ".paper", "PAPER_RANGES": ".paper", "paper_fig5": ".paper",
    "paper_sim": ".paper", "PRESETS": ".presets", "generate": ".presets",
    "MODEL_GRADIENT_MB": ".testbed", "testbed": ".testbed", "testbed_real": ".testbed_real",
    "philly_instance": ".philly", "PhillyCluster": ".philly", "PhillyFilter": ".philly",
    "pollux_instance": ".pollux", "tiresias_instance": ".tiresias",
    "TraceMapping": ".trace_common",
}
__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:
    from .paper import CALIBRATIONS, PAPER_RANGES, paper_fig5, paper_sim
    from .philly import PhillyCluster, PhillyFilter, philly_instance
    from .pollux import pollux_instance
    from .presets import PRESETS, generate
    from .testbed import MODEL_GRADIENT_MB, testbed
    from .testbed_real import testbed_real
    from .tiresias import tiresias_instance
    from .trace_common import TraceMapping

__all__ = ["CALIBRATIONS", "PAPER_RANGES", "PRESETS", "MODEL_GRADIENT_MB", "generate",
           "paper_fig5", "paper_sim", "testbed", "testbed_real"]
