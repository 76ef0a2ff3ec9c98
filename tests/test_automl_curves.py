"""The curves CSV: the shipped sets re-read exactly, one bad file per reader rule, the writer's
canonical form, appends that leave bytes alone. No training here (see test_automl_tasks.py)."""
from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from oasis_opt.training.curves import (COLUMNS, Curve, append_curves, format_curves, read_curves,
                                     shipped_curves, write_curves)
from oasis_opt.model.io import FormatError

SHIPPED = {"digits-mlp": (250, 40), "breast-cancer-mlp": (250, 40), "digits-cnn": (100, 30),
           "wine-mlp": (200, 40), "digits-linear": (200, 40)}
HEADER = ",".join(COLUMNS)
CONFIG = '"{""lr"":0.1,""width"":8}"'
GOOD = [HEADER,
        f"s,0,1,0.5,1.2,0.01,{CONFIG}",
        f"s,0,2,0.75,0.9,0.02,{CONFIG}",
        f"s,1,1,0.25,2.0,0.01,{CONFIG.replace('0.1', '0.2')}",
        f"t,0,1,1.0,0.0,0.0,{CONFIG}"]


def _file(tmp_path, lines, name="curves.csv"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


# ---- the shipped curve sets ---------------------------------------------------------------------
def test_the_shipped_curve_sets_are_there_with_their_sizes():
    paths = shipped_curves()
    assert set(paths) == set(SHIPPED)
    for study, (trials, epochs) in SHIPPED.items():
        curves = read_curves(paths[study])
        assert [c.trial for c in curves] == list(range(trials))
        assert {c.study for c in curves} == {study}
        assert {c.epochs for c in curves} == {epochs}
        final = [c.val_accuracy[-1] for c in curves]
        # real random searches: some trials learn well, some hardly at all
        assert max(final) > 0.9 and min(final) < 0.7
        assert all(s > 0 for c in curves for s in c.seconds)


@pytest.mark.parametrize("study", sorted(SHIPPED))
def test_shipped_curves_reread_byte_for_byte(study, tmp_path):
    path = shipped_curves()[study]
    assert format_curves(read_curves(path)) == path.read_text()
    copy = tmp_path / path.name
    write_curves(read_curves(path), copy)
    assert copy.read_bytes() == path.read_bytes()


# ---- reading good files -------------------------------------------------------------------------
def test_read_groups_rows_into_curves_in_file_order(tmp_path):
    curves = read_curves(_file(tmp_path, GOOD))
    assert [(c.study, c.trial, c.epochs) for c in curves] == [("s", 0, 2), ("s", 1, 1),
                                                              ("t", 0, 1)]
    assert curves[0].config == {"lr": 0.1, "width": 8}
    assert curves[0].val_accuracy == (0.5, 0.75)
    assert curves[0].val_loss == (1.2, 0.9)
    assert curves[0].seconds == (0.01, 0.02)


def test_curves_written_by_another_tool_replay(tmp_path):
    # other number spellings, JSON with spaces and unsorted keys, integers as floats, trials in
    # any order, a diverged trial's loss
    lines = [HEADER,
             'other,7,1,0.90,1e-1,3,"{""width"": 8, ""lr"": 0.1}"',
             'other,7,2.0,.95,inf,2.50,"{""width"": 8, ""lr"": 0.1}"',
             'other,3,1,0,nan,0,"{}"']
    curves = read_curves(_file(tmp_path, lines))
    assert [(c.trial, c.epochs) for c in curves] == [(7, 2), (3, 1)]
    assert curves[0].val_accuracy == (0.9, 0.95) and curves[0].val_loss[1] == math.inf
    assert math.isnan(curves[1].val_loss[0]) and curves[1].config == {}
    # and written back in the canonical form, which re-reads to the same curves
    again = read_curves(_file(tmp_path, format_curves(curves).splitlines(), "again.csv"))
    assert [(c.study, c.trial, c.config, c.val_accuracy, c.seconds) for c in again] == \
        [(c.study, c.trial, c.config, c.val_accuracy, c.seconds) for c in curves]


def test_a_header_only_file_has_no_curves(tmp_path):
    assert read_curves(_file(tmp_path, [HEADER])) == []


# ---- one bad file per reader rule ---------------------------------------------------------------
BAD = [  # (row to replace (1 = header), its new text, field, message)
    (1, "study,trial,epoch,val_accuracy,val_loss,seconds", "row 1", "expected the header"),
    (1, "study,trial,epoch,accuracy,val_loss,seconds,config", "row 1", "expected the header"),
    (2, "s,0,1,0.5,1.2,0.01", "row 2 column config", "missing"),
    (2, "s,0,1", "row 2 column val_accuracy", "missing"),
    (2, f"s,0,1,0.5,1.2,0.01,{CONFIG},extra", "row 2", "extra field after column config"),
    (2, f",0,1,0.5,1.2,0.01,{CONFIG}", "row 2 column study", "non-empty"),
    (2, f"s,x,1,0.5,1.2,0.01,{CONFIG}", "row 2 column trial", "expected an integer"),
    (2, f"s,-1,1,0.5,1.2,0.01,{CONFIG}", "row 2 column trial", "must be >= 0"),
    (2, f"s,0,one,0.5,1.2,0.01,{CONFIG}", "row 2 column epoch", "expected an integer"),
    (2, f"s,0,0,0.5,1.2,0.01,{CONFIG}", "row 2 column epoch", "must be >= 1"),
    (2, f"s,0,1,high,1.2,0.01,{CONFIG}", "row 2 column val_accuracy", "expected a number"),
    (2, f"s,0,1,1.5,1.2,0.01,{CONFIG}", "row 2 column val_accuracy", "must be in [0, 1]"),
    (2, f"s,0,1,-0.1,1.2,0.01,{CONFIG}", "row 2 column val_accuracy", "must be >= 0"),
    (2, f"s,0,1,nan,1.2,0.01,{CONFIG}", "row 2 column val_accuracy", "must be finite"),
    (2, f"s,0,1,0.5,low,0.01,{CONFIG}", "row 2 column val_loss", "expected a number"),
    (2, f"s,0,1,0.5,-1,0.01,{CONFIG}", "row 2 column val_loss", "must be >= 0"),
    (2, f"s,0,1,0.5,1.2,,{CONFIG}", "row 2 column seconds", "expected a number"),
    (2, f"s,0,1,0.5,1.2,-2,{CONFIG}", "row 2 column seconds", "must be >= 0"),
    (2, f"s,0,1,0.5,1.2,inf,{CONFIG}", "row 2 column seconds", "must be finite"),
    (2, "s,0,1,0.5,1.2,0.01,{lr:0.1}", "row 2 column config", "expected a JSON object"),
    (2, 's,0,1,0.5,1.2,0.01,"[1,2]"', "row 2 column config", "expected a JSON object"),
    (2, 's,0,1,0.5,1.2,0.01,"{""lr"":NaN}"', "row 2 column config", "NaN is not valid JSON"),
    (2, f"s,0,2,0.5,1.2,0.01,{CONFIG}", "row 2 column epoch", "must start at epoch 1"),
    (3, f"s,0,3,0.75,0.9,0.02,{CONFIG}", "row 3 column epoch", "expected epoch 2"),
    (3, f"s,0,1,0.75,0.9,0.02,{CONFIG}", "row 3 column epoch", "expected epoch 2"),
    (3, 's,0,2,0.75,0.9,0.02,"{""lr"":0.3,""width"":8}"', "row 3 column config",
     "differs from the config of study 's' trial 0 at row 2"),
    (5, f"s,0,3,1.0,0.0,0.0,{CONFIG}", "row 5 column trial", "already ended at row 3"),
]


@pytest.mark.parametrize("row, text, field, message", BAD)
def test_bad_file_names_row_and_column(tmp_path, row, text, field, message):
    lines = list(GOOD)
    lines[row - 1] = text
    with pytest.raises(FormatError) as err:
        read_curves(_file(tmp_path, lines))
    assert err.value.field == f"curves.csv {field}"
    assert message in str(err.value)


def test_missing_or_binary_file(tmp_path):
    with pytest.raises(FormatError, match="cannot read"):
        read_curves(tmp_path / "absent.csv")
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(FormatError, match="empty file"):
        read_curves(tmp_path / "empty.csv")
    (tmp_path / "binary.csv").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(FormatError, match="UTF-8"):
        read_curves(tmp_path / "binary.csv")


# ---- writing ------------------------------------------------------------------------------------
def _curve(**changes) -> Curve:
    fields = dict(study="s", trial=2, config={"width": 8, "lr": 0.001},
                  val_accuracy=(0.1, 0.5), val_loss=(2.3, float("nan")), seconds=(0.25, 0.125))
    fields.update(changes)
    return Curve(**fields)


def test_writer_is_canonical_and_round_trips(tmp_path):
    text = format_curves([_curve()])
    assert text == (HEADER + "\n"
                    's,2,1,0.1,2.3,0.25,"{""lr"":0.001,""width"":8}"\n'
                    's,2,2,0.5,nan,0.125,"{""lr"":0.001,""width"":8}"\n')
    path = tmp_path / "c.csv"
    write_curves([_curve()], path)
    (curve,) = read_curves(path)
    assert (curve.study, curve.trial, curve.config, curve.val_accuracy, curve.seconds) == \
        ("s", 2, {"lr": 0.001, "width": 8}, (0.1, 0.5), (0.25, 0.125))
    assert curve.val_loss[0] == 2.3 and math.isnan(curve.val_loss[1])


def test_append_leaves_the_existing_bytes_alone(tmp_path):
    path = tmp_path / "c.csv"
    write_curves([_curve()], path)
    before = path.read_bytes()
    append_curves([_curve(trial=3), _curve(study="u", trial=0)], path)
    after = path.read_bytes()
    assert after.startswith(before) and len(after) > len(before)
    assert [(c.study, c.trial) for c in read_curves(path)] == [("s", 2), ("s", 3), ("u", 0)]


@pytest.mark.parametrize("changes, message", [
    (dict(study=""), "study must be"),
    (dict(study=" s"), "study must be"),
    (dict(study="a\nb"), "study must be"),
    (dict(trial=-1), "trial must be"),
    (dict(trial=True), "trial must be"),
    (dict(config=[1]), "config must be a mapping"),
    (dict(config={"x": float("inf")}), "JSON object of finite values"),
    (dict(config={"x": object()}), "JSON object of finite values"),
    (dict(val_accuracy=(0.1,)), "one value per epoch"),
    (dict(val_accuracy=(), val_loss=(), seconds=()), "at least one"),
    (dict(val_accuracy=(0.1, 1.01)), "epoch 2: val_accuracy"),
    (dict(val_loss=(-0.5, 1.0)), "epoch 1: val_loss"),
    (dict(seconds=(0.1, float("inf"))), "epoch 2: seconds"),
])
def test_a_curve_the_reader_would_reject_cannot_be_built(changes, message):
    with pytest.raises(ValueError, match=message):
        _curve(**changes)


def test_curves_space_and_shards_load_no_jax():
    code = ("import sys\nfrom oasis_opt.training.curves import read_curves, shipped_curves\n"
            "import oasis_opt.training.space, oasis_opt.training.shards\n"
            "read_curves(shipped_curves()['breast-cancer-mlp'])\n"
            "print(sorted(m for m in ('jax', 'optax', 'sklearn', 'optuna') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_the_curves_readme_table_describes_the_shipped_files():
    from scipy.stats import spearmanr

    paths = shipped_curves()
    readme = (paths["digits-mlp"].parent / "README.md").read_text()
    for study, path in paths.items():
        curves = read_curves(path)
        final = [c.val_accuracy[-1] for c in curves]
        row = next(line for line in readme.splitlines() if line.startswith(f"| `{study}.csv`"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[2:5] == [str(len(curves)), str(curves[0].epochs),
                              f"{sum(c.epochs for c in curves):,}"]
        assert cells[5] == f"{path.stat().st_size / 1e6:.2f} MB"
        assert cells[7] == f"{sum(sum(c.seconds) for c in curves):.1f} s"
        assert cells[8] == f"{np.median(final):.3f} / {max(final):.3f}"
        assert cells[9] == f"{round(100 * np.mean(np.array(final) < 0.5))} %"
        rho = spearmanr([c.val_accuracy[2] for c in curves], final)[0]
        assert f"{rho:.2f} ({study})" in readme.replace("\n", " ")
