"""OASiS's U and L estimated from past instances (``oasis_opt.online.estimate``, paper p.6).

U is checked against the oracle (eqs. 23-24) instance by instance; the floor calibration is
recomputed here with plain OASiS runs and held against ``estimate_pricing``; the estimated
pricing is used on other instances (every schedule validated); ``oasis-opt estimate-pricing``
runs end to end and its bad input exits 2 with one line.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings

from oasis_opt.cli import main
from oasis_opt.model import DEFAULT_RESOURCES, Instance, Job, Server, Utility
from oasis_opt.model.io import FormatError, save_instance
from oasis_opt.model.validate import validate
from oasis_opt.online import (DEFAULT_FLOOR_GRID, FloorCalibration, OasisPolicy,
                              estimate_pricing, history_u, oracle_pricing, pricing_document,
                              read_pricing_file)
from oasis_opt.online.estimate import check_grid
from oasis_opt.online.pricing import PRICING_FORMAT, parse_pricing
from oasis_opt.testing import instances
from oasis_opt.workloads import paper_sim

GRID = (1e-5, 1e-3, 3e-3, 1e-2, 1e-1)


def _paper(seed: int, jobs: int = 20) -> Instance:
    return paper_sim(seed=seed, jobs=jobs, horizon=60, worker_servers=3, ps_servers=3,
                     calibration="calibrated", arrivals="uniform")


@pytest.fixture(scope="module")
def history():
    return [_paper(1), _paper(2)]


@pytest.fixture(scope="module")
def estimated(history):
    return estimate_pricing(history, GRID)


def _oasis(inst, pricing):
    schedule = OasisPolicy(pricing=pricing).solve(inst)
    report = validate(inst, schedule)
    assert report.ok, report
    return schedule


# ---- U: eqs. (23)-(24) over the history ----------------------------------------------------------
def _u_by_instance(history):
    """The largest oracle U per pool and resource, instance by instance (nan = not demanded)."""
    want = {"U_worker": {}, "U_ps": {}}
    for inst in history:
        if inst.I == 0:
            continue
        p = oracle_pricing(inst)
        for key, U in (("U_worker", p.U_worker), ("U_ps", p.U_ps)):
            for r, u in zip(inst.resources, U.tolist()):
                if not math.isnan(u):
                    want[key][r] = max(want[key].get(r, -math.inf), u)
    return want


@settings(max_examples=30)
@given(instances(), instances(), instances())
def test_history_u_is_the_largest_oracle_u(a, b, c):
    history = [a, b, c]
    assume(any(inst.I > 0 for inst in history))
    u = history_u(history)
    assert u == _u_by_instance(history)
    # exactly the resources some history job demands on that pool are priced
    for key, demand in (("U_worker", "worker_demand"), ("U_ps", "ps_demand")):
        demanded = {r for inst in history for n, r in enumerate(inst.resources)
                    if inst.I and (getattr(inst, demand)[:, n] > 0).any()}
        assert set(u[key]) == demanded
        assert all(math.isfinite(v) and v > 0 for v in u[key].values())


def test_history_u_on_paper_instances_omits_undemanded_resources(history):
    u = history_u(history)
    assert u == _u_by_instance(history)
    for inst in history:
        p = oracle_pricing(inst)
        for r, v in zip(inst.resources, p.U_ps.tolist()):
            assert (r in u["U_ps"]) or math.isnan(v)
    assert "gpu" not in u["U_ps"]  # paper-sim PS containers take no GPU (gpu_pool="worker")
    assert not any((inst.ps_demand[:, inst.resources.index("gpu")] > 0).any() for inst in history)


def test_history_u_of_an_instance_whose_floor_underflows():
    """U (23)-(24) needs no L: an instance where every f(T - a) underflows (so the oracle's L is
    undefined) still contributes its jobs to U, and OASiS calibrates on it."""
    ws = (Server("w", {"gpu": 4, "cpu": 8, "mem": 32, "storage": 100, "bw": 20}),)
    ps = (Server("p", {"cpu": 8, "mem": 32, "storage": 100, "bw": 40}),)
    critical = Utility.sigmoid(100.0, 6.0, 1.0)  # f(299) = 100 / (1 + e^1788) = 0.0
    job = Job("j", 1, 2, 2, 1.0, {"gpu": 1, "cpu": 2, "bw": 4}, {"cpu": 1, "bw": 5}, critical)
    inst = Instance(300, DEFAULT_RESOURCES, ws, ps, (job,))
    assert critical(299) == 0.0
    with pytest.raises(ValueError, match="underflow"):
        oracle_pricing(inst)
    best = critical(int(inst.min_duration[0]) - 1)
    assert history_u([inst]) == {"U_worker": {"gpu": best / 1, "cpu": best / 2, "bw": best / 4},
                                 "U_ps": {"cpu": best / 1, "bw": best / 5}}
    cal = estimate_pricing([inst], (1e-3, 1e-1)).calibration
    assert cal.scores[0][0] == pytest.approx(best)  # an empty cluster admits the job (A5)


def test_history_u_needs_jobs():
    with pytest.raises(ValueError, match="history: no instances"):
        history_u([])
    with pytest.raises(ValueError, match="history: no job"):
        history_u([_paper(1, jobs=0)])
    with pytest.raises(ValueError, match="history: no instances"):
        estimate_pricing([], GRID)


# ---- the grid and the document -----------------------------------------------------------------
@pytest.mark.parametrize("grid, match", [
    ([], "at least one"),
    ([1e-3, 0.0], r"grid\[1\]"),
    ([-1e-3], r"grid\[0\]"),
    ([math.nan], r"grid\[0\]"),
    ([math.inf], r"grid\[0\]"),
    ([True], r"grid\[0\]"),
    (["1e-3"], r"grid\[0\]"),
    ([1e-3, 1e-2, 1e-3], "distinct"),
])
def test_check_grid_rejects(grid, match):
    with pytest.raises(ValueError, match=match):
        check_grid(grid)
    with pytest.raises(ValueError, match=match):
        estimate_pricing([_paper(1, jobs=2)], grid)


def test_check_grid_sorts():
    assert check_grid([1e-2, 1, 1e-4]) == (1e-4, 1e-2, 1.0)
    assert all(isinstance(g, float) for g in check_grid([3, 1]))
    assert check_grid(DEFAULT_FLOOR_GRID) == DEFAULT_FLOOR_GRID


def test_pricing_document(history):
    u = history_u(history)
    doc = pricing_document(u, 1e-3)
    assert doc["format"] == PRICING_FORMAT and doc["L_worker"] == doc["L_ps"] == 1e-3
    assert parse_pricing(doc) == {k: v for k, v in doc.items() if k != "format"}
    doc["U_worker"]["gpu"] = -1.0  # the document owns its dicts
    assert u["U_worker"]["gpu"] > 0
    for bad in (0.0, -1.0, math.nan, math.inf, True, "1e-3"):
        with pytest.raises(ValueError, match="floor"):
            pricing_document(u, bad)


def test_a_floor_above_some_u_is_refused(history):
    u = history_u(history)
    lowest = min(min(u["U_worker"].values()), min(u["U_ps"].values()))
    with pytest.raises(ValueError, match=r"^grid\[1\]: floor price .* exceeds U_"):
        estimate_pricing(history, (1e-3, lowest * 2))
    doc = pricing_document(u, lowest)  # L = U is allowed (a flat price)
    assert parse_pricing(doc)["L_worker"] == lowest
    for pool in ("worker", "ps"):
        bad = {**doc, f"L_{pool}": max(u[f"U_{pool}"].values()) * 1.5}
        with pytest.raises(FormatError) as err:
            parse_pricing(bad)
        assert err.value.field == f"L_{pool}" and "exceeds U_" in err.value.message


# ---- the estimate is a pricing ---------------------------------------------------------------------
def test_the_estimate_is_usable_as_pricing_and_saved_as_a_file(tmp_path, history, estimated):
    """The README's call: ``estimate_pricing``'s result goes straight to ``pricing=`` and to
    ``save_pricing``; the calibration rides along as an attribute."""
    from oasis_opt import get_policy
    from oasis_opt.online import EstimatedPricing, read_pricing_file, save_pricing

    assert isinstance(estimated, EstimatedPricing) and isinstance(estimated, dict)
    assert estimated.calibration.chosen == estimated["L_worker"]
    evaluation = _paper(7)
    direct = get_policy("oasis", pricing=estimated).solve(evaluation)
    save_pricing(estimated, tmp_path / "p.json")
    assert read_pricing_file(tmp_path / "p.json") == parse_pricing(dict(estimated))
    from_file = get_policy("oasis", pricing=str(tmp_path / "p.json")).solve(evaluation)
    assert validate(evaluation, direct).ok
    assert direct.total_utility == from_file.total_utility and direct.admitted == from_file.admitted
    assert json.loads(json.dumps(estimated)) == dict(estimated)
    import copy
    import pickle

    for again in (pickle.loads(pickle.dumps(estimated)), copy.deepcopy(estimated)):
        assert again == estimated and again.calibration == estimated.calibration
    with pytest.raises(FormatError) as err:  # save_pricing checks a document like a file
        save_pricing({**estimated, "L_ps": -1.0}, tmp_path / "bad.json")
    assert err.value.field == "L_ps" and not (tmp_path / "bad.json").exists()


# ---- the floor calibration -----------------------------------------------------------------------
def test_calibration_recomputed_run_by_run(history, estimated):
    doc, cal = estimated, estimated.calibration
    u = history_u(history)
    scores = [[float(_oasis(inst, pricing_document(u, L)).total_utility) for inst in history]
              for L in GRID]
    assert cal.grid == GRID
    assert [list(row) for row in cal.scores] == scores
    means = [sum(row) / len(row) for row in scores]
    np.testing.assert_allclose(cal.mean, means, rtol=1e-15)
    best = 0
    for n, m in enumerate(means):  # the first (smallest-L) maximum
        if m > means[best]:
            best = n
    assert cal.index == best and cal.chosen == GRID[best]
    assert cal.at_edge == (best in (0, len(GRID) - 1))
    assert doc == pricing_document(u, cal.chosen)
    assert doc["L_worker"] == doc["L_ps"] == cal.chosen
    assert max(means) > 0  # the calibration found a floor at which OASiS admits something


def test_estimated_pricing_runs_on_an_evaluation_instance(estimated):
    doc = estimated
    evaluation = _paper(7)
    schedule = _oasis(evaluation, doc)
    # L is kept as ln L inside Pricing, so it comes back to within rounding
    assert schedule.stats["pricing"]["L_worker"] == pytest.approx(doc["L_worker"], rel=1e-14)
    assert schedule.stats["pricing"]["U_worker"] == {
        r: u for r, u in doc["U_worker"].items() if r in evaluation.resources}


def test_estimate_is_deterministic(history, estimated):
    again = estimate_pricing(history, GRID)
    assert again == estimated
    assert json.dumps(again.calibration.to_dict()) == json.dumps(estimated.calibration.to_dict())


def test_progress_counts_every_run(history):
    calls = []
    grid = GRID[:3]
    estimate_pricing(history, grid, progress=lambda done, total: calls.append((done, total)))
    total = len(grid) * len(history)
    assert calls == [(n, total) for n in range(1, total + 1)]


def test_backends_agree_on_the_calibration():
    history = [paper_sim(seed=3, jobs=6, horizon=20, worker_servers=2, ps_servers=2)]
    grid = (1e-4, 1e-2)
    numpy_cal = estimate_pricing(history, grid, backend="numpy").calibration
    reference_cal = estimate_pricing(history, grid, backend="reference").calibration
    np.testing.assert_allclose(reference_cal.scores, numpy_cal.scores, rtol=1e-9)
    assert reference_cal.chosen == numpy_cal.chosen


@pytest.mark.parametrize("scores, index, at_edge", [
    (((1.0, 3.0), (2.0, 2.0), (0.0, 1.0)), 0, True),     # tie of the first two: the smaller L
    (((0.0, 0.0), (5.0, 1.0), (3.0, 3.0), (1.0, 1.0)), 1, False),  # tie inside: smaller L
    (((0.0,), (1.0,), (4.0,)), 2, True),                 # best at the top end
    (((0.0,), (0.0,), (0.0,)), 0, True),                 # nothing admitted anywhere
    (((2.0, 4.0),), 0, False),                           # a single floor is no edge
])
def test_floor_calibration_choice(scores, index, at_edge):
    grid = tuple(10.0 ** -k for k in range(len(scores), 0, -1))
    cal = FloorCalibration(grid, scores)
    assert cal.index == index and cal.chosen == grid[index] and cal.at_edge is at_edge
    assert cal.mean == tuple(sum(r) / len(r) for r in scores)
    d = cal.to_dict()
    assert json.loads(json.dumps(d, allow_nan=False)) == {
        "grid": list(grid), "mean_utility": list(cal.mean), "utility": [list(r) for r in scores],
        "chosen": grid[index], "at_edge": at_edge}


@pytest.mark.parametrize("grid, scores", [
    ((1e-3, 1e-2), ((1.0,),)),             # one row short
    ((1e-3,), ((),)),                      # an empty row
    ((1e-3, 1e-2), ((1.0,), (1.0, 2.0))),  # ragged
    ((), ()),
])
def test_floor_calibration_rejects_bad_tables(grid, scores):
    with pytest.raises(ValueError, match="scores"):
        FloorCalibration(grid, scores)


# ---- property: the estimate is a working pricing ---------------------------------------------
@settings(max_examples=20)
@given(instances(), instances())
def test_estimated_pricing_is_valid_and_replays_its_score(past, other):
    assume(past.I > 0)
    lowest_u = min(u for key in ("U_worker", "U_ps") for u in history_u([past])[key].values())
    grid = tuple(lowest_u * f for f in (1e-4, 1e-2, 1.0))  # L <= every U
    doc = estimate_pricing([past], grid)
    cal = doc.calibration
    # history == evaluation: the same OASiS run as the calibration's at the chosen L
    assert _oasis(past, doc).total_utility == cal.scores[cal.index][0]
    # another instance: valid, unless it demands a resource no history job did (refused, named)
    unpriced = [f"{key}.{r}" for key, demand in (("U_worker", other.worker_demand),
                                                 ("U_ps", other.ps_demand))
                for n, r in enumerate(other.resources)
                if r not in doc[key] and other.I and (demand[:, n] > 0).any()]
    if unpriced:
        with pytest.raises(FormatError) as err:
            OasisPolicy(pricing=doc).solve(other)
        assert err.value.field in unpriced
    else:
        _oasis(other, doc)


# ---- the command line ----------------------------------------------------------------------------
def run(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_bad_input(code, err, field):
    assert code == 2 and "Traceback" not in err
    line, = err.splitlines()
    assert line.startswith(f"oasis-opt: error: {field}: ") and len(line) > len(
        f"oasis-opt: error: {field}: ")


@pytest.fixture(scope="module")
def history_files(tmp_path_factory, history):
    folder = tmp_path_factory.mktemp("history")
    paths = [folder / f"h{n}.json" for n in range(len(history))]
    for inst, path in zip(history, paths):
        save_instance(inst, path)
    return paths


def test_cli_estimate_then_solve(tmp_path, capsys, history, history_files, estimated):
    pricing, report = tmp_path / "pricing.json", tmp_path / "calibration.json"
    grid = ",".join(repr(g) for g in reversed(GRID))  # any order: the grid is sorted
    code, out, err = run(["estimate-pricing", *history_files, "--method", "search", "--grid", grid, "--out", pricing,
                          "--report", report], capsys)
    assert code == 0, err
    doc, cal = estimated, estimated.calibration
    assert read_pricing_file(pricing) == {k: v for k, v in doc.items() if k != "format"}
    rep = json.loads(report.read_text())
    assert rep == {"format": "oasis-opt/floor-calibration@1",
                   "history": [str(p) for p in history_files], **cal.to_dict()}
    assert rep["chosen"] == doc["L_worker"]
    # the table: one row per L, the chosen one marked, then the summary line
    lines = out.splitlines()
    marked = [line for line in lines if line.endswith("<- chosen")]
    assert len(marked) == 1 and marked[0].split()[0] == f"{cal.chosen:.3g}"
    assert len(lines) == 2 + len(GRID) + 1
    assert lines[-1].startswith(f"chosen L = {cal.chosen:.6g} (U from "
                                f"{sum(i.I for i in history)} history jobs)")
    assert ("widen --grid" in err) == cal.at_edge
    # the pricing file drives `solve --policy oasis` on another instance
    evaluation = tmp_path / "eval.json"
    save_instance(_paper(7), evaluation)
    code, out, err = run(["solve", evaluation, "--policy", "oasis", "--pricing", pricing,
                          "--out", tmp_path / "r.json"], capsys)
    assert code == 0 and "valid" in out, err
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["stats"]["pricing"]["L_ps"] == pytest.approx(cal.chosen, rel=1e-14)


def test_cli_warns_when_the_best_floor_is_an_edge(tmp_path, capsys, history_files):
    # of two floors, either is an end of the grid
    code, out, err = run(["estimate-pricing", history_files[0], "--method", "search", "--grid", "1e-6,1e-5",
                          "--out", tmp_path / "p.json"], capsys)
    assert code == 0
    assert err == "oasis-opt: warning: the best floor is an end of the grid; widen --grid\n"
    assert read_pricing_file(tmp_path / "p.json")["L_worker"] in (1e-6, 1e-5)
    # a single floor is no edge
    code, out, err = run(["estimate-pricing", history_files[0], "--method", "search", "--grid", "1e-3", "--out",
                          tmp_path / "q.json", "--progress"], capsys)
    assert code == 0 and "warning" not in err
    assert out.splitlines()[-1].startswith("chosen L = 0.001 ")


@pytest.mark.parametrize("grid", ["", " ", "a,1e-3", "1e-3,,1e-2", "0", "-1", "1e-3,nan", "inf",
                                  "1e-3,1e-3", "true"])
def test_cli_bad_grid(tmp_path, capsys, history_files, grid):
    code, _, err = run(["estimate-pricing", history_files[0], "--method=search", f"--grid={grid}",
                        "--out", tmp_path / "p.json"], capsys)
    assert_bad_input(code, err, "--grid")
    assert not (tmp_path / "p.json").exists()


def test_cli_bad_history(tmp_path, capsys, history_files):
    out = tmp_path / "p.json"
    missing = tmp_path / "missing.json"
    assert_bad_input(main(["estimate-pricing", str(missing), "--out", str(out)]),
                     capsys.readouterr().err, str(missing))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert_bad_input(main(["estimate-pricing", str(history_files[0]), str(broken), "--out",
                           str(out)]), capsys.readouterr().err, str(broken))
    empty = tmp_path / "empty.json"
    save_instance(_paper(1, jobs=0), empty)
    assert_bad_input(main(["estimate-pricing", str(empty), "--out", str(out)]),
                     capsys.readouterr().err, "HISTORY")
    assert_bad_input(main(["estimate-pricing", "--out", str(out)]), capsys.readouterr().err,
                     "HISTORY")
    # one pricing file for every history run: their resource names must agree
    other = tmp_path / "other.json"
    save_instance(Instance(5, ("cpu", "bw"), (Server("w", {"cpu": 2, "bw": 5}),),
                           (Server("p", {"cpu": 2, "bw": 5}),),
                           (Job("j", 1, 1, 1, 1.0, {"cpu": 1, "bw": 1}, {"cpu": 1, "bw": 1},
                                Utility.constant(3.0)),)), other)
    assert_bad_input(main(["estimate-pricing", str(history_files[0]), str(other), "--out",
                           str(out)]), capsys.readouterr().err, str(other))
    assert_bad_input(main(["estimate-pricing", str(history_files[0]), "--method", "search", "--backend", "torch",
                           "--out", str(out)]), capsys.readouterr().err, "--backend")
    assert not out.exists()
