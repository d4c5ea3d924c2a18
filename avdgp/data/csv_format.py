"""CSV text: the delimiter and header of a file, its records, and errors that name the cell.

Every problem with the user's data is a :class:`DataError` with a one-line message that names
the file and, where it helps, the row (1-based, counted as lines of the file, so a header is
row 1) and the column (1-based) of the offending cell. The command-line interface prints that
message and exits; nothing here should surface as a traceback for bad input.

One sniffer (:func:`sniff_layout`) decides the delimiter and whether the first non-empty line
is a header, for whole files (:mod:`~avdgp.data.tables`) and for shards
(:mod:`~avdgp.data.shards`) alike.
"""

from __future__ import annotations

import collections
import csv
import gzip
import io
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

import numpy as np

from ..errors import UsageError

__all__ = [
    "CsvLayout",
    "DataError",
    "TooFewColumnsError",
    "is_blank",
    "is_number",
    "locate_parse_error",
    "non_blank_lines",
    "open_text",
    "readonly",
    "records",
    "resolve_target",
    "sniff_layout",
    "unreadable_file",
]

DELIMITERS = (",", ";", "\t")
DELIMITER_NAMES = {",": "comma", ";": "semicolon", "\t": "tab"}
#: Distinct values listed in an error message before "...".
MAX_LISTED = 10
#: The longest line read (characters, newline included): a longer one is refused while it is
#: read, after at most this much memory (100,000 columns of 20-character numbers fit in 2 M).
MAX_LINE_CHARS = 10_000_000


class DataError(UsageError, ValueError):
    """Bad input data; the message is one line meant for the user, without a traceback."""


class TooFewColumnsError(DataError):
    """A table with one column where inputs and a target need two (``avdgp predict`` reads such
    a file as the one feature of a one-feature model)."""


def readonly(array: np.ndarray) -> np.ndarray:
    """A read-only, C-contiguous copy of ``array`` (float64 arrays stay float64)."""
    array = np.array(array, order="C")
    array.setflags(write=False)
    return array


def is_number(cell: str) -> bool:
    """Whether ``cell`` parses as a float the way ``np.loadtxt`` would (``nan``/``inf`` do)."""
    text = cell.strip()
    if not text or "_" in text:
        return False
    try:
        float(text)
    except ValueError:
        return False
    return True


def open_text(path: Path) -> "BoundedLines":
    """Open a (possibly gzip-compressed) text file for reading, dropping a UTF-8 BOM; its lines
    are at most :data:`MAX_LINE_CHARS` long (:class:`BoundedLines`)."""
    if path.name.lower().endswith(".gz"):
        return BoundedLines(gzip.open(path, "rt", encoding="utf-8-sig", newline=""), path)
    return BoundedLines(open(path, encoding="utf-8-sig", newline=""), path)


class BoundedLines:
    """The lines of a text file, read with ``readline`` or by iteration, each refused in one
    line once it is longer than :data:`MAX_LINE_CHARS` (so a file that is one 1 GiB line costs
    seconds and about 40 MB, not the whole line in memory).

    :raises DataError: naming the file, the line and the limit.
    """

    def __init__(self, handle: io.TextIOBase, path: Path) -> None:
        self._handle, self._path, self._line = handle, path, 0

    def readline(self) -> str:
        line = self._handle.readline(MAX_LINE_CHARS + 1)
        if len(line) > MAX_LINE_CHARS:
            raise DataError(
                f"{self._path}: line {self._line + 1} is longer than {MAX_LINE_CHARS:,} "
                "characters; is it a CSV file of rows? (split the rows onto lines)"
            )
        self._line += bool(line)
        return line

    def __iter__(self) -> Iterator[str]:
        return iter(self.readline, "")

    def __enter__(self) -> "BoundedLines":
        return self

    def __exit__(self, *exc) -> None:
        self._handle.close()


def sniff_delimiter(line: str) -> str:
    """The most frequent of ``,``, ``;`` and tab in ``line`` (comma when none occurs)."""
    counts = [line.count(d) for d in DELIMITERS]
    best = max(range(len(DELIMITERS)), key=lambda i: (counts[i], -i))
    return DELIMITERS[best] if counts[best] > 0 else ","


