"""Per-datapoint covariances: each datapoint has its own inducing points.

GPflow's ``kernel(Z, X)`` with a batched ``Z`` returns all pairs (``[B, M, B, P]``), which is
``O(B^2)`` memory. These functions never pair one datapoint's inducing points with another
datapoint's locations: for stationary kernels they form the scaled differences per row and call
``K_r2`` / ``K_d``; for any other kernel they evaluate ``kernel.K`` on the per-point
concatenation ``[Z_n; F_n]`` (``[N, M + P, D]``) and slice the blocks.
"""

from __future__ import annotations

import gpflow
import tensorflow as tf
from check_shapes import check_shapes

__all__ = ["pointwise_covariances"]


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
