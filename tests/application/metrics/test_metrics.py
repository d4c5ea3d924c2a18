"""``avdgp.metrics`` against scoringrules, quadrature, SciPy loops and values by hand."""

import math

import numpy as np
import pytest
import scoringrules
from scipy import integrate, stats

from avdgp import metrics

RTOL = 1e-10
ATOL = 1e-12


def random_mixture(rng: np.random.Generator, n: int, s: int, *, zero_weights: bool = False):
    """``weights, means, variances``, each ``[n, s]``, with well-spread random components."""
    weights = rng.dirichlet(np.ones(s), size=n)
    if zero_weights and s > 1:
        weights[:, 0] = 0.0
        weights /= weights.sum(axis=1, keepdims=True)
    means = rng.normal(scale=2.0, size=(n, s))
    variances = np.exp(rng.normal(scale=1.0, size=(n, s)))
    return weights, means, variances


def sample_mixture(rng, weights, means, variances):
    """One draw ``[N]`` from every row's mixture."""
    cumulative = np.cumsum(weights, axis=1)
    u = rng.uniform(size=(weights.shape[0], 1))
    component = np.minimum(np.sum(u > cumulative, axis=1), weights.shape[1] - 1)
    rows = np.arange(weights.shape[0])
    return rng.normal(means[rows, component], np.sqrt(variances[rows, component]))


# ------------------------------------------------------------------------------------------------
# CRPS
# ------------------------------------------------------------------------------------------------


def test_gaussian_crps_matches_scoringrules(rng):
    y = rng.normal(scale=3.0, size=200)
    mean = rng.normal(size=200)
    variance = np.exp(rng.normal(scale=2.0, size=200))
    expected = scoringrules.crps_normal(y, mean, np.sqrt(variance), backend="numpy")
    np.testing.assert_allclose(metrics.gaussian_crps(y, mean, variance), expected, RTOL, ATOL)
    # One component: the mixture formula reduces to the Gaussian one.
    one = np.ones((200, 1))
    np.testing.assert_allclose(
        metrics.gaussian_mixture_crps(y, one, mean[:, None], variance[:, None]),
        expected,
        RTOL,
        ATOL,
    )


@pytest.mark.parametrize("num_components", [1, 2, 7, 33])
@pytest.mark.parametrize("zero_weights", [False, True])
def test_mixture_crps_matches_scoringrules(rng, num_components, zero_weights):
    weights, means, variances = random_mixture(rng, 300, num_components, zero_weights=zero_weights)
    y = sample_mixture(rng, weights, means, variances) + rng.normal(scale=2.0, size=300)
    # scoringrules 0.10: crps_mixnorm(obs, m, s, w, m_axis=-1): s are standard deviations,
    # the components lie along m_axis.
    expected = scoringrules.crps_mixnorm(
        y, means, np.sqrt(variances), weights, m_axis=-1, backend="numpy"
    )
    actual = metrics.gaussian_mixture_crps(y, weights, means, variances)
    assert actual.shape == (300,)
    np.testing.assert_allclose(actual, expected, RTOL, ATOL)
    assert metrics.mean_crps(y, weights, means, variances) == pytest.approx(np.mean(expected))


def _crps_by_quadrature(y: float, weights, means, variances) -> float:
    """``int (F(z) - 1{z >= y})^2 dz`` with ``F`` from ``scipy.stats.norm``."""
    std = np.sqrt(variances)

    def cdf(z):
        return float(np.sum(weights * stats.norm.cdf(z, means, std)))

    lo = min(np.min(means - 40 * std), y) - 1.0
    hi = max(np.max(means + 40 * std), y) + 1.0
    kinks = sorted(set(np.concatenate([means, [y]])))
    below, _ = integrate.quad(
        lambda z: cdf(z) ** 2,
        lo,
        y,
        points=[k for k in kinks if lo < k < y],
        limit=500,
        epsabs=1e-13,
        epsrel=1e-12,
    )
    above, _ = integrate.quad(
        lambda z: (1.0 - cdf(z)) ** 2,
        y,
        hi,
        points=[k for k in kinks if y < k < hi],
        limit=500,
        epsabs=1e-13,
        epsrel=1e-12,
    )
    return below + above


