"""Layers that turn a GP layer's packed mixture into a plain tensor, so that any Keras layer can
follow a GP layer (a GP layer as a feature extractor inside a larger Keras model).

A GP layer's output is a packed mixture ``[B, S, 2 D + 1]`` (component means, variances and
log weights; :class:`~gpflux_avdgp.GaussianMixture`), which only the package's layers and
loss read. :class:`MixtureMean` gives its mean ``[B, D]`` (and, on request, its total
variance); :class:`MixtureSample` one draw ``[B, D]`` per row. Both compute in GPflow's float
type (``gpflow.default_float()``, like the GP layers); a float32 Keras layer after them casts
their output as Keras does for any input.
"""

from __future__ import annotations

from typing import Optional

import gpflow
import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from ..core.mixture import GaussianMixture, mixture_moments, mixture_width_to_dim
from ..core.random import stateless_standard_normal
from .base import add_draw_counter

__all__ = ["MixtureMean", "MixtureSample"]


def _check_packed(name: str, input_shape: tf.TensorShape) -> int:
    """``D`` of a packed mixture input ``[B, S, 2 D + 1]``, or a one-line ``ValueError``."""
    input_shape = tf.TensorShape(input_shape)
    width = input_shape[-1] if input_shape.rank else None
    if input_shape.rank != 3 or width is None or width < 3 or (width - 1) % 2:
        raise ValueError(
            f"{name}: expected the packed mixture [batch, components, 2 * D + 1] of a GP layer, "
            f"got shape {input_shape}"
        )
    return mixture_width_to_dim(int(width))


@tf_keras.utils.register_keras_serializable(package="gpflux_avdgp")
class MixtureMean(tf_keras.layers.Layer):
    """The mean ``sum_s w_s m_s`` ``[B, D]`` of a GP layer's packed mixture.

    Deterministic and differentiable in every component parameter. With
    ``with_variance=True`` the output is ``[B, 2 D]``: the mean, then the total variance
    ``sum_s w_s (v_s + (m_s - mean)^2)``, so the next layer can use the GP's uncertainty.
    Both are moments of the latent ``f``: the likelihood's noise is not in them (an
    :class:`~gpflux_avdgp.AVDGPModel`'s ``predict`` gives the mean and std of ``y``).

    Example: a GP layer as a feature extractor, trained with a Keras loss::

        model = tf_keras.Sequential([
            tf_keras.Input((5,)),
            AmortizedGPLayer(3, 4, num_data),
            MixtureMean(),
            tf_keras.layers.Dense(1),
        ])
        model.compile("adam", "mse")  # the GP layer's KL is added by the layer itself

    :param with_variance: also return the total variance.
    """

    #: Reads a packed mixture.
    reads_mixture: bool = True

    def __init__(self, *, with_variance: bool = False, **kwargs):
        if not isinstance(with_variance, bool):
            raise TypeError(f"with_variance: expected True or False, got {with_variance!r}")
        kwargs.setdefault("dtype", gpflow.default_float())  # the GP layers' float type
        super().__init__(**kwargs)
        self.with_variance = with_variance

    def build(self, input_shape: tf.TensorShape) -> None:
        _check_packed(self.name, input_shape)  # one line for anything but a packed mixture
        super().build(input_shape)

    def call(self, inputs: tf.Tensor) -> tf.Tensor:
        """:returns: the mean ``[B, D]`` (or mean and variance ``[B, 2 D]``) of ``inputs``."""
        mixture = GaussianMixture.unpack(inputs)
        mean, variance = mixture_moments(mixture.weights, mixture.means, mixture.variances)
        return tf.concat([mean, variance], axis=-1) if self.with_variance else mean

    def compute_output_shape(self, input_shape: tf.TensorShape) -> tf.TensorShape:
        """``[B, D]``, or ``[B, 2 D]`` with the variance."""
        dim = _check_packed(self.name, input_shape)
        return tf.TensorShape([input_shape[0], 2 * dim if self.with_variance else dim])

    def get_config(self) -> dict:
        return {**super().get_config(), "with_variance": self.with_variance}


@tf_keras.utils.register_keras_serializable(package="gpflux_avdgp")
class MixtureSample(tf_keras.layers.Layer):
    """One draw ``[B, D]`` per row from a GP layer's packed mixture.

    Per row a component ``s`` is drawn with probability ``w_s``, then ``f = m_s + sqrt(v_s) e``
    with ``e ~ N(0, I)``: reparameterised, so gradients reach the component means and
    variances (not the weights: the component choice is discrete). The draws are stateless,
    keyed by ``(seed, draw counter)``: the counter (a non-trainable weight, saved with the
    model) advances at every training call, so training sees fresh draws and a run restored
    from a checkpoint draws the same numbers; calls with ``training=False`` (``predict``) use
    their own key and do not advance it, so predictions are repeatable (until the next
    training step) and survive saving and loading.

    :param seed: key of the draws; ``None`` draws one from NumPy's global generator (saved in
        the config, like the GP layers' ``noise_seed``).
    """

    #: Reads a packed mixture.
    reads_mixture: bool = True

    def __init__(self, *, seed: Optional[int] = None, **kwargs):
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise TypeError(f"seed: expected an int or None, got {seed!r}")
        kwargs.setdefault("dtype", gpflow.default_float())  # the GP layers' float type
        super().__init__(**kwargs)
        self.seed = int(np.random.randint(2**31 - 1)) if seed is None else int(seed)

    def build(self, input_shape: tf.TensorShape) -> None:
        _check_packed(self.name, input_shape)  # one line for anything but a packed mixture
        self.draw_counter = add_draw_counter(self)
        super().build(input_shape)

    @tf.autograph.experimental.do_not_convert  # no control flow on tensors: traced as written
    def call(self, inputs: tf.Tensor, training: Optional[bool] = None) -> tf.Tensor:
        """:returns: one draw ``[B, D]`` per row of ``inputs``."""
        mixture = GaussianMixture.unpack(inputs)
        key = tf.stack([tf.constant(self.seed, tf.int64), self.draw_counter.read_value()])
        stream = 0 if training else 2  # training and prediction never share a key
        if training:
            self.draw_counter.assign_add(1)
        component_key = tf.random.experimental.stateless_fold_in(key, stream)
        noise_key = tf.random.experimental.stateless_fold_in(key, stream + 1)
        chosen = tf.random.stateless_categorical(
            mixture.log_weights, 1, seed=component_key, dtype=tf.int32
        )  # [B, 1]
        mean = tf.gather(mixture.means, chosen, axis=1, batch_dims=1)[:, 0]  # [B, D]
        variance = tf.gather(mixture.variances, chosen, axis=1, batch_dims=1)[:, 0]  # [B, D]
        noise = stateless_standard_normal(tf.shape(mean), noise_key, mean.dtype)  # [B, D]
        return mean + tf.sqrt(variance) * noise

    def compute_output_shape(self, input_shape: tf.TensorShape) -> tf.TensorShape:
        """``[B, D]``."""
        return tf.TensorShape([input_shape[0], _check_packed(self.name, input_shape)])

    def get_config(self) -> dict:
        return {**super().get_config(), "seed": self.seed}
