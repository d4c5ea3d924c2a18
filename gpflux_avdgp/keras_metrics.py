"""Keras metrics of the predictive distribution of ``y``, read from the model's output.

Each metric reads the :class:`~gpflux_avdgp.predictive.PredictiveDistribution` that the
model's :class:`~gpflux_avdgp.TrainableLikelihood` outputs (the likelihood comes with it), so
``MixtureNLL()`` works in ``compile(metrics=...)`` of every Keras model type (``AVDGPModel``,
``Sequential``, Functional, subclassed, cloned) and as a ``val_`` monitor of ``EarlyStopping``
or ``ModelCheckpoint``. Binary labels are read as GPflow's ``Bernoulli`` reads them
(:func:`~gpflux_avdgp.predictive.binary_labels`: ``{0, 1}`` or ``{-1, +1}``).

Every metric is a mean over the rows seen since the last reset (weighted by
``sample_weight`` when given in ``weighted_metrics``); :class:`MixtureRMSE` takes the square
root of the mean squared error at the end. The NumPy twins in :mod:`avdgp.metrics`
compute the same numbers on a whole test set.
"""

from __future__ import annotations

import math
from typing import Optional

import gpflow
import tensorflow as tf
from gpflow.keras import tf_keras

from .predictive import (
    PredictiveDistribution,
    binary_labels,
    is_categorical,
    is_classifier,
    predictive_distribution,
)

__all__ = [
    "check_standard_metric",
    "MixtureAccuracy",
    "MixtureBrier",
    "MixtureCRPS",
    "MixtureMetric",
    "MixtureNLL",
    "MixtureRMSE",
]


_CLASS_METRICS = {
    "accuracy", "acc", "binaryaccuracy", "categoricalaccuracy", "sparsecategoricalaccuracy",
    "topkcategoricalaccuracy", "sparsetopkcategoricalaccuracy", "crossentropy", "ce",
    "binarycrossentropy", "categoricalcrossentropy", "sparsecategoricalcrossentropy", "auc",
    "precision", "recall", "precisionatrecall", "recallatprecision", "sensitivityatspecificity",
    "specificityatsensitivity", "truepositives", "truenegatives", "falsepositives",
    "falsenegatives", "hinge", "squaredhinge", "categoricalhinge", "binaryiou", "iou", "meaniou",
    "onehotiou", "onehotmeaniou", "f1score", "fbetascore",
}  # fmt: skip
#: Standard metrics that read one class index per row and ``K`` probabilities.
_INDEX_METRICS = {
    "accuracy", "acc", "sparsecategoricalaccuracy", "sparsetopkcategoricalaccuracy",
    "crossentropy", "ce", "sparsecategoricalcrossentropy",
}  # fmt: skip
#: Standard metrics that read ``K`` class probabilities (one-hot labels or class indices).
_K_CLASS_METRICS = {
    "categoricalaccuracy", "topkcategoricalaccuracy", "categoricalcrossentropy",
    "categoricalhinge", "sparsecategoricalaccuracy", "sparsetopkcategoricalaccuracy",
    "sparsecategoricalcrossentropy", "onehotiou", "onehotmeaniou",
}  # fmt: skip
_OURS = {
    "regression": "'mse', 'mae', RootMeanSquaredError() or gpflux_avdgp.MixtureNLL(), "
    "MixtureRMSE(), MixtureCRPS()",
    "binary": "'accuracy', AUC(), 'mse' (the Brier score) or gpflux_avdgp.MixtureAccuracy(), "
    "MixtureBrier(), MixtureNLL()",
    "categorical": "'accuracy', 'sparse_categorical_crossentropy' or "
    "gpflux_avdgp.MixtureAccuracy(), MixtureBrier(), MixtureNLL()",
}


def _metric_key(metric) -> str:
    """``"binaryaccuracy"`` for ``"binary_accuracy"``, ``BinaryAccuracy()`` or the function."""
    if isinstance(metric, str):
        name = metric
    elif isinstance(metric, tf_keras.metrics.Metric):
        name = type(metric).__name__
        if name == "MeanMetricWrapper":
            name = getattr(getattr(metric, "_fn", None), "__name__", metric.name)
    else:
        name = getattr(metric, "__name__", type(metric).__name__)
    return name.replace("_", "").lower()


