"""The scheduling service without Ray: the clock-free core against the simulator, its SQLite state
resumed, and the HTTP API in process (FastAPI's TestClient on the real application).

The live server (a real uvicorn killed and restarted, the CLI clients, the browser) is in
``test_service_live.py``; the one run on Ray in ``test_service_ray.py``.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import json
import sqlite3
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_opt.model import validate
from oasis_opt.model.io import instance_to_dict
from oasis_opt.online.pricing import oracle_pricing
from oasis_opt.policies import get_policy
from oasis_opt.service.scheduler import BadRequest, ReplayMismatch, Scheduler
from oasis_opt.service.store import StateMismatch, Store
from oasis_opt.sim.core import simulate
from oasis_opt.workloads import generate

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from oasis_opt.service.app import MAX_JOB_BYTES, create_app  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# the digits MLP of the executor's tests: a task the executor can run
TASK = {"name": "digits-mlp", "config": {"learning_rate": 0.01, "weight_decay": 1e-4, "width": 16,
                                         "depth": 1, "batch_size": 32, "optimizer": "adam"}}


def workload(seed: int = 3):
    """A paper-fig5 instance (10 jobs, T = 10) and OASiS's pricing for it: the pricing is
    fixed before the service starts, as a pricing file would be."""
    inst = generate("paper-fig5", seed=seed)
    return inst, oracle_pricing(inst)


def service(inst, policy: str, pricing=None, store: Store | None = None, **kw) -> Scheduler:
    options = {"pricing": pricing} if policy == "oasis" else {}
    return Scheduler(inst, lambda: get_policy(policy, **options), store=store or Store(),
                     policy=policy, **kw)


def run_through(sched: Scheduler, docs: list[dict], submit_at: list[int]) -> None:
    """Submit job n at the boundary before slot ``submit_at[n]`` (<= its arrival), step to T."""
    for t in range(1, sched.cluster.horizon + 1):
        for doc, when in zip(docs, submit_at):
            if when == t:
                sched.submit(doc)
        sched.step()


def outcome(sched: Scheduler):
    """(admitted, completion, allocation rows) of every job, by the service's own views."""
    views = sched.jobs_view()
    rows = sorted((j, slot.t, s, r, c) for slot in sched._decided for j, s, r, c in slot.rows)
    return [v["admitted"] is True for v in views], [v["completion"] for v in views], rows


# ---- the core against the simulator ------------------------------------------------------------
@settings(max_examples=8)
@given(seed=st.integers(0, 10_000), policy=st.sampled_from(["oasis", "drf", "fifo", "greedy"]),
       data=st.data())
def test_service_decides_as_the_simulator_does(seed, policy, data):
    """Jobs submitted at any boundary up to their arrival, slot by slot: the same admissions,
    allocations and completions as ``simulate`` of the instance with all of them."""
    inst, pricing = workload(seed)
    docs = instance_to_dict(inst)["jobs"]
    order = sorted(range(inst.I), key=lambda i: (inst.jobs[i].arrival, i))
    docs = [docs[i] for i in order]  # the service's instance order is acceptance order
    submit_at = [data.draw(st.integers(1, d["arrival"]), label=f"submit {d['id']}") for d in docs]
    # jobs arriving in one slot are handed over in acceptance order: keep the instance's
    submit_at = list(np.maximum.accumulate(submit_at))
    submit_at = [min(s, d["arrival"]) for s, d in zip(submit_at, docs)]
    sched = service(inst, policy, pricing)
    run_through(sched, docs, submit_at)
    ref_inst = inst.with_jobs([inst.jobs[i] for i in order])
    options = {"pricing": pricing} if policy == "oasis" else {}
    ref = simulate(ref_inst, get_policy(policy, **options))
    admitted, completion, rows = outcome(sched)
    assert admitted == list(ref.admitted)
    assert completion == list(ref.completion)
    assert rows == sorted(ref.allocations.rows())
    assert sched.summary()["utility"] == pytest.approx(ref.total_utility)
    assert validate(ref_inst, ref).ok
    if policy == "oasis":  # a pricing fixed in advance: jobs join the running loop
        assert sched.replays == 0


def test_a_policy_that_cannot_take_new_jobs_is_replayed_and_says_so():
    """DRF's start reads every job: each slot after a submission rebuilds it and replays the
    slots decided so far (``replays`` counts them); OASiS with a fixed pricing never does."""
    inst, pricing = workload(8)
    docs = instance_to_dict(inst)["jobs"]
    late = [{k: v for k, v in d.items() if k != "arrival"} for d in docs[:4]]  # next slot
    counts = {}
    for policy in ("drf", "oasis"):
        sched = service(inst, policy, pricing)
        sched.step()  # slot 1 without jobs
        for d in late:
            sched.submit(d)
            sched.step()
        counts[policy] = sched.replays
    assert counts == {"drf": len(late), "oasis": 0}


class _Held:
    """OASiS whose decisions wait for ``go``; ``entered`` is set once one is under way."""

    def __init__(self, pricing):
        import threading

        self.go, self.entered = threading.Event(), threading.Event()
        self.pricing = pricing

    def __call__(self):
        policy = get_policy("oasis", pricing=self.pricing)
        decide, held = policy.on_arrival, self

        def on_arrival(job, t, state):
            held.entered.set()
            assert held.go.wait(300), "the test never released the decision"
            return decide(job, t, state)

        policy.on_arrival = on_arrival
        return policy


def test_a_submission_does_not_wait_for_the_slot_being_decided():
    """A submit while the policy decides slot t returns at once (it takes only the jobs' lock),
    and the job arrives in t + 1: slot t is decided on the jobs accepted before it began."""
    import threading

    inst, pricing = workload(3)
    docs = sorted(instance_to_dict(inst)["jobs"], key=lambda d: d["arrival"])
    held = _Held(pricing)
    sched = Scheduler(inst, held, store=Store(), policy="oasis")
    first = {**docs[0], "arrival": 1}
    sched.submit(first)
    stepper = threading.Thread(target=sched.step)
    stepper.start()
    assert held.entered.wait(120)
    got: dict = {}
    submitter = threading.Thread(target=lambda: got.update(sched.submit(
        {k: v for k, v in docs[1].items() if k != "arrival"})))
    submitter.start()
    submitter.join(60)  # a submission takes milliseconds; one held by the slot never returns
    stuck = submitter.is_alive()
    held.go.set()
    stepper.join(120)
    submitter.join(120)
    assert not stuck, "the submission waited for the slot's decision"
    assert got["arrival"] == 2 and got["state"] == "pending"
    sched.step()
    assert sched.job_view(1)["decided_slot"] == 2


