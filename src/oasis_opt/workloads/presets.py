"""Named workload presets: ``generate(preset, seed=..., jobs=..., horizon=..., servers=...)``.

The size arguments map onto each generator's own parameters (``None`` keeps its default):

=============  =====================  ===================  ==========================================
preset         jobs                   horizon              servers
=============  =====================  ===================  ==========================================
paper-sim      I (default 100)        T (default 300)      H = K = servers (default 50 + 50)
paper-fig5     I (default 10)         T (default 10)       n, split ceil(n/2) + floor(n/2) (default 3)
testbed        fixed (12)             fixed (10)           fixed (7 + 2)
testbed-real   I (default 8)          T (default 10)       fixed (2 + 1); needs ``profiles=[...]``
philly-        jobs (default 120)     by the jobs          8-GPU servers per rack (default 2; 2
priority                                                   racks)
philly-chains  jobs (default 200)     by the jobs          8-GPU servers per rack (default 2; 2
                                                           racks)
degrade-real   fixed (2)              fixed (14)           fixed (1 "GPU" + 1 CPU + 1 PS)
=============  =====================  ===================  ==========================================

Any further keyword is passed to the generator (e.g. ``calibration="literal"``); unknown ones
raise ValueError listing the valid options.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable

from ..model import Instance
from .paper import paper_fig5, paper_sim
from .priority import chain_instance, degrade_real, philly_priority
from .testbed import testbed
from .testbed_real import testbed_real

PRESETS: dict[str, str] = {
    "paper-sim": "the paper's simulation (section 10): H = K = 50 servers, T = 300, "
                 "100 jobs by default, A2 job-size calibration",
    "paper-fig5": "Fig. 5's small instances: 10 jobs, T = 10, n = 3|6|9|12 servers split "
                  "ceil(n/2) worker + floor(n/2) PS hosts, jobs that fit alone",
    "testbed": "the paper's 9-server testbed: 7 worker + 2 PS hosts, 12 jobs, 10 slots of 20 min",
    "testbed-real": "the testbed scaled to this machine, real training tasks: 2 worker + 1 PS "
                    "servers of 2 cores, 8 jobs, 10 slots of 4 s; chunk times from speed "
                    "profiles (--profile)",
    "philly-priority": "Philly jobs with user classes (20/50/30 % high/mid/low) and job types, "
                       "32 P100 GPUs in 2 racks + a CPU-mode server per rack (priority "
                       "preemption; load= divides arrivals)",
    "philly-chains": "the preemption study's chain workload: those Philly jobs near GPU "
                     "saturation (saturation= 1.5), low/mid/high classes arriving in waves",
    "degrade-real": "a real degradation run: a low-priority job degraded from the one 4-GPU "
                    "server to the CPU server when a high-priority job arrives, promoted back "
                    "when it completes (2 jobs, digits-mlp tasks; priority-degrade with cap=1)",
}

# preset -> (generator, {size argument: the generator's parameter names it sets})
_SIZE_ARGS: dict[str, tuple[Callable[..., Instance], dict[str, tuple[str, ...]]]] = {
    "paper-sim": (paper_sim, {"jobs": ("jobs",), "horizon": ("horizon",),
                              "servers": ("worker_servers", "ps_servers")}),
    "paper-fig5": (paper_fig5, {"jobs": ("jobs",), "horizon": ("horizon",),
                                "servers": ("servers",)}),
    "testbed": (testbed, {}),
    "testbed-real": (testbed_real, {"jobs": ("jobs",), "horizon": ("horizon",)}),
    "philly-priority": (philly_priority, {"jobs": ("max_jobs",),
                                          "servers": ("servers_per_rack",)}),
    "philly-chains": (chain_instance, {"jobs": ("max_jobs",), "servers": ("servers_per_rack",)}),
    "degrade-real": (degrade_real, {}),
}


def generate(preset: str, *, seed: int, jobs: int | None = None, horizon: int | None = None,
             servers: int | None = None, **options: Any) -> Instance:
    """The instance of ``preset`` for ``seed`` (deterministic: same arguments, same instance)."""
    if preset not in _SIZE_ARGS:
        raise ValueError(f"unknown preset {preset!r} (known: {', '.join(PRESETS)})")
    fn, size_args = _SIZE_ARGS[preset]
    kwargs: dict[str, Any] = {}
    for name, value in (("jobs", jobs), ("horizon", horizon), ("servers", servers)):
        if value is None:
            continue
        if name not in size_args:
            raise ValueError(f"{name}: the {preset!r} preset has a fixed size; leave it unset")
        for param in size_args[name]:
            kwargs[param] = value
    allowed = [p.name for p in inspect.signature(fn).parameters.values()
               if p.kind is inspect.Parameter.KEYWORD_ONLY]
    for name in options:
        if name not in allowed:
            raise ValueError(f"{name}: unknown option for preset {preset!r} "
                             f"(valid: {', '.join(allowed)})")
        if name in kwargs:
            raise ValueError(f"{name}: set both directly and through a size argument")
    return fn(seed, **kwargs, **options)
