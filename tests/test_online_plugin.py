"""The plug-in estimate of OASiS's U and L (``oasis_opt.online.plugin``, eqs. 23-26).

Held against a hand computation on a three-job history; deterministic; its per-resource floors
read and write as a pricing file, price OASiS (every schedule validated) and give the alpha of
Theorem 4 in either unit; ``oasis-opt estimate-pricing --method plugin`` uses it.
"""
from __future__ import annotations

import json
import math
import pickle

import numpy as np
import pytest

from oasis_opt.cli import main
from oasis_opt.model import Instance, Job, Server, Utility
from oasis_opt.model.io import FormatError, save_instance
from oasis_opt.model.validate import validate
from oasis_opt.online import (OasisPolicy, plugin_pricing, read_pricing_file, resolve_pricing,
                              save_pricing)
from oasis_opt.online.pricing import parse_pricing
from oasis_opt.workloads import paper_fig5


def _history() -> Instance:
    """T = 10; worker servers (gpu 4, bw 8) and (gpu 0, bw 16); one PS server (bw 8)."""
    def job(name, arrival, epochs, chunks, gpu, bw, ps_bw, value):
        return Job(name, arrival, epochs, chunks, 1.0, {"gpu": gpu, "bw": bw},
                   {"bw": ps_bw}, Utility.constant(value))

    return Instance(10, ("gpu", "bw"),
                    (Server("w0", {"gpu": 4, "bw": 8}), Server("w1", {"gpu": 0, "bw": 16})),
                    (Server("p0", {"bw": 8}),),
                    (job("A", 1, 2, 2, 1, 2, 2, 10.0),    # W = 4
                     job("B", 3, 1, 3, 0, 6, 6, 6.0),     # W = 3
                     job("C", 2, 5, 1, 2, 3, 3, 20.0)))   # W = 5


def test_hand_computation_median():
    """Worker pool: c_bar = (gpu 2, bw 12); normalised demand per slot A 1/2 + 2/12, B 6/12,
    C 2/2 + 3/12; sizes W x that = 8/3, 3/2, 25/4; terms f / size = 3.75, 4, 3.2; medians 3.75
    and 8/3; C~ = 4/2 + 8/12 + 16/12 = 4, eta = 10 x 4 / (8/3) = 15, L~ = 3.75 / 60 = 1/16.
    PS pool: c_bar = bw 8; sizes 4 x 2/8 = 1, 3 x 6/8 = 2.25, 5 x 3/8 = 1.875; terms 10, 8/3,
    32/3; medians 10 and 1.875; eta = 10 x 1 / 1.875 = 16/3; L~ = 10 / (64/3) = 15/32."""
    doc = plugin_pricing([_history()], quantile=0.5)
    assert doc["L_worker"] == pytest.approx({"gpu": 1 / 32, "bw": 1 / 192}, rel=1e-12)
    assert doc["L_ps"] == pytest.approx({"bw": 15 / 256}, rel=1e-12)
    # U (eqs. 23-24): f(dmin - 1) / w, largest over the jobs that demand r
    assert doc["U_worker"] == pytest.approx({"gpu": 10.0, "bw": 20 / 3}, rel=1e-12)
    assert doc["U_ps"] == pytest.approx({"bw": 20 / 3}, rel=1e-12)
    d = doc.details
    assert (d["worker"]["eta"], d["ps"]["eta"]) == pytest.approx((15.0, 16 / 3))
    assert d["worker"]["capacity_scale"] == pytest.approx({"gpu": 2.0, "bw": 12.0})
    # alpha = max ln(U^r / L^r) = ln((20/3) / (1/192)) = ln 1280
    pricing = resolve_pricing(doc, _history())
    assert pricing.alpha == pytest.approx(math.log(1280.0), rel=1e-12)
    assert pricing.competitive_bound == pytest.approx(2 * math.log(1280.0), rel=1e-12)


