"""GPflux ``GPLayer``s mixed with amortized layers in one ``tf_keras.Sequential``.

* An unwrapped ``GPLayer`` in front of an :class:`~gpflux_avdgp.AmortizedGPLayer`: its output
  converts to one sample ``[B, Q]``, which the amortized layer reads as a deterministic input.
* A ``GPLayer`` wrapped in :class:`~gpflux_avdgp.SigmaPointGPLayer` after an amortized layer.
* A pure deep sigma point process (DSPP): wrapped ``GPLayer``s only, rule ``"ar2p"`` and the
  predictive objective.
"""

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
    SigmaPointGPLayer,
    TrainableLikelihood,
    predict_mixture,
)
from gpflux_avdgp.core.mixture import GaussianMixture
from gpflux_avdgp.predictive import output_mixture

NUM_DATA = 200
BATCH_SIZE = 50
NUM_INDUCING = 6
NUM_POINTS = 5


def regression_data(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    x = rng.uniform(-2.0, 2.0, size=(NUM_DATA, 2))
    y = np.sin(2.0 * x[:, :1]) + 0.5 * x[:, 1:] ** 2 + 0.1 * rng.standard_normal((NUM_DATA, 1))
    return x, y


def make_gp_layer(
    rng: np.random.Generator,
    input_dim: int,
    output_dim: int,
    *,
    identity_mean: bool = False,
    name: str | None = None,
) -> gpflux.layers.GPLayer:
    """A GPflux ``GPLayer`` with shared kernel hyperparameters and shared inducing points."""
    kernel = gpflux.helpers.construct_basic_kernel(
        gpflow.kernels.SquaredExponential(), output_dim=output_dim, share_hyperparams=True
    )
    inducing_variable = gpflux.helpers.construct_basic_inducing_variables(
        NUM_INDUCING,
        input_dim,
        output_dim=output_dim,
        share_variables=True,
        z_init=rng.uniform(-2.0, 2.0, size=(NUM_INDUCING, input_dim)),
    )
    if identity_mean:
        assert input_dim == output_dim
        mean_function = gpflow.mean_functions.Identity()
    else:
        mean_function = gpflow.mean_functions.Zero()
    return gpflux.layers.GPLayer(
        kernel,
        inducing_variable,
        num_data=NUM_DATA,
        num_latent_gps=output_dim,
        mean_function=mean_function,
        name=name,
    )


def compile_and_fit(model, loss, x, y, *, epochs: int = 8, learning_rate: float = 0.02):
    optimizer = tf_keras.optimizers.Adam(learning_rate)
    # creating the slots up front saves Keras a second trace of the train step
    optimizer.build(model.trainable_variables)
    model.compile(optimizer=optimizer, loss=loss)
    return model.fit(x, y, batch_size=BATCH_SIZE, epochs=epochs, shuffle=True, verbose=0)


def assert_loss_decreased(history, rel_margin: float = 0.1) -> None:
    losses = np.asarray(history.history["loss"])
    assert np.all(np.isfinite(losses)), f"non-finite loss: {losses}"
    margin = max(0.1, rel_margin * abs(losses[0]))
    assert losses[-1] < losses[0] - margin, f"loss did not decrease by {margin:.3g}: {losses}"


def variational_snapshot(gp_layer: gpflux.layers.GPLayer) -> list[np.ndarray]:
    return [gp_layer.q_mu.numpy().copy(), gp_layer.q_sqrt.numpy().copy()]


def assert_variational_changed(before, gp_layer: gpflux.layers.GPLayer) -> None:
    after = variational_snapshot(gp_layer)
    assert not np.array_equal(before[0], after[0]), "q_mu was not trained"
    assert not np.array_equal(before[1], after[1]), "q_sqrt was not trained"


def assert_weights_tracked(model: tf_keras.Model, gp_layer: gpflux.layers.GPLayer) -> None:
    """The GPflux layer's variational parameters are among the model's trainable weights."""
    refs = {w.ref() for w in model.trainable_weights}
    for parameter in (gp_layer.q_mu, gp_layer.q_sqrt):
        assert parameter.unconstrained_variable.ref() in refs


@pytest.mark.slow
# --------------------------------------------------------------------------------- (a)
def test_unwrapped_gp_layer_before_amortized_layer_trains(rng):
    x, y = regression_data(rng)
    likelihood = gpflow.likelihoods.Gaussian(variance=0.1)
    gp_layer = make_gp_layer(rng, 2, 2, identity_mean=True, name="gpflux_gp")
    model = tf_keras.Sequential(
        [
            tf_keras.Input((2,), dtype=tf.float64),
            gp_layer,  # its output converts to one sample [B, 2]
            AmortizedGPLayer(1, 4, NUM_DATA, rule="ar2p", num_points=NUM_POINTS, name="amortized"),
            TrainableLikelihood(likelihood),
        ]
    )
    # the amortized layer sees a deterministic [B, 2] input: one component, no sigma points
    amortized = model.get_layer("amortized")
    assert amortized.input_components is None and amortized.sigma_points is None
    assert output_mixture(model(x[:7], training=True)).pack().shape == (7, 1, 3)
    assert_weights_tracked(model, gp_layer)
    before = variational_snapshot(gp_layer)

    history = compile_and_fit(model, AVDGPLoss(likelihood), x, y)

    assert_loss_decreased(history)
    assert set(history.history) == {"loss", "gpflux_gp_prior_kl"}  # GPflux's layer logs its KL
    assert_variational_changed(before, gp_layer)
    # the GPflux sample is random, so predictions are too
    first, second = predict_mixture(model, x[:20]), predict_mixture(model, x[:20])
    assert not np.array_equal(first.f_means, second.f_means)


# --------------------------------------------------------------------------------- (b)
@pytest.mark.parametrize("rule", [pytest.param("ar2", marks=pytest.mark.slow), "ar2p"])
def test_wrapped_gp_layer_after_amortized_layer_trains(rng, rule):
    x, y = regression_data(rng)
    likelihood = gpflow.likelihoods.Gaussian(variance=0.1)
    gp_layer = make_gp_layer(rng, 2, 1)
    model = tf_keras.Sequential(
        [
            tf_keras.Input((2,), dtype=tf.float64),
            AmortizedGPLayer(2, 4, NUM_DATA, rule=rule, name="amortized"),
            SigmaPointGPLayer(gp_layer, rule=rule, num_points=NUM_POINTS, name="dspp_top"),
            TrainableLikelihood(likelihood),
        ]
    )
    assert output_mixture(model(x[:7], training=True)).pack().shape == (7, NUM_POINTS, 3)
    assert_weights_tracked(model, gp_layer)
    before = variational_snapshot(gp_layer)
    kernel_before = gp_layer.kernel.kernel.lengthscales.numpy()

    history = compile_and_fit(model, AVDGPLoss(likelihood), x, y)

    assert_loss_decreased(history)
    assert set(history.history) == {"loss"}
    assert_variational_changed(before, gp_layer)
    assert gp_layer.kernel.kernel.lengthscales.numpy() != kernel_before
    assert predict_mixture(model, x).weights.shape == (NUM_DATA, NUM_POINTS)


@pytest.mark.slow
# --------------------------------------------------------------------------------- (c)
def test_pure_dspp_trains_and_predicts_deterministically(rng):
    x, y = regression_data(rng)
    likelihood = gpflow.likelihoods.Gaussian(variance=0.1)
    gp_layers = [
        make_gp_layer(rng, 2, 2, identity_mean=True),
        make_gp_layer(rng, 2, 2, identity_mean=True),
        make_gp_layer(rng, 2, 1),
    ]
    model = tf_keras.Sequential(
        [
            tf_keras.Input((2,), dtype=tf.float64),
            SigmaPointGPLayer(gp_layers[0], rule="ar2p", name="dspp_1"),
            SigmaPointGPLayer(gp_layers[1], rule="ar2p", num_points=NUM_POINTS, name="dspp_2"),
            SigmaPointGPLayer(gp_layers[2], rule="ar2p", name="dspp_3"),
            TrainableLikelihood(likelihood, objective="predictive"),  # DSPP's objective
        ]
    )
    sigma_layers = model.layers[:3]
    assert sigma_layers[0].sigma_points is None  # deterministic input
    assert sigma_layers[1].weight_logits is not None  # expands to S components: owns omega
    assert sigma_layers[2].sigma_points.shape == (NUM_POINTS, 2)
    assert sigma_layers[2].weight_logits is None  # reuses the incoming weights
    before = [variational_snapshot(layer) for layer in gp_layers]
    logits_before = sigma_layers[1].weight_logits.numpy().copy()

    history = compile_and_fit(model, AVDGPLoss(), x, y)  # the model's (predictive) objective

    assert_loss_decreased(history)
    assert set(history.history) == {"loss"}
    for snapshot, layer in zip(before, gp_layers):
        assert_variational_changed(snapshot, layer)
    assert not np.array_equal(logits_before, sigma_layers[1].weight_logits.numpy())

    first, second = predict_mixture(model, x), predict_mixture(model, x)
    assert first.weights.shape == (NUM_DATA, NUM_POINTS)
    np.testing.assert_allclose(first.weights.sum(axis=-1), 1.0, rtol=1e-12)
    for name in ("weights", "f_means", "f_variances", "y_means", "y_variances"):
        np.testing.assert_array_equal(getattr(first, name), getattr(second, name), err_msg=name)
    # the learned weights are the softmax of the shared logits, for every datapoint
    expected = tf.nn.softmax(sigma_layers[1].weight_logits).numpy()
    np.testing.assert_allclose(first.weights, np.broadcast_to(expected, first.weights.shape))


# --------------------------------------------------------------------------------- (d)
@pytest.mark.parametrize("input_kind", ["deterministic", "mixture"])
def test_wrapped_layer_loss_is_prior_kl_over_num_data(rng, input_kind):
    gp_layer = make_gp_layer(rng, 2, 3)
    # move q(u) away from the prior so that the KL is not zero
    gp_layer.q_mu.assign(rng.standard_normal(gp_layer.q_mu.shape))
    gp_layer.q_sqrt.assign(0.5 * np.tril(np.ones(gp_layer.q_sqrt.shape)))
    layer = SigmaPointGPLayer(gp_layer, rule="ar2p", num_points=NUM_POINTS)
    if input_kind == "deterministic":
        inputs = tf.constant(rng.standard_normal((9, 2)))
    else:
        inputs = GaussianMixture(
            means=tf.constant(rng.standard_normal((9, 1, 2))),
            variances=tf.constant(rng.uniform(0.1, 1.0, (9, 1, 2))),
            log_weights=tf.zeros((9, 1), dtype=tf.float64),
        ).pack()

    outputs = layer(inputs, training=True)

    expected = gp_layer.prior_kl() / NUM_DATA
    assert expected.numpy() > 1e-3
    assert len(layer.losses) == 1
    np.testing.assert_allclose(layer.losses[0].numpy(), expected.numpy(), rtol=1e-12)
    assert outputs.shape == (9, 1 if input_kind == "deterministic" else NUM_POINTS, 2 * 3 + 1)

    # the same inside a model: exactly one loss term per wrapped layer
    wrapped = SigmaPointGPLayer(gp_layer, rule="ar2p", num_points=NUM_POINTS)
    model = tf_keras.Sequential([tf_keras.Input(inputs.shape[1:], dtype=tf.float64), wrapped])
    model(inputs, training=True)
    assert len(model.losses) == 1
    np.testing.assert_allclose(model.losses[0].numpy(), expected.numpy(), rtol=1e-12)
