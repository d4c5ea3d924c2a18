"""A pass-through layer that puts the likelihood's parameters in the model.

The layer is where the likelihood lives: its output carries the likelihood to the loss and the
metrics (``_avdgp_likelihood``, as tfp's layers attach a distribution), so a reloaded
:class:`~gpflux_avdgp.AVDGPLoss` trains this layer's likelihood (see
:mod:`gpflux_avdgp.objectives`).
"""

from __future__ import annotations

import gpflow
import tensorflow as tf
from gpflow.keras import tf_keras

from ..gpflow_config import likelihood_from_config, likelihood_to_config
from .base import check_mixture_readers
from .module_state import GPflowModuleState

__all__ = ["TrainableLikelihood"]


@tf_keras.utils.register_keras_serializable(package="gpflux_avdgp")
class TrainableLikelihood(GPflowModuleState, tf_keras.layers.Layer):
    """Last layer of an AVDGP ``Sequential``: returns its input and owns the likelihood.

    A Keras loss is not part of the model, so the likelihood's parameters (e.g. the Gaussian
    noise variance) are only trained by ``model.fit`` if a layer holds them. Pass the same
    likelihood to :class:`~gpflux_avdgp.AVDGPLoss`; :func:`~gpflux_avdgp.predict_mixture`
    finds it here.

    :param likelihood: a GPflow likelihood with one latent function per output.
    """

    #: Reads (and returns) a packed mixture.
    reads_mixture: bool = True

    def __init__(self, likelihood: gpflow.likelihoods.Likelihood, **kwargs):
        if not isinstance(likelihood, gpflow.likelihoods.Likelihood):
            raise TypeError(f"likelihood: expected a GPflow likelihood, got {likelihood!r}")
        kwargs.setdefault("dtype", gpflow.default_float())
        super().__init__(**kwargs)
        self.likelihood = likelihood

    def _gpflow_modules(self) -> list[tf.Module]:
        return [self.likelihood]

    def call(self, inputs: tf.Tensor) -> tf.Tensor:
        """:returns: ``inputs`` unchanged (a packed mixture).

        :raises ValueError: if a layer that does not read mixtures follows this one.
        """
        check_mixture_readers(self)
        outputs = tf.identity(inputs)
        outputs._avdgp_likelihood = self.likelihood  # read by AVDGPLoss (as tfp's layers do)
        return outputs

    def compute_output_shape(self, input_shape: tf.TensorShape) -> tf.TensorShape:
        return tf.TensorShape(input_shape)

    def get_config(self) -> dict:
        config = super().get_config()
        config["likelihood"] = likelihood_to_config(self.likelihood)
        return config

    @classmethod
    def from_config(cls, config: dict) -> "TrainableLikelihood":
        """Rebuild the layer with a new likelihood (its trained values come with the weights)."""
        config = dict(config)
        config["likelihood"] = likelihood_from_config(config["likelihood"])
        return cls(**config)
