"""Scores of Gaussian-mixture predictions of real targets: NLL, RMSE, CRPS, rescaling."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
from scipy.special import erf

from .common import (
    DEFAULT_CHUNK_ROWS,
    as_float_array,
    check_chunk_rows,
    check_mixture,
    check_vector,
    mixture_moments,
)
from .quantiles import central_interval_coverage

__all__ = [
    "gaussian_crps",
    "gaussian_mixture_crps",
    "gaussian_mixture_log_density",
    "gaussian_mixture_nll",
    "mean_crps",
    "mixture_mean_and_variance",
    "regression_metrics",
    "rescale_mixture",
    "rmse",
]

_LOG_2PI = math.log(2.0 * math.pi)
_SQRT_2 = math.sqrt(2.0)
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _crps_a(mu: np.ndarray, variance: np.ndarray) -> np.ndarray:
    """``A(mu, s^2) = E|X|`` for ``X ~ N(mu, s^2)``: ``2 s phi(mu / s) + mu (2 Phi(mu / s) - 1)``.

    ``2 Phi(z) - 1 = erf(z / sqrt(2))``: the public reference code drops the ``sqrt(2)``
    (docs/design.md, "Reference-code mistakes we do not repeat"), which inflates the CRPS. A
    zero variance gives ``|mu|``.
    """
    std = np.sqrt(variance)
    positive = std > 0.0
    all_positive = bool(np.all(positive))
    safe_std = std if all_positive else np.where(positive, std, 1.0)
    z = mu / safe_std
    value = (2.0 * _INV_SQRT_2PI) * safe_std * np.exp(-0.5 * z * z) + mu * erf(z / _SQRT_2)
    return value if all_positive else np.where(positive, value, np.abs(mu))


def gaussian_mixture_log_density(
    y: np.ndarray, weights: np.ndarray, means: np.ndarray, variances: np.ndarray
) -> np.ndarray:
    """``log sum_s w_s N(y_n | m_s, v_s)`` per datapoint, by log-sum-exp over components.

    Stable for tiny variances and far-away targets (no density is formed before the log);
    components with zero weight are ignored.

    :param y: ``[N]`` (or ``[N, 1]``) targets.
    :param weights: ``[N, S]`` mixture weights, rows summing to one.
    :param means: ``[N, S]`` component means.
    :param variances: ``[N, S]`` component variances, all positive.
    :return: ``[N]`` log densities.
    """
    w, m, v, y = check_mixture(weights, means, variances, targets=y, positive_variances=True)
    log_components = -0.5 * (_LOG_2PI + np.log(v) + (y[:, None] - m) ** 2 / v)  # [N, S]
    with np.errstate(divide="ignore"):
        log_terms = np.where(w > 0.0, np.log(w) + log_components, -np.inf)  # [N, S]
    # Every row has a positive weight, so the maximum is finite.
    top = np.max(log_terms, axis=1, keepdims=True)  # [N, 1]
    return top[:, 0] + np.log(np.sum(np.exp(log_terms - top), axis=1))


def gaussian_mixture_nll(
    y: np.ndarray, weights: np.ndarray, means: np.ndarray, variances: np.ndarray
) -> float:
    """Mean negative log predictive density over the ``N`` datapoints.

    :param y: ``[N]`` targets; the mixture arrays are ``[N, S]`` as in
        :func:`gaussian_mixture_log_density`.
    :return: ``-mean_n log p(y_n)``.
    """
    return float(-np.mean(gaussian_mixture_log_density(y, weights, means, variances)))


def rmse(y: np.ndarray, mean: np.ndarray) -> float:
    """Root mean squared error of a point prediction.

    :param y: ``[N]`` (or ``[N, 1]``) targets.
    :param mean: ``[N]`` (or ``[N, 1]``) predicted means (e.g. from
        :func:`mixture_mean_and_variance`).
    :return: ``sqrt(mean_n (y_n - mean_n)^2)``.
    """
    targets = check_vector("y", y)
    prediction = check_vector("mean", mean, targets.shape[0])
    return float(np.sqrt(np.mean((targets - prediction) ** 2)))


def mixture_mean_and_variance(
    weights: np.ndarray, means: np.ndarray, variances: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and total variance of each mixture (law of total variance).

    The variance is ``sum_s w_s (v_s + (m_s - mean)^2)``, i.e. the expected variance plus the
    variance of the means, not the average of the component variances.

    :param weights: ``[N, S]`` mixture weights.
    :param means: ``[N, S]`` component means.
    :param variances: ``[N, S]`` component variances.
    :return: ``mean [N]`` and ``variance [N]``.
    """
    w, m, v, _ = check_mixture(weights, means, variances)
    return mixture_moments(w, m, v)


