"""A layer's covariances and linear mean function at points shared by every datapoint.

Under AR2P a layer whose input is one Gaussian per datapoint (the first layer's output)
evaluates its GP at ``F[b, s] = c_b + xi_s * sigma_b``: the input's mean ``c`` ``[B, D]`` and
standard deviation ``sigma`` ``[B, D]``, and the sigma points ``xi`` ``[S, D]`` shared by every
datapoint (common draws at prediction have the same form). Forming ``F`` ``[B, S, D]`` and
then ``|z - F|^2``, ``m(F)`` and their gradients makes a dozen elementwise passes over
``[B, S, D]``: the largest cost of a CPU training step. This module computes the same numbers
from the factors, as matrix products with ``xi^T`` ``[D, S]`` and nothing of size ``B S D``,
forward or backward.
"""

from __future__ import annotations

from typing import Optional

import gpflow
import tensorflow as tf
from check_shapes import check_shapes

from .covariances import (
    has_gpflow_scale,
    lengthscale_scaling,
    prior_variances,
    reads_all_columns,
    squared_distances,
)

__all__ = ["mean_at_shared_points", "shared_point_covariances", "shared_points_available"]


def shared_points_available(kernel: gpflow.kernels.Kernel) -> bool:
    """Whether :func:`shared_point_covariances` takes ``kernel``: isotropic stationary
    kernels on all input columns with GPflow's own scaling (others use ``F`` formed)."""
    return (
        isinstance(kernel, gpflow.kernels.IsotropicStationary)
        and has_gpflow_scale(kernel)  # linear in the points: the factors can be scaled
        and reads_all_columns(kernel)
    )


@check_shapes(
    "inducing: [B, M, D]",
    "centres: [B, D]",
    "scales: [B, D]",
    "points: [S, D]",
    "return[0]: [B, M, M]",
    "return[1]: [B, M, S]",
    "return[2]: [B, S]",
)
def shared_point_covariances(
    kernel: gpflow.kernels.IsotropicStationary,
    inducing: tf.Tensor,
    centres: tf.Tensor,
    scales: tf.Tensor,
    points: tf.Tensor,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """:func:`~gpflux_avdgp.core.covariances.pointwise_covariances` at
    ``F[b, s] = centres[b] + points[s] * scales[b]``, from the factors.

    With ``z`` the inducing points and ``c`` the centres, both centred on ``z``'s mean (as in
    :func:`~gpflux_avdgp.core.covariances.gram_against`): ``z.F_s = z.c + (z * scales).p_s``
    and ``|F_s|^2 = |c|^2 + 2 (c * scales).p_s + scales^2.p_s^2``.

    :returns: ``Kuu`` ``[B, M, M]`` (no jitter), ``Kuf`` ``[B, M, S]``, ``kff`` ``[B, S]``.
    """
    (inducing, centres, scales), factor = lengthscale_scaling(kernel, inducing, centres, scales)
    centre = tf.stop_gradient(tf.reduce_mean(inducing, axis=-2, keepdims=True))  # [B, 1, D]
    inducing, centres = inducing - centre, centres - centre[:, 0]
    shape = tf.shape(inducing)  # [B, M, D]
    along_points = tf.linalg.matmul(
        tf.reshape(inducing * scales[:, None, :], [-1, shape[2]]), points, transpose_b=True
    )  # (z * scales).p_s as one [B M, D] x [D, S] product: no [B, S, D] gradient either
    cross = tf.linalg.matmul(inducing, centres[..., None]) + tf.reshape(
        along_points, [shape[0], shape[1], -1]
    )  # z.F_s, [B, M, S]
    point_norms = tf.reduce_sum(tf.square(centres), axis=-1, keepdims=True) + tf.linalg.matmul(
        tf.concat([2.0 * centres * scales, tf.square(scales)], axis=-1),
        tf.concat([points, tf.square(points)], axis=-1),
        transpose_b=True,
    )  # |F_s|^2, [B, S]
    inducing_norms = tf.reduce_sum(tf.square(inducing), axis=-1)  # [B, M]
    kuu_r2 = squared_distances(inducing, inducing, inducing_norms)  # [B, M, M]
    kuf_r2 = tf.maximum(inducing_norms[..., None] + point_norms[:, None, :] - 2.0 * cross, 0.0)
    r2 = tf.concat([kuu_r2, kuf_r2], axis=-1)  # [B, M, M + S]
    r2 = r2 if factor is None else factor * r2
    kuu, kuf = tf.split(kernel.K_r2(r2), [shape[1], tf.shape(points)[0]], axis=-1)
    return kuu, kuf, prior_variances(kernel, points) * tf.ones_like(point_norms)


@check_shapes(
    "centres: [B, D]",
    "scales: [B, D]",
    "points: [S, D]",
    "return: [B, S, Q]",
)
def mean_at_shared_points(
    mean_function: Optional[gpflow.mean_functions.MeanFunction],
    centres: tf.Tensor,
    scales: tf.Tensor,
    points: tf.Tensor,
) -> Optional[tf.Tensor]:
    """``m(F)`` ``[B, S, Q]`` at ``F[b, s] = c_b + p_s * sigma_b`` (``None`` without a mean
    function). GPflow's ``Linear`` ``F A + b`` as ``c_b A + b + p_s (sigma_b * A)``, one
    ``[S, D] x [D, B Q]`` product; any other mean function on ``F`` formed."""
    if mean_function is None:
        return None
    if type(mean_function) is not gpflow.mean_functions.Linear:
        return mean_function(centres[:, None, :] + points * scales[:, None, :])
    weights = tf.convert_to_tensor(mean_function.A)  # [D, Q]
    per_datapoint = tf.transpose(scales[:, :, None] * weights, [1, 0, 2])  # sigma_b * A, [D, B, Q]
    along_points = tf.linalg.matmul(points, tf.reshape(per_datapoint, [tf.shape(weights)[0], -1]))
    along_points = tf.reshape(along_points, [tf.shape(points)[0], -1, tf.shape(weights)[1]])
    at_centres = tf.linalg.matmul(centres, weights) + mean_function.b  # [B, Q]
    return at_centres[:, None, :] + tf.transpose(along_points, [1, 0, 2])  # [B, S, Q]
