"""Shared pieces of the figure definitions: the paper's numbers, plotting, markdown tables.

The paper's values (read off its plots, see ``paper_figs/reference/README.md``) are CSV files in
``paper_figs/reference/`` of the repository. Figures are drawn with matplotlib's object API
(``matplotlib.figure.Figure``, no pyplot state, no display needed) and saved as PNG and PDF.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..._extras import require
from ..spec import RunSpec

# Display names and colours of the policies, in the paper's legend order.
DISPLAY = {"oasis": "OASiS", "oasis-oracle": "OASiS (oracle U, L)",
           "oasis-plugin": "OASiS (plug-in U, L)", "fifo": "FIFO", "drf": "DRF", "rrh": "RRH", "dorm": "Dorm",
           "tiresias": "Tiresias", "optimus": "Optimus", "offline": "Offline", "greedy": "Greedy"}
COLOURS = {"oasis": "#1f77b4", "oasis-oracle": "#aec7e8", "fifo": "#ff7f0e", "drf": "#2ca02c", "rrh": "#d62728",
           "dorm": "#9467bd", "tiresias": "#8c564b", "optimus": "#e377c2", "greedy": "#7f7f7f"}
PAPER_POLICIES = ("oasis", "fifo", "drf", "rrh", "dorm")
# OASiS priced with the literal oracle constants of eqs. (23)-(26), drawn beside the paper's
# policies; "oasis" itself is priced with U and L estimated on a history (``calibration``).
ORACLE = "oasis-oracle"
SERIES = PAPER_POLICIES + (ORACLE,)
CLASSES = ("time-critical", "time-sensitive")  # the two classes of Figs. 4 and 9
PAPER_MARKER = dict(marker="D", color="black", markersize=5, linestyle="none", zorder=5)

REPO_ROOT = Path(__file__).resolve().parents[4]
DEFAULT_REFERENCE = REPO_ROOT / "paper_figs" / "reference"


@dataclass(frozen=True)
class Figure:
    """A figure: its runs (``runs(quick)``) and how to draw them (``render(...)``).

    ``render(specs, records, out_dir, reference_dir, quick) -> list of written paths``, where
    ``records`` maps run key -> stored record for every spec of ``runs(quick)``.
    ``compute``, when set, replaces the runner for figures whose computation lives elsewhere
    (Fig. 5): ``compute(quick, results_dir, workers, address, progress) -> data`` and
    ``render(data, out_dir, reference_dir, quick)``.
    ``estimates``, when set, lists the ``calibration.FloorEstimate``s whose pricing OASiS uses:
    they are computed first, then ``runs(quick, estimated)`` gets ``estimated[estimate.key] =
    EstimatedPricing`` (the pricing document, its ``calibration``) and ``render`` gets the same as
    ``estimated=``.
    """

    name: str
    title: str
    runs: Callable[..., list[RunSpec]] | None
    render: Callable[..., list[Path]]
    compute: Callable[..., Any] | None = None
    estimates: Callable[[bool], list] | None = None


def series(spec: RunSpec) -> str:
    """The curve a run belongs to: its ``series`` tag (e.g. ``ORACLE``), else its policy."""
    return spec.tags.get("series", spec.policy)


def estimated_pricing(estimated, estimate) -> dict:
    """The pricing document of ``estimate``; a clear error when its calibration was not run."""
    if not estimated or estimate.key not in estimated:
        raise ValueError(f"estimated: no calibration for {estimate.generator} "
                         f"{dict(estimate.params)} (run the figure's estimates first, e.g. "
                         "through `reproduce`)")
    return estimated[estimate.key]


def adaptive_options(estimated, estimate) -> dict:
    """``oasis-adaptive``'s options for ``estimate``: the searched floor's pricing document (U,
    and L as the starting floor) and the history's calibration table as the prior
    (``online.adaptive``: ``prior=``, at the policy's default weight). Both come from the same
    history; nothing is read from the evaluated instance."""
    searched = estimated_pricing(estimated, estimate)
    calibration = getattr(searched, "calibration", None)
    if calibration is None:
        raise ValueError(f"estimated: the pricing of {estimate.generator} {dict(estimate.params)} "
                         "has no calibration table (resolve the estimate with "
                         "`experiments.calibration.resolve_all`)")
    return {"pricing": dict(searched), "prior": calibration.prior()}


def oasis_runs(estimate, estimated, params: dict, metrics=("total_utility",),
               tags: dict | None = None) -> list[RunSpec]:
    """OASiS on one instance twice: priced with the estimate (``oasis``) and with the oracle."""
    tags = dict(tags or {})
    return [RunSpec(estimate.generator, params, "oasis",
                    {"pricing": estimated_pricing(estimated, estimate)}, metrics, tags=tags),
            RunSpec(estimate.generator, params, "oasis", {}, metrics,
                    tags={**tags, "series": ORACLE})]


def calibration_markdown(rows: Sequence[tuple[str, Any]]) -> str:
    """Which floor L each estimate chose: ``rows`` = (label, FloorCalibration)."""
    if not rows:
        return ""
    lines = []
    for label, c in rows:
        ranked = sorted(range(len(c.grid)), key=lambda j: -c.mean[j])
        runner_up = (f"{c.grid[ranked[1]]:.2g} ({c.mean[ranked[1]]:.0f})" if len(ranked) > 1
                     else "—")
        lines.append([label, len(c.scores[0]), f"{c.chosen:.2g}", f"{c.mean[c.index]:.0f}",
                      runner_up, "yes" if c.at_edge else "no"])
    grid = rows[0][1].grid
    return ("**Pricing.** \"OASiS\" is priced with U and L estimated on history instances of the "
            "same workload (seeds disjoint from the evaluated ones): U by eqs. (23)-(24) over the "
            f"history's jobs, L1 = L2 = the floor in {grid[0]:.0e} … {grid[-1]:.0e} (half decades) "
            "with the best mean utility on the history (`oasis_opt.online.estimate`). \"OASiS "
            "(oracle U, L)\" uses eqs. (23)-(26) computed on the evaluated instance itself.\n\n"
            + markdown_table(["workload", "history instances", "chosen L",
                              "mean history utility at L", "runner-up L (utility)",
                              "at grid edge"], lines))


def display(policy: str) -> str:
    return DISPLAY.get(policy, policy)


def read_reference(name: str, reference_dir: str | Path | None = None) -> list[dict[str, str]]:
    """Rows of ``<reference_dir>/<name>.csv`` as dicts (empty cell = value not read off the plot)."""
    path = Path(reference_dir or DEFAULT_REFERENCE) / f"{name}.csv"
    if not path.is_file():
        raise FileNotFoundError(f"paper reference values not found: {path} (pass reference_dir, "
                                "or run from a checkout that has paper_figs/reference/)")
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def number(cell: str | None) -> float:
    """A CSV cell as float; an empty cell is NaN (the paper's value was not read)."""
    return float(cell) if cell not in (None, "") else math.nan


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value; NaN for none)."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return math.nan, math.nan
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0


def mean_range(values: Sequence[float]) -> tuple[float, float, float]:
    """Mean, min and max over seeds (NaN for none): a bar over seeds is drawn as the mean with
    min … max whiskers. Unlike mean ± sd, the whiskers stay within the data, so those of a
    non-negative quantity (utility, a ratio of utilities) never go below zero."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return math.nan, math.nan, math.nan
    return float(v.mean()), float(v.min()), float(v.max())


def bars_caption(seeds: int) -> str:
    """What the bars of a figure over ``seeds`` seeds show (every bar figure says it)."""
    if seeds == 1:
        return "bars: one seed (no whiskers)"
    return f"bars: mean over {seeds} seeds, whiskers: min … max"


BOX_CAPTION = ("boxes: median and quartiles over the jobs of every seed, whiskers: the furthest "
               "points within 1.5 IQR, circles: beyond")


def whiskers(mean: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray | None:
    """``yerr`` for ``Axes.bar``: (2, n) distances down to ``lo`` and up to ``hi``; None when
    every range is empty (one seed), so no zero-length caps are drawn."""
    # clipped: the mean of equal values can differ from them in the last bit
    err = np.clip(np.vstack([mean - lo, hi - mean]), 0.0, None)
    return None if not np.any(np.nan_to_num(err) > 0) else err


def box_stats(values: Sequence[float]) -> dict[str, float]:
    """Median, quartiles and Tukey whiskers (most extreme points within 1.5 IQR), as plotted."""
    v = np.sort(np.asarray(values, dtype=float))
    if v.size == 0:
        return {k: math.nan for k in ("median", "q1", "q3", "lo", "hi")}
    q1, med, q3 = np.percentile(v, [25, 50, 75])
    iqr = q3 - q1
    inside = v[(v >= q1 - 1.5 * iqr) & (v <= q3 + 1.5 * iqr)]
    return {"median": float(med), "q1": float(q1), "q3": float(q3),
            "lo": float(inside.min()), "hi": float(inside.max())}


def ratio(a: float, b: float) -> float:
    """a / b, NaN when b is 0 or NaN (a relative bar with no reference is not drawn)."""
    return a / b if b and not math.isnan(b) else math.nan


def fmt(x: float, digits: int = 3) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def checks_markdown(checks: Sequence[tuple[str, bool, str]],
                    heading: str = "The paper's claims") -> str:
    """The paper's qualitative claims (or a study's: ``heading``), each evaluated on our
    numbers."""
    lines = [f"**{heading}, checked on these runs:**", ""]
    for claim, ok, detail in checks:
        lines.append(f"- {'✅' if ok else '❌'} {claim} — {detail}")
    return "\n".join(lines) + "\n"


def new_figure(ncols: int = 1, nrows: int = 1, width: float = 6.0, height: float = 3.8):
    require("matplotlib", extra="plots", feature="figures")
    from matplotlib.figure import Figure as MplFigure

    fig = MplFigure(figsize=(width * ncols, height * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


def clipped_titles(fig) -> list[str]:
    """The suptitle and axes titles of ``fig`` that do not fit inside the figure (a title
    wider than its figure is cut at the edges in the saved PNG and PDF)."""
    fig.draw_without_rendering()  # lay out as saving does (constrained layout)
    box = fig.bbox
    texts = [fig._suptitle] if getattr(fig, "_suptitle", None) is not None else []
    for a in fig.axes:
        texts += [a.title, a._left_title, a._right_title]
    out = []
    for t in texts:
        if not t.get_text():
            continue
        e = t.get_window_extent()
        if e.x0 < box.x0 - 0.5 or e.x1 > box.x1 + 0.5 or e.y1 > box.y1 + 0.5:
            out.append(t.get_text())
    return out


def save(fig, out_dir: Path, stem: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{stem}.png", out_dir / f"{stem}.pdf"]
    # no creation dates: redrawing unchanged data gives byte-identical files (clean diffs)
    fig.savefig(paths[0], dpi=130, metadata={"Software": None})
    fig.savefig(paths[1], metadata={"CreationDate": None, "Producer": None, "Creator": None})
    return paths


def write_markdown(out_dir: Path, stem: str, text: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{stem}.md"
    path.write_text(text)
    return path


def grouped_bars(ax, groups: Sequence[Any], series: Sequence[str], ours: dict, paper: dict,
                 colours: dict[str, str], labels: dict[str, str], scale: float = 1.0) -> None:
    """Bars of our mean with min … max whiskers over seeds per (group, series), the paper's
    value as a marker on the same bar. ``ours[(g, s)] = (mean, min, max)`` (``mean_range``);
    ``paper[(g, s)] = value`` (missing/NaN: none)."""
    n = len(series)
    width = 0.8 / n
    x = np.arange(len(groups))
    missing = (math.nan, math.nan, math.nan)
    for k, s in enumerate(series):
        pos = x - 0.4 + width * (k + 0.5)
        m, lo, hi = (np.array(v, dtype=float) / scale
                     for v in zip(*(ours.get((g, s), missing) for g in groups)))
        ax.bar(pos, m, width, yerr=whiskers(m, lo, hi), color=colours[s], label=labels[s],
               capsize=2, error_kw={"elinewidth": 0.8})
        p = np.array([paper.get((g, s), math.nan) for g in groups], dtype=float) / scale
        if np.isfinite(p).any():
            ax.plot(pos, p, **PAPER_MARKER, label="paper" if k == 0 else None)
    ax.set_xticks(x, [str(g) for g in groups])
