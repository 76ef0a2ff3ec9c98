"""``oasis-opt reproduce hetero --quick`` end to end: its table rows equal direct ``solve`` runs of
the same instances (OASiS priced as documented: estimated U, L on paper-sim, oracle on the dev
trace)."""
from __future__ import annotations

import pytest

from oasis_opt import solve, validate
from oasis_opt.cli import main
from oasis_opt.online.estimate import estimate_pricing
from oasis_opt.sim.metrics import jct_metrics
from oasis_opt.workloads import paper_sim
from oasis_opt.workloads.gavel import gavel_files, gavel_instance

SIM = {"jobs": 12, "horizon": 40, "worker_servers": 6, "ps_servers": 6,
       "cluster_mix": "v100:p100:k80"}
GAVEL = (("gavel-las", {}), ("gavel-ftf", {}), ("gavel-makespan", {}), ("max-min-fairness", {}),
         ("gavel-fifo (gavel)", {"variant": "gavel"}),
         ("gavel-fifo (textbook)", {"variant": "textbook"}))


def table(text: str) -> dict[tuple[str, str], list[str]]:
    """The "Means over the seeds" table: (workload, policy) -> the remaining cells."""
    section = text.split("## Means over the seeds")[1].split("## What each side gains")[0]
    rows = [line.strip("|").split("|") for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| workload")]
    return {(r[0].strip(), r[1].strip()): [c.strip() for c in r[2:]] for r in rows}


def expected(inst, schedule) -> list[str]:
    """One run's cells as the page prints them (runs, jobs, admitted, completed, utility, JCT,
    makespan)."""
    assert validate(inst, schedule).ok
    j = jct_metrics(inst, schedule)
    return ["1", str(inst.I), f"{sum(map(bool, schedule.admitted)):.1f}",
            f"{int(schedule.completed.sum()):.1f}", f"{schedule.total_utility:.2f}",
            "—" if j["avg_jct_h"] is None else f"{j['avg_jct_h']:.2f}",
            "—" if j["makespan_h"] is None else f"{j['makespan_h']:.2f}"]


def test_quick_hetero_rows_match_direct_solves(tmp_path, capsys, monkeypatch):
    from oasis_opt.experiments.figures import common
    from oasis_opt.experiments.figures import hetero as figure

    legends: list[str] = []
    real = common.save

    def recording(fig, out_dir, stem):
        # the figure says what its colours and whiskers are (issue #34), and nothing is cut
        legends.extend(t.get_text() for lg in fig.legends for t in
                       [lg.get_title(), *lg.get_texts()])
        # ... and that JCT and makespan are over each policy's completed jobs (n on the bars)
        for ax in fig.axes:
            marks = [t.get_text() for t in ax.texts if t.get_text().startswith("n=")]
            jct_or_span = "JCT" in ax.get_title() or "makespan" in ax.get_title()
            assert bool(marks) == jct_or_span and len(marks) in (0, len(ax.patches))
        assert common.clipped_titles(fig) == []
        return real(fig, out_dir, stem)

    monkeypatch.setattr(figure, "save", recording)
    assert main(["reproduce", "hetero", "--quick", "--out", str(tmp_path)]) == 0
    assert any(t.startswith("OASiS") for t in legends) and "Gavel's policies" in legends
    assert any("whiskers: min … max" in t and "1 instance seed(s)" in t for t in legends)
    assert any("over each policy's completed jobs only" in t for t in legends)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hetero.md", "hetero.pdf",
                                                          "hetero.png"]
    text = (tmp_path / "hetero.md").read_text()
    assert "passed `oasis_opt.validate`: yes" in text
    rows = table(text)

    files = gavel_files()
    dev = gavel_instance(files["trace"], files["throughputs"])
    sim = paper_sim(0, **SIM)
    pricing = estimate_pricing([paper_sim(1000, **SIM)], (1e-6, 1e-4, 1e-2, 1.0))
    want = {("gavel", "oasis-oracle"): expected(dev, solve(dev, "oasis")),
            ("paper-sim", "oasis"): expected(sim, solve(sim, "oasis", pricing=pricing)),
            ("paper-sim", "oasis-oracle"): expected(sim, solve(sim, "oasis"))}
    for name, opts in GAVEL:
        policy = name.split(" ")[0]
        want["gavel", name] = expected(dev, solve(dev, policy, seed=0, **opts))
        want["paper-sim", name] = expected(sim, solve(sim, policy, seed=0, **opts))
    assert rows == want


def test_hetero_is_requested_by_name_only():
    from oasis_opt.experiments.reproduce import figure_names

    assert figure_names(["hetero"]) == ["hetero"]
    assert "hetero" not in figure_names(["all"])
    with pytest.raises(ValueError, match="figure"):
        figure_names(["heteros"])


def test_whiskers_of_equal_values_are_not_negative():
    """The mean of three 0.1 is 0.1 + 1 ulp: the whisker up to the max must not go negative."""
    import numpy as np

    from oasis_opt.experiments.figures.common import mean_range, whiskers

    m = np.array([mean_range([0.1] * 3)])
    assert m[0, 0] > m[0, 2]  # the rounding this guards against
    err = whiskers(m[:, 0], m[:, 1], m[:, 2])
    assert err is None or (err >= 0).all()  # Axes.bar refuses a negative yerr
