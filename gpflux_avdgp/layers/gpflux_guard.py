"""A GPflux ``GPLayer`` placed right after one of our GP layers fails at build with one line
that says to wrap it in :class:`~gpflux_avdgp.SigmaPointGPLayer`.

Our GP layers output a packed mixture ``[B, S, 2 D + 1]``; a GPflux ``GPLayer`` reads
``[B, D]``. Unwrapped, it used to fail deep inside GPflow's kernel code with a 60-line shape
error that never names the fix. A ``GPLayer`` is never given a rank-3 input by GPflux itself,
so importing this package gives ``gpflux.layers.GPLayer`` a ``build`` that refuses rank-3
inputs and otherwise does what Keras' default ``build`` does. This is the package's only
change to another library's class; :func:`install` is idempotent and leaves a ``build`` that
GPflux defines itself untouched.
"""

from __future__ import annotations

import gpflux
import tensorflow as tf
from gpflow.keras import tf_keras

__all__ = ["install"]


def _build_refusing_packed_mixtures(self, input_shape) -> None:
    shape = tf.TensorShape(input_shape) if not isinstance(input_shape, (list, dict)) else None
    if shape is not None and shape.rank == 3:
        raise ValueError(
            f"{self.name}: a GPflux GPLayer reads [batch, features], got the packed mixture "
            f"{shape} of a GP layer before it; wrap it: gpflux_avdgp.SigmaPointGPLayer(gp_layer)"
        )
    tf_keras.layers.Layer.build(self, input_shape)


_build_refusing_packed_mixtures._gpflux_avdgp_guard = True


def install() -> None:
    """Give ``gpflux.layers.GPLayer`` the checking ``build`` (once; only if GPflux has none)."""
    layer_class = gpflux.layers.GPLayer
    if "build" not in layer_class.__dict__:
        layer_class.build = _build_refusing_packed_mixtures
