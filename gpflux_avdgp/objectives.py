"""Training objectives as one Keras loss: the ELBO and the predictive (AR2PP) objective.

The loss returns, per datapoint, the negative data term; the layers add their KL terms with
``add_loss`` (see :class:`~gpflux_avdgp.layers.amortized_gp_layer.KLConvention`), so ``model.fit``
minimises ``-(ELBO / N)`` under the ``"paper"`` convention.

* ``"elbo"``: ``-sum_s w_s E_{q(f_s)}[log p(y | f_s)]``; analytic for the Gaussian likelihood,
  Gauss-Hermite quadrature for others (the GPflow likelihood's ``variational_expectations``).
* ``"predictive"``: ``-log sum_s w_s p(y | s)`` with
  ``log p(y | s) = sum_d log int p(y_d | f) N(f | m_sd, v_sd) df`` (for a Gaussian likelihood
  ``sum_d log N(y_d | m_sd, v_sd + sigma^2)``): one log-sum-exp over components of the
  log-density **summed over outputs** (the reference code's per-output log-sum-exp is wrong).

**Where the loss gets its likelihood.** The likelihood lives in the model, in its
:class:`~gpflux_avdgp.TrainableLikelihood`, whose output carries it (:func:`model_likelihood_of`).
A loss built by hand holds the likelihood it was given and refuses a model holding another. A
loss rebuilt from its config (loading a model) holds a copy with the saved values and adopts
the model's likelihood at its first call (an :class:`~gpflux_avdgp.AVDGPModel` binds it at
``compile``), so continued training trains the model's. The other route is GPflux's: in
:func:`~gpflux_avdgp.as_deep_gp`'s ``DeepGP`` the likelihood layer holds the likelihood and adds
the data term itself, as GPflux's ``LikelihoodLayer`` does.
"""

from __future__ import annotations

import warnings
from typing import Optional

import gpflow
import tensorflow as tf
from check_shapes import check_shapes
from gpflow.keras import tf_keras

from .core.mixture import GaussianMixture
from .gpflow_config import likelihood_from_config, likelihood_to_config
from .rules import Objective
from .validation import check_choice

__all__ = [
    "Objective",
    "AVDGPLoss",
    "component_variational_expectations",
    "component_log_density",
    "component_y_moments",
    "is_categorical",
    "is_classifier",
    "mixture_log_density",
    "model_likelihood_of",
]


def is_categorical(likelihood: gpflow.likelihoods.Likelihood) -> bool:
    """Whether ``likelihood`` reads one class index per row from ``K`` latent functions
    (GPflow's ``MultiClass`` with ``RobustMax``, or ``Softmax``)."""
    return isinstance(likelihood, (gpflow.likelihoods.MultiClass, gpflow.likelihoods.Softmax))


def is_classifier(likelihood: gpflow.likelihoods.Likelihood) -> bool:
    """Whether ``likelihood`` reads class labels: Bernoulli (``{0, 1}``) or categorical."""
    return isinstance(likelihood, gpflow.likelihoods.Bernoulli) or is_categorical(likelihood)


