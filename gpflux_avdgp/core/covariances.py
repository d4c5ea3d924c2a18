"""Per-datapoint covariances: each datapoint has its own inducing points.

GPflow's ``kernel(Z, X)`` with a batched ``Z`` returns all pairs (``[B, M, B, P]``), which is
``O(B^2)`` memory. These functions never pair one datapoint's inducing points with another
datapoint's locations. For isotropic kernels (SE, Matérn) ``K_uu`` and ``K_uf`` come from one
kernel evaluation on the squared distances of ``Z_n`` to ``[Z_n; F_n]``, formed by one batched
matrix product after centring on ``Z_n``'s mean (:func:`gram_against`); anisotropic stationary
kernels form the scaled differences and call ``K_d``; any other kernel is evaluated on the
per-point concatenation ``[Z_n; F_n]`` (``[N, M + P, D]``) and sliced.
"""

from __future__ import annotations

from typing import Optional

import gpflow
import tensorflow as tf
from check_shapes import check_shapes

__all__ = [
    "gram_against",
    "has_gpflow_scale",
    "lengthscale_scaling",
    "pointwise_covariances",
    "prior_variances",
    "reads_all_columns",
    "squared_distances",
]


def squared_distances(rows: tf.Tensor, both: tf.Tensor, norms: tf.Tensor) -> tf.Tensor:
    """``|r_i - b_j|^2`` for the first ``I`` rows ``r`` of ``both`` ``[..., I + J, D]``, as
    ``|r_i|^2 + |b_j|^2 - 2 r_i . b_j`` clipped at 0, from ``norms = |both|^2``: ``[..., I,
    I + J]``.

    One batched matrix product instead of the ``[..., I, J, D]`` differences (whose forward and
    backward passes were a fifth of a training step on CPU), each squared norm computed once.
    The cancellation error is ``eps |r| |b|``: centre on the rows' mean first
    (:func:`gram_against`), so that it is ``eps`` times the spread of the points, not their
    distance from the origin.
    """
    products = tf.linalg.matmul(rows, both, transpose_b=True)  # [..., I, I + J]
    row_norms = norms[..., : tf.shape(rows)[-2], None]  # [..., I, 1]
    return tf.maximum(row_norms + norms[..., None, :] - 2.0 * products, 0.0)


def reads_all_columns(kernel: gpflow.kernels.Kernel) -> bool:
    """Whether ``kernel``'s ``active_dims`` are all input columns."""
    return isinstance(kernel.active_dims, slice) and kernel.active_dims == slice(None, None, None)


def has_gpflow_scale(kernel: gpflow.kernels.Stationary) -> bool:
    """Whether ``kernel.scale`` is GPflow's (the points divided by the lengthscales)."""
    return type(kernel).scale is gpflow.kernels.Stationary.scale


def lengthscale_scaling(
    kernel: gpflow.kernels.IsotropicStationary, *points: tf.Tensor
) -> tuple[tuple[tf.Tensor, ...], Optional[tf.Tensor]]:
    """``(points, factor)`` for squared distances divided by the lengthscales: with one
    lengthscale and GPflow's ``scale``, the points as given and ``factor = 1 / l^2`` to multiply
    the distances ``[..., I, I + J]`` by (instead of dividing the points ``[..., J, D]``);
    otherwise ``kernel.scale`` of each and ``None``."""
    if has_gpflow_scale(kernel) and tf.convert_to_tensor(kernel.lengthscales).shape.rank == 0:
        return points, tf.math.reciprocal(tf.square(kernel.lengthscales))
    return tuple(kernel.scale(p) for p in points), None


def _columns(kernel: gpflow.kernels.Kernel, *points: tf.Tensor) -> tuple[tf.Tensor, ...]:
    """``points`` restricted to the kernel's ``active_dims`` (as is when it takes them all: a
    slice that keeps everything still costs a full-size copy in the backward pass)."""
    if reads_all_columns(kernel):
        return points
    return tuple(kernel.slice(p, None)[0] for p in points)


@check_shapes(
    "rows: [batch..., I, D]",
    "points: [batch..., J, D]",
    "return: [batch..., I, I_plus_J]",
)
def gram_against(kernel: gpflow.kernels.Kernel, rows: tf.Tensor, points: tf.Tensor) -> tf.Tensor:
    """``k(rows, [rows; points])``: ``K(rows, rows)`` and ``K(rows, points)`` side by side.

    Isotropic stationary kernels: one scaling, one centring on the mean of ``rows``, one
    batched product and one kernel evaluation. Anisotropic stationary kernels: the scaled
    differences and ``K_d``. Other kernels: ``kernel`` on ``[rows; points]``, sliced.

    :param rows: ``[batch..., I, D]``, e.g. the inducing points ``Z`` or the anchors ``C``.
    :param points: ``[batch..., J, D]``, e.g. the locations ``F``.
    :returns: ``[batch..., I, I + J]``.
    """
    if isinstance(kernel, gpflow.kernels.IsotropicStationary):
        (rows, points), factor = lengthscale_scaling(kernel, *_columns(kernel, rows, points))
        # r2 does not depend on the centre: no gradient flows to it (exactly zero anyway)
        centre = tf.stop_gradient(tf.reduce_mean(rows, axis=-2, keepdims=True))  # [..., 1, D]
        rows = rows - centre
        both = tf.concat([rows, points - centre], axis=-2)  # [..., I + J, D]
        r2 = squared_distances(rows, both, tf.reduce_sum(tf.square(both), axis=-1))
        return kernel.K_r2(r2 if factor is None else factor * r2)
    count = tf.shape(rows)[-2]
    if isinstance(kernel, gpflow.kernels.AnisotropicStationary):
        both = kernel.scale(tf.concat(_columns(kernel, rows, points), axis=-2))
        return kernel.K_d(both[..., :count, None, :] - both[..., None, :, :])
    # kernel(...) (not kernel.K) slices active_dims, also inside Sum/Product kernels
    return kernel(tf.concat([rows, points], axis=-2))[..., :count, :]


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
    kuu, kuf = tf.split(
        gram_against(kernel, inducing, locations),
        [tf.shape(inducing)[-2], tf.shape(locations)[-2]],
        axis=-1,
    )
    return kuu, kuf, prior_variances(kernel, locations)


def prior_variances(kernel: gpflow.kernels.Kernel, points: tf.Tensor) -> tf.Tensor:
    """``k(x, x)`` for each point, ``[batch..., P]`` for ``points`` ``[batch..., P, D]``:
    ``kernel(points, full_cov=False)``, whose slicing of ``active_dims`` (a full-size copy in
    the backward pass) a stationary kernel does not need: its ``k(x, x)`` is its variance."""
    if isinstance(kernel, gpflow.kernels.Stationary):
        return kernel.K_diag(points)
    return kernel(points, full_cov=False)