@pytest.mark.parametrize(
    "y, weights, means, variances",
    [
        (0.3, [1.0], [0.0], [1.0]),
        (1.7, [0.2, 0.5, 0.3], [-1.0, 0.5, 3.0], [0.25, 1.0, 4.0]),
        (-4.0, [0.9, 0.1], [2.0, -6.0], [0.01, 0.5]),
    ],
)
def test_mixture_crps_matches_quadrature(y, weights, means, variances):
    weights, means, variances = map(np.asarray, (weights, means, variances))
    expected = _crps_by_quadrature(y, weights, means, variances)
    actual = metrics.gaussian_mixture_crps([y], weights[None], means[None], variances[None])
    np.testing.assert_allclose(actual, [expected], rtol=1e-8)


def test_crps_is_not_the_reference_codes_erf_bug():
    """docs/design.md, "Reference-code mistakes": the reference code's CRPS uses ``erf(z)``
    for ``erf(z / sqrt(2))``."""
    ours = metrics.gaussian_crps([1.0], [0.0], [1.0])[0]
    z = 1.0
    buggy = z * math.erf(z) + 2 * stats.norm.pdf(z) - 1 / math.sqrt(math.pi)
    assert buggy == pytest.approx(0.76245, abs=1e-5)
    assert ours == pytest.approx(0.602441, abs=1e-6)
    assert abs(ours - buggy) > 0.15
    mixture = metrics.gaussian_mixture_crps([1.0], [[0.5, 0.5]], [[0.0, 0.0]], [[1.0, 1.0]])
    assert mixture[0] == pytest.approx(ours, rel=1e-12)


def test_crps_chunking_does_not_change_values(rng):
    weights, means, variances = random_mixture(rng, 101, 5)
    y = rng.normal(size=101)
    whole = metrics.gaussian_mixture_crps(y, weights, means, variances)
    for chunk_rows in (1, 7, 100, 101):
        chunked = metrics.gaussian_mixture_crps(y, weights, means, variances, chunk_rows=chunk_rows)
        np.testing.assert_allclose(chunked, whole, rtol=1e-13, atol=1e-15)


def test_crps_of_point_masses_is_the_ensemble_energy_form(rng):
    samples = rng.normal(size=(20, 6))
    y = rng.normal(size=20)
    weights = np.full((20, 6), 1 / 6)
    expected = np.mean(np.abs(samples - y[:, None]), axis=1) - 0.5 * np.mean(
        np.abs(samples[:, :, None] - samples[:, None, :]), axis=(1, 2)
    )
    actual = metrics.gaussian_mixture_crps(y, weights, samples, np.zeros_like(samples))
    np.testing.assert_allclose(actual, expected, RTOL, ATOL)
    np.testing.assert_allclose(
        metrics.gaussian_crps(y, samples[:, 0], np.zeros(20)), np.abs(y - samples[:, 0]), RTOL
    )


# ------------------------------------------------------------------------------------------------
# Log density, moments, RMSE
# ------------------------------------------------------------------------------------------------


def test_log_density_matches_scipy_loop(rng):
    weights, means, variances = random_mixture(rng, 40, 4, zero_weights=True)
    y = rng.normal(scale=2.0, size=40)
    expected = np.empty(40)
    for n in range(40):
        density = 0.0
        for s in range(4):
            density += weights[n, s] * stats.norm.pdf(y[n], means[n, s], np.sqrt(variances[n, s]))
        expected[n] = np.log(density)
    actual = metrics.gaussian_mixture_log_density(y, weights, means, variances)
    np.testing.assert_allclose(actual, expected, RTOL, ATOL)
    assert metrics.gaussian_mixture_nll(y, weights, means, variances) == pytest.approx(
        -np.mean(expected), rel=1e-12
    )


def test_log_density_is_stable_for_tiny_variances_far_from_the_target():
    weights = np.array([[0.3, 0.7]])
    means = np.array([[1.0, 2.0]])
    variances = np.array([[1e-12, 1e-12]])
    y = np.array([0.0])
    with np.errstate(divide="ignore"):
        naive = np.log(np.sum(weights * stats.norm.pdf(y[:, None], means, np.sqrt(variances))))
    assert naive == -np.inf
    # log-sum-exp by hand: the second component is exp(-1.5e12) times the first.
    log_first = np.log(0.3) - 0.5 * np.log(2 * np.pi * 1e-12) - 0.5 * 1.0 / 1e-12
    actual = metrics.gaussian_mixture_log_density(y, weights, means, variances)
    assert np.isfinite(actual).all()
    np.testing.assert_allclose(actual, [log_first], rtol=1e-14)


