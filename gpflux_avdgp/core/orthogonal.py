"""Anchors with a global posterior: an amortized layer as SOLVE-GP with its second set amortized.

The prior GP splits into two independent parts, ``f = f_C + f_perp`` (Shi, Titsias and Mnih,
2020): ``f_C(x) = k(x, C) K_CC^{-1} u_C`` is spanned by the ``K`` global anchors ``C`` and gets
a global whitened posterior ``q(v_C) = N(m_C, R_C R_C^T)`` (``u_C = L_C v_C``, ``L_C =
chol(K_CC)``); ``f_perp`` is the orthogonal rest, a GP with kernel::

    c(x, x') = k(x, x') - k(x, C) K_CC^{-1} k(C, x'),

whose values at each datapoint's own inducing points ``Z`` get the amortized whitened posterior
``q(v) = N(m, S)`` (``u_perp = chol(C_ZZ) v``). With ``B_Z = L_C^{-1} K_CZ`` and ``B_F =
L_C^{-1} K_CF`` the orthogonal covariances are ``C_ZZ = K_ZZ - B_Z^T B_Z``, ``C_ZF = K_ZF -
B_Z^T B_F`` and ``c_FF = k_FF - |B_F|^2``, and the marginal of ``f`` at ``F`` is::

    mean = B_F^T m_C + (amortized conditional of C_ZZ, C_ZF, c_FF, m, S)
    var  = |R_C^T B_F|^2 + (its variance, which starts from c_FF).

Where the anchors explain ``x`` (data), ``c(x, x)`` is small and the amortized part refines the
global one; in a gap or far away, the prediction is the global sparse GP's: its mean
interpolates through the kernel and its variance grows, whatever the inference network says,
since ``f_perp``'s prior variance there is what bounds the network's part. The KL term is
``KL[q(v_C) || N(0, I)]`` once for the data plus the amortized KL of each datapoint.
"""

from __future__ import annotations

import tensorflow as tf
from check_shapes import check_shapes

__all__ = ["anchor_projections", "global_part", "orthogonal_covariances"]


@check_shapes(
    "chol_cc: [K, K]",
    "k_c: [K, N, W]",
    "return[0]: [N, K, M]",
    "return[1]: [N, K, P]",
)
def anchor_projections(
    chol_cc: tf.Tensor, k_c: tf.Tensor, num_inducing: int
) -> tuple[tf.Tensor, tf.Tensor]:
    """``(B_Z, B_F) = (L_C^{-1} K_CZ, L_C^{-1} K_CF)`` of each datapoint from ``k_c`` ``[K, N,
    M + P]``, the anchors' covariances with each datapoint's ``[Z; F]``, by one triangular
    solve with all datapoints' columns side by side."""
    shape = tf.shape(k_c)
    projected = tf.linalg.triangular_solve(chol_cc, tf.reshape(k_c, [shape[0], -1]), lower=True)
    projected = tf.transpose(tf.reshape(projected, shape), [1, 0, 2])  # [N, K, M + P]
    return projected[..., :num_inducing], projected[..., num_inducing:]


@check_shapes(
    "kuu: [N, M, M]",
    "kuf: [N, M, P]",
    "kff: [N, P]",
    "b_z: [N, K, M]",
    "b_f: [N, K, P]",
    "return[0]: [N, M, M]",
    "return[1]: [N, M, P]",
    "return[2]: [N, P]",
)
def orthogonal_covariances(
    kuu: tf.Tensor, kuf: tf.Tensor, kff: tf.Tensor, b_z: tf.Tensor, b_f: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """``(C_ZZ, C_ZF, c_FF)`` of the orthogonal kernel from ``k``'s and the projections."""
    c_uu = kuu - tf.linalg.matmul(b_z, b_z, transpose_a=True)
    c_uf = kuf - tf.linalg.matmul(b_z, b_f, transpose_a=True)
    c_ff = kff - tf.reduce_sum(tf.square(b_f), axis=-2)
    return c_uu, c_uf, tf.maximum(c_ff, 0.0)


@check_shapes(
    "b_f: [N, K, P]",
    "q_mu: [K, Q]",
    "q_sqrt: [Q, K, ...]",
    "return[0]: [N, P, Q]",
    "return[1]: [N, P, Q]",
)
def global_part(b_f: tf.Tensor, q_mu: tf.Tensor, q_sqrt: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Mean ``B_F^T m_C`` and posterior variance ``|R_C^T B_F|^2`` of ``f_C`` at ``F``.

    :param q_sqrt: ``[Q, K]`` (standard deviations) or ``[Q, K, K]`` (lower triangular).
    """
    mean = tf.linalg.matmul(b_f, q_mu, transpose_a=True)  # [N, P, Q]
    if q_sqrt.shape.rank == 2:
        var = tf.linalg.matmul(
            tf.square(b_f), tf.square(q_sqrt), transpose_a=True, transpose_b=True
        )
    else:
        factor = tf.einsum("qkj,nkp->nqjp", q_sqrt, b_f)  # R^T B, [N, Q, K, P]
        var = tf.transpose(tf.reduce_sum(tf.square(factor), axis=-2), [0, 2, 1])
    return mean, var
