"""Loading, checking, splitting and standardizing tabular data for the experiments.

Every problem with the user's data is reported as a :class:`DataError` with a one-line message
that names the file and, where it helps, the row (1-based, counted as lines of the file, so a
header is row 1) and the column (1-based) of the offending cell. The command-line interface
prints that message and exits; nothing here should surface as a traceback for bad input.

Supported inputs (see :func:`load_dataset`):

- a ``.csv`` or ``.csv.gz`` file, delimited by ``,``, ``;`` or a tab (sniffed from the first
  line), with an optional header row; one column is the target, the others are inputs;
- a ``.npz`` file with arrays ``X`` ([N, D] or [N]) and ``y`` ([N] or [N, 1]);
- a folder in the UCI benchmark layout: ``data.csv.gz`` (or ``data.csv``; no header, last column
  is the target) and optionally ``test_mask.csv.gz`` (or ``test_mask.csv``; [N, K] of 0/1,
  column ``k`` marks the test rows of split ``k``).
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import os
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Union

import numpy as np

__all__ = [
    "DataError",
    "Dataset",
    "Split",
    "Standardizer",
    "check_binary_targets",
    "load_dataset",
    "split_dataset",
    "uci_dataset_path",
]

PathLike = Union[str, "os.PathLike[str]"]

#: Environment variable that overrides the default root folder of the UCI benchmark data.
DATA_ROOT_ENV = "AVDGP_DATA_ROOT"

_DELIMITERS = (",", ";", "\t")
_DELIMITER_NAMES = {",": "comma", ";": "semicolon", "\t": "tab"}
_MAX_LISTED = 10


class DataError(ValueError):
    """Bad input data; the message is one line meant for the user, without a traceback."""


# ---------------------------------------------------------------------------------------------
# Containers
# ---------------------------------------------------------------------------------------------


def _readonly(array: np.ndarray) -> np.ndarray:
    array = np.ascontiguousarray(array)
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False)
class Dataset:
    """A regression or classification data set held in memory.

    The arrays are stored as read-only float64 (``test_masks`` as bool) copies.

    :param name: Short name, e.g. the file stem or the UCI folder name.
    :param inputs: Inputs, [N, D] float64.
    :param targets: Targets, [N] float64.
    :param test_masks: Optional predefined test splits, [N, K] bool; column ``k`` marks the test
        rows of split ``k``.
    :param feature_names: Optional names of the ``D`` input columns (from a CSV header).
    :param target_name: Optional name of the target column (from a CSV header).
    """

    name: str
    inputs: np.ndarray
    targets: np.ndarray
    test_masks: Optional[np.ndarray] = None
    feature_names: Optional[list[str]] = None
    target_name: Optional[str] = None

    def __post_init__(self) -> None:
        inputs = np.asarray(self.inputs, dtype=np.float64)
        targets = np.asarray(self.targets, dtype=np.float64)
        if inputs.ndim != 2:
            raise DataError(f"{self.name}: inputs must be a 2-d array [N, D], got {inputs.shape}")
        if targets.ndim != 1 or targets.shape[0] != inputs.shape[0]:
            raise DataError(
                f"{self.name}: targets must be a 1-d array of {inputs.shape[0]} values, "
                f"got shape {targets.shape}"
            )
        object.__setattr__(self, "inputs", _readonly(inputs))
        object.__setattr__(self, "targets", _readonly(targets))
        if self.test_masks is not None:
            masks = np.asarray(self.test_masks)
            if masks.ndim != 2 or masks.shape[0] != inputs.shape[0]:
                raise DataError(
                    f"{self.name}: test_masks must be a 2-d array [{inputs.shape[0]}, K], "
                    f"got shape {masks.shape}"
                )
            object.__setattr__(self, "test_masks", _readonly(masks.astype(bool)))
        if self.feature_names is not None:
            names = [str(n) for n in self.feature_names]
            if len(names) != inputs.shape[1]:
                raise DataError(
                    f"{self.name}: {len(names)} feature names for {inputs.shape[1]} input columns"
                )
            object.__setattr__(self, "feature_names", names)

    @property
    def num_rows(self) -> int:
        """Number of observations ``N``."""
        return int(self.inputs.shape[0])

    @property
    def num_features(self) -> int:
        """Number of input columns ``D``."""
        return int(self.inputs.shape[1])

    def __repr__(self) -> str:
        masks = "none" if self.test_masks is None else str(self.test_masks.shape[1])
        return (
            f"Dataset(name={self.name!r}, num_rows={self.num_rows}, "
            f"num_features={self.num_features}, test_masks={masks})"
        )


@dataclass(frozen=True, eq=False)
class Split:
    """Train / validation / test parts of a data set (validation may have 0 rows).

    :param x_train: Training inputs, [n_train, D].
    :param y_train: Training targets, [n_train, 1].
    :param x_val: Validation inputs, [n_val, D].
    :param y_val: Validation targets, [n_val, 1].
    :param x_test: Test inputs, [n_test, D].
    :param y_test: Test targets, [n_test, 1].
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    def __repr__(self) -> str:
        return (
            f"Split(train={self.x_train.shape[0]}, val={self.x_val.shape[0]}, "
            f"test={self.x_test.shape[0]}, num_features={self.x_train.shape[1]})"
        )


