"""The simulator: slot loop, cluster state, placement components and metrics."""
from .core import OnlinePolicy, PolicyError, chunk_time_progress, simulate
from .metrics import compare, completion_minus_target, summarize, utilisation
from .placement import FirstFit, Placement, RoundRobin, get_placement
from .report import Summary, SummaryTable
from .state import ClusterState

__all__ = ["OnlinePolicy", "PolicyError", "chunk_time_progress", "simulate", "summarize",
           "Summary", "SummaryTable", "compare",
           "completion_minus_target", "utilisation", "FirstFit", "Placement", "RoundRobin",
           "get_placement", "ClusterState"]
