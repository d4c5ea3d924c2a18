"""Training data streamed from CSV shards: data sets larger than memory.

A data set is a list of *shards*, plain or gzip-compressed CSV files with the same columns (a
header row in all of them or in none, the same delimiter). Two passes over the shards replace
loading them:

1. :func:`scan_csv_shards` reads every shard once, chunk by chunk, with TensorFlow's CSV
   parser: it checks every cell (a bad cell is a :class:`~gpflux_avdgp.experiments.data.DataError`
   naming the file, line and column), counts the rows and merges per-column means and
   variances in float64 (Chan et al.'s pairwise update), so the standardiser needs no full
   load (:meth:`ShardStatistics.standardizer`).
2. :func:`csv_shard_dataset` is the ``tf.data`` pipeline ``model.fit`` trains on: the shard
   order is shuffled per epoch, lines of ``num_parallel_reads`` shards are interleaved and
   shuffled in a bounded buffer, then batched, decoded and standardised batch by batch (no
   Python per row), and prefetched. Its cardinality is known from the scan, so ``epochs > 1``
   works without ``steps_per_epoch``.

Memory is bounded by the shuffle buffer (lines of text), the prefetched batches and the
readers' buffers, not by the data size.
"""

from __future__ import annotations

import csv
import glob
import gzip
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from .experiments.data import (
    _DELIMITER_NAMES,
    DataError,
    Standardizer,
    _is_number,
    _locate_parse_error,
    _open_text,
    _records,
    _resolve_target,
    _sniff_delimiter,
)
from .validation import check_nonnegative_int, check_positive_int

__all__ = [
    "ShardStatistics",
    "csv_shard_dataset",
    "resolve_shards",
    "scan_csv_shards",
]

PathLike = Union[str, "os.PathLike[str]"]
#: What names shards: a glob pattern, a folder, one file, or a list of files.
ShardSource = Union[PathLike, Sequence[PathLike]]

_SUFFIXES = (".csv", ".csv.gz")
_GLOB_CHARACTERS = ("*", "?", "[")
_BOM = b"\xef\xbb\xbf"
#: Distinct target values :func:`scan_csv_shards` keeps (enough to name a non-binary target).
_MAX_TARGET_VALUES = 11
#: Graph-level seed of the per-epoch pipeline graph (any constant but 0).
_GRAPH_SEED = 20240517


# ---------------------------------------------------------------------------------------------
# Finding the shards
# ---------------------------------------------------------------------------------------------


def _is_csv(path: Path) -> bool:
    return path.name.lower().endswith(_SUFFIXES)


def has_glob_characters(text: str) -> bool:
    """Whether ``text`` is a glob pattern (holds ``*``, ``?`` or ``[``)."""
    return any(character in text for character in _GLOB_CHARACTERS)


def resolve_shards(source: ShardSource) -> list[Path]:
    """The CSV shards named by ``source``.

    :param source: a glob pattern (``"data/train-*.csv.gz"``, ``**`` recurses), a folder (its
        ``*.csv`` and ``*.csv.gz`` files, not recursive), one ``.csv``/``.csv.gz`` file, or a
        list of such files.
    :returns: the shard paths: a pattern's matches and a folder's files sorted by name (so the
        order does not depend on the file system), a list in the order given.
    :raises DataError: when nothing matches, a path is missing or no CSV file, or a list names
        a file twice.
    """
    if isinstance(source, (str, os.PathLike)):
        text = os.fspath(source)
        if not isinstance(text, str):
            text = os.fsdecode(text)
        if not text:
            raise DataError("no data path given")
        if has_glob_characters(text) and not Path(text).exists():
            matches = sorted(glob.glob(os.path.expanduser(text), recursive=True))
            if not matches:
                raise DataError(f"{text}: no file matches the pattern")
            shards = [Path(match) for match in matches]
            for shard in shards:
                if not shard.is_file() or not _is_csv(shard):
                    raise DataError(f"{text}: matches {shard}, which is not a .csv or .csv.gz file")
            return shards
        location = Path(text).expanduser()
        if location.is_dir():
            shards = sorted(
                (child for child in location.iterdir() if child.is_file() and _is_csv(child)),
                key=lambda path: path.name,
            )
            if not shards:
                raise DataError(f"{text}: the folder holds no .csv or .csv.gz files")
            return shards
        paths: Sequence[PathLike] = [text]
    elif isinstance(source, Sequence):
        paths = source
        if not paths:
            raise DataError("shards: expected at least one file, got an empty list")
    else:
        raise DataError(
            f"shards: expected a glob pattern, a folder, a file or a list of files, got {source!r}"
        )
    shards, seen = [], set()
    for item in paths:
        path = Path(os.fspath(item)).expanduser()
        if not path.exists():
            raise DataError(f"{item}: no such file or folder")
        if not path.is_file() or not _is_csv(path):
            raise DataError(f"{item}: not a .csv or .csv.gz file")
        if path.resolve() in seen:
            raise DataError(f"{item}: named twice in the list of shards")
        seen.add(path.resolve())
        shards.append(path)
    return shards


