"""Fig. 3: total job utility vs number of jobs, T = 300, OASiS against FIFO, DRF, RRH and Dorm.

Setting (paper §10, choices A1-A4): ``paper_sim`` with H = K = 50 servers, T = 300, uniform
arrivals, the calibrated job sizes, class mix 10/55/35 %; 100-400 jobs; each (jobs, seed) is one
instance that every policy solves. Metric (§12): sum of f_i(t_hat_i - a_i) over completed jobs.
The quick variant keeps the load per server-slot (jobs / (H T)) of the full one with 5 + 5
servers and a tenth of the jobs. Runs are listed largest first, Dorm (the slowest) first, so
the pool starts the long runs early (longest-processing-time-first balances the workers).

OASiS is priced with U and L estimated on history instances of the same size (seeds 1000-1002,
``calibration.FloorEstimate``); the literal oracle constants are drawn beside it
("OASiS (oracle U, L)", see ``online.estimate`` for why they are not the headline).
"""
from __future__ import annotations

from .calibration import FloorEstimate, history_seeds
from .figures.common import oasis_runs, series
from .spec import RunSpec

FULL = {"jobs": (100, 200, 300, 400), "horizon": 300, "servers": 50, "seeds": (0, 1, 2)}
QUICK = {"jobs": (10, 20, 30, 40), "horizon": 300, "servers": 5, "seeds": (0,)}
PAPER_JOBS = (100, 200, 300, 400)


def settings(quick: bool) -> dict:
    return QUICK if quick else FULL


def sim_params(jobs: int, seed: int, quick: bool) -> dict:
    """``paper_sim`` arguments of one Fig. 3 / Fig. 6 instance (shared so the runs are shared)."""
    s = settings(quick)
    return {"seed": seed, "jobs": jobs, "horizon": s["horizon"], "worker_servers": s["servers"],
            "ps_servers": s["servers"], "calibration": "calibrated", "arrivals": "uniform"}


SLOWEST_FIRST = ("dorm", "drf", "oasis", "fifo", "rrh")


def estimate(jobs: int, quick: bool) -> FloorEstimate:
    """OASiS's U and L for ``jobs`` jobs, estimated on history instances of that size."""
    params = sim_params(jobs, 0, quick)
    del params["seed"]
    return FloorEstimate("paper_sim", params, history_seeds(quick))


def estimates(quick: bool) -> list[FloorEstimate]:
    return [estimate(n, quick) for n in sorted(settings(quick)["jobs"], reverse=True)]


def runs(quick: bool, estimated=None) -> list[RunSpec]:
    s = settings(quick)
    out = []
    for n in sorted(s["jobs"], reverse=True):
        for policy in SLOWEST_FIRST:
            for seed in s["seeds"]:
                tags = {"jobs": n, "seed": seed}
                if policy == "oasis":
                    out += oasis_runs(estimate(n, quick), estimated, sim_params(n, seed, quick),
                                      tags=tags)
                else:
                    out.append(RunSpec("paper_sim", sim_params(n, seed, quick), policy, tags=tags))
    return out


def collect(specs, records) -> dict[tuple[int, str], list[float]]:
    out: dict[tuple[int, str], list[float]] = {}
    for s in specs:
        out.setdefault((s.tags["jobs"], series(s)), []).append(
            records[s.key]["metrics"]["total_utility"])
    return out
