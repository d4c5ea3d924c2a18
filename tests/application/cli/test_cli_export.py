"""``avdgp predict`` and ``avdgp export`` on models saved by ``avdgp fit --save``.

Two tiny models (one epoch) are fitted once per module, through the command line, and shared:
a regression model on a CSV file with a header and a named target column between the inputs,
and a classifier on a headerless CSV file with labels {1, 2}. ``predict`` must agree with the
exported SavedModel (a different code path: NumPy quantiles and moments against the TF graph),
and every kind of bad input must end with one line on stderr and exit status 2.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from helpers import SAME_NUMBERS_RTOL, assert_one_line_cli_error

from avdgp import metrics
from avdgp.cli import main
from avdgp.cli.saved_run import read_saved_run

TINY = ["--epochs", "1", "--batch-size", "50", "--points", "4", "--quiet"]
DEEP = ["--layers", "2", "--hidden-dims", "2", "--inducing", "4,4"]
RTOL = SAME_NUMBERS_RTOL  # float64 throughout


def cli(capsys, *args) -> tuple[int, str, str]:
    """Run ``avdgp ARGS`` in-process; returns ``(exit status, stdout, stderr)``."""
    status = main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def write_csv(path: Path, rows, header=None) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        if header is not None:
            writer.writerow(header)
        writer.writerows([[repr(v) if isinstance(v, float) else v for v in row] for row in rows])
    return path


def read_csv(path_or_text) -> tuple[list[str], np.ndarray]:
    text = path_or_text.read_text() if isinstance(path_or_text, Path) else path_or_text
    rows = list(csv.reader(io.StringIO(text)))
    return rows[0], np.array(rows[1:], dtype=np.float64)


@pytest.fixture(scope="module")
def regression(tmp_path_factory):
    """A saved regression model: 3 features, target 'price' (std ~ 100) in column 2 of 4."""
    folder = tmp_path_factory.mktemp("regression")
    rng = np.random.default_rng(11)
    x = rng.uniform(-2.0, 2.0, size=(120, 3))
    price = 500.0 + 100.0 * (np.sin(x[:, 0]) + 0.5 * x[:, 1]) + 10.0 * rng.normal(size=120)
    rows = np.column_stack([x[:, 0], price, x[:, 1:]]).tolist()
    data = write_csv(folder / "houses.csv", rows, header=["a", "price", "b", "c"])
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = main(
            ["fit", str(data), "--target", "price", *DEEP, *TINY, "--save", str(folder / "m")]
        )
    assert status == 0
    return {
        "dir": folder / "m",
        "data": data,
        "x": x,
        "price": price,
        "folder": folder,
        "stdout": printed.getvalue(),
    }


@pytest.fixture(scope="module")
def classification(tmp_path_factory):
    """A saved classifier: 2 features, labels {1, 2} in the last column, no header."""
    folder = tmp_path_factory.mktemp("classification")
    rng = np.random.default_rng(12)
    x = rng.uniform(-1.0, 1.0, size=(120, 2))
    labels = np.where(x[:, 0] + x[:, 1] > 0, 2, 1)
    rows = [[*map(float, row), int(label)] for row, label in zip(x, labels)]
    data = write_csv(folder / "labels.csv", rows)
    args = ["fit", str(data), "--task", "classification", *DEEP, *TINY]
    assert main([*args, "--save", str(folder / "m")]) == 0
    return {"dir": folder / "m", "data": data, "x": x, "folder": folder}


@pytest.fixture(scope="module")
def regression_export(regression):
    """``avdgp export`` of the regression model, loaded back with TensorFlow."""
    path = regression["folder"] / "export"
    assert main(["export", str(regression["dir"]), str(path)]) == 0
    return path, tf.saved_model.load(str(path))


def test_fit_says_what_it_read_kept_and_saved_and_what_to_run_next(regression):
    lines = regression["stdout"].splitlines()
    folder = regression["dir"]
    assert lines[0].startswith("avdgp-ar2p on houses (n_train ")
    assert lines[3].startswith("  kept epoch 1 of 1 (lowest validation NLL ")
    assert lines[3].endswith(", standardised units)")
    assert lines[5:] == [
        "  data: target 'price', inputs a, b, c",
        f"  saved in {folder}/ (model.keras, weights, run.json); next:",
        f"    avdgp predict {folder} {regression['data']} --out predictions.csv",
        f"    avdgp export {folder} {folder}-serving",
    ]


@pytest.mark.slow
def test_predict_and_export_load_the_model_without_its_optimizer(regression):
    """Neither needs the loss or the optimizer's state: the model loads uncompiled (compiling
    would rebuild the optimizer and read its slots for nothing)."""
    model = read_saved_run(str(regression["dir"]), "predict").load_model()
    assert model.optimizer is None and model.compiled_loss is None
    assert model.predict(np.zeros((2, 3)), verbose=0)["mean"].shape == (2, 1)


@pytest.mark.slow
def test_fit_records_the_data_layout(regression, classification):
    info = json.loads((regression["dir"] / "run.json").read_text())
    assert info["data"] == {
        "target": "price",
        "feature_names": ["a", "b", "c"],
        "target_name": "price",
        "classes": None,
    }
    info = json.loads((classification["dir"] / "run.json").read_text())
    assert info["data"]["classes"] == [1.0, 2.0] and info["data"]["target"] == -1
    # classification saves the inputs' standardiser too (targets untouched)
    assert len(info["standardizer"]["x_mean"]) == 2
    assert (info["standardizer"]["y_mean"], info["standardizer"]["y_std"]) == (0.0, 1.0)


@pytest.mark.slow
def test_predict_regression_agrees_with_the_export(capsys, regression, regression_export):
    out = regression["folder"] / "out" / "predictions.csv"  # the folder is created
    status, stdout, err = cli(
        capsys, "predict", regression["dir"], regression["data"], "--out", out
    )
    assert status == 0, err
    assert stdout.startswith("avdgp-ar2p: 120 predictions (mean, std, lower_95, upper_95) in")
    header, values = read_csv(out)
    assert header == ["mean", "std", "lower_95", "upper_95"]
    assert values.shape == (120, 4)
    mean, std, lower, upper = values.T

    _, served = regression_export
    y = served.signatures["predict_y"](x=tf.constant(regression["x"]))
    np.testing.assert_allclose(mean, y["mean"].numpy()[:, 0], rtol=RTOL)
    np.testing.assert_allclose(std, np.sqrt(y["variance"].numpy()[:, 0]), rtol=RTOL)
    assert np.all((lower < mean) & (mean < upper))
    assert 20.0 < np.median(std) < 500.0  # original units: the target's std is ~ 80
    cdf = [
        metrics.mixture_cdf(
            bound,
            y["weights"].numpy(),
            y["component_means"].numpy()[..., 0],
            y["component_variances"].numpy()[..., 0],
        )
        for bound in (lower, upper)
    ]
    np.testing.assert_allclose(cdf[0], 0.025, atol=1e-9)
    np.testing.assert_allclose(cdf[1], 0.975, atol=1e-9)


@pytest.mark.slow
def test_predict_accepts_features_only_npz_and_a_target_option(
    capsys, regression, regression_export
):
    folder, x, price = regression["folder"], regression["x"][:20], regression["price"][:20]
    _, served = regression_export
    expected = served.signatures["predict_y"](x=tf.constant(x))["mean"].numpy()[:, 0]
    features = write_csv(folder / "features.csv", x.tolist())
    arrays = folder / "arrays.npz"
    np.savez(arrays, X=x, y=price)
    headerless = write_csv(folder / "target_first.csv", np.column_stack([price, x]).tolist())
    variants = [
        (features,),  # exactly D columns: all features
        (arrays,),  # .npz: X is the features
        (headerless, "--target", "0"),  # D + 1 columns, the target picked by index
    ]
    for args in variants:
        status, got, err = cli(capsys, "predict", regression["dir"], *args)  # CSV on stdout
        assert status == 0, (args, err)
        header, values = read_csv(got)
        assert header == ["mean", "std", "lower_95", "upper_95"], args
        np.testing.assert_allclose(values[:, 0], expected, rtol=RTOL, err_msg=str(args))


@pytest.mark.slow
def test_export_metadata_and_raw_feature_units(regression_export, regression):
    path, served = regression_export
    metadata = json.loads(served.metadata().numpy().decode())
    assert metadata["task"] == "regression" and metadata["label"] == "avdgp-ar2p"
    assert metadata["feature_names"] == ["a", "b", "c"] and metadata["target_name"] == "price"
    assert metadata["standardized_inputs"] and metadata["standardized_targets"]
    # served by the header's names too, in any order: the positional numbers
    x = regression["x"]
    by_name = served.signatures["predict_y_by_name"](
        c=tf.constant(x[:, 2]), b=tf.constant(x[:, 1]), a=tf.constant(x[:, 0])
    )
    positional = served.signatures["predict_y"](x=tf.constant(x))
    np.testing.assert_array_equal(by_name["mean"].numpy(), positional["mean"].numpy())
    info = json.loads((regression["dir"] / "run.json").read_text())
    assert metadata["y_std"] == [info["standardizer"]["y_std"]]
    # log density in original units: a target shifted by one std is less likely than the mean
    x = tf.constant(regression["x"][:5])
    mean = served.signatures["predict_y"](x=x)["mean"]
    at_mean = served.signatures["log_density"](x=x, y=mean)["log_density"].numpy()
    far = served.signatures["log_density"](x=x, y=mean + 300.0)["log_density"].numpy()
    assert np.all(at_mean > far)
    assert np.all(at_mean < 0.0)  # a density over ~100 units is below 1


@pytest.mark.slow
def test_export_to_the_same_folder_again_overwrites(capsys, regression, regression_export):
    path, _ = regression_export
    status, out, err = cli(capsys, "export", regression["dir"], path)
    assert status == 0, err
    assert f"exported to {path}" in out
    assert "or by name: a, b, c [N] each" in out and "predict_y_by_name" in out


@pytest.mark.slow
def test_export_of_names_tensorflow_cannot_take_serves_by_position(capsys, regression):
    def rename(folder: Path) -> None:
        info = json.loads((folder / "run.json").read_text())
        info["data"]["feature_names"] = ["a", "b (cm)", "c"]
        (folder / "run.json").write_text(json.dumps(info))

    folder = _broken_copy(regression, "odd_names", rename)
    status, out, err = cli(capsys, "export", folder, folder.parent / "odd_export")
    assert status == 0, err
    assert "signatures predict_f, predict_y, log_density;" in out
    assert "not served by name: feature_names: 'b (cm)' cannot name a signature input" in out
    served = tf.saved_model.load(str(folder.parent / "odd_export"))
    assert "predict_y_by_name" not in served.signatures
    metadata = json.loads(served.metadata().numpy().decode())
    assert metadata["feature_names"] is None
    assert metadata["feature_names_not_served"] == ["a", "b (cm)", "c"]


@pytest.mark.slow
def test_predict_and_export_classification(capsys, classification):
    folder = classification["folder"]
    out = folder / "p.csv"
    status, _, err = cli(
        capsys, "predict", classification["dir"], classification["data"], "--out", out
    )
    assert status == 0, err
    header, values = read_csv(out)
    assert header == ["label", "p_1", "p_2"]
    label, p_first, probability = values.T
    assert np.all((probability > 0.0) & (probability < 1.0))
    np.testing.assert_allclose(p_first + probability, 1.0, rtol=1e-12)
    np.testing.assert_array_equal(label, np.where(probability > 0.5, 2.0, 1.0))

    status, _, err = cli(capsys, "export", classification["dir"], folder / "export")
    assert status == 0, err
    served = tf.saved_model.load(str(folder / "export"))
    metadata = json.loads(served.metadata().numpy().decode())
    assert metadata["likelihood"] == "Bernoulli" and metadata["classes"] == [1.0, 2.0]
    assert metadata["standardized_inputs"] and not metadata["standardized_targets"]
    y = served.signatures["predict_y"](x=tf.constant(classification["x"]))
    np.testing.assert_allclose(probability, y["mean"].numpy()[:, 0], rtol=RTOL)


# ---------------------------------------------------------------------------------------------
# Bad input: one line on stderr, exit status 2
# ---------------------------------------------------------------------------------------------


def _broken_copy(regression, name: str, edit) -> Path:
    """A copy of the saved regression model folder, changed by ``edit(folder)``."""
    copy = regression["folder"] / name
    if not copy.exists():
        shutil.copytree(regression["dir"], copy)
        edit(copy)
    return copy


def _set_keras_file_null(folder: Path) -> None:
    info = json.loads((folder / "run.json").read_text())
    info["keras_file"] = None
    (folder / "run.json").write_text(json.dumps(info))


BROKEN_MODEL_DIRS = [
    pytest.param(
        lambda f: (f / "model.keras").write_bytes(b"not a zip"),
        "model.keras: ",  # "could not load" / "not a valid .keras archive"
        id="corrupt-keras",
    ),
    pytest.param(
        lambda f: (f / "model.keras").unlink(), "model.keras: missing", id="missing-keras"
    ),
    pytest.param(
        lambda f: (f / "run.json").write_text("{oops"),
        "run.json: not a run description",
        id="corrupt-json",
    ),
    pytest.param(
        lambda f: (f / "run.json").unlink(),
        "run.json: missing; MODEL_DIR must be",
        id="no-run-json",
    ),
    pytest.param(_set_keras_file_null, "holds no model.keras", id="not-serialised"),
    pytest.param(
        lambda f: _edit_run_json(f, lambda info: info["standardizer"].update(x_std=[0.0, 1.0])),
        "bad standardizer (x_mean and x_std must be lists of one number per input",
        id="zero-x-std",
    ),
    pytest.param(
        lambda f: _edit_run_json(f, lambda info: info.update(keras_file="model.keras\x00.x")),
        "is not a file name inside MODEL_DIR",
        id="nul-in-keras-file",
    ),
    pytest.param(
        lambda f: _edit_run_json(
            f, lambda info: info["standardizer"].update(x_mean=[0.0] * 4, x_std=[1.0] * 4)
        ),
        "the standardizer has 4 input means, the model takes 3 features",
        id="width-mismatch",
    ),
]

#: Folders whose run.json reads well: they fail as the model loads, after the "loading" line.
FAILING_AS_THE_MODEL_LOADS = ("corrupt-keras", "width-mismatch")


def _edit_run_json(folder: Path, edit) -> None:
    info = json.loads((folder / "run.json").read_text())
    edit(info)
    (folder / "run.json").write_text(json.dumps(info))


@pytest.mark.parametrize("edit, expected", BROKEN_MODEL_DIRS)
@pytest.mark.parametrize("command", ["predict", "export"])
def test_broken_model_dir(capsys, request, regression, command, edit, expected):
    broken = _broken_copy(regression, f"broken-{request.node.callspec.id.split('-', 1)[1]}", edit)
    second = regression["data"] if command == "predict" else regression["folder"] / "never"
    status, out, err = cli(capsys, command, broken, second)
    stages = int(request.node.callspec.id.split("-", 1)[1] in FAILING_AS_THE_MODEL_LOADS)
    assert_one_line_cli_error(status, out, err, f"avdgp {command}: ", stages=stages)
    assert expected in err
    assert not (regression["folder"] / "never").exists()


def test_missing_model_dir(capsys, tmp_path, regression):
    status, out, err = cli(capsys, "predict", tmp_path / "nothing", regression["data"])
    assert_one_line_cli_error(status, out, err, f"MODEL_DIR {tmp_path / 'nothing'}: no such folder")
    status, out, err = cli(capsys, "export", regression["data"], tmp_path / "e")
    assert_one_line_cli_error(
        status, out, err, "is a file, expected a folder written by 'avdgp fit"
    )


# default suite: test_predict_and_export_say_what_they_load_and_write, the data tests
@pytest.mark.slow
def test_predict_bad_data(capsys, regression, tmp_path):
    x = regression["x"][:10]
    wrong = write_csv(tmp_path / "five.csv", np.column_stack([x, x[:, :2]]).tolist())
    status, out, err = cli(capsys, "predict", regression["dir"], wrong)
    assert_one_line_cli_error(
        status,
        out,
        err,
        "five.csv has 5 columns, the model expects 3 features (or 4 with the target)",
    )

    one = write_csv(tmp_path / "one.csv", x[:, :1].tolist())
    status, out, err = cli(capsys, "predict", regression["dir"], one)
    assert_one_line_cli_error(
        status, out, err, "one.csv has 1 column, the model expects 3 features"
    )

    rows = x.tolist()
    rows[2][1] = "nan"
    nan = write_csv(tmp_path / "nan.csv", rows)
    status, out, err = cli(capsys, "predict", regression["dir"], nan)  # found while reading
    assert_one_line_cli_error(
        status, out, err, "NaN or infinite (first at row 3, column 2", stages=1
    )

    arrays = tmp_path / "wide.npz"
    np.savez(arrays, X=np.zeros((4, 5)), y=np.zeros(4))
    status, out, err = cli(capsys, "predict", regression["dir"], arrays)
    assert_one_line_cli_error(
        status, out, err, "array 'X' has 5 columns, the model expects 3", stages=1
    )

    status, out, err = cli(capsys, "predict", regression["dir"], tmp_path / "absent.csv")
    assert_one_line_cli_error(status, out, err, "absent.csv: no such file or folder")


@pytest.mark.slow
def test_predict_reads_a_csv_with_a_header_by_the_column_names(capsys, regression):
    """fit saved the names a, b, c (target 'price'); a file naming them in another order, with
    or without the target, gives the predictions of the training file's order."""
    x, price, folder = regression["x"][:20], regression["price"][:20], regression["folder"]
    status, out, err = cli(capsys, "predict", regression["dir"], regression["data"])
    assert status == 0, err
    expected = read_csv(out)[1][:20]
    variants = {
        "target_between.csv": (["c", "price", "a", "b"], [x[:, 2], price, x[:, 0], x[:, 1]]),
        "features_only.csv": (["b", "c", "a"], [x[:, 1], x[:, 2], x[:, 0]]),
    }
    variants["cost_named.csv"] = (["b", "cost", "a", "c"], [x[:, 1], price, x[:, 0], x[:, 2]])
    for name, (header, columns) in variants.items():
        data = write_csv(folder / name, np.column_stack(columns).tolist(), header=header)
        target = ["--target", "cost"] if "cost" in header else []  # a target named otherwise
        status, out, err = cli(capsys, "predict", regression["dir"], data, *target)
        assert status == 0, (name, err)
        np.testing.assert_allclose(read_csv(out)[1], expected, rtol=RTOL, err_msg=name)


