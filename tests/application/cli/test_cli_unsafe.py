"""Planted payloads through the command line: ``avdgp predict`` and ``avdgp export`` on a model
folder from elsewhere execute nothing, load nothing from outside the folder, and end with one
line and exit status 2; a failed write (a full disk) leaves no partial file under the output's
name. The library-level payloads are in ``tests/library/io/test_unsafe_files.py``.

The model folder is assembled by hand (``run.json`` beside a ``model.keras``) rather than by
``avdgp fit --save``, so the default suite stays fast; ``test_cli_export.py`` covers folders
that ``fit`` writes.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import gpflow
import numpy as np
import pytest
from helpers import assert_one_line_cli_error
from payloads import insert_layer, pipepager_lambda, planted

import gpflux_avdgp
from avdgp.cli import main, predict


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """A model folder as ``avdgp fit --save`` writes it: ``run.json`` and ``model.keras``."""
    folder = tmp_path_factory.mktemp("run")
    likelihood = gpflow.likelihoods.Gaussian(0.1)
    model = gpflux_avdgp.build_avdgp(2, [1], 3, 16, likelihood, seed=0)
    model.compile("adam")
    model.save(folder / "model.keras")
    run = {
        "spec": {"task": "regression", "model": "avdgp"},
        "result": {"dtype": "float64", "label": "avdgp-ar2p"},
        "keras_file": "model.keras",
        "standardizer": {"x_mean": [0.0, 0.0], "x_std": [1.0, 1.0], "y_mean": 0.0, "y_std": 1.0},
    }
    (folder / "run.json").write_text(json.dumps(run))
    np.savetxt(folder / "data.csv", np.random.default_rng(0).normal(size=(5, 2)), delimiter=",")
    return folder


def copy_run(model_dir: Path, target: Path, **run_changes) -> Path:
    target.mkdir()
    run = json.loads((model_dir / "run.json").read_text())
    run.update(run_changes)
    (target / "run.json").write_text(json.dumps(run))
    return target


def test_the_legitimate_folder_predicts(model_dir, capsys):
    assert main(["predict", str(model_dir), str(model_dir / "data.csv")]) == 0
    assert capsys.readouterr().out.startswith("mean,std,lower_95,upper_95\n")


@pytest.mark.parametrize("command", ["predict", "export"])
def test_a_lambda_naming_a_shell_function_never_runs(model_dir, tmp_path, capsys, command):
    marker = tmp_path / "marker"
    folder = copy_run(model_dir, tmp_path / "run")
    planted(
        model_dir / "model.keras",
        folder,
        lambda config: insert_layer(config, pipepager_lambda(marker), 1),
    )
    last = str(model_dir / "data.csv") if command == "predict" else str(tmp_path / "export")
    status = main([command, str(folder), last])
    captured = capsys.readouterr()
    assert_one_line_cli_error(status, captured.out, captured.err, "refused at", stages=1)
    assert "Lambda" in captured.err
    assert not marker.exists() and not (tmp_path / "export").exists()


@pytest.mark.parametrize(
    "keras_file", ["/etc/hostname", "../outside.keras", "sub/model.keras", "", 3, "link.keras"]
)
def test_run_json_cannot_point_outside_the_folder(model_dir, tmp_path, capsys, keras_file):
    outside = tmp_path / "outside.keras"
    outside.write_bytes((model_dir / "model.keras").read_bytes())
    folder = copy_run(model_dir, tmp_path / "run", keras_file=keras_file)
    (folder / "sub").mkdir()
    (folder / "sub" / "model.keras").write_bytes(outside.read_bytes())
    os.symlink(outside, folder / "link.keras")
    status = main(["predict", str(folder), str(model_dir / "data.csv")])
    captured = capsys.readouterr()
    assert_one_line_cli_error(status, captured.out, captured.err, "refused: keras_file")
    assert "inside MODEL_DIR" in captured.err


def test_archive_traversal_is_refused(model_dir, tmp_path, capsys):
    folder = copy_run(model_dir, tmp_path / "run")
    planted(model_dir / "model.keras", folder, lambda config: None, extra={"../x.py": b"x"})
    status = main(["export", str(folder), str(tmp_path / "export")])
    captured = capsys.readouterr()
    expected = "refused: archive member '../x.py' points outside it"
    assert_one_line_cli_error(status, captured.out, captured.err, expected, stages=1)
    assert not (tmp_path / "x.py").exists()


@pytest.mark.slow  # a subprocess; the in-process refusals above are the default-suite tests
def test_python_m_avdgp_in_the_model_folder_imports_nothing_from_it(model_dir, tmp_path):
    """``python -m avdgp predict . data.csv`` run inside a folder that ships ``payload.py``
    (named by the config) and ``tempfile.py`` (a standard module ``avdgp`` imports): neither
    runs, the config is refused, exit status 2."""
    folder = copy_run(model_dir, tmp_path / "run")
    marker = tmp_path / "marker"
    entry = {"module": "payload", "class_name": "Payload", "config": {}, "registered_name": None}

    def edit(config: dict) -> None:
        config["compile_config"]["loss"] = entry

    planted(model_dir / "model.keras", folder, edit)
    for name in ("payload", "tempfile"):
        (folder / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write({name!r})\n")
    (folder / "data.csv").write_bytes((model_dir / "data.csv").read_bytes())
    done = subprocess.run(
        [sys.executable, "-m", "avdgp", "predict", ".", "data.csv"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("avdgp predict: loading the "), done.stderr
    assert "module 'payload', which is not loaded" in lines[1]
    assert not marker.exists(), marker.read_text()


# ------------------------------------------------------------------- faults lose nothing
def no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.slow
def test_predict_writes_in_chunks_the_same_rows(model_dir, tmp_path, capsys, monkeypatch):
    """Rows are predicted and written a chunk at a time (memory flat in the rows); the file is
    the same as in one piece."""
    data = str(model_dir / "data.csv")
    assert main(["predict", str(model_dir), data, "--out", str(tmp_path / "whole.csv")]) == 0
    monkeypatch.setattr(predict, "CHUNK_ROWS", 2)
    assert main(["predict", str(model_dir), data, "--out", str(tmp_path / "chunks.csv")]) == 0
    assert main(["predict", str(model_dir), data]) == 0
    whole = (tmp_path / "whole.csv").read_text()
    assert (tmp_path / "chunks.csv").read_text() == whole
    assert whole.count("mean") == 1 and len(whole.splitlines()) == 6
    assert capsys.readouterr().out.endswith(whole)


def test_a_failed_predict_write_leaves_no_partial_file(model_dir, tmp_path, capsys, monkeypatch):
    out = tmp_path / "predictions.csv"
    out.write_text("the previous predictions\n")
    monkeypatch.setattr(os, "fsync", no_space)
    status = main(["predict", str(model_dir), str(model_dir / "data.csv"), "--out", str(out)])
    captured = capsys.readouterr()
    expected = f"--out {out}: could not write (No space left on device); free some space"
    assert_one_line_cli_error(status, captured.out, captured.err, expected, stages=1)
    assert out.read_text() == "the previous predictions\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["predictions.csv"]


def test_a_failed_export_leaves_the_previous_one(model_dir, tmp_path, capsys, monkeypatch):
    """The export is written beside EXPORT_DIR and swapped in: a full disk while writing leaves
    the previous export as it was and no partial folder."""
    import tensorflow as tf

    target = tmp_path / "export"
    target.mkdir()
    (target / "saved_model.pb").write_bytes(b"the previous export")

    def save_then_fail(module, path, **options):
        os.makedirs(path)
        Path(path, "saved_model.pb").write_bytes(b"half")
        no_space()

    monkeypatch.setattr(tf.saved_model, "save", save_then_fail)
    status = main(["export", str(model_dir), str(target)])
    captured = capsys.readouterr()
    expected = f"EXPORT_DIR {target}: could not write (No space left on device)"
    assert_one_line_cli_error(status, captured.out, captured.err, expected, stages=2)
    assert [path.name for path in target.iterdir()] == ["saved_model.pb"]
    assert (target / "saved_model.pb").read_bytes() == b"the previous export"
    assert [path.name for path in tmp_path.iterdir()] == ["export"]


@pytest.mark.slow  # a real export twice; the test above is its default-suite stand-in
def test_an_export_replaces_the_previous_one(model_dir, tmp_path, capsys):
    import tensorflow as tf

    target = tmp_path / "export"
    for _ in range(2):
        assert main(["export", str(model_dir), str(target)]) == 0
    capsys.readouterr()
    assert [path.name for path in tmp_path.iterdir()] == ["export"]
    assert tf.saved_model.load(str(target)).signatures["predict_y"] is not None


def test_predict_streams_a_csv_and_drops_the_named_target(model_dir, tmp_path, monkeypatch):
    """Read two rows at a time, a file with a header and the target between the features gives
    the rows of the features alone."""
    x = np.loadtxt(model_dir / "data.csv", delimiter=",")
    with_target = tmp_path / "with_target.csv"
    rows = np.column_stack([x[:, 0], np.arange(5.0), x[:, 1]])
    np.savetxt(with_target, rows, delimiter=",", header="a,price,b", comments="", fmt="%r")
    monkeypatch.setattr(predict, "CHUNK_ROWS", 2)
    read = []
    original = predict._prediction_rows
    monkeypatch.setattr(
        predict,
        "_prediction_rows",
        lambda s, m, block, b, d: read.append(len(block)) or original(s, m, block, b, d),
    )
    outs = [tmp_path / "plain.csv", tmp_path / "named.csv"]
    assert (
        main(["predict", str(model_dir), str(model_dir / "data.csv"), "--out", str(outs[0])]) == 0
    )
    assert (
        main(
            [
                "predict",
                str(model_dir),
                str(with_target),
                "--target",
                "price",
                "--out",
                str(outs[1]),
            ]
        )
        == 0
    )
    assert read == [2, 2, 1, 2, 2, 1]
    assert outs[0].read_text() == outs[1].read_text()


@pytest.mark.parametrize("bad_row", [0, 3])
def test_a_bad_cell_met_while_streaming_is_named_by_line(
    model_dir, tmp_path, capsys, monkeypatch, bad_row
):
    """A NaN in the first or a later chunk: the whole-file reader's one-line error (line and
    column), exit 2, and no file under --out's name."""
    x = np.loadtxt(model_dir / "data.csv", delimiter=",")
    x[bad_row, 1] = np.nan
    data = tmp_path / "nan.csv"
    np.savetxt(data, x, delimiter=",", fmt="%r")
    monkeypatch.setattr(predict, "CHUNK_ROWS", 2)
    out = tmp_path / "p.csv"
    status = main(["predict", str(model_dir), str(data), "--out", str(out)])
    captured = capsys.readouterr()
    expected = f"1 value is NaN or infinite (first at row {bad_row + 1}, column 2: nan)"
    stages = 1 + bad_row // 2  # "loading ...", then "2 rows predicted" after the first chunk
    assert_one_line_cli_error(status, captured.out, captured.err, expected, stages=stages)
    assert not out.exists()


