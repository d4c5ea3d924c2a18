"""Mixture CDF and central-interval coverage (the quantiles are the library's:
:func:`gpflux_avdgp.intervals.mixture_quantiles`)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from scipy.special import ndtr

from .common import (
    check_mixture,
    check_open_unit_interval,
    normal_cdf,
)

__all__ = ["central_interval_coverage", "mixture_cdf"]


def mixture_cdf(
    values: np.ndarray, weights: np.ndarray, means: np.ndarray, variances: np.ndarray
) -> np.ndarray:
    """Mixture CDF ``F_n(values_n) = sum_s w_s Phi((values_n - m_s) / sqrt(v_s))``.

    :param values: ``[N]`` (or ``[N, 1]``) points, one per mixture.
    :param weights: ``[N, S]`` mixture weights, rows summing to one.
    :param means: ``[N, S]`` component means.
    :param variances: ``[N, S]`` component variances (zero is a point mass, right-continuous).
    :return: ``[N]`` CDF values in ``[0, 1]``.
    """
    w, m, v, x = check_mixture(weights, means, variances, targets=values, targets_name="values")
    return np.sum(w * normal_cdf(x[:, None], m, np.sqrt(v)), axis=1)


def central_interval_coverage(
    y: np.ndarray,
    weights: np.ndarray,
    means: np.ndarray,
    variances: np.ndarray,
    levels: Iterable[float] | float = (0.5, 0.8, 0.9, 0.95),
) -> dict[float, float]:
    """Fraction of targets inside each central predictive interval.

    The central interval at level ``a`` is ``[F^{-1}((1 - a) / 2), F^{-1}((1 + a) / 2)]``. As all
    variances are positive, ``F`` is continuous and strictly increasing, so ``y`` lies inside it
    exactly when ``(1 - a) / 2 <= F(y) <= (1 + a) / 2``; that test (on the probability integral
    transform ``F(y)``) is what is computed, without solving for the quantiles.

    :param y: ``[N]`` (or ``[N, 1]``) targets.
    :param weights: ``[N, S]`` mixture weights, rows summing to one.
    :param means: ``[N, S]`` component means.
    :param variances: ``[N, S]`` component variances, all positive.
    :param levels: nominal levels (or one level), each strictly between 0 and 1.
    :return: ``{level: fraction of y inside}``; a well-calibrated model gives about ``level``.
    """
    w, m, v, y = check_mixture(weights, means, variances, targets=y, positive_variances=True)
    nominal = check_open_unit_interval("levels", levels if np.isscalar(levels) else list(levels))
    pit = np.sum(w * ndtr((y[:, None] - m) / np.sqrt(v)), axis=1)  # [N]
    return {
        float(level): float(np.mean((pit >= 0.5 * (1.0 - level)) & (pit <= 0.5 * (1.0 + level))))
        for level in nominal
    }
