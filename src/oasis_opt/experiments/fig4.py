"""Fig. 4: actual minus target completion time, (t_hat_i - a_i) - gamma3, T = 100.

Setting (paper §13): 200 jobs, half time-sensitive and half time-critical (``class_mix`` =
(0, 0.5, 0.5): each job's class is drawn with these probabilities), on H = K = 50 servers; box
plots per class and policy, pooled over seeds. The paper plots completed jobs; the RRH median of
about 98 at T = 100 suggests it counted unfinished jobs as completing at T (A7), so both
conventions are drawn: completed jobs only (top) and unfinished jobs counted at T (bottom).
OASiS is priced with U and L estimated on history instances of this workload (as in Fig. 3);
the oracle-priced OASiS is drawn beside it.
"""
from __future__ import annotations

from .calibration import FloorEstimate, history_seeds
from .figures.common import CLASSES, PAPER_POLICIES, oasis_runs, series
from .spec import RunSpec

FULL = {"jobs": 200, "horizon": 100, "servers": 50, "seeds": (0, 1, 2)}
QUICK = {"jobs": 20, "horizon": 100, "servers": 5, "seeds": (0, 1)}
CLASS_MIX = (0.0, 0.5, 0.5)  # (time-insensitive, time-sensitive, time-critical)


def settings(quick: bool) -> dict:
    return QUICK if quick else FULL


def workload(quick: bool) -> dict:
    """``paper_sim`` arguments of Fig. 4's instances, without the seed."""
    s = settings(quick)
    return {"jobs": s["jobs"], "horizon": s["horizon"], "worker_servers": s["servers"],
            "ps_servers": s["servers"], "calibration": "calibrated", "arrivals": "uniform",
            "class_mix": CLASS_MIX}


def estimates(quick: bool) -> list[FloorEstimate]:
    return [FloorEstimate("paper_sim", workload(quick), history_seeds(quick))]


def runs(quick: bool, estimated=None) -> list[RunSpec]:
    out = []
    for seed in settings(quick)["seeds"]:
        params = {**workload(quick), "seed": seed}
        for policy in PAPER_POLICIES:
            if policy == "oasis":
                out += oasis_runs(estimates(quick)[0], estimated, params, ("timeliness",),
                                  {"seed": seed})
            else:
                out.append(RunSpec("paper_sim", params, policy, metrics=("timeliness",),
                                   tags={"seed": seed}))
    return out


def collect(specs, records) -> dict[tuple[str, str, str], list[float]]:
    """(convention, class, policy) -> pooled (t_hat - a) - gamma3 values."""
    out: dict[tuple[str, str, str], list[float]] = {}
    for s in specs:
        tl = records[s.key]["metrics"]["timeliness"]
        for c in CLASSES:
            done, cens = tl["completed"].get(c, []), tl["censored"].get(c, [])
            out.setdefault(("completed", c, series(s)), []).extend(done)
            out.setdefault(("with_unfinished", c, series(s)), []).extend(done + cens)
            out.setdefault(("unfinished", c, series(s)), []).extend(cens)
    return out