@pytest.mark.parametrize("policy", ["oasis", "drf"])
def test_the_summary_counts_what_the_views_say(policy):
    """``summary`` counts states without building the views, and sums the resources used as
    slots finish: held against the views' states and utilities and against the utilisation
    recomputed by hand from every finished slot's rows, part-way through a run with a cancel."""
    inst, pricing = workload(6)
    docs = sorted(instance_to_dict(inst)["jobs"], key=lambda d: d["arrival"])
    sched = service(inst, policy, pricing)
    for d in docs[:6]:
        sched.submit(d)
    for _ in range(3):
        sched.step()
    for d in docs[6:]:
        sched.submit({**d, "arrival": max(d["arrival"], sched.next_slot)})
    live = [v for v in sched.jobs_view() if v["state"] in ("pending", "waiting", "scheduled")]
    if live:
        sched.cancel(live[0]["id"])
    for _ in range(4):
        sched.step()
    views = sched.jobs_view()
    got = sched.summary()
    states = [v["state"] for v in views]
    for key in ("running", "scheduled", "rejected", "completed", "cancelled"):
        assert got[key] == states.count(key), key
    assert got["pending"] == states.count("pending") + states.count("waiting")
    assert got["admitted"] == sum(v["admitted"] is True for v in views)
    assert got["utility"] == sum(v["utility"] for v in views)
    assert got["jobs"] == len(views) == inst.I
    full = sched.instance
    used = np.zeros(full.R)
    for slot in sched._decided[:sched.finished_slots]:
        for j, _, r, c in slot.rows:
            used += c * (full.worker_demand[j] if r == 0 else full.ps_demand[j])
    cap = full.capacity.sum(axis=0) * sched.finished_slots
    want = {r: float(used[n] / cap[n]) if cap[n] > 0 else 0.0
            for n, r in enumerate(full.resources)}
    assert got["utilisation"] == pytest.approx(want, rel=1e-12, abs=0)
    assert any(used > 0)


def test_a_cancelled_job_stops_at_the_next_boundary():
    inst, pricing = workload()
    docs = instance_to_dict(inst)["jobs"]
    sched = service(inst, "greedy")
    for d in docs:
        sched.submit(d)
    first = min(docs, key=lambda d: d["arrival"])
    while sched.job_view(0)["state"] != "running":
        sched.step()
    running_in = sched.finished_slots
    assert sched.cancel(first["id"])["state"] == "cancelling"
    sched.step()
    view = sched.job_view(0)
    assert view["state"] == "cancelled" and view["completion"] is None and view["utility"] == 0
    assert not [r for slot in sched._decided[running_in:] for r in slot.rows if r[0] == 0]
    with pytest.raises(BadRequest) as err:
        sched.cancel(first["id"])
    assert err.value.status == 409


def test_a_cancelled_oasis_job_shows_no_reservation_ahead():
    """From outside, two slots after a cancel the service still showed most of the job's
    future reservation (OASiS reserves whole plans). Now the plan it shows ends with the slots
    that ran, and the committed capacity ahead is a run's without the job."""
    inst, pricing = workload(5)
    docs = instance_to_dict(inst)["jobs"]
    sched = service(inst, "oasis", pricing)
    for d in docs:
        sched.submit(d)
    seq = None
    while seq is None and sched.finished_slots < inst.horizon:
        sched.step()
        t = sched.finished_slots
        seq = next((n for n in range(len(docs)) if sched.job_view(n)["state"] == "running"
                    and any(p["slot"] > t + 1 for p in sched.job_view(n)["plan"] or [])), None)
    assert seq is not None
    sched.cancel(docs[seq]["id"])
    at = sched.next_slot  # the boundary it takes effect at
    sched.step()
    sched.step()
    view = sched.job_view(seq)
    assert view["state"] == "cancelled"
    assert view["plan"] is None or all(p["slot"] < at for p in view["plan"]), view["plan"]


def test_a_job_whose_completing_slot_is_decided_cannot_be_cancelled():
    """The case study's race (a stop arriving while the job's last slot runs): the service
    accepted the cancel for the next boundary and then called the job cancelled, though the
    slot already decided completed it (its real training had run every mini-batch). Now the
    cancel is refused with 409 and the job completes with its utility."""
    inst, _ = workload()
    docs = instance_to_dict(inst)["jobs"]
    sched = service(inst, "greedy")
    for d in docs:
        sched.submit(d)
    seq = next(n for n in range(len(docs)) if simulate(inst, get_policy("greedy")
                                                         ).completion[n] >= 0)
    while True:  # decide slots (finishing the one before) until seq's completing slot is decided
        slot = sched.advance()
        if seq in slot.finished:
            break
        sched.finish(slot.t)
    assert sched.job_view(seq)["state"] == "running"  # the slot is decided, not finished
    with pytest.raises(BadRequest) as err:
        sched.cancel(docs[seq]["id"])
    assert err.value.status == 409 and f"completes in slot {slot.t}" in err.value.message
    sched.finish(slot.t)
    view = sched.job_view(seq)
    assert view["state"] == "completed" and view["completion"] == slot.t
    assert view["utility"] == pytest.approx(inst.utility_of(seq, slot.t)) and view["utility"] > 0


def test_the_slot_loop_refuses_to_cancel_a_completed_job():
    from oasis_opt.sim.core import SlotLoop

    inst, _ = workload()
    loop = SlotLoop(inst, get_policy("greedy"))
    while not (loop.state.completion >= 0).any():
        loop.step()
    done = int(np.flatnonzero(loop.state.completion >= 0)[0])
    with pytest.raises(ValueError, match="completed job cannot be cancelled"):
        loop.cancel(done)
    assert not loop.state.cancelled[done]

# ---- the state file ------------------------------------------------------------------------------
def test_a_restarted_scheduler_resumes_its_state(tmp_path):
    """Stop after a few slots (one decided, not run), resume from the file: the same jobs and
    decisions, the unfinished slot handed out as decided, and the rest as an uninterrupted run."""
    inst, pricing = workload(5)
    docs = sorted(instance_to_dict(inst)["jobs"], key=lambda d: d["arrival"])
    path = tmp_path / "state.db"
    a = service(inst, "oasis", pricing, Store(path))
    for d in docs:
        a.submit(d)
    for _ in range(4):
        a.step()
    pending = a.advance()  # slot 5 decided and written, the service dies before running it
    before = sqlite3.connect(path).execute("SELECT seq, slot, admitted FROM decisions").fetchall()
    a.store.close()

    b = service(inst, "oasis", pricing, Store(path))
    assert b.resumed and b.finished_slots == 4 and b.next_slot == 6
    assert b.advance() == pending  # not decided again
    b.finish(pending.t)
    while b.finished_slots < inst.horizon:
        b.step()
    after = sqlite3.connect(path).execute("SELECT seq, slot, admitted FROM decisions").fetchall()
    assert set(before) <= set(after)

    whole = service(inst, "oasis", pricing)
    for d in docs:
        whole.submit(d)
    while whole.finished_slots < inst.horizon:
        whole.step()
    assert outcome(b) == outcome(whole)
    assert b.summary() == whole.summary()