def records(path: Path, delimiter: str, first_line: int) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(line number, cells)`` for the non-blank records from line ``first_line`` on.

    Blank lines (empty or whitespace only) are skipped, as :func:`non_blank_lines` skips them
    for ``np.loadtxt``; a line of empty cells (``,,``) is a record.

    :raises DataError: for a file that cannot be read to its end (a truncated ``.gz`` file, a
        read error, bytes that are not UTF-8), naming it and the last line read.
    """
    line_no = first_line - 1
    try:
        with open_text(path) as handle:
            for _ in range(first_line - 1):
                if not handle.readline():
                    return
            reader = csv.reader(handle, delimiter=delimiter, quotechar='"')
            for cells in reader:
                line_no = first_line - 1 + reader.line_num
                if cells and not (len(cells) == 1 and is_blank(cells[0])):
                    yield line_no, cells
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, csv.Error) as error:
        raise unreadable_file(str(path), line_no, error) from None


def unreadable_file(label: str, line: int, error: BaseException) -> DataError:
    """The one-line error of a file that cannot be read to its end (a truncated ``.gz`` file,
    a read error), naming it and the last line read."""
    return DataError(
        f"{label}: could not read the file after line {line} ({error}); is it truncated or "
        "corrupt?"
    )


def is_blank(line: str) -> bool:
    """Whether a text line is empty or whitespace only (skipped wherever rows are read)."""
    return not line.strip()


def non_blank_lines(handle: io.TextIOBase) -> Iterator[str]:
    """The lines of ``handle`` that are not blank, for ``np.loadtxt`` (which skips empty lines
    but reads a whitespace-only line as a row of one empty cell)."""
    return (line for line in handle if not is_blank(line))


@dataclass(frozen=True)
class CsvLayout:
    """What the first non-empty line of a CSV file says.

    :param delimiter: ``,``, ``;`` or a tab.
    :param header: the stripped cells of a header row, or ``None`` when the first line is data.
    :param num_columns: cells in the first line.
    :param first_line: 1-based number of the first non-empty line (the header, if any).
    """

    delimiter: str
    header: Optional[tuple[str, ...]]
    num_columns: int
    first_line: int

    @property
    def data_start(self) -> int:
        """1-based line number where the data rows start."""
        return self.first_line + 1 if self.header is not None else self.first_line


def sniff_layout(
    path: Path,
    label: str,
    *,
    what: str = "file",
    label_column: object = None,
    unique_names: bool = True,
) -> CsvLayout:
    """The delimiter (the most frequent of ``,``, ``;`` and tab) and header of ``path``, from
    its first non-empty line, which is a header iff one of its non-empty cells is no number.

    :param label: how messages name the file.
    :param what: the noun of the "is empty" message (``"file"`` or ``"shard"``).
    :param label_column: the target column of class labels, which may be text: given as an
        index, its cell does not make the first line a header (``5.1,3.5,setosa`` is data).
    :param unique_names: refuse a header that names a column twice (``False``: the caller
        says more about the header than this can).
    :raises DataError: for an empty, unreadable or non-UTF-8 file, or (``unique_names``) a
        header that names a column twice.
    """
    try:
        with open_text(path) as handle:
            line_no, first = 0, None
            for line in iter(handle.readline, ""):
                line_no += 1
                if line.strip():
                    first = line
                    break
    except UnicodeDecodeError:
        raise DataError(f"{label}: not a UTF-8 text file") from None
    except (OSError, EOFError, csv.Error) as error:
        raise DataError(f"{label}: could not read the file ({error})") from None
    if first is None:
        raise DataError(f"{label}: the {what} is empty")
    delimiter = sniff_delimiter(first)
    cells = next(csv.reader([first], delimiter=delimiter, quotechar='"'))
    text_index = _index_or_none(label_column, len(cells))
    has_header = any(
        cell.strip() and not is_number(cell)
        for index, cell in enumerate(cells)
        if index != text_index
    )
    header = tuple(cell.strip() for cell in cells) if has_header else None
    counts = collections.Counter(header or ())  # linear in the columns
    repeated = sorted(name for name, count in counts.items() if name and count > 1)
    if repeated and unique_names:  # predict and export read the columns by name
        raise DataError(
            f"{label}: the header (line {line_no}) names column {repeated[0]!r} more than "
            "once; give every column its own name"
        )
    return CsvLayout(delimiter, header, len(cells), line_no)


def _index_or_none(column: object, num_columns: int) -> Optional[int]:
    """The 0-based index of ``column`` if it is an integer (or integer text) in range."""
    if isinstance(column, str):
        try:
            column = int(column.strip())
        except ValueError:
            return None
    if isinstance(column, (int, np.integer)) and not isinstance(column, bool):
        if -num_columns <= column < num_columns:
            return int(column) % num_columns
    return None


def locate_parse_error(
    path: Path,
    label: str,
    table_start: int,
    delimiter: str,
    header: Optional[list[str]],
    fallback: str,
    *,
    text_column: Optional[int] = None,
) -> DataError:
    """Re-scan a CSV file that ``np.loadtxt`` rejected and describe the first bad cell.

    :param text_column: 0-based index of a column of class labels, where any non-empty text
        is accepted.
    """
    expected = len(header) if header is not None else None
    for line_no, cells in records(path, delimiter, table_start):
        if expected is None:
            expected = len(cells)
        elif len(cells) != expected:
            what = "the header" if header is not None else "the first row"
            return DataError(
                f"{label}: row {line_no} has {len(cells)} columns but {what} has {expected} "
                f"({DELIMITER_NAMES[delimiter]}-delimited)"
            )
        for col, cell in enumerate(cells, start=1):
            if col - 1 == text_column and cell.strip():
                continue
            if not is_number(cell):
                shown = cell if len(cell) <= 40 else cell[:37] + "..."
                reason = "is empty" if not cell.strip() else "is not a number"
                return DataError(f"{label}: row {line_no}, column {col} ({shown!r}) {reason}")
    return DataError(f"{label}: could not parse the file ({fallback})")


def resolve_target(
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