def test_hand_computation_minimum():
    """quantile 0 is the paper's min: term 3.2, size 1.5, eta = 40 / 1.5, L~ = 3.2 / (4 eta)."""
    doc = plugin_pricing([_history()], quantile=0.0)
    floor = 3.2 / (4 * 40 / 1.5)
    # PS: terms 10, 8/3, 32/3 -> 8/3; sizes -> 1; eta = 10
    assert doc["L_worker"] == pytest.approx({"gpu": floor / 2, "bw": floor / 12}, rel=1e-12)
    assert doc["L_ps"] == pytest.approx({"bw": (8 / 3) / 40 / 8}, rel=1e-12)


def test_jobs_worth_nothing_at_the_horizon_are_left_out():
    """A job whose f(T - a) underflows to 0.0 changes neither floor: it is counted as excluded."""
    base = _history()
    dead = Job("D", 1, 1, 1, 1.0, {"gpu": 1, "bw": 1}, {"bw": 1},
               Utility.sigmoid(10.0, 100.0, 0.0))  # 10 / (1 + e^(100 x 9)) = 0.0
    inst = base.with_jobs(base.jobs + (dead,))
    assert inst.utility_table[3, inst.horizon] == 0.0
    a, b = plugin_pricing([base], 0.5), plugin_pricing([inst], 0.5)
    assert b["L_worker"] == pytest.approx(a["L_worker"], rel=1e-12)
    assert b["L_ps"] == pytest.approx(a["L_ps"], rel=1e-12)
    assert (b.details["worker"]["excluded"], b.details["ps"]["excluded"]) == (1, 1)
    assert b.details["alpha"] == pytest.approx(resolve_pricing(b, inst).alpha, rel=1e-12)


def test_deterministic_and_scale_free():
    history = [paper_fig5(s, servers=6, priority=(50.0, 100.0)) for s in (1000, 1001, 1002)]
    a, b = plugin_pricing(history), plugin_pricing(list(history))
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert a.details == b.details
    # pickled (Ray, copy) with its details: a dict subclass needs no __reduce__ for that
    again = pickle.loads(pickle.dumps(a))
    assert type(again) is type(a) and again == a and again.details == a.details
    # the floor per raw unit times the capacity scale is one normalised floor per pool
    for pool in ("worker", "ps"):
        scale = a.details[pool]["capacity_scale"]
        normalised = {a[f"L_{pool}"][r] * scale[r] for r in scale}
        assert max(normalised) == pytest.approx(min(normalised), rel=1e-12)
        assert min(normalised) == pytest.approx(a.details[pool]["L_normalised"], rel=1e-12)


def test_prices_oasis_and_round_trips(tmp_path):
    history = [paper_fig5(s, servers=6, priority=(1.0, 100.0)) for s in (1000, 1001, 1002)]
    doc = plugin_pricing(history)
    save_pricing(doc, tmp_path / "p.json")
    assert read_pricing_file(tmp_path / "p.json") == {k: v for k, v in doc.items()
                                                      if k != "format"}
    inst = paper_fig5(3, servers=6, priority=(1.0, 100.0))
    schedule = OasisPolicy(pricing=str(tmp_path / "p.json")).solve(inst)
    assert validate(inst, schedule).ok
    stats = schedule.stats["pricing"]
    assert stats["L_worker"] == pytest.approx(doc["L_worker"], rel=1e-12)
    # an empty cluster prices every resource at its own floor (eq. 22 with g = 0)
    p = resolve_pricing(doc, inst)
    empty = p.worker_prices(np.zeros_like(inst.worker_capacity), inst.worker_capacity)
    for n, r in enumerate(inst.resources):
        if r in doc["L_worker"]:
            np.testing.assert_allclose(empty[:, n], doc["L_worker"][r], rtol=1e-12)
    assert p.alpha == pytest.approx(max(
        [1.0] + [math.log(doc[f"U_{pool}"][r] / doc[f"L_{pool}"][r])
                 for pool in ("worker", "ps") for r in doc[f"U_{pool}"]]), rel=1e-12)