@pytest.mark.parametrize("command", ["predict", "export"])
def test_weights_stored_in_a_local_file_are_never_read(model_dir, tmp_path, capsys, command):
    """Issue 47, row 4: a weight stored in another file by HDF5 external storage; plain
    ``tf_keras`` reads the file into the weight (and ``export`` copied it into the export's
    variables); the CLI refuses the folder."""
    import h5py
    from payloads import copy_except, first_dataset, rewritten_weights

    secret = tmp_path / "secret.bin"

    def rewrite(source, target) -> None:
        name = first_dataset(source)
        copy_except(source, target, name)
        data = source[name]
        secret.write_bytes(b"S" * data.nbytes)
        target.create_dataset(
            name, data.shape, data.dtype, external=[(str(secret), 0, h5py.h5f.UNLIMITED)]
        )

    folder = copy_run(model_dir, tmp_path / "run")
    rewritten_weights(model_dir / "model.keras", folder, rewrite)
    last = str(model_dir / "data.csv") if command == "predict" else str(tmp_path / "export")
    status = main([command, str(folder), last])
    captured = capsys.readouterr()
    assert_one_line_cli_error(status, captured.out, captured.err, "has external storage", stages=1)
    assert not (tmp_path / "export").exists()


def test_predict_never_replaces_its_input_or_writes_into_the_model_folder(
    model_dir, tmp_path, capsys
):
    """Issue 71, row 8: ``--out`` naming DATA (itself, through a symbolic or a hard link) or a
    file inside MODEL_DIR is refused before any work; every input is left as it was."""
    data = tmp_path / "rows.csv"
    data.write_bytes((model_dir / "data.csv").read_bytes())
    (tmp_path / "link.csv").symlink_to(data)
    os.link(data, tmp_path / "hard.csv")
    before = {path: path.read_bytes() for path in (data, model_dir / "run.json")}
    for out, expected in (
        (data, f"--out {data}: is the input DATA ({data}), which it would replace"),
        (tmp_path / "link.csv", "is the input DATA"),
        (tmp_path / "hard.csv", "is the input DATA"),
        (model_dir / "run.json", f"is inside the input MODEL_DIR folder {model_dir}"),
        (model_dir / "new.csv", "is inside the input MODEL_DIR folder"),
    ):
        status = main(["predict", str(model_dir), str(data), "--out", str(out)])
        captured = capsys.readouterr()
        assert_one_line_cli_error(status, captured.out, captured.err, expected)
    assert {path: path.read_bytes() for path in before} == before
    assert not (model_dir / "new.csv").exists()