def test_log_density_ignores_a_zero_weight_component_with_a_huge_density():
    # The zero-weight component has log density ~ +13.4 at y; the other ~ -13.4.
    weights = np.array([[1.0, 0.0]])
    means = np.array([[5.0, 0.0]])
    variances = np.array([[1.0, 1e-12]])
    actual = metrics.gaussian_mixture_log_density([0.0], weights, means, variances)
    np.testing.assert_allclose(actual, [stats.norm.logpdf(0.0, 5.0, 1.0)], rtol=1e-14)


def test_trailing_singleton_axes_are_squeezed(rng):
    weights, means, variances = random_mixture(rng, 10, 3)
    y = rng.normal(size=10)
    flat = metrics.regression_metrics(y, weights, means, variances)
    padded = metrics.regression_metrics(
        y[:, None], weights[..., None], means[..., None], variances[..., None]
    )
    assert flat == padded
    np.testing.assert_array_equal(
        metrics.gaussian_mixture_crps(y[:, None], weights, means[..., None], variances),
        metrics.gaussian_mixture_crps(y, weights, means, variances),
    )


def test_mixture_moments_of_several_outputs_equal_one_output_at_a_time(rng):
    """The unchecked ``[N, S, Q]`` form shared with ``PredictiveMixture`` scores each output
    like the checked ``[N, S]`` one."""
    from avdgp.metrics.common import mixture_moments

    weights, means, variances = random_mixture(rng, 8, 5)
    spread = np.stack([means, 2.0 * means - 1.0, -means], axis=-1)  # [N, S, 3]
    widths = np.stack([variances, 0.5 * variances, variances + 1.0], axis=-1)
    mean, variance = mixture_moments(weights, spread, widths)
    assert mean.shape == variance.shape == (8, 3)
    for q in range(3):
        single = metrics.mixture_mean_and_variance(weights, spread[..., q], widths[..., q])
        np.testing.assert_allclose(mean[:, q], single[0], RTOL, ATOL)
        np.testing.assert_allclose(variance[:, q], single[1], RTOL, ATOL)


def test_mixture_moments_use_the_law_of_total_variance(rng):
    weights, means, variances = random_mixture(rng, 8, 5)
    mean, variance = metrics.mixture_mean_and_variance(weights, means, variances)
    expected_mean = np.sum(weights * means, axis=1)
    expected_variance = np.sum(weights * (variances + means**2), axis=1) - expected_mean**2
    np.testing.assert_allclose(mean, expected_mean, RTOL, ATOL)
    np.testing.assert_allclose(variance, expected_variance, 1e-10, 1e-12)
    # Not the average of the component variances: the means are spread out.
    assert np.all(variance > np.sum(weights * variances, axis=1) + 1e-3)
    # Monte Carlo on the first row.
    draws = sample_mixture(
        rng,
        np.repeat(weights[:1], 400_000, axis=0),
        np.repeat(means[:1], 400_000, axis=0),
        np.repeat(variances[:1], 400_000, axis=0),
    )
    assert draws.mean() == pytest.approx(mean[0], abs=5 * np.sqrt(variance[0] / 400_000))
    assert draws.var() == pytest.approx(variance[0], rel=0.02)


def test_rmse_by_hand():
    assert metrics.rmse([1.0, 2.0, 3.0], [1.0, 2.0, 5.0]) == pytest.approx(math.sqrt(4 / 3))
    assert metrics.rmse([[1.0], [2.0]], [[1.0], [2.0]]) == 0.0


