"""Mixture CDF, quantiles (safeguarded Newton in a bracket) and central-interval coverage."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Optional

import numpy as np
from scipy.special import ndtr, ndtri

from .common import (
    DEFAULT_CHUNK_ROWS,
    check_chunk_rows,
    check_mixture,
    check_open_unit_interval,
    mixture_moments,
    normal_cdf,
    normal_pdf,
)

__all__ = ["central_interval_coverage", "mixture_cdf", "mixture_quantiles"]

#: The quantile solver brackets the root with ``min_s(mu_s - 40 sigma_s)``, ``max_s(mu_s + ...)``.
QUANTILE_BRACKET_SIGMAS = 40.0
_QUANTILE_RTOL = 1e-13
_QUANTILE_MAX_ITERATIONS = 200
_CDF_ROUNDOFF = 4.0 * np.finfo(np.float64).eps


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


def _quantile_chunk(w: np.ndarray, m: np.ndarray, v: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Solve ``F_n(x) = p`` for ``w, m, v [C, S]`` and ``p [P]``; return ``[C, P]``.

    Safeguarded Newton: every iterate updates a bracket ``[lo, hi]`` with ``F(lo) < p <= F(hi)``
    and a Newton step leaving the bracket (or a zero density) is replaced by bisection.
    """
    sd = np.sqrt(v)[:, None, :]  # [C, 1, S]
    mc, wc = m[:, None, :], w[:, None, :]  # [C, 1, S]
    shape = (w.shape[0], p.shape[0])  # [C, P]
    lo = np.broadcast_to(np.min(m - QUANTILE_BRACKET_SIGMAS * sd[:, 0], axis=1)[:, None], shape)
    hi = np.broadcast_to(np.max(m + QUANTILE_BRACKET_SIGMAS * sd[:, 0], axis=1)[:, None], shape)
    mean, variance = mixture_moments(w, m, v)  # [C] each
    std = np.sqrt(variance)
    x = np.clip(mean[:, None] + std[:, None] * ndtri(p)[None, :], lo, hi)  # [C, P]
    tolerance = _QUANTILE_RTOL * (np.abs(mean) + std)[:, None]  # [C, 1]
    for _ in range(_QUANTILE_MAX_ITERATIONS):
        excess = np.sum(wc * normal_cdf(x[..., None], mc, sd), axis=-1) - p  # [C, P]
        density = np.sum(wc * normal_pdf(x[..., None], mc, sd), axis=-1)  # [C, P]
        hi = np.where(excess >= 0.0, x, hi)
        lo = np.where(excess < 0.0, x, lo)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            newton = x - excess / density
        # Inclusive: a converged Newton step may land on the end of the bracket it just set.
        usable = (density > 0.0) & (newton >= lo) & (newton <= hi)
        x_next = np.where(usable, newton, 0.5 * (lo + hi))
        # F is a sum of S terms in [0, 1]: once F(x) - p is at round-off, x is as exact as the
        # CDF can resolve it (about eps / density), and further steps could only cycle.
        x_next = np.where(np.abs(excess) <= _CDF_ROUNDOFF * w.shape[1], x, x_next)
        step = np.abs(x_next - x)
        x = x_next
        if np.all((step <= tolerance) | (hi - lo <= tolerance)):
            break
    return x


def mixture_quantiles(
    weights: np.ndarray,
    means: np.ndarray,
    variances: np.ndarray,
    probabilities: Sequence[float] | np.ndarray | float,
    *,
    chunk_rows: Optional[int] = None,
) -> np.ndarray:
    """Quantiles ``F_n^{-1}(p)`` of each mixture, by safeguarded Newton on the mixture CDF.

    The root is bracketed by ``[min_s(m_s - 40 s_s), max_s(m_s + 40 s_s)]`` and solved until
    the last step is below ``1e-13`` of the mixture's scale ``|mean| + std`` or ``F(x) - p`` is at
    floating-point round-off (then ``x`` is as exact as the CDF can resolve it). With zero
    variances (point masses) the CDF has jumps and the result is the generalised inverse
    ``inf {x : F(x) >= p}`` to that accuracy.

    :param weights: ``[N, S]`` mixture weights, rows summing to one.
    :param means: ``[N, S]`` component means.
    :param variances: ``[N, S]`` component variances, non-negative.
    :param probabilities: ``[P]`` levels (or a scalar), each strictly between 0 and 1.
    :param chunk_rows: rows solved at once (memory ``[rows, P, S]``); by default at most
        ``DEFAULT_CHUNK_ROWS`` rows and about ``2**16`` elements per block.
    :return: ``[N, P]`` quantiles.
    """
    w, m, v, _ = check_mixture(weights, means, variances)
    p = check_open_unit_interval("probabilities", probabilities)
    if chunk_rows is None:
        chunk_rows = min(DEFAULT_CHUNK_ROWS, max(1, 2**16 // (p.shape[0] * w.shape[1])))
    chunk_rows = check_chunk_rows(chunk_rows)
    quantiles = np.empty((w.shape[0], p.shape[0]))
    for start in range(0, w.shape[0], chunk_rows):
        rows = slice(start, start + chunk_rows)
        quantiles[rows] = _quantile_chunk(w[rows], m[rows], v[rows], p)
    return quantiles


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
