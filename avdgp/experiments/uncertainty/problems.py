"""The problems of ``avdgp uncertainty`` beyond the original ``far``/``gap`` sine: four 1-D
functions with a gap and a far field, a 2-D square with a hole, and covariate shifts of real
data along its most spread inputs and its first principal component.

* 1-D (:data:`FUNCTIONS`): ``x`` uniform on ``[-2, 2]`` without the gap ``(-0.6, 0.6)``
  (1.2 wide); 1000 training, 200 validation and 1000 in-data test rows. Scored in the gap
  against the noise-free function and at 0.5, 1 and 3 data widths (4) beyond the data.
* ``hole``: ``x`` uniform on ``[-2, 2]^2`` without the disc of radius 0.8 around the origin.
* ``NAME@COLUMN`` / ``NAME@pc1``: UCI set ``NAME`` trained below the 80th percentile of input
  ``COLUMN`` (or of the first principal component of the standardised inputs), tested above.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from avdgp import metrics
from avdgp.data import Split

__all__ = [
    "DATA_WIDTH",
    "FAR_WIDTHS",
    "FUNCTIONS",
    "GAP",
    "HOLE_RADIUS",
    "SHIFT_MARK",
    "function_scores",
    "function_split",
    "hole_scores",
    "hole_split",
    "principal_component",
    "spread_columns",
]

#: ``name: (f(x), noise std(x))`` of the 1-D problems; ``x`` ``[N, 1]``.
FUNCTIONS: dict[str, tuple[Callable, Callable]] = {
    "trend": (lambda x: 0.8 * x + 0.3 * np.sin(3.0 * x), lambda x: 0.1 + 0.0 * x),
    "kink": (lambda x: 1.5 * np.abs(x) - 1.0, lambda x: 0.1 + 0.0 * x),
    "hetero": (lambda x: np.sin(2.0 * x), lambda x: 0.05 + 0.25 * np.clip((x + 2.0) / 4.0, 0, 1)),
    "wiggle": (lambda x: np.sin(6.0 * x) + 0.3 * x, lambda x: 0.1 + 0.0 * x),
}
DOMAIN = (-2.0, 2.0)
DATA_WIDTH = DOMAIN[1] - DOMAIN[0]
GAP = (-0.6, 0.6)
#: Far-field probes: this many data widths beyond either end of the data.
FAR_WIDTHS = (0.5, 1.0, 3.0)
HOLE_RADIUS = 0.8
#: ``NAME@COLUMN`` or ``NAME@pc1`` names a shift of UCI set ``NAME``.
SHIFT_MARK = "@"


def _one_d_inputs(rng: np.random.Generator, count: int) -> np.ndarray:
    """``count`` points uniform on the domain without the gap, ``[count, 1]``."""
    left, right = GAP[0] - DOMAIN[0], DOMAIN[1] - GAP[1]
    u = rng.uniform(0.0, left + right, (count, 1))
    return np.where(u < left, DOMAIN[0] + u, GAP[1] + (u - left))


def function_split(name: str, seed: int) -> Split:
    """1000 training, 200 validation and 1000 in-data test rows of 1-D problem ``name``."""
    function, noise = FUNCTIONS[name]
    rng = np.random.default_rng(seed)
    parts = [_one_d_inputs(rng, count) for count in (1000, 200, 1000)]
    targets = [function(x) + noise(x) * rng.standard_normal(x.shape) for x in parts]
    return Split(parts[0], targets[0], parts[1], targets[1], parts[2], targets[2])


def hole_function(x: np.ndarray) -> np.ndarray:
    """The 2-D problem's noise-free function, ``[N, 2] -> [N, 1]``."""
    return np.sin(1.5 * x[:, :1]) + 0.7 * np.cos(1.5 * x[:, 1:]) + 0.3 * x[:, :1] * x[:, 1:]


def hole_inputs(rng: np.random.Generator, count: int) -> np.ndarray:
    """``count`` points uniform on ``[-2, 2]^2`` outside the hole, ``[count, 2]``."""
    kept = np.empty((0, 2))
    while len(kept) < count:
        x = rng.uniform(*DOMAIN, (2 * count, 2))
        kept = np.concatenate([kept, x[np.hypot(x[:, 0], x[:, 1]) > HOLE_RADIUS]])
    return kept[:count]


def hole_split(seed: int) -> Split:
    """1000 training, 200 validation and 1000 in-data test rows of ``hole`` (noise 0.1)."""
    rng = np.random.default_rng(seed)
    parts = [hole_inputs(rng, count) for count in (1000, 200, 1000)]
    targets = [hole_function(x) + 0.1 * rng.standard_normal((len(x), 1)) for x in parts]
    return Split(parts[0], targets[0], parts[1], targets[1], parts[2], targets[2])


def spread_columns(inputs: np.ndarray, count: int = 3) -> list[int]:
    """The ``count`` inputs with the most distinct values (ties: the lower column), leaving
    out identifier-like columns (a shift along a subject number splits by subject, not by
    value). ``inputs`` ``[N, D]``."""
    candidates = [c for c in range(inputs.shape[1]) if not _identifier_like(inputs[:, c])]
    distinct = {c: len(np.unique(inputs[:, c])) for c in candidates}
    return sorted(candidates, key=lambda c: (-distinct[c], c))[:count]