# ---------------------------------------------------------------------------------------------
# Shard layout: the first line of every shard
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Layout:
    """What the first non-empty line of a shard says."""

    path: Path
    delimiter: str
    num_columns: int
    header: Optional[tuple[str, ...]]
    skip_lines: int  # lines before the data: the header's line number, 0 without a header


def _starts_with_bom(path: Path) -> bool:
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rb") as handle:
        return handle.read(len(_BOM)) == _BOM


def _read_layout(path: Path) -> _Layout:
    label = str(path)
    try:
        with _open_text(path) as handle:
            line_no, first = 0, None
            for line in handle:
                line_no += 1
                if line.strip():
                    first = line
                    break
        bom = _starts_with_bom(path)
    except UnicodeDecodeError:
        raise DataError(f"{label}: not a UTF-8 text file") from None
    except (OSError, EOFError) as error:
        raise DataError(f"{label}: could not read the file ({error})") from None
    if first is None:
        raise DataError(f"{label}: the shard is empty")
    delimiter = _sniff_delimiter(first)
    cells = next(iter(_records_of_line(first, delimiter)))
    has_header = any(cell.strip() and not _is_number(cell) for cell in cells)
    if bom and not has_header:
        raise DataError(
            f"{label}: starts with a UTF-8 byte-order mark but has no header row; remove the "
            "mark or add a header"
        )
    header = tuple(cell.strip() for cell in cells) if has_header else None
    return _Layout(path, delimiter, len(cells), header, line_no if has_header else 0)


def _records_of_line(line: str, delimiter: str):
    return csv.reader([line], delimiter=delimiter, quotechar='"')


def _common_layout(layouts: list[_Layout]) -> _Layout:
    """The layout all shards share, or a :class:`DataError` naming the first that differs."""
    first = layouts[0]
    for other in layouts[1:]:
        where = f"{other.path}: differs from {first.path}"
        if other.delimiter != first.delimiter:
            raise DataError(
                f"{where}: {_DELIMITER_NAMES[other.delimiter]}-delimited, not "
                f"{_DELIMITER_NAMES[first.delimiter]}-delimited"
            )
        if (other.header is None) != (first.header is None):
            has = "has a header row" if other.header is not None else "has no header row"
            raise DataError(f"{where}: {has} (all shards need one, or none)")
        if other.num_columns != first.num_columns:
            raise DataError(f"{where}: {other.num_columns} columns, not {first.num_columns}")
        if other.header != first.header:
            raise DataError(
                f"{where}: header ({', '.join(other.header)}) is not "
                f"({', '.join(first.header)})"
            )
    return first


# ---------------------------------------------------------------------------------------------
# The statistics pass
# ---------------------------------------------------------------------------------------------


