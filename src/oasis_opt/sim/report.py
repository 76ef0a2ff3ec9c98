"""The summary table: schedules side by side, labelled by policy and options, with their validity
and, for offline policies, the solver's status, bound and gap.

``summarize(instance, schedule)`` returns a ``Summary`` (the metrics, a dict) whose ``str`` is its
one-row table; ``compare(instance, schedules, names)`` validates several schedules and returns a
``SummaryTable`` whose ``str`` is what ``oasis-opt summary`` prints: the table, then the
violations of every invalid schedule and the solver's message for every offline result that is
not proven optimal.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..model.instance import JOB_CLASSES

SOLVER_KEYS = ("status", "proven_optimal", "objective", "bound", "gap", "message")
JCT_COLUMNS = {"avg JCT h": "avg_jct_h", "makespan h": "makespan_h", "GPU util": "utilisation",
               "rho max": "rho_max", "rho mean": "rho_mean"}  # header -> key of Summary["jct"]
PREEMPTION_COLUMNS = ("stops", "degraded", "promoted", "lost work", "restarts", "chain mean",
                      "chain max")
MAX_VIOLATIONS = 20  # listed per invalid schedule; `oasis-opt validate` lists them all


def format_table(headers: list[str], rows: list[list[Any]]) -> str:
    """Plain-text table; numbers right-aligned, text left-aligned, ``None`` as ``-``."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[c]) for r in cells)) if cells else len(h)
              for c, h in enumerate(headers)]
    numeric = [all(isinstance(r[c], (int, float)) or r[c] is None for r in rows) and bool(rows)
               for c in range(len(headers))]

    def line(values):
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric)).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in cells])


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


# ---- labels -------------------------------------------------------------------------------------
def policy_label(policy: str, options: Mapping[str, Any] | None) -> str:
    """``policy`` with its options, one token: ``oasis(pricing=p.json,u_scale=0.5)``.

    A structured value (a pricing document given as a dict ...) shows as its format or kind and
    a short hash of its JSON, so that two different ones are told apart."""
    if not options:
        return policy
    return f"{policy}(" + ",".join(f"{k}={_short(v)}" for k, v in sorted(options.items())) + ")"


def _short(v: Any) -> str:
    if isinstance(v, str):
        return v if len(v) <= 40 else "..." + v[-37:]
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    if isinstance(v, (int, float)):
        return f"{v:g}"
    digest = hashlib.sha256(json.dumps(v, sort_keys=True, default=str).encode()).hexdigest()[:6]
    kind = (str(v["format"]).rsplit("/", 1)[-1] if isinstance(v, Mapping) and "format" in v
            else type(v).__name__)
    return f"<{kind}#{digest}>"


def solver_words(solver: Mapping[str, Any] | None) -> str | None:
    """The solver's outcome in words: ``optimal``, ``time limit, gap 3.1%``, ``time limit, no
    incumbent`` ... (None for a result without solver status)."""
    if not solver or solver.get("status") is None:
        return None
    status, proven = str(solver["status"]), bool(solver.get("proven_optimal"))
    if solver.get("objective") is None:
        return f"{status.replace('_', ' ')}, no incumbent"
    if proven:
        return "optimal"
    gap = solver.get("gap")
    gap_text = f", gap {gap:.2%}" if isinstance(gap, (int, float)) else ""
    if status == "optimal":
        return "optimal, NOT proven" + gap_text
    return status.replace("_", " ") + gap_text


# ---- one schedule -------------------------------------------------------------------------------
class Summary(dict):
    """A schedule's metrics (``summarize``'s dict); ``str`` is its one-row table."""

    def __str__(self) -> str:
        return str(SummaryTable([self]))


