"""Train one model on one split and measure it: the harness shared by ``fit``, ``bench``, ``demo``.

Every model goes through the same steps: build under the requested float type, stream the
standardised training set through ``tf.data`` (seeded shuffling, no float32 cast of float64
data), ``model.fit`` with Adam, then predict the test set as a Gaussian mixture and score it
with :mod:`gpflux_avdgp.metrics`, in standardised units (the paper's) and in original units.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import sys
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional, TextIO

import gpflow
import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from .. import metrics
from ..callbacks import ValidationNLL
from ..data import Split, Standardizer, epoch_shuffled_batches
from ..distribute import (
    UnevenBatchesWarning,
    barrier,
    is_chief,
    shard_global_batches,
    uneven_batches_message,
    worker_save_dir,
)
from ..layers.base import NON_FINITE_MESSAGE
from ..prediction import PredictiveMixture, predict_mixture
from ..presets import training_options
from ..validation import check_choice, check_positive_int
from .zoo import BuiltModel, ModelSpec, Task, build_model

__all__ = [
    "EpochProgress",
    "TrainConfig",
    "TrainingDiverged",
    "float_type",
    "fit_model",
    "fit_model_on_dataset",
    "run",
    "score_prediction",
    "standardise_split",
]

FLOAT_TYPES = {"float32": np.float32, "float64": np.float64}
#: Cholesky jitter per float type (float32 needs more to stay positive definite).
JITTER = {"float32": 1e-5, "float64": 1e-6}


#: Learning-rate schedules of :class:`TrainConfig`.
SCHEDULES = ("constant", "cosine")


class TrainingDiverged(RuntimeError):
    """The training loss became NaN or infinite."""


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings (paper: Adam 0.005, batch 100, 100 epochs).

    :param epochs: passes over the training set.
    :param batch_size: rows per step (paper: 100; 500 for data sets over 200k rows).
    :param learning_rate: Adam's step size.
    :param seed: seeds Keras/TF/NumPy, the shuffling and the model.
    :param dtype: ``"float64"`` (default, GPflow's) or ``"float32"``.
    :param steps_per_execution: training steps run by one call of Keras' train function
        (``model.compile(steps_per_execution=...)``): more steps per call spread Keras'
        per-call work (callbacks, iterator, loop) over them, with the same results up to
        floating-point rounding. A speed setting only: it is not part of a saved run's
        settings, so a run may resume with another value.
    :param schedule: ``"constant"`` (the paper) or ``"cosine"``: the learning rate follows a
        half cosine from ``learning_rate`` down to ``final_learning_fraction`` of it over all
        ``epochs`` (a ``tf_keras`` ``CosineDecay`` of the optimizer's step counter, so a resumed
        run continues on the same curve). It damps the late-training noise of the minibatch
        gradients (``docs/experiments/learning.md``).
    :param final_learning_fraction: the cosine schedule's last rate over its first, in [0, 1].
    :param restore_best: score the validation split's predictive NLL after every epoch
        (:class:`~gpflux_avdgp.ValidationNLL`) and end with the weights of the best epoch
        (Keras' ``EarlyStopping(restore_best_weights=True)``); needs a validation split. The
        record holds ``best_epoch``, ``stopped_epoch`` and the validation curve.
    :param patience: with ``restore_best``, stop once the validation NLL has not improved for
        this many epochs (``None``: train all ``epochs``). The cosine schedule still spans all
        ``epochs``, so stopping early gives the same best epoch as the full run whenever no
        better epoch comes after a gap of ``patience`` epochs (measured on elevators, where 10
        sufficed: ``docs/experiments/learning.md``).
    """

    epochs: int = 100
    batch_size: int = 100
    learning_rate: float = 0.005
    seed: int = 0
    dtype: str = "float64"
    steps_per_execution: int = 1
    schedule: str = "constant"
    final_learning_fraction: float = 0.1
    restore_best: bool = False
    patience: Optional[int] = None

    def __post_init__(self) -> None:
        check_positive_int("epochs", self.epochs)
        check_positive_int("batch_size", self.batch_size)
        check_positive_int("steps_per_execution", self.steps_per_execution)
        if not (isinstance(self.learning_rate, (int, float)) and self.learning_rate > 0):
            raise ValueError(f"learning_rate: expected a positive number, got {self.learning_rate}")
        if self.dtype not in FLOAT_TYPES:
            raise ValueError(f"dtype: expected one of {sorted(FLOAT_TYPES)}, got {self.dtype!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule: expected one of {list(SCHEDULES)}, got {self.schedule!r}")
        if not isinstance(self.restore_best, bool):
            raise ValueError(f"restore_best: expected a bool, got {self.restore_best!r}")
        if self.patience is not None:
            check_positive_int("patience", self.patience)
            if not self.restore_best:
                raise ValueError(
                    f"patience: stopping early needs restore_best=True, got patience="
                    f"{self.patience} with restore_best=False"
                )
        fraction = self.final_learning_fraction
        if not (isinstance(fraction, (int, float)) and 0.0 <= fraction <= 1.0):
            raise ValueError(
                f"final_learning_fraction: expected a number in [0, 1], got {fraction}"
            )

    @classmethod
    def from_preset(cls, preset: str = "default", **settings) -> "TrainConfig":
        """The settings of ``preset`` (:func:`gpflux_avdgp.presets.training_options`) with
        ``settings`` on top; ``None`` values are ignored, ``patience=0`` means "train all
        epochs" (``patience=None``). Turning ``restore_best`` off also turns off the preset's
        ``patience`` (there is nothing to stop on), unless ``patience`` is given too."""
        options = training_options(preset)
        given = {key: value for key, value in settings.items() if value is not None}
        options.update(given)
        if options.get("patience") == 0 or (
            not options["restore_best"] and "patience" not in given
        ):
            options["patience"] = None
        return cls(**options)

    def learning_rate_for(self, steps_per_epoch: int):
        """Adam's learning rate: the number, or the schedule over ``epochs * steps_per_epoch``."""
        if self.schedule == "constant":
            return self.learning_rate
        return tf_keras.optimizers.schedules.CosineDecay(
            self.learning_rate,
            decay_steps=max(
                1, self.epochs * check_positive_int("steps_per_epoch", steps_per_epoch)
            ),
            alpha=self.final_learning_fraction,
        )