class _RunningMoments:
    """Count, mean, sum of squared deviations and largest magnitude per column, merged chunk by
    chunk with Chan, Golub and LeVeque's pairwise update.

    The moments are kept for the data minus a shift, the first row seen, so that the merged
    means are of small numbers and keep their absolute precision: for a column like
    ``1e9 + N(0, 1e-3)`` the standard deviation stays accurate to about ``1e-9`` (a running
    mean near ``1e9`` would carry rounding errors of ``1e-7`` into every merge).
    """

    def __init__(self, num_columns: int):
        self.count = 0
        self.shift = np.zeros(num_columns)  # [C], the first row
        self.shifted_mean = np.zeros(num_columns)  # [C], mean of (x - shift)
        self.squares = np.zeros(num_columns)  # [C], sum of (x - mean)^2
        self.max_abs = np.zeros(num_columns)  # [C]

    def update(self, chunk: np.ndarray) -> None:
        """Merge ``chunk`` [n, C] (float64)."""
        n = chunk.shape[0]
        if n == 0:
            return
        if self.count == 0:
            self.shift = chunk[0].copy()
        centred = chunk - self.shift  # [n, C]
        chunk_mean = centred.mean(axis=0)  # [C]
        chunk_squares = np.square(centred - chunk_mean).sum(axis=0)  # [C]
        total = self.count + n
        delta = chunk_mean - self.shifted_mean  # [C]
        self.shifted_mean = self.shifted_mean + delta * (n / total)
        self.squares = self.squares + chunk_squares + delta**2 * (self.count * n / total)
        self.max_abs = np.maximum(self.max_abs, np.abs(chunk).max(axis=0))
        self.count = total

    @property
    def mean(self) -> np.ndarray:
        """Mean per column, [C]."""
        return self.shift + self.shifted_mean

    @property
    def std(self) -> np.ndarray:
        """Population standard deviation per column (NumPy's ``std``, ``ddof=0``), [C]."""
        return np.sqrt(self.squares / max(self.count, 1))


@dataclass(frozen=True, eq=False)
class ShardStatistics:
    """What one pass over the shards found: layout, row counts and column moments.

    :param shards: the shard files, in the order of :func:`resolve_shards`.
    :param delimiter: the column delimiter they share.
    :param header: the column names of the header row they share, or ``None``.
    :param target_index: the 0-based column of the target.
    :param skip_lines: per shard, the lines before its data (the header's line number, or 0).
    :param rows_per_shard: per shard, the data rows (blank lines not counted).
    :param lines_per_shard: per shard, the lines after ``skip_lines`` (blank lines included):
        what the pipeline reads.
    :param column_mean: ``[C]`` mean of every column (float64).
    :param column_std: ``[C]`` population standard deviation of every column.
    :param column_max_abs: ``[C]`` largest magnitude of every column.
    :param target_values: the distinct target values, sorted; at most 11 are kept, so 11 means
        "11 or more".
    """

    shards: tuple[Path, ...]
    delimiter: str
    header: Optional[tuple[str, ...]]
    target_index: int
    skip_lines: tuple[int, ...]
    rows_per_shard: tuple[int, ...]
    lines_per_shard: tuple[int, ...]
    column_mean: np.ndarray
    column_std: np.ndarray
    column_max_abs: np.ndarray
    target_values: tuple[float, ...]

    @property
    def num_rows(self) -> int:
        """``N``, data rows in all shards (the ``num_data`` of the model's KL scaling)."""
        return int(sum(self.rows_per_shard))

    @property
    def num_lines(self) -> int:
        """Data lines in all shards, blank ones included."""
        return int(sum(self.lines_per_shard))

    @property
    def num_columns(self) -> int:
        """``C = D + 1`` columns."""
        return int(self.column_mean.shape[0])

    @property
    def num_features(self) -> int:
        """``D``, input columns."""
        return self.num_columns - 1

    @property
    def feature_index(self) -> list[int]:
        """The ``D`` input columns, in file order."""
        return [i for i in range(self.num_columns) if i != self.target_index]

    @property
    def feature_names(self) -> Optional[list[str]]:
        """Names of the input columns (from the header), or ``None``."""
        return None if self.header is None else [self.header[i] for i in self.feature_index]

    @property
    def target_name(self) -> Optional[str]:
        """Name of the target column (from the header), or ``None``."""
        return None if self.header is None else self.header[self.target_index]

    def standardizer(self, *, standardize_targets: bool = True) -> Standardizer:
        """The :class:`~gpflux_avdgp.experiments.data.Standardizer` of these rows: equal (up to
        round-off) to ``Standardizer.fit`` on the loaded data, constant columns scaled by 1.

        :param standardize_targets: ``False`` leaves the targets as they are (classification).
        """
        mean, std, max_abs = self.column_mean, self.column_std, self.column_max_abs
        safe = np.where(std <= 1e-12 * max_abs, 1.0, std)  # the rule of Standardizer.fit
        features = self.feature_index
        target = self.target_index
        return Standardizer(
            x_mean=_readonly(mean[features]),
            x_std=_readonly(safe[features]),
            y_mean=float(mean[target]) if standardize_targets else 0.0,
            y_std=float(safe[target]) if standardize_targets else 1.0,
        )

    def target_classes(self) -> tuple[float, float]:
        """The two target values of a classification data set, smaller first.

        :raises DataError: if the target does not take exactly two values.
        """
        values = self.target_values
        if len(values) != 2:
            shown = ", ".join(f"{v:g}" for v in values[: _MAX_TARGET_VALUES - 1])
            more = " or more" if len(values) >= _MAX_TARGET_VALUES else ""
            raise DataError(
                f"classification needs exactly 2 distinct target values, found "
                f"{len(values)}{more}: {shown}{', ...' if more else ''}"
            )
        return float(values[0]), float(values[1])

    def __repr__(self) -> str:
        return (
            f"ShardStatistics(shards={len(self.shards)}, num_rows={self.num_rows}, "
            f"num_features={self.num_features}, target_index={self.target_index})"
        )


