"""``oasis-opt ratio`` and ``experiments.ratio``: OPT / OASiS per instance beside 2 alpha.

On tiny instances the reported OPT is the brute-force optimum (``test_offline_milp``'s search,
written independently of the MILP) and the ratio is recomputed here from a separate OASiS run;
the column-generation bracket contains that optimum; load and container shares are checked by
hand; the JSON report reads back strictly and bad input exits 2 with one line.
"""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import assume, given, settings
from test_offline_milp import brute_force, tiny

from oasis_opt.cli import main
from oasis_opt.experiments.ratio import (largest_container, load_factor, ratio_row,
                                         read_ratio_report)
from oasis_opt.model import Instance, Job, Server, Utility, validate
from oasis_opt.model.io import FormatError, save_instance
from oasis_opt.offline.colgen import SEED_POLICIES
from oasis_opt.online import OasisPolicy, oracle_pricing
from oasis_opt.online.pricing import save_pricing
from oasis_opt.policies import get_policy


def _oracle_defined(inst) -> bool:
    try:
        oracle_pricing(inst)
    except ValueError:
        return False
    return True


def _oasis_utility(inst) -> float:
    schedule = OasisPolicy().solve(inst)
    assert validate(inst, schedule).ok
    return float(schedule.total_utility)


@settings(max_examples=40, deadline=None)
@given(tiny)
def test_exact_opt_is_the_brute_force_optimum(inst):
    assume(_oracle_defined(inst))
    row = ratio_row(inst)
    best = brute_force(inst)
    assert row["opt"]["method"] == "milp" and row["opt"]["proven"]
    assert row["opt"]["lower"] == pytest.approx(best, rel=1e-6, abs=1e-9)
    assert row["opt"]["upper"] == row["opt"]["lower"]
    u = _oasis_utility(inst)
    assert row["oasis"]["utility"] == pytest.approx(u, rel=1e-12, abs=1e-12)
    want = best / u if u > 0 else (None if best > 1e-9 else 1.0)
    if want is None:
        assert row["ratio"]["value"] is None and row["ratio"]["lower"] is None
    else:
        assert row["ratio"]["value"] == pytest.approx(want, rel=1e-6)
        assert row["ratio"]["value"] >= 1 - 1e-6  # OPT is at least any feasible schedule
    p = oracle_pricing(inst)
    assert (row["alpha"], row["competitive_bound"]) == pytest.approx((p.alpha, 2 * p.alpha))


@settings(max_examples=15, deadline=None)
@given(tiny)
def test_bracket_contains_the_optimum(inst):
    assume(_oracle_defined(inst))
    row = ratio_row(inst, opt="bracket")
    best, u = brute_force(inst), _oasis_utility(inst)
    o = row["opt"]
    assert o["method"] == "bracket" and row["ratio"]["value"] is None
    assert o["lower"] <= best + 1e-6 and best <= o["upper"] + 1e-6
    assert o["lower"] >= u - 1e-9  # OASiS's own schedule is a lower bound
    for name in SEED_POLICIES:  # so is every baseline's: the bracket is seeded with them
        assert o["lower"] >= get_policy(name).solve(inst).total_utility - 1e-9, name
    assert o["from"].startswith("colgen:")
    if u > 0:
        assert row["ratio"]["lower"] == pytest.approx(o["lower"] / u, rel=1e-12)
        assert row["ratio"]["upper"] == pytest.approx(o["upper"] / u, rel=1e-12)


def _hand_instance() -> Instance:
    """T = 4; worker servers gpu 2 / bw 10 and gpu 4 / bw 10; one PS server bw 8."""
    jobs = (Job("a", 1, 2, 2, 1.0, {"gpu": 1, "bw": 2}, {"bw": 4}, Utility.constant(5.0)),  # W 4
            Job("b", 2, 3, 1, 1.0, {"gpu": 3, "bw": 1}, {"bw": 1}, Utility.constant(7.0)))  # W 3
    return Instance(4, ("gpu", "bw"),
                    (Server("w0", {"gpu": 2, "bw": 10}), Server("w1", {"gpu": 4, "bw": 10})),
                    (Server("p0", {"bw": 8}),), jobs)


