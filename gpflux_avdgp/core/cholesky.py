"""Cholesky factors of the per-datapoint ``K_uu`` with relative, adaptive jitter.

Two measures keep float32 training alive:

* the jitter is relative to each matrix's own scale (its mean diagonal, the kernel's prior
  variance at the inducing points), so it stays effective however large the learned kernel
  variance grows: an absolute jitter of ``1e-5`` vanishes in float32 once the variance
  exceeds about ``1e2`` (float32 resolves ``1 + 6e-8``);
* a factorisation that still fails (TensorFlow returns NaNs for a matrix that is not
  numerically positive definite, on CPU, GPU and under XLA) takes the jitter multiplied by
  ``10`` and then ``100``, for the failing matrices only.

The jitter is decided without branches (on a GPU a ``tf.cond`` reads its predicate back to the
host): one factorisation of every matrix with every jitter, outside the gradient, finds each
matrix's smallest jitter that works; one more with that jitter gives the factor and gradient.
"""

from __future__ import annotations

from typing import Sequence

import gpflow
import numpy as np
import tensorflow as tf

__all__ = ["add_relative_jitter", "jittered_cholesky", "RETRY_FACTORS"]

#: Jitter multipliers of the retries for factors that came out non-finite.
RETRY_FACTORS: tuple[float, ...] = (10.0, 100.0)


def add_relative_jitter(kuu: tf.Tensor, factor: float | tf.Tensor = 1.0) -> tf.Tensor:
    """``K_uu + factor * jitter * mean(diag K_uu) * I`` per matrix, ``[..., M, M]``.

    :param kuu: ``[..., M, M]`` symmetric matrices.
    :param factor: multiplier of ``gpflow.default_jitter()``: a number, or a tensor that
        broadcasts against ``[..., 1, 1]`` (one multiplier per matrix).
    """
    scale = tf.reduce_mean(tf.linalg.diag_part(kuu), axis=-1)[..., None, None]  # [..., 1, 1]
    eye = identity(kuu)  # [M, M]
    return kuu + (factor * gpflow.config.default_jitter()) * scale * eye


def identity(matrices: tf.Tensor) -> tf.Tensor:
    """The identity ``[M, M]`` of ``matrices`` ``[..., M, M]``: a constant when ``M`` is static."""
    size = matrices.shape[-1]
    if size is None:
        return tf.eye(tf.shape(matrices)[-1], dtype=matrices.dtype)
    return tf.constant(np.eye(size), dtype=matrices.dtype)


def jittered_cholesky(kuu: tf.Tensor, retry_factors: Sequence[float] = RETRY_FACTORS) -> tf.Tensor:
    """Lower Cholesky factors of ``K_uu`` plus relative jitter, ``[N, M, M]``.

    Each matrix is factorised with the smallest jitter of ``1, *retry_factors`` (times the
    relative jitter) whose factor is finite; a matrix that fails with all of them gets the
    last one, whose factor is then not finite (the layer's numerics check names the layer).

    :param kuu: ``[N, M, M]`` prior covariances of the inducing variables.
    :param retry_factors: increasing jitter multipliers for the matrices that fail.
    """
    factors = tf.constant((1.0, *retry_factors), dtype=kuu.dtype)  # [R]
    trials = tf.linalg.cholesky(
        add_relative_jitter(tf.stop_gradient(kuu)[None], factors[:, None, None, None])
    )  # [R, N, M, M], no gradient
    works = tf.reduce_all(tf.math.is_finite(trials), axis=[-2, -1])  # [R, N]
    works = tf.concat([works[:-1], tf.ones_like(works[-1:])], axis=0)  # else: the last factor
    first = tf.argmax(tf.cast(works, tf.int32), axis=0)  # [N], the first that works
    factor = tf.gather(factors, first)[:, None, None]  # [N, 1, 1]
    return tf.linalg.cholesky(add_relative_jitter(kuu, factor))  # [N, M, M]
