"""Cluster-scheduler components: topology-aware tree placement, utilisation predictors, the
topology-aware OASiS variant and rack layouts (issue 6)."""
from .predictors import (EWMA, PREDICTORS, AutoRegressive, LastValue, TypeMean,
                         UtilizationPredictor, WindowQuantile, evaluate, get_predictor,
                         one_step_forecasts)
from .tree import TreePlacement, subtree_span

__all__ = ["EWMA", "PREDICTORS", "AutoRegressive", "LastValue", "TypeMean", "UtilizationPredictor",
           "WindowQuantile", "evaluate", "get_predictor", "one_step_forecasts", "TreePlacement",
           "subtree_span"]