def test_predict_refuses_a_header_alone_and_an_unreachable_input_in_one_line(
    model_dir, tmp_path, capsys
):
    """Issue 71, row 10: a header without rows (read by the header's names) and an input of
    1e308 were internal errors; 1e100 training stds from the mean still predicts (1e150 did,
    1e160 overflowed)."""
    named = copy_run(model_dir, tmp_path / "named", data={"feature_names": ["a", "b"]})
    (named / "model.keras").write_bytes((model_dir / "model.keras").read_bytes())
    model_dir = named
    cases = {
        "header.csv": ("a,b\n", "header.csv: no data rows to predict (a header alone?)"),
        "far.csv": (
            "1e308,0.5\n",
            "far.csv: an input in column 1 lies 1e+308 training standard deviations from the "
            "training mean, beyond the 1e+100 a prediction can be computed at; check that "
            "column's units",
        ),
    }
    for name, (text, expected) in cases.items():
        (tmp_path / name).write_text(text)
        out = tmp_path / f"{name}.out"
        status = main(["predict", str(model_dir), str(tmp_path / name), "--out", str(out)])
        captured = capsys.readouterr()
        assert_one_line_cli_error(status, captured.out, captured.err, expected, stages=1)
        assert not out.exists()
        assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no partial
    (tmp_path / "reachable.csv").write_text("1e100,0.5\n")
    assert main(["predict", str(model_dir), str(tmp_path / "reachable.csv")]) == 0
    mean = capsys.readouterr().out.splitlines()[1].split(",")[0]
    assert np.isfinite(float(mean))
