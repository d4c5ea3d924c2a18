"""The one value that flows between layers: a per-datapoint diagonal Gaussian mixture.

A ``tf_keras.Sequential`` hands exactly one tensor from layer to layer, and Keras assumes the
batch is the leading axis (``model.predict`` concatenates along it, ``tf.distribute`` splits
along it). Every amortized or sigma-point layer therefore emits a **packed mixture tensor**::

    packed[b, s, :]  = [ means[b, s, :D] | variances[b, s, :D] | log_weights[b, s] ]
    packed.shape     = [B, S, 2 * D + 1]

``S`` is the number of mixture components (sigma points or Monte Carlo samples) and ``D`` the
output dimension of the layer. A plain rank-2 tensor ``[B, D]`` (data, a ``Dense`` feature
extractor, a GPflux ``GPLayer`` sample) is read as a deterministic input: one component with
zero variance. :class:`GaussianMixture` is the decoded view; use :func:`to_mixture` to read any
layer input and :meth:`GaussianMixture.pack` to write a layer output. ``docs/design.md``
explains why this representation was chosen over tensor-coercible distributions and
extension types.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tensorflow as tf
from check_shapes import check_shapes

__all__ = ["GaussianMixture", "mixture_moments", "to_mixture", "mixture_width_to_dim"]


@check_shapes(
    "weights: [batch..., S]",
    "means: [batch..., S, D]",
    "variances: [batch..., S, D]",
    "return[0]: [batch..., D]",
    "return[1]: [batch..., D]",
)
def mixture_moments(
    weights: tf.Tensor, means: tf.Tensor, variances: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor]:
    """Mean and total variance of per-row Gaussian mixtures (law of total variance).

    The variance is ``sum_s w_s (v_s + (m_s - mean)^2)``, which equals
    ``sum_s w_s (v_s + m_s^2) - mean^2`` but does not cancel catastrophically. The NumPy twin
    for scoring is :func:`avdgp.metrics.common.mixture_moments`.

    :param weights: ``[N, S]`` mixture weights (summing to one over ``S``).
    :param means: ``[N, S, D]`` component means.
    :param variances: ``[N, S, D]`` component variances.
    :returns: ``mean [N, D]`` and ``variance [N, D]``.
    """
    mean = tf.reduce_sum(weights[..., None] * means, axis=-2)  # [N, D]
    centred = means - mean[..., None, :]  # [N, S, D]
    variance = tf.reduce_sum(weights[..., None] * (variances + centred**2), axis=-2)  # [N, D]
    return mean, variance


def mixture_width_to_dim(width: int) -> int:
    """Return the output dimension ``D`` of a packed mixture whose last axis is ``width``.

    :raises ValueError: if ``width`` is not of the form ``2 * D + 1`` with ``D >= 1``.
    """
    if width < 3 or (width - 1) % 2 != 0:
        raise ValueError(
            f"packed mixture: last axis must have width 2 * D + 1 (D >= 1), got {width}; "
            "a GP layer's output is a packed mixture: put MixtureMean or MixtureSample between "
            "it and a Keras layer, and read predictions with predict_mixture"
        )
    return (width - 1) // 2


@dataclass(frozen=True)
class GaussianMixture:
    """Decoded per-datapoint mixture ``sum_s w[b, s] N(means[b, s], diag(variances[b, s]))``.

    :param means: component means, ``[B, S, D]``.
    :param variances: component (marginal) variances, ``[B, S, D]``, non-negative.
    :param log_weights: log mixture weights, ``[B, S]``; ``logsumexp`` over ``S`` is 0.
    """

    means: tf.Tensor
    variances: tf.Tensor
    log_weights: tf.Tensor

    @classmethod
    def deterministic(cls, inputs: tf.Tensor) -> "GaussianMixture":
        """A point mass at ``inputs`` ``[B, D]``: one component, zero variance."""
        means = inputs[:, None, :]  # [B, 1, D]
        return cls(
            means=means,
            variances=tf.zeros_like(means),
            log_weights=tf.zeros_like(means[..., 0]),  # [B, 1]
        )

    @classmethod
    def unpack(cls, packed: tf.Tensor) -> "GaussianMixture":
        """Decode a packed tensor ``[B, S, 2 D + 1]`` (see module docstring)."""
        packed = tf.convert_to_tensor(packed)
        if packed.shape.rank != 3:
            raise ValueError(
                f"packed mixture: expected rank 3 [B, S, 2 * D + 1], got shape {packed.shape}"
            )
        dim = mixture_width_to_dim(int(packed.shape[-1]))
        # one split (its gradient: one concat), not three slices (three full-size copies)
        means, variances, log_weights = tf.split(packed, [dim, dim, 1], axis=-1)
        return cls(means=means, variances=variances, log_weights=tf.squeeze(log_weights, -1))

    def pack(self) -> tf.Tensor:
        """Encode as ``[B, S, 2 D + 1]`` for the next layer or the loss."""
        return tf.concat([self.means, self.variances, self.log_weights[..., None]], axis=-1)

    @property
    def dim(self) -> int:
        """Output dimension ``D``."""
        return int(self.means.shape[-1])

    @property
    def weights(self) -> tf.Tensor:
        """Mixture weights ``[B, S]``."""
        return tf.exp(self.log_weights)

    def mean(self) -> tf.Tensor:
        """Mixture mean ``sum_s w_s m_s``, ``[B, D]``."""
        return tf.reduce_sum(self.weights[..., None] * self.means, axis=-2)

    def variance(self) -> tf.Tensor:
        """Mixture variance (law of total variance, :func:`mixture_moments`), ``[B, D]``."""
        return mixture_moments(self.weights, self.means, self.variances)[1]


def to_mixture(inputs: tf.Tensor) -> GaussianMixture:
    """Read a layer input: rank 2 ``[B, D]`` is deterministic, rank 3 is a packed mixture.

    :raises ValueError: for any other rank.
    """
    inputs = tf.convert_to_tensor(inputs)
    rank = inputs.shape.rank
    if rank == 2:
        return GaussianMixture.deterministic(inputs)
    if rank == 3:
        return GaussianMixture.unpack(inputs)
    raise ValueError(
        "layer input: expected a rank-2 tensor [batch, features] or a rank-3 packed mixture "
        f"[batch, components, 2 * D + 1], got shape {inputs.shape}"
    )


def unpack_numpy(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NumPy twin of :meth:`GaussianMixture.unpack`: ``(means, variances, log_weights)``."""
    packed = np.asarray(packed)
    if packed.ndim != 3:
        raise ValueError(f"packed mixture: expected rank 3, got shape {packed.shape}")
    dim = mixture_width_to_dim(packed.shape[-1])
    return packed[..., :dim], packed[..., dim : 2 * dim], packed[..., 2 * dim]