def test_predict_refuses_a_header_that_does_not_name_the_features(capsys, regression, tmp_path):
    x = regression["x"][:5]
    cases = {
        "renamed.csv": (["a", "b", "z"], "missing 'c'; unknown 'z'"),
        "repeated.csv": (["a", "b", "c", "a"], "repeated 'a'"),
    }
    for name, (header, problem) in cases.items():
        rows = np.column_stack([x, x[:, :1]]) if len(header) == 4 else x
        data = write_csv(tmp_path / name, rows.tolist(), header=header)
        status, out, err = cli(capsys, "predict", regression["dir"], data)
        assert_one_line_cli_error(
            status,
            out,
            err,
            f"{name}: columns are read by the header's names, a, b, c (and the target "
            f"'price'); {problem}",
        )


@pytest.mark.slow
def test_predict_by_name_names_a_bad_cell_after_the_first_chunk(
    capsys, regression, tmp_path, monkeypatch
):
    """Rows already streamed when a bad cell comes: the whole-file reader names the cell."""
    from avdgp.cli import predict

    monkeypatch.setattr(predict, "CHUNK_ROWS", 2)
    rows = regression["x"][:6].tolist()
    rows[4][1] = "nan"
    data = write_csv(tmp_path / "late_nan.csv", rows, header=["a", "b", "c"])
    status, out, err = cli(capsys, "predict", regression["dir"], data, "--out", tmp_path / "p.csv")
    assert_one_line_cli_error(
        status, out, err, "NaN or infinite (first at row 6, column 2", stages=3
    )