def gaussian_crps(y: np.ndarray, mean: np.ndarray, variance: np.ndarray) -> np.ndarray:
    """Closed-form CRPS of one Gaussian per datapoint.

    ``CRPS(N(mu, s^2), y) = s [z (2 Phi(z) - 1) + 2 phi(z) - 1 / sqrt(pi)]`` with
    ``z = (y - mu) / s``; a zero variance gives the absolute error ``|y - mu|``.

    :param y: ``[N]`` (or ``[N, 1]``) targets.
    :param mean: ``[N]`` predictive means.
    :param variance: ``[N]`` predictive variances, non-negative.
    :return: ``[N]`` CRPS values (lower is better).
    """
    targets = check_vector("y", y)
    mu = check_vector("mean", mean, targets.shape[0])
    var = check_vector("variance", variance, targets.shape[0])
    if np.any(var < 0.0):
        raise ValueError(
            f"variance: expected non-negative values, got minimum {float(var.min())!r}"
        )
    # E|X - y| - E|X - X'| / 2 with E|X - X'| = A(0, 2 s^2) = 2 s / sqrt(pi).
    return _crps_a(targets - mu, var) - np.sqrt(var) * _INV_SQRT_PI


def gaussian_mixture_crps(
    y: np.ndarray,
    weights: np.ndarray,
    means: np.ndarray,
    variances: np.ndarray,
    *,
    chunk_rows: Optional[int] = None,
) -> np.ndarray:
    """Closed-form CRPS of a Gaussian mixture per datapoint (Grimit et al., 2006).

    ``CRPS = sum_s w_s A(y - m_s, v_s) - 1/2 sum_ij w_i w_j A(m_i - m_j, v_i + v_j)`` with
    ``A(mu, s^2) = 2 s phi(mu / s) + mu (2 Phi(mu / s) - 1)``. The pairwise term is symmetric:
    its diagonal is ``A(0, 2 v_i) = 2 sqrt(v_i / pi)`` and only the ``S (S - 1) / 2`` pairs
    ``i < j`` are evaluated, ``chunk_rows`` rows at a time, so memory stays bounded for any
    ``N``.

    :param y: ``[N]`` (or ``[N, 1]``) targets.
    :param weights: ``[N, S]`` mixture weights, rows summing to one.
    :param means: ``[N, S]`` component means.
    :param variances: ``[N, S]`` component variances, non-negative (zero is a point mass).
    :param chunk_rows: rows per block of the pairwise term; by default at most
        ``DEFAULT_CHUNK_ROWS`` rows and about ``2**16`` pairs per block (cache-sized blocks are
        several times faster than large ones).
    :return: ``[N]`` CRPS values (lower is better).
    """
    w, m, v, y = check_mixture(weights, means, variances, targets=y)
    num_components = w.shape[1]
    first, second = np.triu_indices(num_components, k=1)  # [P] each, P = S (S - 1) / 2
    if chunk_rows is None:
        chunk_rows = min(DEFAULT_CHUNK_ROWS, max(1, 2**16 // max(1, first.shape[0])))
    chunk_rows = check_chunk_rows(chunk_rows)
    crps = np.empty(w.shape[0])
    for start in range(0, w.shape[0], chunk_rows):
        rows = slice(start, start + chunk_rows)
        w_c, m_c, v_c = w[rows], m[rows], v[rows]  # [C, S]
        to_target = np.sum(w_c * _crps_a(y[rows, None] - m_c, v_c), axis=1)  # [C]
        diagonal = np.sum(w_c * w_c * np.sqrt(v_c), axis=1) * (2.0 * _INV_SQRT_PI)  # [C]
        pair_a = _crps_a(m_c[:, first] - m_c[:, second], v_c[:, first] + v_c[:, second])
        off_diagonal = np.sum(w_c[:, first] * w_c[:, second] * pair_a, axis=1)  # [C], i < j
        crps[rows] = to_target - 0.5 * diagonal - off_diagonal
    return crps


def mean_crps(
    y: np.ndarray, weights: np.ndarray, means: np.ndarray, variances: np.ndarray
) -> float:
    """Mean of :func:`gaussian_mixture_crps` over the ``N`` datapoints."""
    return float(np.mean(gaussian_mixture_crps(y, weights, means, variances)))


def regression_metrics(
    y: np.ndarray, weights: np.ndarray, means: np.ndarray, variances: np.ndarray
) -> dict[str, float]:
    """The standard regression report for a Gaussian-mixture prediction.

    :param y: ``[N]`` (or ``[N, 1]``) targets.
    :param weights: ``[N, S]`` mixture weights, rows summing to one.
    :param means: ``[N, S]`` component means.
    :param variances: ``[N, S]`` component variances, all positive.
    :return: ``nll`` (:func:`gaussian_mixture_nll`), ``rmse`` (of the mixture mean), ``crps``
        (:func:`mean_crps`) and ``coverage_95`` (:func:`central_interval_coverage` at 0.95).
    """
    w, m, v, y = check_mixture(weights, means, variances, targets=y, positive_variances=True)
    mean, _ = mixture_mean_and_variance(w, m, v)
    return {
        "nll": gaussian_mixture_nll(y, w, m, v),
        "rmse": rmse(y, mean),
        "crps": mean_crps(y, w, m, v),
        "coverage_95": central_interval_coverage(y, w, m, v, levels=(0.95,))[0.95],
    }


def rescale_mixture(
    means: np.ndarray, variances: np.ndarray, scale: float, shift: float
) -> tuple[np.ndarray, np.ndarray]:
    """Undo a target standardisation ``y_std = (y - shift) / scale`` on mixture components.

    Log densities in original units equal those in standardised units minus ``log(scale)``;
    RMSE and CRPS scale by ``scale``.

    :param means: ``[N, S]`` (any shape) component means in standardised units.
    :param variances: component variances, same shape as ``means``, non-negative.
    :param scale: the standard deviation used to standardise, positive.
    :param shift: the mean used to standardise.
    :return: ``means * scale + shift`` and ``variances * scale^2`` as float64 arrays.
    """
    m = as_float_array("means", means)
    v = as_float_array("variances", variances)
    if v.shape != m.shape:
        raise ValueError(f"variances: expected the shape of means {m.shape}, got {v.shape}")
    if np.any(v < 0.0):
        raise ValueError(f"variances: expected non-negative values, got minimum {float(v.min())!r}")
    scale_array = as_float_array("scale", scale)
    shift_array = as_float_array("shift", shift)
    if scale_array.size != 1 or not np.isfinite(scale_array).all() or scale_array.item() <= 0:
        raise ValueError(f"scale: expected one finite positive number, got {scale!r}")
    if shift_array.size != 1 or not np.isfinite(shift_array).all():
        raise ValueError(f"shift: expected one finite number, got {shift!r}")
    s, c = scale_array.item(), shift_array.item()
    return m * s + c, v * s * s
