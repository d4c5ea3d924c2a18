"""Scores of K-class predictions ``p(y = k)``, ``[N, K]``: error rate, NLL, Brier score and
top-label calibration error, the K-class forms of :mod:`.classification`'s binary scores.

For ``K = 2`` with ``probabilities[:, 1] = p``: the error rate, NLL and ECE equal the binary
ones (ties at ``p = 0.5`` aside: ``argmax`` picks class 0, the binary rule too), and the Brier
score, summed over the classes as is usual for K classes, is twice the binary one.
"""

from __future__ import annotations

import numpy as np

from .classification import PROBABILITY_CLIP
from .common import WEIGHT_SUM_TOLERANCE, as_float_array, check_finite, squeeze_trailing

__all__ = ["check_class_probabilities", "multiclass_metrics"]


def check_class_probabilities(y: object, probabilities: object) -> tuple[np.ndarray, np.ndarray]:
    """``(labels [N] int, probabilities [N, K])`` after checks with one-line messages.

    :raises ValueError: for labels that are not integers in ``[0, K)``, probabilities outside
        ``[0, 1]`` or rows that do not sum to one (to ``1e-6``), or mismatched rows.
    """
    p = as_float_array("probabilities", probabilities)
    if p.ndim != 2 or p.shape[1] < 2 or p.shape[0] < 1:
        raise ValueError(f"probabilities: expected shape [N, K] with K >= 2, got {p.shape}")
    check_finite("probabilities", p)
    if np.any(p < 0.0) or np.any(p > 1.0):
        row = int(np.argwhere((p < 0.0) | (p > 1.0))[0, 0])
        raise ValueError(f"probabilities: expected values in [0, 1], row {row} is {p[row]}")
    sums = p.sum(axis=1)
    if np.any(np.abs(sums - 1.0) > WEIGHT_SUM_TOLERANCE):
        row = int(np.argmax(np.abs(sums - 1.0)))
        raise ValueError(f"probabilities: rows must sum to 1, row {row} sums to {sums[row]!r}")
    labels = squeeze_trailing(as_float_array("y", y), 1)
    if labels.shape != (p.shape[0],):
        raise ValueError(
            f"y: expected shape [{p.shape[0]}] (one label per row), got {labels.shape}"
        )
    bad = (labels != np.round(labels)) | (labels < 0) | (labels >= p.shape[1])
    if np.any(bad):
        row = int(np.argmax(bad))
        raise ValueError(
            f"y: expected class indices 0..{p.shape[1] - 1}, row {row} is {labels[row]!r}"
        )
    return labels.astype(np.int64), p


def multiclass_metrics(
    y: np.ndarray, probabilities: np.ndarray, num_bins: int = 10
) -> dict[str, float]:
    """The K-class report.

    :param y: ``[N]`` (or ``[N, 1]``) class indices in ``0..K-1``.
    :param probabilities: ``[N, K]`` predicted class probabilities, rows summing to one.
    :param num_bins: equal-width confidence bins of the ECE.
    :return: ``nll`` (``-mean log p(y_n)``, clipped at ``1e-12``), ``error_rate`` (argmax),
        ``brier`` (``mean_n sum_k (p_nk - [y_n = k])^2``) and ``ece`` (top-label: confidence
        ``max_k p_nk`` in bins ``((b - 1) / B, b / B]``, ``sum_b (n_b / N) |accuracy_b -
        confidence_b|``).
    """
    labels, p = check_class_probabilities(y, probabilities)
    if isinstance(num_bins, bool) or not isinstance(num_bins, (int, np.integer)) or num_bins < 1:
        raise ValueError(f"num_bins: expected an integer >= 1, got {num_bins!r}")
    rows = np.arange(len(labels))
    true_probability = p[rows, labels]  # [N]
    predicted = np.argmax(p, axis=1)  # [N]
    one_hot = np.zeros_like(p)
    one_hot[rows, labels] = 1.0
    confidence = p[rows, predicted]  # [N]
    correct = (predicted == labels).astype(np.float64)  # [N]
    edges = np.linspace(0.0, 1.0, int(num_bins) + 1)
    bins = np.clip(np.searchsorted(edges, confidence, side="left") - 1, 0, num_bins - 1)
    accuracy_sums = np.bincount(bins, weights=correct, minlength=num_bins)  # [B]
    confidence_sums = np.bincount(bins, weights=confidence, minlength=num_bins)  # [B]
    return {
        "nll": float(-np.mean(np.log(np.clip(true_probability, PROBABILITY_CLIP, 1.0)))),
        "error_rate": float(1.0 - correct.mean()),
        "brier": float(np.mean(np.sum((p - one_hot) ** 2, axis=1))),
        "ece": float(np.sum(np.abs(accuracy_sums - confidence_sums)) / len(labels)),
    }
