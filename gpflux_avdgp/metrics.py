"""Test metrics for Gaussian-mixture predictive distributions, in plain NumPy (float64).

A predictive distribution for ``N`` scalar targets ``y`` is a Gaussian mixture with ``S``
components per datapoint, given as three arrays of shape ``[N, S]``::

    p(y_n) = sum_s weights[n, s] * N(y_n | means[n, s], variances[n, s])

Every row of ``weights`` is non-negative and sums to one (to within ``1e-6``; the weights are
used as given, not renormalised). A trailing singleton axis is accepted and squeezed: ``y`` may be
``[N, 1]`` and the mixture arrays ``[N, S, 1]`` (one output, as
:class:`~gpflux_avdgp.PredictiveMixture` stores them). To report metrics in the original units
of standardised targets, map the mixture back with :func:`rescale_mixture` first.

Regression: :func:`gaussian_mixture_nll` (log-sum-exp over components), :func:`rmse` of the
mixture mean, :func:`mean_crps` (closed form of Grimit et al., 2006) and
:func:`central_interval_coverage`; :func:`regression_metrics` bundles them. Binary
classification with labels in ``{0, 1}`` and predicted ``p(y = 1)``: :func:`error_rate`,
:func:`brier_score`, :func:`bernoulli_nll` and :func:`expected_calibration_error`, bundled in
:func:`classification_metrics`; :func:`probit_mixture_probability` turns a latent mixture into
``p(y = 1)`` under the probit link. :func:`average_ranks` ranks methods across datasets.

This module imports neither TensorFlow nor GPflow, so it can score predictions saved to disk.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Optional

import numpy as np
from scipy.special import erf, ndtr, ndtri

__all__ = [
    "average_ranks",
    "bernoulli_nll",
    "brier_score",
    "central_interval_coverage",
    "classification_metrics",
    "error_rate",
    "expected_calibration_error",
    "gaussian_crps",
    "gaussian_mixture_crps",
    "gaussian_mixture_log_density",
    "gaussian_mixture_nll",
    "mean_crps",
    "mixture_cdf",
    "mixture_mean_and_variance",
    "mixture_quantiles",
    "probit_mixture_probability",
    "regression_metrics",
    "rescale_mixture",
    "rmse",
]

#: Most rows processed at once by the pairwise CRPS term and the quantile solver.
DEFAULT_CHUNK_ROWS = 4096
#: Allowed deviation of a row of ``weights`` from summing to one.
WEIGHT_SUM_TOLERANCE = 1e-6
#: Probabilities are clipped to ``[EPS, 1 - EPS]`` inside :func:`bernoulli_nll`.
PROBABILITY_CLIP = 1e-12
#: The quantile solver brackets the root with ``min_s(mu_s - 40 sigma_s)``, ``max_s(mu_s + ...)``.
QUANTILE_BRACKET_SIGMAS = 40.0
_QUANTILE_RTOL = 1e-13
_QUANTILE_MAX_ITERATIONS = 200
_CDF_ROUNDOFF = 4.0 * np.finfo(np.float64).eps
_LOG_2PI = math.log(2.0 * math.pi)
_SQRT_2 = math.sqrt(2.0)
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


# ------------------------------------------------------------------------------------------------
# Input checks
# ------------------------------------------------------------------------------------------------


def _as_float_array(name: str, value: object) -> np.ndarray:
    """Return ``value`` as a float64 array, or raise ``ValueError`` naming ``name``."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name}: expected a numeric array, got {type(value).__name__}") from error
    return array


def _squeeze_trailing(array: np.ndarray, ndim: int) -> np.ndarray:
    """Drop a trailing singleton axis if ``array`` has exactly one axis more than ``ndim``."""
    if array.ndim == ndim + 1 and array.shape[-1] == 1:
        return array[..., 0]
    return array


def _check_finite(name: str, array: np.ndarray) -> None:
    if not np.all(np.isfinite(array)):
        raise ValueError(
            f"{name}: expected finite values, got {np.sum(~np.isfinite(array))} NaN/inf"
        )


