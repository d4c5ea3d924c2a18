"""Cholesky factors of the per-datapoint ``K_uu`` with relative, adaptive jitter.

Two measures keep float32 training alive:

* the jitter is relative to each matrix's own scale (its mean diagonal, the kernel's prior
  variance at the inducing points), so it stays effective however large the learned kernel
  variance grows: an absolute jitter of ``1e-5`` vanishes in float32 once the variance
  exceeds about ``1e2`` (float32 resolves ``1 + 6e-8``);
* a factorisation that still fails (TensorFlow returns NaNs for a matrix that is not
  numerically positive definite, on CPU, GPU and under XLA) is retried, for the failing
  datapoints only, with the jitter multiplied by ``10`` and then ``100``.

Everything stays in the graph (``tf.cond`` on whether any factor failed), so there is no
host round-trip and XLA compiles it; the retries cost nothing when no factor fails.
"""

from __future__ import annotations

from typing import Sequence

import gpflow
import tensorflow as tf

__all__ = ["add_relative_jitter", "jittered_cholesky", "RETRY_FACTORS"]

#: Jitter multipliers of the retries for factors that came out non-finite.
RETRY_FACTORS: tuple[float, ...] = (10.0, 100.0)


def add_relative_jitter(kuu: tf.Tensor, factor: float = 1.0) -> tf.Tensor:
    """``K_uu + factor * jitter * mean(diag K_uu) * I`` per matrix, ``[..., M, M]``.

    :param kuu: ``[..., M, M]`` symmetric matrices.
    :param factor: multiplier of ``gpflow.default_jitter()``.
    """
    scale = tf.reduce_mean(tf.linalg.diag_part(kuu), axis=-1)[..., None, None]  # [..., 1, 1]
    eye = tf.eye(tf.shape(kuu)[-1], dtype=kuu.dtype)  # [M, M]
    return kuu + (factor * gpflow.config.default_jitter()) * scale * eye


def jittered_cholesky(kuu: tf.Tensor, retry_factors: Sequence[float] = RETRY_FACTORS) -> tf.Tensor:
    """Lower Cholesky factors of ``K_uu`` plus relative jitter, ``[N, M, M]``.

    Matrices whose factor is not finite are factorised again with the jitter multiplied by
    each of ``retry_factors`` in turn; the others keep their first factor. A factor that is
    still not finite after the last retry is returned as is (the layer's numerics check then
    names the layer).

    :param kuu: ``[N, M, M]`` prior covariances of the inducing variables.
    :param retry_factors: increasing jitter multipliers for the retries.
    """
    chol = tf.linalg.cholesky(add_relative_jitter(kuu))  # [N, M, M]
    for factor in retry_factors:
        failed = tf.logical_not(tf.reduce_all(tf.math.is_finite(chol), axis=[-2, -1]))  # [N]

        def retry(chol=chol, failed=failed, factor=factor) -> tf.Tensor:
            larger = tf.linalg.cholesky(add_relative_jitter(kuu, factor))
            return tf.where(failed[:, None, None], larger, chol)

        chol = tf.cond(tf.reduce_any(failed), retry, lambda chol=chol: chol)
    return chol
