"""``gpflux.models.DeepGP`` with amortized layers: ``as_deep_gp`` and ``MixtureLikelihoodLayer``,
trained and used for prediction the way GPflux's tutorials do."""

from __future__ import annotations

import gpflow
import gpflux
import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras

from gpflux_avdgp import (
    AmortizedGPLayer,
    AVDGPLoss,
    TrainableLikelihood,
    as_deep_gp,
    build_avdgp,
    predict_mixture,
)
from gpflux_avdgp.layers import MixtureLikelihoodLayer

NUM_DATA = 120


def _data(rng):
    x = rng.uniform(-2.0, 2.0, size=(NUM_DATA, 2))
    return x, np.sin(2.0 * x[:, :1]) + 0.1 * rng.normal(size=(NUM_DATA, 1))


def _gpflux_layer(rng) -> gpflux.layers.GPLayer:
    kernel = gpflux.helpers.construct_basic_kernel(gpflow.kernels.RBF(), output_dim=2)
    inducing = gpflux.helpers.construct_basic_inducing_variables(
        6, 2, output_dim=2, share_variables=True, z_init=rng.uniform(-2, 2, size=(6, 2))
    )
    return gpflux.layers.GPLayer(kernel, inducing, num_data=NUM_DATA, num_latent_gps=2)


@pytest.mark.parametrize("front", ["amortized", pytest.param("gpflux", marks=pytest.mark.slow)])
def test_deep_gp_trains_and_predicts_like_the_sequential_of_its_layers(rng, front):
    x, y = _data(rng)
    first = AmortizedGPLayer(2, 4, NUM_DATA, seed=0) if front == "amortized" else _gpflux_layer(rng)
    layers = [first, AmortizedGPLayer(1, 4, NUM_DATA, num_points=5, seed=1)]
    likelihood = gpflow.likelihoods.Gaussian(0.1)
    deep_gp = as_deep_gp(layers, likelihood, input_dim=2)
    assert isinstance(deep_gp, gpflux.models.DeepGP)
    assert isinstance(deep_gp.likelihood_layer, MixtureLikelihoodLayer)
    training_model = deep_gp.as_training_model()
    training_model.compile(tf_keras.optimizers.Adam(0.02))
    history = training_model.fit({"inputs": x, "targets": y}, batch_size=30, epochs=8, verbose=0)
    losses = history.history["loss"]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]
    assert likelihood.variance.numpy() != 0.1  # the likelihood is trained with the model
    outputs = deep_gp.as_prediction_model()(x)
    assert outputs.y_mean.shape == outputs.y_var.shape == (NUM_DATA, 1)
    if front == "gpflux":
        # a GPflux GPLayer outputs a sample of f: its predictions differ from call to call
        assert np.all(np.isfinite(outputs.y_mean.numpy())) and np.all(outputs.y_var.numpy() > 0)
        return
    sequential = tf_keras.Sequential([*layers, TrainableLikelihood(likelihood)])
    prediction = predict_mixture(sequential, x)
    y_mean, y_var = prediction.y_moments()
    np.testing.assert_allclose(outputs.y_mean.numpy(), y_mean, rtol=1e-10)
    np.testing.assert_allclose(outputs.y_var.numpy(), y_var, rtol=1e-10)
    f_mean, f_var = prediction.f_moments()
    np.testing.assert_allclose(outputs.f_mean.numpy(), f_mean, rtol=1e-10)
    np.testing.assert_allclose(outputs.f_var.numpy(), f_var, rtol=1e-10)
    elbo = deep_gp.elbo((x, y))
    assert np.isfinite(elbo.numpy())


def test_the_layer_loss_is_the_mean_data_term_of_avdgp_loss(rng):
    packed = tf.constant(
        np.concatenate(
            [
                rng.normal(size=(5, 3, 1)),
                rng.uniform(0.1, 1, (5, 3, 1)),
                np.full((5, 3, 1), -np.log(3)),
            ],
            axis=-1,
        )
    )
    targets = tf.constant(rng.normal(size=(5, 1)))
    likelihood = gpflow.likelihoods.Gaussian(0.3)
    for objective in ("elbo", "predictive"):
        layer = MixtureLikelihoodLayer(likelihood, objective=objective)
        layer(packed, targets=targets, training=True)
        expected = np.mean(AVDGPLoss(likelihood, objective=objective).call(targets, packed))
        np.testing.assert_allclose(layer.losses[-1].numpy(), expected, rtol=1e-12)


def test_first_layer_of_unknown_width_asks_for_input_dim():
    with pytest.raises(ValueError, match=r"input_dim: .* give as_deep_gp\(\.\.\., input_dim=D\)"):
        as_deep_gp([AmortizedGPLayer(1, 4, 10)], gpflow.likelihoods.Gaussian())


AS_DEEP_GP = (
    "build the DeepGP with gpflux_avdgp.as_deep_gp(f_layers, likelihood), or end a Sequential "
    "with gpflux_avdgp.TrainableLikelihood(likelihood) and compile with gpflux_avdgp.AVDGPLoss()"
)


def _message_line(error: Exception, start: str) -> str:
    """The one line of ``error`` (Keras and autograph wrap it in context) that starts so."""
    lines = [line.strip().removeprefix("ValueError: ") for line in str(error).splitlines()]
    (line,) = [line for line in lines if line.startswith(start)]
    return line