def _check_vector(name: str, value: object, num_rows: Optional[int] = None) -> np.ndarray:
    """Return ``value`` as a finite float64 vector ``[N]`` (``[N, 1]`` is squeezed).

    :param num_rows: the required ``N``; ``None`` accepts any ``N >= 1``.
    """
    array = _squeeze_trailing(_as_float_array(name, value), 1)
    expected = "[N]" if num_rows is None else f"[{num_rows}]"
    if array.ndim != 1 or (num_rows is not None and array.shape[0] != num_rows):
        raise ValueError(f"{name}: expected shape {expected} (or [N, 1]), got {array.shape}")
    if array.shape[0] == 0:
        raise ValueError(f"{name}: expected at least one row, got shape {array.shape}")
    _check_finite(name, array)
    return array


def _check_mixture(
    weights: object,
    means: object,
    variances: object,
    *,
    targets: object = None,
    targets_name: str = "y",
    positive_variances: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """Validate a mixture (and optionally its targets); return float64 arrays.

    :param weights: ``[N, S]`` (or ``[N, S, 1]``) non-negative, rows summing to one.
    :param means: same shape as ``weights``.
    :param variances: same shape as ``weights``, non-negative (positive if
        ``positive_variances``).
    :param targets: optional ``[N]`` (or ``[N, 1]``) values scored under the mixture.
    :param targets_name: the name used for ``targets`` in error messages.
    :param positive_variances: reject zero variances (needed for densities).
    :return: ``weights``, ``means``, ``variances`` each ``[N, S]`` and ``targets`` ``[N]`` (or
        ``None``).
    :raises ValueError: naming the offending argument, with the expected and actual value.
    """
    w = _squeeze_trailing(_as_float_array("weights", weights), 2)
    if w.ndim != 2:
        raise ValueError(f"weights: expected shape [N, S] (or [N, S, 1]), got {w.shape}")
    if w.shape[0] == 0 or w.shape[1] == 0:
        raise ValueError(f"weights: expected N >= 1 rows and S >= 1 components, got {w.shape}")
    m = _squeeze_trailing(_as_float_array("means", means), 2)
    v = _squeeze_trailing(_as_float_array("variances", variances), 2)
    for name, array in (("means", m), ("variances", v)):
        if array.shape != w.shape:
            raise ValueError(
                f"{name}: expected the shape of weights {w.shape} (or with a trailing 1), "
                f"got {array.shape}"
            )
    for name, array in (("weights", w), ("means", m), ("variances", v)):
        _check_finite(name, array)
    if np.any(w < 0.0):
        raise ValueError(f"weights: expected non-negative values, got minimum {float(w.min())!r}")
    sums = w.sum(axis=1)
    if np.any(np.abs(sums - 1.0) > WEIGHT_SUM_TOLERANCE):
        raise ValueError(
            f"weights: expected every row to sum to 1 (tolerance {WEIGHT_SUM_TOLERANCE}), "
            f"got row sums in [{float(sums.min())!r}, {float(sums.max())!r}]"
        )
    if np.any(v < 0.0):
        raise ValueError(f"variances: expected non-negative values, got minimum {float(v.min())!r}")
    if positive_variances and np.any(v == 0.0):
        raise ValueError(f"variances: expected positive values, got minimum {float(v.min())!r}")
    y = None if targets is None else _check_vector(targets_name, targets, w.shape[0])
    return w, m, v, y


def _check_labels(y: object) -> np.ndarray:
    """Return binary labels as a float64 vector ``[N]``; raise unless every label is 0 or 1."""
    labels = _check_vector("y", y)
    if not np.all((labels == 0.0) | (labels == 1.0)):
        bad = labels[(labels != 0.0) & (labels != 1.0)]
        raise ValueError(f"y: expected binary labels in {{0, 1}}, got e.g. {float(bad[0])!r}")
    return labels


def _check_probabilities(name: str, probabilities: object, num_rows: int) -> np.ndarray:
    """Return probabilities as a float64 vector ``[num_rows]``; raise unless all in ``[0, 1]``."""
    p = _check_vector(name, probabilities, num_rows)
    if np.any((p < 0.0) | (p > 1.0)):
        raise ValueError(
            f"{name}: expected values in [0, 1], got range [{float(p.min())!r}, {float(p.max())!r}]"
        )
    return p


def _check_open_unit_interval(name: str, value: object) -> np.ndarray:
    """Return a 1-D float64 array of values strictly inside ``(0, 1)``."""
    array = np.atleast_1d(_as_float_array(name, value))
    if array.ndim != 1 or array.size == 0:
        raise ValueError(
            f"{name}: expected a scalar or a non-empty 1-D sequence, got {array.shape}"
        )
    if not np.all((array > 0.0) & (array < 1.0)):
        raise ValueError(f"{name}: expected values strictly between 0 and 1, got {array.tolist()}")
    return array


def _check_chunk_rows(chunk_rows: object) -> int:
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, (int, np.integer)):
        raise ValueError(f"chunk_rows: expected an integer >= 1, got {chunk_rows!r}")
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows: expected an integer >= 1, got {chunk_rows!r}")
    return int(chunk_rows)


