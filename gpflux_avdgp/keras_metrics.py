"""Keras metrics of the predictive distribution of ``y``, read from a model's packed mixture.

Each metric takes ``y_pred``, the packed mixture of ``f`` that an AVDGP outputs
(``[B, S, 2 Q + 1]``), and the GPflow likelihood that turns it into the predictive
distribution of ``y``; so it works in ``compile(metrics=...)`` of any model whose output is the
mixture (a plain ``tf_keras.Sequential``, a Functional or subclassed model) and as a ``val_``
monitor of ``EarlyStopping`` or ``ModelCheckpoint``. In an :class:`~gpflux_avdgp.AVDGPModel`
the likelihood may be left out: ``compile`` gives each metric the model's.

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

from .core.mixture import GaussianMixture, mixture_moments
from .gpflow_config import likelihood_from_config, likelihood_to_config
from .objectives import (
    component_y_moments,
    is_categorical,
    is_classifier,
    mixture_log_density,
    model_likelihood_of,
)

__all__ = [
    "MixtureAccuracy",
    "MixtureBrier",
    "MixtureCRPS",
    "MixtureMetric",
    "MixtureNLL",
    "MixtureRMSE",
    "predictive_y",
]


def predictive_y(
    likelihood: gpflow.likelihoods.Likelihood, mixture: GaussianMixture
) -> tuple[tf.Tensor, tf.Tensor]:
    """Mean and total variance of ``y`` under the mixture, ``[B, Q]`` each.

    For a Bernoulli likelihood the mean is ``p(y = 1 | x)`` ``[B, 1]``; for a categorical one
    the class probabilities ``[B, K]``; for a Gaussian the mean of ``f`` and the variance of
    ``f`` plus the noise.
    """
    y_means, y_variances = component_y_moments(likelihood, mixture.means, mixture.variances)
    return mixture_moments(mixture.weights, y_means, y_variances)


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

    Subclasses implement :meth:`per_row`. The likelihood is held outside Keras' tracking, so
    resetting the metric never touches the likelihood's parameters.

    :param likelihood: the model's GPflow likelihood; may be left out in an
        :class:`~gpflux_avdgp.AVDGPModel`, whose ``compile`` gives its own.
    :param name: the name in Keras logs (``val_<name>`` on validation data).
    """

    #: Whether the metric takes the model's likelihood at its next update: true for a metric
    #: rebuilt from its config (as :class:`~gpflux_avdgp.AVDGPLoss`).
    adopts_model_likelihood: bool = False

    def __init__(
        self,
        likelihood: Optional[gpflow.likelihoods.Likelihood] = None,
        *,
        name: str,
        dtype=None,
        **kwargs,
    ):
        super().__init__(name=name, dtype=dtype or gpflow.default_float(), **kwargs)
        self.bind(likelihood)
        self.total = self.add_weight(name="total", initializer="zeros")
        self.count = self.add_weight(name="count", initializer="zeros")

    @property
    def likelihood(self) -> Optional[gpflow.likelihoods.Likelihood]:
        """The GPflow likelihood the metric reads ``y`` with."""
        return self._held[0]

    def bind(self, likelihood: Optional[gpflow.likelihoods.Likelihood]) -> None:
        """Use ``likelihood`` (``None`` leaves the metric unbound).

        :raises TypeError: if ``likelihood`` is not a GPflow likelihood.
        """
        if likelihood is not None and not isinstance(likelihood, gpflow.likelihoods.Likelihood):
            raise TypeError(f"likelihood: expected a GPflow likelihood, got {likelihood!r}")
        self.check_likelihood(likelihood)
        object.__setattr__(self, "_held", (likelihood,))  # not tracked by Keras
        object.__setattr__(self, "adopts_model_likelihood", False)

    def check_likelihood(self, likelihood: Optional[gpflow.likelihoods.Likelihood]) -> None:
        """Raise ``ValueError`` if the score is not defined for ``likelihood``."""

    def per_row(
        self, likelihood: gpflow.likelihoods.Likelihood, mixture: GaussianMixture, y: tf.Tensor
    ) -> tf.Tensor:
        """The score of each row ``[B]``; ``y`` is ``y_true`` as given (``[B, Q]`` or ``[B]``)."""
        raise NotImplementedError

    def update_state(self, y_true, y_pred, sample_weight=None) -> None:
        """Add the rows of a batch: ``y_pred`` is the packed mixture ``[B, S, 2 Q + 1]``."""
        held = model_likelihood_of(y_pred)
        if held is not None and self.adopts_model_likelihood:
            self.bind(held)
        if self.likelihood is None:
            raise ValueError(
                f"{self.name}: no likelihood; pass the model's, e.g. "
                f"{type(self).__name__}(likelihood), or compile a gpflux_avdgp.AVDGPModel"
            )
        y_pred = tf.convert_to_tensor(y_pred)
        if y_pred.shape.rank != 3:
            raise ValueError(
                f"{self.name}: expected y_pred to be the packed mixture [batch, components, "
                f"2 * Q + 1] of an AVDGP, got shape {y_pred.shape}"
            )
        mixture = GaussianMixture.unpack(tf.cast(y_pred, self.dtype))
        scores = tf.cast(self.per_row(self.likelihood, mixture, y_true), self.dtype)  # [B]
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

    def get_config(self) -> dict:
        config = super().get_config()
        bound = self.likelihood
        config["likelihood"] = None if bound is None else likelihood_to_config(bound)
        return config

    @classmethod
    def from_config(cls, config: dict) -> "MixtureMetric":
        """Rebuild the metric with a copy of the saved likelihood, which it gives up for the
        model's at its first update (:attr:`adopts_model_likelihood`)."""
        config = dict(config)
        if config.get("likelihood") is None:
            return cls(**config)
        config["likelihood"] = likelihood_from_config(config["likelihood"])
        metric = cls(**config)
        object.__setattr__(metric, "adopts_model_likelihood", True)
        return metric


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

    def per_row(self, likelihood, mixture, y):
        return -mixture_log_density(likelihood, mixture, y)


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

    def per_row(self, likelihood, mixture, y):
        mean, _ = predictive_y(likelihood, mixture)  # [B, Q]
        return tf.reduce_mean(tf.square(_targets(y, mixture.dim, mean.dtype) - mean), axis=-1)

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

    def per_row(self, likelihood, mixture, y):
        y_means, y_variances = component_y_moments(likelihood, mixture.means, mixture.variances)
        targets = _targets(y, mixture.dim, y_means.dtype)
        crps = gaussian_mixture_crps(targets, mixture.weights, y_means, y_variances)
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

    def per_row(self, likelihood, mixture, y):
        probabilities, _ = predictive_y(likelihood, mixture)
        labels = tf.reshape(tf.cast(y, probabilities.dtype), [-1])  # [B]
        if is_categorical(likelihood):
            one_hot = tf.one_hot(tf.cast(labels, tf.int32), tf.shape(probabilities)[-1])
            return self.class_score(probabilities, tf.cast(one_hot, probabilities.dtype))
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
