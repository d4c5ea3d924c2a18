"""``model.fit`` with Adam, the learning-rate schedule, best-epoch selection, exact resume
from a backup, distribution strategies, and a :class:`~.config.TrainingDiverged` that names the
layer, epoch and batch of a non-finite step."""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from pathlib import Path
from typing import Callable, Optional, Protocol

import gpflow
import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from gpflux_avdgp.callbacks import BestEpochStopping, ValidationNLL
from gpflux_avdgp.layers.anchor_placement import place_anchors
from gpflux_avdgp.layers.base import NON_FINITE_MESSAGE
from gpflux_avdgp.models.finite_steps import NonFiniteStep
from gpflux_avdgp.optimizers import FlatAdam

from ..data import Split
from ..data.batching import epoch_shuffled_batches
from .best_epoch import ResumableEarlyStopping
from .config import TrainConfig, TrainingDiverged
from .distribute import UnevenBatchesWarning, shard_global_batches, uneven_batches_message
from .progress import EpochProgress

__all__ = [
    "KeptBackup",
    "Trainable",
    "best_epoch_callbacks",
    "compile_with",
    "fit_model",
    "fit_model_on_dataset",
]


class Trainable(Protocol):
    """What training needs of a built model (e.g. the experiments' ``BuiltModel``)."""

    model: tf_keras.Model  #: a model whose output is a packed mixture
    loss: tf_keras.losses.Loss  #: its loss, e.g. :class:`~gpflux_avdgp.AVDGPLoss`
    likelihood: gpflow.likelihoods.Likelihood  #: the likelihood the loss and scores use

    @property
    def label(self) -> str:
        """The model's name in progress lines and messages, e.g. ``"avdgp-ar2p"``."""


def fit_model(
    built: Trainable,
    inputs: np.ndarray,
    targets: np.ndarray,
    config: TrainConfig,
    *,
    progress: Optional[EpochProgress] = None,
    callbacks: tuple = (),
    backup_dir: Optional[Path] = None,
    strategy: Optional[tf.distribute.Strategy] = None,
) -> EpochProgress:
    """Compile ``built.model`` with Adam and its loss and fit ``(inputs [N, D], targets [N, 1])``.

    Batches come from :func:`~avdgp.data.batching.epoch_shuffled_batches` (the order of
    epoch ``e`` depends only on the seed and ``e``). With ``backup_dir``, a
    :class:`KeptBackup` there saves the model, optimizer and draw counters after an epoch
    every ``config.backup_interval`` seconds and after the last, and a run that was
    interrupted resumes from its last backup with the same batches and Monte Carlo draws as an
    uninterrupted run. The backup stays when training ends (the
    caller deletes it once the result is kept): fitting again on it trains no epoch.

    With a ``tf.distribute`` ``strategy`` (see :mod:`avdgp.training.distribute`; ``built``
    must have been built inside ``strategy.scope()``), the optimizer and ``compile`` are created in
    its scope and every global batch of ``config.batch_size`` rows is split over the replicas and
    workers, which gives the single-device trajectory when the batches split evenly (a warning says
    when they do not). Every worker calls this; under multi-worker training only the chief writes
    the real backup (tf_keras' rule), so resuming needs ``backup_dir`` on a file system that all
    workers share.

    :raises ValueError: if ``built`` was built outside ``strategy``'s scope, or a batch would
        leave a replica without rows.
    :raises TrainingDiverged: when a layer's output or gradient, or the loss, is not finite;
        the message names the layer (outside XLA), the epoch and the batch, and the backup
        keeps the weights of its last backup.
    :returns: the progress callback, holding per-epoch seconds and losses.
    """
    model = built.model
    scope = contextlib.nullcontext() if strategy is None else strategy.scope()
    if strategy is not None:
        _check_distributed_fit(model, strategy, len(inputs), config.batch_size)
    with scope:
        optimizer = _compile_with_adam(built, config, math.ceil(len(inputs) / config.batch_size))
    # prior reversion's anchors: on rows spread over the whole training set, the same on every
    # worker and replica (a worker's fit sees only its slice of each batch)
    place_anchors(model, inputs)
    data = epoch_shuffled_batches(
        inputs,
        targets,
        config.batch_size,
        seed=config.seed,
        step_counter=optimizer.iterations,
        dtype=model.inputs[0].dtype,
    )
    if strategy is not None:
        data = shard_global_batches(data)  # each worker: its slice of every global batch
    return _fit_reporting_divergence(built, data, config, progress, callbacks, backup_dir)


