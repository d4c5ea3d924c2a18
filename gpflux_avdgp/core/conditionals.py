"""Batched sparse-GP conditional and KL with one set of inducing variables per datapoint.

Shapes use ``N`` for the batch of independent problems (datapoints, or datapoint-sample pairs
under AR1), ``M`` inducing points, ``P`` evaluation points per problem and ``Q`` outputs. One
Cholesky ``L = chol(Kuu)`` ``[N, M, M]`` serves all ``Q`` outputs and all ``P`` points.

``q_sqrt`` is either mean-field, ``[N, Q, M]`` (standard deviations), or full-rank,
``[N, Q, M, M]`` (lower-triangular factors). With ``whiten=True`` ``q(v) = N(q_mu, S)`` with
``u = m(Z) + L v``; otherwise ``q(u) = N(q_mu, Sigma)`` directly (the paper).
"""

from __future__ import annotations

import tensorflow as tf
from check_shapes import check_shapes

from .cholesky import identity

__all__ = ["amortized_conditional", "amortized_kl"]


def _projected_variance(proj: tf.Tensor, q_sqrt: tf.Tensor) -> tf.Tensor:
    """``proj^T Sigma_q proj`` per output: ``[N, P, Q]``.

    :param proj: ``[N, M, P]``.
    :param q_sqrt: ``[N, Q, M]`` (diagonal) or ``[N, Q, M, M]`` (lower triangular).
    """
    if q_sqrt.shape.rank == 3:  # sum_m proj[n, m, p]^2 q_sqrt[n, q, m]^2
        return tf.linalg.matmul(
            tf.square(proj), tf.square(q_sqrt), transpose_a=True, transpose_b=True
        )
    factor_proj = tf.linalg.matmul(q_sqrt, proj[:, None], transpose_a=True)  # L^T A, [N, Q, M, P]
    return tf.transpose(tf.reduce_sum(tf.square(factor_proj), axis=-2), [0, 2, 1])


@check_shapes(
    "chol_kuu: [N, M, M]",
    "kuf: [N, M, P]",
    "kff: [N, P]",
    "q_mu: [N, M, Q]",
    "q_sqrt: [N, Q, M, ...]",
    "return[0]: [N, P, Q]",
    "return[1]: [N, P, Q]",
)
def amortized_conditional(
    chol_kuu: tf.Tensor,
    kuf: tf.Tensor,
    kff: tf.Tensor,
    q_mu: tf.Tensor,
    q_sqrt: tf.Tensor,
    *,
    whiten: bool,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Marginal mean and variance of ``f`` at each problem's ``P`` points, without mean function.

    ``q_mu`` must already be centred on the prior mean at ``Z`` (``q_mu - m(Z)``) when
    ``whiten=False``; add ``m(F)`` to the returned mean.

    :returns: ``(mean, var)``, each ``[N, P, Q]``.
    """
    proj = tf.linalg.triangular_solve(chol_kuu, kuf, lower=True)  # A = L^-1 Kuf, [N, M, P]
    if not whiten:
        proj_q = tf.linalg.triangular_solve(chol_kuu, proj, lower=True, adjoint=True)  # Kuu^-1 Kuf
    else:
        proj_q = proj
    mean = tf.linalg.matmul(proj_q, q_mu, transpose_a=True)  # [N, P, Q]
    prior_var = kff - tf.reduce_sum(tf.square(proj), axis=-2)  # [N, P]
    var = prior_var[..., None] + _projected_variance(proj_q, q_sqrt)  # [N, P, Q]
    return mean, var


@check_shapes(
    "chol_kuu: [N, M, M]",
    "q_mu: [N, M, Q]",
    "q_sqrt: [N, Q, M, ...]",
    "return: [N]",
)
def amortized_kl(
    chol_kuu: tf.Tensor, q_mu: tf.Tensor, q_sqrt: tf.Tensor, *, whiten: bool
) -> tf.Tensor:
    """``sum_q KL(q(u_q) || p(u_q))`` per problem, ``[N]``.

    Whitened: ``KL(N(q_mu, S) || N(0, I))``. Unwhitened: ``KL(N(q_mu, Sigma) || N(0, Kuu))``,
    with ``q_mu`` already centred on ``m(Z)``.
    """
    dtype = q_mu.dtype
    num_inducing = tf.cast(tf.shape(q_mu)[-2], dtype)
    num_outputs = tf.cast(tf.shape(q_mu)[-1], dtype)
    full = q_sqrt.shape.rank == 4
    if full:
        log_det_q = 2.0 * tf.reduce_sum(
            tf.math.log(tf.abs(tf.linalg.diag_part(q_sqrt))), axis=[-2, -1]
        )  # [N]
    else:
        log_det_q = 2.0 * tf.reduce_sum(tf.math.log(tf.abs(q_sqrt)), axis=[-2, -1])  # [N]

    if whiten:
        mahalanobis = tf.reduce_sum(tf.square(q_mu), axis=[-2, -1])  # [N]
        trace = tf.reduce_sum(tf.square(q_sqrt), axis=list(range(1, q_sqrt.shape.rank)))
        log_det_p = tf.zeros_like(mahalanobis)
    else:
        whitened_mu = tf.linalg.triangular_solve(chol_kuu, q_mu, lower=True)  # [N, M, Q]
        mahalanobis = tf.reduce_sum(tf.square(whitened_mu), axis=[-2, -1])
        eye = tf.broadcast_to(identity(chol_kuu), tf.shape(chol_kuu))  # [N, M, M]
        chol_inv = tf.linalg.triangular_solve(chol_kuu, eye, lower=True)  # [N, M, M]
        if full:
            whitened_sqrt = tf.linalg.matmul(chol_inv[:, None], q_sqrt)  # [N, Q, M, M]
            trace = tf.reduce_sum(tf.square(whitened_sqrt), axis=[-3, -2, -1])
        else:  # sum_{i, q, j} chol_inv[n, i, j]^2 q_sqrt[n, q, j]^2
            per_output = tf.linalg.matmul(
                tf.square(q_sqrt), tf.square(chol_inv), transpose_b=True
            )  # [N, Q, M]
            trace = tf.reduce_sum(per_output, axis=[-2, -1])
        log_det_p = (
            2.0 * num_outputs * tf.reduce_sum(tf.math.log(tf.linalg.diag_part(chol_kuu)), axis=-1)
        )
    return 0.5 * (trace + mahalanobis - num_inducing * num_outputs + log_det_p - log_det_q)