# ------------------------------------------------------------------------------------------------
# Gaussian building blocks (safe for zero variances)
# ------------------------------------------------------------------------------------------------


def _normal_cdf(x: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """``Phi((x - mean) / std)``; a zero ``std`` is a point mass (CDF ``1{x >= mean}``)."""
    positive = std > 0.0
    z = (x - mean) / np.where(positive, std, 1.0)
    return np.where(positive, ndtr(z), (x >= mean).astype(np.float64))


def _normal_pdf(x: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """``N(x | mean, std^2)``; zero where ``std == 0`` (the point mass has no density)."""
    positive = std > 0.0
    safe_std = np.where(positive, std, 1.0)
    z = (x - mean) / safe_std
    return np.where(positive, np.exp(-0.5 * z * z) * _INV_SQRT_2PI / safe_std, 0.0)


def _crps_a(mu: np.ndarray, variance: np.ndarray) -> np.ndarray:
    """``A(mu, s^2) = E|X|`` for ``X ~ N(mu, s^2)``: ``2 s phi(mu / s) + mu (2 Phi(mu / s) - 1)``.

    ``2 Phi(z) - 1 = erf(z / sqrt(2))``: the public reference code drops the ``sqrt(2)``
    (DESIGN.md section 6), which inflates the CRPS. A zero variance gives ``|mu|``.
    """
    std = np.sqrt(variance)
    positive = std > 0.0
    all_positive = bool(np.all(positive))
    safe_std = std if all_positive else np.where(positive, std, 1.0)
    z = mu / safe_std
    value = (2.0 * _INV_SQRT_2PI) * safe_std * np.exp(-0.5 * z * z) + mu * erf(z / _SQRT_2)
    return value if all_positive else np.where(positive, value, np.abs(mu))


# ------------------------------------------------------------------------------------------------
# Regression
# ------------------------------------------------------------------------------------------------


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
    w, m, v, y = _check_mixture(weights, means, variances, targets=y, positive_variances=True)
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
    targets = _check_vector("y", y)
    prediction = _check_vector("mean", mean, targets.shape[0])
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
    w, m, v, _ = _check_mixture(weights, means, variances)
    mean = np.sum(w * m, axis=1)  # [N]
    variance = np.sum(w * (v + (m - mean[:, None]) ** 2), axis=1)  # [N]
    return mean, variance


def gaussian_crps(y: np.ndarray, mean: np.ndarray, variance: np.ndarray) -> np.ndarray:
    """Closed-form CRPS of one Gaussian per datapoint.

    ``CRPS(N(mu, s^2), y) = s [z (2 Phi(z) - 1) + 2 phi(z) - 1 / sqrt(pi)]`` with
    ``z = (y - mu) / s``; a zero variance gives the absolute error ``|y - mu|``.

    :param y: ``[N]`` (or ``[N, 1]``) targets.
    :param mean: ``[N]`` predictive means.
    :param variance: ``[N]`` predictive variances, non-negative.
    :return: ``[N]`` CRPS values (lower is better).
    """
    targets = _check_vector("y", y)
    mu = _check_vector("mean", mean, targets.shape[0])
    var = _check_vector("variance", variance, targets.shape[0])
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
    w, m, v, y = _check_mixture(weights, means, variances, targets=y)
    num_components = w.shape[1]
    first, second = np.triu_indices(num_components, k=1)  # [P] each, P = S (S - 1) / 2
    if chunk_rows is None:
        chunk_rows = min(DEFAULT_CHUNK_ROWS, max(1, 2**16 // max(1, first.shape[0])))
    chunk_rows = _check_chunk_rows(chunk_rows)
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
    w, m, v, x = _check_mixture(weights, means, variances, targets=values, targets_name="values")
    return np.sum(w * _normal_cdf(x[:, None], m, np.sqrt(v)), axis=1)


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
    mean = np.sum(w * m, axis=1)  # [C]
    std = np.sqrt(np.sum(w * (v + (m - mean[:, None]) ** 2), axis=1))  # [C]
    x = np.clip(mean[:, None] + std[:, None] * ndtri(p)[None, :], lo, hi)  # [C, P]
    tolerance = _QUANTILE_RTOL * (np.abs(mean) + std)[:, None]  # [C, 1]
    for _ in range(_QUANTILE_MAX_ITERATIONS):
        excess = np.sum(wc * _normal_cdf(x[..., None], mc, sd), axis=-1) - p  # [C, P]
        density = np.sum(wc * _normal_pdf(x[..., None], mc, sd), axis=-1)  # [C, P]
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
    w, m, v, _ = _check_mixture(weights, means, variances)
    p = _check_open_unit_interval("probabilities", probabilities)
    if chunk_rows is None:
        chunk_rows = min(DEFAULT_CHUNK_ROWS, max(1, 2**16 // (p.shape[0] * w.shape[1])))
    chunk_rows = _check_chunk_rows(chunk_rows)
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
    w, m, v, y = _check_mixture(weights, means, variances, targets=y, positive_variances=True)
    nominal = _check_open_unit_interval("levels", levels if np.isscalar(levels) else list(levels))
    pit = np.sum(w * ndtr((y[:, None] - m) / np.sqrt(v)), axis=1)  # [N]
    return {
        float(level): float(np.mean((pit >= 0.5 * (1.0 - level)) & (pit <= 0.5 * (1.0 + level))))
        for level in nominal
    }


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
    w, m, v, y = _check_mixture(weights, means, variances, targets=y, positive_variances=True)
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
    m = _as_float_array("means", means)
    v = _as_float_array("variances", variances)
    if v.shape != m.shape:
        raise ValueError(f"variances: expected the shape of means {m.shape}, got {v.shape}")
    if np.any(v < 0.0):
        raise ValueError(f"variances: expected non-negative values, got minimum {float(v.min())!r}")
    scale_array = _as_float_array("scale", scale)
    shift_array = _as_float_array("shift", shift)
    if scale_array.size != 1 or not np.isfinite(scale_array).all() or scale_array.item() <= 0:
        raise ValueError(f"scale: expected one finite positive number, got {scale!r}")
    if shift_array.size != 1 or not np.isfinite(shift_array).all():
        raise ValueError(f"shift: expected one finite number, got {shift!r}")
    s, c = scale_array.item(), shift_array.item()
    return m * s + c, v * s * s


# ------------------------------------------------------------------------------------------------
# Binary classification
# ------------------------------------------------------------------------------------------------


def probit_mixture_probability(
    weights: np.ndarray, means: np.ndarray, variances: np.ndarray
) -> np.ndarray:
    """``p(y = 1) = sum_s w_s Phi(m_s / sqrt(1 + v_s))`` for a latent mixture, probit link.

    Exact: ``E[Phi(f)] = Phi(m / sqrt(1 + v))`` for ``f ~ N(m, v)``.

    :param weights: ``[N, S]`` mixture weights, rows summing to one.
    :param means: ``[N, S]`` latent component means.
    :param variances: ``[N, S]`` latent component variances, non-negative.
    :return: ``[N]`` probabilities of the positive class.
    """
    w, m, v, _ = _check_mixture(weights, means, variances)
    return np.clip(np.sum(w * ndtr(m / np.sqrt(1.0 + v)), axis=1), 0.0, 1.0)


def error_rate(y: np.ndarray, probabilities: np.ndarray, threshold: float = 0.5) -> float:
    """Fraction misclassified when predicting class 1 exactly where ``p > threshold``.

    :param y: ``[N]`` (or ``[N, 1]``) labels in ``{0, 1}``.
    :param probabilities: ``[N]`` predicted ``p(y = 1)`` in ``[0, 1]``.
    :param threshold: decision threshold in ``[0, 1]``.
    :return: the misclassification rate.
    """
    labels = _check_labels(y)
    p = _check_probabilities("probabilities", probabilities, labels.shape[0])
    if not (isinstance(threshold, (int, float, np.number)) and 0.0 <= float(threshold) <= 1.0):
        raise ValueError(f"threshold: expected a number in [0, 1], got {threshold!r}")
    predicted = (p > float(threshold)).astype(np.float64)
    return float(np.mean(predicted != labels))


def brier_score(y: np.ndarray, probabilities: np.ndarray) -> float:
    """Mean squared error ``mean_n (p_n - y_n)^2`` of the predicted probabilities.

    :param y: ``[N]`` labels in ``{0, 1}``.
    :param probabilities: ``[N]`` predicted ``p(y = 1)`` in ``[0, 1]``.
    """
    labels = _check_labels(y)
    p = _check_probabilities("probabilities", probabilities, labels.shape[0])
    return float(np.mean((p - labels) ** 2))


def bernoulli_nll(y: np.ndarray, probabilities: np.ndarray) -> float:
    """Mean negative Bernoulli log likelihood, ``p`` clipped to ``[1e-12, 1 - 1e-12]``.

    :param y: ``[N]`` labels in ``{0, 1}``.
    :param probabilities: ``[N]`` predicted ``p(y = 1)`` in ``[0, 1]``.
    """
    labels = _check_labels(y)
    p = _check_probabilities("probabilities", probabilities, labels.shape[0])
    p = np.clip(p, PROBABILITY_CLIP, 1.0 - PROBABILITY_CLIP)
    return float(-np.mean(labels * np.log(p) + (1.0 - labels) * np.log1p(-p)))


def expected_calibration_error(
    y: np.ndarray, probabilities: np.ndarray, num_bins: int = 10
) -> float:
    """Top-label expected calibration error (Guo et al., 2017) with equal-width bins.

    The predicted label is 1 where ``p > 0.5`` (as :func:`error_rate`) and its confidence is
    ``max(p, 1 - p)``. Confidences fall in bins ``((b - 1) / B, b / B]`` (the first bin also
    holds 0); the ECE is ``sum_b (n_b / N) |accuracy_b - mean confidence_b|`` over non-empty
    bins. As confidences are at least 0.5, only the upper half of the bins is used.

    :param y: ``[N]`` labels in ``{0, 1}``.
    :param probabilities: ``[N]`` predicted ``p(y = 1)`` in ``[0, 1]``.
    :param num_bins: the number of bins ``B >= 1``.
    :return: the ECE in ``[0, 1]``.
    """
    labels = _check_labels(y)
    p = _check_probabilities("probabilities", probabilities, labels.shape[0])
    if isinstance(num_bins, bool) or not isinstance(num_bins, (int, np.integer)) or num_bins < 1:
        raise ValueError(f"num_bins: expected an integer >= 1, got {num_bins!r}")
    predicted = (p > 0.5).astype(np.float64)
    confidence = np.maximum(p, 1.0 - p)  # [N]
    correct = (predicted == labels).astype(np.float64)  # [N]
    edges = np.linspace(0.0, 1.0, int(num_bins) + 1)
    bins = np.clip(np.searchsorted(edges, confidence, side="left") - 1, 0, num_bins - 1)  # [N]
    accuracy_sums = np.bincount(bins, weights=correct, minlength=num_bins)  # [B]
    confidence_sums = np.bincount(bins, weights=confidence, minlength=num_bins)  # [B]
    # (n_b / N) |accuracy_b - confidence_b| = |sum_b correct - sum_b confidence| / N.
    return float(np.sum(np.abs(accuracy_sums - confidence_sums)) / labels.shape[0])


def classification_metrics(y: np.ndarray, probabilities: np.ndarray) -> dict[str, float]:
    """The standard binary-classification report.

    :param y: ``[N]`` (or ``[N, 1]``) labels in ``{0, 1}``.
    :param probabilities: ``[N]`` predicted ``p(y = 1)`` in ``[0, 1]`` (e.g. from
        :func:`probit_mixture_probability`).
    :return: ``nll`` (:func:`bernoulli_nll`), ``error_rate`` (threshold 0.5), ``brier``
        (:func:`brier_score`) and ``ece`` (:func:`expected_calibration_error`, 10 bins).
    """
    return {
        "nll": bernoulli_nll(y, probabilities),
        "error_rate": error_rate(y, probabilities),
        "brier": brier_score(y, probabilities),
        "ece": expected_calibration_error(y, probabilities),
    }


# ------------------------------------------------------------------------------------------------
# Ranking methods across datasets
# ------------------------------------------------------------------------------------------------


def _average_tied_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks ``1..M`` of ``values [M]`` (smallest first); ties share their average rank."""
    less = np.sum(values[None, :] < values[:, None], axis=1)  # [M]
    equal = np.sum(values[None, :] == values[:, None], axis=1)  # [M], counts itself
    return less + 0.5 * (equal + 1.0)


def average_ranks(
    scores: Mapping[str, Mapping[str, Sequence[float]]],
) -> dict[str, tuple[float, float]]:
    """Average rank of each method across datasets, as mean and spread over seeds.

    ``scores[dataset][method]`` is the per-seed list of a lower-is-better metric, seed ``k`` at
    index ``k``. For every seed ``k``, the methods are ranked within each dataset (rank 1 is the
    lowest score; ties get the average of the ranks they span, like ``scipy.stats.rankdata``) and
    the ranks are averaged over datasets. The result is the mean and the population standard
    deviation (``ddof = 0``) of these per-seed average ranks.

    Incomplete results: the methods are all those named in any dataset. A (dataset, seed ``k``)
    pair is used only if every method has a (non-NaN) value at index ``k`` in that dataset, so a
    dataset lacking a method is dropped entirely and a method with fewer seeds drops the later
    seeds of that dataset. Seeds with no usable dataset are left out of the mean and the spread.

    :param scores: ``{dataset: {method: [score per seed]}}``.
    :return: ``{method: (mean average rank, std over seeds)}`` in order of first appearance.
    :raises ValueError: if ``scores`` is malformed or no (dataset, seed) pair is comparable.
    """
    if not isinstance(scores, Mapping) or len(scores) == 0:
        raise ValueError(
            f"scores: expected a non-empty mapping dataset -> method -> list, got {scores!r}"
        )
    methods: list[str] = []
    tables: dict[str, dict[str, np.ndarray]] = {}
    for dataset, per_method in scores.items():
        if not isinstance(per_method, Mapping):
            raise ValueError(
                f"scores[{dataset!r}]: expected a mapping method -> list of scores, "
                f"got {type(per_method).__name__}"
            )
        tables[dataset] = {}
        for method, values in per_method.items():
            array = _as_float_array(f"scores[{dataset!r}][{method!r}]", values)
            if array.ndim != 1:
                raise ValueError(
                    f"scores[{dataset!r}][{method!r}]: expected a 1-D list of per-seed scores, "
                    f"got shape {array.shape}"
                )
            tables[dataset][method] = array
            if method not in methods:
                methods.append(method)
    num_seeds = max((len(a) for table in tables.values() for a in table.values()), default=0)

    per_seed_ranks = []  # one [M] vector of average ranks per usable seed
    for seed in range(num_seeds):
        ranks = []
        for table in tables.values():
            if not all(method in table and len(table[method]) > seed for method in methods):
                continue
            values = np.array([table[method][seed] for method in methods])  # [M]
            if np.any(np.isnan(values)):
                continue
            ranks.append(_average_tied_ranks(values))
        if ranks:
            per_seed_ranks.append(np.mean(ranks, axis=0))
    if not per_seed_ranks:
        raise ValueError(
            "scores: expected at least one dataset and seed where every method "
            f"({', '.join(map(repr, methods))}) has a score, got none"
        )
    stacked = np.stack(per_seed_ranks)  # [K, M]
    mean, std = stacked.mean(axis=0), stacked.std(axis=0)
    return {method: (float(mean[i]), float(std[i])) for i, method in enumerate(methods)}