def _identifier_like(column: np.ndarray) -> bool:
    """20 or more values one apart, each on 10 rows or more on average (subjects ``1 ... 42``,
    perhaps centred)."""
    values = np.unique(column)
    consecutive = len(values) > 1 and np.allclose(np.diff(values), 1.0, atol=1e-3)
    return bool(consecutive and 20 <= len(values) <= len(column) / 10)


def principal_component(inputs: np.ndarray) -> np.ndarray:
    """The first principal component of the standardised inputs without identifier-like
    columns, ``[N]`` (its sign: the largest loading positive)."""
    columns = [c for c in range(inputs.shape[1]) if not _identifier_like(inputs[:, c])]
    x = inputs[:, columns]
    std = x.std(axis=0)
    x = (x - x.mean(axis=0)) / np.where(std > 0, std, 1.0)
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    loading = vt[0] * np.sign(vt[0][np.argmax(np.abs(vt[0]))])
    return x @ loading


# ----------------------------------------------------------------------------- scores
#: ``predict(x [N, D]) -> (weights, f_means, f_variances, y_means, y_variances)``, each
#: ``[N, S]`` (one output).
Predict = Callable[[np.ndarray], tuple]


def _region_scores(predict: Predict, x, truth, y, suffix: str, reference_std: float) -> dict:
    """In a region without data: RMSE of the mean against the noise-free ``truth`` ``[N]``,
    the share of it inside the central 95 % band of ``f``, the NLL of noisy draws ``y`` ``[N]``
    at the same points and the mean std of ``y`` over ``reference_std``."""
    weights, f_means, f_variances, y_means, y_variances = predict(x)
    f_cover = metrics.central_interval_coverage(truth, weights, f_means, f_variances, 0.95)
    mean, variance = metrics.mixture_mean_and_variance(weights, y_means, y_variances)
    return {
        f"{suffix}_rmse": metrics.rmse(truth, mean),
        f"{suffix}_f_coverage": f_cover[0.95],
        f"{suffix}_nll": metrics.gaussian_mixture_nll(y, weights, y_means, y_variances),
        f"{suffix}_std_ratio": float(np.mean(np.sqrt(variance)) / reference_std),
    }


def _mean_std(predict: Predict, x: np.ndarray) -> float:
    weights, _, _, y_means, y_variances = predict(x)
    return float(
        np.mean(np.sqrt(metrics.mixture_mean_and_variance(weights, y_means, y_variances)[1]))
    )


def function_scores(name: str, predict: Predict, seed: int) -> dict:
    """The gap and far-field scores of 1-D problem ``name`` (draws of ``y`` by ``seed``):
    ``std_in_data``; ``gap_*`` (:func:`_region_scores`); ``far_ratio_<w>``, the mean std of
    ``y`` ``w`` data widths beyond either end over ``std_in_data``; ``beyond_coverage_95`` and
    ``beyond_nll`` of draws of ``y`` up to half a data width beyond the data."""
    function, noise = FUNCTIONS[name]
    rng = np.random.default_rng(10_000 + seed)
    inside = _one_d_inputs(np.random.default_rng(0), 400)
    scores = {"std_in_data": _mean_std(predict, inside)}
    gap = rng.uniform(*GAP, (500, 1))
    noisy = function(gap) + noise(gap) * rng.standard_normal(gap.shape)
    scores.update(
        _region_scores(predict, gap, function(gap)[:, 0], noisy[:, 0], "gap", scores["std_in_data"])
    )
    for width in FAR_WIDTHS:
        probes = np.array([[DOMAIN[0] - width * DATA_WIDTH], [DOMAIN[1] + width * DATA_WIDTH]])
        scores[f"far_ratio_{width:g}"] = _mean_std(predict, probes) / scores["std_in_data"]
    side = rng.uniform(0.0, DATA_WIDTH / 2, (500, 1))
    beyond = np.where(rng.random((500, 1)) < 0.5, DOMAIN[0] - side, DOMAIN[1] + side)
    y = (function(beyond) + noise(beyond) * rng.standard_normal(beyond.shape))[:, 0]
    weights, _, _, y_means, y_variances = predict(beyond)
    cover = metrics.central_interval_coverage(y, weights, y_means, y_variances, 0.95)
    scores["beyond_coverage_95"] = cover[0.95]
    scores["beyond_nll"] = metrics.gaussian_mixture_nll(y, weights, y_means, y_variances)
    return scores


def hole_scores(predict: Predict, seed: int) -> dict:
    """``std_in_data`` on the data's square and ``hole_*`` (:func:`_region_scores`) inside the
    hole, with draws of ``y`` by ``seed``."""
    rng = np.random.default_rng(10_000 + seed)
    inside = hole_inputs(np.random.default_rng(0), 400)
    radius, angle = HOLE_RADIUS * np.sqrt(rng.random(500)), rng.uniform(0, 2 * np.pi, 500)
    hole = np.column_stack([radius * np.cos(angle), radius * np.sin(angle)])
    truth = hole_function(hole)[:, 0]
    noisy = truth + 0.1 * rng.standard_normal(len(hole))
    std_in = _mean_std(predict, inside)
    return {"std_in_data": std_in, **_region_scores(predict, hole, truth, noisy, "hole", std_in)}