def fit_model_on_dataset(
    built: Trainable,
    data: tf.data.Dataset | Callable[[tf.Variable], tf.data.Dataset],
    config: TrainConfig,
    *,
    progress: Optional[EpochProgress] = None,
    callbacks: tuple = (),
    backup_dir: Optional[Path] = None,
) -> EpochProgress:
    """:func:`fit_model` on a ``tf.data`` pipeline instead of arrays, e.g. CSV shards streamed
    by :func:`avdgp.data.pipeline.csv_shard_dataset`.

    ``config.batch_size`` and ``config.seed`` are the pipeline's business; ``config.epochs``
    and ``config.learning_rate`` are used. The model's ``num_data`` must be the number of
    training rows the pipeline yields per epoch (the KL scaling).

    :param data: a dataset of ``(x [B, D], y [B, 1])`` batches in the model's float type, one
        epoch per iteration (known or unknown cardinality), or a function that takes the
        optimizer's step counter and returns one (it is called after ``compile``): a pipeline
        whose epoch order follows that counter resumes exactly from ``backup_dir``.
    :raises TrainingDiverged: as :func:`fit_model`.
    :returns: the progress callback, holding per-epoch seconds and losses.
    """
    make_data = data if callable(data) and not isinstance(data, tf.data.Dataset) else None
    steps_per_epoch = None
    if config.schedule != "constant":
        # the pipeline's length does not depend on the counter: a throwaway one tells it
        probe = data if make_data is None else make_data(tf.Variable(0, dtype=tf.int64))
        steps_per_epoch = int(probe.cardinality()) if isinstance(probe, tf.data.Dataset) else -1
        if steps_per_epoch < 1:
            raise ValueError(
                f"schedule={config.schedule!r} needs a dataset of known length (the schedule "
                "spans all epochs); use data.apply(tf.data.experimental.assert_cardinality("
                "batches_per_epoch)) or schedule='constant'"
            )
    optimizer = _compile_with_adam(built, config, steps_per_epoch)
    if make_data is not None:
        data = make_data(optimizer.iterations)
    if not isinstance(data, tf.data.Dataset):
        raise ValueError(f"data: expected a tf.data.Dataset of (x, y) batches, got {data!r}")
    if config.steps_per_execution > 1 and data.cardinality() == tf.data.UNKNOWN_CARDINALITY:
        raise ValueError(
            f"steps_per_execution={config.steps_per_execution} needs a dataset of known length "
            "(Keras must know where an epoch ends); use "
            "data.apply(tf.data.experimental.assert_cardinality(batches_per_epoch)) or 1"
        )
    return _fit_reporting_divergence(built, data, config, progress, callbacks, backup_dir)


def _compile_with_adam(
    built: Trainable, config: TrainConfig, steps_per_epoch: Optional[int]
) -> tf_keras.optimizers.Optimizer:
    """Compile ``built.model`` with Adam, its loss and ``config.steps_per_execution``; the
    optimizer's slots are made up front, so the train function is traced once. The learning
    rate is ``config``'s schedule over ``steps_per_epoch`` (a plain number when unknown).
    Adam is :class:`~gpflux_avdgp.optimizers.FlatAdam` (the same updates in a few ops) on one
    device, Keras' own across the replicas of a ``tf.distribute`` strategy."""
    rate = (
        config.learning_rate
        if steps_per_epoch is None
        else config.learning_rate_for(steps_per_epoch)
    )
    if tf.distribute.get_strategy().num_replicas_in_sync > 1:
        optimizer = tf_keras.optimizers.Adam(rate)
    else:
        optimizer = FlatAdam(rate)
    return compile_with(built, config, optimizer)


