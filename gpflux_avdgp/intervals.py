"""Exact quantiles and central intervals of a Gaussian-mixture predictive distribution.

The predictive law of ``y`` under a Gaussian likelihood is the mixture
``p(y) = sum_s w_s N(y | m_s, v_s)`` (``v_s`` includes the noise); its quantile ``F^{-1}(p)``
has no closed form. It is found by bisection on the mixture CDF inside the bracket
``[min_s(m_s - 40 sqrt(v_s)), max_s(m_s + 40 sqrt(v_s))]``, where ``F`` is 0 and 1 to far below
any level asked for. A fixed number of halvings (:data:`BISECTIONS`) brings the bracket below
the float type's resolution of the mixture's scale, with no data-dependent loop: the same
graph runs in ``predict``, under XLA and in an exported SavedModel. A Gaussian approximation
(``mean +- 1.96 std``) would be wrong for the skewed and multi-modal mixtures deep GPs predict.
"""

from __future__ import annotations

from typing import Sequence

import gpflow
import numpy as np
import tensorflow as tf
from check_shapes import check_shapes

__all__ = [
    "BISECTIONS",
    "PREDICT_LEVEL",
    "central_levels",
    "interval_names",
    "interval_outputs",
    "mixture_quantiles",
]

#: Level of the central interval ``predict`` and the exported ``predict_y`` return.
PREDICT_LEVEL = 0.95

#: Halvings of the bracket per float type: ``2^-80`` (``2^-48``) of the bracket is below
#: float64's (float32's) resolution of the mixture's scale even for components spread over
#: ``10^8`` standard deviations; once there, further halvings change nothing.
BISECTIONS = {tf.float64: 80, tf.float32: 48}
#: Half-width of the bracket around the components, in component standard deviations.
BRACKET_SIGMAS = 40.0


def central_levels(level: float) -> tuple[float, float]:
    """``((1 - level) / 2, (1 + level) / 2)``: the probabilities of a central interval's ends.

    :raises ValueError: unless ``0 < level < 1``.
    """
    if not isinstance(level, (float, int)) or isinstance(level, bool) or not 0 < level < 1:
        raise ValueError(f"level: expected a number strictly between 0 and 1, got {level!r}")
    return (0.5 * (1.0 - level), 0.5 * (1.0 + level))


def interval_names(level: float) -> tuple[str, str]:
    """``("lower_95", "upper_95")`` for ``level = 0.95``: the output names of an interval."""
    percent = f"{100 * level:g}".replace(".", "_")
    return f"lower_{percent}", f"upper_{percent}"


@check_shapes(
    "log_weights: [N, S]",
    "means: [N, S, Q]",
    "variances: [N, S, Q]",
    "return: [N, P, Q]",
)
def mixture_quantiles(
    log_weights: tf.Tensor,
    means: tf.Tensor,
    variances: tf.Tensor,
    probabilities: Sequence[float] | np.ndarray,
) -> tf.Tensor:
    """Quantiles ``F_nq^{-1}(p)`` of each row's and output's mixture, by bisection on its CDF.

    :param log_weights: ``log w`` ``[N, S]``.
    :param means: component means ``[N, S, Q]``.
    :param variances: component variances ``[N, S, Q]``, positive.
    :param probabilities: ``P`` levels, each strictly between 0 and 1.
    :returns: ``[N, P, Q]``; exact to about the float type's resolution of the mixture's scale.
    """
    levels = np.asarray(probabilities, dtype=np.float64).reshape(-1)
    if not len(levels) or not np.all((levels > 0) & (levels < 1)):
        raise ValueError(
            f"probabilities: expected levels strictly between 0 and 1, got {levels.tolist()}"
        )
    dtype = means.dtype
    p = tf.constant(levels, dtype)[None, :, None, None]  # [1, P, 1, 1]
    weights = tf.exp(log_weights)[:, None, :, None]  # [N, 1, S, 1]
    component_means = means[:, None]  # [N, 1, S, Q]
    stds = tf.sqrt(variances)[:, None]  # [N, 1, S, Q]
    lower = tf.reduce_min(component_means - BRACKET_SIGMAS * stds, axis=2, keepdims=True)
    upper = tf.reduce_max(component_means + BRACKET_SIGMAS * stds, axis=2, keepdims=True)
    shape = tf.shape(p * lower)  # [N, P, 1, Q]
    lower, upper = tf.broadcast_to(lower, shape), tf.broadcast_to(upper, shape)

    def halve(_, lower, upper):
        middle = 0.5 * (lower + upper)
        cdf = tf.reduce_sum(weights * _normal_cdf((middle - component_means) / stds), axis=2)
        below = (cdf < p[..., 0, :])[:, :, None]  # [N, P, 1, Q]: the quantile is above middle
        return _ + 1, tf.where(below, middle, lower), tf.where(below, upper, middle)

    _, lower, upper = tf.while_loop(
        lambda step, *_: step < BISECTIONS.get(dtype, BISECTIONS[tf.float64]),
        halve,
        (tf.constant(0), lower, upper),
    )
    return (0.5 * (lower + upper))[:, :, 0, :]


def interval_outputs(
    likelihood: gpflow.likelihoods.Likelihood,
    log_weights: tf.Tensor,
    y_means: tf.Tensor,
    y_variances: tf.Tensor,
    level: float = PREDICT_LEVEL,
) -> dict[str, tf.Tensor]:
    """``{"lower_95": [N, Q], "upper_95": [N, Q]}`` (for ``level = 0.95``) of ``y``'s mixture
    ``[N, S, Q]`` under a Gaussian likelihood; ``{}`` for any other, whose law of ``y`` is not
    a Gaussian mixture. One owner for ``predict`` and the exported ``predict_y``."""
    if not isinstance(likelihood, gpflow.likelihoods.Gaussian):
        return {}
    bounds = mixture_quantiles(log_weights, y_means, y_variances, central_levels(level))
    lower, upper = interval_names(level)
    return {lower: bounds[:, 0], upper: bounds[:, 1]}


def _normal_cdf(z: tf.Tensor) -> tf.Tensor:
    """``Phi(z)`` via ``erfc``, accurate in both tails."""
    return 0.5 * tf.math.erfc(-z / np.sqrt(2.0))
