"""Sigma-point propagation through a GPflux ``GPLayer`` (global inducing points)."""

from __future__ import annotations

from typing import Optional

import gpflux
import tensorflow as tf
from gpflow.keras import tf_keras

from ..propagation import Propagated, PropagationRule
from .base import MixtureLayer

__all__ = ["SigmaPointGPLayer"]


@tf_keras.utils.register_keras_serializable(package="gpflux_avdgp")
class SigmaPointGPLayer(MixtureLayer):
    """Wrap a GPflux ``GPLayer`` so that it reads and writes packed mixtures.

    The wrapped layer is evaluated at every component's locations ``F`` ``[B, S, D]`` given by
    the amortization rule (its inducing points are global, so the amortization input is not
    used and AR1 behaves like AR2). Stacking these layers with ``rule="ar2p"`` and training
    with the predictive objective is a deep sigma point process (DSPP); they also mix freely
    with :class:`~gpflux_avdgp.AmortizedGPLayer`. A GPflux ``GPLayer`` used unwrapped *in front
    of* an amortized layer also works: its sample ``[B, Q]`` is read as a deterministic input.

    The layer adds ``(KL[q(u) || p(u)] - log p(kernel hyperparameters)) / num_data`` of the
    wrapped layer with ``add_loss``, like GPflux's own ``GPLayer`` (the log prior is zero for
    parameters without priors).

    :param gp_layer: the GPflux layer; its ``num_data`` scales the KL.
    :param rule: see :class:`~gpflux_avdgp.layers.base.MixtureLayer`.
    :param num_points: see :class:`~gpflux_avdgp.layers.base.MixtureLayer`.
    :param num_predict_points: see :class:`~gpflux_avdgp.layers.base.MixtureLayer`.
    :param seed: seed for sigma-point initialisation and Monte Carlo draws.
    """

    def __init__(
        self,
        gp_layer: gpflux.layers.GPLayer,
        *,
        rule: str | PropagationRule = PropagationRule.AR2P,
        num_points: Optional[int] = None,
        num_predict_points: Optional[int] = None,
        seed: Optional[int] = None,
        **kwargs,
    ):
        if not isinstance(gp_layer, gpflux.layers.GPLayer):
            raise ValueError(f"gp_layer: expected a gpflux.layers.GPLayer, got {gp_layer!r}")
        super().__init__(
            gp_layer.num_latent_gps,
            rule=rule,
            num_points=num_points,
            num_predict_points=num_predict_points,
            seed=seed,
            **kwargs,
        )
        self.gp_layer = gp_layer

    def _components(
        self, propagated: Propagated, training: bool
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        locations = propagated.locations  # [B, S, D]
        shape = tf.shape(locations)
        flat = tf.reshape(locations, [-1, self.input_dim])  # [B S, D]
        mean, var = self.gp_layer.predict(flat, full_cov=False, full_output_cov=False)
        out_shape = tf.stack([shape[0], shape[1], self.units])
        log_prior = tf.add_n(
            [tf.zeros([], mean.dtype)]
            + [p.log_prior_density() for p in self.gp_layer.kernel.trainable_parameters]
        )
        loss_term = (self.gp_layer.prior_kl() - log_prior) / tf.cast(
            self.gp_layer.num_data, mean.dtype
        )
        return tf.reshape(mean, out_shape), tf.reshape(var, out_shape), loss_term

    def get_config(self) -> dict:
        raise NotImplementedError(
            f"{self.name}: a wrapped GPflux GPLayer cannot be serialised to a config yet; "
            "save its weights with model.save_weights"
        )