@contextlib.contextmanager
def float_type(name: str) -> Iterator[None]:
    """Set GPflow's default float and jitter for the models built and trained inside."""
    previous_float, previous_jitter = gpflow.default_float(), gpflow.default_jitter()
    gpflow.config.set_default_float(FLOAT_TYPES[name])
    gpflow.config.set_default_jitter(JITTER[name])
    try:
        yield
    finally:
        gpflow.config.set_default_float(previous_float)
        gpflow.config.set_default_jitter(previous_jitter)


class EpochProgress(tf_keras.callbacks.Callback):
    """One line per epoch (loss, seconds, ETA) and the wall-clock time of each epoch.

    Raises :class:`TrainingDiverged` at the end of an epoch whose loss is not finite.

    :param label: printed in front of every line.
    :param stream: where to print; ``None`` prints nothing.
    """

    def __init__(self, label: str, stream: Optional[TextIO] = sys.stderr):
        super().__init__()
        self._supports_tf_logs = True  # batch hooks must not fetch the loss every step
        self.label, self.stream = label, stream
        self.seconds: list[float] = []
        self.losses: list[float] = []
        self.first_epoch: Optional[int] = None
        self.epoch, self.batch = 0, 0
        self.steps_per_execution = 1  # batches per train-function call, set by fit_model

    def on_epoch_begin(self, epoch: int, logs: Optional[dict] = None) -> None:
        self._start = time.perf_counter()
        if self.first_epoch is None:
            self.first_epoch = epoch  # > 0 when training resumed from a backup
        self.epoch, self.batch = epoch, 0

    def on_train_batch_begin(self, batch: int, logs: Optional[dict] = None) -> None:
        self.batch = batch  # where a failing step happened; no host round-trip needed

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        self.seconds.append(time.perf_counter() - self._start)
        loss = float((logs or {}).get("loss", math.nan))
        self.losses.append(loss)
        total = self.params.get("epochs", len(self.seconds))
        if self.stream is not None:
            steady = self.seconds[1:] or self.seconds
            eta = np.mean(steady) * (total - epoch - 1)
            print(
                f"[{self.label}] epoch {epoch + 1}/{total} loss {loss:.4f} "
                f"{self.seconds[-1]:.1f} s (ETA {eta:.0f} s)",
                file=self.stream,
                flush=True,
            )
        if not math.isfinite(loss):
            self.model.stop_training = True
            raise TrainingDiverged(
                f"{self.label}: the training loss became {loss} in epoch {epoch + 1}"
            )