@pytest.mark.parametrize("floor, field", [
    ({"gpu": 0.1}, "L_worker.cpu"),                  # a priced resource without a floor
    ({"gpu": 0.1, "cpu": 0.1, "mem": 0.1}, "L_worker.mem"),  # a floor without a U
    ({"gpu": 0.1, "cpu": 50.0}, "L_worker.cpu"),     # above its U
    ({"gpu": 0.1, "cpu": -1.0}, "L_worker.cpu"),
])
def test_per_resource_floor_is_checked(floor, field):
    doc = {"format": "oasis-opt/pricing@1", "U_worker": {"gpu": 10.0, "cpu": 5.0},
           "U_ps": {"cpu": 3.0}, "L_worker": floor, "L_ps": 0.01}  # no instance: any names
    with pytest.raises(FormatError) as err:
        parse_pricing(doc)
    assert err.value.field == field


def test_bad_history_and_quantile():
    with pytest.raises(ValueError, match="^history: "):
        plugin_pricing([])
    with pytest.raises(ValueError, match="^quantile: "):
        plugin_pricing([_history()], quantile=1.5)


def _run(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_default_is_the_searched_floor(tmp_path, capsys):
    """Issue #29: the default of estimate-pricing is the searched floor (the pricing study's
    winner), so `estimate-pricing HISTORY` writes online.estimate_pricing's document; the
    plug-in (the old default) is `--method plugin`. Catches the default falling back to the
    plug-in (whose L here differs by orders of magnitude) and a silently ignored --quantile."""
    from oasis_opt.online import estimate_pricing

    path = tmp_path / "h.json"
    save_instance(_history(), path)
    code, out, err = _run(["estimate-pricing", path, "--out", tmp_path / "s.json"], capsys)
    assert code == 0, err
    searched = {k: v for k, v in estimate_pricing([_history()]).items() if k != "format"}
    plugin = {k: v for k, v in plugin_pricing([_history()]).items() if k != "format"}
    assert searched != plugin
    assert read_pricing_file(tmp_path / "s.json") == searched
    assert "chosen L = " in out
    code, out, err = _run(["estimate-pricing", path, "--quantile", "0.5", "--out",
                           tmp_path / "q.json"], capsys)
    assert code == 2 and err == "oasis-opt: error: --quantile: applies to --method plugin only\n"


def test_cli_plugin_method(tmp_path, capsys):
    path = tmp_path / "h.json"
    save_instance(_history(), path)
    code, out, err = _run(["estimate-pricing", path, "--method", "plugin", "--quantile", "0.5",
                           "--out", tmp_path / "p.json"], capsys)
    assert code == 0, err
    assert read_pricing_file(tmp_path / "p.json") == {
        k: v for k, v in plugin_pricing([_history()], 0.5).items() if k != "format"}
    assert "quantile 0.5" in out.splitlines()[-1]
    for flags, field in ((["--method", "plugin", "--grid", "1e-3"], "--grid"),
                         (["--method", "plugin", "--backend", "numpy"], "--backend"),
                         (["--method", "search", "--quantile", "0.2"], "--quantile")):
        code, out, err = _run(["estimate-pricing", path, *flags, "--out", tmp_path / "q.json"],
                              capsys)
        assert code == 2 and err.startswith(f"oasis-opt: error: {field}: "), err
        assert len(err.splitlines()) == 1
    assert not (tmp_path / "q.json").exists()
    assert "warning" not in err
    # a floor set by a job worth ~e^-90 at the horizon: alpha > 50 is flagged
    base = _history()
    late = Job("D", 1, 1, 1, 1.0, {"gpu": 1, "bw": 1}, {"bw": 1},
               Utility.sigmoid(10.0, 10.0, 0.0))
    save_instance(base.with_jobs(base.jobs + (late,)), path)
    code, out, err = _run(["estimate-pricing", path, "--method", "plugin", "--quantile", "0",
                           "--out", tmp_path / "p.json"], capsys)
    assert code == 0 and err.startswith("oasis-opt: warning: alpha = "), err
    assert plugin_pricing([base.with_jobs(base.jobs + (late,))], 0.0).details["alpha"] > 50
