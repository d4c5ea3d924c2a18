"""A pass-through layer that puts the likelihood's parameters in the model."""

from __future__ import annotations

import gpflow
import tensorflow as tf
from gpflow.keras import tf_keras

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

    def __init__(self, likelihood: gpflow.likelihoods.Likelihood, **kwargs):
        if not isinstance(likelihood, gpflow.likelihoods.Likelihood):
            raise ValueError(f"likelihood: expected a GPflow likelihood, got {likelihood!r}")
        kwargs.setdefault("dtype", gpflow.default_float())
        super().__init__(**kwargs)
        self.likelihood = likelihood

    def _gpflow_modules(self) -> list[tf.Module]:
        return [self.likelihood]

    def call(self, inputs: tf.Tensor) -> tf.Tensor:
        """:returns: ``inputs`` unchanged (a packed mixture)."""
        return tf.identity(inputs)

    def compute_output_shape(self, input_shape: tf.TensorShape) -> tf.TensorShape:
        return tf.TensorShape(input_shape)

    def get_config(self) -> dict:
        config = super().get_config()
        config["likelihood"] = likelihood_to_config(self.likelihood)
        return config

    @classmethod
    def from_config(cls, config: dict) -> "TrainableLikelihood":
        config = dict(config)
        config["likelihood"] = likelihood_from_config(config["likelihood"])
        return cls(**config)


def likelihood_to_config(likelihood: gpflow.likelihoods.Likelihood) -> dict:
    """A JSON-able description of the Gaussian and Bernoulli (probit) likelihoods."""
    if type(likelihood) is gpflow.likelihoods.Gaussian:
        return {"class_name": "Gaussian", "variance": float(likelihood.variance.numpy())}
    if type(likelihood) is gpflow.likelihoods.Bernoulli:
        return {"class_name": "Bernoulli"}
    raise NotImplementedError(
        f"likelihood: {type(likelihood).__name__} cannot be saved; Gaussian and Bernoulli can"
    )


def likelihood_from_config(config: dict) -> gpflow.likelihoods.Likelihood:
    """Inverse of :func:`likelihood_to_config` (the trained values come from the weights)."""
    if config["class_name"] == "Gaussian":
        return gpflow.likelihoods.Gaussian(variance=config["variance"])
    if config["class_name"] == "Bernoulli":
        return gpflow.likelihoods.Bernoulli()
    raise ValueError(f"likelihood: unknown class_name {config['class_name']!r}")
