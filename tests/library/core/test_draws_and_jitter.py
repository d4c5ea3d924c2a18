"""Reproducible Monte Carlo draws (AR1/AR2) and the relative Cholesky jitter.

Training draws are stateless, keyed by ``[noise_seed, t]`` with ``t`` a saved per-layer
counter, so restoring the weights restores the draws; prediction uses one fixed set of draws
shared by all datapoints, so it is deterministic, independent of batching and equal under XLA.
"""

import math

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras

import gpflux_avdgp
from gpflux_avdgp.core.cholesky import add_relative_jitter, jittered_cholesky
from gpflux_avdgp.core.mixture import GaussianMixture
from gpflux_avdgp.core.random import stateless_seed, stateless_standard_normal
from gpflux_avdgp.predictive import output_mixture
from gpflux_avdgp.propagation import PropagationRule, propagate


def _mixture(rng, batch=5, components=1, dim=2, identical=False):
    means = rng.normal(size=(batch, components, dim))
    if identical:
        means = np.broadcast_to(means[:1], means.shape).copy()
    variances = np.full((batch, components, dim), 0.5)
    log_weights = np.full((batch, components), -np.log(components))
    return GaussianMixture(tf.constant(means), tf.constant(variances), tf.constant(log_weights))


# ----------------------------------------------------------------------- propagate
@pytest.mark.parametrize("rule", ["ar1", "ar2"])
def test_seeded_draws_are_a_function_of_the_seed(rng, rule):
    mixture = _mixture(rng)
    first = propagate(mixture, rule, num_points=3, seed=7).locations.numpy()
    np.testing.assert_array_equal(propagate(mixture, rule, num_points=3, seed=7).locations, first)
    keyed = propagate(mixture, rule, num_points=3, seed=tf.constant([7, 0])).locations
    np.testing.assert_array_equal(keyed, first)  # an int s is the key [s, 0]
    other = propagate(mixture, rule, num_points=3, seed=tf.constant([7, 1])).locations.numpy()
    assert not np.any(np.isclose(other, first))
    unseeded = [propagate(mixture, rule, num_points=3).locations.numpy() for _ in range(2)]
    assert not np.any(np.isclose(*unseeded))  # no seed: fresh draws on every call


def test_common_draws_are_shared_by_datapoints_not_components(rng):
    mixture = _mixture(rng, batch=4, identical=True)
    locations = propagate(
        mixture, PropagationRule.AR2, num_points=3, seed=1, common_draws=True
    ).locations.numpy()  # [4, 3, 2]
    np.testing.assert_array_equal(locations, np.broadcast_to(locations[:1], locations.shape))
    assert len({tuple(row) for row in locations[0]}) == 3  # components differ
    independent = propagate(mixture, PropagationRule.AR2, num_points=3, seed=1).locations
    assert len({tuple(row) for row in independent.numpy().reshape(-1, 2)}) == 12


def test_replica_draws_are_slices_of_the_global_batch_draws(rng):
    """Replica r of R draws rows r B .. (r + 1) B of what one device draws for R B rows."""
    mixture = _mixture(rng, batch=6)
    global_draws = propagate(mixture, "ar2", num_points=3, seed=4).locations.numpy()
    for replica in (0, 1):
        rows = slice(3 * replica, 3 * replica + 3)
        half = GaussianMixture(
            mixture.means[rows], mixture.variances[rows], mixture.log_weights[rows]
        )
        local = propagate(half, "ar2", num_points=3, seed=4, replica=(replica, 2))
        np.testing.assert_allclose(local.locations.numpy(), global_draws[rows], rtol=1e-14)


