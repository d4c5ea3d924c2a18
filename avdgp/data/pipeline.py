"""The ``tf.data`` pipeline ``model.fit`` trains on when the data are CSV shards.

The shard order is shuffled per epoch, lines of ``num_parallel_reads`` shards are interleaved
and shuffled in a bounded buffer, then batched, decoded and standardised batch by batch (no
Python per row), and prefetched. Its cardinality is known from the scan
(:func:`~avdgp.data.shards.scan_csv_shards`), so ``epochs > 1`` works without
``steps_per_epoch``. Memory is bounded by the shuffle buffer (lines of text), the prefetched
batches and the readers' buffers, not by the data size.
"""

from __future__ import annotations

import math
from typing import Callable, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from gpflux_avdgp.checks import check_nonnegative_int, check_positive_int

from .csv_format import DataError, resolve_target
from .shard_files import ShardSource
from .shards import ShardStatistics, compression, decode_lines, scan_csv_shards
from .standardizer import Standardizer

__all__ = ["csv_shard_dataset"]

#: Graph-level seed of the per-epoch pipeline graph (any constant but 0).
_GRAPH_SEED = 20240517


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
    classes: Optional[Sequence[float]] = None,
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
    :param classes: the ``K >= 2`` distinct labels of a classification target, in class order
        (e.g. ``statistics.target_classes()``): ``y`` becomes the class index ``k`` where it
        equals ``classes[k]`` (after any standardiser, so give a standardiser with
        ``standardize_targets=False``); a value in no class reads as class 0 (scans check
        the test labels against the training ones). For ``(negative, positive)`` that is
        ``1.0`` where ``y`` is ``positive``, else ``0.0``.
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
    statistics = _statistics(shards, target)
    _check_standardizer(standardizer, statistics.num_features)
    if classes is not None:
        classes = _check_classes(classes)
    blank_lines = statistics.num_lines - statistics.num_rows
    if blank_lines >= batch_size:
        raise DataError(
            f"the shards hold {blank_lines} blank lines, at least batch_size ({batch_size}), so "
            "a batch could be empty; remove the blank lines"
        )

    steps_per_epoch = math.ceil(statistics.num_lines / batch_size)
    if step_counter is not None:
        keys = tf.data.Dataset.range(1).map(
            lambda _: tf.cast(step_counter.read_value(), tf.int64) // steps_per_epoch
        )
    else:
        keys = tf.data.Dataset.random(seed=int(seed), rerandomize_each_iteration=True).take(1)
    one_epoch = _epoch_lines(
        statistics,
        seed=int(seed),
        shuffle_files=shuffle_files,
        shuffle_buffer=shuffle_buffer,
        num_parallel_reads=num_parallel_reads,
    )
    decode = _batch_decoder(statistics, standardizer, classes, dtype, skip_blank=blank_lines > 0)
    batches = keys.flat_map(one_epoch).batch(batch_size)
    batches = batches.map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    batches = batches.apply(tf.data.experimental.assert_cardinality(steps_per_epoch))
    return batches.prefetch(tf.data.AUTOTUNE)


def _statistics(
    shards: Union[ShardSource, ShardStatistics], target: Union[int, str, None]
) -> ShardStatistics:
    """The scan of ``shards`` (scanned now unless given), checked against ``target``."""
    if not isinstance(shards, ShardStatistics):
        return scan_csv_shards(shards, target=-1 if target is None else target)
    if target is not None:
        header = list(shards.header) if shards.header else None
        index = resolve_target(target, shards.num_columns, header, "target")
        if index != shards.target_index:
            raise ValueError(
                f"target: {target!r} is column {index}, the statistics were scanned with "
                f"target column {shards.target_index}"
            )
    return shards


def _check_standardizer(standardizer: Optional[Standardizer], num_features: int) -> None:
    if standardizer is None:
        return
    if not isinstance(standardizer, Standardizer):
        raise ValueError(f"standardizer: expected a Standardizer, got {standardizer!r}")
    if standardizer.x_mean.shape != (num_features,):
        raise ValueError(
            f"standardizer: fitted to {standardizer.x_mean.shape[0]} inputs, the shards "
            f"have {num_features}"
        )


def _epoch_lines(
    statistics: ShardStatistics,
    *,
    seed: int,
    shuffle_files: bool,
    shuffle_buffer: int,
    num_parallel_reads: int,
) -> Callable[[tf.Tensor], tf.data.Dataset]:
    """``one_epoch(key)``: the text lines of the epoch with key ``key`` (int64 scalar), the
    shard order permuted and the lines shuffled by ``(seed, key)``."""
    num_shards = len(statistics.shards)
    paths = tf.constant([str(path) for path in statistics.shards])  # [F]
    skips = tf.constant(statistics.skip_lines, dtype=tf.int64)  # [F]
    compressions = tf.constant([compression(path) for path in statistics.shards])  # [F]
    cycle_length = min(num_parallel_reads, num_shards)
    seed_value = tf.constant(seed, tf.int64)

    def read_shard(path: tf.Tensor, skip: tf.Tensor, compression: tf.Tensor) -> tf.data.Dataset:
        return tf.data.TextLineDataset(path, compression_type=compression).skip(skip)

    def one_epoch(key: tf.Tensor) -> tf.data.Dataset:
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

    return one_epoch


def _check_classes(classes: Sequence[float]) -> tuple[float, ...]:
    """``classes`` as a tuple of at least two distinct finite floats."""
    try:
        values = tuple(float(value) for value in classes)
    except (TypeError, ValueError):
        raise ValueError(f"classes: expected numbers, got {classes!r}") from None
    if len(values) < 2 or len(set(values)) != len(values) or not np.all(np.isfinite(values)):
        raise ValueError(f"classes: expected 2 or more distinct finite labels, got {classes!r}")
    return values


def _batch_decoder(
    statistics: ShardStatistics,
    standardizer: Optional[Standardizer],
    classes: Optional[tuple[float, ...]],
    dtype: tf.DType,
    *,
    skip_blank: bool,
) -> Callable[[tf.Tensor], tuple[tf.Tensor, tf.Tensor]]:
    """``decode(lines [B])``: ``(x [B, D], y [B, 1])`` parsed in one ``decode_csv``,
    standardised, (classification) mapped to class indices and cast to ``dtype``."""
    num_columns, delimiter = statistics.num_columns, statistics.delimiter
    features = tf.constant(statistics.feature_index, dtype=tf.int32)  # [D]
    target_index = statistics.target_index
    if standardizer is not None:
        x_mean = tf.constant(standardizer.x_mean, tf.float64)  # [D]
        x_std = tf.constant(standardizer.x_std, tf.float64)  # [D]
        y_mean, y_std = float(standardizer.y_mean), float(standardizer.y_std)

    def decode(lines: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        table = decode_lines(lines, num_columns, delimiter, skip_blank=skip_blank)  # [B, C]
        x = tf.gather(table, features, axis=1)  # [B, D]
        y = table[:, target_index : target_index + 1]  # [B, 1]
        if standardizer is not None:
            x = (x - x_mean) / x_std
            y = (y - y_mean) / y_std
        if classes is not None:  # [B, 1] == [K] -> [B, K]; the index of the match, else 0
            matches = tf.cast(tf.equal(y, tf.constant(classes, tf.float64)), tf.int32)
            y = tf.cast(tf.argmax(matches, axis=1)[:, None], tf.float64)
        return tf.cast(x, dtype), tf.cast(y, dtype)

    return decode
