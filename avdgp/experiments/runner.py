"""Train one model on one split and measure it: the harness shared by ``fit``, ``bench``, ``demo``.

Every model goes through the same steps: build under the requested float type, stream the
standardised training set through ``tf.data`` (seeded shuffling, no float32 cast of float64
data), ``model.fit`` with Adam, then predict the test set as a Gaussian mixture and score it
with :mod:`avdgp.metrics`, in standardised units (the paper's) and in original units.
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import Optional, TextIO

import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from gpflux_avdgp.callbacks import ValidationNLL
from gpflux_avdgp.objectives import is_categorical
from gpflux_avdgp.prediction import PredictiveMixture, predict_mixture
from gpflux_avdgp.validation import check_choice

from .. import metrics
from ..data import Split, Standardizer
from ..training.config import TrainConfig, float_type
from ..training.distribute import barrier, is_chief, worker_save_dir
from ..training.fit import best_epoch_callbacks, fit_model
from ..training.progress import EpochProgress
from ..training.record import DataColumns, RunRecord
from ..training.rundir import (
    array_data,
    locks_save_dir,
    prepare_run_dir,
    remove_if_empty,
    save_run,
)
from .zoo import BuiltModel, ModelSpec, Task, build_model

__all__ = [
    "class_probabilities",
    "classification_scores",
    "run",
    "run_record",
    "score_prediction",
    "standardise_split",
]


def class_probabilities(prediction: PredictiveMixture) -> np.ndarray:
    """A classifier's predicted probabilities: ``p(y = 1)`` ``[N]`` of a Bernoulli (probit)
    model, ``p(y = k)`` ``[N, K]`` of a categorical one (``MultiClass``, ``Softmax``)."""
    if is_categorical(prediction.likelihood):
        return prediction.class_probabilities()
    # not prediction.class_probabilities(): GPflow's probit clips to [1e-3, 1 - 1e-3]
    return metrics.probit_mixture_probability(
        prediction.weights, prediction.f_means[..., 0], prediction.f_variances[..., 0]
    )


def classification_scores(labels: np.ndarray, probabilities: np.ndarray) -> dict:
    """Binary scores for ``[N]`` probabilities, K-class scores for ``[N, K]``; both report
    ``nll``, ``error_rate``, ``brier`` and ``ece``."""
    if np.ndim(probabilities) == 2:
        return metrics.multiclass_metrics(labels, probabilities)
    return metrics.classification_metrics(labels, probabilities)


def score_prediction(
    prediction: PredictiveMixture,
    targets: np.ndarray,
    task: Task,
    standardizer: Optional[Standardizer] = None,
) -> tuple[dict, Optional[dict]]:
    """Metrics of a prediction, in model units and (regression) in the targets' original units.

    :param targets: ``[N, 1]`` targets in model (standardised) units; for classification the
        class indices (0/1 for two classes).
    :returns: ``(metrics, metrics_in_original_units or None)``.
    """
    y = np.asarray(targets, dtype=np.float64).reshape(-1)
    weights = prediction.weights
    if task is Task.CLASSIFICATION:
        return classification_scores(y, class_probabilities(prediction)), None
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


@locks_save_dir
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
    data_columns: Optional[DataColumns] = None,
) -> RunRecord:
    """Train ``spec`` on ``split`` (already standardised) and return the result record.

    With ``test_curve`` the test NLL is also scored after every epoch (for time-to-accuracy
    plots only; the best epoch is chosen on validation data): the record's
    ``test_nll_curve`` is ``[[epoch, nll], ...]`` and ``epoch_seconds`` the training seconds
    of each epoch, without the scoring.

    The record (:class:`~avdgp.training.record.RunRecord`) holds the test scores in
    standardised and (regression) original units, the validation scores, the seconds per
    epoch (after the first, which includes tracing) and of prediction, the kept and last
    epochs, the settings and the architecture. With ``save_dir`` it is written to
    ``run.json`` with ``data_columns`` (the CSV layout, for ``avdgp predict``).

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
        backup_dir = prepare_run_dir(
            Path(save_dir),
            spec=spec,
            config=config,
            dataset=dataset,
            data=array_data(split.x_train, split.y_train),
            stream=stream,
            write=chief,
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
        selection = best_epoch_callbacks(built, split, config)
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
            remove_if_empty(backup_dir)  # BackupAndRestore empties it once training finished
            if not chief and made_save_dir:
                remove_if_empty(Path(save_dir))  # made by BackupAndRestore on this machine
        test, test_original, val, predict_seconds = _score_split(
            built, split, task, standardizer, predict_batch_size
        )
        best_epoch, val_curve = None, None
        stopped_epoch = len(progress.seconds) + int(progress.first_epoch or 0)
        if selection:
            scorer, stopper = selection
            best_epoch = int(stopper.best_epoch) + 1
            val_curve = _curve(scorer)
        record = run_record(
            spec,
            built,
            config,
            progress,
            dataset=dataset,
            sizes=(len(split.x_train), len(split.x_val), len(split.x_test), split.x_train.shape[1]),
            test=test,
            test_original_units=test_original,
            val=val,
            predict_seconds=predict_seconds,
            best_epoch=best_epoch,
            stopped_epoch=stopped_epoch,
            val_nll_curve=val_curve,
            test_nll_curve=None if test_scorer is None else _curve(test_scorer),
            replicas=1 if strategy is None else int(strategy.num_replicas_in_sync),
        )
        if save_dir is not None:
            with worker_save_dir(Path(save_dir), strategy) as directory:
                save_run(built, record, standardizer, directory, data_columns=data_columns)
    return record


def _score_split(
    built: BuiltModel,
    split: Split,
    task: Task,
    standardizer: Optional[Standardizer],
    predict_batch_size: int,
) -> tuple[dict, Optional[dict], Optional[dict], float]:
    """``(test scores, test scores in original units, validation scores, predict seconds)``;
    the seconds are the test set's, after a warm-up batch."""
    prediction, predict_seconds = _timed_prediction(built, split.x_test, predict_batch_size)
    test, test_original = score_prediction(prediction, split.y_test, task, standardizer)
    val = None
    if len(split.x_val):
        val_prediction = predict_mixture(
            built.model, split.x_val, likelihood=built.likelihood, batch_size=1000
        )
        val, _ = score_prediction(val_prediction, split.y_val, task, standardizer)
    return test, test_original, val, predict_seconds


def run_record(
    spec: ModelSpec,
    built: BuiltModel,
    config: TrainConfig,
    progress: EpochProgress,
    *,
    dataset: str,
    sizes: tuple[int, int, int, int],
    test: dict,
    test_original_units: Optional[dict],
    val: Optional[dict],
    predict_seconds: float,
    stopped_epoch: int,
    best_epoch: Optional[int] = None,
    val_nll_curve: Optional[list] = None,
    test_nll_curve: Optional[list] = None,
    replicas: int = 1,
    streamed_shards: Optional[dict] = None,
) -> RunRecord:
    """The :class:`~avdgp.training.record.RunRecord` of a finished run, for arrays and
    streamed shards alike.

    :param sizes: ``(n_train, n_val, n_test, input width D)``.
    """
    n_train, n_val, n_test, dim = (int(size) for size in sizes)
    steady = progress.seconds[1:] or progress.seconds
    return RunRecord(
        model=spec.kind.value,
        label=spec.label,
        rule=spec.rule if spec.kind.value == "avdgp" else None,
        task=Task(spec.task).value,
        dataset=dataset,
        n_train=n_train,
        n_val=n_val,
        n_test=n_test,
        dim=dim,
        test=test,
        test_original_units=test_original_units,
        val=val,
        train_seconds_per_epoch=float(np.mean(steady)),
        first_epoch_seconds=float(progress.seconds[0]),
        predict_seconds=float(predict_seconds),
        final_train_loss=float(progress.losses[-1]),
        resumed_from_epoch=int(progress.first_epoch or 0),
        epoch_seconds=[round(seconds, 4) for seconds in progress.seconds],
        best_epoch=best_epoch,
        stopped_epoch=int(stopped_epoch),
        val_nll_curve=val_nll_curve,
        test_nll_curve=test_nll_curve,
        replicas=int(replicas),
        epochs=config.epochs,
        batch_size=config.batch_size,
        learning_rate=config.learning_rate,
        dtype=config.dtype,
        seed=config.seed,
        steps_per_execution=config.steps_per_execution,
        schedule=config.schedule,
        restore_best=config.restore_best,
        patience=config.patience,
        layers=spec.resolved_layers(),
        dims=spec.resolved_dims(),
        num_inducing=spec.resolved_inducing(),
        num_points=spec.num_points,
        num_parameters=int(sum(int(np.prod(v.shape)) for v in built.model.trainable_variables)),
        streamed_shards=streamed_shards,
    )


def _curve(scorer: ValidationNLL) -> list[list]:
    """``[[epoch (from 1), nll], ...]`` of the epochs ``scorer`` scored."""
    return [[epoch + 1, round(value, 6)] for epoch, value in scorer.history]
