"""A numeric CSV file read a chunk of rows at a time, so that memory does not grow with the
number of rows (``avdgp predict`` on a million rows).

:func:`feature_chunks` yields the feature columns of consecutive blocks of rows. It is the
fast path for well-formed files only: the first cell it cannot parse, a row of another width or
a NaN/inf cell raises :class:`NotStreamable`, and the caller reads the file whole with
:func:`~avdgp.data.tables.read_csv`, whose error names the line and cell.
"""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path
from typing import Iterator, Optional

import numpy as np

from .csv_format import CsvLayout, non_blank_lines, open_text

__all__ = ["NotStreamable", "feature_chunks"]


class NotStreamable(Exception):
    """The file holds something the chunked reader does not parse (the whole-file reader
    names it)."""


def feature_chunks(
    path: Path, layout: CsvLayout, drop_column: Optional[int], chunk_rows: int
) -> Iterator[np.ndarray]:
    """Blocks ``[n <= chunk_rows, C']`` of the file's rows as float64, without ``drop_column``.

    :param layout: the file's :func:`~avdgp.data.csv_format.sniff_layout`.
    :param drop_column: a 0-based column to leave out (the target), or ``None``.
    :raises NotStreamable: at the first block holding a cell that is no number, a row of
        another width than ``layout.num_columns``, or a NaN or inf value.
    """
    with open_text(path) as handle:
        for _ in range(layout.data_start - 1):  # the lines before the data, blank ones too
            handle.readline()
        lines = non_blank_lines(handle)
        while True:
            block = list(itertools.islice(lines, chunk_rows))
            if not block:
                return
            values = _parse(block, layout)
            if values.shape[1] != layout.num_columns or not np.isfinite(values).all():
                raise NotStreamable(path)
            yield values if drop_column is None else np.delete(values, drop_column, axis=1)


def _parse(lines: list[str], layout: CsvLayout) -> np.ndarray:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return np.loadtxt(
                lines,
                delimiter=layout.delimiter,
                dtype=np.float64,
                ndmin=2,
                comments=None,
                quotechar='"',
            )
    except ValueError:
        raise NotStreamable(lines[0]) from None
