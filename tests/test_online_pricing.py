"""OASiS prices (22) and constants (23)-(26): oracle, guards, the pricing file, the CLI."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import assume, given

from oasis_opt.cli import main as cli_main
from oasis_opt.model import Instance, Job, Server, Utility
from oasis_opt.model.io import FormatError, save_instance
from oasis_opt.online.pricing import (PRICING_FORMAT, oracle_pricing, resolve_pricing,
                                      save_pricing)
from oasis_opt.testing import instances


def _oracle_by_loops(inst: Instance):
    """Eqs. (23)-(26) with the A5/A6 choices, written out job by job."""
    T, R = inst.horizon, inst.R
    out = {}
    for pool, demand, cap in (("worker", inst.worker_demand, inst.worker_capacity),
                              ("ps", inst.ps_demand, inst.ps_capacity)):
        U = []
        for r in range(R):
            vals = [inst.jobs[i].utility(max(int(inst.min_duration[i]) - 1, 0)) / demand[i, r]
                    for i in range(inst.I) if demand[i, r] > 0]
            U.append(max(vals) if vals else math.nan)
        eta, ratios = 1.0, []
        for i in range(inst.I):
            per = inst.work[i] * demand[i].sum()
            low = inst.jobs[i].utility(T - inst.arrival[i])
            if per > 0 and low > 0:
                eta = max(eta, T * cap.sum() / per)
                ratios.append(low / per)
        out[pool] = (np.array(U), min(ratios) / (4 * eta), eta)
    return out


@given(instances())
def test_oracle_constants_follow_eqs_23_to_26(inst):
    assume(inst.I > 0)
    p = oracle_pricing(inst)
    want = _oracle_by_loops(inst)
    for U, L, eta, pool in ((p.U_worker, p.L_worker, p.eta_worker, "worker"),
                            (p.U_ps, p.L_ps, p.eta_ps, "ps")):
        wU, wL, weta = want[pool]
        np.testing.assert_allclose(U, wU, rtol=1e-12)
        assert L == pytest.approx(wL, rel=1e-9) and eta == pytest.approx(weta, rel=1e-12)
        assert eta >= 1.0
    alpha = max([1.0] + [math.log(u / p.L_worker) for u in p.U_worker if not math.isnan(u)]
                + [math.log(u / p.L_ps) for u in p.U_ps if not math.isnan(u)])
    assert p.alpha == pytest.approx(alpha, rel=1e-12)
    assert p.competitive_bound == pytest.approx(2 * alpha, rel=1e-12)
    json.dumps(p.stats(), allow_nan=False)  # reportable as strict JSON


@given(instances())
def test_price_function_runs_from_L_to_U(inst):
    assume(inst.I > 0)
    p = oracle_pricing(inst)
    cap = inst.worker_capacity
    empty = p.worker_prices(np.zeros_like(cap), cap)
    full = p.worker_prices(cap, cap)
    half = p.worker_prices(cap / 2, cap)
    np.testing.assert_allclose(empty, p.L_worker, rtol=1e-12)
    priced = ~np.isnan(p.U_worker) & (cap > 0)
    np.testing.assert_allclose(full[priced], np.broadcast_to(p.U_worker, cap.shape)[priced],
                               rtol=1e-9)
    # geometric mean in the middle: P(c/2) = sqrt(L U), and unpriced resources stay at L
    np.testing.assert_allclose(half[priced], np.sqrt(p.L_worker * np.broadcast_to(
        p.U_worker, cap.shape)[priced]), rtol=1e-9)
    np.testing.assert_allclose(full[~priced], p.L_worker, rtol=1e-12)


@given(instances())
def test_u_scale_scales_U_only(inst):
    assume(inst.I > 0)
    p = oracle_pricing(inst)
    q = oracle_pricing(inst, u_scale=0.2)
    np.testing.assert_allclose(q.U_worker, 0.2 * p.U_worker, rtol=1e-12)
    np.testing.assert_allclose(q.U_ps, 0.2 * p.U_ps, rtol=1e-12)
    assert (q.L_worker, q.L_ps, q.u_scale) == (p.L_worker, p.L_ps, 0.2)


# ---- guards of A5/A6 ------------------------------------------------------------------------
def _instance(utilities, arrivals, T=300, gpu_demand=(0.0,)) -> Instance:
    ws = (Server("w0", {"gpu": 4, "cpu": 8, "bw": 10}),)
    ps = (Server("p0", {"cpu": 8, "bw": 20}),)
    jobs = tuple(Job(f"j{i}", a, 2, 2, 1.0, {"gpu": gpu_demand[i % len(gpu_demand)], "cpu": 1,
                                             "bw": 1}, {"cpu": 1, "bw": 5}, u)
                 for i, (u, a) in enumerate(zip(utilities, arrivals)))
    return Instance(T, ("gpu", "cpu", "bw"), ws, ps, jobs)


def test_underflowed_utility_is_left_out_of_L():
    critical = Utility.sigmoid(100, 6.0, 1.0)  # f(299) = 100 / (1 + e^1788) = 0.0 in float64
    sensitive = Utility.sigmoid(50, 0.5, 5.0)
    inst = _instance([critical, sensitive], [1, 1])
    assert critical(299) == 0.0 and sensitive(299) > 0
    p = oracle_pricing(inst)
    assert p.excluded_from_L == ("j0",)
    per = inst.work[1] * inst.worker_demand[1].sum()
    eta = max(1.0, inst.horizon * inst.worker_capacity.sum() / per)
    assert p.log_L_worker == pytest.approx(math.log(sensitive(299) / per / (4 * eta)), rel=1e-12)
    assert math.isfinite(p.alpha)
    with pytest.raises(ValueError, match="underflow"):
        oracle_pricing(_instance([critical], [1]))


def test_resource_nobody_demands_is_unpriced():
    inst = _instance([Utility.sigmoid(50, 0.5, 5.0)] * 2, [1, 3], gpu_demand=(0.0,))
    p = oracle_pricing(inst)
    assert math.isnan(p.U_worker[0]) and p.stats()["unpriced_worker"] == ["gpu"]
    assert "gpu" not in p.to_dict()["U_worker"]
    prices = p.worker_prices(inst.worker_capacity, inst.worker_capacity)
    assert prices[0, 0] == pytest.approx(p.L_worker) and prices[0, 1] == pytest.approx(p.U_worker[1])
    # a job demanding a GPU makes it priced, over the jobs that demand it only
    inst = _instance([Utility.sigmoid(50, 0.5, 5.0)] * 2, [1, 3], gpu_demand=(0.0, 2.0))
    p = oracle_pricing(inst)
    assert p.U_worker[0] == pytest.approx(inst.jobs[1].utility(int(inst.min_duration[1]) - 1) / 2)


# ---- the pricing file ---------------------------------------------------------------------------
def _doc(**changes):
    doc = {"format": PRICING_FORMAT, "U_worker": {"gpu": 30.0, "cpu": 20.0, "bw": 5.0},
           "U_ps": {"cpu": 10.0, "bw": 3.0}, "L_worker": 0.01, "L_ps": 0.02}
    doc.update(changes)
    return {k: v for k, v in doc.items() if v is not None}


def test_pricing_file_round_trip(tmp_path):
    inst = _instance([Utility.sigmoid(50, 0.5, 5.0)], [1], gpu_demand=(1.0,))
    path = tmp_path / "pricing.json"
    path.write_text(json.dumps(_doc()))
    p = resolve_pricing(str(path), inst)
    assert p.L_worker == pytest.approx(0.01) and p.U_worker.tolist() == [30.0, 20.0, 5.0]
    assert p.eta_worker is None and p.source.startswith("file:")
    save_pricing(p, tmp_path / "again.json")
    q = resolve_pricing(str(tmp_path / "again.json"), inst, u_scale=3.0)
    np.testing.assert_allclose(q.U_worker, 3 * p.U_worker)
    assert resolve_pricing(_doc(), inst).to_dict() == p.to_dict()


@pytest.mark.parametrize("doc, field", [
    (_doc(format="oasis-opt/pricing@2"), "format"),
    (_doc(L_ps=None), "L_ps"),
    (_doc(U_worker=None), "U_worker"),
    (_doc(extra=1), "extra"),
    (_doc(L_worker=0.0), "L_worker"),
    (_doc(L_worker="1"), "L_worker"),
    (_doc(U_ps={"cpu": -1.0, "bw": 3.0}), "U_ps.cpu"),
    (_doc(U_ps={"cpu": 1.0, "bw": 3.0, "tpu": 2.0}), "U_ps.tpu"),
    (_doc(U_worker={"cpu": 20.0, "bw": 5.0}), "U_worker.gpu"),  # a job demands a GPU
    (_doc(U_ps=[1, 2]), "U_ps"),
])
def test_pricing_file_errors_name_the_field(doc, field):
    inst = _instance([Utility.sigmoid(50, 0.5, 5.0)], [1], gpu_demand=(1.0,))
    with pytest.raises(FormatError) as err:
        resolve_pricing(doc, inst)
    assert err.value.field == field


def test_pricing_file_that_is_not_json(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    with pytest.raises(FormatError, match="not valid JSON"):
        resolve_pricing(str(path), _instance([Utility.sigmoid(50, 0.5, 5.0)], [1]))


def test_cli_solve_with_pricing_file(tmp_path, capsys):
    inst = _instance([Utility.sigmoid(50, 0.5, 5.0), Utility.sigmoid(80, 0.1, 3.0)], [1, 2],
                     T=8, gpu_demand=(1.0,))
    save_instance(inst, tmp_path / "inst.json")
    (tmp_path / "pricing.json").write_text(json.dumps(_doc()))
    code = cli_main(["solve", str(tmp_path / "inst.json"), "--policy", "oasis", "--pricing",
                     str(tmp_path / "pricing.json"), "--backend", "numpy", "--out",
                     str(tmp_path / "result.json")])
    assert code == 0, capsys.readouterr().err
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["stats"]["pricing"]["L_worker"] == pytest.approx(0.01)
    assert result["stats"]["backend"] == "numpy"
    # a broken file: exit code 2 and one line naming the field
    (tmp_path / "pricing.json").write_text(json.dumps(_doc(L_ps=-1)))
    code = cli_main(["solve", str(tmp_path / "inst.json"), "--policy", "oasis", "--pricing",
                     str(tmp_path / "pricing.json"), "--out", str(tmp_path / "r2.json")])
    err = capsys.readouterr().err
    assert code == 2 and "L_ps" in err and len(err.strip().splitlines()) == 1


def test_pricing_object_for_other_resources_is_rejected():
    inst = _instance([Utility.sigmoid(50, 0.5, 5.0)], [1])
    other = Instance(5, ("cpu", "bw"), (Server("w", {"cpu": 2, "bw": 5}),),
                     (Server("p", {"cpu": 2, "bw": 5}),),
                     (Job("j", 1, 1, 1, 1.0, {"cpu": 1, "bw": 1}, {"cpu": 1, "bw": 1},
                          Utility.constant(3.0)),))
    with pytest.raises(ValueError, match="resources"):
        resolve_pricing(oracle_pricing(other), inst)
