"""``service.wiring.build_service``: the service's parts wired from a cluster, a policy and its
options, every refusal an ``OptionError`` naming the parameter (what ``oasis-opt serve`` maps to
its flags)."""
from __future__ import annotations

import pytest

from oasis_opt.policies import OptionError
from oasis_opt.workloads import paper_fig5

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from oasis_opt.service.wiring import build_service  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    return paper_fig5(0, servers=3)


def test_a_wired_service_has_its_parts(cluster):
    """Catches wiring that drops a part: the app serves the scheduler the runner paces, and
    the state records the policy and its options."""
    service = build_service(cluster, "drf", {}, slot_s=1.0, execute=False)
    try:
        assert service.runner.scheduler is service.scheduler
        assert service.scheduler.policy_name == "drf" and not service.scheduler.resumed
        assert any(getattr(r, "path", None) == "/jobs" for r in service.app.routes)
    finally:
        service.store.close()


@pytest.mark.parametrize("policy, options, state, param", [
    ("oasis", {}, None, "pricing"),  # oracle pricing needs every job in advance
    ("offline", {}, None, "policy"),  # not an online policy
    ("nope", {}, None, "policy"),
    ("drf", {"colour": "red"}, None, "colour"),
    ("drf", {"progress": True}, None, "progress"),  # a run option: the service runs the policy
    ("drf", {}, "/nonexistent/dir/state.db", "state"),
])
def test_build_service_names_the_parameter_it_refuses(cluster, policy, options, state, param):
    """Catches a refusal that only the command line could place: each is an ``OptionError``
    whose ``.param`` is the parameter at fault."""
    with pytest.raises(OptionError) as err:
        build_service(cluster, policy, options, slot_s=1.0, state=state, execute=False)
    assert err.value.param == param, err.value


def test_an_executing_service_runs_the_closed_loop_unless_asked_for_the_open_one(cluster,
                                                                                  tmp_path, capsys):
    """``serve``'s default with an executor is the closed loop (issue: the service kept the open
    loop while ``execute`` closed it); ``open_loop`` keeps the old behaviour, a policy-only
    service has nothing measured to close a loop on, and ``serve --open-loop --no-execute`` is
    refused naming the flag."""
    from oasis_opt.cli import main
    from oasis_opt.model.io import save_instance

    for execute, open_loop, closed in ((True, False, True), (True, True, False),
                                       (False, False, False)):
        service = build_service(cluster, "drf", {}, slot_s=1.0, execute=execute,
                                open_loop=open_loop)
        try:
            assert service.scheduler.closed_loop is closed
            assert service.scheduler.summary()["loop"] == ("closed" if closed else "open")
        finally:
            service.store.close()
    save_instance(cluster, tmp_path / "cluster.json")
    code = main(["serve", "--cluster", str(tmp_path / "cluster.json"), "--policy", "drf",
                 "--slot-s", "1", "--no-execute", "--open-loop", "--port", "0"])
    err = capsys.readouterr().err
    assert code == 2 and "--open-loop" in err, err
