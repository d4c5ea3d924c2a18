"""Exact quantiles and central intervals of the predictive mixture (``gpflux_avdgp.intervals``)
against a NumPy bisection on the mixture CDF, and where users get them: ``predict``,
``PredictiveMixture`` and ``avdgp predict`` (the SavedModel's ``predict_y`` is in
``tests/library/io/test_export.py``)."""

from __future__ import annotations

import gpflow
import numpy as np
import pytest
import reference
import scipy.special
import scipy.stats
import tensorflow as tf
from gpflow.keras import tf_keras

import gpflux_avdgp
from gpflux_avdgp.intervals import central_levels, interval_names, mixture_quantiles

LEVELS = (0.025, 0.25, 0.5, 0.9, 0.975)


def _mixtures(rng, rows: int = 6, components: int = 5, outputs: int = 2):
    """Random mixtures, one far-apart bimodal and one dominated by a tiny-variance component."""
    log_weights = np.log(rng.dirichlet(np.ones(components), size=rows))
    means = rng.normal(scale=2.0, size=(rows, components, outputs))
    variances = np.exp(rng.normal(size=(rows, components, outputs)))
    means[0, :, 0] = [-50.0, 50.0, -50.0, 50.0, 0.0]
    log_weights[0] = np.log([0.3, 0.3, 0.2, 0.1999, 1e-4])
    variances[1, 0, :], log_weights[1] = 1e-8, np.log([0.9] + [0.1 / (components - 1)] * 4)
    return log_weights, means, variances


def _reference(log_weights, means, variances, levels):
    rows, _, outputs = means.shape
    out = np.zeros((rows, len(levels), outputs))
    for n in range(rows):
        for p, level in enumerate(levels):
            for q in range(outputs):
                out[n, p, q] = reference.mixture_quantile(
                    np.exp(log_weights[n]), means[n, :, q], variances[n, :, q], level
                )
    return out


def test_quantiles_match_bisection_on_the_cdf(rng):
    arrays = _mixtures(rng)
    got = mixture_quantiles(*(tf.constant(a) for a in arrays), LEVELS).numpy()
    expected = _reference(*arrays, LEVELS)
    assert got.shape == (6, len(LEVELS), 2)
    scale = np.abs(arrays[1]).max() + np.sqrt(arrays[2]).max()
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * scale)
    assert np.all(np.diff(got, axis=1) >= 0), "quantiles increase with the level"


def test_float32_quantiles_are_as_exact_as_float32_allows(rng):
    """Where the CDF is flat (between the modes of the bimodal row) no float type can place the
    quantile, and where it is steep (the tiny-variance component) float32 resolves ``x`` only
    to about ``1e-7 |x|``: so the test is that the true root lies within a few float32 steps of
    the answer, ``F(q - d) <= p <= F(q + d)`` with ``d = 1e-6 (|q| + 1)``, up to ``1e-6``."""
    log_weights, means, variances = _mixtures(rng)
    got = mixture_quantiles(
        *(tf.constant(a, tf.float32) for a in (log_weights, means, variances)), LEVELS
    ).numpy()
    step = 1e-6 * (np.abs(got) + 1.0)

    def cdf(x):  # [N, P, Q] in float64
        z = (x[:, :, None, :] - means[:, None]) / np.sqrt(variances[:, None])
        return np.sum(np.exp(log_weights)[:, None, :, None] * scipy.special.ndtr(z), axis=2)

    levels = np.array(LEVELS)[None, :, None]
    assert np.all(cdf(got - step) <= levels + 1e-6)
    assert np.all(cdf(got + step) >= levels - 1e-6)


def test_a_single_gaussian_gives_its_closed_form():
    got = mixture_quantiles(
        tf.zeros([1, 1], tf.float64),
        tf.constant([[[3.0]]], tf.float64),
        tf.constant([[[4.0]]], tf.float64),
        [0.975],
    )
    assert float(got) == pytest.approx(3.0 + 2.0 * 1.959963984540054, rel=1e-13)


@pytest.mark.parametrize("bad", [0.0, 1.0, 1.5, -0.1])
def test_levels_outside_the_unit_interval_are_refused(bad):
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        mixture_quantiles(tf.zeros([1, 1]), tf.zeros([1, 1, 1]), tf.ones([1, 1, 1]), [bad])
    with pytest.raises(ValueError, match=r"^level: expected a number strictly between 0 and 1"):
        central_levels(bad)


def test_interval_names():
    assert interval_names(0.95) == ("lower_95", "upper_95")
    assert interval_names(0.5) == ("lower_50", "upper_50")
    assert interval_names(0.975) == ("lower_97_5", "upper_97_5")


@pytest.fixture(scope="module")
def regressor():
    tf_keras.utils.set_random_seed(1)
    rng = np.random.default_rng(1)
    x = rng.uniform(-2, 2, (60, 1))
    y = np.sin(3 * x) + 0.1 * rng.standard_normal(x.shape)
    model = gpflux_avdgp.build_avdgp(
        1, [2, 1], [3, 3], len(x), gpflow.likelihoods.Gaussian(0.1), num_points=5, seed=1
    )
    model.compile(tf_keras.optimizers.Adam(0.01))
    model.fit(x, y, batch_size=30, epochs=2, verbose=0)
    return model, x


