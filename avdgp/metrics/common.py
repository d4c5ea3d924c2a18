"""What the metric modules share: checks of their arrays (one-line ``ValueError`` naming the
argument and the bad row) and the normal density and CDF."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
from scipy.special import ndtr

__all__ = [
    "DEFAULT_CHUNK_ROWS",
    "WEIGHT_SUM_TOLERANCE",
    "as_float_array",
    "check_chunk_rows",
    "check_labels",
    "check_mixture",
    "check_open_unit_interval",
    "check_probabilities",
    "check_vector",
    "mixture_moments",
    "normal_cdf",
]

#: Most rows processed at once by the pairwise CRPS term and the quantile solver.
DEFAULT_CHUNK_ROWS = 4096
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
#: Allowed deviation of a row of ``weights`` from summing to one.
WEIGHT_SUM_TOLERANCE = 1e-6


def as_float_array(name: str, value: object) -> np.ndarray:
    """Return ``value`` as a float64 array, or raise ``ValueError`` naming ``name``."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name}: expected a numeric array, got {type(value).__name__}") from error
    return array


def squeeze_trailing(array: np.ndarray, ndim: int) -> np.ndarray:
    """Drop a trailing singleton axis if ``array`` has exactly one axis more than ``ndim``."""
    if array.ndim == ndim + 1 and array.shape[-1] == 1:
        return array[..., 0]
    return array


def check_finite(name: str, array: np.ndarray) -> None:
    if not np.all(np.isfinite(array)):
        raise ValueError(
            f"{name}: expected finite values, got {np.sum(~np.isfinite(array))} NaN/inf"
        )


def check_vector(name: str, value: object, num_rows: Optional[int] = None) -> np.ndarray:
    """Return ``value`` as a finite float64 vector ``[N]`` (``[N, 1]`` is squeezed).

    :param num_rows: the required ``N``; ``None`` accepts any ``N >= 1``.
    """
    array = squeeze_trailing(as_float_array(name, value), 1)
    expected = "[N]" if num_rows is None else f"[{num_rows}]"
    if array.ndim != 1 or (num_rows is not None and array.shape[0] != num_rows):
        raise ValueError(f"{name}: expected shape {expected} (or [N, 1]), got {array.shape}")
    if array.shape[0] == 0:
        raise ValueError(f"{name}: expected at least one row, got shape {array.shape}")
    check_finite(name, array)
    return array


def check_mixture(
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
    w = squeeze_trailing(as_float_array("weights", weights), 2)
    if w.ndim != 2:
        raise ValueError(f"weights: expected shape [N, S] (or [N, S, 1]), got {w.shape}")
    if w.shape[0] == 0 or w.shape[1] == 0:
        raise ValueError(f"weights: expected N >= 1 rows and S >= 1 components, got {w.shape}")
    m = squeeze_trailing(as_float_array("means", means), 2)
    v = squeeze_trailing(as_float_array("variances", variances), 2)
    for name, array in (("means", m), ("variances", v)):
        if array.shape != w.shape:
            raise ValueError(
                f"{name}: expected the shape of weights {w.shape} (or with a trailing 1), "
                f"got {array.shape}"
            )
    for name, array in (("weights", w), ("means", m), ("variances", v)):
        check_finite(name, array)
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
    y = None if targets is None else check_vector(targets_name, targets, w.shape[0])
    return w, m, v, y


def check_labels(y: object) -> np.ndarray:
    """Return binary labels as a float64 vector ``[N]``; raise unless every label is 0 or 1."""
    labels = check_vector("y", y)
    if not np.all((labels == 0.0) | (labels == 1.0)):
        bad = labels[(labels != 0.0) & (labels != 1.0)]
        raise ValueError(f"y: expected binary labels in {{0, 1}}, got e.g. {float(bad[0])!r}")
    return labels


def check_probabilities(name: str, probabilities: object, num_rows: int) -> np.ndarray:
    """Return probabilities as a float64 vector ``[num_rows]``; raise unless all in ``[0, 1]``."""
    p = check_vector(name, probabilities, num_rows)
    if np.any((p < 0.0) | (p > 1.0)):
        raise ValueError(
            f"{name}: expected values in [0, 1], got range [{float(p.min())!r}, {float(p.max())!r}]"
        )
    return p


def check_open_unit_interval(name: str, value: object) -> np.ndarray:
    """Return a 1-D float64 array of values strictly inside ``(0, 1)``."""
    array = np.atleast_1d(as_float_array(name, value))
    if array.ndim != 1 or array.size == 0:
        raise ValueError(
            f"{name}: expected a scalar or a non-empty 1-D sequence, got {array.shape}"
        )
    if not np.all((array > 0.0) & (array < 1.0)):
        raise ValueError(f"{name}: expected values strictly between 0 and 1, got {array.tolist()}")
    return array


def check_chunk_rows(chunk_rows: object) -> int:
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, (int, np.integer)):
        raise ValueError(f"chunk_rows: expected an integer >= 1, got {chunk_rows!r}")
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows: expected an integer >= 1, got {chunk_rows!r}")
    return int(chunk_rows)


def normal_cdf(x: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """``Phi((x - mean) / std)``; a zero ``std`` is a point mass (CDF ``1{x >= mean}``)."""
    positive = std > 0.0
    z = (x - mean) / np.where(positive, std, 1.0)
    return np.where(positive, ndtr(z), (x >= mean).astype(np.float64))


def mixture_moments(
    weights: np.ndarray, means: np.ndarray, variances: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and total variance of per-row Gaussian mixtures, without checks (law of total
    variance: ``sum_s w_s (v_s + (m_s - mean)^2)``, the stable form).

    The TensorFlow twin is :func:`gpflux_avdgp.core.mixture.mixture_moments`.

    :param weights: ``[N, S]``.
    :param means: ``[N, S]`` or ``[N, S, Q]``.
    :param variances: the shape of ``means``.
    :returns: ``mean`` and ``variance``, ``[N]`` or ``[N, Q]``.
    """
    w = weights.reshape(weights.shape + (1,) * (means.ndim - 2))  # [N, S(, 1)]
    mean = np.sum(w * means, axis=1)  # [N(, Q)]
    centred = means - np.expand_dims(mean, 1)  # [N, S(, Q)]
    return mean, np.sum(w * (variances + centred**2), axis=1)