def _readonly(array: np.ndarray) -> np.ndarray:
    array = np.array(array, dtype=np.float64)
    array.setflags(write=False)
    return array


def _compression(path: Path) -> str:
    return "GZIP" if path.name.lower().endswith(".gz") else ""


def _decode_lines(
    lines: tf.Tensor, num_columns: int, delimiter: str, skip_blank: bool
) -> tf.Tensor:
    """CSV lines ``[B]`` as a float64 table ``[B', C]`` (``B' < B`` when blank lines are
    dropped). Every field is required: an empty or non-numeric cell raises
    ``InvalidArgumentError``."""
    if skip_blank:
        lines = tf.boolean_mask(lines, tf.strings.length(lines) > 0)  # [B']
    defaults = [tf.constant([], dtype=tf.float64)] * num_columns
    columns = tf.io.decode_csv(lines, record_defaults=defaults, field_delim=delimiter)  # C x [B']
    return tf.stack(columns, axis=1)  # [B', C]


def _first_non_finite(path: Path, label: str, layout: _Layout, count: int) -> DataError:
    """Describe the first NaN/inf cell of ``path`` (``count`` of them in the shard)."""
    plural = "value is" if count == 1 else "values are"
    for line_no, cells in _records(path, layout.delimiter, layout.skip_lines + 1):
        for col, cell in enumerate(cells, start=1):
            try:
                value = float(cell)
            except ValueError:
                continue
            if not math.isfinite(value):
                return DataError(
                    f"{label}: {count} {plural} NaN or infinite (first at row {line_no}, "
                    f"column {col}: {value!r})"
                )
    return DataError(f"{label}: {count} {plural} NaN or infinite")


