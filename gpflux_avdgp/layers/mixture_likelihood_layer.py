"""GPflux's ``LikelihoodLayer`` for a packed mixture: the likelihood layer of a
``gpflux.models.DeepGP`` whose last GP layer is ours (:func:`gpflux_avdgp.as_deep_gp` builds
one).

GPflux's :class:`gpflux.layers.LikelihoodLayer` reads one Gaussian ``q(f)`` per row (a
``MultivariateNormalDiag``); a deep GP of ours ends in a Gaussian *mixture* per row, which no
single Gaussian describes. :class:`MixtureLikelihoodLayer` has the same role (adds the data
term as a layer loss while training; returns :class:`LikelihoodOutputs` with the predictive
mean and variance of ``f`` and ``y`` otherwise), computed on the mixture by the predictive
module.
"""

from __future__ import annotations

from typing import Optional

import gpflow
import gpflux
import tensorflow as tf
from gpflow.keras import tf_keras
from gpflux.layers.likelihood_layer import LikelihoodOutputs

from ..checks import check_choice
from ..core.mixture import GaussianMixture, mixture_moments
from ..gpflow_config import likelihood_from_config, likelihood_to_config
from ..predictive import PredictiveDistribution
from ..rules import Objective
from .module_state import GPflowModuleState

__all__ = ["MixtureLikelihoodLayer"]


@tf_keras.utils.register_keras_serializable(package="gpflux_avdgp")
class MixtureLikelihoodLayer(GPflowModuleState, gpflux.layers.LikelihoodLayer):
    """GPflux's ``LikelihoodLayer`` for a packed mixture ``[B, S, 2 Q + 1]``.

    Training (``training=True``): adds the mean over the batch of
    :class:`~gpflux_avdgp.AVDGPLoss`'s per-datapoint loss (``objective``: the ELBO's expected
    log likelihood, or the predictive objective of AR2PP) as a layer loss. Otherwise: the
    mixture's mean and total variance of ``f`` and of ``y``, each ``[B, Q]``.

    Saving: ``get_config`` describes the likelihood and the objective, and the likelihood's
    parameters are saved with the layer's weights, so an ``as_deep_gp`` training model saves
    to ``.keras`` like any Keras model.

    :param likelihood: the GPflow likelihood (trained with the model: the layer tracks it).
    :param objective: ``"elbo"`` (default) or ``"predictive"``.
    :param name: the layer's name (default: Keras').
    """

    #: Reads a packed mixture.
    reads_mixture: bool = True

    def __init__(
        self,
        likelihood: gpflow.likelihoods.Likelihood,
        *,
        objective: str | Objective = Objective.ELBO,
        name: Optional[str] = None,
    ):
        if not isinstance(likelihood, gpflow.likelihoods.Likelihood):
            raise TypeError(f"likelihood: expected a GPflow likelihood, got {likelihood!r}")
        super().__init__(likelihood)  # GPflux's layer takes the likelihood only
        if name is not None:
            self._name = name
        self.objective = check_choice("objective", objective, Objective)

    def _gpflow_modules(self) -> list[tf.Module]:
        return [self.likelihood]

    def get_config(self) -> dict:
        """The layer's name, likelihood and objective."""
        return {
            "name": self.name,
            "likelihood": likelihood_to_config(self.likelihood),
            "objective": self.objective.value,
        }

    @classmethod
    def from_config(cls, config: dict) -> "MixtureLikelihoodLayer":
        """Rebuild the layer with a new likelihood (its trained values come with the weights)."""
        config = dict(config)
        config["likelihood"] = likelihood_from_config(config["likelihood"])
        return cls(**config)

    @tf.autograph.experimental.do_not_convert  # no control flow on tensors: traced as written
    def call(
        self, inputs: tf.Tensor, targets: Optional[tf.Tensor] = None, training: bool = None
    ) -> LikelihoodOutputs:
        """Add the data term (training) and return the moments of ``f`` (and, not training,
        of ``y``), each ``[B, Q]``, as GPflux's ``LikelihoodOutputs``."""
        mixture = GaussianMixture.unpack(inputs)
        f_mean, f_var = mixture_moments(mixture.weights, mixture.means, mixture.variances)
        if training:
            if targets is None:
                raise ValueError(f"{self.name}: training needs the targets")
            distribution = PredictiveDistribution(self.likelihood, mixture, self.objective)
            loss = -tf.reduce_mean(distribution.objective_value(targets))
            y_mean = y_var = None
        else:
            loss = tf.zeros([], inputs.dtype)
            y_mean, y_var = PredictiveDistribution(self.likelihood, mixture).moments()
        self.add_loss(loss)
        return LikelihoodOutputs(f_mean, f_var, y_mean, y_var)
