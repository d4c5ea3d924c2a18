"""``avdgp fit --task classification`` on K classes and text labels: the labels kept in the run
folder, written back by ``avdgp predict`` and served by ``avdgp export``; the real data set is
Fisher's Iris (``tests/fixtures/iris.csv``: 150 rows, 3 classes named by text)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from helpers import FIXTURES_DIR, assert_one_line_cli_error, run_cli

from avdgp.cli.predict import _class_rows
from avdgp.errors import CommandLineError

IRIS = FIXTURES_DIR / "iris.csv"
SPECIES = ["setosa", "versicolor", "virginica"]


def _iris_species() -> np.ndarray:
    with open(IRIS, newline="") as handle:
        return np.array([row[-1] for row in list(csv.reader(handle))[1:]])


def _read_csv(path: Path) -> list[list[str]]:
    with open(path, newline="") as handle:
        return list(csv.reader(handle))


def _fit_iris(capsys, tmp_path: Path, *options: str) -> dict:
    """``avdgp fit iris.csv --task classification`` with ``--save`` and ``--json``: the record."""
    status, _, err = run_cli(
        capsys,
        [
            "fit",
            IRIS,
            "--task",
            "classification",
            "--test-fraction",
            "0.3",
            "--learning-rate",
            "0.05",
            "--batch-size",
            "32",
            "--save",
            tmp_path / "run",
            "--json",
            tmp_path / "record.json",
            "--quiet",
            *options,
        ],
    )
    assert status == 0, err
    return json.loads((tmp_path / "record.json").read_text())


def _predict_iris(capsys, tmp_path: Path) -> list[list[str]]:
    status, _, err = run_cli(capsys, ["predict", tmp_path / "run", IRIS, "--out", tmp_path / "p"])
    assert status == 0, err
    return _read_csv(tmp_path / "p")


@pytest.mark.slow
def test_iris_text_labels_fit_and_come_back_from_predict(capsys, tmp_path):
    record = _fit_iris(capsys, tmp_path, "--model", "sgp-avi", "--epochs", "40")
    assert record["task"] == "classification" and record["n_test"] == 45
    assert set(record["test"]) == {"nll", "error_rate", "brier", "ece"}
    assert record["test"]["error_rate"] < 0.2, record["test"]  # chance: 2/3
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["data"]["classes"] == SPECIES and run["data"]["target_name"] == "species"

    rows = _predict_iris(capsys, tmp_path)  # the file with its label column, which is dropped
    assert rows[0] == ["label", "p_setosa", "p_versicolor", "p_virginica"]
    labels = np.array([row[0] for row in rows[1:]])
    probabilities = np.array([[float(p) for p in row[1:]] for row in rows[1:]])
    assert probabilities.shape == (150, 3)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(labels, np.array(SPECIES)[np.argmax(probabilities, axis=1)])
    assert np.mean(labels == _iris_species()) > 0.8


def test_class_rows_name_each_probability_after_its_class():
    binary = _class_rows(np.array([[0.25], [0.75], [0.5]]), ["no", "yes"])
    assert binary == [
        ["label", "p_no", "p_yes"],
        ["no", "0.75", "0.25"],
        ["yes", "0.25", "0.75"],
        ["no", "0.5", "0.5"],  # a tie: the first class, as p > 0.5 decides the second
    ]
    assert _class_rows(np.array([[0.75]]), None)[1] == ["1", "0.25", "0.75"]  # no labels saved
    rows = _class_rows(np.array([[0.1, 0.3, 0.6]]), [1.0, 2.0, 5.0])
    assert rows == [["label", "p_1", "p_2", "p_5"], ["5", "0.1", "0.3", "0.6"]]
    with pytest.raises(CommandLineError, match="run.json lists 2 classes, the model predicts 3"):
        _class_rows(np.array([[0.1, 0.3, 0.6]]), ["a", "b"])


def test_labels_a_spreadsheet_would_run_are_written_as_text():
    """Issue 71, row 9: a label that starts a formula gets a leading quote in the label
    column; numbers and the ``p_`` header names are left as they are."""
    labels = ['=HYPERLINK("http://x")', "@SUM(1+1)", "+1+1", "-x", "\tcmd", "ok", "-1"]
    probabilities = np.eye(len(labels))
    rows = _class_rows(probabilities, labels)
    assert rows[0] == ["label"] + [f"p_{label}" for label in labels]
    assert [row[0] for row in rows[1:]] == [
        '\'=HYPERLINK("http://x")',
        "'@SUM(1+1)",
        "'+1+1",
        "'-x",
        "'\tcmd",
        "ok",
        "-1",
    ]
    assert _class_rows(np.array([[0.2]]), [-1.0, 1.0])[1][0] == "-1"


def test_text_labels_need_the_classification_task(capsys):
    status, out, err = run_cli(capsys, ["fit", IRIS, "--quiet"])
    assert_one_line_cli_error(
        status,
        out,
        err,
        "row 2, column 5 ('setosa') is not a number; the target column holds text: for class "
        "labels give --task classification",
    )


def test_text_in_an_input_column_gets_no_task_hint(capsys, tmp_path):
    data = tmp_path / "d.csv"
    data.write_text("a,b,y\n1,2,3\n1,red,4\n")
    status, out, err = run_cli(capsys, ["fit", data, "--quiet"])
    assert_one_line_cli_error(status, out, err, "row 3, column 2 ('red') is not a number")
    assert "--task" not in err


@pytest.mark.slow
def test_iris_avdgp_is_accurate_and_its_export_serves_the_same_probabilities(capsys, tmp_path):
    """The default model (AVDGP, AR2P, 3 layers), 100 epochs: 1 error in 45 when measured."""
    import tensorflow as tf

    record = _fit_iris(capsys, tmp_path, "--epochs", "100")
    assert record["test"]["error_rate"] < 0.1, record["test"]
    rows = _predict_iris(capsys, tmp_path)
    predicted = np.array([[float(p) for p in row[1:]] for row in rows[1:]])

    status, _, err = run_cli(capsys, ["export", tmp_path / "run", tmp_path / "export"])
    assert status == 0, err
    served = tf.saved_model.load(str(tmp_path / "export"))
    metadata = json.loads(served.metadata().numpy())
    assert metadata["classes"] == SPECIES and metadata["likelihood"] == "MultiClass"
    x = tf.constant(np.loadtxt(IRIS, delimiter=",", skiprows=1, usecols=range(4)))
    probabilities = served.signatures["predict_y"](x=x)["mean"].numpy()
    np.testing.assert_allclose(probabilities, predicted, rtol=1e-12)
    labels = np.searchsorted(SPECIES, _iris_species()).astype(np.float64)[:, None]
    log_density = served.signatures["log_density"](x=x, y=tf.constant(labels))["log_density"]
    expected = np.log(predicted[np.arange(150), labels[:, 0].astype(int)])
    np.testing.assert_allclose(log_density.numpy(), expected, rtol=1e-9)


@pytest.mark.slow
def test_binary_text_labels_are_written_back(capsys, tmp_path, rng):
    x = rng.normal(size=(120, 2))
    label = np.where(x[:, 0] + x[:, 1] > 0, "yes", "no")
    data = tmp_path / "d.csv"
    data.write_text("a,b,answer\n" + "".join(f"{p},{q},{w}\n" for (p, q), w in zip(x, label)))
    status, _, err = run_cli(
        capsys,
        ["fit", data, "--task", "classification", "--model", "svgp", "--epochs", "30"]
        + ["--learning-rate", "0.05", "--save", tmp_path / "run", "--quiet"],
    )
    assert status == 0, err
    status, _, err = run_cli(capsys, ["predict", tmp_path / "run", data, "--out", tmp_path / "p"])
    assert status == 0, err
    rows = _read_csv(tmp_path / "p")
    assert rows[0] == ["label", "p_no", "p_yes"]
    written = np.array([row[0] for row in rows[1:]])
    p_no, p_yes = np.array([[float(p) for p in row[1:]] for row in rows[1:]]).T
    np.testing.assert_allclose(p_no + p_yes, 1.0, rtol=1e-12)
    np.testing.assert_array_equal(written, np.where(p_yes > 0.5, "yes", "no"))
    assert np.mean(written == label) > 0.9


@pytest.mark.slow
def test_streamed_shards_with_three_numeric_classes(capsys, tmp_path, rng):
    folder = tmp_path / "shards"
    folder.mkdir()
    for index in range(3):
        x = rng.normal(size=(60, 2))
        y = 1 + np.argmax(np.stack([x[:, 0], x[:, 1], -x[:, 0] - x[:, 1]], axis=1), axis=1)
        np.savetxt(folder / f"p{index}.csv", np.column_stack([x, y]), delimiter=",", fmt="%.6g")
    status, _, err = run_cli(
        capsys,
        ["fit", folder, "--task", "classification", "--model", "sgp-avi", "--epochs", "20"]
        + ["--learning-rate", "0.05", "--save", tmp_path / "run", "--json", tmp_path / "r.json"]
        + ["--quiet"],
    )
    assert status == 0, err
    record = json.loads((tmp_path / "r.json").read_text())
    assert record["streamed_shards"] == {"train": 2, "test": 1}
    assert record["test"]["error_rate"] < 0.3, record["test"]  # chance: 2/3
    status, _, err = run_cli(
        capsys, ["predict", tmp_path / "run", folder / "p2.csv", "--out", tmp_path / "p"]
    )
    assert status == 0, err
    rows = _read_csv(tmp_path / "p")
    assert rows[0] == ["label", "p_1", "p_2", "p_3"]
    assert {row[0] for row in rows[1:]} <= {"1", "2", "3"}
