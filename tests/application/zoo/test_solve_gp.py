"""SOLVE-GP (``--model solve-gp``): its ELBO against a NumPy reference, its reduction to
GPflow's SVGP, saving, and (slow) that its orthogonal set helps on real data."""

from __future__ import annotations

import gpflow
import numpy as np
import pytest
import reference
import tensorflow as tf
from gpflow.keras import tf_keras

from avdgp import zoo
from avdgp.zoo.solve_gp import SAVED_OBJECTS, SolveGPLayer
from gpflux_avdgp import load_model, predict_mixture

NO_JITTER = gpflow.config.Config(jitter=0.0)


def _problem(rng, num=12, dim=2):
    x = rng.uniform(-2.0, 2.0, (num, dim))
    y = np.sin(x.sum(1)) + 0.1 * rng.standard_normal(num)
    return x, y[:, None]


def _randomise(layer: SolveGPLayer, rng) -> None:
    """Give ``q(u)``, ``q(v)`` and the kernel values away from their initial ones."""
    for variable in (layer.q_mu_u, layer.q_mu_v):
        variable.assign(rng.standard_normal(variable.shape))
    for variable in (layer.q_sqrt_u, layer.q_sqrt_v):
        count = variable.shape[-1]
        raw = 0.3 * rng.standard_normal(variable.shape) + np.eye(count)[None]
        variable.assign(raw)  # the upper triangle must not matter
    layer.kernel.lengthscales.assign(1.3)
    layer.kernel.variance.assign(0.8)


def _whitened_to_unwhitened(chol: np.ndarray, mean: np.ndarray, raw: np.ndarray):
    lower = np.tril(raw)
    return chol @ mean, chol @ lower @ lower.T @ chol.T


def _reference_posteriors(layer: SolveGPLayer, kernel_fn):
    """``q(u)`` and ``q(v)`` of ``layer`` in the unwhitened parametrisation of the reference."""
    z_u, z_v = layer.inducing_u.numpy(), layer.inducing_v.numpy()
    kuu = reference.gram(kernel_fn, z_u, z_u)
    kuv = reference.gram(kernel_fn, z_u, z_v)
    cvv = reference.gram(kernel_fn, z_v, z_v) - kuv.T @ np.linalg.inv(kuu) @ kuv
    u = _whitened_to_unwhitened(
        np.linalg.cholesky(kuu), layer.q_mu_u.numpy()[:, 0], layer.q_sqrt_u.numpy()[0]
    )
    v = _whitened_to_unwhitened(
        np.linalg.cholesky(cvv), layer.q_mu_v.numpy()[:, 0], layer.q_sqrt_v.numpy()[0]
    )
    return z_u, z_v, u, v


