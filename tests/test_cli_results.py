"""Results a user can trust at a glance: the instance fingerprint in results, `summary`'s labels,
violations and solver status, the work limit, progress on a terminal, and exit codes 2/3 (never
1) for what is not an invalid schedule."""
from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios

import pytest

from oasis_opt import get_policy, solve, validate
from oasis_opt.model.io import (RESULT_FORMAT, InstanceMismatch, load_instance, load_result,
                                save_instance, save_result)
from oasis_opt.sim import Summary, SummaryTable, compare, summarize
from oasis_opt.sizing import DEFAULT_MAX_WORK, TooMuchWork, estimate_work
from test_cli import _instance, assert_bad_input, run


@pytest.fixture
def files(tmp_path, capsys):
    inst = tmp_path / "inst.json"
    save_instance(_instance(), inst)
    greedy = tmp_path / "greedy.json"
    assert run(["solve", inst, "--policy", "greedy", "--out", greedy], capsys)[0] == 0
    return inst, greedy


def _other_instance(tmp_path):
    other = tmp_path / "other.json"
    base = _instance()
    save_instance(base.with_jobs(base.jobs[:-1]), other)
    return other


# ---- the instance fingerprint ----------------------------------------------------------------------
def test_a_result_names_its_instance(tmp_path, files):
    inst_file, greedy = files
    doc = json.loads(greedy.read_text())
    inst = load_instance(inst_file)
    assert doc["format"] == RESULT_FORMAT and doc["instance_sha256"] == inst.fingerprint
    assert inst.fingerprint == _instance().fingerprint  # in code or from its file: the same


@pytest.mark.parametrize("command", ["validate", "summary"])
def test_a_result_of_another_instance_is_one_line(tmp_path, capsys, files, command):
    inst_file, greedy = files
    other = _other_instance(tmp_path)
    # the other instance shares every job id but one: without the fingerprint, a result of
    # the first would be read against it and fail on ids or violations
    code, out, err = run([command, other, greedy], capsys)
    assert_bad_input(code, out, err, str(greedy))
    assert f"this result belongs to another instance, not to {other}" in err
    assert out == ""


def test_library_refuses_a_result_of_another_instance(tmp_path, files):
    inst_file, greedy = files
    other = load_instance(_other_instance(tmp_path))
    with pytest.raises(InstanceMismatch) as err:
        load_result(other, greedy)
    assert err.value.field == "instance_sha256" and "another instance" in str(err.value)
    assert err.value.theirs == load_instance(inst_file).fingerprint != err.value.ours


