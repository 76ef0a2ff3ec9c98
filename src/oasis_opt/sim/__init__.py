"""The simulator: slot loop, cluster state, placement components and metrics."""
from .core import OnlinePolicy, PolicyError, chunk_time_progress, simulate
from .metrics import completion_minus_target, summarize, utilisation
from .placement import FirstFit, Placement, RoundRobin, get_placement
from .state import ClusterState

__all__ = ["OnlinePolicy", "PolicyError", "chunk_time_progress", "simulate", "summarize",
           "completion_minus_target", "utilisation", "FirstFit", "Placement", "RoundRobin",
           "get_placement", "ClusterState"]