def fit_model(
    built: BuiltModel,
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

    Batches come from :func:`~gpflux_avdgp.data.epoch_shuffled_batches` (the order of
    epoch ``e`` depends only on the seed and ``e``). With ``backup_dir``, a
    ``tf_keras.callbacks.BackupAndRestore`` there saves the model, optimizer and draw counters
    after every epoch, and a run that was interrupted resumes from its last finished epoch
    with the same batches and Monte Carlo draws as an uninterrupted run.

    With a ``tf.distribute`` ``strategy`` (see :mod:`gpflux_avdgp.distribute`; ``built`` must
    have been built inside ``strategy.scope()``), the optimizer and ``compile`` are created in
    its scope and every global batch of ``config.batch_size`` rows is split over the replicas
    and workers, which gives the single-device trajectory when the batches split evenly (a
    warning says when they do not). Every worker calls this; under multi-worker training only
    the chief writes the real backup (tf_keras' rule), so resuming needs ``backup_dir`` on a
    file system that all workers share.

    :raises ValueError: if ``built`` was built outside ``strategy``'s scope, or a batch would
        leave a replica without rows.
    :raises TrainingDiverged: when a layer's output or gradient, or the loss, is not finite;
        the message names the layer (outside XLA), the epoch and the batch, and the backup
        keeps the weights of the last finished epoch.
    :returns: the progress callback, holding per-epoch seconds and losses.
    """
    model = built.model
    scope = contextlib.nullcontext() if strategy is None else strategy.scope()
    if strategy is not None:
        _check_distributed_fit(model, strategy, len(inputs), config.batch_size)
    with scope:
        optimizer = _compile_with_adam(built, config, math.ceil(len(inputs) / config.batch_size))
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
    built: BuiltModel,
    data: tf.data.Dataset | Callable[[tf.Variable], tf.data.Dataset],
    config: TrainConfig,
    *,
    progress: Optional[EpochProgress] = None,
    callbacks: tuple = (),
    backup_dir: Optional[Path] = None,
) -> EpochProgress:
    """:func:`fit_model` on a ``tf.data`` pipeline instead of arrays, e.g. CSV shards streamed
    by :func:`gpflux_avdgp.data.csv_shard_dataset`.

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
    built: BuiltModel, config: TrainConfig, steps_per_epoch: Optional[int]
) -> tf_keras.optimizers.Optimizer:
    """Compile ``built.model`` with Adam, its loss and ``config.steps_per_execution``; the
    optimizer's slots are made up front, so the train function is traced once. The learning
    rate is ``config``'s schedule over ``steps_per_epoch`` (a plain number when unknown)."""
    rate = (
        config.learning_rate
        if steps_per_epoch is None
        else config.learning_rate_for(steps_per_epoch)
    )
    optimizer = tf_keras.optimizers.Adam(rate)
    optimizer.build(built.model.trainable_variables)
    built.model.compile(
        optimizer=optimizer, loss=built.loss, steps_per_execution=config.steps_per_execution
    )
    return optimizer


def _fit_reporting_divergence(
    built: BuiltModel,
    data: tf.data.Dataset,
    config: TrainConfig,
    progress: Optional[EpochProgress],
    callbacks: tuple,
    backup_dir: Optional[Path],
) -> EpochProgress:
    """``model.fit`` on ``data`` with the progress, user and backup callbacks; a non-finite
    layer output or gradient becomes :class:`TrainingDiverged` naming layer, epoch and batch."""
    progress = progress or EpochProgress(built.spec.label, stream=None)
    progress.steps_per_execution = config.steps_per_execution
    all_callbacks = [progress, *callbacks]  # progress first: it stops before a backup of NaNs
    if backup_dir is not None:
        all_callbacks.append(tf_keras.callbacks.BackupAndRestore(str(backup_dir)))
    try:
        built.model.fit(data, epochs=config.epochs, verbose=0, callbacks=all_callbacks)
    except tf.errors.InvalidArgumentError as error:
        if NON_FINITE_MESSAGE not in str(error.message):
            raise  # another failure (e.g. a shape error) is not a divergence
        raise TrainingDiverged(
            _describe_non_finite_step(error, built.model, progress, backup_dir)
        ) from None
    return progress


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


def _remove_if_empty(directory: Path) -> None:
    """Remove ``directory`` if it exists and is empty (another worker may do the same)."""
    with contextlib.suppress(OSError):
        if directory.is_dir() and not any(directory.iterdir()):
            directory.rmdir()


def _describe_non_finite_step(
    error: tf.errors.InvalidArgumentError,
    model: tf_keras.Model,
    progress: EpochProgress,
    backup_dir: Optional[Path],
) -> str:
    """One sentence: which layer's output or gradient was not finite, in which epoch and
    batch, and where the last good weights are. ``error`` comes from a layer's
    ``check_numerics``, whose message starts with the layer's name."""
    text = str(error.message)
    layer = next((layer.name for layer in model.layers if f"{layer.name}: " in text), None)
    part = "the gradient at the output" if "gradient" in text else "the output"
    where = f"layer '{layer}'" if layer else "a layer"
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
    if backup_dir is not None and progress.epoch > 0:
        message += (
            f"; the weights of the last finished epoch ({progress.epoch}) are kept in "
            f"{backup_dir}"
        )
    return message


def score_prediction(
    prediction: PredictiveMixture,
    targets: np.ndarray,
    task: Task,
    standardizer: Optional[Standardizer] = None,
) -> tuple[dict, Optional[dict]]:
    """Metrics of a prediction, in model units and (regression) in the targets' original units.

    :param targets: ``[N, 1]`` targets in model (standardised) units.
    :returns: ``(metrics, metrics_in_original_units or None)``.
    """
    y = np.asarray(targets, dtype=np.float64).reshape(-1)
    weights = prediction.weights
    if task is Task.CLASSIFICATION:
        probabilities = metrics.probit_mixture_probability(
            weights, prediction.f_means[..., 0], prediction.f_variances[..., 0]
        )
        return metrics.classification_metrics(y, probabilities), None
    means, variances = prediction.y_means[..., 0], prediction.y_variances[..., 0]
    scored = metrics.regression_metrics(y, weights, means, variances)
    if standardizer is None:
        return scored, None
    scale, shift = standardizer.y_std, standardizer.y_mean
    original_means, original_variances = metrics.rescale_mixture(means, variances, scale, shift)
    original = metrics.regression_metrics(
        y * scale + shift, weights, original_means, original_variances
    )
    return scored, original


def standardise_split(split: Split, scaler: Standardizer) -> Split:
    """``split`` with inputs and targets transformed by ``scaler`` (fitted on its train part)."""
    return Split(
        x_train=scaler.transform_x(split.x_train),
        y_train=scaler.transform_y(split.y_train),
        x_val=scaler.transform_x(split.x_val),
        y_val=scaler.transform_y(split.y_val),
        x_test=scaler.transform_x(split.x_test),
        y_test=scaler.transform_y(split.y_test),
    )


def _timed_prediction(built: BuiltModel, inputs: np.ndarray, batch_size: int):
    warm = inputs[: min(len(inputs), batch_size)]
    predict_mixture(built.model, warm, likelihood=built.likelihood, batch_size=batch_size)
    start = time.perf_counter()
    prediction = predict_mixture(
        built.model, inputs, likelihood=built.likelihood, batch_size=batch_size
    )
    return prediction, time.perf_counter() - start


def run(
    spec: ModelSpec,
    split: Split,
    config: TrainConfig,
    *,
    dataset: str,
    standardizer: Optional[Standardizer] = None,
    stream: Optional[TextIO] = sys.stderr,
    save_dir: Optional[Path] = None,
    predict_batch_size: int = 1000,
    strategy: Optional[tf.distribute.Strategy] = None,
    test_curve: bool = False,
) -> dict:
    """Train ``spec`` on ``split`` (already standardised) and return the result record.

    With ``test_curve`` the test NLL is also scored after every epoch (for time-to-accuracy
    plots only; the best epoch is chosen on validation data): the record's
    ``test_nll_curve`` is ``[[epoch, nll], ...]`` and ``epoch_seconds`` the training seconds
    of each epoch, without the scoring.

    The record holds ``model``, ``rule``, ``dataset``, ``n_train``, ``n_test``, ``dim``,
    ``test`` (``nll``, ``rmse``, ``crps``, ``coverage_95`` or ``nll``, ``error_rate``,
    ``brier``, ``ece``), ``test_original_units`` (regression), ``val``,
    ``train_seconds_per_epoch`` (epochs after the first, which includes tracing),
    ``first_epoch_seconds``, ``predict_seconds``, ``epochs``, ``seed``, ``replicas`` (devices
    training in sync, over all workers) and the settings.

    With a ``tf.distribute`` ``strategy`` the model is built, compiled and trained in its
    scope (see :func:`fit_model`); under multi-worker training every worker runs this with the
    same arguments, and only the chief writes ``save_dir`` (the others check it, and save to
    a temporary folder that is removed).
    """
    task = check_choice("task", spec.task, Task)
    chief = strategy is None or is_chief(strategy)
    backup_dir = None
    made_save_dir = save_dir is not None and not Path(save_dir).exists()
    if save_dir is not None:
        backup_dir = prepare_save_dir(
            Path(save_dir), spec, split, config, dataset, stream, write=chief
        )
    tf_keras.backend.clear_session()
    tf_keras.utils.set_random_seed(config.seed)
    scope = contextlib.nullcontext() if strategy is None else strategy.scope()
    with float_type(config.dtype):
        with scope:
            built = build_model(
                spec, split.x_train.shape[1], len(split.x_train), inputs=split.x_train
            )
        progress = EpochProgress(spec.label, stream=stream)
        selection = _best_epoch_callbacks(built, split, config)
        test_scorer = None
        if test_curve:
            test_scorer = ValidationNLL(
                split.x_test, split.y_test, likelihood=built.likelihood, name="test_nll"
            )
        fit_model(
            built,
            split.x_train,
            split.y_train,
            config,
            progress=progress,
            callbacks=selection if test_scorer is None else (test_scorer, *selection),
            backup_dir=backup_dir,
            strategy=strategy,
        )
        if strategy is not None:
            barrier(strategy)  # every worker has finished writing its backup
        if backup_dir is not None:
            _remove_if_empty(backup_dir)  # BackupAndRestore empties it once training finished
            if not chief and made_save_dir:
                _remove_if_empty(Path(save_dir))  # made by BackupAndRestore on this machine
        prediction, predict_seconds = _timed_prediction(built, split.x_test, predict_batch_size)
        test, test_original = score_prediction(prediction, split.y_test, task, standardizer)
        val = None
        if len(split.x_val):
            val_prediction = predict_mixture(
                built.model, split.x_val, likelihood=built.likelihood, batch_size=1000
            )
            val, _ = score_prediction(val_prediction, split.y_val, task, standardizer)
        steady = progress.seconds[1:] or progress.seconds
        best_epoch, val_curve = None, None
        stopped_epoch = len(progress.seconds) + int(progress.first_epoch or 0)
        if selection:
            scorer, stopper = selection
            best_epoch = int(stopper.best_epoch) + 1
            val_curve = _curve(scorer)
        record = {
            "model": spec.kind.value,
            "label": spec.label,
            "rule": spec.rule if spec.kind.value == "avdgp" else None,
            "task": task.value,
            "dataset": dataset,
            "n_train": int(len(split.x_train)),
            "n_val": int(len(split.x_val)),
            "n_test": int(len(split.x_test)),
            "dim": int(split.x_train.shape[1]),
            "test": test,
            "test_original_units": test_original,
            "val": val,
            "train_seconds_per_epoch": float(np.mean(steady)),
            "first_epoch_seconds": float(progress.seconds[0]),
            "predict_seconds": float(predict_seconds),
            "final_train_loss": float(progress.losses[-1]),
            "resumed_from_epoch": int(progress.first_epoch or 0),
            "epochs": config.epochs,
            "batch_size": config.batch_size,
            "learning_rate": config.learning_rate,
            "dtype": config.dtype,
            "seed": config.seed,
            "steps_per_execution": config.steps_per_execution,
            "schedule": config.schedule,
            "restore_best": config.restore_best,
            "patience": config.patience,
            "best_epoch": best_epoch,
            "stopped_epoch": stopped_epoch,
            "val_nll_curve": val_curve,
            "test_nll_curve": None if test_scorer is None else _curve(test_scorer),
            "epoch_seconds": [round(seconds, 4) for seconds in progress.seconds],
            "replicas": 1 if strategy is None else int(strategy.num_replicas_in_sync),
            "layers": spec.resolved_layers(),
            "dims": spec.resolved_dims(),
            "num_inducing": spec.resolved_inducing(),
            "num_points": spec.num_points,
            "num_parameters": int(
                sum(int(np.prod(v.shape)) for v in built.model.trainable_variables)
            ),
        }
        if save_dir is not None:
            with worker_save_dir(Path(save_dir), strategy) as directory:
                save_run(built, record, standardizer, directory)
    return record


def _curve(scorer: ValidationNLL) -> list[list]:
    """``[[epoch (from 1), nll], ...]`` of the epochs ``scorer`` scored."""
    return [[epoch + 1, round(value, 6)] for epoch, value in scorer.history]


def _best_epoch_callbacks(built: BuiltModel, split: Split, config: TrainConfig) -> tuple:
    """``(ValidationNLL, EarlyStopping)`` that end training with the weights of the epoch of
    lowest validation NLL, stopping after ``config.patience`` epochs without improvement (never,
    without it), or ``()`` without ``config.restore_best``.

    :raises ValueError: with ``restore_best`` and an empty validation split.
    """
    if not config.restore_best:
        return ()
    if not len(split.x_val):
        raise ValueError(
            "restore_best: selecting the best epoch needs validation rows, the split has none"
        )
    scorer = ValidationNLL(split.x_val, split.y_val, likelihood=built.likelihood)
    stopper = tf_keras.callbacks.EarlyStopping(
        monitor=scorer.name,
        mode="min",
        patience=config.epochs if config.patience is None else config.patience,
        restore_best_weights=True,
    )
    return (scorer, stopper)


SETTINGS_FILE = "settings.json"
BACKUP_DIR = "backup"


def prepare_save_dir(
    directory: Path,
    spec: ModelSpec,
    split: Split,
    config: TrainConfig,
    dataset: str,
    stream: Optional[TextIO] = None,
    *,
    write: bool = True,
) -> Path:
    """Make ``directory`` ready for a run, or for resuming the interrupted run it holds.

    Writes ``settings.json`` (model, training settings, data fingerprint). A folder that holds
    an interrupted run with the same settings resumes it (its ``backup`` folder, written by
    ``BackupAndRestore`` after every epoch, is restored by ``fit``). With ``write=False`` (a
    non-chief worker of multi-worker training) it only checks the folder and writes nothing.

    :raises ValueError: if the folder holds a finished run, or an interrupted run with other
        settings or data.
    :returns: the backup folder, ``directory / "backup"``.
    """
    settings = {
        "spec": asdict(spec),
        "train": training_settings(config),
        "dataset": dataset,
        "n_train": int(len(split.x_train)),
        "data_sha256": hashlib.sha256(
            np.ascontiguousarray(split.x_train, np.float64).tobytes()
            + np.ascontiguousarray(split.y_train, np.float64).tobytes()
        ).hexdigest(),
    }
    settings = json.loads(json.dumps(settings, default=_jsonable))
    if (directory / "run.json").exists():
        raise ValueError(
            f"{directory}: holds a finished run (run.json); choose another folder or delete it"
        )
    settings_file = directory / SETTINGS_FILE
    backup_dir = directory / BACKUP_DIR
    if settings_file.exists():
        try:
            saved = json.loads(settings_file.read_text())
        except (OSError, ValueError) as error:
            raise ValueError(f"{settings_file}: unreadable ({error}); delete the folder") from None
        changed = _changed_settings(saved, settings)
        if changed:
            raise ValueError(
                f"{directory}: holds an interrupted run with other settings ({', '.join(changed)}"
                "); use the same settings to resume it, or another folder"
            )
        if backup_dir.exists() and stream is not None:
            print(f"[{spec.label}] resuming the interrupted run in {directory}", file=stream)
    if write:
        directory.mkdir(parents=True, exist_ok=True)
        partial = settings_file.with_name(f".{SETTINGS_FILE}.{os.getpid()}")
        partial.write_text(json.dumps(settings, indent=2))
        partial.replace(settings_file)  # atomic: other workers read all of it or nothing
    return backup_dir


def training_settings(config: TrainConfig) -> dict:
    """The training settings a saved run must match to be resumed: all of ``config`` but the
    speed settings that do not change the results (``steps_per_execution``)."""
    settings = asdict(config)
    del settings["steps_per_execution"]
    return settings


def _changed_settings(saved: dict, current: dict, prefix: str = "") -> list[str]:
    """Dotted names of the entries that differ between two settings dictionaries."""
    changed = []
    for key in sorted(set(saved) | set(current)):
        old, new = saved.get(key), current.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            changed += _changed_settings(old, new, f"{prefix}{key}.")
        elif old != new:
            changed.append(f"{prefix}{key}: {old} -> {new}")
    return changed


def save_run(
    built: BuiltModel, record: dict, standardizer: Optional[Standardizer], directory: Path
) -> None:
    """Write ``weights`` (TF checkpoint), ``model.keras`` (with the optimizer state) and
    ``run.json``.

    :raises NotImplementedError: if a layer holds a component no config can rebuild (only
        possible with custom kernels or mean functions passed through ``spec.extra``).
    """
    directory.mkdir(parents=True, exist_ok=True)
    built.model.save_weights(str(directory / "weights"))
    built.model.save(directory / "model.keras")
    info = {
        "spec": asdict(built.spec),
        "standardizer": None if standardizer is None else asdict(standardizer),
        "keras_file": "model.keras",
        "result": record,
    }
    (directory / "run.json").write_text(json.dumps(info, indent=2, default=_jsonable))


def _jsonable(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)
