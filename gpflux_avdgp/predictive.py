"""The predictive law of ``y``: the one module that turns a mixture of ``f`` and a GPflow
likelihood into moments, class probabilities, log densities, intervals and the ELBO's
expected log likelihood.

A model's last layer, :class:`~gpflux_avdgp.TrainableLikelihood`, outputs
:class:`PredictiveDistribution` in the form tfp's probabilistic layers use: a tensor that Keras
metrics and ``predict`` read (the predictive mean of ``y``, or the class probabilities) with
the distribution attached; :func:`predictive_distribution` reads it back, so a loss or a metric
gets the model's likelihood and objective from the model's output, in every Keras model type.
Prediction, the Keras losses and metrics, serving, the GPflux adapter and the application all
compute the law of ``y`` here.

**Labels.** GPflow's ``Bernoulli`` reads ``y == 1`` as the positive class and any other value
as the negative one (``{0, 1}`` and ``{-1, +1}`` alike); :func:`binary_labels` reads them so.
Categorical likelihoods (``MultiClass``, ``Softmax``) read one class index per row.
"""

from __future__ import annotations

from typing import Optional

import gpflow
import tensorflow as tf
from check_shapes import check_shapes

from .core.mixture import GaussianMixture, mixture_moments
from .intervals import interval_outputs
from .rules import Objective

__all__ = [
    "PredictiveDistribution",
    "binary_labels",
    "component_log_density",
    "component_variational_expectations",
    "component_y_moments",
    "is_categorical",
    "is_classifier",
    "mixture_log_density",
    "output_mixture",
    "predictive_distribution",
]

#: The attribute of a model output that holds its :class:`PredictiveDistribution` (as tfp's
#: layers attach ``_tfp_distribution``).
ATTRIBUTE = "_avdgp_predictive"


def is_categorical(likelihood: gpflow.likelihoods.Likelihood) -> bool:
    """Whether ``likelihood`` reads one class index per row from ``K`` latent functions
    (GPflow's ``MultiClass`` with ``RobustMax``, or ``Softmax``)."""
    return isinstance(likelihood, (gpflow.likelihoods.MultiClass, gpflow.likelihoods.Softmax))


def is_classifier(likelihood: gpflow.likelihoods.Likelihood) -> bool:
    """Whether ``likelihood`` reads class labels: Bernoulli or categorical."""
    return isinstance(likelihood, gpflow.likelihoods.Bernoulli) or is_categorical(likelihood)


