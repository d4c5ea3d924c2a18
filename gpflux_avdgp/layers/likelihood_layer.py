"""The model's last layer: the predictive distribution of ``y``, and the owner of the
likelihood and the objective.

Its output is a :class:`~gpflux_avdgp.predictive.PredictiveDistribution` in the form tfp's
probabilistic layers use: a tensor that Keras metrics and ``predict`` read (the predictive mean
of ``y``, or the class probabilities) carrying the distribution, which
:class:`~gpflux_avdgp.AVDGPLoss`, the package's metrics and
:func:`~gpflux_avdgp.predictive.predictive_distribution` read. The same in every Keras model
type (``Sequential``, Functional, subclassed, cloned); ``docs/design.md`` records the choice.
"""

from __future__ import annotations

from typing import Optional

import gpflow
import tensorflow as tf
import tensorflow_probability as tfp
from gpflow.keras import tf_keras

from ..checks import check_choice
from ..core.mixture import mixture_width_to_dim
from ..gpflow_config import likelihood_from_config, likelihood_to_config
from ..predictive import ATTRIBUTE, PredictiveDistribution, is_categorical, is_classifier
from ..rules import Objective
from .module_state import GPflowModuleState
from .readers import check_no_reader_after_likelihood, refuse_gpflux_reader

__all__ = ["TrainableLikelihood"]


@tf_keras.utils.register_keras_serializable(package="gpflux_avdgp")
class TrainableLikelihood(GPflowModuleState, tf_keras.layers.Layer):
    """Last layer of an AVDGP: reads the packed mixture of ``f`` ``[B, S, 2 Q + 1]`` and
    returns the predictive distribution of ``y``, owning the likelihood and the objective.

    The output is the predictive mean of ``y`` ``[B, Q]`` (classifiers: the class
    probabilities, ``[B, 1]`` for Bernoulli's ``p(y = 1)``, ``[B, K]`` for ``K`` classes), what
    Keras metrics and ``predict`` read, carrying the
    :class:`~gpflux_avdgp.predictive.PredictiveDistribution` that the loss and the package's
    metrics read (:func:`~gpflux_avdgp.predictive.predictive_distribution`).

    A Keras loss is not part of the model, so the likelihood's parameters (e.g. the Gaussian
    noise variance) train because this layer holds them. A training step whose loss does not
    read the distribution (``compile()`` without a loss trains the KL terms alone, ``"mse"``
    the mean without the likelihood) is refused while it is traced, in every model type.

    :param likelihood: a GPflow likelihood with one latent function per output.
    :param objective: the data term the model trains: ``"elbo"`` (AR1, AR2, AR2P) or
        ``"predictive"`` (AR2PP); :class:`~gpflux_avdgp.AVDGPLoss` takes it from here.
    """

    #: Reads a packed mixture.
    reads_mixture: bool = True

    def __init__(
        self,
        likelihood: gpflow.likelihoods.Likelihood,
        *,
        objective: str | Objective = Objective.ELBO,
        **kwargs,
    ):
        if not isinstance(likelihood, gpflow.likelihoods.Likelihood):
            raise TypeError(f"likelihood: expected a GPflow likelihood, got {likelihood!r}")
        kwargs.setdefault("dtype", gpflow.default_float())
        super().__init__(**kwargs)
        self.likelihood = likelihood
        self.objective = check_choice("objective", objective, Objective)

    def _gpflow_modules(self) -> list[tf.Module]:
        return [self.likelihood]

    @tf.autograph.experimental.do_not_convert  # no control flow on tensors: traced as written
    def call(self, inputs: tf.Tensor, training: Optional[bool] = None) -> tf.Tensor:
        """The predictive mean of ``y`` (or the class probabilities) carrying the predictive
        distribution.

        :param training: the distribution is the same in training and prediction; in training
            the layer adds a zero loss whose gradient checks that the loss read it (module
            docstring).
        :raises ValueError: if a layer follows this one (it would drop the distribution), or
            ``inputs`` are a GPflux layer's output (a ``GPLayer`` after ours, not wrapped); in
            the backward pass of a training step whose loss did not read the distribution.
        """
        check_no_reader_after_likelihood(self)
        if isinstance(inputs, tfp.distributions.Distribution):  # what GPflux's layers output
            raise ValueError(
                f"{self.name}: reads a GPflux layer's output (one Gaussian q(f) per row), not a "
                "packed mixture; a GPflux GPLayer after a GP layer of ours: wrap it: "
                "gpflux_avdgp.SigmaPointGPLayer(gp_layer)"
            )
        distribution = PredictiveDistribution.from_packed(self.likelihood, inputs, self.objective)
        if training:
            self.add_loss(_read_check(inputs, distribution, self.name))
        outputs = distribution.mean()  # what Keras reads; pruned in a step where nothing does
        setattr(outputs, ATTRIBUTE, distribution)  # as tfp's layers attach a distribution
        refuse_gpflux_reader(
            outputs,
            self,
            "the predictive distribution of y, not of f",
            "compile with gpflux_avdgp.AVDGPLoss() (it reads the likelihood from this layer)",
        )
        return outputs

    def compute_output_shape(self, input_shape: tf.TensorShape) -> tf.TensorShape:
        """``[B, Q]`` (``Q`` outputs or ``K`` classes; Bernoulli ``[B, 1]``)."""
        input_shape = tf.TensorShape(input_shape)
        width = mixture_width_to_dim(int(input_shape[-1]))
        if is_classifier(self.likelihood) and not is_categorical(self.likelihood):
            width = 1
        return tf.TensorShape([input_shape[0], width])

    def get_config(self) -> dict:
        config = super().get_config()
        config["likelihood"] = likelihood_to_config(self.likelihood)
        config["objective"] = self.objective.value
        return config

    @classmethod
    def from_config(cls, config: dict) -> "TrainableLikelihood":
        """Rebuild the layer with a new likelihood (its trained values come with the weights);
        files written before the objective was saved train the ELBO."""
        config = dict(config)
        config["likelihood"] = likelihood_from_config(config["likelihood"])
        return cls(**config)


def _read_check(inputs: tf.Tensor, distribution: PredictiveDistribution, name: str) -> tf.Tensor:
    """A zero ``[]`` on ``inputs`` ``[B, S, 2 Q + 1]`` whose gradient, built after the step's
    loss in the graph of the step (Keras' ``train_step``, or a ``GradientTape`` of one's own),
    raises unless the loss read ``distribution``; otherwise its gradient is zero. A gradient
    traced in another graph (a SavedModel tracing the layer's custom gradients) is not a step
    and is not checked."""
    step_graph = tf.compat.v1.get_default_graph()  # the global graph when eager

    @tf.custom_gradient
    def zero(packed: tf.Tensor):
        def gradient(upstream: tf.Tensor) -> tf.Tensor:
            if tf.compat.v1.get_default_graph() is step_graph and not distribution.read:
                raise ValueError(
                    f"{name}: the loss does not read the model's predictive distribution, so the "
                    "likelihood would not train (compile() without a loss trains the KL terms "
                    "alone, 'mse' the mean of y); compile(loss=gpflux_avdgp.AVDGPLoss()), or read "
                    "gpflux_avdgp.predictive.predictive_distribution(y_pred) in a loss of your own"
                )
            return tf.zeros_like(packed)

        return tf.zeros([], packed.dtype), gradient

    return zero(inputs)