def test_output_paths_are_checked_before_loading(capsys, regression, tmp_path):
    """A bad --out or EXPORT_DIR fails at once, even with a MODEL_DIR that does not exist."""
    nothing = tmp_path / "nothing"
    status, out, err = cli(capsys, "predict", nothing, regression["data"], "--out", tmp_path)
    assert_one_line_cli_error(status, out, err, "--out " + str(tmp_path) + ": is a folder")
    file = write_csv(tmp_path / "file.csv", [[1.0]])
    status, out, err = cli(capsys, "export", nothing, file)
    assert_one_line_cli_error(status, out, err, "EXPORT_DIR " + str(file) + ": is a file")
    status, out, err = cli(capsys, "export", nothing, tmp_path)
    assert_one_line_cli_error(status, out, err, "is a non-empty folder that holds no export")


@pytest.mark.slow
def test_outputs_never_replace_a_link_a_device_or_a_fifo(capsys, regression, tmp_path):
    """Issue 47, row 6: ``--out`` at a stream (a character device, a FIFO) is written through
    as shell redirection would; at a symbolic link it is refused; neither is replaced by a
    regular file. ``export`` and ``fit --save`` refuse a link in one line."""
    import stat
    import threading

    null = tmp_path / "null"  # a private copy of /dev/null
    os.mknod(null, 0o666 | stat.S_IFCHR, os.stat("/dev/null").st_rdev)
    status, out, err = cli(capsys, "predict", regression["dir"], regression["data"], "--out", null)
    assert status == 0, err
    assert stat.S_ISCHR(os.lstat(null).st_mode)

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    status, out, err = cli(capsys, "predict", regression["dir"], regression["data"], "--out", fifo)
    reader.join(timeout=60)
    assert status == 0, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert received and received[0].startswith("mean")

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    link = tmp_path / "link.csv"
    os.symlink(victim, link)
    status, out, err = cli(capsys, "predict", regression["dir"], regression["data"], "--out", link)
    assert_one_line_cli_error(status, out, err, f"--out {link}: is a symbolic link")
    assert os.path.islink(link) and victim.read_text() == "keep me"

    folder_link = tmp_path / "export-link"
    os.symlink(tmp_path / "elsewhere", folder_link)
    status, out, err = cli(capsys, "export", regression["dir"], folder_link)
    assert_one_line_cli_error(status, out, err, "is a symbolic link")
    status, out, err = cli(capsys, "fit", regression["data"], "--save", folder_link)
    assert_one_line_cli_error(status, out, err, "is a symbolic link")
    status, out, err = cli(capsys, "fit", regression["data"], "--json", link)
    assert_one_line_cli_error(status, out, err, "is a symbolic link")
    assert os.path.islink(folder_link) and victim.read_text() == "keep me"


