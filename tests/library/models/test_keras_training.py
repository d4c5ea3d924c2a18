"""End-to-end training of AVDGP ``tf_keras.Sequential`` models with ``model.fit``.

Every test builds a tiny model, trains a few epochs on a tiny data set and checks that the
per-epoch mean loss goes down by a clear margin (Keras reports the mean over the epoch's
batches, KL terms from ``add_loss`` included). Tracing dominates the run time, so epochs are
cheap and models are kept small.
"""

from __future__ import annotations

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras

import gpflux_avdgp
from gpflux_avdgp import AmortizedGPLayer, AVDGPLoss, TrainableLikelihood, predict_mixture
from gpflux_avdgp.predictive import output_mixture
from gpflux_avdgp.rules import ModelRule

NUM_DATA = 200
BATCH_SIZE = 50
NUM_INDUCING = 4
NUM_POINTS = 4
RULES = ["ar1", "ar2", "ar2p", "ar2pp"]
SLOW = pytest.mark.slow


# ------------------------------------------------------------------------------------ helpers
def regression_data(rng: np.random.Generator, dtype=np.float64) -> tuple[np.ndarray, np.ndarray]:
    """``N = 200`` points in 2-D with a smooth non-linear target and small noise."""
    x = rng.uniform(-2.0, 2.0, size=(NUM_DATA, 2))
    y = np.sin(2.0 * x[:, :1]) + 0.5 * x[:, 1:] ** 2 + 0.1 * rng.standard_normal((NUM_DATA, 1))
    return x.astype(dtype), y.astype(dtype)