def _targets(
    y_true: tf.Tensor, mixture: GaussianMixture, likelihood: gpflow.likelihoods.Likelihood
) -> tf.Tensor:
    """Targets as ``[B, 1, Q]`` in the mixture's dtype; ``[B]`` is read as ``[B, 1]``.

    A categorical likelihood reads one class index per row (``[B, 1, 1]``) for its ``K``
    latent outputs; every other likelihood one target per output.
    """
    y = tf.cast(y_true, mixture.means.dtype)
    if y.shape.rank == 1:
        y = y[:, None]
    width = 1 if is_categorical(likelihood) else mixture.dim
    if y.shape.rank != 2 or (y.shape[-1] is not None and y.shape[-1] != width):
        what = (
            f"one class index per row for the model's {mixture.dim} classes"
            if width == 1 and is_categorical(likelihood)
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


def model_likelihood_of(y_pred: object) -> Optional[gpflow.likelihoods.Likelihood]:
    """The likelihood of the :class:`~gpflux_avdgp.TrainableLikelihood` that output ``y_pred``
    (it sets ``y_pred._avdgp_likelihood``, as tfp's layers attach a distribution), or ``None``
    for another model output."""
    return getattr(y_pred, "_avdgp_likelihood", None)


@tf_keras.utils.register_keras_serializable(package="gpflux_avdgp")
class AVDGPLoss(tf_keras.losses.Loss):
    """Negative per-datapoint data term of an AVDGP, for ``model.compile(loss=...)``.

    ``y_pred`` is the packed mixture the model outputs (``[B, S, 2 Q + 1]``), ``y_true`` the
    targets ``[B, Q]`` (or ``[B]`` when ``Q = 1``).

    :param likelihood: the GPflow likelihood; put the same object in the model's
        :class:`~gpflux_avdgp.TrainableLikelihood` so its parameters are trained.
    :param objective: ``"elbo"`` (default) or ``"predictive"`` (AR2PP / DSPP), see
        :class:`Objective`.
    """

    #: Whether the loss takes the model's likelihood at its next call: true for a loss rebuilt
    #: from its config, whose likelihood is a copy (see the module docstring).
    adopts_model_likelihood: bool = False

    def __init__(
        self,
        likelihood: gpflow.likelihoods.Likelihood,
        *,
        objective: str | Objective = Objective.ELBO,
        name: str = "avdgp_loss",
        **kwargs,
    ):
        if not isinstance(likelihood, gpflow.likelihoods.Likelihood):
            raise TypeError(f"likelihood: expected a GPflow likelihood, got {likelihood!r}")
        super().__init__(name=name, **kwargs)
        self.likelihood = likelihood
        self.objective = check_choice("objective", objective, Objective)

    def __call__(self, y_true, y_pred, sample_weight=None):
        """The Keras loss, after checking that the model trains this loss's likelihood.

        ``y_pred`` from a :class:`~gpflux_avdgp.TrainableLikelihood` carries that layer's
        likelihood: another one is refused (the model's would not train, this one would not be
        the model's). Without it, a likelihood with trainable parameters gets a warning: the
        loss alone does not train them.

        :raises ValueError: if ``y_pred`` comes from a layer holding another likelihood.
        """
        held = model_likelihood_of(y_pred)
        if held is not None and self.adopts_model_likelihood:
            self.adopt(held)
        if held is not None and held is not self.likelihood:
            raise ValueError(
                f"{self.name}: the model's TrainableLikelihood holds another likelihood than the "
                "loss, so the model's would not train; use AVDGPLoss(model.likelihood)"
            )
        if held is None and self.likelihood.trainable_variables:
            warnings.warn(
                f"{self.name}: the model does not hold the loss's likelihood, so its parameters "
                "will not train; end the model with gpflux_avdgp.TrainableLikelihood(likelihood)",
                stacklevel=2,
            )
        return super().__call__(y_true, y_pred, sample_weight=sample_weight)

    def adopt(self, likelihood: gpflow.likelihoods.Likelihood) -> None:
        """Use the model's ``likelihood`` from now on (the copy of a reloaded loss goes)."""
        self.likelihood = likelihood
        self.adopts_model_likelihood = False

    def call(self, y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
        """The per-datapoint loss of the packed mixture ``y_pred`` ``[B, S, 2 Q + 1]``, with
        one-line errors for a ``y_pred`` of another rank and for targets of the wrong shape.

        :returns: ``[B]``.
        """
        return self._negative_data_term(GaussianMixture.unpack(y_pred), y_true)

    @check_shapes(
        "mixture.means: [B, S, Q]",
        "mixture.log_weights: [B, S]",
        "return: [B]",
    )
    def _negative_data_term(self, mixture: GaussianMixture, y_true: tf.Tensor) -> tf.Tensor:
        if self.objective is Objective.PREDICTIVE:
            return -mixture_log_density(self.likelihood, mixture, y_true)
        expectations = component_variational_expectations(self.likelihood, mixture, y_true)
        return -tf.reduce_sum(mixture.weights * expectations, axis=-1)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            likelihood=likelihood_to_config(self.likelihood), objective=self.objective.value
        )
        return config

    @classmethod
    def from_config(cls, config: dict) -> "AVDGPLoss":
        """Rebuild the loss with a copy of the saved likelihood, which it gives up for the
        model's at its first call (:attr:`adopts_model_likelihood`)."""
        config = dict(config)
        config["likelihood"] = likelihood_from_config(config["likelihood"])
        loss = cls(**config)
        loss.adopts_model_likelihood = True
        return loss