def _metric_label(metric) -> str:
    return repr(metric) if isinstance(metric, str) else f"{type(metric).__name__}()"


def _task(likelihood: gpflow.likelihoods.Likelihood) -> str:
    if is_categorical(likelihood):
        return "categorical"
    return "binary" if is_classifier(likelihood) else "regression"


def check_standard_metric(metric, likelihood: gpflow.likelihoods.Likelihood) -> None:
    """Refuse a standard Keras metric that cannot mean anything for ``likelihood``.

    Regression models are scored on the predictive mean, so class metrics are refused;
    Bernoulli models give ``p(y = 1)`` ``[B, 1]``, so metrics of one-hot or ``K``-class
    probabilities are refused; categorical models give ``[B, K]`` probabilities for one class
    index per row, so only index metrics (accuracy, sparse cross-entropy) are kept.

    :raises ValueError: one line naming the metric and the ones to use.
    """
    key, task = _metric_key(metric), _task(likelihood)
    kind = type(likelihood).__name__
    if task == "regression" and key in _CLASS_METRICS:
        reason = f"scores class labels, the model's likelihood is {kind} (regression)"
    elif task == "binary" and key in _K_CLASS_METRICS:
        reason = "reads K class probabilities, a Bernoulli model predicts p(y = 1) [batch, 1]"
    elif task == "categorical" and key not in _INDEX_METRICS:
        reason = (
            f"compares y with the prediction column by column, a {kind} model predicts K class "
            "probabilities for one class index per row"
        )
    else:
        return
    raise ValueError(f"metrics: {_metric_label(metric)} {reason}; use {_OURS[task]}")


def _crps_a(mu: tf.Tensor, variance: tf.Tensor) -> tf.Tensor:
    """``E|X|`` for ``X ~ N(mu, variance)``: ``2 s phi(mu / s) + mu erf(mu / (s sqrt 2))``."""
    std = tf.sqrt(variance)
    z = mu / std
    return 2.0 * std * tf.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi) + mu * tf.math.erf(
        z / math.sqrt(2.0)
    )


def gaussian_mixture_crps(
    y: tf.Tensor, weights: tf.Tensor, means: tf.Tensor, variances: tf.Tensor
) -> tf.Tensor:
    """Closed-form CRPS of a Gaussian mixture per row and output (Grimit et al., 2006).

    ``sum_s w_s A(y - m_s, v_s) - 1/2 sum_ij w_i w_j A(m_i - m_j, v_i + v_j)``.

    :param y: ``[B, Q]`` targets.
    :param weights: ``[B, S]`` mixture weights.
    :param means: ``[B, S, Q]`` component means.
    :param variances: ``[B, S, Q]`` component variances, positive.
    :returns: ``[B, Q]``.
    """
    w = weights[..., None]  # [B, S, 1]
    to_target = tf.reduce_sum(w * _crps_a(y[:, None, :] - means, variances), axis=1)  # [B, Q]
    pair_means = means[:, :, None, :] - means[:, None, :, :]  # [B, S, S, Q]
    pair_variances = variances[:, :, None, :] + variances[:, None, :, :]  # [B, S, S, Q]
    pair_weights = w[:, :, None, :] * w[:, None, :, :]  # [B, S, S, 1]
    spread = tf.reduce_sum(pair_weights * _crps_a(pair_means, pair_variances), axis=[1, 2])
    return to_target - 0.5 * spread