def test_predict_and_export_say_what_they_load_and_write(capsys, regression, tmp_path):
    """Issue 50, row 4: a line per stage on stderr before each silence (loading TensorFlow and
    the model, tracing the export); the result line stays on stdout. (None with --quiet: the
    next test.)"""
    out = tmp_path / "p.csv"
    status, stdout, err = cli(
        capsys, "predict", regression["dir"], regression["data"], "--out", out
    )
    assert status == 0, err
    assert err.splitlines() == [
        f"avdgp predict: loading the avdgp-ar2p model of {regression['dir']} "
        f"({regression['data']}: by the header's names)"
    ]
    assert stdout.startswith("avdgp-ar2p: 120 predictions")
    target = tmp_path / "served"
    status, stdout, err = cli(capsys, "export", regression["dir"], target)
    assert status == 0, err
    assert err.splitlines() == [
        f"avdgp export: loading the avdgp-ar2p model of {regression['dir']}",
        f"avdgp export: tracing its 5 signatures into {target}",
    ]
    assert stdout.startswith(f"avdgp-ar2p: exported to {target}")


@pytest.mark.slow  # default suite: the lines above; a second export traces the model again
def test_predict_and_export_say_nothing_on_stderr_with_quiet(capsys, regression, tmp_path):
    quiet = {"predict": (regression["data"], "mean,std"), "export": (tmp_path / "q", "avdgp-")}
    for command, (last, start) in quiet.items():
        status, stdout, err = cli(capsys, command, regression["dir"], last, "--quiet")
        assert status == 0 and err == "", err
        assert stdout.startswith(start)