def test_cancellations_survive_a_restart(tmp_path):
    """A cancel that took effect and one still waiting for its boundary are both in the state
    file: the restarted service keeps the first job cancelled and cancels the second at its
    boundary, as an uninterrupted run does. A service that forgot the stored cancels on restart
    would resurrect both (the replay gives the first job containers again, the second runs)."""
    inst, _ = workload(5)
    docs = sorted(instance_to_dict(inst)["jobs"], key=lambda d: d["arrival"])
    path = tmp_path / "state.db"

    def run_until_cancels(sched):
        for d in docs:
            sched.submit(d)
        while sched.job_view(0)["state"] != "running":
            sched.step()
        sched.cancel(docs[0]["id"])
        sched.step()  # the boundary: job 0 is cancelled now
        later = next(n for n, d in enumerate(docs) if d["arrival"] > sched.next_slot)
        sched.cancel(docs[later]["id"])  # takes effect at the next boundary, not reached yet
        return later

    a = service(inst, "greedy", None, Store(path))
    later = run_until_cancels(a)
    stopped_at = a.finished_slots
    assert a.job_view(0)["state"] == "cancelled"
    assert a.job_view(later)["state"] == "cancelling"
    a.store.close()

    b = service(inst, "greedy", None, Store(path))
    assert b.resumed and b.finished_slots == stopped_at
    assert b.job_view(0)["state"] == "cancelled"
    assert b.job_view(later)["state"] == "cancelling"
    while b.finished_slots < inst.horizon:
        b.step()
    assert b.job_view(0)["state"] == "cancelled" and b.job_view(later)["state"] == "cancelled"
    assert b.job_view(later)["admitted"] is None  # never decided: it arrived cancelled
    rows = [r for slot in b._decided for r in slot.rows]
    assert not [r for r in rows if r[0] == later]

    whole = service(inst, "greedy", None)
    assert run_until_cancels(whole) == later
    while whole.finished_slots < inst.horizon:
        whole.step()
    assert outcome(b) == outcome(whole)
    assert b.summary() == whole.summary()


def test_a_state_is_resumed_only_by_the_same_cluster_and_policy(tmp_path):
    inst, pricing = workload()
    path = tmp_path / "state.db"
    service(inst, "oasis", pricing, Store(path), options={"pricing": "a.json"}).store.close()
    with pytest.raises(StateMismatch) as err:
        service(inst, "drf", None, Store(path), options={"pricing": "a.json"})
    assert err.value.field == "--policy"
    with pytest.raises(StateMismatch) as err:
        service(inst, "oasis", pricing, Store(path), options={"pricing": "b.json"})
    assert err.value.field == "--pricing"
    other = generate("paper-fig5", seed=1, servers=6)
    with pytest.raises(StateMismatch) as err:
        service(other, "oasis", pricing, Store(path), options={"pricing": "a.json"})
    assert err.value.field == "--cluster"


def test_a_state_the_policy_does_not_reproduce_is_refused(tmp_path):
    """The replay checks every stored decision: a state whose decision was flipped is refused."""
    inst, pricing = workload()
    path = tmp_path / "state.db"
    a = service(inst, "greedy", None, Store(path))
    for d in instance_to_dict(inst)["jobs"]:
        a.submit(d)
    while a.finished_slots < 3:
        a.step()
    a.store.close()
    db = sqlite3.connect(path)
    assert db.execute("UPDATE decisions SET admitted = 1 - admitted").rowcount > 0
    db.commit()
    db.close()
    with pytest.raises(ReplayMismatch, match="replaying the policy"):
        service(inst, "greedy", None, Store(path))


# ---- the HTTP API --------------------------------------------------------------------------------
@pytest.fixture
def api():
    inst, pricing = workload()
    sched = service(inst, "oasis", pricing)
    client = TestClient(create_app(sched))
    # at most 16 chunks: digits' 1,077 training examples hold a mini-batch of 32 in each
    docs = [{**d, "chunks": min(d["chunks"], 16), "task": TASK}
            for d in instance_to_dict(inst)["jobs"]]
    return sched, client, docs


def test_jobs_are_submitted_listed_followed_and_cancelled(api):
    sched, client, docs = api
    r = client.post("/jobs", json=docs[0])
    assert r.status_code == 201 and r.json()["state"] == "pending"
    assert r.json()["job"] == docs[0]
    no_id = {k: v for k, v in docs[1].items() if k not in ("id", "arrival")}
    r = client.post("/jobs", json=no_id)
    assert r.status_code == 201 and r.json()["arrival"] == 1 and r.json()["id"] == "job-2"
    while sched.finished_slots < docs[0]["arrival"]:
        sched.step()
    view = client.get(f"/jobs/{docs[0]['id']}").json()
    assert view["admitted"] is not None and view["decided_slot"] == docs[0]["arrival"]
    if view["admitted"]:  # OASiS's committed plan: its rows and predicted completion
        assert view["plan"] and view["predicted_completion"] == max(p["slot"] for p in view["plan"])
        assert view["predicted_utility"] > 0
    assert [j["id"] for j in client.get("/jobs").json()] == [docs[0]["id"], "job-2"]
    late = {**docs[2], "arrival": sched.next_slot + 1}
    assert client.post("/jobs", json=late).status_code == 201
    r = client.delete(f"/jobs/{late['id']}")
    assert r.status_code == 200 and r.json()["state"] == "cancelling"
    sched.step()
    sched.step()  # its arrival slot: never handed to the policy
    view = client.get(f"/jobs/{late['id']}").json()
    assert view["state"] == "cancelled" and view["admitted"] is None
    assert client.delete(f"/jobs/{late['id']}").status_code == 409
    assert client.get("/jobs/nope").status_code == 404
    assert client.delete("/jobs/nope").status_code == 404


def test_cluster_summary_and_metrics(api):
    sched, client, docs = api
    for d in docs:
        assert client.post("/jobs", json=d).status_code == 201
    while sched.finished_slots < 6:
        sched.step()
    cluster = client.get("/cluster").json()
    assert cluster["slot"] == 6 and len(cluster["servers"]) == len(sched.cluster.servers)
    inst = sched.instance
    for n, server in enumerate(cluster["servers"]):
        for r, used in server["used"].items():
            assert len(used) == inst.horizon
            cap = server["capacity"].get(r, 0.0)
            assert all(u <= cap + 1e-9 for u in used)
            # OASiS reserves whole plans: what a decided slot uses is what it committed
            assert all(u == pytest.approx(c)
                       for u, c in zip(used[:6], server["committed"][r][:6]))
    placed = {j for s in cluster["servers"] for cell in s["jobs"] for j in cell}
    summary = client.get("/summary").json()
    jobs = client.get("/jobs").json()
    assert placed == {j["id"] for j in jobs if j["admitted"] and min(
        p["slot"] for p in j["plan"]) <= 6}  # a plan may start after its admission
    assert summary["history"][-1]["admitted"] == summary["admitted"] == sum(
        j["admitted"] is True for j in jobs) > 0
    metrics = client.get("/metrics")
    assert metrics.headers["content-type"].startswith("text/plain")
    lines = dict(line.rsplit(" ", 1) for line in metrics.text.splitlines()
                 if line and not line.startswith("#"))
    assert float(lines["oasis_admitted"]) == summary["admitted"]
    assert float(lines["oasis_rejected"]) == summary["rejected"]
    assert float(lines["oasis_utility"]) == pytest.approx(summary["utility"])
    assert float(lines['oasis_utilisation{resource="gpu"}']) == pytest.approx(
        summary["utilisation"]["gpu"])
    assert 0 < summary["utilisation"]["gpu"] <= 1