def test_regression_metrics_bundle(rng):
    weights, means, variances = random_mixture(rng, 50, 3)
    y = rng.normal(size=50)
    report = metrics.regression_metrics(y, weights, means, variances)
    assert set(report) == {"nll", "rmse", "crps", "coverage_95"}
    assert all(isinstance(value, float) for value in report.values())
    mean, _ = metrics.mixture_mean_and_variance(weights, means, variances)
    assert report["nll"] == metrics.gaussian_mixture_nll(y, weights, means, variances)
    assert report["rmse"] == metrics.rmse(y, mean)
    assert report["crps"] == metrics.mean_crps(y, weights, means, variances)
    assert (
        report["coverage_95"]
        == metrics.central_interval_coverage(y, weights, means, variances, levels=0.95)[0.95]
    )


def test_rescale_mixture_maps_metrics_to_original_units(rng):
    weights, means, variances = random_mixture(rng, 60, 4)
    y_std = rng.normal(size=60)
    scale, shift = 3.5, -12.0
    means_orig, variances_orig = metrics.rescale_mixture(means, variances, scale, shift)
    np.testing.assert_allclose(means_orig, means * 3.5 - 12.0)
    np.testing.assert_allclose(variances_orig, variances * 12.25)
    y = y_std * scale + shift
    standardised = metrics.regression_metrics(y_std, weights, means, variances)
    original = metrics.regression_metrics(y, weights, means_orig, variances_orig)
    assert original["nll"] == pytest.approx(standardised["nll"] + math.log(scale), rel=1e-12)
    assert original["rmse"] == pytest.approx(standardised["rmse"] * scale, rel=1e-12)
    assert original["crps"] == pytest.approx(standardised["crps"] * scale, rel=1e-12)
    assert original["coverage_95"] == standardised["coverage_95"]


# ------------------------------------------------------------------------------------------------
# CDF, quantiles, coverage
# ------------------------------------------------------------------------------------------------


def test_mixture_cdf_matches_scipy(rng):
    weights, means, variances = random_mixture(rng, 30, 4)
    values = rng.normal(scale=3.0, size=30)
    expected = np.sum(weights * stats.norm.cdf(values[:, None], means, np.sqrt(variances)), axis=1)
    np.testing.assert_allclose(
        metrics.mixture_cdf(values, weights, means, variances), expected, RTOL, ATOL
    )


def test_coverage_is_nominal_on_data_drawn_from_the_mixture(rng):
    n = 200_000
    weights, means, variances = random_mixture(rng, n, 3)
    y = sample_mixture(rng, weights, means, variances)
    coverage = metrics.central_interval_coverage(y, weights, means, variances)
    assert set(coverage) == {0.5, 0.8, 0.9, 0.95}
    for level, fraction in coverage.items():
        assert abs(fraction - level) < 0.01, (level, fraction)
    # An overconfident model (variances / 4) covers much less than nominal.
    narrow = metrics.central_interval_coverage(y, weights, means, variances / 4)
    for level, fraction in narrow.items():
        assert fraction < level - 0.05, (level, fraction)


# ------------------------------------------------------------------------------------------------
# Classification
# ------------------------------------------------------------------------------------------------


def test_classification_metrics_by_hand():
    y = np.array([0, 1, 1, 0])
    p = np.array([0.1, 0.8, 0.4, 0.6])
    assert metrics.error_rate(y, p) == 0.5
    assert metrics.error_rate(y, p, threshold=0.7) == 0.25
    assert metrics.brier_score(y, p) == pytest.approx((0.01 + 0.04 + 0.36 + 0.36) / 4)
    expected_nll = -(math.log(0.9) + math.log(0.8) + math.log(0.4) + math.log(0.4)) / 4
    assert metrics.bernoulli_nll(y, p) == pytest.approx(expected_nll, rel=1e-12)
    # Confidences 0.9, 0.8 (correct) and 0.6, 0.6 (wrong):
    # |1 - 0.9| / 4 + |1 - 0.8| / 4 + |0 - 0.6| * 2 / 4.
    assert metrics.expected_calibration_error(y, p) == pytest.approx(0.375, rel=1e-12)
    report = metrics.classification_metrics(y[:, None].astype(bool), p[:, None])
    assert report == pytest.approx(
        {"nll": expected_nll, "error_rate": 0.5, "brier": 0.1925, "ece": 0.375}, rel=1e-12
    )


def test_bernoulli_nll_clips_certain_mistakes():
    nll = metrics.bernoulli_nll([1, 0], [0.0, 0.0])
    assert nll == pytest.approx(-math.log(1e-12) / 2, rel=1e-9)