def test_results_without_a_fingerprint_still_read(tmp_path, capsys, files):
    inst_file, greedy = files
    doc = json.loads(greedy.read_text())
    del doc["instance_sha256"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    assert run(["validate", inst_file, old], capsys)[:2] == (0, "valid\n")
    doc["instance_sha256"] = "not-a-hash"
    old.write_text(json.dumps(doc))
    assert_bad_input(*run(["validate", inst_file, old], capsys), "instance_sha256")


# ---- summary: labels, violations, solver status ------------------------------------------------------
def test_summary_lists_the_violations_of_an_invalid_result(tmp_path, capsys, files):
    inst_file, greedy = files
    doc = json.loads(greedy.read_text())
    doc["total_utility"] += 1.0
    doc["jobs"][0]["utility"] += 0.5
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    code, out, err = run(["summary", inst_file, greedy, bad], capsys)
    assert code == 1 and err == ""
    lines = out.splitlines()
    at = lines.index("bad.json: INVALID, 2 violation(s):")
    assert lines[at + 1].startswith("  [utility] ") and "job=j0" in lines[at + 1]
    assert lines[at + 2].startswith("  [total] ")
    assert "greedy.json: INVALID" not in out


def test_summary_caps_a_long_list_of_violations(tmp_path, capsys, files):
    inst_file, greedy = files
    doc = json.loads(greedy.read_text())
    for job in doc["jobs"]:
        job["utility"] += 1.0
    for slot in range(30):  # 30 allocations outside 1..T
        doc["allocations"].append({"job": "j0", "slot": 100 + slot, "server": "w0",
                                   "role": "worker", "count": 1})
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    report = validate(load_instance(inst_file), load_result(load_instance(inst_file), bad))
    n = len(report.violations)
    code, out, _ = run(["summary", inst_file, bad], capsys)
    assert code == 1
    assert f"bad.json: INVALID, {n} violation(s):" in out
    assert f"  ... and {n - 20} more (`oasis-opt validate` lists them all)" in out
    assert sum(line.startswith("  [") for line in out.splitlines()) == 20


def test_summary_shows_the_solver_status_bound_and_gap(tmp_path, capsys, files):
    inst_file, greedy = files
    offline = tmp_path / "offline.json"
    code, out, err = run(["solve", inst_file, "--policy", "offline", "--out", offline], capsys)
    assert code == 0, err
    stats = json.loads(offline.read_text())["stats"]
    assert stats["status"] == "optimal" and stats["proven_optimal"]
    # the same result as a solver stopped by its time limit, without and with an incumbent
    doc = json.loads(offline.read_text())
    doc["stats"].update(status="time_limit", objective=None, proven_optimal=False,
                        message="time limit reached: no incumbent")
    stopped = tmp_path / "stopped.json"
    stopped.write_text(json.dumps(doc))
    doc["stats"].update(objective=doc["total_utility"], bound=doc["total_utility"] * 1.25,
                        gap=0.2, message="time limit reached: best incumbent, NOT proven optimal")
    incumbent = tmp_path / "incumbent.json"
    incumbent.write_text(json.dumps(doc))
    code, out, err = run(["summary", inst_file, greedy, offline, stopped, incumbent], capsys)
    assert code == 0, err
    lines = out.splitlines()
    header = re.split(r"\s{2,}", lines[0].strip())
    assert header[:11] == ["result", "policy", "total utility", "admitted", "rejected",
                           "completed", "unfinished", "valid", "solver", "bound", "gap"]
    rows = {line.split()[0]: re.split(r"\s{2,}", line.strip()) for line in lines[2:6]}
    solver, bound, gap = (header.index(h) for h in ("solver", "bound", "gap"))
    assert rows["greedy.json"][solver:gap + 1] == ["-", "-", "-"]
    assert rows["offline.json"][solver] == "optimal"
    assert rows["offline.json"][bound] == f"{stats['bound']:.2f}"
    assert rows["stopped.json"][solver] == "time limit, no incumbent"
    assert rows["incumbent.json"][solver:gap + 1] == [
        "time limit, gap 20.00%", f"{doc['total_utility'] * 1.25:.2f}", "20.00%"]
    assert "stopped.json: time limit reached: no incumbent" in lines
    assert "incumbent.json: time limit reached: best incumbent, NOT proven optimal" in lines
    assert not any(line.startswith("offline.json: ") for line in lines)


def test_summarize_is_a_table_and_still_a_dict():
    inst = _instance()
    sched = solve(inst, "greedy", placement="round-robin")
    m = summarize(inst, sched)
    assert isinstance(m, Summary) and isinstance(m, dict)
    assert m["label"] == "greedy(placement=round-robin)" and m["solver"] is None
    assert m["options"] == sched.stats["options"] == {"placement": "round-robin"}
    lines = str(m).splitlines()
    assert lines[0].split()[:2] == ["policy", "total"]
    assert lines[2].split()[:2] == ["greedy(placement=round-robin)", f"{m['total_utility']:.2f}"]
    table = compare(inst, [sched, solve(inst, "greedy")], ["a", "b"])
    assert isinstance(table, SummaryTable) and table.ok
    assert [line.split()[:2] for line in str(table).splitlines()[2:4]] == [
        ["a", "greedy(placement=round-robin)"], ["b", "greedy"]]


def test_options_are_recorded_as_json_and_tell_pricings_apart(tmp_path):
    from oasis_opt.online import oracle_pricing

    inst = _instance()
    oracle = oracle_pricing(inst)
    by_object = solve(inst, "oasis", pricing=oracle)
    by_dict = solve(inst, "oasis", pricing={**oracle.to_dict(), "L_ps": 1e-3})
    save_result(inst, by_object, tmp_path / "r.json")  # the options are JSON data
    assert load_result(inst, tmp_path / "r.json").stats["options"]["pricing"] == oracle.to_dict()
    labels = [summarize(inst, s)["label"] for s in (by_object, by_dict)]
    assert all(re.fullmatch(r"oasis\(pricing=<pricing@1#[0-9a-f]{6}>\)", x) for x in labels)
    assert labels[0] != labels[1]


# ---- the work limit ------------------------------------------------------------------------------
def test_generate_refuses_an_instance_too_big_to_solve(tmp_path, capsys):
    out = tmp_path / "big.json"
    argv = ["generate", "--preset", "paper-sim", "--horizon", "10000000", "--seed", "1",
            "--out", out]
    code, stdout, err = run(argv, capsys)
    assert_bad_input(code, stdout, err, "--max-work")
    assert "10000000 x 100 x 100 = 1e+11 slot-server-jobs exceeds the limit 1e+10" in err
    assert not out.exists()
    # no work limit, but a horizon whose tables need terabytes of memory is refused all the same
    code, stdout, err = run(argv[:4] + ["1000000000"] + argv[5:] + ["--max-work", "inf"], capsys)
    assert_bad_input(code, stdout, err, "--horizon")
    assert "GiB" in err and not out.exists()


def test_solve_and_estimate_pricing_refuse_beyond_max_work(tmp_path, capsys, files):
    inst_file, _ = files
    work = estimate_work(load_instance(inst_file)).work
    assert work == 6 * 3 * 6
    code, out, err = run(["solve", inst_file, "--policy", "greedy", "--max-work", work - 1,
                          "--out", tmp_path / "r.json"], capsys)
    assert_bad_input(code, out, err, "--max-work")
    assert not (tmp_path / "r.json").exists()
    assert run(["solve", inst_file, "--policy", "greedy", "--max-work", work,
                "--out", tmp_path / "r.json"], capsys)[0] == 0
    # the calibration runs OASiS once per floor of the grid
    code, out, err = run(["estimate-pricing", inst_file, "--grid", "1e-3,1e-2", "--max-work",
                          2 * work - 1, "--out", tmp_path / "p.json"], capsys)
    assert_bad_input(code, out, err, "--max-work")
    assert "2 run(s) on each of 1 instance(s)" in err
    for bad in ("0", "-5", "nan", "lots"):
        assert_bad_input(*run(["solve", inst_file, "--policy", "greedy", "--max-work", bad,
                               "--out", tmp_path / "r.json"], capsys), "--max-work")


def test_library_solve_refuses_beyond_max_work():
    inst = _instance()
    with pytest.raises(TooMuchWork) as err:
        solve(inst, "greedy", max_work=10)
    assert isinstance(err.value, ValueError) and err.value.field == "max_work"
    assert solve(inst, "greedy", max_work=float("inf")).stats["options"] == {}
    assert estimate_work(inst).work < DEFAULT_MAX_WORK
    # OASiS keeps six (T+1) x (H+K) x R tables besides the validator's
    assert estimate_work(inst, "oasis").memory_bytes > estimate_work(inst, "greedy").memory_bytes


# ---- progress on a terminal -------------------------------------------------------------------
def _stderr_through_a_terminal(argv) -> tuple[int, str]:
    leader, follower = pty.openpty()
    # a terminal of 24 x 100 (a fresh pty is 0 x 0, on which tqdm draws nothing)
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "oasis_opt", *map(str, argv)],
                            stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    return proc.wait(timeout=120), b"".join(chunks).decode(errors="replace")


