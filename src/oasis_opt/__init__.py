"""oasis_opt: scheduling distributed ML training jobs on shared GPU clusters.

Light at import: the solvers (JAX, Pyomo, OR-Tools, Ray) load only when a policy that needs them
is used. Start with ``oasis_opt.model`` (instances, schedules, ``validate``),
``oasis_opt.workloads`` (generators), ``oasis_opt.get_policy`` and ``oasis_opt.sim``.
"""
from .model import Instance, Schedule, validate
from .model.io import load_instance, load_result, save_instance, save_result
from .policies import available_policies, get_policy, solve

__version__ = "0.1.0"
__all__ = ["Instance", "Schedule", "validate", "load_instance", "load_result", "save_instance",
           "save_result", "available_policies", "get_policy", "solve", "__version__"]
