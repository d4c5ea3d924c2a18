"""``multiclass_metrics`` against values by hand, a loop reference and, for two classes, the
binary scores."""

from __future__ import annotations

import numpy as np
import pytest

from avdgp import metrics


def test_values_by_hand():
    p = np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6], [0.25, 0.5, 0.25]])
    y = np.array([0, 1, 1])
    scores = metrics.multiclass_metrics(y, p, num_bins=2)
    assert scores["error_rate"] == pytest.approx(1 / 3)
    assert scores["nll"] == pytest.approx(-(np.log(0.7) + np.log(0.3) + np.log(0.5)) / 3)
    brier = (0.3**2 + 0.2**2 + 0.1**2) + (0.1**2 + 0.7**2 + 0.6**2) + (0.25**2 + 0.5**2 + 0.25**2)
    assert scores["brier"] == pytest.approx(brier / 3)
    # confidences 0.7, 0.6 (wrong), 0.5: bins (0, 0.5] holds 0.5 (right), (0.5, 1] the others
    assert scores["ece"] == pytest.approx((abs(1 - 0.5) + abs(1 - 0.7 - 0.6)) / 3)


def test_against_a_loop_reference(rng):
    logits = rng.normal(size=(200, 4))
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = rng.integers(0, 4, size=200)
    scores = metrics.multiclass_metrics(y, p)
    nll = brier = errors = 0.0
    bins = [[] for _ in range(10)]
    for row, label in zip(p, y):
        nll -= np.log(row[label])
        brier += sum((row[k] - (k == label)) ** 2 for k in range(4))
        guess = int(np.argmax(row))
        errors += guess != label
        bins[min(int(np.ceil(row[guess] * 10)) - 1, 9)].append((row[guess], guess == label))
    ece = sum(abs(sum(c for _, c in b) - sum(q for q, _ in b)) for b in bins if b) / 200
    assert scores["nll"] == pytest.approx(nll / 200, rel=1e-12)
    assert scores["brier"] == pytest.approx(brier / 200, rel=1e-12)
    assert scores["error_rate"] == pytest.approx(errors / 200)
    assert scores["ece"] == pytest.approx(ece, rel=1e-12)


def test_two_classes_match_the_binary_scores(rng):
    p1 = rng.uniform(0.01, 0.99, size=300)
    y = (rng.uniform(size=300) < p1).astype(float)
    ours = metrics.multiclass_metrics(y, np.stack([1.0 - p1, p1], axis=1))
    binary = metrics.classification_metrics(y, p1)
    for key in ("nll", "error_rate", "ece"):
        assert ours[key] == pytest.approx(binary[key], rel=1e-12), key
    assert ours["brier"] == pytest.approx(2.0 * binary["brier"], rel=1e-12)


@pytest.mark.parametrize(
    "y, p, message",
    [
        ([0, 3], [[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]], r"y: expected class indices 0..2, row 1 is 3"),
        ([0, 0.5], [[0.5, 0.5], [0.2, 0.8]], r"row 1 is 0.5"),
        ([0, 1], [[0.5, 0.4], [0.2, 0.8]], r"rows must sum to 1, row 0 sums to 0.9"),
        ([0, 1], [[1.2, -0.2], [0.2, 0.8]], r"expected values in \[0, 1\], row 0"),
        ([0, 1, 1], [[0.5, 0.5], [0.2, 0.8]], r"y: expected shape \[2\]"),
        ([0], [[1.0]], r"expected shape \[N, K\] with K >= 2"),
    ],
)
def test_bad_inputs_are_named(y, p, message):
    with pytest.raises(ValueError, match=message):
        metrics.multiclass_metrics(np.array(y), np.array(p))
