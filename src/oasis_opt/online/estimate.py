"""OASiS's U and L tuned on a job history: the floor L searched on utility (the default of
``oasis-opt estimate-pricing``, ``--method search``).

This is *tuning*, not the paper's estimate (``online.plugin`` applies eqs. (23)-(26) to the
history without looking at utility: ``--method plugin``): the floor is the one under which OASiS
earned most on the history. It is the default because it wins the pricing study
(``experiments.pricing``, ``paper_figs/pricing.md``: on held-out seeds, against the plug-in and
the oracle constants, on every workload family). It is a fair comparison only when
the history rule is fixed before the evaluated instances are seen: which instances (size and
seeds, disjoint from the evaluated ones, e.g. ``experiments.calibration.HISTORY_SEEDS``) and the
grid (``DEFAULT_FLOOR_GRID``: 1e-7 to 1 in half decades, extended past 0.1 because the best floor
often sat at 0.1, the old grid's top).

Why this exists: the oracle constants of eqs. (23)-(26) are exact but, with the paper's sigmoid
utilities, the floor price L is the minimum over jobs of f_i(T - a_i), the utility of a
time-critical job (decay 4-6) finishing hundreds of slots past its target: about e^-750 on
paper-sim. Prices then stay ~0 until a server is almost full, and OASiS admits plans worth ~0
that hold capacity later jobs need (reference A6; ``experiments/oasis_floor_price.py``). The
paper itself runs on *estimated* U and L. This module estimates them from past instances
(``history``: other traces of the same workload, never the instance being evaluated):

* **U** (eqs. 23-24): per resource and pool, the largest oracle U over the history, i.e. the
  formula applied to the past jobs.
* **L** (one floor for both pools, L1 = L2): the value of ``grid`` under which OASiS, priced with
  that U, earns the largest mean total utility on the history (ties: the smaller L, the one
  closer to the theory's conservative floor). If the best L is an end of ``grid`` the result is
  flagged ``at_edge``: widen the grid.

The result, ``EstimatedPricing``, is the ``oasis-opt/pricing@1`` document itself (a dict) for
``OasisPolicy(pricing=...)``, ``save_pricing`` (then ``oasis-opt solve --pricing``) or
``json.dump``, with the calibration table as its ``calibration`` attribute. OASiS's 2 alpha bound (Theorem 4) assumes L at most the oracle
floor; an estimated L above it trades that worst-case guarantee for the typical case, and
``Pricing.alpha`` reports the alpha of whatever constants are used.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .pricing import PRICING_FORMAT, oracle_u

# 1e-7 ... 1 in half decades: the floors worth trying for utilities of the paper's scale
# (gamma1 <= 100 per job, a few to a few hundred resource units per job and slot).
DEFAULT_FLOOR_GRID: tuple[float, ...] = tuple(10.0 ** (k / 2) for k in range(-14, 1))


def history_u(history: Iterable[Any]) -> dict[str, dict[str, float]]:
    """``{"U_worker": {r: U}, "U_ps": {r: U}}``: eqs. (23)-(24) over every history job.

    A resource no history job demands on a pool is left out (unpriced); an instance that later
    demands it is refused by the pricing reader with the resource named.
    """
    out: dict[str, dict[str, float]] = {"U_worker": {}, "U_ps": {}}
    count = 0
    for inst in history:
        count += 1
        if inst.I == 0:
            continue
        for key, U in zip(("U_worker", "U_ps"), oracle_u(inst)):
            for r, u in zip(inst.resources, U):
                if not math.isnan(u):
                    out[key][r] = max(out[key].get(r, 0.0), float(u))
    if count == 0:
        raise ValueError("history: no instances to estimate U and L from")
    if not out["U_worker"] and not out["U_ps"]:
        raise ValueError("history: no job in the history demands any resource")
    return out


def pricing_document(u: dict[str, dict[str, float]], floor: float) -> dict:
    """An ``oasis-opt/pricing@1`` document with the given U and L1 = L2 = ``floor``."""
    if isinstance(floor, bool) or not (isinstance(floor, (int, float)) and math.isfinite(floor)
                                       and floor > 0):
        raise ValueError(f"floor: must be a finite number > 0, got {floor!r}")
    return {"format": PRICING_FORMAT, "U_worker": dict(u["U_worker"]), "U_ps": dict(u["U_ps"]),
            "L_worker": float(floor), "L_ps": float(floor)}


def check_grid(grid: Sequence[float]) -> tuple[float, ...]:
    """The grid as increasing floats; ``ValueError`` on an empty grid, a value <= 0 or a repeat."""
    values = []
    for n, g in enumerate(grid):
        if isinstance(g, bool) or not isinstance(g, (int, float)) or not math.isfinite(g) or g <= 0:
            raise ValueError(f"grid[{n}]: must be a finite number > 0, got {g!r}")
        values.append(float(g))
    if not values:
        raise ValueError("grid: needs at least one floor price")
    if len(set(values)) != len(values):
        raise ValueError("grid: values must be distinct")
    return tuple(sorted(values))


@dataclass(frozen=True)
class FloorCalibration:
    """How L was chosen: ``scores[j][n]`` is OASiS's total utility on history instance n at
    ``grid[j]``; ``chosen`` = ``grid[index]`` maximises the mean over the history. ``jobs[n]``
    (optional) is history instance n's number of jobs: with it, :meth:`prior` is the table
    ``oasis-adaptive``'s ``prior`` option reads."""

    grid: tuple[float, ...]
    scores: tuple[tuple[float, ...], ...]
    jobs: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if len(self.scores) != len(self.grid) or not self.scores or not all(
                len(row) == len(self.scores[0]) and row for row in self.scores):
            raise ValueError("scores: one non-empty row per grid value, all of one length")
        if self.jobs is not None:
            object.__setattr__(self, "jobs", tuple(int(n) for n in self.jobs))
            if len(self.jobs) != len(self.scores[0]) or min(self.jobs) < 1:
                raise ValueError("jobs: one positive job count per history instance")

    @property
    def mean(self) -> tuple[float, ...]:
        return tuple(float(np.mean(row)) for row in self.scores)

    @property
    def index(self) -> int:
        """argmax of the mean; ``np.argmax`` returns the first maximum, i.e. the smallest L."""
        return int(np.argmax(self.mean))

    @property
    def chosen(self) -> float:
        return self.grid[self.index]

    @property
    def at_edge(self) -> bool:
        """The best L is an end of a grid of more than one value: the optimum may lie beyond."""
        return len(self.grid) > 1 and self.index in (0, len(self.grid) - 1)

    def to_dict(self) -> dict:
        out = {"grid": list(self.grid), "mean_utility": list(self.mean),
               "utility": [list(r) for r in self.scores], "chosen": self.chosen,
               "at_edge": self.at_edge}
        if self.jobs is not None:
            out["history_jobs"] = list(self.jobs)
        return out

    def prior(self) -> dict:
        """``{"grid", "mean_utility", "history_jobs"}``: the history's mean total utility per
        floor and its mean job count per instance, ``oasis-adaptive``'s ``prior`` (needs
        ``jobs``; ``estimate_pricing`` and ``experiments.calibration`` record it)."""
        if self.jobs is None:
            raise ValueError("prior: this calibration has no history job counts (jobs=None)")
        return {"grid": list(self.grid), "mean_utility": list(self.mean),
                "history_jobs": float(np.mean(self.jobs))}