def _scan_shard(
    layout: _Layout,
    num_columns: int,
    target_index: int,
    moments: _RunningMoments,
    target_values: set,
    chunk_rows: int,
) -> tuple[int, int]:
    """Merge one shard's rows into ``moments``; returns ``(rows, lines)``."""
    path, label = layout.path, str(layout.path)
    lines = tf.data.TextLineDataset(str(path), compression_type=_compression(path))
    lines = lines.skip(layout.skip_lines).batch(chunk_rows)
    chunks = lines.map(
        lambda batch: (
            _decode_lines(batch, num_columns, layout.delimiter, skip_blank=True),
            tf.size(batch),
        )
    ).prefetch(1)
    rows = num_lines = non_finite = 0
    try:
        for table, size in chunks:
            values = table.numpy()  # [n, C]
            num_lines += int(size)
            rows += values.shape[0]
            finite = np.isfinite(values)
            if not finite.all():
                non_finite += int(values.size - finite.sum())
                continue  # count the rest of the shard, then name the first bad cell
            if non_finite:
                continue
            moments.update(values)
            if len(target_values) < _MAX_TARGET_VALUES:
                target_values.update(np.unique(values[:, target_index]).tolist())
    except tf.errors.OpError as error:
        message = " ".join(str(error.message).split("\n")[0].split())
        raise _locate_parse_error(
            path,
            label,
            layout.skip_lines + 1,
            layout.delimiter,
            list(layout.header) if layout.header else None,
            message,
        ) from None
    if non_finite:
        raise _first_non_finite(path, label, layout, non_finite)
    if rows == 0:
        raise DataError(f"{label}: has a header but no data rows")
    return rows, num_lines


def scan_csv_shards(
    shards: ShardSource, *, target: Union[int, str] = -1, chunk_rows: int = 8192
) -> ShardStatistics:
    """Read every shard once: check it, count its rows and merge the column moments.

    Every cell must be a finite number, as for :func:`~gpflux_avdgp.experiments.data.load_dataset`
    (blank lines are skipped). Memory: one chunk of ``chunk_rows`` rows at a time.

    :param shards: see :func:`resolve_shards`.
    :param target: target column: an index (``-1``: the last) or a header name.
    :param chunk_rows: lines parsed per step.
    :raises DataError: for no match, an empty or unreadable shard, shards that differ in
        delimiter, header or column count, a cell that is not a number (naming file, line and
        column) or a NaN/inf value.
    """
    chunk_rows = check_positive_int("chunk_rows", chunk_rows)
    paths = resolve_shards(shards)
    layouts = [_read_layout(path) for path in paths]
    layout = _common_layout(layouts)
    if layout.num_columns < 2:
        raise DataError(
            f"{layout.path}: found 1 column; need at least 2 (one or more inputs and the target)"
        )
    header = list(layout.header) if layout.header else None
    target_index = _resolve_target(target, layout.num_columns, header, str(layout.path))
    moments = _RunningMoments(layout.num_columns)
    target_values: set = set()
    rows, lines = [], []
    for shard in layouts:
        shard_rows, shard_lines = _scan_shard(
            shard, layout.num_columns, target_index, moments, target_values, chunk_rows
        )
        rows.append(shard_rows)
        lines.append(shard_lines)
    return ShardStatistics(
        shards=tuple(paths),
        delimiter=layout.delimiter,
        header=layout.header,
        target_index=target_index,
        skip_lines=tuple(shard.skip_lines for shard in layouts),
        rows_per_shard=tuple(rows),
        lines_per_shard=tuple(lines),
        column_mean=_readonly(moments.mean),
        column_std=_readonly(moments.std),
        column_max_abs=_readonly(moments.max_abs),
        target_values=tuple(sorted(target_values))[:_MAX_TARGET_VALUES],
    )


# ---------------------------------------------------------------------------------------------
# The training pipeline
# ---------------------------------------------------------------------------------------------


def _float_type(dtype: object) -> tf.DType:
    try:
        resolved = tf.as_dtype(dtype)
    except TypeError:
        resolved = None
    if resolved not in (tf.float32, tf.float64):
        raise ValueError(f"dtype: expected float32 or float64, got {dtype!r}")
    return resolved