class MixtureMetric(tf_keras.metrics.Metric):
    """A weighted mean over rows of a per-row score of the predictive distribution of ``y``.

    Subclasses implement :meth:`per_row`. The likelihood comes with the model's output; one
    given here is held outside Keras' tracking (resetting the metric never touches it) and
    must be the model's.

    :param likelihood: optional: the model's GPflow likelihood; needed only for a model that
        outputs the packed mixture of its last GP layer.
    :param name: the name in Keras logs (``val_<name>`` on validation data).
    """

    def __init__(
        self,
        likelihood: Optional[gpflow.likelihoods.Likelihood] = None,
        *,
        name: str,
        dtype=None,
        **kwargs,
    ):
        super().__init__(name=name, dtype=dtype or gpflow.default_float(), **kwargs)
        if likelihood is not None and not isinstance(likelihood, gpflow.likelihoods.Likelihood):
            raise TypeError(f"likelihood: expected a GPflow likelihood, got {likelihood!r}")
        self.check_likelihood(likelihood)
        object.__setattr__(self, "_held", (likelihood,))  # not tracked by Keras
        self.total = self.add_weight(name="total", initializer="zeros")
        self.count = self.add_weight(name="count", initializer="zeros")

    @property
    def likelihood(self) -> Optional[gpflow.likelihoods.Likelihood]:
        """The GPflow likelihood given to the metric, if any."""
        return self._held[0]

    def check_likelihood(self, likelihood: Optional[gpflow.likelihoods.Likelihood]) -> None:
        """Raise ``ValueError`` if the score is not defined for ``likelihood``."""
        return None  # defined for every likelihood; a body AutoGraph can convert (see tests)

    def per_row(self, distribution: PredictiveDistribution, y: tf.Tensor) -> tf.Tensor:
        """The score of each row ``[B]``; ``y`` is ``y_true`` as given (``[B, Q]`` or ``[B]``)."""
        raise NotImplementedError

    def update_state(self, y_true, y_pred, sample_weight=None) -> None:
        """Add the rows of a batch: ``y_pred`` is the model's output."""
        distribution = predictive_distribution(y_pred, self.likelihood)
        self.check_likelihood(distribution.likelihood)
        scores = tf.cast(self.per_row(distribution, y_true), self.dtype)  # [B]
        weights = tf.ones_like(scores)
        if sample_weight is not None:
            weights = tf.reshape(tf.cast(sample_weight, self.dtype), [-1]) * weights
        self.total.assign_add(tf.reduce_sum(weights * scores))
        self.count.assign_add(tf.reduce_sum(weights))

    def result(self) -> tf.Tensor:
        return tf.math.divide_no_nan(self.total, self.count)

    def reset_state(self) -> None:
        self.total.assign(tf.zeros_like(self.total))
        self.count.assign(tf.zeros_like(self.count))

    @classmethod
    def from_config(cls, config: dict) -> "MixtureMetric":
        """Rebuild the metric; the model's output gives it the likelihood (a likelihood in files
        written by earlier versions is a copy of the model's and is dropped)."""
        config = dict(config)
        config.pop("likelihood", None)
        return cls(**config)


def _targets(y: tf.Tensor, width: int, dtype: tf.DType) -> tf.Tensor:
    """``y`` as ``[B, width]`` in ``dtype`` (``[B]`` is read as ``[B, 1]``)."""
    y = tf.cast(y, dtype)
    return y[:, None] if y.shape.rank == 1 else tf.reshape(y, [-1, width])


@tf_keras.utils.register_keras_serializable(package="gpflux_avdgp")
class MixtureNLL(MixtureMetric):
    """Negative log predictive density ``-log sum_s w_s p(y | s)`` per row (summed over
    outputs), for any likelihood: the NLL of regression and classification alike."""

    def __init__(self, likelihood=None, *, name: str = "nll", **kwargs):
        super().__init__(likelihood, name=name, **kwargs)

    def per_row(self, distribution, y):
        return -distribution.log_prob(y)


@tf_keras.utils.register_keras_serializable(package="gpflux_avdgp")
class MixtureRMSE(MixtureMetric):
    """Root mean squared error of the predictive mean of ``y`` (over rows and outputs).

    Refuses classifiers: their predictive mean is a class probability; use
    :class:`MixtureBrier`.
    """

    def __init__(self, likelihood=None, *, name: str = "rmse", **kwargs):
        super().__init__(likelihood, name=name, **kwargs)

    def check_likelihood(self, likelihood):
        if likelihood is not None and is_classifier(likelihood):
            raise ValueError(
                f"{self.name}: RMSE is for regression, the likelihood is "
                f"{type(likelihood).__name__}; use MixtureBrier or MixtureAccuracy"
            )

    def per_row(self, distribution, y):
        mean = distribution.mean()  # [B, Q]
        targets = _targets(y, distribution.mixture.dim, mean.dtype)
        return tf.reduce_mean(tf.square(targets - mean), axis=-1)

    def result(self) -> tf.Tensor:
        return tf.sqrt(super().result())


