"""Scores of binary predictions ``p(y = 1)``: error rate, Brier score, NLL, calibration."""

from __future__ import annotations

import numpy as np

from .common import check_labels, check_probabilities

__all__ = [
    "bernoulli_nll",
    "brier_score",
    "classification_metrics",
    "error_rate",
    "expected_calibration_error",
]

#: Probabilities are clipped to ``[EPS, 1 - EPS]`` inside :func:`bernoulli_nll`.
PROBABILITY_CLIP = 1e-12


def error_rate(y: np.ndarray, probabilities: np.ndarray, threshold: float = 0.5) -> float:
    """Fraction misclassified when predicting class 1 exactly where ``p > threshold``.

    :param y: ``[N]`` (or ``[N, 1]``) labels in ``{0, 1}``.
    :param probabilities: ``[N]`` predicted ``p(y = 1)`` in ``[0, 1]``.
    :param threshold: decision threshold in ``[0, 1]``.
    :return: the misclassification rate.
    """
    labels = check_labels(y)
    p = check_probabilities("probabilities", probabilities, labels.shape[0])
    if not (isinstance(threshold, (int, float, np.number)) and 0.0 <= float(threshold) <= 1.0):
        raise ValueError(f"threshold: expected a number in [0, 1], got {threshold!r}")
    predicted = (p > float(threshold)).astype(np.float64)
    return float(np.mean(predicted != labels))


def brier_score(y: np.ndarray, probabilities: np.ndarray) -> float:
    """Mean squared error ``mean_n (p_n - y_n)^2`` of the predicted probabilities.

    :param y: ``[N]`` labels in ``{0, 1}``.
    :param probabilities: ``[N]`` predicted ``p(y = 1)`` in ``[0, 1]``.
    """
    labels = check_labels(y)
    p = check_probabilities("probabilities", probabilities, labels.shape[0])
    return float(np.mean((p - labels) ** 2))


def bernoulli_nll(y: np.ndarray, probabilities: np.ndarray) -> float:
    """Mean negative Bernoulli log likelihood, ``p`` clipped to ``[1e-12, 1 - 1e-12]``.

    :param y: ``[N]`` labels in ``{0, 1}``.
    :param probabilities: ``[N]`` predicted ``p(y = 1)`` in ``[0, 1]``.
    """
    labels = check_labels(y)
    p = check_probabilities("probabilities", probabilities, labels.shape[0])
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
    labels = check_labels(y)
    p = check_probabilities("probabilities", probabilities, labels.shape[0])
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
    :param probabilities: ``[N]`` predicted ``p(y = 1)`` in ``[0, 1]`` (e.g. a model's
        ``PredictiveMixture.class_probabilities()``).
    :return: ``nll`` (:func:`bernoulli_nll`), ``error_rate`` (threshold 0.5), ``brier``
        (:func:`brier_score`) and ``ece`` (:func:`expected_calibration_error`, 10 bins).
    """
    return {
        "nll": bernoulli_nll(y, probabilities),
        "error_rate": error_rate(y, probabilities),
        "brier": brier_score(y, probabilities),
        "ece": expected_calibration_error(y, probabilities),
    }
