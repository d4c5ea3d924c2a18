"""Data sets held in memory: CSV, ``.npz`` and UCI-layout folders loaded and checked.

Supported inputs (see :func:`load_dataset`):

- a ``.csv`` or ``.csv.gz`` file, delimited by ``,``, ``;`` or a tab (sniffed from the first
  line), with an optional header row; one column is the target, the others are inputs;
- a ``.npz`` file with arrays ``X`` ([N, D] or [N]) and ``y`` ([N] or [N, 1]);
- a folder in the UCI benchmark layout: ``data.csv.gz`` (or ``data.csv``; no header, last column
  is the target) and optionally ``test_mask.csv.gz`` (or ``test_mask.csv``; [N, K] of 0/1,
  column ``k`` marks the test rows of split ``k``).

Every problem is a :class:`~avdgp.data.csv_format.DataError` naming the file and cell.
"""

from __future__ import annotations

import csv
import os
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import numpy as np

from .csv_format import (
    DataError,
    TooFewColumnsError,
    locate_parse_error,
    non_blank_lines,
    open_text,
    records,
    resolve_target,
    sniff_layout,
)
from .dataset import Dataset
from .labels import LabelCodes, check_class_count, encode_labels
from .standardizer import check_columns_standardizable

__all__ = [
    "CsvTable",
    "check_finite_table",
    "load_dataset",
    "read_csv",
    "uci_dataset_path",
]

PathLike = Union[str, "os.PathLike[str]"]

#: Environment variable that overrides the default root folder of the UCI benchmark data.
DATA_ROOT_ENV = "AVDGP_DATA_ROOT"


@dataclass(frozen=True)
class CsvTable:
    """A numeric CSV file read whole.

    :param values: ``[N, C]`` float64 cells.
    :param header: the header's cells, or ``None``.
    :param first_data_line: 1-based line number where the data rows start.
    :param delimiter: the file's delimiter.
    :param label_index: 0-based column of class labels (read with ``label_column``), whose
        cells in ``values`` are class indices into ``classes``; else ``None``.
    :param classes: the labels of that column in class-index order.
    """

    values: np.ndarray
    header: Optional[list[str]]
    first_data_line: int
    delimiter: str
    label_index: Optional[int] = None
    classes: Optional[tuple] = None


def read_csv(path: Path, label: str, *, label_column: object = None) -> CsvTable:
    """Parse a numeric CSV file (optional header) into a float64 array [N, C].

    :param label_column: a column (index or header name) of class labels, numbers or text,
        read as class indices (see :mod:`~avdgp.data.labels`); every other cell must
        be a number.
    :raises DataError: naming the file and the first bad row or cell.
    """
    layout = sniff_layout(path, label, label_column=label_column)
    header = list(layout.header) if layout.header is not None else None
    data_start = layout.data_start
    label_index, codes = None, None
    if label_column is not None:
        label_index = resolve_target(label_column, layout.num_columns, header, label)
        codes = LabelCodes()
    try:
        with open_text(path) as handle, warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data"
            for _ in range(data_start - 1):  # the lines before the data, blank ones included
                handle.readline()
            values = np.loadtxt(
                non_blank_lines(handle),
                delimiter=layout.delimiter,
                dtype=np.float64,
                ndmin=2,
                comments=None,
                quotechar='"',
                converters=None if codes is None else {label_index: codes},
                encoding=None,  # converters get str ("bytes", the default, gives latin-1 bytes)
            )
    except ValueError as err:
        first_line = str(err).split("\n")[0]
        raise locate_parse_error(
            path, label, data_start, layout.delimiter, header, first_line, text_column=label_index
        ) from None
    except UnicodeDecodeError:
        raise DataError(f"{label}: not a UTF-8 text file") from None
    except (OSError, EOFError, csv.Error, zipfile.BadZipFile) as err:
        raise DataError(f"{label}: could not read the file ({err})") from None

    if values.shape[0] == 0:
        raise DataError(f"{label}: the file has a header but no data rows")
    if header is not None and len(header) != values.shape[1]:
        raise DataError(
            f"{label}: the header (row {layout.first_line}) has {len(header)} columns "
            f"but the data rows have {values.shape[1]}"
        )
    if codes is None:
        return CsvTable(values, header, data_start, layout.delimiter)
    values[:, label_index], classes = codes.indices(values[:, label_index], label)
    return CsvTable(values, header, data_start, layout.delimiter, label_index, classes)