def test_ece_separates_calibrated_from_overconfident(rng):
    n = 200_000
    p = rng.uniform(size=n)
    y = (rng.uniform(size=n) < p).astype(float)
    assert metrics.expected_calibration_error(y, p) < 0.01
    # Claims 95% confidence everywhere; the true accuracy is E[max(p, 1 - p)] = 0.75.
    overconfident = np.where(p > 0.5, 0.95, 0.05)
    assert metrics.expected_calibration_error(y, overconfident) == pytest.approx(0.2, abs=0.01)


# ------------------------------------------------------------------------------------------------
# Average ranks
# ------------------------------------------------------------------------------------------------

HAND_SCORES = {
    # seed 0: x=y tie for 1.5, z 3;  seed 1: z 1, x 2, y 3.
    "A": {"x": [1.0, 2.0], "y": [1.0, 3.0], "z": [3.0, 1.0]},
    # seed 0: y 1, x 2, z 3;        seed 1: x 1, y=z tie for 2.5.
    "B": {"x": [5.0, 5.0], "y": [4.0, 6.0], "z": [6.0, 6.0]},
}
# Per-seed averages over A and B: x (1.75, 1.5), y (1.25, 2.75), z (3.0, 1.75).
HAND_RANKS = {"x": (1.625, 0.125), "y": (2.0, 0.75), "z": (2.375, 0.625)}


def test_average_ranks_by_hand():
    ranks = metrics.average_ranks(HAND_SCORES)
    assert list(ranks) == ["x", "y", "z"]
    for method, (mean, std) in HAND_RANKS.items():
        assert ranks[method] == pytest.approx((mean, std), rel=1e-12)


def test_average_ranks_skips_incomplete_datasets_and_seeds():
    scores = dict(HAND_SCORES)
    scores["C"] = {"x": [9.0, 9.0], "y": [0.0, 0.0]}  # z missing: C is dropped
    scores["D"] = {"x": [0.0], "y": [1.0, 0.0], "z": [np.nan, 2.0]}  # seed 0 NaN, seed 1 short
    assert metrics.average_ranks(scores) == metrics.average_ranks(HAND_SCORES)
    # D complete at seed 0 only: ranks x 1, y 2, z 3 join the seed-0 average.
    scores["D"] = {"x": [0.0], "y": [1.0, 0.0], "z": [2.0, 2.0]}
    ranks = metrics.average_ranks(scores)
    seed0 = {"x": (1.5 + 2 + 1) / 3, "y": (1.5 + 1 + 2) / 3, "z": 3.0}
    seed1 = {"x": 1.5, "y": 2.75, "z": 1.75}
    for method in "xyz":
        expected = np.array([seed0[method], seed1[method]])
        assert ranks[method] == pytest.approx((expected.mean(), expected.std()), rel=1e-12)


def test_average_ranks_rejects_incomparable_scores():
    with pytest.raises(ValueError, match="scores: expected at least one dataset and seed"):
        metrics.average_ranks({"A": {"x": [1.0]}, "B": {"y": [2.0]}})
    with pytest.raises(ValueError, match="scores: expected a non-empty mapping"):
        metrics.average_ranks({})
    with pytest.raises(ValueError, match=r"scores\['A'\]\['x'\]: expected a 1-D list"):
        metrics.average_ranks({"A": {"x": [[1.0]]}})


# ------------------------------------------------------------------------------------------------
# Bad input
# ------------------------------------------------------------------------------------------------

