"""GPflux's own model class with amortized layers: a ``gpflux.models.DeepGP`` whose likelihood
layer reads a packed mixture (:class:`~gpflux_avdgp.layers.MixtureLikelihoodLayer`).
:func:`as_deep_gp` builds it::

    deep_gp = gpflux_avdgp.as_deep_gp([layer_1, layer_2], gpflow.likelihoods.Gaussian())
    training_model = deep_gp.as_training_model()
    training_model.compile(tf_keras.optimizers.Adam(0.01))
    training_model.fit({"inputs": x, "targets": y}, epochs=20)
    outputs = deep_gp.as_prediction_model()(x)  # outputs.y_mean, outputs.y_var

``gpflux.models.DeepGP(f_layers, MixtureLikelihoodLayer(likelihood))`` is the same model; with
GPflux's own ``LikelihoodLayer`` the ``DeepGP`` refuses in one line naming :func:`as_deep_gp`.
For a ``Sequential``, GPflux's :class:`gpflux.losses.LikelihoodLoss` reads a Gaussian, not a
mixture, and refuses ours: compile with :class:`~gpflux_avdgp.AVDGPLoss` (the same ELBO data
term on the mixture, plus the predictive objective).
"""

from __future__ import annotations

from typing import Optional, Sequence

import gpflow
import gpflux
from gpflow.keras import tf_keras

from ..layers.mixture_likelihood_layer import MixtureLikelihoodLayer
from ..rules import Objective

__all__ = ["as_deep_gp"]


def as_deep_gp(
    f_layers: Sequence[tf_keras.layers.Layer],
    likelihood: gpflow.likelihoods.Likelihood,
    *,
    objective: str | Objective = Objective.ELBO,
    input_dim: Optional[int] = None,
    target_dim: Optional[int] = None,
    num_data: Optional[int] = None,
) -> gpflux.models.DeepGP:
    """A ``gpflux.models.DeepGP`` of ``f_layers`` (ours, GPflux ``GPLayer`` s in front of them
    or wrapped in :class:`~gpflux_avdgp.SigmaPointGPLayer`) ending in a
    :class:`MixtureLikelihoodLayer`.

    :param input_dim: the input width; default: the first layer's ``input_dim`` if it has one
        (our layers have it once built), else required.
    :param target_dim: the target width; default: the last layer's ``units``.
    :param num_data: default: the layers' ``num_data`` (GPflux checks that they agree).
    """
    f_layers = list(f_layers)
    if not f_layers:
        raise ValueError("f_layers: expected at least one layer, got none")
    if input_dim is None:
        input_dim = getattr(f_layers[0], "input_dim", None)
    if input_dim is None:
        raise ValueError(
            "input_dim: the first layer has no known input width; give as_deep_gp(..., "
            "input_dim=D)"
        )
    if target_dim is None:
        target_dim = getattr(f_layers[-1], "units", None)
    return gpflux.models.DeepGP(
        f_layers,
        MixtureLikelihoodLayer(likelihood, objective=objective),
        input_dim=int(input_dim),
        target_dim=target_dim,
        num_data=num_data,
    )
