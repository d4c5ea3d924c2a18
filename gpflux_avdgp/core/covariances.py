"""Per-datapoint covariances: each datapoint has its own inducing points.

GPflow's ``kernel(Z, X)`` with a batched ``Z`` returns all pairs (``[B, M, B, P]``), which is
``O(B^2)`` memory. These functions never pair one datapoint's inducing points with another
datapoint's locations: for stationary kernels they form the scaled differences per row (for
``Kuf`` of isotropic kernels, squared distances from one batched matrix product) and call
``K_r2`` / ``K_d``; for any other kernel they evaluate ``kernel.K`` on the per-point
concatenation ``[Z_n; F_n]`` (``[N, M + P, D]``) and slice the blocks.
"""

from __future__ import annotations

import gpflow
import tensorflow as tf
from check_shapes import check_shapes

__all__ = ["pointwise_covariances"]


def _squared_distances_by_products(left: tf.Tensor, right: tf.Tensor) -> tf.Tensor:
    """``|l_i - r_j|^2`` as ``|l_i|^2 + |r_j|^2 - 2 l_i . r_j``, clipped at 0: ``[..., I, J]``.

    One batched matrix product instead of the ``[..., I, J, D]`` differences: about 2.5x
    faster forward and backward for ``Kuf`` (``M = 4``, ``P = 32``, ``D = 16``, measured on
    CPU). The cancellation error is ``eps |l| |r|``, harmless for ``Kuf``; ``Kuu``, which is
    factorised, keeps the exact differences.
    """
    left_norms = tf.reduce_sum(tf.square(left), axis=-1)[..., :, None]  # [..., I, 1]
    right_norms = tf.reduce_sum(tf.square(right), axis=-1)[..., None, :]  # [..., 1, J]
    products = tf.linalg.matmul(left, right, transpose_b=True)  # [..., I, J]
    return tf.maximum(left_norms + right_norms - 2.0 * products, 0.0)


def _stationary_from_scaled(
    kernel: gpflow.kernels.Stationary, left: tf.Tensor, right: tf.Tensor
) -> tf.Tensor:
    """``k(left[..., i, :], right[..., j, :])`` for already-scaled inputs: ``[..., I, J]``."""
    diff = left[..., :, None, :] - right[..., None, :, :]  # [..., I, J, D]
    if isinstance(kernel, gpflow.kernels.IsotropicStationary):
        return kernel.K_r2(tf.reduce_sum(tf.square(diff), axis=-1))
    return kernel.K_d(diff)


@check_shapes(
    "inducing: [batch..., M, D]",
    "locations: [batch..., P, D]",
    "return[0]: [batch..., M, M]",
    "return[1]: [batch..., M, P]",
    "return[2]: [batch..., P]",
)
def pointwise_covariances(
    kernel: gpflow.kernels.Kernel, inducing: tf.Tensor, locations: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Return ``(Kuu, Kuf, kff)`` for each datapoint's own inducing points and locations.

    :param kernel: any GPflow kernel; stationary kernels take the fast path.
    :param inducing: inducing points ``Z``, ``[batch..., M, D]``.
    :param locations: evaluation points ``F``, ``[batch..., P, D]`` (``P`` = sigma points).
    :returns: ``Kuu`` ``[batch..., M, M]`` (no jitter), ``Kuf`` ``[batch..., M, P]`` and the
        prior variances ``kff`` ``[batch..., P]``.
    """
    if isinstance(
        kernel, (gpflow.kernels.IsotropicStationary, gpflow.kernels.AnisotropicStationary)
    ):
        z_sliced, f_sliced = kernel.slice(inducing, locations)
        z_scaled = kernel.scale(z_sliced)  # [..., M, D]
        f_scaled = kernel.scale(f_sliced)  # [..., P, D]
        kuu = _stationary_from_scaled(kernel, z_scaled, z_scaled)
        if isinstance(kernel, gpflow.kernels.IsotropicStationary):
            kuf = kernel.K_r2(_squared_distances_by_products(z_scaled, f_scaled))
        else:
            kuf = _stationary_from_scaled(kernel, z_scaled, f_scaled)
        kff = kernel.K_diag(f_sliced)
        return kuu, kuf, kff
    num_inducing = tf.shape(inducing)[-2]
    # kernel(...) (not kernel.K) slices active_dims, also inside Sum/Product kernels
    joint = kernel(tf.concat([inducing, locations], axis=-2))  # [..., M + P, M + P]
    kuu = joint[..., :num_inducing, :num_inducing]
    kuf = joint[..., :num_inducing, num_inducing:]
    kff = kernel(locations, full_cov=False)
    return kuu, kuf, kff