def test_the_openapi_schema_and_the_dashboard_are_served(api):
    _, client, _ = api
    schema = client.get("/openapi.json").json()
    assert {"/jobs", "/jobs/{job_id}", "/cluster", "/metrics", "/summary"} <= set(schema["paths"])
    body = schema["paths"]["/jobs"]["post"]["requestBody"]["content"]["application/json"]
    assert "chunk_time" in body["schema"]["required"]
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script src="dashboard.js">' in page.text and 'id="grid"' in page.text
    script = client.get("/dashboard.js")
    assert script.headers["content-type"].startswith("text/javascript")
    for path in ("cluster", "jobs", "summary"):  # what the page polls exists
        assert f'"{path}"' in script.text and client.get(f"/{path}").status_code == 200


BAD = {  # change of a valid job -> (status, field)
    "malformed JSON": (None, 400, "job"),
    "not an object": (lambda d: [d], 400, "job"),
    "missing field": (lambda d: {k: v for k, v in d.items() if k != "chunks"}, 400, "chunks"),
    "bad value": (lambda d: {**d, "chunk_time": -1}, 400, "chunk_time"),
    "unknown field": (lambda d: {**d, "gpus": 3}, 400, "gpus"),
    "unknown task": (lambda d: {**d, "task": {**TASK, "name": "imagenet"}}, 400, "task.name"),
    "task config": (lambda d: {**d, "task": {**TASK, "config": {**TASK["config"], "width": -1}}},
                    400, "task.config.width"),
    "arrival in the past": (lambda d: {**d, "arrival": 1}, 400, "arrival"),
    "beyond the horizon": (lambda d: {**d, "arrival": 99}, 400, "arrival"),
    "too large": (lambda d: {**d, "worker": {**d["worker"], "gpu": 1e6}}, 400, "worker"),
    "too large ps": (lambda d: {**d, "ps": {**d["ps"], "mem": 1e6}}, 400, "ps"),
    "duplicate id": (lambda d: {**d, "id": "first"}, 409, "id"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_requests_name_the_field_and_write_nothing(api, case, tmp_path):
    sched, client, docs = api
    assert client.post("/jobs", json={**docs[0], "id": "first"}).status_code == 201
    sched.step()
    sched.step()  # the next boundary is slot 3
    change, status, field = BAD[case]
    good = {**docs[1], "arrival": 4}
    before = (client.get("/jobs").json(), sched.store.jobs())
    if change is None:
        r = client.post("/jobs", content=b'{"id": "x", ', headers={"content-type":
                                                                    "application/json"})
    else:
        r = client.post("/jobs", json=change(good))
    assert r.status_code == status, r.text
    body = r.json()
    assert body["field"] == field and body["detail"].startswith(f"{field}: ")
    assert "\n" not in body["detail"]
    assert (client.get("/jobs").json(), sched.store.jobs()) == before
    assert client.post("/jobs", json=good).status_code == 201  # and the service goes on


def test_a_token_guards_mutating_requests_only():
    """No token (or not a bearer one) is 401 saying a token is needed; a wrong one is 403
    saying it is wrong (the mutant that answered both alike, as the service did, fails)."""
    inst, pricing = workload()
    sched = service(inst, "oasis", pricing)
    client = TestClient(create_app(sched, token="s3cret"))
    doc = instance_to_dict(inst)["jobs"][0]
    for headers in ({}, {"Authorization": "Basic s3cret"}, {"Authorization": "Bearer "}):
        r = client.post("/jobs", json=doc, headers=headers)
        assert r.status_code == 401 and r.json()["field"] == "authorization"
        assert "needs a bearer token" in r.json()["detail"]
        assert r.headers["www-authenticate"] == "Bearer"
    for wrong in ("wrong", "s3cre", "s3cret2", "S3CRET"):
        r = client.post("/jobs", json=doc, headers={"Authorization": f"Bearer {wrong}"})
        assert r.status_code == 403 and r.json()["field"] == "authorization"
        assert r.json()["detail"] == "authorization: the bearer token is not this service's"
    assert client.get("/jobs").json() == [] and sched.store.jobs() == []
    ok = {"Authorization": "Bearer s3cret"}
    assert client.post("/jobs", json=doc, headers=ok).status_code == 201
    assert client.delete(f"/jobs/{doc['id']}").status_code == 401
    assert client.get(f"/jobs/{doc['id']}").status_code == 200  # reading needs no token
    assert client.delete(f"/jobs/{doc['id']}", headers=ok).status_code == 200


def test_the_service_executing_requires_a_task():
    inst, pricing = workload()
    sched = service(inst, "oasis", pricing, executes=True)
    client = TestClient(create_app(sched))
    doc = {**instance_to_dict(inst)["jobs"][0], "chunks": 16}
    r = client.post("/jobs", json=doc)
    assert r.status_code == 400 and r.json()["field"] == "task"
    assert client.post("/jobs", json={**doc, "task": TASK}).status_code == 201


def test_the_state_schema_is_as_documented(tmp_path):
    """Every table of the file, with its columns in order, is the store docstring's."""
    import re

    from oasis_opt.service import store

    Store(tmp_path / "s.db").close()
    db = sqlite3.connect(tmp_path / "s.db")
    tables = {name: [c[1] for c in db.execute(f"PRAGMA table_info({name})")]
              for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    documented = {}
    for name, inner in re.findall(r"``(\w+)\((.*?)\)``", " ".join(store.__doc__.split())):
        fields = re.sub(r",\s*PRIMARY KEY \(.*\)$", "", inner).split(",")
        documented[name] = [f.split()[0] for f in fields if f.strip()]
    assert documented == tables


def test_a_container_that_fits_up_to_float_noise_is_taken_as_the_simulator_takes_it():
    """The service's "larger than every server" refusal counts fits as the simulator, the dual
    subroutine and the validator do (``model.numerics.fit_count``, with ``FIT_EPS``): a worker
    that needs exactly one server's capacity, give or take float noise (0.1 + 0.2 of 0.3), is
    accepted; the former ``demand <= capacity`` test refused it. A container larger by far more
    than the noise is still refused, naming the role."""
    from oasis_opt.model.numerics import FIT_EPS, fit_count

    inst, _ = workload()
    server = inst.worker_servers[0]
    doc = instance_to_dict(inst)["jobs"][0]
    noisy = {r: float(v) + FIT_EPS / 10 for r, v in server.capacity.items()}
    assert any(noisy[r] > v for r, v in server.capacity.items())  # the old test: refused
    need = np.array([noisy.get(r, 0.0) for r in inst.resources])
    assert fit_count(inst.worker_capacity[:1], need)[0] == 1  # the simulator: one fits
    sched = service(inst, "greedy")
    assert sched.submit({**doc, "worker": noisy})["id"] == doc["id"]
    with pytest.raises(BadRequest) as err:
        sched.submit({**doc, "id": "too-big", "worker": {r: v + 1e-3 for r, v in noisy.items()}})
    assert err.value.field == "worker" and "larger than every worker server" in str(err.value)


def test_a_job_body_over_the_limit_is_refused_before_it_is_read_whole():
    """A 20 MB job body was accepted, echoed and stored. Now a body over ``MAX_JOB_BYTES`` is
    413 naming ``job`` and nothing is written: one that declares its length, and one streamed
    without a length (caught while it arrives). A job with a large but allowed provenance still
    goes in, so the limit is not below what jobs need. Mutants caught: no limit (201), a limit
    on the declared length only (the streamed body goes in)."""
    inst, pricing = workload()
    sched = service(inst, "oasis", pricing)
    client = TestClient(create_app(sched))
    doc = instance_to_dict(inst)["jobs"][0]
    big = json.dumps({**doc, "provenance": {"pad": "x" * MAX_JOB_BYTES}}).encode()
    r = client.post("/jobs", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["field"] == "job", r.text

    def streamed():
        for n in range(0, len(big), 1 << 16):
            yield big[n:n + (1 << 16)]

    r = client.post("/jobs", content=streamed(), headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["field"] == "job", r.text
    assert sched.store.jobs() == [] and client.get("/jobs").json() == []
    fine = {**doc, "provenance": {"pad": "x" * (MAX_JOB_BYTES // 2)}}
    assert client.post("/jobs", json=fine).status_code == 201


def test_the_api_docs_page_is_served_from_the_package():
    """/docs was FastAPI's Swagger UI, whose script comes from a CDN: a blank page offline. It
    is now the endpoints listed from the OpenAPI schema, with no script and nothing fetched
    from elsewhere (the Swagger page, restored, has a CDN <script> and fails)."""
    inst, pricing = workload()
    client = TestClient(create_app(service(inst, "oasis", pricing)))
    r = client.get("/docs")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    page = r.text
    assert "<script" not in page and "http" not in page.replace("application/json", "")
    for method, path in (("POST", "/jobs"), ("DELETE", "/jobs/{job_id}"), ("GET", "/health"),
                         ("GET", "/metrics")):
        assert f"<code>{method}</code></td><td><code>{path}</code>" in page, (method, path)
    assert 'href=openapi.json' in page and client.get("/openapi.json").status_code == 200


def test_an_admitted_job_without_workers_now_is_scheduled_and_its_plan_is_drawn_ahead():
    """The dashboard showed an admitted job with no workers in the slot as "running", and no
    slot after the decided ones although OASiS reserves them. A job admitted with workers in
    the slot decided last is "running", one without (its plan runs later) "scheduled"; the
    summary counts both; ``/cluster``'s ``planned`` holds, per server and slot after the
    decided ones, the containers of the admitted jobs' plans. Mutants caught: every admitted
    job "running"; ``planned`` empty, or holding decided slots too."""
    inst, pricing = workload(3)
    sched = service(inst, "oasis", pricing)
    for d in instance_to_dict(inst)["jobs"]:
        sched.submit(d)
    sched.step()
    sched.step()  # slot 2 decided: on this workload job-001 and job-002 wait for later slots
    views = sched.jobs_view()
    live = [v for v in views if v["state"] in ("running", "scheduled")]
    for v in live:
        assert v["admitted"] is True
        assert (v["state"] == "running") == (v["now"]["workers"] > 0), v["id"]
    scheduled = sorted(v["id"] for v in live if v["state"] == "scheduled")
    assert scheduled == ["job-001", "job-002"]
    summary = sched.summary()
    assert (summary["scheduled"], summary["running"]) == (2, len(live) - 2)
    decided = sched.decided_slots
    assert decided == 2
    expected: dict = defaultdict(lambda: defaultdict(int))
    for v in live:
        for p in v["plan"]:
            if p["slot"] > decided:
                expected[(p["slot"], p["server"])][v["id"]] += p["count"]
    got = {(t + 1, s["id"]): cell for s in sched.cluster_view()["servers"]
           for t, cell in enumerate(s["planned"]) if cell}
    assert got and got == {k: dict(v) for k, v in expected.items()}
    assert min(t for t, _ in got) == decided + 1


def test_the_readme_example_job_is_accepted_on_the_readme_cluster(tmp_path):
    """``docs/examples/job.json`` (the README's example) is a job the README's cluster and an
    executing service take: it names a task the executor trains and fits the servers. An
    example that rots (a field renamed, a task gone) fails here."""
    from oasis_opt.cli import main
    from oasis_opt.model.io import load_instance

    readme = (ROOT / "README.md").read_text()
    assert "docs/examples/job.json" in readme
    out = tmp_path / "cluster.json"
    assert main(["generate", "--preset", "paper-fig5", "--seed", "2", "--horizon", "30",
                 "--jobs", "14", "--servers", "6", "--out", str(out)]) == 0
    cluster = load_instance(out)
    sched = Scheduler(cluster.with_jobs([]), lambda: get_policy("drf"), store=Store(),
                      policy="drf", executes=True)
    doc = json.loads((ROOT / "docs" / "examples" / "job.json").read_text())
    r = TestClient(create_app(sched)).post("/jobs", json=doc)
    assert r.status_code == 201, r.text
    assert r.json()["id"] == "my-first-job" and r.json()["task"]["name"] == "digits-mlp"


def test_a_restart_stops_only_the_processes_its_predecessor_recorded(tmp_path):
    """``stop_left_processes`` kills a recorded process that still runs as itself, and never
    one whose pid matches but whose start time does not (a pid the system gave to another
    process since): both are this test's own ``sleep`` processes."""
    import subprocess

    psutil = pytest.importorskip("psutil")
    from oasis_opt.service.runner import stop_left_processes

    mine = subprocess.Popen(["sleep", "600"])
    other = subprocess.Popen(["sleep", "600"])
    try:
        store = Store(tmp_path / "s.db")
        a, b = psutil.Process(mine.pid), psutil.Process(other.pid)
        store.record_processes([(a.pid, a.create_time(), a.name()),
                                (b.pid, b.create_time() - 1.0, b.name())])
        stopped = stop_left_processes(store)
        assert stopped == [f"{mine.pid} sleep"]
        mine.wait(timeout=60)  # psutil reaped it already: the code is lost, the process is not
        assert not a.is_running()
        assert other.poll() is None  # not the recorded process: left alone
        assert store.processes() == []  # forgotten once handled
        assert stop_left_processes(store) == []
    finally:
        for p in (mine, other):
            if p.poll() is None:
                p.kill()
                p.wait()


class _Killed(BaseException):
    """The process dying at that point (a BaseException: no handler of the service catches it)."""


# how the test client sees the process die in the endpoint's worker thread: the BaseException
# itself, or, when anyio's portal cancels its task group first (a race seen on a loaded machine),
# the cancelled future; either way no answer was sent, which is the point of the test
DIED = (_Killed, concurrent.futures.CancelledError)
PORTAL_GONE = "This portal is not running"  # anyio's portal torn down before the client waited


@contextlib.contextmanager
def dies():
    """The request in the block gets no answer because the process died at its write: the
    client sees ``DIED``, or, when anyio's portal has already shut down by the time the client
    waits for the response (the same race, one step later), RuntimeError(PORTAL_GONE). Any other
    error propagates; an answered request fails the test."""
    try:
        yield
    except DIED:
        return
    except RuntimeError as e:
        if str(e) != PORTAL_GONE:
            raise
        return
    pytest.fail("the request was answered: the process did not die at its write")


class _DyingStore(Store):
    """A real SQLite store whose process dies right after (``after=True``) or right before the
    write ``dies_in`` (``record_job`` or ``record_cancel``): the request's answer is never sent."""

    def __init__(self, path, dies_in: str, after: bool):
        super().__init__(path)
        self.dies_in, self.after = dies_in, after

    def _write(self, name: str, write, *args) -> None:
        if name == self.dies_in and not self.after:
            raise _Killed(name)
        write(*args)
        if name == self.dies_in:
            raise _Killed(name)

    def record_job(self, *args) -> None:
        self._write("record_job", super().record_job, *args)

    def record_cancel(self, *args) -> None:
        self._write("record_cancel", super().record_cancel, *args)


@pytest.mark.parametrize("after", [True, False], ids=["after-write", "before-write"])
def test_a_kill_between_the_write_and_the_answer_loses_no_acknowledged_request(tmp_path, after):
    """A submission and a cancellation, each killed at its write, through the real HTTP app:
    killed after the commit (no answer sent), the restarted service has the request, and the
    client's retry is told so (409); killed before it, nothing is stored and the retry goes
    through. Either way the client that got no answer can find out, and every answered request
    is in the state."""
    inst, pricing = workload(4)
    docs = sorted(instance_to_dict(inst)["jobs"], key=lambda d: d["arrival"])
    path = tmp_path / "state.db"
    make = lambda: get_policy("oasis", pricing=pricing)  # noqa: E731
    # 1. a submission killed at its write
    dying = Scheduler(inst, make, store=_DyingStore(path, "record_job", after), policy="oasis")
    with dies():
        TestClient(create_app(dying)).post("/jobs", json=docs[0])
    restarted = Scheduler(inst, make, store=Store(path), policy="oasis")
    client = TestClient(create_app(restarted))
    assert len(restarted.jobs_view()) == (1 if after else 0)
    retry = client.post("/jobs", json=docs[0])
    assert retry.status_code == (409 if after else 201), retry.text
    assert client.get(f"/jobs/{docs[0]['id']}").status_code == 200
    restarted.store.close()
    # 2. a cancellation killed at its write
    dying = Scheduler(inst, make, store=_DyingStore(path, "record_cancel", after),
                      policy="oasis")
    with dies():
        TestClient(create_app(dying)).delete(f"/jobs/{docs[0]['id']}")
    restarted = Scheduler(inst, make, store=Store(path), policy="oasis")
    client = TestClient(create_app(restarted))
    state = client.get(f"/jobs/{docs[0]['id']}").json()["state"]
    assert state == ("cancelling" if after else "pending")
    retry = client.delete(f"/jobs/{docs[0]['id']}")
    assert retry.status_code == (409 if after else 200), retry.text
    restarted.store.close()


def test_a_second_cancel_of_a_job_is_409_not_a_server_error(api):
    """Two DELETEs before the boundary: the second stored the cancel again and failed the
    database's unique key (a 500). Now it says the job is cancelled already."""
    sched, client, docs = api
    client.post("/jobs", json=docs[0])
    assert client.delete(f"/jobs/{docs[0]['id']}").status_code == 200
    again = client.delete(f"/jobs/{docs[0]['id']}")
    assert again.status_code == 409 and "cancelled already" in again.json()["detail"]
    sched.step()
    assert client.get(f"/jobs/{docs[0]['id']}").json()["state"] == "cancelled"


# ---- deployment: a completed job's model served, versioned ----------------------------------
def _trained_service(path, seed=3, jobs=3, late=False):
    """An executing scheduler on a state file whose slots are "run" by the package's own
    in-process trainer: each completing job's checkpoint is ``replay_training`` of the schedule
    (bit-identical to what the executor trains) and its validation accuracy the task's."""
    from oasis_opt.runtime.replay import replay_training
    from oasis_opt.training.tasks import get_task, ravel

    inst, pricing = workload(seed)
    docs = sorted(({**d, "chunks": min(d["chunks"], 16), "epochs": min(d["epochs"], 3),
                    "task": TASK} for d in instance_to_dict(inst)["jobs"]),
                  key=lambda d: d["arrival"])[:jobs]
    if late:  # arrives in the last slot with 40 epochs to train: rejected, never completed
        docs.append({**docs[0], "id": "late", "arrival": inst.horizon, "epochs": 40})
    sched = service(inst, "oasis", pricing, Store(path), executes=True)
    for d in docs:
        sched.submit(d)
    full = sched.instance
    ref = simulate(full, get_policy("oasis", pricing=pricing))
    task = get_task(TASK["name"])
    split, model = task.split(0), task.model(TASK["config"])
    unflatten = ravel(model.init(0))[1]
    for _ in range(full.horizon):
        slot = sched.advance()
        progress, checkpoints = {}, {}
        for j in slot.finished:
            flat = replay_training(full, ref, j)
            acc, _ = model.evaluate(unflatten(flat), split.x_val, split.y_val)
            checkpoints[j] = {"flat": flat}
            progress[j] = {"val_accuracy": float(acc)}
        sched.finish(slot.t, None, progress, checkpoints)
    return sched, full, ref


def test_a_completed_job_is_deployed_versioned_and_predicts(tmp_path):
    """POST /models deploys a completed job's final weights; its held-out accuracy is the
    network's on the test split of the job's data seed (recomputed here from the task's own
    split and network), its predictions the network's argmax; a second deployment is version 2
    and predicts by default, version 1 on request; a restarted service serves both."""
    from oasis_opt.training.tasks import get_task, ravel

    sched, full, ref = _trained_service(tmp_path / "s.db")
    done = [v for v in sched.jobs_view() if v["state"] == "completed"]
    assert len(done) >= 2, [v["state"] for v in sched.jobs_view()]
    client = TestClient(create_app(sched))
    r = client.post("/models", json={"name": "digits", "job": done[0]["id"]})
    assert r.status_code == 201, r.text
    v1 = r.json()
    task = get_task(TASK["name"])
    split, model = task.split(0), task.model(TASK["config"])
    flat = sched.checkpoints()[done[0]["seq"]]["flat"]
    params = ravel(model.init(0))[1](flat)
    acc, _ = model.evaluate(params, split.x_test, split.y_test)
    assert v1["version"] == 1 and v1["job"] == done[0]["id"]
    assert v1["heldout_accuracy"] == pytest.approx(float(acc), abs=1e-6)
    assert v1["heldout_examples"] == len(split.y_test)
    assert v1["val_accuracy"] == done[0]["real"]["val_accuracy"]
    x, y = task.raw()
    test = task.split_indices(0)[2]
    images = x[test][:40]
    got = client.post("/models/digits/predict", json={"images": images.tolist()}).json()
    want = np.asarray(model.classes(params, split.x_test[:40]))
    assert got["version"] == 1 and got["labels"] == want.tolist()
    # a second deployment of the name: version 2, the default from now on
    r2 = client.post("/models", json={"name": "digits", "job": done[1]["id"]})
    assert r2.status_code == 201 and r2.json()["version"] == 2
    assert client.post("/models/digits/predict",
                       json={"images": images.tolist()}).json()["version"] == 2
    again = client.post("/models/digits/predict", json={"images": images.tolist(), "version": 1})
    assert again.json() == got
    assert [m["version"] for m in client.get("/models/digits").json()] == [1, 2]
    sched.store.close()
    # a restarted service serves what it served (the models are in the state)
    restarted = Scheduler(full.with_jobs(()), sched.make_policy, store=Store(tmp_path / "s.db"),
                          policy="oasis", executes=True)
    client = TestClient(create_app(restarted))
    assert client.post("/models/digits/predict",
                       json={"images": images.tolist(), "version": 1}).json() == got


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    """Two trained jobs and a rejected one; the first completed job deployed as ``m``."""
    sched, full, ref = _trained_service(tmp_path_factory.mktemp("models") / "s.db", jobs=2,
                                        late=True)
    client = TestClient(create_app(sched))
    assert sched.job_view(sched.job_seq("late"))["state"] == "rejected"
    done = next(v for v in sched.jobs_view() if v["state"] == "completed")
    assert client.post("/models", json={"name": "m", "job": done["id"]}).status_code == 201
    return sched, client, done


@pytest.mark.parametrize("case, status, field", [
    ("unknown model", 404, "name"), ("unknown version", 404, "version"),
    ("bad images", 400, "images"), ("wrong width", 400, "images"),
    ("job not completed", 409, "job"), ("bad name", 400, "name"), ("unknown job", 404, "id"),
])
def test_deployment_refuses_naming_the_field(deployed, case, status, field):
    sched, client, done = deployed
    path, body = {
        "unknown model": ("/models/nope/predict", {"images": [[0.0] * 64]}),
        "unknown version": ("/models/m/predict", {"images": [[0.0] * 64], "version": 7}),
        "bad images": ("/models/m/predict", {"images": "pixels"}),
        "wrong width": ("/models/m/predict", {"images": [[0.0] * 10]}),
        "job not completed": ("/models", {"name": "m", "job": "late"}),
        "bad name": ("/models", {"name": "a b", "job": done["id"]}),
        "unknown job": ("/models", {"name": "m", "job": "nobody"}),
    }[case]
    r = client.post(path, json=body)
    assert r.status_code == status and r.json()["field"] == field, r.text
    assert [m["version"] for m in sched.store.models()] == [1]  # nothing written


def test_a_policy_only_service_has_no_weights_to_deploy(api):
    sched, client, docs = api
    client.post("/jobs", json=docs[0])
    while sched.job_view(0)["state"] != "completed" and sched.finished_slots < \
            sched.cluster.horizon:
        sched.step()
    assert sched.job_view(0)["state"] == "completed"
    r = client.post("/models", json={"name": "m", "job": docs[0]["id"]})
    assert r.status_code == 409 and "trains nothing" in r.json()["detail"]


def test_predict_url_asks_the_deployed_model(deployed, tmp_path, capsys):
    """``oasis-opt predict MODEL IMAGES --url`` against a real uvicorn on loopback: the labels
    the API gives, the accuracy over the held-out images, and refusals on the flag at fault."""
    import threading

    import uvicorn

    from oasis_opt.cli import main
    from oasis_opt.service.wiring import listen
    from oasis_opt.training.tasks import get_task

    sched, client, done = deployed
    task = get_task(TASK["name"])
    x, y = task.raw()
    test = task.split_indices(0)[2]
    np.save(tmp_path / "images.npy", x[test])
    np.save(tmp_path / "labels.npy", y[test])
    want = client.post("/models/m/predict", json={"images": x[test].tolist()}).json()
    sock = listen("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(create_app(sched), log_config=None,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        for _ in range(600):
            if server.started:
                break
            thread.join(0.1)
        assert server.started
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        args = ["predict", "m", str(tmp_path / "images.npy"), "--url", url]
        assert main([*args, "--out", str(tmp_path / "p.json")]) == 0
        got = json.loads((tmp_path / "p.json").read_text())["predictions"]
        assert got == want["labels"]
        assert main([*args, "--labels", str(tmp_path / "labels.npy")]) == 0
        hits = int(np.sum(np.array(want["labels"]) == y[test]))
        assert capsys.readouterr().out.strip() == (
            f"accuracy {hits / len(test):.4f} ({hits} of {len(test)} images, model m version 1)")
        assert main(["predict", "nope", str(tmp_path / "images.npy"), "--url", url]) == 2
        assert "MODEL: no model 'nope'" in capsys.readouterr().err
        assert main([*args, "--version", "5"]) == 2
        assert "--version: model 'm' has no version 5" in capsys.readouterr().err
    finally:
        server.should_exit = True
        thread.join(60)
        sock.close()
    assert main(["predict", "m", str(tmp_path / "images.npy")]) == 2
    assert "MODEL: no such file: 'm' (a model the service deploys needs --url)" in \
        capsys.readouterr().err
    assert main(["predict", "m", str(tmp_path / "images.npy"), "--version", "1"]) == 2
    assert "--version: only with --url" in capsys.readouterr().err


# ---- the closed loop ------------------------------------------------------------------------------
def closed_workload(seed: int = 3):
    """``workload``'s instance with a runnable task on every job (a closed-loop service
    executes), and its pricing."""
    inst, pricing = workload(seed)
    docs = sorted(({**d, "chunks": min(d["chunks"], 16), "epochs": min(d["epochs"], 3),
                    "task": TASK} for d in instance_to_dict(inst)["jobs"]),
                  key=lambda d: d["arrival"])
    return docs, pricing


class SlowedRun:
    """A stand-in for what an executor measures, owned by the test: each job does ``share`` of
    the work its rows promise (one work unit per worker: paper-fig5 is untyped) in the slots of
    ``slow``, all of it otherwise; ``left(t, rows)`` is what ``Scheduler.finish`` (and
    ``ClosedLoop``'s ``measure``) receives: W_i minus what was done, 0 once done."""

    def __init__(self, work: dict[int, float], slow: set[int], share: float):
        self.work, self.slow, self.share = work, slow, share
        self.done: dict[int, float] = defaultdict(float)

    def left(self, t: int, rows) -> dict[int, float]:
        promised: dict[int, float] = defaultdict(float)
        for j, _, role, count in rows:
            promised[j] += count if role == 0 else 0
        out = {}
        for j, units in promised.items():
            self.done[j] += units * (self.share if t in self.slow else 1.0)
            rest = self.work[j] - self.done[j]
            out[j] = 0.0 if rest <= 1e-9 else rest
        return out


def closed_run(sched: Scheduler, run: SlowedRun, upto: int | None = None) -> None:
    for t in range(sched.finished_slots + 1, (upto or sched.cluster.horizon) + 1):
        slot = sched.advance()
        sched.finish(slot.t, {}, {}, {}, left=run.left(slot.t, slot.rows))


@pytest.mark.parametrize("policy", ["oasis", "drf"])
def test_the_closed_loop_service_decides_as_the_executors_closed_loop(policy, tmp_path):
    """The service's closed loop (decide, run, credit the measured progress, re-plan) against
    ``runtime.closed_loop.ClosedLoop``, the loop ``execute`` runs, on the same measured progress
    (every job does half its promised work in slots 2-3): the same admissions, allocations,
    completions and re-plans, every schedule valid, and a job fell behind and finished later
    than its open-loop plan. A state resumed halfway replays the slots that ran with their stored
    credit and goes on to the same end. Bugs caught: a service that credits the plan's progress
    (the open loop: earlier completions, no re-plan), a restart that replays on the model's
    progress (``ReplayMismatch`` or other decisions)."""
    from oasis_opt.runtime.closed_loop import ClosedLoop
    from oasis_opt.service.scheduler import stored_schedule

    docs, pricing = closed_workload()
    options = {"pricing": pricing} if policy == "oasis" else {}
    make = lambda: get_policy(policy, **options)  # noqa: E731
    cluster = generate("paper-fig5", seed=3)
    state = tmp_path / "closed.db"
    sched = Scheduler(cluster, make, store=Store(state), policy=policy, executes=True,
                      closed_loop=True)
    for d in docs:
        sched.submit(d)
    inst = sched.instance
    work = {j: float(inst.jobs[j].work) for j in range(inst.I)}
    run = SlowedRun(work, {2, 3}, 0.5)
    closed_run(sched, run, upto=5)
    # a restart halfway: the stored slots replayed with their stored credit
    again = Scheduler(cluster, make, store=Store(state), policy=policy, executes=True,
                      closed_loop=True)
    assert again.resumed and again.finished_slots == 5
    assert again.replans == sched.replans
    closed_run(again, run)

    ref_run = SlowedRun(work, {2, 3}, 0.5)
    ref = ClosedLoop(inst, make(), lambda t, rows, model: ref_run.left(t, rows))
    ref_sched = ref.run()
    admitted, completion, rows = outcome(again)
    assert admitted == list(ref_sched.admitted)
    assert completion == list(ref_sched.completion)
    assert rows == sorted(r for r in ref_sched.allocations.rows() if r[1] <= inst.horizon)
    assert again.replans == ref.replans
    assert sum(len(b) for b in ref.behind) and again.summary()["behind"] == len(ref.behind)
    assert again.summary()["loop"] == "closed"
    assert again.summary()["replans"] == len(ref.replans) > 0
    stored_inst, stored = stored_schedule(again.store)
    assert validate(stored_inst, stored).ok
    open_loop = simulate(inst, make())
    late = [j for j in range(inst.I) if completion[j] is not None
            and open_loop.completion[j] is not None and completion[j] > open_loop.completion[j]]
    assert late, "a job slowed in slots 2-3 completes later than its open-loop plan"


def test_a_closed_loop_slot_is_finished_with_measured_progress_and_states_keep_their_loop(
        tmp_path):
    """``finish`` of a closed-loop slot without ``left`` is refused (it would credit nothing),
    an open-loop one with ``left`` too; a closed-loop scheduler needs an executor; a state
    written open loop is not resumed closed loop (its slots have no measured progress)."""
    docs, pricing = closed_workload()
    inst = generate("paper-fig5", seed=3)
    make = lambda: get_policy("oasis", pricing=pricing)  # noqa: E731
    with pytest.raises(ValueError, match="closed_loop: .* needs executes=True"):
        Scheduler(inst, make, store=Store(), policy="oasis", closed_loop=True)
    closed = Scheduler(inst, make, store=Store(), policy="oasis", executes=True, closed_loop=True)
    opened = Scheduler(inst, make, store=Store(tmp_path / "open.db"), policy="oasis",
                       executes=True)
    for d in docs:
        closed.submit(d)
        opened.submit(d)
    t = closed.advance().t
    with pytest.raises(ValueError, match="left: slot 1 of a closed loop"):
        closed.finish(t, {}, {}, {})
    t = opened.advance().t
    with pytest.raises(ValueError, match="left: measured progress is credited only"):
        opened.finish(t, {}, {}, {}, left={})
    opened.finish(t, {}, {}, {})
    with pytest.raises(StateMismatch, match="another loop") as e:
        Scheduler(inst, make, store=Store(tmp_path / "open.db"), policy="oasis", executes=True,
                  closed_loop=True)
    assert e.value.field == "--open-loop"


def test_a_closed_loop_cancel_asked_while_the_last_slot_runs_is_void():
    """Closed loop, a job's completion is known only once its slot ran: a cancellation asked
    while that slot runs is accepted, and the job completes in it (its utility stands). Bugs
    caught: the view stuck at "cancelling" for ever (what the case study waited on), the next
    boundary cancelling a completed job (``SlotLoop.cancel`` refuses it: the service stops)."""
    docs, pricing = closed_workload()
    sched = Scheduler(generate("paper-fig5", seed=3), lambda: get_policy("oasis", pricing=pricing),
                      store=Store(), policy="oasis", executes=True, closed_loop=True)
    for d in docs:
        sched.submit(d)
    inst = sched.instance
    run = SlowedRun({j: float(inst.jobs[j].work) for j in range(inst.I)}, set(), 1.0)
    victim = None
    while victim is None and sched.finished_slots < inst.horizon:
        slot = sched.advance()
        left = run.left(slot.t, slot.rows)
        done = [j for j, rest in left.items() if rest == 0.0]
        if done:
            victim = done[0]
            view = sched.cancel(inst.jobs[victim].id)  # accepted: the slot has not ended
            assert view["state"] == "cancelling"
        sched.finish(slot.t, {}, {}, {}, left=left)
    assert victim is not None
    view = sched.job_view(victim)
    assert view["state"] == "completed" and view["completion"] == slot.t
    assert view["utility"] == pytest.approx(inst.utility_of(victim, slot.t)) and view["utility"] > 0
    nxt = sched.advance()  # the boundary the cancel named: no error, nothing for the victim
    assert all(j != victim for j, *_ in nxt.rows)
    assert sched.job_view(victim)["state"] == "completed"