# ---------------------------------------------------------------------------------------------
# CSV parsing
# ---------------------------------------------------------------------------------------------


def _is_number(cell: str) -> bool:
    """Whether ``cell`` parses as a float the way ``np.loadtxt`` would (``nan``/``inf`` do)."""
    text = cell.strip()
    if not text or "_" in text:
        return False
    try:
        float(text)
    except ValueError:
        return False
    return True


def _open_text(path: Path) -> io.TextIOBase:
    """Open a (possibly gzip-compressed) text file for reading, dropping a UTF-8 BOM."""
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8-sig", newline="")
    return open(path, encoding="utf-8-sig", newline="")


def _sniff_delimiter(line: str) -> str:
    """The most frequent of ``,``, ``;`` and tab in ``line`` (comma when none occurs)."""
    counts = [line.count(d) for d in _DELIMITERS]
    best = max(range(len(_DELIMITERS)), key=lambda i: (counts[i], -i))
    return _DELIMITERS[best] if counts[best] > 0 else ","


def _records(path: Path, delimiter: str, first_line: int) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(line number, cells)`` for the non-empty records from line ``first_line`` on.

    Empty lines are skipped, like ``np.loadtxt`` does; a whitespace-only line is a record.
    """
    with _open_text(path) as handle:
        for _ in range(first_line - 1):
            if not handle.readline():
                return
        reader = csv.reader(handle, delimiter=delimiter, quotechar='"')
        offset = first_line - 1
        for cells in reader:
            if cells:
                yield offset + reader.line_num, cells


@dataclass(frozen=True)
class _Table:
    values: np.ndarray  # [N, C] float64
    header: Optional[list[str]]
    first_data_line: int  # 1-based line number where the data rows start
    delimiter: str


def _locate_parse_error(
    path: Path,
    label: str,
    table_start: int,
    delimiter: str,
    header: Optional[list[str]],
    fallback: str,
) -> DataError:
    """Re-scan a CSV file that ``np.loadtxt`` rejected and describe the first bad cell."""
    expected = len(header) if header is not None else None
    for line_no, cells in _records(path, delimiter, table_start):
        if expected is None:
            expected = len(cells)
        elif len(cells) != expected:
            what = "the header" if header is not None else "the first row"
            return DataError(
                f"{label}: row {line_no} has {len(cells)} columns but {what} has {expected} "
                f"({_DELIMITER_NAMES[delimiter]}-delimited)"
            )
        for col, cell in enumerate(cells, start=1):
            if not _is_number(cell):
                shown = cell if len(cell) <= 40 else cell[:37] + "..."
                reason = "is empty" if not cell.strip() else "is not a number"
                return DataError(f"{label}: row {line_no}, column {col} ({shown!r}) {reason}")
    return DataError(f"{label}: could not parse the file ({fallback})")


def _read_csv(path: Path, label: str) -> _Table:
    """Parse a numeric CSV file (optional header) into a float64 array [N, C]."""
    try:
        with _open_text(path) as handle:
            line_no = 0
            first = None
            while True:
                line = handle.readline()
                if not line:
                    break
                line_no += 1
                if line.strip():
                    first = line
                    break
        if first is None:
            raise DataError(f"{label}: the file is empty")
        delimiter = _sniff_delimiter(first)
        cells = next(csv.reader([first], delimiter=delimiter, quotechar='"'))
        has_header = any(cell.strip() and not _is_number(cell) for cell in cells)
        header = [cell.strip() for cell in cells] if has_header else None
        data_start = line_no + 1 if has_header else line_no

        try:
            with _open_text(path) as handle, warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "input contained no data"
                values = np.loadtxt(
                    handle,
                    delimiter=delimiter,
                    skiprows=data_start - 1,
                    dtype=np.float64,
                    ndmin=2,
                    comments=None,
                    quotechar='"',
                )
        except ValueError as err:
            raise _locate_parse_error(
                path, label, data_start, delimiter, header, str(err).split("\n")[0]
            ) from None
    except DataError:
        raise
    except UnicodeDecodeError:
        raise DataError(f"{label}: not a UTF-8 text file") from None
    except (OSError, EOFError, csv.Error, zipfile.BadZipFile) as err:
        raise DataError(f"{label}: could not read the file ({err})") from None

    if values.shape[0] == 0:
        raise DataError(f"{label}: the file has a header but no data rows")
    if header is not None and len(header) != values.shape[1]:
        raise DataError(
            f"{label}: the header (row {line_no}) has {len(header)} columns "
            f"but the data rows have {values.shape[1]}"
        )
    return _Table(values, header, data_start, delimiter)


def _file_line(table: _Table, path: Path, row: int) -> int:
    """The line number in ``path`` of data row ``row`` (0-based) of ``table``."""
    for index, (number, _) in enumerate(_records(path, table.delimiter, table.first_data_line)):
        if index == row:
            return number
    return table.first_data_line + row


def _check_finite_table(table: _Table, path: Path, label: str) -> None:
    """Raise a :class:`DataError` naming the first NaN/inf cell of ``table`` and their count."""
    bad = ~np.isfinite(table.values)
    if not bad.any():
        return
    count = int(bad.sum())
    row, col = (int(i) for i in np.argwhere(bad)[0])
    line_no = _file_line(table, path, row)
    plural = "value is" if count == 1 else "values are"
    raise DataError(
        f"{label}: {count} {plural} NaN or infinite (first at row {line_no}, column {col + 1}: "
        f"{table.values[row, col]!r})"
    )


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------


def _resolve_target(
    target: object, num_columns: int, header: Optional[list[str]], label: str
) -> int:
    """The 0-based column index selected by ``target`` (index, negative index, or name)."""
    if isinstance(target, str):
        if header is not None:
            matches = [i for i, name in enumerate(header) if name == target.strip()]
            if len(matches) > 1:
                raise DataError(f"{label}: the header names column {target!r} more than once")
            if matches:
                return matches[0]
        try:
            index = int(target.strip())
        except ValueError:
            if header is None:
                raise DataError(
                    f"{label}: target {target!r} is a column name but the file has no header; "
                    f"give a column index in {-num_columns}..{num_columns - 1}"
                ) from None
            names = ", ".join(repr(n) for n in header)
            raise DataError(
                f"{label}: unknown target column {target!r}; the columns are {names}"
            ) from None
    elif isinstance(target, (int, np.integer)) and not isinstance(target, bool):
        index = int(target)
    else:
        raise DataError(f"{label}: target must be a column index or name, got {target!r}")
    if not -num_columns <= index < num_columns:
        raise DataError(
            f"{label}: target column {index} is out of range for {num_columns} columns "
            f"(valid: {-num_columns}..{num_columns - 1})"
        )
    return index % num_columns


def _dataset_from_table(name: str, table: _Table, target: object, label: str) -> Dataset:
    num_columns = table.values.shape[1]
    if num_columns < 2:
        raise DataError(
            f"{label}: found 1 column; need at least 2 (one or more inputs and the target)"
        )
    index = _resolve_target(target, num_columns, table.header, label)
    keep = [i for i in range(num_columns) if i != index]
    header = table.header
    return Dataset(
        name=name,
        inputs=table.values[:, keep],
        targets=table.values[:, index],
        feature_names=None if header is None else [header[i] for i in keep],
        target_name=None if header is None else header[index],
    )


def _load_npz(path: Path, label: str, target: object) -> Dataset:
    if not (
        isinstance(target, (int, np.integer)) and not isinstance(target, bool) and target == -1
    ):
        raise DataError(
            f"{label}: a target column cannot be chosen for .npz files "
            f"(they hold the inputs 'X' and the targets 'y' separately), got target={target!r}"
        )
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = [key for key in ("X", "y") if key not in archive.files]
            if missing:
                found = ", ".join(repr(k) for k in archive.files) or "none"
                raise DataError(
                    f"{label}: missing array {' and '.join(repr(k) for k in missing)} "
                    f"(found: {found}); expected 'X' [N, D] and 'y' [N]"
                )
            x_raw, y_raw = archive["X"], archive["y"]
    except DataError:
        raise
    except (OSError, EOFError, ValueError, zipfile.BadZipFile) as err:
        raise DataError(f"{label}: could not read the .npz file ({err})") from None

    arrays = {}
    for key, raw in (("X", x_raw), ("y", y_raw)):
        if raw.dtype.kind not in "biuf":
            raise DataError(f"{label}: array {key!r} has non-numeric dtype {raw.dtype}")
        arrays[key] = raw.astype(np.float64)
    x, y = arrays["X"], arrays["y"]
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise DataError(f"{label}: array 'X' must be [N, D] or [N], got shape {x.shape}")
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise DataError(f"{label}: array 'y' must be [N] or [N, 1], got shape {y.shape}")
    if x.shape[0] != y.shape[0]:
        raise DataError(
            f"{label}: 'X' has {x.shape[0]} rows but 'y' has {y.shape[0]} (lengths must match)"
        )
    if x.shape[1] < 1:
        raise DataError(f"{label}: array 'X' has no input columns (shape {x.shape})")
    for key, values in (("X", x), ("y", y[:, None])):
        bad = ~np.isfinite(values)
        if bad.any():
            row, col = (int(i) for i in np.argwhere(bad)[0])
            where = f"row {row + 1}, column {col + 1}" if key == "X" else f"row {row + 1}"
            count = int(bad.sum())
            plural = "value is" if count == 1 else "values are"
            raise DataError(
                f"{label}: {count} {plural} NaN or infinite in {key!r} "
                f"(first at {where}: {values[row, col]!r})"
            )
    return Dataset(name=_stem(path), inputs=x, targets=y)


def _load_test_masks(path: Path, label: str, num_rows: int, data_label: str) -> np.ndarray:
    table = _read_csv(path, label)
    _check_finite_table(table, path, label)
    values = table.values
    if values.shape[0] != num_rows:
        raise DataError(
            f"{label}: has {values.shape[0]} rows but {data_label} has {num_rows} "
            "(the test mask needs one row per observation)"
        )
    bad = (values != 0.0) & (values != 1.0)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        line_no = _file_line(table, path, row)
        raise DataError(
            f"{label}: {int(bad.sum())} values are not 0 or 1 (first at row {line_no}, "
            f"column {col + 1}: {values[row, col]!r})"
        )
    return values == 1.0


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".csv", ".npz"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return name


def _first_existing(folder: Path, names: tuple[str, ...]) -> Optional[Path]:
    for name in names:
        if (folder / name).is_file():
            return folder / name
    return None


def load_dataset(path: PathLike, *, target: Union[int, str] = -1, min_rows: int = 10) -> Dataset:
    """Load a data set from a CSV file, an ``.npz`` file or a UCI-layout folder.

    CSV files (``.csv`` or ``.csv.gz``): the delimiter (comma, semicolon or tab) is sniffed from
    the first non-empty line, and that line is a header iff any of its non-empty cells is not a
    number. Every other cell must be a finite number.

    :param path: A ``.csv``/``.csv.gz``/``.npz`` file or a folder holding ``data.csv.gz`` (or
        ``data.csv``) and optionally ``test_mask.csv.gz`` (or ``test_mask.csv``).
    :param target: Target column of a CSV file: an index (negative counts from the end, so the
        default ``-1`` is the last column) or, for a file with a header, a column name (a string
        that is no column name but an integer is read as an index). Must stay ``-1`` for
        ``.npz`` files.
    :param min_rows: Fewest data rows accepted.
    :return: The :class:`Dataset`; ``test_masks`` [N, K] is set only for a folder with a mask.
    :raises DataError: For every problem with the path or its contents.
    """
    if isinstance(min_rows, bool) or not isinstance(min_rows, (int, np.integer)) or min_rows < 1:
        raise DataError(f"min_rows: expected an integer >= 1, got {min_rows!r}")
    try:
        given = os.fspath(path)
    except TypeError:
        raise DataError(f"expected a file or folder path, got {path!r}") from None
    if not isinstance(given, str):
        given = os.fsdecode(given)
    if not given:
        raise DataError("no data path given")
    location = Path(given)
    if not location.exists():
        raise DataError(f"{given}: no such file or folder")

    masks = None
    if location.is_dir():
        data_file = _first_existing(location, ("data.csv.gz", "data.csv"))
        if data_file is None:
            raise DataError(
                f"{given}: folder has no data.csv.gz or data.csv (expected the UCI layout: "
                "data.csv.gz and optionally test_mask.csv.gz)"
            )
        label = os.path.join(given, data_file.name)
        table = _read_csv(data_file, label)
        _check_finite_table(table, data_file, label)
        name = location.resolve().name
        dataset = _dataset_from_table(name, table, target, label)
        mask_file = _first_existing(location, ("test_mask.csv.gz", "test_mask.csv"))
        if mask_file is not None:
            masks = _load_test_masks(
                mask_file, os.path.join(given, mask_file.name), dataset.num_rows, label
            )
    else:
        lower = location.name.lower()
        label = given
        if lower.endswith(".npz"):
            dataset = _load_npz(location, label, target)
        elif lower.endswith(".csv") or lower.endswith(".csv.gz"):
            table = _read_csv(location, label)
            _check_finite_table(table, location, label)
            dataset = _dataset_from_table(_stem(location), table, target, label)
        else:
            raise DataError(
                f"{given}: unsupported file type (expected .csv, .csv.gz, .npz, or a folder "
                "with data.csv.gz)"
            )

    if dataset.num_rows < min_rows:
        raise DataError(
            f"{label}: {dataset.num_rows} data rows, fewer than the {min_rows} required"
        )
    if masks is not None:
        dataset = Dataset(
            name=dataset.name,
            inputs=dataset.inputs,
            targets=dataset.targets,
            test_masks=masks,
            feature_names=dataset.feature_names,
            target_name=dataset.target_name,
        )
    return dataset


def uci_dataset_path(name: str, root: Optional[PathLike] = None) -> Path:
    """The folder of the UCI benchmark data set ``name``.

    :param name: Folder name, e.g. ``"energy"``.
    :param root: Folder holding the data sets; by default the environment variable
        ``AVDGP_DATA_ROOT`` or else ``../shared/data/uci`` relative to the working directory.
    :return: ``root / name``, a folder holding ``data.csv.gz`` (or ``data.csv``).
    :raises DataError: If the root or the data set is missing (the message lists those present).
    """
    if root is None:
        root = os.environ.get(DATA_ROOT_ENV) or os.path.join("..", "shared", "data", "uci")
    root_path = Path(root).expanduser()
    if not root_path.is_dir():
        raise DataError(
            f"data root {os.fspath(root_path)!r} is not a folder (set {DATA_ROOT_ENV} to the "
            "folder holding the UCI data sets)"
        )
    available = sorted(
        child.name
        for child in root_path.iterdir()
        if child.is_dir() and _first_existing(child, ("data.csv.gz", "data.csv")) is not None
    )
    if name not in available:
        listed = ", ".join(available) if available else "none"
        raise DataError(
            f"unknown data set {name!r} in {os.fspath(root_path)!r}; available: {listed}"
        )
    return root_path / name


# ---------------------------------------------------------------------------------------------
# Splitting
# ---------------------------------------------------------------------------------------------


def _check_fraction(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise DataError(f"{name}: expected a number in [0, 1), got {value!r}")
    value = float(value)
    if not math.isfinite(value) or not 0.0 <= value < 1.0:
        raise DataError(f"{name}: expected a number in [0, 1), got {value!r}")
    return value


def _count(fraction: float, total: int) -> int:
    """``fraction * total`` rounded half up (robust to float round-off like 0.1 * 30)."""
    return int(math.floor(fraction * total + 0.5 + 1e-9))


def _make_split(dataset: Dataset, train: np.ndarray, val: np.ndarray, test: np.ndarray) -> Split:
    x, y = dataset.inputs, dataset.targets[:, None]
    train, val, test = np.sort(train), np.sort(val), np.sort(test)
    return Split(
        x_train=x[train],
        y_train=y[train],
        x_val=x[val],
        y_val=y[val],
        x_test=x[test],
        y_test=y[test],
    )


def split_dataset(
    dataset: Dataset,
    *,
    seed: int = 0,
    split: Optional[int] = None,
    test_fraction: float = 0.1,
    val_fraction: float = 0.1,
) -> Split:
    """Split ``dataset`` into train / validation / test parts (each kept in file order).

    With ``split`` the test rows are those marked in column ``split`` of ``dataset.test_masks``
    and the validation rows a random ``val_fraction`` of the remaining rows. Without it, a random
    permutation gives ``round(test_fraction * N)`` test rows, ``round(val_fraction * N)``
    validation rows and the rest for training (8:1:1 by default, as in the AVDGP paper).

    :param dataset: The data set.
    :param seed: Seed of ``np.random.default_rng`` for the random parts.
    :param split: Index of the predefined test mask to use, or ``None`` for a random split.
    :param test_fraction: Fraction of rows for testing (random split only), in (0, 1).
    :param val_fraction: Fraction of rows (with ``split``: of the non-test rows) for validation,
        in [0, 1); 0 gives an empty validation part.
    :return: The :class:`Split`, with targets as [n, 1] columns.
    :raises DataError: For bad fractions or mask index, or if a part would be too small (at least
        2 training rows and 1 test row).
    """
    test_fraction = _check_fraction("test_fraction", test_fraction)
    val_fraction = _check_fraction("val_fraction", val_fraction)
    if split is None and test_fraction <= 0.0:
        raise DataError(f"test_fraction: expected a number in (0, 1), got {test_fraction!r}")
    if split is None and test_fraction + val_fraction >= 1.0:
        raise DataError(
            f"test_fraction + val_fraction must be < 1 to leave training rows, "
            f"got {test_fraction!r} + {val_fraction!r}"
        )
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise DataError(f"seed: expected an integer >= 0, got {seed!r}")
    rng = np.random.default_rng(int(seed))
    n = dataset.num_rows

    if split is not None:
        masks = dataset.test_masks
        if masks is None:
            raise DataError(f"{dataset.name}: has no predefined test splits; leave out split")
        k = masks.shape[1]
        if (
            isinstance(split, bool)
            or not isinstance(split, (int, np.integer))
            or not (0 <= split < k)
        ):
            raise DataError(
                f"{dataset.name}: split {split!r} is out of range; the data set has {k} test "
                f"splits (0..{k - 1})"
            )
        is_test = masks[:, int(split)]
        test = np.flatnonzero(is_test)
        rest = rng.permutation(np.flatnonzero(~is_test))
        n_val = _count(val_fraction, rest.size)
        val, train = rest[:n_val], rest[n_val:]
        what = f"split {split}"
    else:
        order = rng.permutation(n)
        n_test = _count(test_fraction, n)
        n_val = _count(val_fraction, n)
        test, val, train = order[:n_test], order[n_test : n_test + n_val], order[n_test + n_val :]
        what = f"test_fraction={test_fraction}, val_fraction={val_fraction}"

    if test.size < 1:
        raise DataError(f"{dataset.name}: {what} leaves no test rows out of {n}")
    if train.size < 2:
        raise DataError(
            f"{dataset.name}: {what} leaves {train.size} training rows out of {n} (need >= 2)"
        )
    return _make_split(dataset, train, val, test)


# ---------------------------------------------------------------------------------------------
# Standardization and label checks
# ---------------------------------------------------------------------------------------------


def _safe_std(values: np.ndarray) -> np.ndarray:
    """Column standard deviations, with 1.0 for (numerically) constant columns."""
    std = values.std(axis=0)
    scale = np.abs(values).max(axis=0)
    return np.where(std <= 1e-12 * scale, 1.0, std)


@dataclass(frozen=True, eq=False)
class Standardizer:
    """Affine maps to zero-mean, unit-variance inputs and targets, fitted on training data.

    :param x_mean: Input means, [D].
    :param x_std: Input standard deviations, [D] (1.0 for constant columns).
    :param y_mean: Target mean.
    :param y_std: Target standard deviation (1.0 for constant targets).
    """

    x_mean: np.ndarray
    x_std: np.ndarray
    y_mean: float
    y_std: float

    @classmethod
    def fit(
        cls, x_train: np.ndarray, y_train: np.ndarray, *, standardize_targets: bool = True
    ) -> "Standardizer":
        """Fit to training data.

        :param x_train: Training inputs, [N, D].
        :param y_train: Training targets, [N] or [N, 1].
        :param standardize_targets: If ``False`` the targets are left as they are (``y_mean``
            0, ``y_std`` 1), e.g. for classification labels.
        """
        x = np.asarray(x_train, dtype=np.float64)
        y = np.asarray(y_train, dtype=np.float64).reshape(-1)
        if x.ndim != 2 or x.shape[0] < 1:
            raise DataError(f"x_train: expected a non-empty [N, D] array, got shape {x.shape}")
        if y.shape[0] != x.shape[0]:
            raise DataError(f"y_train: expected {x.shape[0]} targets, got {y.shape[0]}")
        x_mean = x.mean(axis=0)
        x_std = _safe_std(x)
        if standardize_targets:
            y_mean, y_std = float(y.mean()), float(_safe_std(y[:, None])[0])
        else:
            y_mean, y_std = 0.0, 1.0
        return cls(x_mean=_readonly(x_mean), x_std=_readonly(x_std), y_mean=y_mean, y_std=y_std)

    def transform_x(self, x: np.ndarray) -> np.ndarray:
        """Standardize inputs ``x`` [N, D]."""
        x = np.asarray(x, dtype=np.float64)
        if x.shape[-1] != self.x_mean.shape[0]:
            raise DataError(
                f"inputs have {x.shape[-1]} columns; the standardizer was fitted to "
                f"{self.x_mean.shape[0]}"
            )
        return (x - self.x_mean) / self.x_std

    def transform_y(self, y: np.ndarray) -> np.ndarray:
        """Standardize targets ``y`` (any shape, e.g. [N] or [N, 1])."""
        return (np.asarray(y, dtype=np.float64) - self.y_mean) / self.y_std

    def inverse_transform_y(self, y: np.ndarray) -> np.ndarray:
        """Map standardized targets (or predictive means) back to the original scale.

        Predictive standard deviations scale by ``y_std`` alone (variances by ``y_std ** 2``).
        """
        return np.asarray(y, dtype=np.float64) * self.y_std + self.y_mean


def check_binary_targets(targets: np.ndarray) -> np.ndarray:
    """Map two-class labels to 0.0 / 1.0 (the smaller value to 0, the larger to 1).

    Accepts {0, 1}, {-1, 1}, {1, 2} or any two distinct finite values.

    :param targets: Labels, any shape (e.g. [N] or [N, 1]).
    :return: float64 array of the same shape holding 0.0 and 1.0.
    :raises DataError: If the labels are empty, not finite, or do not take exactly 2 values.
    """
    try:
        values = np.asarray(targets, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError("classification targets must be numbers") from None
    if values.size == 0:
        raise DataError("classification targets are empty")
    if not np.isfinite(values).all():
        raise DataError(
            f"classification targets hold {int((~np.isfinite(values)).sum())} NaN or "
            "infinite values"
        )
    distinct = np.unique(values)
    if distinct.size != 2:
        shown = ", ".join(f"{v:g}" for v in distinct[:_MAX_LISTED])
        more = ", ..." if distinct.size > _MAX_LISTED else ""
        raise DataError(
            f"classification needs exactly 2 distinct target values, found {distinct.size}: "
            f"{shown}{more}"
        )
    return (values == distinct[1]).astype(np.float64)