@pytest.mark.parametrize("flag, shown", [(None, True), ("--no-progress", False)])
def test_progress_is_shown_by_default_on_a_terminal(tmp_path, files, flag, shown):
    inst_file, _ = files
    argv = ["solve", inst_file, "--policy", "greedy", "--out", tmp_path / "r.json"]
    code, err = _stderr_through_a_terminal(argv + ([flag] if flag else []))
    assert code == 0, err
    assert ("slot" in err) == shown, err  # tqdm's bar: "greedy: ...| 6/6 [...slot/s]"


def test_no_progress_bar_when_stderr_is_not_a_terminal(tmp_path, capsys, files):
    inst_file, _ = files
    code, out, err = run(["solve", inst_file, "--policy", "greedy", "--out",
                          tmp_path / "r.json"], capsys)
    assert code == 0 and err == ""


# ---- exit codes: 3 for failures inside, never 1 ----------------------------------------------------
@pytest.mark.parametrize("error, words", [
    (RuntimeError("simulated bug"), "internal error RuntimeError: simulated bug"),
    (MemoryError(), "out of memory"),
])
def test_an_unexpected_exception_is_exit_3_in_one_line(tmp_path, capsys, monkeypatch, files,
                                                       error, words):
    from oasis_opt.sim.greedy import GreedyPolicy

    def broken(self, instance, **run_options):
        raise error

    monkeypatch.setattr(GreedyPolicy, "solve", broken)
    inst_file, _ = files
    code, out, err = run(["solve", inst_file, "--policy", "greedy", "--out",
                          tmp_path / "r.json"], capsys)
    assert code == 3 and out == "" and "Traceback" not in err
    line, = err.splitlines()
    assert line.startswith("oasis-opt: failure: ") and words in line


def test_a_bad_pricing_file_is_named(tmp_path, capsys, files):
    inst_file, _ = files
    inst = load_instance(inst_file)
    from oasis_opt.online import oracle_pricing

    doc = oracle_pricing(inst).to_dict()
    doc["L_ps"] = max(doc["U_ps"].values()) * 2  # the floor above the ceiling
    path = tmp_path / "pricing.json"
    path.write_text(json.dumps(doc))
    code, out, err = run(["solve", inst_file, "--policy", "oasis", "--pricing", path,
                          "--out", tmp_path / "r.json"], capsys)
    assert_bad_input(code, out, err, "L_ps")
    assert "exceeds U_ps." in err and str(path) in err
    with pytest.raises(ValueError, match="^L_ps: "):
        get_policy("oasis", pricing=doc)