def test_checks_that_need_no_tensorflow_refuse_before_it_loads(regression, tmp_path):
    """Issue 50, row 4: a text target without --task, a header that does not name the model's
    features, a bad EXPORT_DIR and a file of the wrong width are refused in a process that
    never imports TensorFlow (a text target was refused 12.7 s after TensorFlow loaded)."""
    text = write_csv(tmp_path / "labels.csv", [[1.0, 2.0, "cat"], [2.0, 1.0, "dog"]] * 10)
    renamed = write_csv(tmp_path / "renamed.csv", [[1.0, 2.0, 3.0]], header=["a", "b", "z"])
    a_file = write_csv(tmp_path / "a_file.csv", [[1.0]])
    wide = write_csv(tmp_path / "wide.csv", [[1.0] * 5])
    script = (
        "import sys\n"
        "from avdgp.cli.main import main\n"
        "for argv in sys.argv[1:]:\n"
        "    print(main(argv.split('|')), file=sys.stderr)\n"
        "print('tensorflow' in sys.modules, 'gpflow' in sys.modules)\n"
    )
    calls = [
        f"fit|{text}",
        f"predict|{regression['dir']}|{renamed}",
        f"export|{regression['dir']}|{a_file}",
        f"predict|{regression['dir']}|{wide}",
    ]
    done = subprocess.run(
        [sys.executable, "-c", script, *calls], capture_output=True, text=True, timeout=120
    )
    assert done.stdout == "False False\n", done.stderr
    lines = done.stderr.splitlines()
    assert (
        lines[0].endswith(
            "the target column holds text: for class labels give --task " "classification"
        )
        and lines[1] == "2"
    ), lines
    assert "columns are read by the header's names" in lines[2] and lines[3] == "2", lines
    assert f"EXPORT_DIR {a_file}: is a file" in lines[4] and lines[5] == "2", lines
    assert "has 5 columns, the model expects 3 features" in lines[6] and lines[7] == "2", lines
