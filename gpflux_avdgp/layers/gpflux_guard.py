"""GPflux's classes given our packed mixture fail with one line that names what to use.

Our GP layers output a packed mixture ``[B, S, 2 D + 1]``. GPflux classes cannot read it and
used to fail deep inside GPflow or TensorFlow, never naming the fix:

- ``gpflux.layers.GPLayer`` right after one of our layers (it reads ``[B, D]``): a 60-line
  shape error in GPflow's kernel code. It gets a ``build`` that refuses rank-3 inputs
  (GPflux never gives it one) and names :class:`~gpflux_avdgp.SigmaPointGPLayer`.
- ``gpflux.layers.LikelihoodLayer`` (``DeepGP``'s last layer; it reads a Gaussian ``q(f)``):
  a bare ``AssertionError``. It gets a ``build`` that refuses rank-3 inputs and names
  :func:`~gpflux_avdgp.as_deep_gp` (whose :class:`~gpflux_avdgp.deep_gp.MixtureLikelihoodLayer`
  defines its own ``build``).

``gpflux.losses.LikelihoodLoss`` on a packed mixture is not refused but computed, by
:mod:`gpflux_avdgp.deep_gp` (which may import the objectives).

Every check only turns an input that would fail anyway into a clear error; otherwise the
``build`` does what Keras' default does. :func:`install`, run when the package is imported, is
idempotent. With ``deep_gp``'s ``LikelihoodLoss.call`` these are the package's only changes to
another library's classes.
"""

from __future__ import annotations

import gpflux
import tensorflow as tf
from gpflow.keras import tf_keras

__all__ = ["install"]


def _build_refusing_rank_3(message: str):
    """A layer ``build`` that raises ``ValueError(f"{layer.name}: {message}")`` (``message``
    may use ``{shape}``) for a rank-3 input and otherwise does what Keras' default does."""

    def build(self, input_shape) -> None:
        shape = tf.TensorShape(input_shape) if not isinstance(input_shape, (list, dict)) else None
        if shape is not None and shape.rank == 3:
            raise ValueError(f"{self.name}: " + message.format(shape=shape))
        tf_keras.layers.Layer.build(self, input_shape)

    build._gpflux_avdgp_guard = True
    return build


_GP_LAYER_BUILD = _build_refusing_rank_3(
    "a GPflux GPLayer reads [batch, features], got the packed mixture {shape} of a GP layer "
    "before it; wrap it: gpflux_avdgp.SigmaPointGPLayer(gp_layer)"
)
_LIKELIHOOD_LAYER_BUILD = _build_refusing_rank_3(
    "GPflux's LikelihoodLayer reads a Gaussian q(f) [batch, outputs] (a GPLayer's output), got "
    "the packed mixture {shape} of a gpflux_avdgp layer; build the DeepGP with "
    "gpflux_avdgp.as_deep_gp(f_layers, likelihood) (its likelihood layer is "
    "gpflux_avdgp.deep_gp.MixtureLikelihoodLayer)"
)


def install() -> None:
    """Add the two checks (once; a ``build`` only where GPflux defines none)."""
    for layer_class, build in (
        (gpflux.layers.GPLayer, _GP_LAYER_BUILD),
        (gpflux.layers.LikelihoodLayer, _LIKELIHOOD_LAYER_BUILD),
    ):
        if "build" not in layer_class.__dict__:
            layer_class.build = build