def classification_data(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Binary labels in ``{0, 1}`` from a curved, noise-free decision boundary."""
    x = rng.uniform(-2.0, 2.0, size=(NUM_DATA, 2))
    y = (np.sin(1.5 * x[:, :1]) + x[:, 1:] > 0.0).astype(np.float64)
    return x, y


def layer_rule(rule: str) -> str:
    """AR2PP is AR2P layers trained with the predictive objective."""
    return "ar2p" if rule == "ar2pp" else rule


def make_loss(likelihood: gpflow.likelihoods.Likelihood, rule: str) -> AVDGPLoss:
    return AVDGPLoss(likelihood, objective="predictive" if rule == "ar2pp" else "elbo")


def compile_and_fit(
    model: tf_keras.Model,
    loss: AVDGPLoss,
    x: np.ndarray,
    y: np.ndarray,
    *,
    epochs: int = 8,
    learning_rate: float = 0.02,
    jit_compile: bool = False,
) -> tf_keras.callbacks.History:
    optimizer = tf_keras.optimizers.Adam(learning_rate)
    # creating the slots up front saves Keras a second trace of the train step
    optimizer.build(model.trainable_variables)
    model.compile(optimizer=optimizer, loss=loss, jit_compile=jit_compile)
    return model.fit(x, y, batch_size=BATCH_SIZE, epochs=epochs, shuffle=True, verbose=0)


def assert_loss_decreased(history: tf_keras.callbacks.History, rel_margin: float = 0.1) -> None:
    """Finite losses, and the last epoch's mean loss clearly below the first epoch's."""
    losses = np.asarray(history.history["loss"])
    assert np.all(np.isfinite(losses)), f"non-finite loss: {losses}"
    first, last = losses[0], losses[-1]
    margin = max(0.1, rel_margin * abs(first))
    assert last < first - margin, f"loss did not decrease by {margin:.3g}: {losses}"


def weights_snapshot(layer: tf_keras.layers.Layer) -> list[np.ndarray]:
    return [w.numpy().copy() for w in layer.trainable_weights]


def assert_weights_changed(before: list[np.ndarray], layer: tf_keras.layers.Layer) -> None:
    after = weights_snapshot(layer)
    assert len(after) == len(before) and len(after) > 0
    assert any(not np.array_equal(b, a) for b, a in zip(before, after)), layer.name


# ------------------------------------------------------------------------------ regression
@pytest.mark.parametrize(
    "rule, data_dtype",
    [
        pytest.param(
            rule,
            dtype,
            id=f"{rule}-{name}",
            # by default the default rule on float64 data; every pair in the slow suite
            marks=() if (rule, name) == ("ar2p", "f64data") else SLOW,
        )
        for rule in RULES
        for dtype, name in [(np.float64, "f64data"), (np.float32, "f32data")]
    ],
)
def test_build_avdgp_regression_trains(rng, rule, data_dtype):
    x, y = regression_data(rng, data_dtype)
    likelihood = gpflow.likelihoods.Gaussian(variance=0.1)
    model = gpflux_avdgp.build_avdgp(
        2, [2, 1], NUM_INDUCING, NUM_DATA, likelihood, rule=rule, num_points=NUM_POINTS, seed=3
    )
    # every float weight is float64 (the AR1/AR2 draw counter and each layer's flag of placed
    # anchors are int64)
    assert all(w.dtype == tf.float64 for w in model.weights if w.dtype.is_floating)
    counters = [
        w.name.split("/")[-1].split(":")[0] for w in model.weights if not w.dtype.is_floating
    ]
    expected = ["anchors_placed"] * 2 + (["draw_counter"] if rule in ("ar1", "ar2") else [])
    assert sorted(counters) == sorted(expected)
    assert model(x[:5]).dtype == tf.float64  # float32 data is cast by the float64 Input
    variance_before = likelihood.variance.numpy()

    history = compile_and_fit(model, make_loss(likelihood, rule), x, y)

    assert_loss_decreased(history)
    # History names do not depend on layer names: the loss and the GP layers' KL sum
    assert set(history.history) == {"loss", "kl"}
    assert np.all(np.isfinite(history.history["kl"]))
    assert np.all(np.asarray(history.history["kl"]) >= 0.0)
    assert np.all(np.asarray(history.history["kl"]) < np.asarray(history.history["loss"]))
    # the likelihood's variance is a model weight (through TrainableLikelihood), so it trains
    assert likelihood.variance.numpy() != variance_before


@pytest.mark.slow
@pytest.mark.parametrize(
    "rule", [rule if rule == "ar2pp" else pytest.param(rule, marks=SLOW) for rule in RULES]
)
def test_hand_assembled_sequential_trains(rng, rule):
    x, y = regression_data(rng)
    likelihood = gpflow.likelihoods.Gaussian(variance=0.1)
    model = tf_keras.Sequential(
        [
            tf_keras.Input((2,), dtype=tf.float64),
            AmortizedGPLayer(2, NUM_INDUCING, NUM_DATA, rule=layer_rule(rule), name="hidden"),
            AmortizedGPLayer(
                2,
                NUM_INDUCING,
                NUM_DATA,
                rule=layer_rule(rule),
                num_points=NUM_POINTS,
                # AR1/AR2 train with num_train_samples (AR1's default: one); here S for both
                num_train_samples=None if layer_rule(rule) == "ar2p" else NUM_POINTS,
                name="middle",
            ),
            AmortizedGPLayer(1, NUM_INDUCING, NUM_DATA, rule=layer_rule(rule), name="top"),
            TrainableLikelihood(likelihood, objective=ModelRule(rule).objective),
        ]
    )
    assert output_mixture(model(x[:5], training=True)).pack().shape == (5, NUM_POINTS, 3)
    before = {layer.name: weights_snapshot(layer) for layer in model.layers}

    history = compile_and_fit(model, AVDGPLoss(), x, y)  # the model's likelihood and objective

    assert_loss_decreased(history)
    # a plain Sequential logs the loss only, whatever its layers are called
    assert set(history.history) == {"loss"}
    for layer in model.layers:
        assert_weights_changed(before[layer.name], layer)


@pytest.mark.slow
# -------------------------------------------------------------------------- classification
def test_bernoulli_classification_end_to_end(rng):
    x, y = classification_data(rng)
    likelihood = gpflow.likelihoods.Bernoulli()  # probit
    model = gpflux_avdgp.build_avdgp(
        2, [2, 1], NUM_INDUCING, NUM_DATA, likelihood, rule="ar2p", num_points=NUM_POINTS, seed=5
    )

    history = compile_and_fit(model, AVDGPLoss(likelihood), x, y, epochs=20, learning_rate=0.03)

    assert_loss_decreased(history)
    probabilities = predict_mixture(model, x).class_probabilities()  # [N, 1]
    assert probabilities.shape == (NUM_DATA, 1)
    assert np.all((probabilities >= 0.0) & (probabilities <= 1.0))
    accuracy = np.mean((probabilities > 0.5) == (y > 0.5))
    chance = max(y.mean(), 1.0 - y.mean())
    assert accuracy > max(0.8, chance + 0.2), (accuracy, chance)


# ----------------------------------------------------------------------------- jit_compile
# AR1 and AR2 under XLA: step equality for every rule is in
# tests/application/training/test_xla.py (fast).
@pytest.mark.slow
@pytest.mark.parametrize(
    "rule",
    [
        pytest.param("ar1", marks=pytest.mark.slow),
        pytest.param("ar2", marks=pytest.mark.slow),
        "ar2p",
    ],
)
def test_jit_compile_trains(rng, rule):
    x, y = regression_data(rng)
    likelihood = gpflow.likelihoods.Gaussian(variance=0.1)
    model = gpflux_avdgp.build_avdgp(
        2,
        [2, 1],
        NUM_INDUCING,
        NUM_DATA,
        likelihood,
        rule=rule,
        num_points=NUM_POINTS,
        hidden_layers=1,
        seed=7,
    )

    history = compile_and_fit(model, AVDGPLoss(likelihood), x, y, jit_compile=True)

    assert model.jit_compile
    assert_loss_decreased(history)


# ------------------------------------------------------------------------------ float32
def _fit_float32_model(x: np.ndarray, y: np.ndarray, rule: str) -> None:
    """Build and train while ``gpflow.default_float()`` is float32; check dtypes and losses."""
    likelihood = gpflow.likelihoods.Gaussian(variance=0.1)
    model = gpflux_avdgp.build_avdgp(
        2, [2, 2, 1], NUM_INDUCING, NUM_DATA, likelihood, rule=rule, num_points=NUM_POINTS, seed=9
    )
    assert all(w.dtype == tf.float32 for w in model.weights if w.dtype.is_floating)
    assert likelihood.variance.dtype == tf.float32
    assert model(x[:5]).dtype == tf.float32

    history = compile_and_fit(model, AVDGPLoss(likelihood), x, y)

    assert_loss_decreased(history)
    for values in history.history.values():
        assert np.all(np.isfinite(values))
    mixture = predict_mixture(model, x)
    assert mixture.f_means.dtype == np.float32
    assert np.all(np.isfinite(mixture.f_means)) and np.all(mixture.f_variances >= 0.0)


@pytest.mark.slow
@pytest.mark.parametrize(
    "how, rule",
    [
        ("context", "ar1"),
        pytest.param("context", "ar2", marks=SLOW),
        pytest.param("set_default_float", "ar2p", marks=SLOW),
    ],
)
def test_float32_model_trains(rng, how, rule):
    x, y = regression_data(rng, np.float32)
    if how == "context":
        with gpflow.config.as_context(gpflow.config.Config(float=np.float32, jitter=1e-4)):
            _fit_float32_model(x, y, rule)
    else:
        previous_float, previous_jitter = gpflow.default_float(), gpflow.config.default_jitter()
        try:
            gpflow.config.set_default_float(np.float32)
            gpflow.config.set_default_jitter(1e-4)
            _fit_float32_model(x, y, rule)
        finally:
            gpflow.config.set_default_float(previous_float)
            gpflow.config.set_default_jitter(previous_jitter)
    assert gpflow.default_float() == np.float64


@pytest.mark.slow
# ---------------------------------------------------------------------- feature extractor
def test_dense_feature_extractor_in_front_trains(rng):
    x, y = regression_data(rng)
    likelihood = gpflow.likelihoods.Gaussian(variance=0.1)
    dense = tf_keras.layers.Dense(3, activation="tanh", dtype=tf.float64, name="features")
    model = tf_keras.Sequential(
        [
            tf_keras.Input((2,), dtype=tf.float64),
            dense,
            AmortizedGPLayer(2, NUM_INDUCING, NUM_DATA, rule="ar2p", name="gp_1"),
            AmortizedGPLayer(
                1, NUM_INDUCING, NUM_DATA, rule="ar2p", num_points=NUM_POINTS, name="gp_2"
            ),
            TrainableLikelihood(likelihood),
        ]
    )
    dense_before = weights_snapshot(dense)

    history = compile_and_fit(model, AVDGPLoss(likelihood), x, y)

    assert_loss_decreased(history)
    assert_weights_changed(dense_before, dense)
    assert set(history.history) == {"loss"}


@pytest.mark.slow
# ------------------------------------------------------------------- prediction behaviour
def test_ar2p_prediction_is_deterministic(rng):
    x, _ = regression_data(rng)
    likelihood = gpflow.likelihoods.Gaussian(variance=0.1)
    model = gpflux_avdgp.build_avdgp(
        2, [2, 2, 1], NUM_INDUCING, NUM_DATA, likelihood, rule="ar2p", num_points=5, seed=11
    )
    # move the weights away from uniform, as training would
    logits = model.get_layer("gp_layer_2").weight_logits
    logits.assign(rng.standard_normal(logits.shape))

    first = predict_mixture(model, x, batch_size=64)
    second = predict_mixture(model, x, batch_size=64)

    assert first.weights.shape == (NUM_DATA, 5)
    np.testing.assert_allclose(first.weights[0], tf.nn.softmax(logits).numpy())
    for name in ("weights", "f_means", "f_variances", "y_means", "y_variances"):
        np.testing.assert_array_equal(getattr(first, name), getattr(second, name), err_msg=name)
    # every datapoint is computed on its own: the batching does not change the prediction
    other_batching = predict_mixture(model, x, batch_size=NUM_DATA)
    np.testing.assert_allclose(other_batching.f_means, first.f_means, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(other_batching.f_variances, first.f_variances, rtol=1e-12)
    # the training-mode forward pass is deterministic too, and uses the same sigma points
    np.testing.assert_array_equal(model(x, training=True), model(x, training=True))
    np.testing.assert_array_equal(model(x, training=True), model(x, training=False))


@pytest.mark.parametrize("rule", ["ar1", "ar2"])
def test_sampled_rules_train_with_num_train_samples_and_predict_with_num_points(rng, rule):
    x, _ = regression_data(rng)
    likelihood = gpflow.likelihoods.Gaussian(variance=0.1)
    num_train_samples, num_points = 3, 7
    model = tf_keras.Sequential(
        [
            tf_keras.Input((2,), dtype=tf.float64),
            AmortizedGPLayer(2, NUM_INDUCING, NUM_DATA, rule=rule),
            AmortizedGPLayer(
                1,
                NUM_INDUCING,
                NUM_DATA,
                rule=rule,
                num_points=num_points,
                num_train_samples=num_train_samples,
            ),
            TrainableLikelihood(likelihood),
        ]
    )

    assert output_mixture(model(x[:10], training=True)).pack().shape == (10, num_train_samples, 3)
    assert output_mixture(model(x[:10], training=False)).pack().shape == (10, num_points, 3)
    first = predict_mixture(model, x)
    second = predict_mixture(model, x)

    assert first.weights.shape == (NUM_DATA, num_points)
    assert first.f_means.shape == (NUM_DATA, num_points, 1)
    np.testing.assert_allclose(first.weights, 1.0 / num_points)
    # prediction uses one fixed set of Monte Carlo draws: deterministic, and the components
    # are distinct draws
    np.testing.assert_array_equal(first.f_means, second.f_means)
    assert len(np.unique(first.f_means[0, :, 0])) == num_points


@pytest.mark.slow
def test_ar1_default_points_one_for_training_many_for_prediction(rng):
    x, _ = regression_data(rng)
    likelihood = gpflow.likelihoods.Gaussian(variance=0.1)
    model = gpflux_avdgp.build_avdgp(2, [2, 1], NUM_INDUCING, NUM_DATA, likelihood, rule="ar1")

    assert output_mixture(model(x[:10], training=True)).pack().shape == (10, 1, 3)
    assert predict_mixture(model, x).weights.shape == (NUM_DATA, 32)


@pytest.mark.slow
def test_tensorboard_callback_writes_the_training_curves(rng, tmp_path):
    """``tf_keras.callbacks.TensorBoard`` works out of the box (tensorboard is a dependency),
    profile included (docs/performance.md)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    x, y = regression_data(rng, np.float64)
    likelihood = gpflow.likelihoods.Gaussian(0.1)
    model = gpflux_avdgp.build_avdgp(x.shape[1], [1], 4, len(x), likelihood, num_points=3, seed=0)
    model.compile(tf_keras.optimizers.Adam(0.01), loss=AVDGPLoss(likelihood))
    board = tf_keras.callbacks.TensorBoard(log_dir=str(tmp_path / "logs"), profile_batch=(2, 3))
    model.fit(x, y, batch_size=20, epochs=2, verbose=0, callbacks=[board])
    events = EventAccumulator(str(tmp_path / "logs" / "train"))
    events.Reload()
    losses = [event.step for event in events.Tensors("epoch_loss")]
    assert losses == [0, 1]
    assert list((tmp_path / "logs").glob("plugins/profile/*/*.xplane.pb"))  # batches 2-3 traced