def test_predict_and_predictive_mixture_give_the_exact_interval(regressor):
    model, x = regressor
    prediction = gpflux_avdgp.predict_mixture(model, x)
    lower, upper = prediction.central_interval(0.95)
    outputs = model.predict(x, verbose=0)
    np.testing.assert_allclose(outputs["lower_95"], lower, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(outputs["upper_95"], upper, rtol=1e-12, atol=1e-12)
    weights, y_means, y_variances = prediction.weights, prediction.y_means, prediction.y_variances
    for n in range(0, len(x), 7):
        expected = [
            reference.mixture_quantile(weights[n], y_means[n, :, 0], y_variances[n, :, 0], p)
            for p in (0.025, 0.975)
        ]
        np.testing.assert_allclose([lower[n, 0], upper[n, 0]], expected, rtol=1e-10)
    # the mixture is not Gaussian: mean +- 1.96 std is not the interval
    assert np.all(lower < outputs["mean"]) and np.all(outputs["mean"] < upper)


def test_a_classifier_has_no_interval_of_y(rng):
    model = gpflux_avdgp.build_avdgp(1, [1], [3], 10, gpflow.likelihoods.Bernoulli())
    x = rng.normal(size=(4, 1))
    assert set(model.predict(x, verbose=0)) == {"probabilities"}
    with pytest.raises(ValueError, match="^quantiles: the law of y is a Gaussian mixture"):
        gpflux_avdgp.predict_mixture(model, x).central_interval()


# ---------------------------------------------------------- one row, one output: NumPy arrays
PROBABILITIES = [1e-4, 0.025, 0.3, 0.5, 0.8, 0.975, 1 - 1e-4]


def _quantiles(weights, means, variances, probabilities) -> np.ndarray:
    """The library's quantiles of ``[N, S]`` mixtures as ``[N, P]``."""
    with np.errstate(divide="ignore"):
        log_weights = np.log(weights)
    arrays = (log_weights, means[..., None], variances[..., None])
    return mixture_quantiles(*(tf.constant(a) for a in arrays), probabilities).numpy()[..., 0]


def _mixture_cdf(values, weights, means, variances) -> np.ndarray:
    """``F_n(values_n) = sum_s w_s Phi((values_n - m_ns) / sqrt(v_ns))`` of ``[N, S]`` mixtures."""
    return np.sum(weights * scipy.special.ndtr((values[:, None] - means) / np.sqrt(variances)), 1)


def _random_mixture(rng, rows: int, components: int):
    weights = rng.dirichlet(np.ones(components), size=rows)
    return (
        weights,
        rng.normal(scale=2.0, size=(rows, components)),
        np.exp(rng.normal(size=(rows, components))),
    )


def test_quantiles_invert_the_mixture_cdf(rng):
    weights, means, variances = _random_mixture(rng, 40, 6)
    # Two rows of far-apart, narrow modes: the CDF is flat between them; zero weights.
    weights[:2] = np.array([0.5, 0.5, 0, 0, 0, 0])
    means[:2, :2] = [[-50.0, 50.0], [0.0, 1e4]]
    variances[:2, :2] = [[1e-4, 1e-4], [1.0, 1e-6]]
    quantiles = _quantiles(weights, means, variances, PROBABILITIES)
    assert quantiles.shape == (40, len(PROBABILITIES))
    assert np.all(np.diff(quantiles, axis=1) > 0)
    for j, p in enumerate(PROBABILITIES):
        cdf = _mixture_cdf(quantiles[:, j], weights, means, variances)
        np.testing.assert_allclose(cdf, p, rtol=0, atol=1e-9)


def test_quantiles_of_one_gaussian_match_scipy_ppf(rng):
    means = rng.normal(scale=10.0, size=(25, 1))
    variances = np.exp(rng.normal(scale=2.0, size=(25, 1)))
    quantiles = _quantiles(np.ones((25, 1)), means, variances, PROBABILITIES)
    expected = scipy.stats.norm.ppf(PROBABILITIES, means, np.sqrt(variances))
    scale = np.abs(means) + np.sqrt(variances)
    assert np.all(np.abs(quantiles - expected) <= 1e-10 * scale)


def test_interval_coverage_agrees_with_the_pit_coverage_of_the_metrics(rng):
    """The application's coverage tests ``F(y)`` against the levels (``(1 - a) / 2 <= F(y) <= (1
    + a) / 2``); counting targets inside the library's interval must give the same fraction."""
    weights, means, variances = _random_mixture(rng, 500, 4)
    rows = np.arange(500)
    component = np.array([rng.choice(4, p=w) for w in weights])
    y = 1.3 * rng.normal(means[rows, component], np.sqrt(variances[rows, component]))
    for level in (0.5, 0.9):
        pit = _mixture_cdf(y, weights, means, variances)
        coverage = {level: np.mean(np.abs(pit - 0.5) <= level / 2)}
        bounds = _quantiles(weights, means, variances, central_levels(level))
        inside = (bounds[:, 0] <= y) & (y <= bounds[:, 1])
        assert coverage[level] == pytest.approx(np.mean(inside), abs=1 / 500)
        assert 0.0 < coverage[level] < 1.0