def csv_shard_dataset(
    shards: Union[ShardSource, ShardStatistics],
    *,
    batch_size: int,
    target: Union[int, str, None] = None,
    standardizer: Optional[Standardizer] = None,
    classes: Optional[tuple[float, float]] = None,
    shuffle_buffer: int = 10_000,
    shuffle_files: bool = True,
    seed: int = 0,
    dtype: object = tf.float64,
    num_parallel_reads: int = 4,
    step_counter: Optional[tf.Variable] = None,
) -> tf.data.Dataset:
    """One epoch of ``(x [B, D], y [B, 1])`` batches per iteration, streamed from CSV shards.

    Per epoch: the shard order is permuted (``shuffle_files``), ``num_parallel_reads`` shards
    are read at a time with their lines interleaved, lines pass a shuffle buffer of
    ``shuffle_buffer`` lines, are batched, decoded in one ``tf.io.decode_csv`` per batch,
    standardised and cast to ``dtype`` (float64 data is parsed and stays float64), and
    prefetched. The dataset's cardinality is ``ceil(lines / batch_size)``, so ``model.fit``
    knows the epoch length; only the last batch of an epoch is smaller (and batches that hold
    blank lines).

    The order of epoch ``e`` is a function of ``seed``, ``e`` and TensorFlow's global seed
    (``tf_keras.utils.set_random_seed``). With ``step_counter`` (e.g. the optimizer's
    ``iterations``), ``e = step_counter // steps_per_epoch``, so a run restored from a
    checkpoint continues with the order of the epoch it is at; otherwise every new iterator
    (Keras starts one per epoch) takes the next order of a seeded sequence.

    :param shards: a source for :func:`resolve_shards` (scanned first with
        :func:`scan_csv_shards`: one extra pass), or the :class:`ShardStatistics` of a scan.
    :param batch_size: rows per batch.
    :param target: target column (index or header name); default: the statistics' target, or
        ``-1`` (the last column) when scanning.
    :param standardizer: applied to ``x`` and ``y`` inside the pipeline, e.g.
        ``statistics.standardizer()``; ``None`` passes the values through.
    :param classes: ``(negative, positive)`` labels of a classification target: ``y`` becomes
        ``1.0`` where it equals ``positive`` and ``0.0`` elsewhere (after any standardiser, so
        give a standardiser with ``standardize_targets=False``).
    :param shuffle_buffer: lines in the shuffle buffer; ``0`` keeps the interleaved file order.
    :param shuffle_files: permute the shard order every epoch.
    :param seed: seed of both shuffles.
    :param dtype: ``tf.float64`` (default) or ``tf.float32``.
    :param num_parallel_reads: shards read (and interleaved line by line) at a time.
    :param step_counter: an integer variable counting training steps (see above).
    :raises ValueError: for bad arguments; :class:`DataError` from the scan.
    """
    batch_size = check_positive_int("batch_size", batch_size)
    shuffle_buffer = check_nonnegative_int("shuffle_buffer", shuffle_buffer)
    num_parallel_reads = check_positive_int("num_parallel_reads", num_parallel_reads)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed: expected an int, got {seed!r}")
    if not isinstance(shuffle_files, bool):
        raise ValueError(f"shuffle_files: expected True or False, got {shuffle_files!r}")
    if step_counter is not None and (
        not isinstance(step_counter, tf.Variable) or not step_counter.dtype.is_integer
    ):
        raise ValueError(
            "step_counter: expected an integer tf.Variable (e.g. model.optimizer.iterations), "
            f"got {step_counter!r}"
        )
    dtype = _float_type(dtype)
    if isinstance(shards, ShardStatistics):
        statistics = shards
        if target is not None:
            header = list(statistics.header) if statistics.header else None
            index = _resolve_target(target, statistics.num_columns, header, "target")
            if index != statistics.target_index:
                raise ValueError(
                    f"target: {target!r} is column {index}, the statistics were scanned with "
                    f"target column {statistics.target_index}"
                )
    else:
        statistics = scan_csv_shards(shards, target=-1 if target is None else target)
    if standardizer is not None:
        if not isinstance(standardizer, Standardizer):
            raise ValueError(f"standardizer: expected a Standardizer, got {standardizer!r}")
        if standardizer.x_mean.shape != (statistics.num_features,):
            raise ValueError(
                f"standardizer: fitted to {standardizer.x_mean.shape[0]} inputs, the shards "
                f"have {statistics.num_features}"
            )
    if classes is not None:
        if np.shape(classes) != (2,) or classes[0] == classes[1]:
            raise ValueError(f"classes: expected two distinct labels, got {classes!r}")
        classes = (float(classes[0]), float(classes[1]))
    blank_lines = statistics.num_lines - statistics.num_rows
    if blank_lines >= batch_size:
        raise DataError(
            f"the shards hold {blank_lines} blank lines, at least batch_size ({batch_size}), so "
            "a batch could be empty; remove the blank lines"
        )

    steps_per_epoch = math.ceil(statistics.num_lines / batch_size)
    num_shards = len(statistics.shards)
    paths = tf.constant([str(path) for path in statistics.shards])  # [F]
    skips = tf.constant(statistics.skip_lines, dtype=tf.int64)  # [F]
    compressions = tf.constant([_compression(path) for path in statistics.shards])  # [F]
    cycle_length = min(num_parallel_reads, num_shards)
    seed_value = tf.constant(int(seed), tf.int64)

    def read_shard(path: tf.Tensor, skip: tf.Tensor, compression: tf.Tensor) -> tf.data.Dataset:
        return tf.data.TextLineDataset(path, compression_type=compression).skip(skip)

    def one_epoch(key: tf.Tensor) -> tf.data.Dataset:
        """The lines of one epoch, for the epoch key ``key`` (int64 scalar)."""
        epoch_seed = tf.stack([seed_value, tf.cast(key, tf.int64)])  # [2]
        order = tf.range(num_shards)
        if shuffle_files:
            order = tf.argsort(tf.random.stateless_uniform([num_shards], seed=epoch_seed))  # [F]
        files = tf.data.Dataset.from_tensor_slices(
            (tf.gather(paths, order), tf.gather(skips, order), tf.gather(compressions, order))
        )
        lines = files.interleave(
            read_shard,
            cycle_length=cycle_length,
            block_length=1,
            num_parallel_calls=cycle_length if cycle_length > 1 else None,
            deterministic=True if cycle_length > 1 else None,
        )
        if shuffle_buffer:
            # The buffer's seed pair is (graph seed, line_seed). Fix this function graph's seed
            # so the order does not depend on TF's global seed (with global seed 0, TF would also
            # compare the tensor line_seed with 0 in Python and fail).
            tf.compat.v1.set_random_seed(_GRAPH_SEED)
            line_seed = tf.random.stateless_uniform(
                [],
                seed=tf.random.experimental.stateless_fold_in(epoch_seed, 1),
                minval=0,
                maxval=2**31 - 1,
                dtype=tf.int64,
            )
            lines = lines.shuffle(shuffle_buffer, seed=line_seed, reshuffle_each_iteration=False)
        return lines

    if step_counter is not None:
        keys = tf.data.Dataset.range(1).map(
            lambda _: tf.cast(step_counter.read_value(), tf.int64) // steps_per_epoch
        )
    else:
        keys = tf.data.Dataset.random(seed=int(seed), rerandomize_each_iteration=True).take(1)

    num_columns, delimiter = statistics.num_columns, statistics.delimiter
    features = tf.constant(statistics.feature_index, dtype=tf.int32)  # [D]
    target_index = statistics.target_index
    if standardizer is not None:
        x_mean = tf.constant(standardizer.x_mean, tf.float64)  # [D]
        x_std = tf.constant(standardizer.x_std, tf.float64)  # [D]
        y_mean, y_std = float(standardizer.y_mean), float(standardizer.y_std)

    def decode(lines: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        table = _decode_lines(lines, num_columns, delimiter, skip_blank=blank_lines > 0)  # [B, C]
        x = tf.gather(table, features, axis=1)  # [B, D]
        y = table[:, target_index : target_index + 1]  # [B, 1]
        if standardizer is not None:
            x = (x - x_mean) / x_std
            y = (y - y_mean) / y_std
        if classes is not None:
            y = tf.cast(tf.equal(y, classes[1]), tf.float64)
        return tf.cast(x, dtype), tf.cast(y, dtype)

    batches = keys.flat_map(one_epoch).batch(batch_size)
    batches = batches.map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    batches = batches.apply(tf.data.experimental.assert_cardinality(steps_per_epoch))
    return batches.prefetch(tf.data.AUTOTUNE)
