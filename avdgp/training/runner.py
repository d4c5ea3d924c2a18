"""Train one model on one split and measure it: the harness shared by ``fit``, ``bench``, ``demo``.

Every model goes through the same steps: build under the requested float type, stream the
standardised training set through ``tf.data`` (seeded shuffling, no float32 cast of float64
data), ``model.fit`` with Adam, then predict the test set as a Gaussian mixture and score it
with :mod:`avdgp.metrics`, in standardised units (the paper's) and in original units.
"""

from __future__ import annotations

import time
from typing import Optional

import numpy as np

from avdgp import metrics
from avdgp.data import Split, Standardizer
from avdgp.training.config import TrainConfig
from avdgp.training.fit import best_epoch_callbacks, fit_model
from avdgp.training.rundir import (
    BEST_EPOCH_DIR,
    array_data,
)
from avdgp.training.skeleton import Scored, Trained
from avdgp.zoo import BuiltModel, Task
from gpflux_avdgp.callbacks import ValidationNLL
from gpflux_avdgp.prediction import PredictiveMixture, predict_mixture
from gpflux_avdgp.predictive import is_categorical

__all__ = [
    "SplitData",
    "class_probabilities",
    "classification_scores",
    "score_prediction",
]


def class_probabilities(prediction: PredictiveMixture) -> np.ndarray:
    """A classifier's predicted probabilities, as the model's likelihood gives them (the
    library's predictive module, as ``predict`` and ``avdgp predict``): ``p(y = 1)`` ``[N]`` of
    a Bernoulli (probit) model, ``p(y = k)`` ``[N, K]`` of a categorical one (``MultiClass``,
    ``Softmax``)."""
    probabilities = prediction.class_probabilities()
    return probabilities if is_categorical(prediction.likelihood) else probabilities[:, 0]


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


def _timed_prediction(built: BuiltModel, inputs: np.ndarray, batch_size: int):
    warm = inputs[: min(len(inputs), batch_size)]
    predict_mixture(built.model, warm, likelihood=built.likelihood, batch_size=batch_size)
    start = time.perf_counter()
    prediction = predict_mixture(
        built.model, inputs, likelihood=built.likelihood, batch_size=batch_size
    )
    return prediction, time.perf_counter() - start


class SplitData:
    """A run's data as arrays in memory: a standardised :class:`~avdgp.data.Split`.

    :param test_curve: also score the test NLL after every epoch (for time-to-accuracy plots
        only; the best epoch is chosen on validation data): the record's ``test_nll_curve`` is
        ``[[epoch, nll], ...]`` and ``epoch_seconds`` the training seconds of each epoch,
        without the scoring.
    """

    streamed_shards = None

    def __init__(self, split: Split, *, test_curve: bool = False):
        self.split, self.test_curve = split, test_curve
        self.sizes = (
            len(split.x_train),
            len(split.x_val),
            len(split.x_test),
            split.x_train.shape[1],
        )

    def identity(self) -> dict:
        return array_data(self.split.x_train, self.split.y_train)

    def init_inputs(self, config: TrainConfig) -> np.ndarray:
        return self.split.x_train

    def train(self, built, config, *, progress, backup_dir, strategy) -> Trained:
        split = self.split
        state_dir = None if backup_dir is None else backup_dir.parent / BEST_EPOCH_DIR
        selection = best_epoch_callbacks(built, split, config, state_dir=state_dir)
        test_scorer = None
        if self.test_curve:
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
        trained = Trained(
            stopped_epoch=len(progress.seconds) + int(progress.first_epoch or 0),
            test_nll_curve=None if test_scorer is None else _curve(test_scorer),
        )
        if selection:
            scorer, stopper = selection
            trained = trained._replace(
                best_epoch=int(stopper.best_epoch) + 1, val_nll_curve=_curve(scorer)
            )
        return trained

    def score(self, built, task, standardizer, config, predict_batch_size) -> Scored:
        """The test set's scores and seconds (after a warm-up batch), and the validation
        set's scores."""
        split = self.split
        prediction, seconds = _timed_prediction(built, split.x_test, predict_batch_size)
        test, test_original = score_prediction(prediction, split.y_test, task, standardizer)
        val = None
        if len(split.x_val):
            val_prediction = predict_mixture(
                built.model, split.x_val, likelihood=built.likelihood, batch_size=1000
            )
            val, _ = score_prediction(val_prediction, split.y_val, task, standardizer)
        return Scored(test, test_original, val, seconds)


def _curve(scorer: ValidationNLL) -> list[list]:
    """``[[epoch (from 1), nll], ...]`` of the epochs ``scorer`` scored."""
    return [[epoch + 1, round(value, 6)] for epoch, value in scorer.history]