W = np.array([[0.5, 0.5], [0.2, 0.8], [1.0, 0.0]])
M = np.array([[0.0, 1.0], [2.0, -1.0], [0.5, 0.5]])
V = np.array([[1.0, 2.0], [0.5, 0.1], [1.0, 1.0]])
Y = np.array([0.1, 0.2, 0.3])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"means": M[:, :1]}, r"means: expected the shape of weights \(3, 2\).*got \(3, 1\)"),
        ({"variances": V[:2]}, r"variances: expected the shape of weights \(3, 2\).*got \(2, 2\)"),
        ({"weights": W[None]}, r"weights: expected shape \[N, S\].*got \(1, 3, 2\)"),
        ({"y": Y[:2]}, r"y: expected shape \[3\].*got \(2,\)"),
        ({"y": Y[:, None, None]}, r"y: expected shape \[3\].*got \(3, 1, 1\)"),
        ({"weights": W * 1.01}, r"weights: expected every row to sum to 1 \(tolerance 1e-06\)"),
        ({"weights": np.array([[1.5, -0.5]] * 3)}, "weights: expected non-negative values"),
        ({"variances": -V}, "variances: expected non-negative values"),
        ({"means": M * np.nan}, "means: expected finite values"),
        ({"y": ["a", "b", "c"]}, "y: expected a numeric array"),
    ],
)
def test_bad_mixture_input_is_rejected(kwargs, match):
    arguments = {"y": Y, "weights": W, "means": M, "variances": V, **kwargs}
    for function in (metrics.gaussian_mixture_crps, metrics.gaussian_mixture_log_density):
        with pytest.raises(ValueError, match=match):
            function(**arguments)


def test_weights_within_tolerance_are_accepted():
    weights = W + np.array([[5e-7, 0.0], [0.0, -5e-7], [0.0, 0.0]])
    assert np.isfinite(metrics.gaussian_mixture_nll(Y, weights, M, V))


def test_densities_and_coverage_need_positive_variances():
    zero = V.copy()
    zero[0, 0] = 0.0
    with pytest.raises(ValueError, match="variances: expected positive values, got minimum 0.0"):
        metrics.gaussian_mixture_nll(Y, W, M, zero)
    with pytest.raises(ValueError, match="variances: expected positive values"):
        metrics.central_interval_coverage(Y, W, M, zero)
    assert np.isfinite(metrics.mean_crps(Y, W, M, zero))


def test_bad_point_prediction_input_is_rejected():
    with pytest.raises(ValueError, match=r"mean: expected shape \[3\].*got \(2,\)"):
        metrics.rmse(Y, Y[:2])
    with pytest.raises(ValueError, match="variance: expected non-negative values"):
        metrics.gaussian_crps(Y, Y, -np.ones(3))
    with pytest.raises(ValueError, match=r"y: expected shape \[N\].*got \(3, 2\)"):
        metrics.rmse(M, M)


def test_bad_classification_input_is_rejected():
    with pytest.raises(ValueError, match=r"y: expected binary labels in \{0, 1\}, got e.g. 2.0"):
        metrics.brier_score([0, 1, 2], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="y: expected binary labels"):
        metrics.classification_metrics([0, 0.5], [0.1, 0.2])
    with pytest.raises(ValueError, match=r"probabilities: expected values in \[0, 1\]"):
        metrics.bernoulli_nll([0, 1], [0.1, 1.2])
    with pytest.raises(ValueError, match=r"probabilities: expected values in \[0, 1\]"):
        metrics.expected_calibration_error([0, 1], [-0.1, 0.5])
    with pytest.raises(ValueError, match=r"probabilities: expected shape \[2\]"):
        metrics.error_rate([0, 1], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match=r"threshold: expected a number in \[0, 1\], got 2"):
        metrics.error_rate([0, 1], [0.1, 0.2], threshold=2)
    with pytest.raises(ValueError, match="num_bins: expected an integer >= 1, got 0"):
        metrics.expected_calibration_error([0, 1], [0.1, 0.2], num_bins=0)


def test_bad_options_are_rejected():
    with pytest.raises(ValueError, match="levels: expected values strictly between 0 and 1"):
        metrics.central_interval_coverage(Y, W, M, V, levels=(0.9, 0.0))
    with pytest.raises(ValueError, match="chunk_rows: expected an integer >= 1, got 0"):
        metrics.gaussian_mixture_crps(Y, W, M, V, chunk_rows=0)
    with pytest.raises(ValueError, match="scale: expected one finite positive number, got -1.0"):
        metrics.rescale_mixture(M, V, -1.0, 0.0)
    with pytest.raises(ValueError, match=r"variances: expected the shape of means \(3, 2\)"):
        metrics.rescale_mixture(M, V[:, :1], 1.0, 0.0)
    with pytest.raises(ValueError, match="shift: expected one finite number"):
        metrics.rescale_mixture(M, V, 1.0, [0.0, 1.0])
