"""Prior reversion: an amortized ``q(u)`` pulled back to the prior where the input leaves the data.

An amortized layer's ``q(u | h)`` is a network output. On the data the ELBO fits it; off the data
nothing constrains it, and a network extrapolates its confident in-data scales. A sparse GP's
posterior instead returns to the prior where its global inducing points no longer explain the
input. Prior reversion gives the amortized layer the same property with ``K`` global *anchors*
``C`` ``[K, D]`` in the amortization-input space: the fraction of the prior variance at ``h``
that the anchors explain,

    a(h) = k(h, C) K_CC^{-1} k(C, h) / k(h, h)   in [0, 1],

is 1 on anchors (which the ELBO moves onto the data) and falls to 0 away from them, at the rate
the kernel's lengthscale sets. The whitened ``q(v) = N(m, S)`` (``u = m(Z) + L v``) becomes

    q_a(v) = N(sqrt(a) m, a S + (1 - a) I),

the law of ``sqrt(a) v_q + sqrt(1 - a) eps`` (``v_q ~ q``, ``eps ~ N(0, I)`` independent): ``q``
itself where ``a = 1``, the prior ``N(0, I)`` where ``a = 0``. The layer's marginals are then
``mean = sqrt(a) mean_q`` and ``var = a var_q + (1 - a) k(f, f)`` (``docs/maths.md``), and the KL
term is the closed form of ``q_a``, so the objective stays an ELBO.
"""

from __future__ import annotations

import gpflow
import numpy as np
import tensorflow as tf
from check_shapes import check_shapes

from .cholesky import identity, jittered_cholesky
from .covariances import gram_against, prior_variances

__all__ = [
    "REACH_MOMENTUM",
    "anchor_spacing",
    "every_replicas_rows",
    "anchor_weight",
    "nearest_anchor_distance",
    "range_weight",
    "reach_of",
    "reach_weight",
    "revert_to_prior",
    "spread_rows",
]


@check_shapes(
    "inputs: [N, D]",
    "anchors: [K, D]",
    "return: [N]",
)
def anchor_weight(
    kernel: gpflow.kernels.Kernel,
    inputs: tf.Tensor,
    anchors: tf.Tensor,
) -> tf.Tensor:
    """``a(h) = k(h, C) K_CC^{-1} k(C, h) / k(h, h)`` per row of ``inputs``, in ``[0, 1]``.

    ``K_CC`` gets the relative jitter of :func:`~gpflux_avdgp.core.cholesky.jittered_cholesky`,
    so anchors that coincide do not break the factorisation.

    :param kernel: the layer's GPflow kernel.
    :param inputs: amortization inputs ``h``, ``[N, D]``.
    :param anchors: ``C``, ``[K, D]``.
    :returns: ``[N]``.
    """
    kcc, kch = tf.split(
        gram_against(kernel, anchors, inputs), [tf.shape(anchors)[0], tf.shape(inputs)[0]], axis=-1
    )  # K_CC [K, K], k(C, h) [K, N]
    chol_cc = jittered_cholesky(kcc[None])[0]
    chol_inv = tf.linalg.triangular_solve(chol_cc, identity(chol_cc), lower=True)  # not N's
    # a product row by row (not a solve with N right-hand sides): each row's value does not
    # depend on the other rows of the batch, to the last bit, as for the rest of the layer
    proj = tf.linalg.matmul(kch, chol_inv, transpose_a=True, transpose_b=True)  # [N, K]
    explained = tf.reduce_sum(tf.square(proj), axis=-1)  # [N]
    return tf.clip_by_value(explained / prior_variances(kernel, inputs), 0.0, 1.0)


#: The share of training rows within the reach of an anchor (:func:`reach_of`).
REACH_QUANTILE = 0.99
#: How much of a followed statistic a training batch keeps: ``r <- m r + (1 - m) r_batch``.
REACH_MOMENTUM = 0.9