def compile_with(
    built: Trainable, config: TrainConfig, optimizer: tf_keras.optimizers.Optimizer
) -> tf_keras.optimizers.Optimizer:
    """Compile ``built.model`` with ``optimizer`` (its slots made up front, so the train
    function is traced once), its loss and ``config.steps_per_execution``."""
    optimizer.build(built.model.trainable_variables)
    built.model.compile(
        optimizer=optimizer, loss=built.loss, steps_per_execution=config.steps_per_execution
    )
    return optimizer


class KeptBackup(tf_keras.callbacks.BackupAndRestore):
    """``BackupAndRestore`` whose backup outlives ``fit``: its owner deletes it once the
    trained model is kept, so a kill between the end of training and that moment resumes
    with no epoch left instead of training again from epoch 0. It backs up after an epoch
    once ``interval`` seconds have passed since its last backup (or since training began),
    after the last epoch and after an epoch where a callback stopped training (early
    stopping, backed up as the last epoch: a resume trains no further epoch). Callbacks whose
    state must match the backup's epoch (:class:`~avdgp.training.best_epoch.
    ResumableEarlyStopping`) have a ``keep_state(epoch)`` that it calls just before it backs up.

    :param backup_dir: the backup's folder.
    :param interval: seconds between backups (:attr:`~.config.TrainConfig.backup_interval`).
    :param companions: callbacks with ``keep_state(epoch)``.
    """

    def __init__(self, backup_dir: Path, interval: float = 0.0, companions: tuple = ()):
        super().__init__(str(backup_dir), delete_checkpoint=False)
        self.interval, self.companions = float(interval), tuple(companions)
        #: the epoch of the last backup this fit wrote (``None``: none yet)
        self.backed_up_epoch: Optional[int] = None
        self._last_backup = None

    def on_train_begin(self, logs: Optional[dict] = None) -> None:
        super().on_train_begin(logs)
        self._last_backup = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        last = self.model.stop_training or epoch == self.params["epochs"] - 1
        if not last and time.perf_counter() - self._last_backup < self.interval:
            return
        if self.model.stop_training:  # the backup records the epoch its epoch began with
            super().on_epoch_begin(self.params["epochs"] - 1)
        for companion in self.companions:
            companion.keep_state(epoch)
        super().on_epoch_end(epoch, logs)
        self.backed_up_epoch, self._last_backup = epoch, time.perf_counter()


def _fit_reporting_divergence(
    built: Trainable,
    data: tf.data.Dataset,
    config: TrainConfig,
    progress: Optional[EpochProgress],
    callbacks: tuple,
    backup_dir: Optional[Path],
) -> EpochProgress:
    """``model.fit`` on ``data`` with the progress, user and backup callbacks; a non-finite
    layer output or gradient becomes :class:`TrainingDiverged` naming layer, epoch and batch."""
    progress = progress or EpochProgress(built.label, stream=None)
    progress.steps_per_execution = config.steps_per_execution
    all_callbacks = [progress, *callbacks]  # progress first: it stops before a backup of NaNs
    backup = None
    if backup_dir is not None:
        companions = tuple(c for c in callbacks if isinstance(c, ResumableEarlyStopping))
        # workers decide alike only by epochs: a clock would let them back up apart
        many_workers = isinstance(
            built.model.distribute_strategy, tf.distribute.MultiWorkerMirroredStrategy
        )
        interval = 0.0 if many_workers else config.backup_interval
        backup = KeptBackup(backup_dir, interval, companions)
        all_callbacks.append(backup)
    try:
        built.model.fit(data, epochs=config.epochs, verbose=0, callbacks=all_callbacks)
    except NonFiniteStep as error:  # an AVDGPModel's own check: bad data, or a divergence
        if error.in_data:
            raise
        raise TrainingDiverged(f"{progress.label}: {error}") from None
    except tf.errors.InvalidArgumentError as error:
        if not is_numerical_failure(error):
            raise  # another failure (e.g. a shape error) is not a divergence
        message = _describe_non_finite_step(error, built.model, progress, backup)
        raise TrainingDiverged(message) from None
    return progress


#: Message parts of the numerical checks a training step can trip: ours (``check_numerics`` in
#: every GP layer), GPflow's (``check_numerics`` on posterior Cholesky factors) and a Cholesky
#: factorisation of a matrix that NaN weights made invalid.
NUMERICAL_FAILURE_MARKS = (
    NON_FINITE_MESSAGE,
    "Cholesky factor is non-finite",
    "Cholesky decomposition was not successful",
    "CheckNumerics",
)


