"""The ``oasis-opt`` command: bad-input corpus (exit 2, one line naming the field), end to end
runs with the greedy policy, and a light import.

Most cases call ``main(argv)`` in-process (fast); a few go through ``python -m oasis_opt`` to
check the real entry point and that nothing prints a traceback.
"""
from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from oasis_opt.cli import main
from oasis_opt.cli.args import parse_option
from oasis_opt.cli.solve import WRITE_RESERVE
from oasis_opt.model import DEFAULT_RESOURCES, Instance, Job, Server, Utility
from oasis_opt.model.io import instance_to_dict, load_instance, load_result, save_instance


def _instance() -> Instance:
    ws = tuple(Server(f"w{h}", {"gpu": 4.0, "cpu": 8.0, "mem": 32.0, "storage": 100.0,
                                "bw": 20.0}, rack="r0") for h in range(2))
    ps = (Server("p0", {"cpu": 8.0, "mem": 32.0, "storage": 100.0, "bw": 40.0}, rack="r1"),)
    classes = ("time-insensitive", "time-sensitive", "time-critical")
    jobs = tuple(Job(f"j{i}", 1 + i % 4, 2, 2, 1.5, {"gpu": 1.0, "cpu": 2.0, "mem": 4.0, "bw": 5.0},
                     {"cpu": 1.0, "mem": 2.0, "bw": 10.0},
                     Utility.sigmoid(10.0 + i, (0.0, 0.5, 5.0)[i % 3], 3.0), classes[i % 3])
                 for i in range(6))
    return Instance(6, DEFAULT_RESOURCES, ws, ps, jobs)