@pytest.mark.parametrize("build", ["as_training_model", "as_prediction_model"])
def test_gpflux_deep_gp_with_its_own_likelihood_layer_fails_inside_gpflux(build):
    """GPflux's DeepGP of our layers and a GPflow likelihood (GPflux's LikelihoodLayer) never
    builds a model: GPflux's own assertion stops it (the supported route is as_deep_gp; the
    refusal that found the DeepGP on the Python stack was retired, issue 49)."""
    layer = AmortizedGPLayer(1, 4, NUM_DATA, name="gp")
    deep_gp = gpflux.models.DeepGP([layer], gpflow.likelihoods.Gaussian(), input_dim=2)
    with pytest.raises(AssertionError, match="MultivariateNormalDiag"):
        getattr(deep_gp, build)()


def test_gpflux_deep_gp_with_an_unwrapped_gp_layer_after_ours_fails_inside_gpflux(rng):
    deep_gp = gpflux.models.DeepGP(
        [AmortizedGPLayer(2, 4, NUM_DATA, name="gp"), _gpflux_layer(rng)],
        gpflow.likelihoods.Gaussian(),
        input_dim=2,
    )
    with pytest.raises(ValueError, match="gp_layer"):
        deep_gp.as_training_model()


@pytest.mark.slow
def test_gpflux_deep_gp_with_our_likelihood_layer_by_hand_trains(rng):
    x, y = _data(rng)
    likelihood = gpflow.likelihoods.Gaussian()
    deep_gp = gpflux.models.DeepGP(
        [AmortizedGPLayer(1, 4, NUM_DATA, seed=0)], MixtureLikelihoodLayer(likelihood), input_dim=2
    )
    training_model = deep_gp.as_training_model()
    training_model.compile(tf_keras.optimizers.Adam(0.01))
    history = training_model.fit({"inputs": x, "targets": y}, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


@pytest.mark.parametrize("end", ["likelihood", "gp_layer"])
def test_gpflux_likelihood_loss_on_our_outputs_refuses_naming_the_fix(rng, end):
    """Without patching GPflux, LikelihoodLoss would read the mean of y, or the packed mixture,
    as samples of f and train silently on a wrong number; it refuses at the first step."""
    x, y = _data(rng)
    likelihood = gpflow.likelihoods.Gaussian()
    layers = [tf_keras.Input((2,), dtype=tf.float64), AmortizedGPLayer(1, 4, NUM_DATA, name="gp")]
    if end == "likelihood":
        layers.append(TrainableLikelihood(likelihood, name="likelihood"))
    model = tf_keras.Sequential(layers)
    model.compile(tf_keras.optimizers.Adam(0.01), loss=gpflux.losses.LikelihoodLoss(likelihood))
    with pytest.raises(ValueError) as caught:
        model.fit(x, y, epochs=1, verbose=0)
    expected = {
        "likelihood": "likelihood: GPflux reads one Gaussian q(f) per row, but this layer outputs "
        "the predictive distribution of y, not of f; compile with gpflux_avdgp.AVDGPLoss() (it "
        "reads the likelihood from this layer)",
        "gp_layer": "gp: GPflux reads one Gaussian q(f) per row, but this layer outputs a "
        "Gaussian mixture [batch, components, 2 * D + 1]; " + AS_DEEP_GP,
    }[end]
    assert _message_line(caught.value, expected.split(":")[0] + ":") == expected


def test_an_avdgp_model_refuses_gpflux_likelihood_loss_naming_ours():
    likelihood = gpflow.likelihoods.Gaussian()
    model = build_avdgp(2, [1], 4, NUM_DATA, likelihood, seed=0)
    with pytest.raises(ValueError) as caught:
        model.compile(loss=gpflux.losses.LikelihoodLoss(likelihood))
    assert str(caught.value).splitlines() == [
        "loss: GPflux's LikelihoodLoss reads a Gaussian q(f), not the packed mixture; leave the "
        "loss out or use gpflux_avdgp.AVDGPLoss(), the same ELBO term on the mixture"
    ]


@pytest.mark.slow
def test_gpflux_models_of_gpflux_layers_train_as_before(rng):
    """With the package imported, GPflux's own use is GPflux's: a DeepGP of GPLayers with its
    LikelihoodLayer, and a Sequential of a GPLayer compiled with LikelihoodLoss."""
    x, y = _data(rng)
    first, second = _gpflux_layer(rng), _gpflux_layer(rng)
    second = gpflux.layers.GPLayer(
        gpflux.helpers.construct_basic_kernel(gpflow.kernels.RBF(), output_dim=1),
        gpflux.helpers.construct_basic_inducing_variables(
            6, 2, output_dim=1, share_variables=True, z_init=rng.uniform(-2, 2, size=(6, 2))
        ),
        num_data=NUM_DATA,
        num_latent_gps=1,
        mean_function=gpflow.mean_functions.Zero(),
    )
    deep_gp = gpflux.models.DeepGP([first, second], gpflow.likelihoods.Gaussian(), input_dim=2)
    training_model = deep_gp.as_training_model()
    training_model.compile(tf_keras.optimizers.Adam(0.01))
    history = training_model.fit({"inputs": x, "targets": y}, epochs=2, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    likelihood = gpflow.likelihoods.Gaussian()
    single = tf_keras.Sequential([tf_keras.Input((2,), dtype=tf.float64), second])
    single.compile(tf_keras.optimizers.Adam(0.01), loss=gpflux.losses.LikelihoodLoss(likelihood))
    history = single.fit(x, y, epochs=2, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