def is_numerical_failure(error: tf.errors.InvalidArgumentError) -> bool:
    """Whether a training step's ``error`` is a NaN/inf check or a failed Cholesky factorisation
    (a divergence), not a shape or data error.

    The message text is the only mark: an error raised from a graph function carries no op,
    node or payload (``error.op``, ``error.node_def`` are ``None``, ``experimental_payloads``
    empty; TF 2.21).
    """
    message = str(error.message)
    return any(mark in message for mark in NUMERICAL_FAILURE_MARKS)


def _check_distributed_fit(
    model: tf_keras.Model, strategy: tf.distribute.Strategy, num_rows: int, batch_size: int
) -> None:
    """Refuse a model built outside ``strategy``'s scope or a batch too small for its
    replicas; warn when the batches do not split evenly over the replicas."""
    if model.distribute_strategy is not strategy:
        raise ValueError(
            f"strategy: the model was built outside this strategy's scope; build it inside "
            f"'with strategy.scope():' ({type(strategy).__name__})"
        )
    message = uneven_batches_message(num_rows, batch_size, strategy.num_replicas_in_sync)
    if message is not None:
        warnings.warn(message, UnevenBatchesWarning, stacklevel=3)


def _describe_non_finite_step(
    error: tf.errors.InvalidArgumentError,
    model: tf_keras.Model,
    progress: EpochProgress,
    backup: Optional[KeptBackup],
) -> str:
    """One sentence: which layer's output or gradient was not finite, in which epoch and
    batch, and where the last backed-up weights are. ``error`` comes from a layer's
    ``check_numerics``, whose message starts with the layer's name."""
    text = str(error.message)
    layer = next((layer.name for layer in model.layers if f"{layer.name}: " in text), None)
    part = "the gradient at the output" if "gradient" in text else "the output"
    where = f"layer '{layer}'" if layer else "a layer"
    if NON_FINITE_MESSAGE not in text:  # GPflow's check or a Cholesky factorisation
        part = "a Cholesky factor" if "Cholesky" in text else "a checked tensor"
        where = "a GPflow computation"
    first = progress.batch + 1
    last = first + progress.steps_per_execution - 1
    steps = (getattr(progress, "params", None) or {}).get("steps")
    if steps is not None:
        last = min(last, steps)
    batches = f"batch {first}" if last == first else f"one of batches {first} to {last}"
    message = (
        f"{progress.label}: training stopped in epoch {progress.epoch + 1}, {batches}: "
        f"non-finite values (NaN or inf) in {part} of {where}"
    )
    if backup is not None and backup.backed_up_epoch is not None:
        message += (
            f"; the weights after epoch {backup.backed_up_epoch + 1} are kept in "
            f"{backup.backup_dir}"
        )
    return message


def best_epoch_callbacks(
    built: Trainable, split: Split, config: TrainConfig, *, state_dir: Optional[Path] = None
) -> tuple:
    """``(ValidationNLL, BestEpochStopping)`` that end training with the weights of the epoch of
    lowest validation NLL (a guard keeps its last), stopping after ``config.patience`` epochs
    without improvement (never, without it), or ``()`` without ``config.restore_best``. With
    ``state_dir`` (beside the backup of a resumable run) the selection's state survives an
    interruption (:class:`~avdgp.training.best_epoch.ResumableEarlyStopping`).

    :raises ValueError: with ``restore_best`` and an empty validation split.
    """
    if not config.restore_best:
        return ()
    if not len(split.x_val):
        raise ValueError(
            "restore_best: selecting the best epoch needs validation rows, the split has none"
        )
    scorer = ValidationNLL(split.x_val, split.y_val, likelihood=built.likelihood)
    options = dict(
        monitor=scorer.name,
        mode="min",
        patience=config.epochs if config.patience is None else config.patience,
        restore_best_weights=True,
    )
    if state_dir is None:
        return (scorer, BestEpochStopping(**options))
    return (scorer, ResumableEarlyStopping(state_dir, curve=scorer, **options))