def test_solve_gp_elbo_equals_the_numpy_reference(rng):
    x, y = _problem(rng)
    spec = zoo.ModelSpec(model="solve-gp", num_inducing=[4, 3], seed=1)
    built = zoo.build_model(spec, 2, len(x), inputs=x)
    built.model.compile(loss=built.loss)
    layer = built.model.layers[0]
    assert isinstance(layer, SolveGPLayer)
    _randomise(layer, rng)
    kernel_fn = reference.matern52(0.8, 1.3)
    z_u, z_v, (u_mean, u_cov), (v_mean, v_cov) = _reference_posteriors(layer, kernel_fn)
    noise = float(built.likelihood.variance.numpy())
    elbo = reference.solve_gp_elbo(
        kernel_fn, z_u, z_v, x, y[:, 0], u_mean, u_cov, v_mean, v_cov, noise
    )
    with gpflow.config.as_context(NO_JITTER):
        output = built.model(tf.constant(x))  # not evaluate(): Keras averages in float32
        loss = built.loss(tf.constant(y), output) + tf.add_n(built.model.losses)
        mean, var = layer.marginals(tf.constant(x))
    ref_mean, ref_var = reference.solve_gp_marginals(
        kernel_fn, z_u, z_v, x, u_mean, u_cov, v_mean, v_cov
    )
    np.testing.assert_allclose(mean.numpy()[:, 0], ref_mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(var.numpy()[:, 0], ref_var, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(loss.numpy(), -elbo / len(x), rtol=1e-10)


def _svgp_like(layer: SolveGPLayer) -> gpflow.models.SVGP:
    return gpflow.models.SVGP(
        layer.kernel,
        gpflow.likelihoods.Gaussian(),
        layer.inducing_u.numpy(),
        q_mu=layer.q_mu_u.numpy(),
        q_sqrt=np.tril(layer.q_sqrt_u.numpy()),
        whiten=True,
    )


@pytest.mark.parametrize("num_orthogonal", [0, 3])
def test_solve_gp_reduces_to_svgp_without_the_orthogonal_set(rng, num_orthogonal):
    """``M2 = 0``, or ``q(v)`` equal to its prior, is GPflow's whitened SVGP: the same
    marginals and the same KL."""
    x, _ = _problem(rng)
    layer = SolveGPLayer(1, num_data=len(x), num_inducing=4, num_orthogonal=num_orthogonal)
    layer.build(tf.TensorShape([None, 2]))
    _randomise(layer, rng)
    layer.q_mu_v.assign(tf.zeros_like(layer.q_mu_v))  # q(v) = p(v)
    layer.q_sqrt_v.assign(tf.eye(num_orthogonal, batch_shape=[1], dtype=tf.float64))
    svgp = _svgp_like(layer)
    with gpflow.config.as_context(NO_JITTER):  # GPflow's jitter is absolute, ours relative
        mean, var = layer.marginals(tf.constant(x))
        svgp_mean, svgp_var = svgp.predict_f(x)
    np.testing.assert_allclose(mean.numpy(), svgp_mean.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(var.numpy(), svgp_var.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(layer.prior_kl().numpy(), svgp.prior_kl().numpy(), rtol=1e-10)


def test_the_orthogonal_set_changes_the_marginals(rng):
    """The test above is not vacuous: a ``q(v)`` away from its prior moves the marginals."""
    x, _ = _problem(rng)
    layer = SolveGPLayer(1, num_data=len(x), num_inducing=4, num_orthogonal=3)
    layer.build(tf.TensorShape([None, 2]))
    _randomise(layer, rng)
    mean, var = layer.marginals(tf.constant(x))
    svgp_mean, svgp_var = _svgp_like(layer).predict_f(x)
    assert np.abs(mean.numpy() - svgp_mean.numpy()).max() > 1e-2
    assert np.abs(var.numpy() - svgp_var.numpy()).max() > 1e-3


def test_solve_gp_defaults_to_the_papers_sizes_and_checks_its_arguments():
    assert zoo.ModelSpec(model="solve-gp").resolved_inducing() == [512, 512]
    assert zoo.ModelSpec(model="solve-gp", num_inducing=[64]).resolved_inducing() == [64, 64]
    assert zoo.ModelSpec(model="solve-gp", num_inducing=[64, 8]).resolved_inducing() == [64, 8]
    with pytest.raises(ValueError, match="M1 or M1,M2"):
        zoo.ModelSpec(model="solve-gp", num_inducing=[1, 2, 3]).resolved_inducing()
    with pytest.raises(ValueError, match="num_orthogonal"):
        SolveGPLayer(1, num_data=10, num_orthogonal=-1)
    with pytest.raises(TypeError, match="kernel"):
        SolveGPLayer(1, num_data=10, kernel="matern52")
    with pytest.raises(ValueError, match=r"inducing_inputs: expected \[5, D\]"):
        SolveGPLayer(
            1, num_data=10, num_inducing=3, num_orthogonal=2, inducing_inputs=np.ones((4, 2))
        )
    layer = SolveGPLayer(1, num_data=10, num_inducing=3, num_orthogonal=2)
    with pytest.raises(ValueError, match="shallow model"):
        layer.build(tf.TensorShape([None, 4, 5]))


@pytest.mark.slow
def test_solve_gp_trains_saves_and_reloads(rng, tmp_path):
    x, y = _problem(rng, num=200, dim=3)
    built = zoo.build_model(zoo.ModelSpec(model="solve-gp", num_inducing=[10, 6]), 3, 200, inputs=x)
    built.model.compile(tf_keras.optimizers.Adam(0.02), loss=built.loss)
    history = built.model.fit(x, y, epochs=15, batch_size=50, verbose=0)
    assert history.history["loss"][-1] < 0.5 * history.history["loss"][0]
    path = tmp_path / "solve.keras"
    built.model.save(path)
    with pytest.raises(ValueError, match="SolveGPLayer, from outside Keras"):
        load_model(path)  # the application's class is not on the library's allow list
    reloaded = load_model(path, custom_objects=SAVED_OBJECTS)
    np.testing.assert_array_equal(
        reloaded.predict(x[:7], verbose=0), built.model.predict(x[:7], verbose=0)
    )
    assert reloaded.layers[0].num_orthogonal == 6


@pytest.mark.slow
def test_solve_gp_beats_svgp_with_the_same_first_set_on_elevators():
    """On real data the orthogonal set helps: SOLVE-GP (M1 = M2 = 64) against SVGP with the
    same 64 first inducing points (both started at the same training inputs), same split,
    epochs and optimiser."""
    from avdgp.data import Standardizer, load_dataset, split_dataset, uci_dataset_path

    dataset = load_dataset(uci_dataset_path("elevators", None))
    split = split_dataset(dataset, seed=0)
    split = Standardizer.fit(split.x_train, split.y_train).transform_split(split)
    x, y = split.x_train, split.y_train
    scores = {}
    for name, sizes in (("svgp", [64, 0]), ("solve-gp", [64, 64])):
        tf_keras.utils.set_random_seed(0)
        built = zoo.build_model(
            zoo.ModelSpec(model="solve-gp", num_inducing=sizes, seed=0),
            x.shape[1],
            len(x),
            inputs=x,
        )
        built.model.compile(tf_keras.optimizers.Adam(0.01), loss=built.loss)
        built.model.fit(x, y, epochs=5, batch_size=100, verbose=0)
        mean, var = (
            moment[:, 0] for moment in predict_mixture(built.model, split.x_test).y_moments()
        )
        residual = split.y_test[:, 0] - mean
        scores[name] = np.mean(0.5 * np.log(2 * np.pi * var) + 0.5 * residual**2 / var)
    assert scores["solve-gp"] < scores["svgp"] - 0.01, scores
