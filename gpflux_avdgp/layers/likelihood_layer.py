"""A pass-through layer that puts the likelihood's parameters in the model.

Saving: a likelihood is described by :func:`likelihood_to_config`, which includes a persistent
``id`` shared by every config that describes the same object (the model's
:class:`TrainableLikelihood` and the compiled :class:`~gpflux_avdgp.AVDGPLoss`). Loading a
model rebuilds the layer first (:meth:`TrainableLikelihood.from_config` registers its new
likelihood under that id) and the compiled loss after it (:func:`shared_likelihood_from_config`
picks the registered object), so the reloaded loss trains the reloaded layer's likelihood.
"""

from __future__ import annotations

import uuid
import weakref
from typing import Optional

import gpflow
import tensorflow as tf
from gpflow.keras import tf_keras

from .base import check_mixture_readers
from .module_state import GPflowModuleState, gpflow_float

__all__ = [
    "TrainableLikelihood",
    "likelihood_from_config",
    "likelihood_id",
    "likelihood_to_config",
    "shared_likelihood_from_config",
]

#: Persistent id of every likelihood that has been saved or loaded in this process.
_IDS: "weakref.WeakKeyDictionary[gpflow.likelihoods.Likelihood, str]" = weakref.WeakKeyDictionary()
#: The likelihood most recently rebuilt by :meth:`TrainableLikelihood.from_config`, per id.
_LOADED: "weakref.WeakValueDictionary[str, gpflow.likelihoods.Likelihood]" = (
    weakref.WeakValueDictionary()
)


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
        """Rebuild the layer with a new likelihood, registered under the saved id so that a
        loss loaded after it shares the object (see :func:`shared_likelihood_from_config`)."""
        config = dict(config)
        likelihood = likelihood_from_config(config["likelihood"])
        saved_id = config["likelihood"].get("id")
        if saved_id is not None:
            _IDS[likelihood] = saved_id
            _LOADED[saved_id] = likelihood
        config["likelihood"] = likelihood
        return cls(**config)


def likelihood_id(likelihood: gpflow.likelihoods.Likelihood) -> str:
    """The persistent id of ``likelihood`` (a random hex string given on first use, or the id
    it was saved under if it was loaded)."""
    if likelihood not in _IDS:
        _IDS[likelihood] = uuid.uuid4().hex
    return _IDS[likelihood]


def likelihood_to_config(likelihood: gpflow.likelihoods.Likelihood) -> dict:
    """A JSON-able description of the Gaussian, Bernoulli (probit), MultiClass (RobustMax) and
    Softmax likelihoods, with the likelihood's persistent ``id`` (:func:`likelihood_id`).

    :raises NotImplementedError: for other likelihoods (or subclasses), rather than saving a
        different one.
    """
    if type(likelihood) is gpflow.likelihoods.Gaussian:
        config = {
            "class_name": "Gaussian",
            "variance": float(likelihood.variance.numpy()),
            "dtype": likelihood.variance.dtype.name,
        }
    elif type(likelihood) is gpflow.likelihoods.Bernoulli:
        config = {"class_name": "Bernoulli"}
    elif type(likelihood) is gpflow.likelihoods.MultiClass and type(likelihood.invlink) is (
        gpflow.likelihoods.RobustMax
    ):
        epsilon = likelihood.invlink.epsilon
        config = {
            "class_name": "MultiClass",
            "num_classes": int(likelihood.num_classes),
            "epsilon": float(epsilon.numpy()),
            "dtype": epsilon.dtype.name,
        }
    elif type(likelihood) is gpflow.likelihoods.Softmax:
        config = {"class_name": "Softmax", "num_classes": int(likelihood.num_classes)}
    else:
        raise NotImplementedError(
            f"likelihood: {type(likelihood).__name__} cannot be saved; Gaussian, Bernoulli, "
            "MultiClass (RobustMax) and Softmax can"
        )
    config["id"] = likelihood_id(likelihood)
    return config


def likelihood_from_config(config: dict) -> gpflow.likelihoods.Likelihood:
    """A new likelihood from :func:`likelihood_to_config`, in the saved float type (trained
    values come from the weights).

    :raises ValueError: for an unknown ``class_name``.
    """
    if config["class_name"] == "Gaussian":
        with gpflow_float(config.get("dtype", gpflow.default_float().__name__)):
            return gpflow.likelihoods.Gaussian(variance=config["variance"])
    if config["class_name"] == "Bernoulli":
        return gpflow.likelihoods.Bernoulli()
    if config["class_name"] == "MultiClass":
        with gpflow_float(config.get("dtype", gpflow.default_float().__name__)):
            num_classes = int(config["num_classes"])
            invlink = gpflow.likelihoods.RobustMax(num_classes, epsilon=config["epsilon"])
            return gpflow.likelihoods.MultiClass(num_classes, invlink=invlink)
    if config["class_name"] == "Softmax":
        return gpflow.likelihoods.Softmax(int(config["num_classes"]))
    raise ValueError(f"likelihood: unknown class_name {config['class_name']!r}")


def shared_likelihood_from_config(config: dict) -> gpflow.likelihoods.Likelihood:
    """The likelihood that :meth:`TrainableLikelihood.from_config` last rebuilt under
    ``config["id"]`` (loading a model rebuilds its layers before its compiled loss), else a
    new one from :func:`likelihood_from_config`.

    :raises ValueError: if the registered likelihood is of another class than ``config``
        describes.
    """
    saved_id: Optional[str] = config.get("id")
    registered = None if saved_id is None else _LOADED.get(saved_id)
    if registered is None:
        return likelihood_from_config(config)
    if type(registered).__name__ != config["class_name"]:
        raise ValueError(
            f"likelihood: id {saved_id!r} belongs to a {type(registered).__name__} likelihood, "
            f"the config describes a {config['class_name']}"
        )
    return registered