@tf_keras.utils.register_keras_serializable(package="gpflux_avdgp")
class MixtureCRPS(MixtureMetric):
    """Closed-form continuous ranked probability score of the predictive mixture of ``y``
    (Gaussian likelihood: component variances plus the noise), averaged over outputs."""

    def __init__(self, likelihood=None, *, name: str = "crps", **kwargs):
        super().__init__(likelihood, name=name, **kwargs)

    def check_likelihood(self, likelihood):
        if likelihood is not None and not isinstance(likelihood, gpflow.likelihoods.Gaussian):
            raise ValueError(
                f"{self.name}: the closed-form CRPS needs a Gaussian likelihood, got "
                f"{type(likelihood).__name__}; use MixtureNLL or MixtureBrier"
            )

    def per_row(self, distribution, y):
        y_means, y_variances = distribution.component_moments()
        targets = _targets(y, distribution.mixture.dim, y_means.dtype)
        weights = distribution.mixture.weights
        crps = gaussian_mixture_crps(targets, weights, y_means, y_variances)
        return tf.reduce_mean(crps, axis=-1)


class _ClassMetric(MixtureMetric):
    """A score of the class probabilities: ``p(y = 1 | x)`` ``[B, 1]`` (Bernoulli, labels
    ``{0, 1}``) or ``p(y = k | x)`` ``[B, K]`` (categorical, one class index per row)."""

    def check_likelihood(self, likelihood):
        if likelihood is not None and not is_classifier(likelihood):
            raise ValueError(
                f"{self.name}: needs a Bernoulli, MultiClass or Softmax likelihood, got "
                f"{type(likelihood).__name__}; use MixtureRMSE, MixtureNLL or MixtureCRPS"
            )

    def per_row(self, distribution, y):
        probabilities = distribution.mean()
        if is_categorical(distribution.likelihood):
            labels = tf.reshape(tf.cast(y, tf.int32), [-1])  # [B]
            one_hot = tf.one_hot(labels, tf.shape(probabilities)[-1])
            return self.class_score(probabilities, tf.cast(one_hot, probabilities.dtype))
        labels = tf.reshape(binary_labels(y, probabilities.dtype), [-1])  # [B], as GPflow reads
        return self.binary_score(probabilities[:, 0], labels)


@tf_keras.utils.register_keras_serializable(package="gpflux_avdgp")
class MixtureAccuracy(_ClassMetric):
    """Fraction of rows whose most probable class is the label (Bernoulli: ``p > 0.5``)."""

    def __init__(self, likelihood=None, *, name: str = "accuracy", **kwargs):
        super().__init__(likelihood, name=name, **kwargs)

    def binary_score(self, probability: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        return tf.cast(tf.equal(tf.cast(probability > 0.5, labels.dtype), labels), labels.dtype)

    def class_score(self, probabilities: tf.Tensor, one_hot: tf.Tensor) -> tf.Tensor:
        predicted = tf.argmax(probabilities, axis=-1)
        return tf.cast(tf.equal(predicted, tf.argmax(one_hot, axis=-1)), probabilities.dtype)


@tf_keras.utils.register_keras_serializable(package="gpflux_avdgp")
class MixtureBrier(_ClassMetric):
    """Brier score: ``(p - y)^2`` (Bernoulli) or ``sum_k (p_k - [y = k])^2`` (``K`` classes),
    as :func:`avdgp.metrics.brier_score` and ``multiclass_metrics`` compute it."""

    def __init__(self, likelihood=None, *, name: str = "brier", **kwargs):
        super().__init__(likelihood, name=name, **kwargs)

    def binary_score(self, probability: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        return tf.square(probability - labels)

    def class_score(self, probabilities: tf.Tensor, one_hot: tf.Tensor) -> tf.Tensor:
        return tf.reduce_sum(tf.square(probabilities - one_hot), axis=-1)