def file_line(table: CsvTable, path: Path, row: int) -> int:
    """The line number in ``path`` of data row ``row`` (0-based) of ``table``."""
    for index, (number, _) in enumerate(records(path, table.delimiter, table.first_data_line)):
        if index == row:
            return number
    return table.first_data_line + row


def check_finite_table(table: CsvTable, path: Path, label: str) -> None:
    """Raise a :class:`DataError` naming the first NaN/inf cell of ``table`` and their count."""
    bad = ~np.isfinite(table.values)
    if not bad.any():
        return
    count = int(bad.sum())
    row, col = (int(i) for i in np.argwhere(bad)[0])
    line_no = file_line(table, path, row)
    plural = "value is" if count == 1 else "values are"
    raise DataError(
        f"{label}: {count} {plural} NaN or infinite (first at row {line_no}, column {col + 1}: "
        f"{table.values[row, col]!r})"
    )


def _dataset_from_table(name: str, table: CsvTable, target: object, label: str) -> Dataset:
    check_columns_standardizable(table.values, table.header, label)
    num_columns = table.values.shape[1]
    if num_columns < 2:
        raise TooFewColumnsError(
            f"{label}: found 1 column; need at least 2 (one or more inputs and the target)"
        )
    index = resolve_target(target, num_columns, table.header, label)
    keep = [i for i in range(num_columns) if i != index]
    header = table.header
    return Dataset(
        name=name,
        inputs=table.values[:, keep],
        targets=table.values[:, index],
        feature_names=None if header is None else [header[i] for i in keep],
        target_name=None if header is None else header[index],
        classes=table.classes if table.label_index == index else None,
    )


def _load_npz(path: Path, label: str, target: object, class_labels: bool) -> Dataset:
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

    classes = None
    if class_labels and y_raw.dtype.kind in "biufUS":  # labels may be text
        if y_raw.ndim == 2 and y_raw.shape[1] == 1:
            y_raw = y_raw[:, 0]
        if y_raw.ndim != 1:
            raise DataError(f"{label}: array 'y' must be [N] or [N, 1], got shape {y_raw.shape}")
        y_raw, classes = encode_labels(y_raw.tolist(), f"{label}: array 'y'")
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
    if x.shape[0] == 0:
        raise DataError(f"{label}: arrays 'X' and 'y' have no rows; expected 'X' [N, D], N > 0")
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
    names = [f"X[:, {k}]" for k in range(x.shape[1])] + ["y"]
    check_columns_standardizable(np.column_stack([x, y]), names, label)
    return Dataset(name=_stem(path), inputs=x, targets=y, classes=classes)


def _load_test_masks(path: Path, label: str, num_rows: int, data_label: str) -> np.ndarray:
    table = read_csv(path, label)
    check_finite_table(table, path, label)
    values = table.values
    if values.shape[0] != num_rows:
        raise DataError(
            f"{label}: has {values.shape[0]} rows but {data_label} has {num_rows} "
            "(the test mask needs one row per observation)"
        )
    bad = (values != 0.0) & (values != 1.0)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        line_no = file_line(table, path, row)
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


def load_dataset(
    path: PathLike, *, target: Union[int, str] = -1, min_rows: int = 10, class_labels: bool = False
) -> Dataset:
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
    :param class_labels: Read the target as class labels (classification): numbers or text,
        2 to :data:`~avdgp.data.labels.MAX_CLASSES` of them; ``targets`` are then the
        class indices and ``classes`` the labels (see :mod:`~avdgp.data.labels`).
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
        table = read_csv(data_file, label, label_column=target if class_labels else None)
        check_finite_table(table, data_file, label)
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
            dataset = _load_npz(location, label, target, class_labels)
        elif lower.endswith(".csv") or lower.endswith(".csv.gz"):
            table = read_csv(location, label, label_column=target if class_labels else None)
            check_finite_table(table, location, label)
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
    if class_labels:
        check_class_count(dataset.classes, label)
    if masks is not None:
        dataset = Dataset(
            name=dataset.name,
            inputs=dataset.inputs,
            targets=dataset.targets,
            test_masks=masks,
            feature_names=dataset.feature_names,
            target_name=dataset.target_name,
            classes=dataset.classes,
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
