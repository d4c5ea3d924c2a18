"""Class labels: numbers or text mapped to class indices, read from CSV and ``.npz`` files."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from helpers import FIXTURES_DIR

from avdgp.data import (
    MAX_CLASSES,
    DataError,
    Dataset,
    encode_labels,
    format_label,
    load_dataset,
)
from avdgp.data.labels import check_class_count

IRIS = FIXTURES_DIR / "iris.csv"


def _write(path: Path, text: str) -> Path:
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- encode_labels
def test_text_labels_are_sorted_and_stripped():
    indices, classes = encode_labels(["yes", " no", "maybe ", "yes"])
    assert classes == ("maybe", "no", "yes")
    np.testing.assert_array_equal(indices, [2.0, 1.0, 0.0, 2.0])
    assert indices.dtype == np.float64


def test_numeric_labels_are_sorted_by_value_and_equal_numbers_are_one_class():
    indices, classes = encode_labels(["10", "9", "1.0", "1", 9.0])
    assert classes == (1.0, 9.0, 10.0)  # by value, not as text ("10" < "9")
    np.testing.assert_array_equal(indices, [2.0, 1.0, 0.0, 0.0, 1.0])


def test_binary_numeric_labels_keep_their_meaning():
    """As ``check_binary_targets`` did: the larger label is class 1."""
    indices, classes = encode_labels([1.0, -1.0, 1.0])
    assert classes == (-1.0, 1.0)
    np.testing.assert_array_equal(indices, [1.0, 0.0, 1.0])


def test_a_label_that_is_not_a_number_makes_all_labels_text():
    _, classes = encode_labels(["1", "2", "two"])
    assert classes == ("1", "2", "two")


@pytest.mark.parametrize(
    "labels, message",
    [
        (["a", " ", "b"], "row 2: the class label is empty"),
        ([0.0, float("nan"), 1.0], "class label 'nan' is not a finite number"),
    ],
)
def test_bad_labels_are_named(labels, message):
    with pytest.raises(DataError, match=message):
        encode_labels(labels, "y")


@pytest.mark.parametrize(
    "classes, message",
    [
        (("only",), "needs at least 2 classes, the target has 1: only"),
        (tuple(float(k) for k in range(MAX_CLASSES + 1)), "more than 100 distinct values"),
        ((0.0, 0.5, 1.0), "3 distinct numbers, not all integers \\(0, 0.5, 1\\)"),
    ],
)
def test_targets_that_are_no_classification_targets_are_refused(classes, message):
    with pytest.raises(DataError, match=message):
        check_class_count(classes, "data.csv")


def test_two_fractional_labels_and_many_integer_or_text_labels_are_classes():
    check_class_count((0.5, 1.5), "x")
    check_class_count(tuple(float(k) for k in range(MAX_CLASSES)), "x")
    check_class_count(("a", "b", "c"), "x")


def test_labels_are_written_as_the_data_wrote_them():
    assert [format_label(v) for v in (2.0, -1.0, 0.5, "setosa")] == ["2", "-1", "0.5", "setosa"]


# --------------------------------------------------------------------------- load_dataset
def test_iris_loads_with_its_three_text_classes():
    dataset = load_dataset(IRIS, class_labels=True)
    assert dataset.classes == ("setosa", "versicolor", "virginica")
    assert dataset.num_classes == 3 and dataset.num_rows == 150 and dataset.num_features == 4
    np.testing.assert_array_equal(np.bincount(dataset.targets.astype(int)), [50, 50, 50])
    assert dataset.target_name == "species"
    assert dataset.feature_names == ["sepal_length", "sepal_width", "petal_length", "petal_width"]
    np.testing.assert_array_equal(dataset.inputs[0], [5.1, 3.5, 1.4, 0.2])
    assert "num_classes=3" in repr(dataset)


def test_text_labels_without_class_labels_name_the_cell():
    with pytest.raises(DataError, match=r"row 2, column 5 \('setosa'\) is not a number"):
        load_dataset(IRIS)


def test_a_first_line_with_a_text_label_is_data_not_a_header(tmp_path):
    """Without a header, ``5.1,3.5,yes`` is the first data row: only the label is text."""
    path = _write(tmp_path / "d.csv.gz", "5.1,3.5,yes\n1,2, no\n3,4,yes\n" * 4)
    dataset = load_dataset(path, class_labels=True)
    assert dataset.num_rows == 12 and dataset.feature_names is None
    assert dataset.classes == ("no", "yes")
    np.testing.assert_array_equal(dataset.targets[:3], [1.0, 0.0, 1.0])


def test_a_named_label_column_in_the_middle(tmp_path):
    path = _write(tmp_path / "d.csv", "a;kind;b\n" + "1;cat;2\n3;dog;4\n5;cat;6\n" * 4)
    dataset = load_dataset(path, target="kind", class_labels=True)
    assert dataset.classes == ("cat", "dog") and dataset.feature_names == ["a", "b"]
    np.testing.assert_array_equal(dataset.inputs[:2], [[1.0, 2.0], [3.0, 4.0]])


def test_utf8_and_quoted_labels(tmp_path):
    path = _write(tmp_path / "d.csv", "x,y\n" + '1,"café, noir"\n2,niño\n' * 6)
    assert load_dataset(path, class_labels=True).classes == ("café, noir", "niño")


@pytest.mark.parametrize(
    "text, message",
    [
        ("a,b,y\n" + "1,2,x\n3,4,\n" * 6, r"row 3, column 3 \(''\) is empty"),
        ("a,b,y\n" + "1,2,x\n3,q,z\n" * 6, r"row 3, column 2 \('q'\) is not a number"),
        ("a,b,y\n" + "1,2,x\n" * 12, "needs at least 2 classes, the target has 1: x"),
        ("a,y\n" + "".join(f"{i},{i / 7:.3f}\n" for i in range(12)), "not all integers"),
    ],
)
def test_bad_label_files_are_refused_with_the_cell(tmp_path, text, message):
    with pytest.raises(DataError, match=message):
        load_dataset(_write(tmp_path / "d.csv", text), class_labels=True)


def test_npz_labels_may_be_text_or_numbers(tmp_path):
    x = np.arange(24.0).reshape(12, 2)
    np.savez(tmp_path / "t.npz", X=x, y=np.array(["b", "a", "c"] * 4)[:, None])
    dataset = load_dataset(tmp_path / "t.npz", class_labels=True)
    assert dataset.classes == ("a", "b", "c")
    np.testing.assert_array_equal(dataset.targets[:3], [1.0, 0.0, 2.0])
    np.savez(tmp_path / "n.npz", X=x, y=np.array([3, 1, 2] * 4))
    assert load_dataset(tmp_path / "n.npz", class_labels=True).classes == (1.0, 2.0, 3.0)
    with pytest.raises(DataError, match="array 'y' has non-numeric dtype <U1"):
        load_dataset(tmp_path / "t.npz")


def test_a_uci_folder_with_class_labels_keeps_its_test_masks(tmp_path):
    folder = tmp_path / "uci"
    folder.mkdir()
    _write(folder / "data.csv", "1,2,a\n3,4,b\n" * 6)
    _write(folder / "test_mask.csv", "1\n0\n" * 6)
    dataset = load_dataset(folder, class_labels=True)
    assert dataset.classes == ("a", "b") and dataset.test_masks.shape == (12, 1)


def test_a_dataset_checks_its_class_indices():
    with pytest.raises(DataError, match="expected class indices 0..1 with classes, row 2 is 2.0"):
        Dataset("d", np.zeros((3, 1)), np.array([0.0, 2.0, 1.0]), classes=("a", "b"))
