"""``model.numerics``: the one container-fit and tolerance module every layer uses."""
from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from oasis_opt.model import numerics
from oasis_opt.model.numerics import FIT_EPS, UNLIMITED, fill, fit_count, unit_prices

SRC = Path(numerics.__file__).resolve().parents[1]
TOLERANCES = ("FIT_EPS", "CAPACITY_RTOL", "FEAS_TOL", "ROW_TOL", "WORK_EPS", "DONE_EPS",
              "CHUNK_EPS", "COST_RTOL", "PAYOFF_RTOL", "UTILITY_RTOL", "RC_TOL")

amounts = st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0, 7.5])


@settings(max_examples=200)
@given(hnp.arrays(float, st.tuples(st.integers(1, 5), st.integers(1, 4)), elements=amounts),
       st.data())
def test_fit_count_is_the_per_server_minimum_over_demanded_resources(free, data):
    demand = data.draw(hnp.arrays(float, free.shape[1], elements=amounts))
    cap = data.draw(st.none() | st.integers(0, 6))
    got = fit_count(free, demand, cap)
    for s, row in enumerate(free):
        fits = [math.floor((f + FIT_EPS) / d) for f, d in zip(row, demand) if d > 0]
        want = min(fits) if fits else UNLIMITED
        want = max(0, want if cap is None else min(cap, want))
        assert got[s] == want


def test_fit_count_tolerates_float_residue():
    """Free capacity left by float subtractions can fall a hair short of an exact fit: a 0.3
    container still fits into 0.3 - 1e-12 (FIT_EPS = 1e-9), not into 0.3 - 1e-6."""
    assert fit_count(np.array([[0.3 - 1e-12]]), np.array([0.3])).tolist() == [1]
    assert fit_count(np.array([[0.3 - 1e-6]]), np.array([0.3])).tolist() == [0]


def test_fill_takes_servers_in_order_up_to_their_fits():
    assert fill([2, 0, 1], np.array([1, 5, 2]), 4) == [(2, 2), (0, 1), (1, 1)]
    assert fill([0, 1], np.array([1, 1]), 3) is None


@given(hnp.arrays(float, st.tuples(st.integers(1, 4), st.integers(1, 6), st.integers(1, 5)),
                  elements=st.floats(0, 10)), st.data())
def test_unit_price_of_a_server_is_the_same_float_in_any_array(price, data):
    """Backends slice price arrays differently; a server's unit price must not depend on it."""
    demand = data.draw(hnp.arrays(float, price.shape[2], elements=st.floats(0, 5)))
    whole = unit_prices(price, demand)
    t, h = data.draw(st.integers(0, price.shape[0] - 1)), data.draw(st.integers(0, price.shape[1] - 1))
    assert unit_prices(price[t], demand)[h] == whole[t, h]
    assert unit_prices(price[t, h:h + 1], demand)[0] == whole[t, h]
    expect = 0.0
    for p, d in zip(price[t, h], demand):
        expect = expect + p * d if d != 0 else expect
    assert whole[t, h] == expect


def test_each_tolerance_is_defined_once_and_documented():
    """No module but ``model.numerics`` assigns a tolerance name (imports only), and the module
    docstring's table lists every one of them."""
    defined = []
    for path in SRC.rglob("*.py"):
        if path.name == "numerics.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else (
                [node.target] if isinstance(node, ast.AnnAssign) else [])
            for target in targets:
                if isinstance(target, ast.Name) and (target.id in TOLERANCES
                                                     or target.id in ("EPS", "CAPACITY_EPS",
                                                                      "CAP_RTOL")):
                    defined.append(f"{path.relative_to(SRC)}: {target.id}")
    assert defined == []
    for name in TOLERANCES:
        assert f"``{name}``" in numerics.__doc__, name
        assert isinstance(getattr(numerics, name), float)


def test_payoff_positive_ignores_noise_and_keeps_tiny_utilities():
    """Admission beyond float noise: a payoff of a few ulp of its terms is refused (a mutant
    that admits on ``payoff > 0`` admits the first case), while a job whose utility decayed
    to 1e-30 at prices of 1e-300 is admitted (a mutant with an absolute margin refuses it)."""
    from oasis_opt.model.numerics import payoff_positive

    u = 23.511705742418222
    cost = u - 3.5e-15  # utility and cost one or two ulp apart: noise
    assert not payoff_positive(u - cost, cost)
    assert payoff_positive(1e-30 - 1e-300, 1e-300)
    assert payoff_positive(1.1e-11, 10.0)  # 1e-12 of the terms is 1e-11: above it is real
    assert not payoff_positive(0.9e-11, 10.0)
    assert not payoff_positive(-1.0, 0.5) and not payoff_positive(float("-inf"), float("inf"))