class EstimatedPricing(dict):
    """An ``oasis-opt/pricing@1`` document (this dict) and the ``calibration`` that chose its L.

    Usable wherever a pricing document is: ``OasisPolicy(pricing=est)``,
    ``get_policy("oasis", pricing=est)``, ``save_pricing(est, path)``, ``json.dump(est, f)``.
    """

    def __init__(self, document: dict, calibration: FloorCalibration):
        super().__init__(document)
        self.calibration = calibration

    def __reduce__(self) -> tuple[type, tuple[dict, FloorCalibration]]:  # pickle / copy (Ray)
        # keep the calibration
        return type(self), (dict(self), self.calibration)

    def __repr__(self) -> str:
        return (f"EstimatedPricing(L={self['L_worker']:.3g}, U_worker={self['U_worker']}, "
                f"U_ps={self['U_ps']}, grid of {len(self.calibration.grid)})")


def check_floors(u: dict[str, dict[str, float]], grid: Sequence[float]) -> None:
    """``ValueError`` naming the first floor of ``grid`` above some U: a price must rise from L
    (empty server) to U (full), so a pricing document refuses L > U."""
    for key in ("U_worker", "U_ps"):
        for r, value in u[key].items():
            for n, floor in enumerate(grid):
                if floor > value:
                    raise ValueError(f"grid[{n}]: floor price {floor:g} exceeds {key}.{r} = "
                                     f"{value:g} estimated on the history")


def estimate_pricing(history: Sequence[Any], grid: Sequence[float] = DEFAULT_FLOOR_GRID, *,
                     backend: str = "numpy", batch: bool | None = None,
                     progress: Callable[[int, int], None] | None = None,
                     ) -> EstimatedPricing:
    """Estimate OASiS's U and L on ``history`` (past instances); see the module docstring.

    Runs OASiS ``len(grid) * len(history)`` times in this process; every schedule is validated
    (a calibration on invalid schedules would be meaningless). ``batch`` (default: True with the
    numpy backend, which it needs) runs the whole grid on one history instance at once
    (``online.pricing_batch.solve_pricings``: the same schedules as the runs one floor at a time,
    hence the same table and chosen L); ``batch=False`` runs them one by one.
    ``progress(done, total)`` is called after each run (with ``batch``, the ``len(grid)`` runs
    of a history instance end together). Returns the pricing document with the calibration table as
    its ``calibration`` (``EstimatedPricing``; pass it as ``pricing=``).
    (``oasis_opt.experiments.calibration`` does the same runs in parallel through the runner.)
    """
    from ..model.validate import assert_valid
    from .dual import check_backend
    from .oasis import OasisPolicy

    check_backend(backend)
    if batch is None:
        batch = backend == "numpy"
    elif not isinstance(batch, bool):
        raise ValueError(f"batch: expected True, False or None, got {batch!r}")
    if batch and backend != "numpy":
        raise ValueError(f"batch: the batched grid runs the numpy backend, not {backend!r} "
                         "(pass batch=False)")
    history = list(history)
    grid = check_grid(grid)
    u = history_u(history)
    check_floors(u, grid)
    documents = [pricing_document(u, floor) for floor in grid]
    total, done = len(grid) * len(history), 0
    scores: list[list[float]] = [[] for _ in grid]  # scores[j][n]: floor j, instance n

    def record(j: int, inst: Any, schedule: Any) -> None:
        nonlocal done
        assert_valid(inst, schedule)
        scores[j].append(float(schedule.total_utility))
        done += 1
        if progress is not None:
            progress(done, total)

    if batch:
        from .pricing_batch import solve_pricings

        for inst in history:
            for j, schedule in enumerate(solve_pricings(inst, documents)):
                record(j, inst, schedule)
    else:
        for j, document in enumerate(documents):
            for inst in history:
                record(j, inst, OasisPolicy(backend=backend, pricing=document).solve(inst))
    calibration = FloorCalibration(grid, tuple(tuple(row) for row in scores),
                                   tuple(inst.I for inst in history))
    return EstimatedPricing(pricing_document(u, calibration.chosen), calibration)