def test_load_and_largest_container_by_hand():
    inst = _hand_instance()
    # worker gpu: (4 x 1 + 3 x 3) / (4 x 6) = 13/24; worker bw: (8 + 3) / 80;
    # PS-slots W b / B: a 4 x 2/4 = 2, b 3 x 1/1 = 3; PS bw: (2 x 4 + 3 x 1) / (4 x 8) = 11/32
    load, where = load_factor(inst)
    assert load == pytest.approx(13 / 24) and where == "gpu (worker)"
    # largest: job b's 3 GPUs against the largest GPU server (4); a's PS bw 4 of 8
    assert largest_container(inst) == pytest.approx(0.75)


def _run(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_report_and_table(tmp_path, capsys):
    inst = _hand_instance()
    save_instance(inst, tmp_path / "a.json")
    save_pricing(oracle_pricing(inst), tmp_path / "p.json")
    code, out, err = _run(["ratio", tmp_path / "a.json", tmp_path / "a.json", "--pricing",
                           tmp_path / "p.json", "--out", tmp_path / "r.json"], capsys)
    assert code == 0, err
    doc = read_ratio_report(tmp_path / "r.json")
    assert doc["pricing"] == str(tmp_path / "p.json") and len(doc["rows"]) == 2
    row = doc["rows"][0]
    assert row["opt"]["method"] == "milp" and row["instance"] == str(tmp_path / "a.json")
    assert row["ratio"]["value"] == pytest.approx(row["opt"]["lower"] / row["oasis"]["utility"])
    lines = [line for line in out.splitlines() if line.startswith(str(tmp_path / "a.json"))]
    assert len(lines) == 2 and f"{row['competitive_bound']:.2f}" in lines[0]
    # the bracket is marked in the table
    code, out, err = _run(["ratio", tmp_path / "a.json", "--opt", "bracket", "--out",
                           tmp_path / "b.json"], capsys)
    assert code == 0, err
    assert "OPT not proven" in out
    assert read_ratio_report(tmp_path / "b.json")["rows"][0]["opt"]["method"] == "bracket"


def test_cli_bad_input(tmp_path, capsys):
    inst = _hand_instance()
    save_instance(inst, tmp_path / "a.json")
    (tmp_path / "p.json").write_text(json.dumps(
        {"format": "oasis-opt/pricing@1", "U_worker": {"gpu": 5.0, "cpu": 5.0},
         "U_ps": {"bw": 5.0}, "L_worker": 0.1, "L_ps": 0.1}))
    for argv, field in (
            (["--pricing", tmp_path / "p.json"], "--pricing"),     # cpu: not a resource here
            (["--time-limit", "0"], "--time-limit"),
            (["--opt", "lp"], "--opt"),
            (["--pricing", tmp_path / "missing.json"], "--pricing")):
        code, out, err = _run(["ratio", tmp_path / "a.json", *argv, "--out",
                               tmp_path / "r.json"], capsys)
        assert code == 2 and len(err.splitlines()) == 1, err
        assert err.startswith(f"oasis-opt: error: {field}: "), err
    assert not (tmp_path / "r.json").exists()


def test_reader_is_strict(tmp_path, capsys):
    inst = _hand_instance()
    save_instance(inst, tmp_path / "a.json")
    assert _run(["ratio", tmp_path / "a.json", "--out", tmp_path / "r.json"], capsys)[0] == 0
    good = json.loads((tmp_path / "r.json").read_text())
    for change, field in (
            (lambda d: d.update(format="oasis-opt/ratio@9"), "format"),
            (lambda d: d["rows"][0].update(extra=1), "rows[0].extra"),
            (lambda d: d["rows"][0]["opt"].pop("lower"), "rows[0].opt.lower"),
            (lambda d: d["rows"][0]["ratio"].update(value="1.2"), "rows[0].ratio.value"),
            (lambda d: d["rows"][0]["opt"].update(method="lp"), "rows[0].opt.method"),
            (lambda d: d["rows"][0]["opt"].update(upper=-1.0), "rows[0].opt.upper")):
        doc = json.loads(json.dumps(good))
        change(doc)
        (tmp_path / "bad.json").write_text(json.dumps(doc))
        with pytest.raises(FormatError) as e:
            read_ratio_report(tmp_path / "bad.json")
        assert e.value.field == field
    assert math.isfinite(read_ratio_report(tmp_path / "r.json")["rows"][0]["load"])