@dataclass(frozen=True)
class SummaryTable:
    """Summaries side by side: optional row ``names`` (result files) and validation ``reports``."""

    rows: Sequence[Summary]
    names: Sequence[str] | None = None
    reports: Sequence[Any] | None = None  # model.validate.ValidationReport per row

    @property
    def ok(self) -> bool:
        """Every schedule is valid (True when nothing was validated)."""
        return self.reports is None or all(r.ok for r in self.reports)

    def table(self) -> str:
        seen = {c for m in self.rows for c in m["completion_minus_target_median"]}
        classes = [c for c in JOB_CLASSES if c in seen] + sorted(seen - set(JOB_CLASSES))
        solver = any(m.get("solver") for m in self.rows)
        headers = (["result"] if self.names is not None else []) + [
            "policy", "total utility", "admitted", "rejected", "completed", "unfinished"]
        headers += ["valid"] if self.reports is not None else []
        headers += ["solver", "bound", "gap"] if solver else []
        headers += [f"c-t {c.removeprefix('time-')}" for c in classes]
        jct = any(m.get("jct") for m in self.rows)
        headers += list(JCT_COLUMNS) if jct else []
        pre = any(m.get("preemption") for m in self.rows)
        headers += list(PREEMPTION_COLUMNS) if pre else []
        rows = []
        for n, m in enumerate(self.rows):
            row = [self.names[n]] if self.names is not None else []
            row += [m["label"], m["total_utility"], m["admitted"], m["rejected"], m["completed"],
                    m["unfinished"]]
            row += [self.reports[n].ok] if self.reports is not None else []
            if solver:
                s = m.get("solver") or {}
                gap = s.get("gap")
                row += [solver_words(s), _number_or_none(s.get("bound")),
                        f"{gap:.2%}" if isinstance(gap, (int, float)) else None]
            row += [m["completion_minus_target_median"].get(c) for c in classes]
            if jct:
                row += [(m.get("jct") or {}).get(k) for k in JCT_COLUMNS.values()]
            if pre:
                p = m.get("preemption") or {}
                chains = p.get("chains") or {}
                row += [p.get("preemptions", 0), p.get("degradations", 0),
                        p.get("promotions", 0), p.get("lost_work", 0.0),
                        p.get("restart_slots", 0), chains.get("mean", 0.0),
                        chains.get("max", 0)]
            rows.append(row)
        lines = [format_table(headers, rows)]
        if classes:
            lines.append("c-t <class>: median of (completion - arrival) - target over the "
                         "completed jobs of the class, in slots (paper Figs. 4, 9)")
        if jct:
            lines.append("avg JCT h, makespan h, GPU util, rho max/mean: Gavel's metrics over the "
                         "completed jobs (JCT from submission, rho = JCT / isolated run time)")
        if pre:
            lines.append("stops, degraded, promoted: preemption events (stats.preemption; stops "
                         "count kills and suspends); lost work: work units lost at stops; "
                         "restarts: slots credited only in part after a restart; chain mean/max: "
                         "1 + the stops a stop triggered downstream")
        return "\n".join(lines)

    def notes(self) -> list[str]:
        """The violations of each invalid schedule and the message of each offline result that
        is not proven optimal, each block headed by the row's name."""
        out = []
        for n, m in enumerate(self.rows):
            name = self.names[n] if self.names is not None else m["label"]
            report = self.reports[n] if self.reports is not None else None
            if report is not None and not report.ok:
                v = report.violations
                out.append(f"{name}: INVALID, {len(v)} violation(s):")
                out += [f"  {x}" for x in v[:MAX_VIOLATIONS]]
                if len(v) > MAX_VIOLATIONS:
                    out.append(f"  ... and {len(v) - MAX_VIOLATIONS} more "
                               "(`oasis-opt validate` lists them all)")
            s = m.get("solver")
            if s and not s.get("proven_optimal") and s.get("message"):
                out.append(f"{name}: {s['message']}")
        return out

    def __str__(self) -> str:
        return "\n".join([self.table(), *self.notes()])


def _number_or_none(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def solver_stats(stats: Mapping[str, Any]) -> dict | None:
    """The solver keys of a schedule's ``stats`` (offline policies), or None."""
    if "status" not in stats:
        return None
    return {k: stats.get(k) for k in SOLVER_KEYS}
