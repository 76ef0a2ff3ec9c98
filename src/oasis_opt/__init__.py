"""oasis_opt: scheduling distributed ML training jobs on shared GPU clusters.

Light at import: ``import oasis_opt`` loads only the standard library; each name below imports
its module on first use (the model loads numpy, and networkx once a topology is built; the
solvers JAX, Pyomo, OR-Tools and Ray load only when a policy that needs them runs). Start with ``oasis_opt.model``
(instances, schedules, ``validate``), ``oasis_opt.workloads`` (generators),
``oasis_opt.get_policy`` / ``oasis_opt.solve`` (``oasis_opt.build`` routes a policy's options,
refusing with ``OptionError``), ``oasis_opt.online`` (OASiS),
``oasis_opt.offline`` (MILP, LP bound, column generation, the solver layer) and
``oasis_opt.sim``.
"""
from typing import TYPE_CHECKING

from ._extras import MissingExtra
from ._lazy import lazy_exports
from .policies import OptionError, available_policies, build, get_policy, solve

__version__ = "0.1.0"

_EXPORTS = {
    "Instance": ".model", "Schedule": ".model", "validate": ".model",
    "load_instance": ".model.io", "load_result": ".model.io", "save_instance": ".model.io",
    "save_result": ".model.io",
}
__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

if TYPE_CHECKING:
    from .model import Instance, Schedule, validate
    from .model.io import load_instance, load_result, save_instance, save_result

__all__ = ["Instance", "Schedule", "validate", "load_instance", "load_result", "save_instance",
           "save_result", "available_policies", "build", "get_policy", "solve", "OptionError",
           "MissingExtra",
           "__version__"]