def test_standard_normal_is_box_muller_of_the_philox_bits():
    """NumPy reference: the top bits of the raw Philox words, then Box-Muller."""
    seed = tf.constant([11, 4], tf.int64)
    draws = stateless_standard_normal([3, 5], seed, tf.float64).numpy()
    bits = tf.random.stateless_uniform(
        [2, 3, 5], seed=seed, minval=None, maxval=None, dtype=tf.uint64, alg="philox"
    ).numpy()
    uniforms = ((bits >> np.uint64(12)).astype(np.float64) + 0.5) * 2.0**-52
    expected = np.sqrt(-2 * np.log(uniforms[0])) * np.cos(2 * np.pi * uniforms[1])
    np.testing.assert_allclose(draws, expected, rtol=1e-13, atol=1e-13)
    float32_draws = stateless_standard_normal([3, 5], seed, tf.float32).numpy()
    uniforms = ((bits >> np.uint64(41)).astype(np.float64) + 0.5) * 2.0**-23
    expected = np.sqrt(-2 * np.log(uniforms[0])) * np.cos(2 * np.pi * uniforms[1])
    assert float32_draws.dtype == np.float32
    np.testing.assert_allclose(float32_draws, expected, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("dtype, tolerance", [(tf.float64, 1e-14), (tf.float32, 2e-6)])
def test_standard_normal_is_the_same_under_xla(dtype, tolerance):
    """``tf.random.stateless_normal`` gives other numbers once compiled; ours does not."""

    def draw():
        return stateless_standard_normal([20000], tf.constant([5, 9], tf.int64), dtype)

    graph, xla = tf.function(draw)().numpy(), tf.function(draw, jit_compile=True)().numpy()
    np.testing.assert_allclose(xla, graph, rtol=tolerance, atol=tolerance)
    assert np.all(np.isfinite(graph))
    # standard normal: moments and the Kolmogorov-Smirnov distance to the normal CDF
    assert abs(graph.mean()) < 0.03 and abs(graph.std() - 1) < 0.03
    ordered = np.sort(graph.astype(np.float64))
    cdf = 0.5 * (1 + np.vectorize(math.erf)(ordered / math.sqrt(2)))
    steps = np.arange(1, len(ordered) + 1) / len(ordered)
    assert np.max(np.abs(cdf - steps)) < 1.36 / math.sqrt(len(ordered))  # 5% KS level


def test_standard_normal_rejects_other_dtypes():
    with pytest.raises(ValueError, match="float32 or float64"):
        stateless_standard_normal([2], tf.constant([1, 2], tf.int64), tf.float16)


def test_stateless_seed_rejects_a_wrong_shape():
    with pytest.raises(ValueError, match="seed: expected an int or a shape-\\[2\\]"):
        stateless_seed(tf.constant([1, 2, 3]))


# ----------------------------------------------------------------------- layers and models
def _model(rule: str, seed: int = 3) -> tf_keras.Sequential:
    return gpflux_avdgp.build_avdgp(
        2, [2, 1], 3, 50, gpflow.likelihoods.Gaussian(0.1), rule=rule, num_points=4, seed=seed
    )


def _counter(model: tf_keras.Sequential) -> int:
    return int(model.get_layer("gp_layer_2").draw_counter.numpy())


@pytest.mark.parametrize("rule", ["ar1", pytest.param("ar2", marks=pytest.mark.slow)])
def test_training_draws_advance_a_saved_counter(rng, rule):
    model = _model(rule)
    x = tf.constant(rng.normal(size=(6, 2)))
    assert _counter(model) == 0
    first, second = model(x, training=True), model(x, training=True)
    assert _counter(model) == 2
    assert not np.allclose(first.numpy(), second.numpy())
    model(x, training=False)
    assert _counter(model) == 2  # prediction does not advance it
    assert model.get_layer("gp_layer_1").draw_counter is None  # deterministic input: no draws


@pytest.mark.parametrize("rule", ["ar1", pytest.param("ar2", marks=pytest.mark.slow)])
def test_restored_weights_continue_with_the_same_draws(rng, rule):
    x = tf.constant(rng.normal(size=(6, 2)))
    original = _model(rule)
    original(x, training=True)
    copy = _model(rule, seed=99)  # other initial weights and noise seed ...
    copy.get_layer("gp_layer_2").noise_seed = original.get_layer("gp_layer_2").noise_seed
    copy.set_weights(original.get_weights())  # ... until the weights (and counter) are copied
    np.testing.assert_array_equal(copy(x, training=True), original(x, training=True))


@pytest.mark.parametrize("rule", ["ar1", pytest.param("ar2", marks=pytest.mark.slow)])
def test_prediction_is_deterministic_and_independent_of_batching(rng, rule):
    model = _model(rule)
    x = rng.normal(size=(7, 2))

    def packed(inputs):
        return output_mixture(model(tf.constant(inputs), training=False)).pack().numpy()

    together = packed(x)
    np.testing.assert_array_equal(packed(x), together)
    for row in range(len(x)):
        alone = packed(x[row : row + 1])
        np.testing.assert_allclose(alone[0], together[row], rtol=1e-12)
    assert together.shape[1] == 4  # both predict with S = num_points


@pytest.mark.slow
def test_xla_prediction_equals_eager_prediction(rng):
    model = _model("ar2")
    x = tf.constant(rng.normal(size=(5, 2)))
    compiled = tf.function(lambda inputs: model(inputs, training=False), jit_compile=True)
    np.testing.assert_allclose(compiled(x), model(x, training=False), rtol=1e-10, atol=1e-12)


def test_noise_seed_is_saved_and_validated():
    layer = gpflux_avdgp.AmortizedGPLayer(1, 2, 10, rule="ar2", seed=None)
    assert isinstance(layer.noise_seed, int)  # drawn once, then kept in the config
    assert layer.get_config()["noise_seed"] == layer.noise_seed
    seeded = gpflux_avdgp.AmortizedGPLayer(1, 2, 10, rule="ar2", seed=5)
    assert seeded.noise_seed == 5
    rebuilt = gpflux_avdgp.AmortizedGPLayer.from_config(layer.get_config())
    assert rebuilt.noise_seed == layer.noise_seed
    with pytest.raises(TypeError, match="noise_seed: expected an int"):
        gpflux_avdgp.AmortizedGPLayer(1, 2, 10, noise_seed=1.5)


# ----------------------------------------------------------------------- jitter
def test_relative_jitter_matches_numpy(rng):
    a = rng.normal(size=(3, 4, 4))
    kuu = a @ np.transpose(a, (0, 2, 1)) * np.array([0.1, 1.0, 50.0])[:, None, None]
    expected = kuu + 1e-6 * np.trace(kuu, axis1=1, axis2=2)[:, None, None] / 4 * np.eye(4)
    with gpflow.config.as_context(gpflow.config.Config(jitter=1e-6)):
        np.testing.assert_allclose(add_relative_jitter(tf.constant(kuu)), expected, rtol=1e-14)


def test_relative_jitter_keeps_a_large_variance_float32_cholesky_alive():
    """Coincident inducing points under a kernel variance of 1e4, in float32: the absolute
    jitter 1e-5 is below float32 resolution at that scale and the factor is NaN (TF 2.21
    returns NaNs rather than raising); the relative jitter keeps it positive definite."""
    kuu = tf.constant(np.full((1, 8, 8), 1e4), dtype=tf.float32)
    absolute = tf.linalg.cholesky(kuu + 1e-5 * tf.eye(8, dtype=tf.float32)).numpy()
    assert not np.all(np.isfinite(absolute))
    with gpflow.config.as_context(gpflow.config.Config(jitter=1e-5, float=np.float32)):
        chol = tf.linalg.cholesky(add_relative_jitter(kuu)).numpy()
    assert np.all(np.isfinite(chol)) and np.all(np.diagonal(chol, axis1=1, axis2=2) > 0)


def _indefinite(smallest_eigenvalue: float) -> np.ndarray:
    """A 4 x 4 symmetric matrix with eigenvalues (3, 2, 1, smallest), mean diagonal 1.5 + s/4."""
    rotation, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(4, 4)))
    return rotation @ np.diag([3.0, 2.0, 1.0, smallest_eigenvalue]) @ rotation.T


