"""Train one model on CSV shards streamed from disk and score it on streamed test shards.

The counterpart of :class:`~avdgp.training.runner.SplitData` for data larger than memory
(``avdgp fit 'shards/*.csv.gz'``): the training shards are scanned once for their row count and
standardiser (:func:`~avdgp.data.shards.scan_csv_shards`), then streamed every epoch
(:func:`~avdgp.data.pipeline.csv_shard_dataset`); the test shards are streamed in chunks,
each chunk predicted and scored, and the chunk scores merged. :class:`ShardData` is that data
source; the run itself is the one skeleton
:func:`~avdgp.training.skeleton.run`, so the result is the same
:class:`~avdgp.training.record.RunRecord` as with arrays (no validation set: ``n_val`` 0, ``val``
``None``; ``streamed_shards`` set).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from avdgp.data import DataError, Standardizer
from avdgp.data.pipeline import csv_shard_dataset
from avdgp.data.shards import ShardStatistics, scan_csv_shards
from avdgp.training.config import TrainConfig
from avdgp.training.fit import fit_model_on_dataset
from avdgp.training.rundir import shard_data
from avdgp.training.runner import (
    class_probabilities,
    classification_scores,
    score_prediction,
)
from avdgp.training.skeleton import Scored, Trained
from avdgp.zoo import BuiltModel, Task
from gpflux_avdgp.checks import check_positive_int
from gpflux_avdgp.prediction import predict_mixture

__all__ = ["ShardData", "check_test_shards", "score_streamed"]

#: Rows of training data used to initialise global inducing points (svgp, dsdgp, dspp).
INIT_ROWS = 4096


class ShardWatch(tf_keras.callbacks.Callback):
    """Stops training at the start of an epoch if a training shard changed since its scan
    (a changed shard would be read with the old row count and standardiser)."""

    def __init__(self, statistics: ShardStatistics, save_dir: Optional[Path]):
        super().__init__()
        self.statistics, self.save_dir = statistics, save_dir

    def on_epoch_begin(self, epoch: int, logs: Optional[dict] = None) -> None:
        changes = self.statistics.changes()
        if changes:
            raise DataError(_with_resume_hint(f"{changes[0]} (before epoch {epoch + 1})", self))


def _with_resume_hint(message: str, watch: "ShardWatch") -> str:
    if watch.save_dir is None:
        return message
    return (
        f"{message}; {watch.save_dir} keeps its last backup: restore the shard and run "
        "the same command to resume"
    )


def _shard_failure(error: tf.errors.OpError, watch: ShardWatch, when: str) -> Optional[DataError]:
    """The :class:`DataError` behind a TensorFlow error raised while reading shards ``when``
    (``"in epoch 4"``): a shard that changed since its scan, else the first bad cell a new
    scan finds; ``None`` if the shards are as scanned and read cleanly (not a data error)."""
    statistics = watch.statistics
    changes = statistics.changes()
    if changes:
        return DataError(_with_resume_hint(f"{changes[0]} (found {when})", watch))
    try:
        scan_csv_shards(list(statistics.shards), target=statistics.target_index)
    except DataError as located:
        return DataError(_with_resume_hint(f"{located} (found {when})", watch))
    return None


def check_test_shards(train: ShardStatistics, test: ShardStatistics) -> None:
    """Refuse test shards whose columns differ from the training shards', or that repeat one.

    :raises DataError: naming the first test shard that does not fit.
    """
    shared = set(path.resolve() for path in train.shards) & set(
        path.resolve() for path in test.shards
    )
    if shared:
        first = next(path for path in test.shards if path.resolve() in shared)
        raise DataError(f"{first}: is a training shard and a test shard")
    where = f"{test.shards[0]}: the test shards differ from the training shards"
    if test.num_columns != train.num_columns:
        raise DataError(f"{where}: {test.num_columns} columns, not {train.num_columns}")
    if test.header != train.header:
        shown = ", ".join(test.header) if test.header else "no header"
        expected = ", ".join(train.header) if train.header else "no header"
        raise DataError(f"{where}: header ({shown}) is not ({expected})")
    if test.target_index != train.target_index:
        raise DataError(f"{where}: target column {test.target_index}, not {train.target_index}")


def _combine(chunks: list[tuple[int, dict]]) -> dict:
    """Merge per-chunk means (``rmse``: root mean square) weighted by the chunk sizes."""
    total = sum(count for count, _ in chunks)
    merged = {}
    for key in chunks[0][1]:
        if key == "rmse":
            merged[key] = float(np.sqrt(sum(n * s[key] ** 2 for n, s in chunks) / total))
        else:
            merged[key] = float(sum(n * s[key] for n, s in chunks) / total)
    return merged


def score_streamed(
    built: BuiltModel,
    test: ShardStatistics,
    task: Task,
    standardizer: Optional[Standardizer],
    *,
    classes: Optional[tuple[float, float]] = None,
    dtype: object = tf.float64,
    chunk_rows: int = 50_000,
    predict_batch_size: int = 1000,
) -> tuple[dict, Optional[dict], float]:
    """Predict the test shards chunk by chunk and score them.

    Regression: every chunk of ``chunk_rows`` rows is scored with
    :func:`~avdgp.training.runner.score_prediction` and the chunk scores are merged
    (means weighted by rows; RMSE as the root of the merged mean square): equal, up to
    round-off, to scoring all rows at once, with memory for one chunk. Classification keeps the
    probabilities and the label of every test row (``8 (K + 1)`` bytes a row; ``K = 1`` for
    two classes) for the calibration error.

    :returns: ``(metrics, metrics in original units or None, seconds)``; the seconds cover
        reading, decoding and predicting, after a warm-up prediction of one batch.
    """
    chunk_rows = check_positive_int("chunk_rows", chunk_rows)
    data = csv_shard_dataset(
        test,
        batch_size=chunk_rows,
        standardizer=standardizer,
        classes=classes,
        shuffle_buffer=0,
        shuffle_files=False,
        num_parallel_reads=1,
        dtype=dtype,
    )
    first_x, _ = next(iter(data.take(1)))
    predict_mixture(
        built.model,
        first_x[:predict_batch_size],
        likelihood=built.likelihood,
        batch_size=predict_batch_size,
    )  # warm-up: tracing is not timed
    start = time.perf_counter()
    scored, original, probabilities, labels = [], [], [], []
    for x, y in data:
        prediction = predict_mixture(
            built.model, x, likelihood=built.likelihood, batch_size=predict_batch_size
        )
        targets = y.numpy().astype(np.float64)  # [B, 1]
        if task is Task.CLASSIFICATION:
            probabilities.append(class_probabilities(prediction))  # [B] or [B, K]
            labels.append(targets[:, 0])
            continue
        chunk, chunk_original = score_prediction(prediction, targets, task, standardizer)
        scored.append((len(targets), chunk))
        if chunk_original is not None:
            original.append((len(targets), chunk_original))
    seconds = time.perf_counter() - start
    if task is Task.CLASSIFICATION:
        result = classification_scores(np.concatenate(labels), np.concatenate(probabilities))
        return result, None, seconds
    return _combine(scored), (_combine(original) if original else None), seconds


def _init_rows(
    train: ShardStatistics, standardizer: Optional[Standardizer], config: TrainConfig
) -> np.ndarray:
    """Up to ``INIT_ROWS`` shuffled, standardised training inputs ``[n, D]``."""
    data = csv_shard_dataset(
        train,
        batch_size=min(INIT_ROWS, train.num_rows),
        standardizer=standardizer,
        seed=config.seed,
    )
    x, _ = next(iter(data.take(1)))
    return x.numpy()


class ShardData:
    """A run's data as CSV shards streamed from disk, for :func:`~avdgp.training.skeleton.run`.

    Every epoch streams ``train`` through :func:`~avdgp.data.pipeline.csv_shard_dataset`
    (standardised by ``standardizer``, shard order and a ``shuffle_buffer``-line buffer
    shuffled by ``config.seed`` and the epoch read from the optimizer's step counter, so a run
    interrupted under its save folder resumes exactly). The model's ``num_data`` is
    ``train.num_rows``; the record's ``n_val`` is 0.

    :param train: the scan of the training shards.
    :param test: the scan of the test shards (same columns; checked, :func:`check_test_shards`).
    :param standardizer: e.g. ``train.standardizer()``; classification: inputs only.
    :param classes: the two labels of a classification target (``train.target_classes()``).
    """

    def __init__(
        self,
        train: ShardStatistics,
        test: ShardStatistics,
        *,
        standardizer: Optional[Standardizer],
        classes: Optional[tuple[float, float]] = None,
        shuffle_buffer: int = 10_000,
        num_parallel_reads: int = 4,
        test_chunk_rows: int = 50_000,
    ):
        check_test_shards(train, test)
        self.train_shards, self.test_shards = train, test
        self.standardizer, self.classes = standardizer, classes
        self.shuffle_buffer, self.num_parallel_reads = shuffle_buffer, num_parallel_reads
        self.test_chunk_rows = test_chunk_rows
        self.sizes = (train.num_rows, 0, test.num_rows, train.num_features)
        self.streamed_shards = {"train": len(train.shards), "test": len(test.shards)}

    def identity(self) -> dict:
        return shard_data(self.train_shards)

    def init_inputs(self, config: TrainConfig) -> np.ndarray:
        return _init_rows(self.train_shards, self.standardizer, config)

    def train(self, built, config, *, progress, backup_dir, strategy) -> Trained:
        """Stream the training shards every epoch; a shard changed or broken meanwhile ends
        the run with a :class:`DataError` naming it."""
        if strategy is not None:
            raise ValueError("strategy: streamed CSV shards train on one device")

        def training_data(step_counter: tf.Variable) -> tf.data.Dataset:
            return csv_shard_dataset(
                self.train_shards,
                batch_size=config.batch_size,
                standardizer=self.standardizer,
                classes=self.classes,
                shuffle_buffer=self.shuffle_buffer,
                seed=config.seed,
                dtype=config.dtype,
                num_parallel_reads=self.num_parallel_reads,
                step_counter=step_counter,
            )

        save_dir = None if backup_dir is None else backup_dir.parent  # the run's folder
        watch = ShardWatch(self.train_shards, save_dir)
        try:
            fit_model_on_dataset(
                built,
                training_data,
                config,
                progress=progress,
                callbacks=(watch,),
                backup_dir=backup_dir,
            )
        except tf.errors.OpError as error:  # e.g. DecodeCSV on a shard rewritten meanwhile
            failure = _shard_failure(error, watch, f"in epoch {progress.epoch + 1}")
            if failure is None:
                raise
            raise failure from None
        return Trained(stopped_epoch=config.epochs)  # no validation split: no early stopping

    def score(self, built, task, standardizer, config, predict_batch_size) -> Scored:
        """Stream the test shards in chunks (:func:`score_streamed`); no validation split."""
        try:
            test_scores, test_original, seconds = score_streamed(
                built,
                self.test_shards,
                task,
                standardizer,
                classes=self.classes,
                dtype=config.dtype,
                chunk_rows=self.test_chunk_rows,
                predict_batch_size=predict_batch_size,
            )
        except tf.errors.OpError as error:
            watch = ShardWatch(self.test_shards, None)
            failure = _shard_failure(error, watch, "while scoring the test set")
            if failure is None:
                raise
            raise failure from None
        return Scored(test_scores, test_original, None, seconds)
