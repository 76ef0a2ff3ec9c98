"""Figs. 8-9: the testbed scenario (paper §14), simulated.

``testbed(seed)``: 12 jobs arriving in the first 9 of 10 slots on 7 worker and 2 PS hosts. Fig. 8
is the total utility (paper axis x10^2), Fig. 9 the actual minus target completion time of every
job (all classes pooled, as the paper shows one box per policy). The paper reports one run;
ours are pooled over seeds (bars: mean ± sd). As in Fig. 4, completed jobs only, and (hatched)
with unfinished jobs counted as completing at T. OASiS is priced with U and L estimated on
history testbed instances (seeds 1000-1009), the oracle-priced OASiS is drawn beside it.
"""
from __future__ import annotations

from .calibration import FloorEstimate, history_seeds
from .figures.common import PAPER_POLICIES, oasis_runs, series
from .spec import RunSpec

FULL = {"seeds": tuple(range(10))}
QUICK = {"seeds": (0, 1, 2)}


def settings(quick: bool) -> dict:
    return QUICK if quick else FULL


METRICS = ("total_utility", "timeliness")


def estimates(quick: bool) -> list[FloorEstimate]:
    return [FloorEstimate("testbed", {}, history_seeds(quick, small=True))]


def runs(quick: bool, estimated=None) -> list[RunSpec]:
    out = []
    for seed in settings(quick)["seeds"]:
        for policy in PAPER_POLICIES:
            if policy == "oasis":
                out += oasis_runs(estimates(quick)[0], estimated, {"seed": seed}, METRICS,
                                  {"seed": seed})
            else:
                out.append(RunSpec("testbed", {"seed": seed}, policy, metrics=METRICS,
                                   tags={"seed": seed}))
    return out


def collect(specs, records):
    util: dict[str, list[float]] = {}
    done: dict[str, list[float]] = {}
    unf: dict[str, list[float]] = {}
    for s in specs:
        m = records[s.key]["metrics"]
        util.setdefault(series(s), []).append(m["total_utility"])
        done.setdefault(series(s), []).extend(v for vs in m["timeliness"]["completed"].values()
                                              for v in vs)
        unf.setdefault(series(s), []).extend(v for vs in m["timeliness"]["censored"].values()
                                             for v in vs)
    return util, done, unf