def run(argv, capsys):
    """``main(argv)`` -> (exit code, stdout, stderr)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_bad_input(code, out, err, field):
    assert code == 2, (out, err)
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"oasis-opt: error: {field}: "), lines[0]
    assert len(lines[0]) > len(f"oasis-opt: error: {field}: ")  # there is a message


@pytest.fixture
def instance_file(tmp_path):
    path = tmp_path / "instance.json"
    save_instance(_instance(), path)
    return path


@pytest.fixture
def solved(tmp_path, instance_file, capsys):
    result = tmp_path / "greedy.json"
    code, out, err = run(["solve", instance_file, "--policy", "greedy", "--out", result], capsys)
    assert code == 0, err
    return instance_file, result, out


# ---- the bad-input corpus: instance files -------------------------------------------------------
def _set(path, value):
    def edit(doc):
        *head, last = path
        for key in head:
            doc = doc[key]
        doc[last] = value
    return edit


def _delete(path):
    def edit(doc):
        *head, last = path
        for key in head:
            doc = doc[key]
        del doc[last]
    return edit


def _add_topology(server_id, bandwidth=10.0):
    def edit(doc):
        doc["topology"] = {
            "nodes": [{"id": "core", "kind": "core"}, {"id": "r0", "kind": "rack"}]
            + [{"id": s, "kind": "server"} for s in ("w0", "w1", "p0", server_id) if s],
            "links": [{"a": "r0", "b": "core", "bandwidth": 60.0}]
            + [{"a": s, "b": "r0", "bandwidth": bandwidth} for s in ("w0", "w1", "p0")]}
    return edit


NAN = float("nan")
INSTANCE_CORPUS = {
    # name: (edit of the valid document, or raw text; field the error must name)
    "malformed-json": ('{"format": "oasis-opt/instance@1", "horizon": 3,', "<file>"),
    "empty-file": ("", "<file>"),
    "not-an-object": ("[1, 2, 3]", "<file>"),
    "wrong-format": (_set(["format"], "oasis-opt/instance@9"), "format"),
    "missing-horizon": (_delete(["horizon"]), "horizon"),
    "missing-job-field": (_delete(["jobs", 0, "epochs"]), "jobs[0].epochs"),
    "missing-utility-field": (_delete(["jobs", 2, "utility", "target"]), "jobs[2].utility.target"),
    "missing-server-capacity": (_delete(["ps_servers", 0, "capacity"]), "ps_servers[0].capacity"),
    "unknown-top-field": (_set(["hrizon"], 5), "hrizon"),
    "unknown-job-field": (_set(["jobs", 1, "colour"], "red"), "jobs[1].colour"),
    "unknown-utility-kind": (_set(["jobs", 0, "utility", "kind"], "step"), "jobs[0].utility.kind"),
    "unknown-job-class": (_set(["jobs", 0, "class"], "urgent"), "jobs[0].class"),
    "negative-horizon": (_set(["horizon"], -3), "horizon"),
    "negative-epochs": (_set(["jobs", 0, "epochs"], -2), "jobs[0].epochs"),
    "zero-chunks": (_set(["jobs", 0, "chunks"], 0), "jobs[0].chunks"),
    "negative-chunk-time": (_set(["jobs", 3, "chunk_time"], -1.5), "jobs[3].chunk_time"),
    "negative-capacity": (_set(["worker_servers", 1, "capacity", "gpu"], -4.0),
                          "worker_servers[1].capacity.gpu"),
    "negative-demand": (_set(["jobs", 0, "worker", "mem"], -1.0), "jobs[0].worker.mem"),
    "negative-priority": (_set(["jobs", 0, "utility", "priority"], -10.0),
                          "jobs[0].utility.priority"),
    "nan-chunk-time": (_set(["jobs", 0, "chunk_time"], NAN), "jobs[0].chunk_time"),
    "nan-capacity": (_set(["worker_servers", 0, "capacity", "cpu"], NAN),
                     "worker_servers[0].capacity.cpu"),
    "infinite-decay": (_set(["jobs", 1, "utility", "decay"], float("inf")),
                       "jobs[1].utility.decay"),
    "nan-horizon": (_set(["horizon"], NAN), "horizon"),
    "fractional-epochs": (_set(["jobs", 0, "epochs"], 1.5), "jobs[0].epochs"),
    "string-number": (_set(["jobs", 0, "chunks"], "two"), "jobs[0].chunks"),
    "arrival-zero": (_set(["jobs", 0, "arrival"], 0), "jobs[0].arrival"),
    "arrival-after-horizon": (_set(["jobs", 5, "arrival"], 7), "jobs[5].arrival"),
    "unknown-resource-in-demand": (_set(["jobs", 0, "worker", "tpu"], 1.0), "jobs[0].worker.tpu"),
    "unknown-resource-in-capacity": (_set(["ps_servers", 0, "capacity", "fpga"], 1.0),
                                     "ps_servers[0].capacity.fpga"),
    "unknown-server-in-topology": (_add_topology("w9"), r"topology.nodes\[\d+\].id"),
    "zero-worker-bandwidth": (_set(["jobs", 0, "worker", "bw"], 0.0), "jobs[0].worker.bw"),
    "zero-ps-bandwidth": (_set(["jobs", 4, "ps", "bw"], 0), "jobs[4].ps.bw"),
    "missing-ps-bandwidth": (_delete(["jobs", 0, "ps", "bw"]), "jobs[0].ps.bw"),
    "zero-link-bandwidth": (_add_topology(None, bandwidth=0.0), r"topology.links\[\d+\].bandwidth"),
    "duplicate-server-id": (_set(["worker_servers", 1, "id"], "w0"), "worker_servers[1].id"),
    "duplicate-job-id": (_set(["jobs", 1, "id"], "j0"), "jobs[1].id"),
    "no-ps-servers": (_set(["ps_servers"], []), "ps_servers"),
    "every-worker-server-without-bandwidth": (
        lambda d: [s["capacity"].__setitem__("bw", 0.0) for s in d["worker_servers"]],
        "worker_servers"),
    "every-ps-server-without-bandwidth": (_delete(["ps_servers", 0, "capacity", "bw"]),
                                          "ps_servers"),
}


def _write_case(tmp_path, case) -> Path:
    edit, _ = INSTANCE_CORPUS[case]
    path = tmp_path / f"{case}.json"
    if isinstance(edit, str):
        path.write_text(edit)
    else:
        doc = copy.deepcopy(instance_to_dict(_instance()))
        edit(doc)
        path.write_text(json.dumps(doc))  # NaN/Infinity written the way Python writes them
    return path


def _field(case, path) -> str:
    field = INSTANCE_CORPUS[case][1]
    return str(path) if field == "<file>" else field


@pytest.mark.parametrize("case", sorted(INSTANCE_CORPUS))
def test_bad_instance_exits_2_naming_the_field(tmp_path, capsys, case):
    path = _write_case(tmp_path, case)
    field = _field(case, path)
    for argv in (["solve", path, "--policy", "greedy", "--out", tmp_path / "r.json"],
                 ["validate", path, tmp_path / "never-read.json"]):
        code, out, err = run(argv, capsys)
        assert code == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
        pattern = re.escape(field) if field == str(path) or "\\" not in field else field
        assert re.match(rf"oasis-opt: error: {pattern}: \S", err), err
        if field != str(path):
            assert str(path) in err  # the file is named too
    assert not (tmp_path / "r.json").exists()


def test_the_corpus_base_document_is_valid(tmp_path, capsys, instance_file):
    code, out, err = run(["solve", instance_file, "--policy", "greedy", "--out",
                          tmp_path / "r.json"], capsys)
    assert code == 0 and err == ""


def test_missing_instance_file(tmp_path, capsys):
    missing = tmp_path / "nowhere.json"
    assert_bad_input(*run(["solve", missing, "--policy", "greedy", "--out", tmp_path / "r.json"],
                          capsys), str(missing))


# ---- the bad-input corpus: result files ---------------------------------------------------------
RESULT_CORPUS = {
    "malformed-json": ("{\"format\": ", "<file>"),
    "wrong-format": (_set(["format"], "oasis-opt/instance@1"), "format"),
    "missing-field": (_delete(["allocations", 0, "count"]), "allocations[0].count"),
    "unknown-field": (_set(["jobs", 0, "extra"], 1), "jobs[0].extra"),
    "unknown-job-id": (_set(["allocations", 0, "job"], "nobody"), "allocations[0].job"),
    "unknown-server-id": (_set(["allocations", 0, "server"], "w7"), "allocations[0].server"),
    "unknown-role": (_set(["allocations", 0, "role"], "gpu"), "allocations[0].role"),
    "nan-utility": (_set(["jobs", 0, "utility"], NAN), "jobs[0].utility"),
    "nan-total": (_set(["total_utility"], NAN), "total_utility"),
    "nan-in-stats": (_set(["stats", "gap"], NAN), "stats.gap"),
    "fractional-slot": (_set(["allocations", 0, "slot"], 2.5), "allocations[0].slot"),
    "missing-job-entry": (lambda d: d["jobs"].pop(), "jobs"),
    "admitted-not-bool": (_set(["jobs", 0, "admitted"], "yes"), "jobs[0].admitted"),
}


@pytest.mark.parametrize("case", sorted(RESULT_CORPUS))
def test_bad_result_exits_2_naming_the_field(tmp_path, capsys, solved, case):
    instance_file, result, _ = solved
    edit, field = RESULT_CORPUS[case]
    bad = tmp_path / f"bad-{case}.json"
    if isinstance(edit, str):
        bad.write_text(edit)
    else:
        doc = json.loads(result.read_text())
        edit(doc)
        bad.write_text(json.dumps(doc))
    field = str(bad) if field == "<file>" else field
    for argv in (["validate", instance_file, bad], ["summary", instance_file, result, bad]):
        code, out, err = run(argv, capsys)
        assert_bad_input(code, out, err, field)


# ---- the bad-input corpus: arguments ------------------------------------------------------------
def _solve(*extra, policy="greedy"):
    return lambda inst, tmp: ["solve", inst, "--policy", policy, "--out", tmp / "r.json", *extra]


def _generate(*extra, preset="paper-sim"):
    return lambda inst, tmp: ["generate", "--preset", preset, "--seed", "1",
                              "--out", tmp / "g.json", *extra]


ARGUMENT_CORPUS = {
    "unknown-command": (lambda inst, tmp: ["frobnicate"], "COMMAND"),
    "no-command": (lambda inst, tmp: [], "COMMAND"),
    "unknown-policy": (lambda inst, tmp: ["solve", inst, "--policy", "nope", "--out",
                                          tmp / "r.json"], "--policy"),
    "missing-policy": (lambda inst, tmp: ["solve", inst, "--out", tmp / "r.json"], "--policy"),
    "missing-out": (lambda inst, tmp: ["solve", inst, "--policy", "greedy"], "--out"),
    "unrecognized-flag": (_solve("--colour", "red"), "--colour red"),
    "negative-time-limit": (_solve("--time-limit", "-1"), "--time-limit"),
    "nan-time-limit": (_solve("--time-limit", "nan"), "--time-limit"),
    "unknown-backend": (_solve("--backend", "cuda"), "--backend"),
    "option-not-accepted": (_solve("--option", "backend=jax"), "--option backend"),
    "backend-not-accepted": (_solve("--backend", "jax"), "--backend"),
    "option-without-value": (_solve("--option", "placement"), "--option"),
    "option-bad-key": (_solve("--option", "1x=2"), "--option"),
    "option-nan": (_solve("--option", "placement=NaN"), "--option placement"),
    "option-given-twice": (_solve("--option", "placement=first-fit", "--option",
                                  "placement=round-robin"), "--option placement"),
    "option-rejected-by-policy": (_solve("--option", "placement=nowhere"), "--policy greedy"),
    "offline-option-not-accepted": (_solve("--option", "node_limit=5", policy="offline-cpsat"),
                                    "--option node_limit"),
    "offline-limit-of-the-other-solver": (_solve("--option", "deterministic_time=5",
                                                 policy="offline"), "--option deterministic_time"),
    "colgen-option-not-accepted": (_solve("--option", "time_limt=5", policy="offline-colgen"),
                                   "--option time_limt"),
    "colgen-option-refused": (_solve("--option", "cg_share=2", policy="offline-colgen"),
                              "--option cg_share"),
    "colgen-limit-refused": (_solve("--option", "node_limit=-1", policy="offline-colgen"),
                             "--option node_limit"),
    "colgen-bracket-only-option": (_solve("--option", "lns_share=0.3", policy="offline-colgen"),
                                   "--option lns_share"),
    "offline-kernel-backend": (_solve("--backend", "jax", policy="offline"), "--backend"),
    "missing-pricing-file": (_solve("--pricing", "/nonexistent/pricing.json"), "--pricing"),
    "unwritable-out": (lambda inst, tmp: ["solve", inst, "--policy", "greedy", "--out", tmp],
                       "--out"),
    "unknown-preset": (_generate(preset="paper-sim-2"), "--preset"),
    "zero-jobs": (_generate("--jobs", "0"), "--jobs"),
    "negative-jobs": (_generate("--jobs", "-5"), "--jobs"),
    "text-horizon": (_generate("--horizon", "ten"), "--horizon"),
    "nan-servers": (_generate("--servers", "nan"), "--servers"),
    "negative-seed": (lambda inst, tmp: ["generate", "--preset", "paper-sim", "--seed", "-1",
                                         "--out", tmp / "g.json"], "--seed"),
    "missing-seed": (lambda inst, tmp: ["generate", "--preset", "paper-sim", "--out",
                                        tmp / "g.json"], "--seed"),
    "unknown-calibration": (_generate("--calibration", "loose"), "--calibration"),
    "size-of-a-fixed-preset": (_generate("--jobs", "3", preset="testbed"), "--jobs"),
    "too-few-servers-for-fig5": (_generate("--servers", "1", preset="paper-fig5"), "--servers"),
    "summary-without-results": (lambda inst, tmp: ["summary", inst], "RESULT"),
}


@pytest.mark.parametrize("case", sorted(ARGUMENT_CORPUS))
def test_bad_arguments_exit_2_naming_the_field(tmp_path, capsys, instance_file, case):
    argv, field = ARGUMENT_CORPUS[case]
    assert_bad_input(*run(argv(instance_file, tmp_path), capsys), field)
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "g.json").exists()


@pytest.mark.parametrize("argv, field", [
    (["solve", "{inst}", "--policy", "nope", "--out", "{tmp}/r.json"], "--policy"),
    (["validate", "{tmp}/broken.json", "{tmp}/r.json"], "{tmp}/broken.json"),
])
def test_real_entry_point_prints_one_line_no_traceback(tmp_path, instance_file, argv, field):
    (tmp_path / "broken.json").write_text("{not json")
    fill = {"inst": instance_file, "tmp": tmp_path}
    proc = subprocess.run([sys.executable, "-m", "oasis_opt", *(a.format(**fill) for a in argv)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert proc.stderr.splitlines() == [proc.stderr.strip()]
    assert proc.stderr.startswith(f"oasis-opt: error: {field.format(**fill)}: ")


# ---- end to end ---------------------------------------------------------------------------------
def test_solve_writes_a_valid_result_and_says_so(solved):
    instance_file, result, out = solved
    inst = load_instance(instance_file)
    sched = load_result(inst, result)
    line, = out.splitlines()
    assert line.startswith("greedy: total utility ")
    assert f"{sched.total_utility:.4f}" in line
    assert f"admitted {sum(sched.admitted)}/{inst.I}" in line
    assert f"completed {int(sched.completed.sum())}" in line and "valid" in line


def test_solve_passes_options_and_run_options(tmp_path, capsys, instance_file):
    result = tmp_path / "rr.json"
    code, out, err = run(["solve", instance_file, "--policy", "greedy", "--option",
                          "placement=round-robin", "--progress", "--out", result], capsys)
    assert code == 0, err
    inst = load_instance(instance_file)
    from oasis_opt import get_policy, validate

    expected = get_policy("greedy", placement="round-robin").solve(inst)
    got = load_result(inst, result)
    assert validate(inst, got).ok
    for col in ("job", "slot", "server", "role", "count"):
        assert (getattr(got.allocations, col) == getattr(expected.allocations, col)).all()


@pytest.mark.parametrize("policy", ["oasis", "greedy", "drf"])
def test_time_limit_on_an_online_policy_is_refused(tmp_path, capsys, instance_file, policy):
    """Online policies decide each job as it arrives: ``--time-limit`` is bad input for them
    (one line naming the flag, exit 2, nothing written), never silently ignored."""
    result = tmp_path / "r.json"
    code, out, err = run(["solve", instance_file, "--policy", policy, "--time-limit", "5",
                          "--out", result], capsys)
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert err.startswith("oasis-opt: error: --time-limit: ")
    assert f"policy {policy!r}" in err and "no time limit" in err
    assert not result.exists()


# ---- offline policies: the solver's outcome in words; nothing from the solver on stdout ---------
@pytest.fixture
def fig5_file(tmp_path):
    from oasis_opt.workloads import paper_fig5

    path = tmp_path / "fig5.json"
    save_instance(paper_fig5(0, servers=3, priority=(50.0, 100.0)), path)
    return path


@pytest.mark.parametrize("policy, args, says, in_summary", [
    ("offline", ["--option", "node_limit=0"], "; solver: node limit, no incumbent, no bound; "
                                              "schedule valid, ", "node limit, no incumbent"),
    ("offline", ["--time-limit", "1e-9"], "; solver: time limit, no incumbent, no bound; "
                                          "schedule valid, ", "time limit, no incumbent"),
    ("offline-cpsat", ["--option", "deterministic_time=1e-9"],
     "; solver: deterministic time limit, no incumbent, no bound; schedule valid, ",
     "deterministic time limit, no incumbent"),
    ("offline", ["--option", "solution_limit=1"], "; solver: solution limit, incumbent 210.143, "
                                                  "bound 334.794, gap 59.317%; schedule valid, ",
     "solution limit, gap 59.32%"),
    ("offline", [], "; solver: proven optimal, bound 240.57; schedule valid, ", "optimal"),
])
def test_offline_solve_line_gives_the_solvers_outcome_and_only_it_reaches_stdout(
        tmp_path, capsys, fig5_file, policy, args, says, in_summary):
    result = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "oasis_opt", "solve", str(fig5_file), "--policy",
                           policy, *args, "--out", str(result)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    line, = proc.stdout.splitlines()  # no HiGHS banner, no solver log
    assert line.startswith(f"{policy}: total utility ") and says in line, line
    assert "HiGHS" not in proc.stderr  # solver logs only when asked for
    stats = json.loads(result.read_text())["stats"]
    if "no incumbent" in says:
        assert stats["incumbent"] is False and stats["bound"] is None
        assert "best incumbent" not in stats["message"]
    # `summary` of the same result: the solver's status, bound and gap beside "valid"
    code, out, err = run(["summary", fig5_file, result], capsys)
    assert code == 0, err
    header, _, row = out.splitlines()[:3]
    cells = dict(zip(re.split(r"\s{2,}", header.strip()), re.split(r"\s{2,}", row.strip())))
    assert cells["solver"] == in_summary and cells["valid"] == "yes"
    assert cells["bound"] == ("-" if stats["bound"] is None else f"{stats['bound']:.2f}")
    assert cells["gap"] == ("-" if stats["gap"] is None else f"{stats['gap']:.2%}")


def test_the_time_limit_counts_from_the_commands_start(tmp_path, capsys, fig5_file):
    # reading the instance and building the policy come out of --time-limit, and a share is
    # held back for writing the result: the solver gets what is left (recorded in the result)
    result = tmp_path / "r.json"
    code, out, err = run(["solve", fig5_file, "--policy", "offline", "--time-limit", "600",
                          "--out", result], capsys)
    assert code == 0, err
    stats = json.loads(result.read_text())["stats"]
    assert stats["status"] == "optimal"
    assert 0 < stats["time_limit"] < (1 - WRITE_RESERVE) * 600


def test_solver_logs_go_to_stderr_at_log_level_debug(tmp_path, fig5_file):
    proc = subprocess.run([sys.executable, "-m", "oasis_opt", "--log-level", "debug", "solve",
                           str(fig5_file), "--policy", "offline", "--option", "node_limit=3",
                           "--out", str(tmp_path / "r.json")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 1 and "HiGHS" not in proc.stdout
    assert "oasis_opt.offline.solver: HiGHS: Running HiGHS" in proc.stderr  # the banner
    assert "oasis_opt.offline.solver: HiGHS: Solving report" in proc.stderr


def test_a_milp_above_the_memory_budget_exits_2_pointing_to_colgen(tmp_path, capsys, fig5_file):
    code, out, err = run(["solve", fig5_file, "--policy", "offline", "--option",
                          "memory_budget_gb=0.001", "--out", tmp_path / "r.json"], capsys)
    assert_bad_input(code, out, err, "--option memory_budget_gb")
    assert "offline-colgen" in err and "227 columns" in err
    assert not (tmp_path / "r.json").exists()


def test_validate_valid_and_tampered(tmp_path, capsys, solved):
    instance_file, result, _ = solved
    code, out, err = run(["validate", instance_file, result], capsys)
    assert (code, out, err) == (0, "valid\n", "")

    doc = json.loads(result.read_text())
    doc["total_utility"] += 1.0
    doc["jobs"][0]["utility"] += 0.5
    doc["allocations"].append({"job": doc["jobs"][0]["id"], "slot": 99, "server": "w0",
                               "role": "worker", "count": 1})
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(doc))
    code, out, err = run(["validate", instance_file, tampered], capsys)
    assert code == 1 and err == ""
    assert out.splitlines()[0] == "3 violation(s):"
    assert "[total]" in out and "[utility]" in out and "job=j0" in out
    assert "[horizon]" in out and "slot=99" in out and "server=w0" in out
    code, out, err = run(["summary", instance_file, result, tampered], capsys)
    assert code == 1 and err == ""
    assert [line.split()[7] for line in out.splitlines()[2:4]] == ["yes", "NO"]


def test_policies_lists_the_registry(capsys):
    from oasis_opt.policies import available_policies

    code, out, err = run(["policies"], capsys)
    assert code == 0
    listed = {line.split()[0]: line.split(None, 1)[1] for line in out.splitlines()}
    assert listed == available_policies()


def test_summary_table(tmp_path, capsys, solved):
    instance_file, result, _ = solved
    other = tmp_path / "rr.json"
    assert run(["solve", instance_file, "--policy", "greedy", "--option", "placement=round-robin",
                "--out", other], capsys)[0] == 0
    code, out, err = run(["summary", instance_file, result, other], capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert re.split(r"\s{2,}", lines[0].strip()) == [
        "result", "policy", "total utility", "admitted", "rejected", "completed", "unfinished",
        "valid", "c-t insensitive", "c-t sensitive", "c-t critical"]
    from oasis_opt.sim import summarize

    inst = load_instance(instance_file)
    # rows are labelled by policy and options: two greedy results are told apart
    for line, path, label in zip(lines[2:4], (result, other),
                                 ("greedy", "greedy(placement=round-robin)")):
        m = summarize(inst, load_result(inst, path))
        cells = line.split()
        assert cells[0] == path.name and cells[1] == label == m["label"]
        assert cells[2] == f"{m['total_utility']:.2f}"
        assert cells[3:7] == [str(m[k]) for k in ("admitted", "rejected", "completed",
                                                   "unfinished")]
        assert cells[7] == "yes"
        med = m["completion_minus_target_median"]
        assert cells[8:] == [f"{med[c]:.2f}" if c in med else "-"
                             for c in ("time-insensitive", "time-sensitive", "time-critical")]


def test_parse_option_values():
    assert parse_option("placement=round-robin") == ("placement", "round-robin")
    assert parse_option("max-iter=3") == ("max_iter", 3)
    assert parse_option("eta=0.5") == ("eta", 0.5)
    assert parse_option("flags=[1, true, null]") == ("flags", [1, True, None])
    assert parse_option("name=") == ("name", "")
    assert parse_option("expr=a=b") == ("expr", "a=b")


# ---- generate (needs oasis_opt.workloads) -------------------------------------------------------
def test_generate_is_seeded_and_byte_identical(tmp_path, capsys):
    argv = ["generate", "--preset", "paper-sim", "--jobs", "12", "--horizon", "20", "--seed", "5"]
    assert run(argv + ["--out", tmp_path / "a.json"], capsys)[0] == 0
    code, out, err = run(argv + ["--out", tmp_path / "b.json"], capsys)
    assert code == 0, err
    assert "12 jobs" in out and "T=20" in out
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    inst = load_instance(tmp_path / "a.json")
    assert (inst.I, inst.horizon) == (12, 20)
    from oasis_opt.workloads import generate

    assert inst == generate("paper-sim", seed=5, jobs=12, horizon=20)
    code, _, _ = run(argv[:-1] + ["6", "--out", tmp_path / "c.json"], capsys)
    assert code == 0
    assert (tmp_path / "c.json").read_bytes() != (tmp_path / "a.json").read_bytes()


def test_generate_solve_validate_summary_end_to_end(tmp_path, capsys):
    inst, res = tmp_path / "i.json", tmp_path / "r.json"
    assert run(["generate", "--preset", "paper-sim", "--jobs", "15", "--horizon", "30",
                "--calibration", "calibrated", "--seed", "2", "--out", inst], capsys)[0] == 0
    code, out, err = run(["solve", inst, "--policy", "greedy", "--out", res], capsys)
    assert code == 0 and "valid" in out, err
    assert run(["validate", inst, res], capsys)[:2] == (0, "valid\n")
    code, out, _ = run(["summary", inst, res], capsys)
    assert code == 0 and "greedy" in out


def test_presets_lists_the_workload_presets(capsys):
    from oasis_opt.workloads import PRESETS

    code, out, err = run(["presets"], capsys)
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()] == list(PRESETS)
    assert {"paper-sim", "paper-fig5", "testbed"} <= set(PRESETS)


# ---- light import --------------------------------------------------------------------------------
def test_cli_import_and_help_load_nothing_heavy():
    code = (
        "import sys, contextlib, io\n"
        "import oasis_opt.cli as cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert cli.main(['--help']) == 0\n"
        "    assert cli.main(['solve', '--help']) == 0\n"
        "    assert cli.main(['policies']) == 0\n"
        "heavy = ('jax', 'ray', 'ortools', 'pyomo', 'scipy', 'matplotlib', 'highspy', 'pandas')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_generate_from_the_philly_trace_solves_and_validates(tmp_path, capsys):
    out = tmp_path / "philly.json"
    code, stdout, _ = run(["generate", "--trace", "philly", "--start", "2017-11-03", "--days",
                           "0.25", "--seed", "3", "--out", out], capsys)
    assert code == 0 and "Philly trace" in stdout
    inst = load_instance(out)
    assert inst.I > 0 and all(1 <= j.arrival <= inst.horizon for j in inst.jobs)
    result = tmp_path / "r.json"
    assert run(["solve", out, "--policy", "greedy", "--out", result], capsys)[0] == 0
    assert run(["validate", out, result], capsys)[0] == 0


@pytest.mark.parametrize("argv, field", [
    (["--trace", "philly", "--start", "2017-13-40"], "--trace philly"),
    (["--trace", "philly", "--days", "0"], "--days"),
    (["--trace", "philly", "--preset", "paper-sim"], "--trace"),
    ([], "--preset"),
])
def test_generate_trace_bad_arguments(tmp_path, capsys, argv, field):
    code, out, err = run(["generate", *argv, "--seed", "1", "--out", tmp_path / "x.json"], capsys)
    assert_bad_input(code, out, err, field)


def test_a_reader_that_goes_away_stops_the_command_quietly(tmp_path):
    """`oasis-opt ... | head`: the closed pipe ends the command with 141 and no error line."""
    import subprocess
    import sys as _sys

    proc = subprocess.Popen([_sys.executable, "-m", "oasis_opt", "presets"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # no reader: the first write (or the final flush) meets a broken pipe
    err = proc.stderr.read().decode()
    assert proc.wait() == 141, err
    assert "internal error" not in err and "Traceback" not in err


def test_the_solve_line_says_which_pricing_oasis_ran(tmp_path, capsys, fig5_file):
    """Without --pricing, OASiS runs priced by the oracle (eqs. (23)-(26) on the instance's own
    jobs), which a reader of the line could not tell from a pricing estimated in advance; now
    the line says which. Other policies' lines say nothing of pricing."""
    code, out, _ = run(["solve", fig5_file, "--policy", "oasis", "--out", tmp_path / "a.json"],
                       capsys)
    assert code == 0
    assert "; pricing: the oracle (eqs. (23)-(26) on this instance's own jobs) -> " in out
    pricing = tmp_path / "p.json"
    assert run(["estimate-pricing", fig5_file, "--out", pricing], capsys)[0] == 0
    code, out, _ = run(["solve", fig5_file, "--policy", "oasis", "--pricing", pricing, "--out",
                        tmp_path / "b.json"], capsys)
    assert code == 0 and f"; pricing: the file {pricing} -> " in out
    code, out, _ = run(["solve", fig5_file, "--policy", "drf", "--out", tmp_path / "c.json"],
                       capsys)
    assert code == 0 and "pricing" not in out