def binary_labels(y: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
    """Labels of a Bernoulli likelihood as GPflow reads them: ``1`` where ``y == 1``, else ``0``
    (so ``{0, 1}`` and ``{-1, +1}`` give the same), in ``dtype``.

    :raises tf.errors.InvalidArgumentError: one line, for a label other than -1, 0 and 1
        (``{1, 2}`` would read 2 as the negative class; not under XLA, which drops
        assertions)."""
    y = tf.convert_to_tensor(y)
    if y.dtype == tf.bool:  # True / False: classes 1 and 0, nothing to check
        return tf.cast(y, dtype)
    one = tf.ones([], y.dtype)
    known = tf.equal(y, one) | tf.equal(y, tf.zeros([], y.dtype)) | tf.equal(y, -one)
    check = tf.debugging.Assert(
        tf.reduce_all(known),
        ["y: Bernoulli labels are 0/1 or -1/+1 (y == 1 is the positive class); map yours, "
         "e.g. (y == positive_class)"],
    )  # fmt: skip
    with tf.control_dependencies([check]):
        return tf.cast(tf.equal(y, one), dtype)


def _targets(
    y_true: tf.Tensor, mixture: GaussianMixture, likelihood: gpflow.likelihoods.Likelihood
) -> tf.Tensor:
    """Targets as ``[B, 1, Q]`` in the mixture's dtype; ``[B]`` is read as ``[B, 1]``.

    A categorical likelihood reads one class index per row (``[B, 1, 1]``) for its ``K``
    latent outputs; every other likelihood one target per output.
    """
    y = tf.cast(y_true, mixture.means.dtype)
    width = 1 if is_categorical(likelihood) else mixture.dim
    if y.shape.rank is None:  # a step traced for targets of two ranks (a refit with [B])
        y = tf.reshape(y, [-1, width])
    if y.shape.rank == 1:
        y = y[:, None]
    if y.shape.rank != 2 or (y.shape[-1] is not None and y.shape[-1] != width):
        what = (
            f"one class index per row for the model's {mixture.dim} classes"
            if is_categorical(likelihood)
            else f"{mixture.dim} output(s)"
        )
        raise ValueError(
            f"y_true: expected targets of shape [batch, {width}] to match the model's "
            f"{what}, got shape {y_true.shape}"
        )
    batch, pred_batch = y.shape[0], mixture.means.shape[0]
    if batch is not None and pred_batch is not None and batch != pred_batch:
        raise ValueError(
            f"y_true: expected {pred_batch} rows to match y_pred, got shape {y_true.shape}"
        )
    return y[:, None, :]


def _per_component(method, likelihood, mixture: GaussianMixture, y_true: tf.Tensor) -> tf.Tensor:
    """``method(None, means, variances, y)`` for every component: ``[B, S]``.

    GPflow's categorical likelihoods read rank-2 inputs only (they flatten the targets), so
    their components are stacked into the batch: ``[B S, K]`` with the targets repeated.
    """
    y = _targets(y_true, mixture, likelihood)  # [B, 1, Q]
    if not is_categorical(likelihood):
        return method(None, mixture.means, mixture.variances, y)
    shape = tf.shape(mixture.means)  # [B, S, K]
    flat = [tf.reshape(t, [-1, shape[2]]) for t in (mixture.means, mixture.variances)]
    labels = tf.reshape(tf.repeat(y, shape[1], axis=1), [-1, 1])  # [B S, 1]
    no_inputs = tf.zeros([tf.shape(labels)[0], 0], labels.dtype)  # Softmax's Monte Carlo needs X
    labels = tf.cast(labels, tf.int64)  # Softmax's cross-entropy takes integer classes
    return tf.reshape(method(no_inputs, flat[0], flat[1], labels), shape[:2])


@check_shapes(
    "means: [N, S, Q]",
    "variances: [N, S, Q]",
    "return[0]: [N, S, K]",
    "return[1]: [N, S, K]",
)
def component_y_moments(
    likelihood: gpflow.likelihoods.Likelihood, means: tf.Tensor, variances: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor]:
    """Mean and variance of ``y`` per component, ``[N, S, Q]`` each (``Q = K`` classes for a
    categorical likelihood: the class probabilities and their variances), in TensorFlow.

    GPflow's categorical likelihoods read rank-2 inputs only, so their components are stacked
    into the rows: ``[N S, K]``. Their class probabilities are renormalised to sum to one, the
    variances taken as ``p (1 - p)`` of the result (GPflow's own formula): ``MultiClass``
    integrates each class's ``RobustMax`` probability with its own 20-point Gauss-Hermite rule,
    and the sums are off by up to 0.03 for component variances up to 0.1 and 0.1 for variances
    up to 5 (measured on 5000 random 3-class components; the median is 1e-6).
    """
    if not is_categorical(likelihood):
        return likelihood.predict_mean_and_var(None, means, variances)
    shape = tf.shape(means)  # [N, S, K]
    flat_means, flat_variances = (tf.reshape(t, [-1, shape[2]]) for t in (means, variances))
    no_inputs = tf.zeros([tf.shape(flat_means)[0], 0], means.dtype)  # Softmax's MC needs X
    y_means, _ = likelihood.predict_mean_and_var(no_inputs, flat_means, flat_variances)
    y_means = tf.reshape(y_means, shape)  # [N, S, K]
    y_means = y_means / tf.reduce_sum(y_means, axis=-1, keepdims=True)
    return y_means, y_means - tf.square(y_means)


@check_shapes(
    "mixture.means: [B, S, Q]",
    "mixture.log_weights: [B, S]",
    "return: [B, S]",
)
def component_variational_expectations(
    likelihood: gpflow.likelihoods.Likelihood, mixture: GaussianMixture, y_true: tf.Tensor
) -> tf.Tensor:
    """``E_{q(f_s)}[log p(y | f_s)]`` summed over outputs, per component: ``[B, S]``."""
    return _per_component(likelihood.variational_expectations, likelihood, mixture, y_true)


@check_shapes(
    "mixture.means: [B, S, Q]",
    "mixture.log_weights: [B, S]",
    "return: [B, S]",
)
def component_log_density(
    likelihood: gpflow.likelihoods.Likelihood, mixture: GaussianMixture, y_true: tf.Tensor
) -> tf.Tensor:
    """``log int p(y | f) q(f_s) df`` summed over outputs, per component: ``[B, S]``.

    Categorical likelihoods: the log of the label's class probability from
    :func:`component_y_moments` (renormalised over the classes), so the log density, the
    predictive objective and the NLL of the class probabilities agree.
    """
    if not is_categorical(likelihood):
        return _per_component(likelihood.predict_log_density, likelihood, mixture, y_true)
    labels = tf.cast(_targets(y_true, mixture, likelihood)[:, 0, 0], tf.int32)  # [B]
    probabilities, _ = component_y_moments(likelihood, mixture.means, mixture.variances)
    one_hot = tf.one_hot(labels, tf.shape(probabilities)[-1], dtype=probabilities.dtype)
    return tf.math.log(tf.reduce_sum(probabilities * one_hot[:, None, :], axis=-1))  # [B, S]


@check_shapes(
    "mixture.means: [B, S, Q]",
    "mixture.variances: [B, S, Q]",
    "mixture.log_weights: [B, S]",
    "return: [B]",
)
def mixture_log_density(
    likelihood: gpflow.likelihoods.Likelihood, mixture: GaussianMixture, y_true: tf.Tensor
) -> tf.Tensor:
    """Log predictive density of the mixture, ``log sum_s w_s p(y | s)``: ``[B]``."""
    log_density = component_log_density(likelihood, mixture, y_true)  # [B, S]
    return tf.reduce_logsumexp(mixture.log_weights + log_density, axis=-1)


class PredictiveDistribution:
    """``p(y | x) = sum_s w_s int p(y | f) N(f | m_s, diag v_s) df`` at ``B`` inputs.

    :param likelihood: the GPflow likelihood.
    :param mixture: the mixture of ``f``: means and variances ``[B, S, Q]``, log weights
        ``[B, S]``.
    :param objective: the data term the model trains (its rule's): ``"elbo"`` or
        ``"predictive"``.
    """

    def __init__(
        self,
        likelihood: gpflow.likelihoods.Likelihood,
        mixture: GaussianMixture,
        objective: Objective = Objective.ELBO,
    ):
        self.likelihood = likelihood
        self.mixture = mixture
        self.objective = Objective(objective)
        self._component_moments: Optional[tuple[tf.Tensor, tf.Tensor]] = None
        #: set when a loss (or anything) reads it from a model output
        #: (:func:`predictive_distribution`): a training step whose loss never did trains
        #: without the likelihood, which the model's :class:`~gpflux_avdgp.TrainableLikelihood`
        #: refuses
        self.read = False

    @classmethod
    def from_packed(
        cls,
        likelihood: gpflow.likelihoods.Likelihood,
        packed: tf.Tensor,
        objective: Objective = Objective.ELBO,
    ) -> "PredictiveDistribution":
        """The distribution of a packed mixture of ``f`` ``[B, S, 2 Q + 1]``."""
        return cls(likelihood, GaussianMixture.unpack(packed), objective)

    # ------------------------------------------------------------------ moments
    def component_moments(self) -> tuple[tf.Tensor, tf.Tensor]:
        """Mean and variance of ``y`` per component ``[B, S, K]`` (:func:`component_y_moments`)."""
        if self._component_moments is None:
            self._component_moments = component_y_moments(
                self.likelihood, self.mixture.means, self.mixture.variances
            )
        return self._component_moments

    def mean(self) -> tf.Tensor:
        """Predictive mean of ``y`` ``[B, Q]``: for Bernoulli ``p(y = 1 | x)`` ``[B, 1]``, for
        a categorical likelihood the class probabilities ``[B, K]``."""
        return self.moments()[0]

    def variance(self) -> tf.Tensor:
        """Predictive variance of ``y`` ``[B, Q]`` (the noise included)."""
        return self.moments()[1]

    def stddev(self) -> tf.Tensor:
        """Predictive standard deviation of ``y`` ``[B, Q]``."""
        return tf.sqrt(self.variance())

    def moments(self) -> tuple[tf.Tensor, tf.Tensor]:
        """``(mean, variance)`` of ``y``, ``[B, Q]`` each (law of total variance)."""
        return mixture_moments(self.mixture.weights, *self.component_moments())

    # ------------------------------------------------------------------ densities
    def log_prob(self, y: tf.Tensor) -> tf.Tensor:
        """``log p(y | x)`` per row ``[B]``, summed over outputs (class index per row for a
        categorical likelihood)."""
        return mixture_log_density(self.likelihood, self.mixture, y)

    def expected_log_likelihood(self, y: tf.Tensor) -> tf.Tensor:
        """The ELBO's data term per row, ``sum_s w_s E_{q(f_s)}[log p(y | f_s)]``: ``[B]``."""
        expectations = component_variational_expectations(self.likelihood, self.mixture, y)
        return tf.reduce_sum(self.mixture.weights * expectations, axis=-1)

    def objective_value(self, y: tf.Tensor, objective: Optional[Objective] = None) -> tf.Tensor:
        """The data term of ``objective`` (default: the model's) per row ``[B]``: the expected
        log likelihood (``"elbo"``) or the log predictive density (``"predictive"``)."""
        objective = self.objective if objective is None else Objective(objective)
        if objective is Objective.PREDICTIVE:
            return self.log_prob(y)
        return self.expected_log_likelihood(y)

    # ------------------------------------------------------------------ prediction
    def outputs(self) -> dict[str, tf.Tensor]:
        """What ``AVDGPModel.predict`` returns: ``{"mean", "std"}`` of ``y`` ``[B, Q]`` and,
        for a Gaussian likelihood, the exact central 95 % interval (``"lower_95"``,
        ``"upper_95"``, :mod:`~gpflux_avdgp.intervals`); ``{"probabilities": [B, K]}`` for a
        classifier."""
        if is_classifier(self.likelihood):
            return {"probabilities": self.mean()}
        mean, variance = self.moments()
        intervals = interval_outputs(
            self.likelihood, self.mixture.log_weights, *self.component_moments()
        )
        return {"mean": mean, "std": tf.sqrt(variance), **intervals}


def predictive_distribution(
    y_pred: object, likelihood: Optional[gpflow.likelihoods.Likelihood] = None
) -> PredictiveDistribution:
    """The :class:`PredictiveDistribution` a model output carries.

    :param y_pred: what the model's :class:`~gpflux_avdgp.TrainableLikelihood` returned; or,
        with ``likelihood``, the packed mixture ``[B, S, 2 Q + 1]`` of a model ending in a GP
        layer.
    :param likelihood: optional; must be the model's when ``y_pred`` carries one.
    :raises ValueError: one line naming the fix, when ``y_pred`` carries no distribution and
        no likelihood is given, or carries one of another likelihood.
    """
    carried = getattr(y_pred, ATTRIBUTE, None)
    if carried is not None:
        carried.read = True
        if likelihood is not None and likelihood is not carried.likelihood:
            raise ValueError(
                "likelihood: the model's TrainableLikelihood holds another likelihood than the "
                "loss or metric, so the model's would not be the one scored or trained; leave "
                "it out (AVDGPLoss(), MixtureNLL()) or pass model.likelihood"
            )
        return carried
    if likelihood is not None:  # the packed mixture of a model ending in a GP layer
        return PredictiveDistribution.from_packed(likelihood, y_pred)
    raise ValueError(
        f"y_pred: a tensor of shape {tuple(tf.TensorShape(getattr(y_pred, 'shape', None)))} "
        "carries no predictive distribution of y; end the model with "
        "gpflux_avdgp.TrainableLikelihood(likelihood) after its last GP layer"
    )


def output_mixture(outputs: tf.Tensor) -> GaussianMixture:
    """The mixture of ``f`` of a model output: the one its predictive distribution holds, or
    the output itself when the model ends in a GP layer (a packed mixture)."""
    carried = getattr(outputs, ATTRIBUTE, None)
    return GaussianMixture.unpack(outputs) if carried is None else carried.mixture
