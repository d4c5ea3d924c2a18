"""Sigma-point propagation through a GPflux ``GPLayer`` (global inducing points).

The wrapped ``GPLayer`` is saved by structure (:mod:`.gpflux_config`): its config names the
kernel, inducing variable and mean function and their shapes, ``from_config`` rebuilds it with
placeholder values, and the trained values come back with the weights (``.keras`` format:
:class:`~gpflux_avdgp.layers.module_state.GPflowModuleState`; SavedModel: the checkpoint's
object graph).
"""

from __future__ import annotations

from typing import Optional

import gpflux
import tensorflow as tf
from gpflow.keras import tf_keras

from ..kernels import check_kernel_width
from ..propagation import Propagated, PropagationRule
from .base import MixtureLayer, translate_legacy_points
from .gpflux_config import gp_layer_from_config, gp_layer_modules, gp_layer_to_config

__all__ = ["SigmaPointGPLayer"]

# The GPflux serialiser (.gpflux_config) is imported where a wrapped layer is saved or
# loaded, so ``import gpflux_avdgp`` does not read it.


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
    :param num_train_samples: see :class:`~gpflux_avdgp.layers.base.MixtureLayer`.
    :param seed: seed for sigma-point initialisation and Monte Carlo draws.
    """

    def __init__(
        self,
        gp_layer: gpflux.layers.GPLayer,
        *,
        rule: str | PropagationRule = PropagationRule.AR2P,
        num_points: Optional[int] = None,
        num_train_samples: Optional[int] = None,
        seed: Optional[int] = None,
        **kwargs,
    ):
        if not isinstance(gp_layer, gpflux.layers.GPLayer):
            raise TypeError(f"gp_layer: expected a gpflux.layers.GPLayer, got {gp_layer!r}")
        super().__init__(
            gp_layer.num_latent_gps,
            rule=rule,
            num_points=num_points,
            num_train_samples=num_train_samples,
            seed=seed,
            **kwargs,
        )
        self.gp_layer = gp_layer

    def build(self, input_shape: tf.TensorShape) -> None:
        super().build(input_shape)  # sets input_dim D from the mixture's width 2 D + 1
        inducing = self.gp_layer.inducing_variable
        parts = getattr(inducing, "inducing_variables", [inducing])
        widths = {int(part.Z.shape[-1]) for part in parts if hasattr(part, "Z")}
        try:
            check_kernel_width(self.gp_layer.kernel, self.input_dim)
            if widths - {self.input_dim}:
                raise ValueError(
                    f"expected inducing points of width {self.input_dim}, got {widths}"
                )
        except ValueError as error:
            raise ValueError(f"{self.name}: the wrapped GPLayer: {error}") from None

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

    def _gpflow_modules(self) -> list[tf.Module]:
        """The wrapped layer's ``q_mu``, ``q_sqrt``, kernel, inducing variable and mean
        function, in this order (the ``.keras`` weights store relies on it)."""
        return gp_layer_modules(self.gp_layer)

    def get_config(self) -> dict:
        """The base config plus ``gp_layer``, the wrapped layer's structure.

        :raises NotImplementedError: if the wrapped layer holds anything
            :func:`~.gpflux_config.gp_layer_to_config` cannot describe (another kernel,
            inducing variable or mean function, a prior, a non-default transform or
            ``active_dims``).
        """
        config = super().get_config()
        config["gp_layer"] = gp_layer_to_config(self.gp_layer, owner=self.name)
        return config

    @classmethod
    def from_config(cls, config: dict) -> "SigmaPointGPLayer":
        """Rebuild the layer; the wrapped layer gets placeholder values until the weights load."""
        config = translate_legacy_points(config)
        units = config.pop("units", None)  # the wrapped layer's num_latent_gps
        config["gp_layer"] = gp_layer_from_config(config["gp_layer"])
        if units is not None and units != config["gp_layer"].num_latent_gps:
            raise ValueError(
                f"units: expected {config['gp_layer'].num_latent_gps} (the wrapped layer's "
                f"num_latent_gps), got {units}"
            )
        return cls(**config)
