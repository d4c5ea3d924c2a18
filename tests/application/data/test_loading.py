"""Data loading, validation, splitting and standardization for the experiment harness."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from helpers import UCI_ROOT

from avdgp.data import (
    DataError,
    Dataset,
    Split,
    Standardizer,
    check_binary_targets,
    load_dataset,
    split_dataset,
    uci_dataset_path,
)


@pytest.fixture
def uci_root() -> Path:
    """The benchmark data folder beside the repository (the tests skip only if it is absent)."""
    if not UCI_ROOT.is_dir():
        pytest.skip(f"benchmark data not found at {UCI_ROOT}")
    return UCI_ROOT


def _write(path: Path, text: str) -> Path:
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8", newline="") as handle:
            handle.write(text)
    else:
        path.write_text(text, encoding="utf-8", newline="")
    return path


def _csv(rows: np.ndarray, delimiter: str = ",", header: list[str] | None = None) -> str:
    lines = [] if header is None else [delimiter.join(header)]
    lines += [delimiter.join(repr(float(v)) for v in row) for row in rows]
    return "\n".join(lines) + "\n"


def _table(rng: np.random.Generator, rows: int = 20, cols: int = 4) -> np.ndarray:
    return np.round(rng.normal(size=(rows, cols)), 6)


# ---------------------------------------------------------------------------------------------
# CSV files
# ---------------------------------------------------------------------------------------------


def test_csv_without_header(tmp_path, rng):
    values = _table(rng)
    dataset = load_dataset(_write(tmp_path / "plain.csv", _csv(values)))
    assert dataset.name == "plain"
    assert dataset.inputs.dtype == np.float64 and dataset.targets.dtype == np.float64
    np.testing.assert_array_equal(dataset.inputs, values[:, :3])
    np.testing.assert_array_equal(dataset.targets, values[:, 3])
    assert (dataset.num_rows, dataset.num_features) == (20, 3)
    assert dataset.feature_names is None and dataset.target_name is None
    assert dataset.test_masks is None


def test_csv_with_header(tmp_path, rng):
    values = _table(rng)
    text = _csv(values, header=["a", "b", "c", "price"])
    dataset = load_dataset(_write(tmp_path / "with_header.csv", text))
    np.testing.assert_array_equal(dataset.inputs, values[:, :3])
    np.testing.assert_array_equal(dataset.targets, values[:, 3])
    assert dataset.feature_names == ["a", "b", "c"]
    assert dataset.target_name == "price"


def test_header_detected_by_any_non_numeric_cell(tmp_path, rng):
    values = _table(rng)
    # Only one header cell is non-numeric; an empty cell (e.g. an index column) is allowed.
    text = _csv(values, header=["", "2", "3", "y"])
    dataset = load_dataset(_write(tmp_path / "partial.csv", text))
    assert dataset.num_rows == 20
    assert dataset.target_name == "y"
    assert dataset.feature_names == ["", "2", "3"]


def test_csv_gz(tmp_path, rng):
    values = _table(rng)
    dataset = load_dataset(_write(tmp_path / "packed.csv.gz", _csv(values, header=list("wxyz"))))
    assert dataset.name == "packed"
    np.testing.assert_array_equal(dataset.inputs, values[:, :3])
    np.testing.assert_array_equal(dataset.targets, values[:, 3])


@pytest.mark.parametrize("delimiter", [";", "\t"])
def test_sniffed_delimiters(tmp_path, rng, delimiter):
    values = _table(rng)
    path = _write(tmp_path / "other.csv", _csv(values, delimiter=delimiter, header=list("abcd")))
    dataset = load_dataset(path)
    np.testing.assert_array_equal(dataset.inputs, values[:, :3])
    assert dataset.feature_names == ["a", "b", "c"]


def test_crlf_bom_quotes_and_blank_lines(tmp_path):
    rows = [f'"{i}",{2 * i},{i * i}' for i in range(12)]
    text = "\ufeffa,b,y\r\n" + "\r\n".join(rows[:6]) + "\r\n\r\n" + "\r\n".join(rows[6:]) + "\r\n"
    dataset = load_dataset(_write(tmp_path / "windows.csv", text))
    np.testing.assert_array_equal(dataset.inputs[:, 0], np.arange(12.0))
    np.testing.assert_array_equal(dataset.targets, np.arange(12.0) ** 2)
    assert dataset.feature_names == ["a", "b"]


@pytest.mark.parametrize(
    "target, column, name",
    [(0, 0, "a"), (2, 2, "c"), (-1, 3, "d"), (-4, 0, "a"), ("b", 1, "b"), ("1", 1, "b")],
)
def test_target_by_index_negative_index_and_name(tmp_path, rng, target, column, name):
    values = _table(rng)
    path = _write(tmp_path / "t.csv", _csv(values, header=list("abcd")))
    dataset = load_dataset(path, target=target)
    keep = [i for i in range(4) if i != column]
    np.testing.assert_array_equal(dataset.targets, values[:, column])
    np.testing.assert_array_equal(dataset.inputs, values[:, keep])
    assert dataset.target_name == name
    assert dataset.feature_names == [c for c in "abcd" if c != name]


def test_target_index_without_header(tmp_path, rng):
    values = _table(rng)
    dataset = load_dataset(_write(tmp_path / "t.csv", _csv(values)), target=-4)
    np.testing.assert_array_equal(dataset.targets, values[:, 0])
    np.testing.assert_array_equal(dataset.inputs, values[:, 1:])


def test_dataset_arrays_are_read_only(tmp_path, rng):
    dataset = load_dataset(_write(tmp_path / "t.csv", _csv(_table(rng))))
    with pytest.raises(ValueError, match="read-only"):
        dataset.inputs[0, 0] = 1.0


def test_large_file_error_is_located(tmp_path, rng):
    values = _table(rng, rows=70_000, cols=5)
    lines = _csv(values).splitlines()
    lines[65_431] = lines[65_431].replace(",", ",oops", 1)  # row 65432, column 2
    path = _write(tmp_path / "big.csv.gz", "\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"big\.csv\.gz: row 65432, column 2 \('oops"):
        load_dataset(path)


# ---------------------------------------------------------------------------------------------
# .npz files
# ---------------------------------------------------------------------------------------------


def test_npz(tmp_path, rng):
    x, y = rng.normal(size=(15, 3)), rng.normal(size=(15, 1))
    np.savez(tmp_path / "arrays.npz", X=x, y=y)
    dataset = load_dataset(tmp_path / "arrays.npz")
    assert dataset.name == "arrays"
    np.testing.assert_array_equal(dataset.inputs, x)
    np.testing.assert_array_equal(dataset.targets, y[:, 0])
    assert dataset.feature_names is None and dataset.test_masks is None


def test_npz_one_dimensional_inputs(tmp_path, rng):
    x, y = rng.normal(size=12), rng.integers(0, 5, size=12)
    np.savez(tmp_path / "line.npz", X=x, y=y)
    dataset = load_dataset(str(tmp_path / "line.npz"))
    assert dataset.inputs.shape == (12, 1)
    np.testing.assert_array_equal(dataset.inputs[:, 0], x)
    np.testing.assert_array_equal(dataset.targets, y.astype(float))


# ---------------------------------------------------------------------------------------------
# UCI folders
# ---------------------------------------------------------------------------------------------


def test_real_uci_folder(uci_root):
    dataset = load_dataset(uci_root / "energy")
    assert dataset.name == "energy"
    assert dataset.inputs.shape == (768, 8)
    assert dataset.targets.shape == (768,)
    assert dataset.test_masks is not None
    assert dataset.test_masks.shape == (768, 10) and dataset.test_masks.dtype == bool
    # The ten test splits partition the data, about 10% each.
    np.testing.assert_array_equal(dataset.test_masks.sum(axis=1), np.ones(768))
    assert set(dataset.test_masks.sum(axis=0).tolist()) <= {76, 77}
    assert np.all(np.isfinite(dataset.inputs))


def test_largest_uci_folder_loads(uci_root):
    folder = uci_root / "keggundirected"
    if not folder.is_dir():
        pytest.skip(f"benchmark data set not found at {folder}")
    dataset = load_dataset(folder)
    assert dataset.inputs.shape == (63608, 27)
    assert dataset.targets.shape == (63608,)
    assert dataset.test_masks.shape == (63608, 10)


def test_uncompressed_uci_layout(tmp_path, rng):
    folder = tmp_path / "tiny"
    folder.mkdir()
    values = _table(rng, rows=12, cols=3)
    masks = np.zeros((12, 2), dtype=int)
    masks[:6, 0] = 1
    masks[6:, 1] = 1
    _write(folder / "data.csv", _csv(values))
    _write(folder / "test_mask.csv", "\n".join(",".join(map(str, row)) for row in masks) + "\n")
    dataset = load_dataset(folder)
    assert dataset.name == "tiny"
    np.testing.assert_array_equal(dataset.targets, values[:, 2])
    np.testing.assert_array_equal(dataset.test_masks, masks.astype(bool))


def test_uci_folder_without_mask(tmp_path, rng):
    folder = tmp_path / "nomask"
    folder.mkdir()
    _write(folder / "data.csv.gz", _csv(_table(rng)))
    dataset = load_dataset(folder)
    assert dataset.test_masks is None and dataset.inputs.shape == (20, 3)


def test_uci_dataset_path(uci_root, monkeypatch):
    monkeypatch.delenv("AVDGP_DATA_ROOT", raising=False)
    assert uci_dataset_path("energy", uci_root) == uci_root / "energy"
    monkeypatch.setenv("AVDGP_DATA_ROOT", str(uci_root))
    assert uci_dataset_path("wine") == uci_root / "wine"
    with pytest.raises(DataError, match=r"unknown data set 'nope'.*available: .*energy"):
        uci_dataset_path("nope")


def test_uci_dataset_path_default_root(tmp_path, monkeypatch):
    monkeypatch.delenv("AVDGP_DATA_ROOT", raising=False)
    (tmp_path / "project").mkdir()
    (tmp_path / "shared" / "data" / "uci" / "toyset").mkdir(parents=True)
    _write(tmp_path / "shared" / "data" / "uci" / "toyset" / "data.csv.gz", "1,2\n")
    monkeypatch.chdir(tmp_path / "project")
    found = uci_dataset_path("toyset")
    assert found.resolve() == (tmp_path / "shared" / "data" / "uci" / "toyset").resolve()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError, match=r"data root '\.\./shared/data/uci' is not a folder"):
        uci_dataset_path("toyset")


def test_uci_dataset_path_lists_only_data_folders(tmp_path):
    for name in ("beta", "alpha"):
        (tmp_path / name).mkdir()
        _write(tmp_path / name / "data.csv.gz", "1,2\n")
    (tmp_path / "empty").mkdir()
    assert uci_dataset_path("alpha", tmp_path) == tmp_path / "alpha"
    with pytest.raises(DataError, match=r"'empty'.*available: alpha, beta$"):
        uci_dataset_path("empty", tmp_path)


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


def _rows(n: int, cols: int = 3) -> list[str]:
    return [",".join(str(float(i * cols + j)) for j in range(cols)) for i in range(n)]


def _with_cell(n: int, row: int, col: int, cell: str, header: str | None = None) -> str:
    """``n`` numeric rows of 4 columns with ``cell`` at 1-based ``row``/``col`` of the file."""
    lines = ([header] if header else []) + _rows(n, 4)
    cells = lines[row - 1].split(",")
    cells[col - 1] = cell
    lines[row - 1] = ",".join(cells)
    return "\n".join(lines) + "\n"


CSV_ERRORS = [
    ("empty.csv", "", r"empty\.csv: the file is empty"),
    ("blank.csv", "\n  \n\n", r"blank\.csv: the file is empty"),
    ("empty.csv.gz", "", r"empty\.csv\.gz: the file is empty"),
    (
        "ragged.csv",
        "\n".join(_rows(5)) + "\n1.0,2.0\n",
        r"ragged\.csv: row 6 has 2 columns but the first row has 3",
    ),
    (
        "ragged_header.csv",
        "a,b,c\n" + "\n".join(_rows(12)) + "\n1,2,3,4\n",
        r"row 14 has 4 columns but the header has 3",
    ),
    (
        "header_width.csv",
        "a,b\n" + "\n".join(_rows(12)) + "\n",
        r"the header \(row 1\) has 2 columns but the data rows have 3",
    ),
    ("data.csv", _with_cell(20, 17, 3, "abc"), r"data\.csv: row 17, column 3 \('abc'\) is not a"),
    (
        "headed.csv",
        _with_cell(20, 17, 3, "abc", header="p,q,r,s"),
        r"headed\.csv: row 17, column 3 \('abc'\) is not a number",
    ),
    ("hole.csv", _with_cell(20, 5, 2, ""), r"hole\.csv: row 5, column 2 \(''\) is empty"),
    ("under.csv", _with_cell(20, 3, 1, "1_000"), r"row 3, column 1 \('1_000'\) is not a number"),
    (
        "nan.csv",
        _with_cell(20, 4, 2, "nan").replace("\n", "\n\n", 7),  # blank lines shift row numbers
        r"nan\.csv: 1 value is NaN or infinite \(first at row 7, column 2: nan\)",
    ),
    (
        "infs.csv",
        _with_cell(20, 9, 4, "-inf").replace("4.0,5.0", "4.0,inf").replace("1.0,2.0", "nan,2.0"),
        r"infs\.csv: 3 values are NaN or infinite \(first at row 1, column 2: nan\)",
    ),
    ("short.csv", "\n".join(_rows(9)) + "\n", r"short\.csv: 9 data rows, fewer than the 10"),
    ("headeronly.csv", "a,b,c\n", r"headeronly\.csv: the file has a header but no data rows"),
    ("onecol.csv", "\n".join(str(i) for i in range(20)) + "\n", r"found 1 column; need at least 2"),
]


@pytest.mark.parametrize("filename, text, message", CSV_ERRORS, ids=[c[0] for c in CSV_ERRORS])
def test_csv_errors(tmp_path, filename, text, message):
    path = _write(tmp_path / filename, text)
    with pytest.raises(DataError, match=message):
        load_dataset(path)


@pytest.mark.parametrize(
    "target, message",
    [
        (3, r"target column 3 is out of range for 3 columns \(valid: -3\.\.2\)"),
        (-4, r"target column -4 is out of range for 3 columns"),
        ("price", r"unknown target column 'price'; the columns are 'a', 'b', 'c'"),
        (1.5, r"target must be a column index or name, got 1\.5"),
    ],
)
def test_target_errors(tmp_path, target, message):
    path = _write(tmp_path / "t.csv", "a,b,c\n" + "\n".join(_rows(12)) + "\n")
    with pytest.raises(DataError, match=message):
        load_dataset(path, target=target)


def test_target_name_without_header(tmp_path):
    path = _write(tmp_path / "t.csv", "\n".join(_rows(12)) + "\n")
    with pytest.raises(DataError, match=r"target 'y' is a column name but the file has no header"):
        load_dataset(path, target="y")


def test_path_errors(tmp_path):
    with pytest.raises(DataError, match=r"missing\.csv: no such file or folder"):
        load_dataset(tmp_path / "missing.csv")
    with pytest.raises(DataError, match=r"table\.xlsx: unsupported file type"):
        load_dataset(_write(tmp_path / "table.xlsx", "1,2\n"))
    with pytest.raises(DataError, match=r"folder has no data\.csv\.gz or data\.csv"):
        load_dataset(tmp_path)


def test_unreadable_files(tmp_path):
    (tmp_path / "fake.csv.gz").write_bytes(b"this is not gzip data at all")
    with pytest.raises(DataError, match=r"fake\.csv\.gz: could not read the file"):
        load_dataset(tmp_path / "fake.csv.gz")
    (tmp_path / "binary.csv").write_bytes(bytes(range(128, 256)) * 4)
    with pytest.raises(DataError, match=r"binary\.csv: not a UTF-8 text file"):
        load_dataset(tmp_path / "binary.csv")
    (tmp_path / "broken.npz").write_bytes(b"PK not really a zip")
    with pytest.raises(DataError, match=r"broken\.npz: could not read the \.npz file"):
        load_dataset(tmp_path / "broken.npz")


def test_npz_errors(tmp_path, rng):
    np.savez(tmp_path / "nox.npz", inputs=rng.normal(size=(12, 2)), y=np.zeros(12))
    with pytest.raises(DataError, match=r"nox\.npz: missing array 'X' \(found: 'inputs', 'y'\)"):
        load_dataset(tmp_path / "nox.npz")
    np.savez(tmp_path / "noy.npz", X=rng.normal(size=(12, 2)))
    with pytest.raises(DataError, match=r"missing array 'y'"):
        load_dataset(tmp_path / "noy.npz")
    np.savez(tmp_path / "mismatch.npz", X=rng.normal(size=(12, 2)), y=np.zeros(11))
    with pytest.raises(DataError, match=r"'X' has 12 rows but 'y' has 11"):
        load_dataset(tmp_path / "mismatch.npz")
    np.savez(tmp_path / "wide_y.npz", X=rng.normal(size=(12, 2)), y=np.zeros((12, 2)))
    with pytest.raises(DataError, match=r"'y' must be \[N\] or \[N, 1\], got shape \(12, 2\)"):
        load_dataset(tmp_path / "wide_y.npz")
    x = rng.normal(size=(12, 2))
    x[4, 1] = np.nan
    x[7, 0] = np.inf
    np.savez(tmp_path / "nan.npz", X=x, y=np.zeros(12))
    with pytest.raises(
        DataError, match=r"2 values are NaN or infinite in 'X' \(first at row 5, col"
    ):
        load_dataset(tmp_path / "nan.npz")
    np.savez(tmp_path / "text.npz", X=np.array([["a", "b"]] * 12), y=np.zeros(12))
    with pytest.raises(DataError, match=r"array 'X' has non-numeric dtype"):
        load_dataset(tmp_path / "text.npz")
    np.savez(tmp_path / "ok.npz", X=rng.normal(size=(12, 2)), y=np.zeros(12))
    with pytest.raises(DataError, match=r"a target column cannot be chosen for \.npz files"):
        load_dataset(tmp_path / "ok.npz", target=0)
    with pytest.raises(DataError, match=r"ok\.npz: 12 data rows, fewer than the 20 required"):
        load_dataset(tmp_path / "ok.npz", min_rows=20)


def test_test_mask_errors(tmp_path, rng):
    folder = tmp_path / "masked"
    folder.mkdir()
    _write(folder / "data.csv.gz", _csv(_table(rng, rows=12)))
    _write(folder / "test_mask.csv.gz", "1,0\n0,1\n" * 5)
    with pytest.raises(
        DataError, match=r"test_mask\.csv\.gz: has 10 rows but .*data\.csv\.gz has 12"
    ):
        load_dataset(folder)
    _write(folder / "test_mask.csv.gz", "1,0\n0,1\n" * 3 + "0,2\n" + "1,0\n" * 5)
    with pytest.raises(
        DataError, match=r"1 values are not 0 or 1 \(first at row 7, column 2: 2\.0"
    ):
        load_dataset(folder)


# ---------------------------------------------------------------------------------------------
# Splits
# ---------------------------------------------------------------------------------------------


def _indexed_dataset(n: int, masks: np.ndarray | None = None) -> Dataset:
    """Inputs hold the row index in column 0, so parts can be traced back to rows."""
    ids = np.arange(n, dtype=float)
    return Dataset(
        name="indexed",
        inputs=np.stack([ids, -ids], axis=1),
        targets=10.0 * ids,
        test_masks=masks,
    )


def _ids(x: np.ndarray) -> np.ndarray:
    return x[:, 0].astype(int)


def test_random_split_proportions_disjoint_covering():
    dataset = _indexed_dataset(200)
    split = split_dataset(dataset, seed=3)
    assert split.x_train.shape == (160, 2) and split.y_train.shape == (160, 1)
    assert split.x_val.shape == (20, 2) and split.y_val.shape == (20, 1)
    assert split.x_test.shape == (20, 2) and split.y_test.shape == (20, 1)
    parts = [_ids(split.x_train), _ids(split.x_val), _ids(split.x_test)]
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(200))
    for x, y in [(split.x_train, split.y_train), (split.x_val, split.y_val)]:
        np.testing.assert_array_equal(y[:, 0], 10.0 * x[:, 0])  # rows stay paired
    np.testing.assert_array_equal(split.y_test[:, 0], 10.0 * split.x_test[:, 0])


def test_random_split_is_deterministic_per_seed():
    dataset = _indexed_dataset(100)
    first, again, other = (split_dataset(dataset, seed=s) for s in (7, 7, 8))
    np.testing.assert_array_equal(first.x_test, again.x_test)
    np.testing.assert_array_equal(first.x_val, again.x_val)
    np.testing.assert_array_equal(first.x_train, again.x_train)
    assert not np.array_equal(first.x_test, other.x_test)
    assert (first.x_train.shape[0], first.x_val.shape[0], first.x_test.shape[0]) == (80, 10, 10)


def test_random_split_custom_fractions_and_empty_validation():
    dataset = _indexed_dataset(50)
    split = split_dataset(dataset, seed=0, test_fraction=0.3, val_fraction=0.0)
    assert split.x_test.shape == (15, 2) and split.x_train.shape == (35, 2)
    assert split.x_val.shape == (0, 2) and split.y_val.shape == (0, 1)


def test_split_by_mask_reproduces_mask():
    n = 60
    masks = np.zeros((n, 3), dtype=bool)
    masks[np.arange(n), np.arange(n) % 3] = True
    dataset = _indexed_dataset(n, masks)
    split = split_dataset(dataset, split=1, seed=5, val_fraction=0.25)
    np.testing.assert_array_equal(_ids(split.x_test), np.flatnonzero(masks[:, 1]))
    rest = np.flatnonzero(~masks[:, 1])
    assert split.x_val.shape[0] == 10  # a quarter of the 40 remaining rows
    assert split.x_train.shape[0] == 30
    np.testing.assert_array_equal(
        np.sort(np.concatenate([_ids(split.x_train), _ids(split.x_val)])), rest
    )
    other = split_dataset(dataset, split=1, seed=6, val_fraction=0.25)
    np.testing.assert_array_equal(other.x_test, split.x_test)
    assert not np.array_equal(other.x_val, split.x_val)


def test_split_by_real_mask(uci_root):
    dataset = load_dataset(uci_root / "energy")
    for k in (0, 9):
        split = split_dataset(dataset, split=k)
        mask = dataset.test_masks[:, k]
        np.testing.assert_array_equal(split.x_test, dataset.inputs[mask])
        np.testing.assert_array_equal(split.y_test[:, 0], dataset.targets[mask])
        assert split.x_train.shape[0] + split.x_val.shape[0] == np.count_nonzero(~mask)
        assert split.x_val.shape[0] == round(0.1 * np.count_nonzero(~mask))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"split": 0}, r"indexed: has no predefined test splits"),
        ({"test_fraction": 0.0}, r"test_fraction: expected a number in \(0, 1\)"),
        ({"test_fraction": -0.1}, r"test_fraction: expected a number in \[0, 1\)"),
        ({"val_fraction": 1.0}, r"val_fraction: expected a number in \[0, 1\)"),
        ({"val_fraction": float("nan")}, r"val_fraction: expected a number"),
        ({"test_fraction": 0.5, "val_fraction": 0.5}, r"test_fraction \+ val_fraction must be < 1"),
        ({"test_fraction": 0.01}, r"leaves no test rows out of 20"),
        ({"test_fraction": 0.5, "val_fraction": 0.45}, r"leaves 1 training rows out of 20"),
        ({"seed": -1}, r"seed: expected an integer >= 0"),
    ],
)
def test_split_errors(kwargs, message):
    with pytest.raises(DataError, match=message):
        split_dataset(_indexed_dataset(20), **kwargs)


def test_split_mask_index_errors():
    masks = np.zeros((20, 2), dtype=bool)
    masks[:10, 0] = True
    dataset = _indexed_dataset(20, masks)
    with pytest.raises(DataError, match=r"split 2 is out of range; .* 2 test splits \(0\.\.1\)"):
        split_dataset(dataset, split=2)
    with pytest.raises(DataError, match=r"split -1 is out of range"):
        split_dataset(dataset, split=-1)
    with pytest.raises(DataError, match=r"split 1 leaves no test rows"):
        split_dataset(dataset, split=1)


# ---------------------------------------------------------------------------------------------
# Standardizer
# ---------------------------------------------------------------------------------------------


def test_standardizer_round_trip(rng):
    x = rng.normal(loc=[3.0, -2.0, 100.0], scale=[0.5, 4.0, 20.0], size=(50, 3))
    y = rng.normal(loc=7.0, scale=3.0, size=(50, 1))
    standardizer = Standardizer.fit(x, y)
    z = standardizer.transform_x(x)
    np.testing.assert_allclose(z.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(z.std(axis=0), 1.0, rtol=1e-12)
    u = standardizer.transform_y(y)
    assert u.shape == (50, 1)
    np.testing.assert_allclose([u.mean(), u.std()], [0.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(standardizer.inverse_transform_y(u), y, rtol=1e-12)
    np.testing.assert_allclose(standardizer.y_std, y.std())
    np.testing.assert_allclose(standardizer.x_mean, x.mean(axis=0))


def test_standardizer_transforms_every_part_of_a_split_with_the_train_moments(rng):
    x = rng.normal(loc=5.0, scale=2.0, size=(30, 2))
    y = rng.normal(loc=-1.0, scale=3.0, size=(30, 1))
    split = Split(x[:20], y[:20], x[20:25], y[20:25], x[25:], y[25:])
    scaler = Standardizer.fit(split.x_train, split.y_train)
    scaled = scaler.transform_split(split)
    mean, std = x[:20].mean(axis=0), x[:20].std(axis=0)
    y_mean, y_std = y[:20].mean(), y[:20].std()
    for part, rows in (("train", slice(0, 20)), ("val", slice(20, 25)), ("test", slice(25, 30))):
        np.testing.assert_allclose(getattr(scaled, f"x_{part}"), (x[rows] - mean) / std)
        np.testing.assert_allclose(getattr(scaled, f"y_{part}"), (y[rows] - y_mean) / y_std)


def test_standardizer_constant_column_and_unscaled_targets(rng):
    x = rng.normal(size=(40, 3))
    x[:, 1] = 0.1  # constant, with mean round-off
    y = rng.integers(0, 2, size=40).astype(float)
    standardizer = Standardizer.fit(x, y, standardize_targets=False)
    assert standardizer.x_std[1] == 1.0
    z = standardizer.transform_x(x)
    assert np.all(np.isfinite(z))
    np.testing.assert_allclose(z[:, 1], 0.0, atol=1e-15)
    assert (standardizer.y_mean, standardizer.y_std) == (0.0, 1.0)
    np.testing.assert_array_equal(standardizer.transform_y(y), y)
    constant = Standardizer.fit(x, np.full(40, 5.0))
    assert constant.y_std == 1.0 and constant.y_mean == 5.0
    with pytest.raises(DataError, match=r"inputs have 2 columns; the standardizer was fitted to 3"):
        standardizer.transform_x(x[:, :2])


# ---------------------------------------------------------------------------------------------
# Binary targets
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "labels, expected",
    [
        ([0, 1, 1, 0], [0, 1, 1, 0]),
        ([-1, 1, 1, -1], [0, 1, 1, 0]),
        ([2, 1, 2, 2], [1, 0, 1, 1]),
        ([7.5, 3.25, 3.25, 7.5], [1, 0, 0, 1]),
    ],
)
def test_check_binary_targets_mappings(labels, expected):
    result = check_binary_targets(np.array(labels))
    assert result.dtype == np.float64
    np.testing.assert_array_equal(result, np.array(expected, dtype=float))
    column = check_binary_targets(np.array(labels)[:, None])
    assert column.shape == (4, 1)
    np.testing.assert_array_equal(column[:, 0], expected)


@pytest.mark.parametrize(
    "labels, message",
    [
        ([1, 1, 1], r"exactly 2 distinct target values, found 1: 1$"),
        ([0, 1, 2, 1], r"exactly 2 distinct target values, found 3: 0, 1, 2$"),
        (list(range(12)), r"found 12: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, \.\.\.$"),
        ([0.0, 1.0, np.nan], r"1 NaN or infinite"),
        ([], r"classification targets are empty"),
    ],
)
def test_check_binary_targets_errors(labels, message):
    with pytest.raises(DataError, match=message):
        check_binary_targets(np.array(labels, dtype=float))