@pytest.mark.parametrize("compiled", [False, True], ids=["graph", "xla"])
def test_jittered_cholesky_retries_only_the_failing_matrices(compiled):
    good = _indefinite(0.5)
    needs_10x = _indefinite(-3e-5)  # base jitter 1e-5 * 1.5 is too small, 10x is enough
    needs_100x = _indefinite(-5e-4)  # 10x is too small, 100x is enough
    hopeless = _indefinite(-1.0)
    kuu = tf.constant(np.stack([good, needs_10x, needs_100x, hopeless]))
    factorise = tf.function(jittered_cholesky, jit_compile=compiled)
    with gpflow.config.as_context(gpflow.config.Config(jitter=1e-5)):
        chol = factorise(kuu).numpy()
    scale = np.trace(kuu.numpy(), axis1=1, axis2=2) / 4
    for index, factor in enumerate([1.0, 10.0, 100.0]):
        expected = kuu.numpy()[index] + factor * 1e-5 * scale[index] * np.eye(4)
        np.testing.assert_allclose(chol[index] @ chol[index].T, expected, rtol=1e-10, atol=1e-12)
    assert not np.all(np.isfinite(chol[3]))  # left for the layer's numerics check to report
    with gpflow.config.as_context(gpflow.config.Config(jitter=1e-5)):
        without_retries = jittered_cholesky(kuu, retry_factors=()).numpy()
    assert not np.all(np.isfinite(without_retries[1]))  # the retry is what saved it


CONTROL_FLOW = {"If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase"}


def test_jittered_cholesky_decides_the_jitter_without_branches():
    """No ``tf.cond``/``while`` in the graph (on a GPU each would read its predicate back to
    the host), whatever the retries."""
    graph = (
        tf.function(jittered_cholesky)
        .get_concrete_function(tf.TensorSpec([None, 4, 4], tf.float64))
        .graph
    )
    assert not [op.type for op in graph.get_operations() if op.type in CONTROL_FLOW]
    assert sum(op.type == "Cholesky" for op in graph.get_operations()) == 2  # trials, factor


@pytest.mark.parametrize("compiled", [False, True], ids=["graph", "xla"])
def test_jittered_cholesky_gradient_is_that_of_each_matrix_s_chosen_jitter(compiled):
    """The gradient flows through the factor with the jitter each matrix took (and its relative
    scale), as if that jitter had been given: the trial factorisations add nothing to it."""
    kuu = tf.constant(np.stack([_indefinite(0.5), _indefinite(-3e-5), _indefinite(-5e-4)]))
    weights = tf.constant(np.random.default_rng(1).normal(size=(3, 4, 4)))
    factors = tf.constant([1.0, 10.0, 100.0], tf.float64)[:, None, None]

    @tf.function(jit_compile=compiled)
    def gradients(kuu):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(kuu)
            found = tf.reduce_sum(weights * jittered_cholesky(kuu))
            expected = tf.reduce_sum(
                weights * tf.linalg.cholesky(add_relative_jitter(kuu, factors))
            )
        return tape.gradient(found, kuu), tape.gradient(expected, kuu)

    with gpflow.config.as_context(gpflow.config.Config(jitter=1e-5)):
        found, expected = gradients(kuu)
    assert np.all(np.isfinite(found.numpy()))
    np.testing.assert_allclose(found.numpy(), expected.numpy(), rtol=1e-12, atol=1e-12)