def every_replicas_rows(values: tf.Tensor) -> tf.Tensor:
    """``values`` ``[B, ...]`` of the rows of every replica in sync, ``[B_global, ...]`` (on one
    device, ``values``): a statistic of the step's batch is then the global batch's on every
    replica, as on one device."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return values
    return context.all_gather(tf.stop_gradient(values), axis=0)


@check_shapes(
    "inputs: [N, D]",
    "anchors: [K, D]",
    "return: [N]",
)
def nearest_anchor_distance(inputs: tf.Tensor, anchors: tf.Tensor) -> tf.Tensor:
    """``d(h) = min_k |h - C_k|``, the Euclidean distance of each row to its nearest anchor.

    :param inputs: amortization inputs ``h``, ``[N, D]``.
    :param anchors: ``C``, ``[K, D]``.
    :returns: ``[N]``; its gradient is finite on an anchor (``d = 0``).
    """
    squared = tf.reduce_sum(tf.square(inputs[:, None, :] - anchors[None]), axis=-1)  # [N, K]
    tiny = np.finfo(inputs.dtype.as_numpy_dtype).tiny
    return tf.sqrt(tf.maximum(tf.reduce_min(squared, axis=-1), tiny))


@check_shapes(
    "anchors: [K, D]",
    "return: []",
)
def anchor_spacing(anchors: tf.Tensor) -> tf.Tensor:
    """The anchors' typical spacing: the median over anchors of the distance to the nearest
    anchor at another place (anchors that coincide, as repeated rows give, are one place;
    the lower median), 0 if all anchors are at one place.

    :param anchors: ``C``, ``[K, D]``.
    :returns: ``[]``, with no gradient.
    """
    squared = tf.reduce_sum(tf.square(anchors[:, None, :] - anchors[None]), axis=-1)  # [K, K]
    elsewhere = tf.where(squared > 0, squared, tf.constant(np.inf, squared.dtype))
    nearest = tf.sort(tf.sqrt(tf.reduce_min(elsewhere, axis=-1)))  # [K], inf where alone
    count = tf.reduce_sum(tf.cast(tf.math.is_finite(nearest), tf.int32))
    median = tf.gather(nearest, tf.maximum(count - 1, 0) // 2)
    return tf.stop_gradient(tf.where(count > 0, median, tf.zeros_like(median)))


@check_shapes(
    "distances: [N]",
    "anchors: [K, D]",
    "return: []",
)
def reach_of(distances: tf.Tensor, anchors: tf.Tensor) -> tf.Tensor:
    """The reach ``r``: the :data:`REACH_QUANTILE` quantile of the nearest-anchor distances of
    the training rows that are not anchors themselves (the ``floor(q (M - 1))``-th smallest of
    those ``M``), with no gradient. Rows on an anchor (where the anchors are placed) say
    nothing about how far the data reach; if every row is one (``N <= K``), the reach is half
    the anchors' spacing (:func:`anchor_spacing`), so that rows no further apart than the
    anchors are within reach of each other.

    :param distances: ``d(h)`` of training rows, ``[N]``, as
        :func:`nearest_anchor_distance` gives them (``sqrt(tiny)`` on an anchor).
    :param anchors: ``C``, ``[K, D]``.
    :returns: ``[]``; 0 only if every row is on an anchor and all anchors are at one place.
    """
    on_anchor = np.sqrt(np.finfo(distances.dtype.as_numpy_dtype).tiny)
    count = tf.shape(distances)[0]
    off = tf.reduce_sum(tf.cast(distances > on_anchor, tf.int32))  # M
    rank = count - off + tf.cast(REACH_QUANTILE * tf.cast(off - 1, distances.dtype), tf.int32)
    # a gather, not a slice: XLA compiles a slice's start into its program, one per value
    quantile = tf.gather(tf.sort(distances), tf.minimum(rank, count - 1))  # rows on anchors first
    reach = tf.where(off > 0, quantile, 0.5 * anchor_spacing(anchors))
    return tf.stop_gradient(reach)


@check_shapes(
    "distances: [N]",
    "reach: []",
    "return: [N]",
)
def reach_weight(distances: tf.Tensor, reach: tf.Tensor, scale: float) -> tf.Tensor:
    """The reach gate ``a_r(h) = exp(-(max(0, d(h) - r) / (s r))^2 / 2)``: 1 within the
    training rows' reach ``r`` of an anchor, then falling with the distance beyond it, by
    ``e^{-1/2}`` at ``s`` reaches further; 1 everywhere while ``r = 0`` (not measured yet,
    or every anchor and row at one place).

    :param distances: ``d(h)``, ``[N]``.
    :param reach: ``r >= 0``, ``[]``.
    :param scale: ``s > 0``.
    :returns: ``[N]``, in ``(0, 1]``.
    """
    measured = reach > 0
    excess = tf.nn.relu(distances - reach) / (
        scale * tf.where(measured, reach, tf.ones_like(reach))
    )
    return tf.where(measured, tf.exp(-0.5 * tf.square(excess)), tf.ones_like(distances))


@check_shapes(
    "inputs: [N, D]",
    "lower: [D]",
    "upper: [D]",
    "spread: [D]",
    "return: [N]",
)
def range_weight(
    inputs: tf.Tensor, lower: tf.Tensor, upper: tf.Tensor, spread: tf.Tensor, scale: float
) -> tf.Tensor:
    """The range gate ``a(x) = exp(-(e(x) / s)^2 / 2)``, ``e(x) = max_d max(0, x_d - u_d,
    l_d - x_d) / sigma_d``: 1 within the box of the training rows' range ``[l, u]``, falling
    with the distance beyond it along any one input, in units of that input's spread
    ``sigma_d``, by ``e^{-1/2}`` at ``s`` spreads. An input with ``sigma_d = 0`` (not placed,
    or constant in the data) does not gate.

    :param inputs: ``x``, ``[N, D]``.
    :param lower: ``l``, ``[D]``.
    :param upper: ``u``, ``[D]``.
    :param spread: ``sigma``, ``[D]``.
    :param scale: ``s > 0``.
    :returns: ``[N]``, in ``(0, 1]``.
    """
    beyond = tf.nn.relu(tf.maximum(inputs - upper, lower - inputs))  # [N, D]
    measured = spread > 0
    excess = tf.where(measured, beyond / tf.where(measured, spread, tf.ones_like(spread)), 0.0)
    return tf.exp(-0.5 * tf.square(tf.reduce_max(excess, axis=-1) / scale))


@check_shapes(
    "q_mu: [N, M, Q]",
    "q_sqrt: [N, Q, M, ...]",
    "weight: [N]",
    "return[0]: [N, M, Q]",
    "return[1]: [N, Q, M, ...]",
)
def revert_to_prior(
    q_mu: tf.Tensor, q_sqrt: tf.Tensor, weight: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor]:
    """The whitened ``q_a(v) = N(sqrt(a) m, a S + (1 - a) I)`` for each problem's weight ``a``.

    :param q_mu: whitened means ``m``, ``[N, M, Q]``.
    :param q_sqrt: ``[N, Q, M]`` (mean-field standard deviations, which stay diagonal) or
        ``[N, Q, M, M]`` (lower-triangular factors; refactorised).
    :param weight: ``a``, ``[N]``, in ``[0, 1]``.
    :returns: ``(q_mu, q_sqrt)`` of ``q_a``, shaped as given.
    """
    tiny = np.finfo(q_mu.dtype.as_numpy_dtype).tiny  # sqrt's gradient stays finite at a = 0
    scale = tf.sqrt(tf.maximum(weight, tiny))[:, None, None]  # [N, 1, 1]
    weight = weight[:, None, None]
    if q_sqrt.shape.rank == 3:
        return scale * q_mu, tf.sqrt(weight * tf.square(q_sqrt) + (1.0 - weight))
    weight = weight[..., None]  # [N, 1, 1, 1]
    eye = identity(q_sqrt)
    covariance = weight * tf.linalg.matmul(q_sqrt, q_sqrt, transpose_b=True) + (1.0 - weight) * eye
    return scale * q_mu, tf.linalg.cholesky(covariance)


@check_shapes(
    "inputs: [N, D]",
    "return: [K, D]",
)
def spread_rows(inputs: tf.Tensor, count: int) -> tf.Tensor:
    """``count`` rows of ``inputs`` evenly spread over its ``N`` rows (row ``floor(k N / K)``
    for ``k < K``; rows repeat when ``N < K``): where the anchors start. Rows ordered datapoint
    by datapoint (AR1's samples) give anchors at ``K`` datapoints, not the first one's samples.

    :param inputs: ``[N, D]``.
    :param count: ``K``.
    :returns: ``[K, D]``.
    """
    rows = tf.range(count, dtype=tf.int64) * tf.cast(tf.shape(inputs)[0], tf.int64) // count
    return tf.gather(inputs, rows)
