"""The simulator's reference policy on random instances: valid schedules and exact round trips."""
from hypothesis import given

from oasis_opt import solve, validate
from oasis_opt.model.io import (instance_from_dict, instance_to_dict, result_from_dict,
                                result_to_dict)
from oasis_opt.testing import instances


@given(instances())
def test_greedy_schedules_are_valid_and_round_trip(inst):
    sched = solve(inst, "greedy")
    report = validate(inst, sched)
    assert report.ok, str(report)
    doc = result_to_dict(inst, sched)
    assert result_to_dict(inst, result_from_dict(inst, doc)) == doc
    idoc = instance_to_dict(inst)
    assert instance_to_dict(instance_from_dict(idoc)) == idoc
