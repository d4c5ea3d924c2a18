"""One output convention in every Keras model type (issue 35): the last layer outputs the
predictive distribution of ``y``, so Keras' metrics, the package's metrics and losses give
the numbers NumPy gives, in an ``AVDGPModel``, a plain ``Sequential``, a Functional model, a
subclassed model and a clone; and the model carries its objective."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras
from scipy.stats import norm

import gpflux_avdgp as ga
from gpflux_avdgp.predictive import predictive_distribution

NUM_DATA = 120
MODEL_TYPES = ["avdgp", "sequential", "functional", "subclassed", "clone"]
#: The default suite runs a behaviour of every model type in a Functional model, the type this
#: module exists for; the slow suite (CI) adds the others, each a trace of its own (about 6 s).
DEFAULT_TYPES = ("functional",)


def model_types(*kinds: str, default: tuple[str, ...] = DEFAULT_TYPES) -> list:
    """``kinds`` as parameters, those outside ``default`` in the slow suite."""
    return [
        kind if kind in default else pytest.param(kind, marks=pytest.mark.slow) for kind in kinds
    ]


def _data(seed: int = 0) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Tensors, so that Keras keeps float64 in every model type (it casts NumPy floats to
    float32 outside an ``AVDGPModel``)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, (NUM_DATA, 2))
    f = np.sin(2 * x[:, :1]) + 0.5 * x[:, 1:]
    y = f + 0.1 * rng.standard_normal((NUM_DATA, 1))
    return tf.constant(x), tf.constant(y), tf.constant((f > 0).astype(np.float64))


class _Subclassed(tf_keras.Model):
    def __init__(self, layers):
        super().__init__()
        self.stack = layers

    def call(self, inputs):
        for layer in self.stack:
            inputs = layer(inputs)
        return inputs


def _model(kind: str, likelihood: gpflow.likelihoods.Likelihood, **options) -> tf_keras.Model:
    """The same layers (one AR2P GP layer and the likelihood layer) in a Keras model type;
    the global seeds reset, so that training (its shuffling) is the same in every test order."""
    tf_keras.utils.set_random_seed(0)
    built = ga.build_avdgp(2, [1], 4, NUM_DATA, likelihood, num_points=4, seed=0, **options)
    if kind == "avdgp":
        return built
    inputs = tf_keras.Input((2,), dtype=tf.float64)
    if kind == "sequential":
        return tf_keras.Sequential([inputs, *built.layers])
    if kind == "clone":
        return tf_keras.models.clone_model(tf_keras.Sequential([inputs, *built.layers]))
    if kind == "subclassed":
        return _Subclassed(built.layers)
    outputs = inputs
    for layer in built.layers:
        outputs = layer(outputs)
    return tf_keras.Model(inputs, outputs)


def _likelihood_of(model: tf_keras.Model) -> gpflow.likelihoods.Likelihood:
    return [layer for layer in model.layers if isinstance(layer, ga.TrainableLikelihood)][
        0
    ].likelihood


@pytest.mark.parametrize("kind", model_types(*MODEL_TYPES))
def test_classifier_metrics_equal_numpy_in_every_model_type(kind):
    x, _, labels = _data()
    model = _model(kind, gpflow.likelihoods.Bernoulli())
    metrics = ["accuracy", ga.MixtureAccuracy(name="mixture_accuracy"), ga.MixtureNLL()]
    model.compile(tf_keras.optimizers.Adam(0.05), loss=ga.AVDGPLoss(), metrics=metrics)
    model.fit(x, labels, batch_size=40, epochs=3, verbose=0)
    scores = model.evaluate(x, labels, batch_size=NUM_DATA, verbose=0, return_dict=True)

    mixture = ga.predict_mixture(model, x, likelihood=_likelihood_of(model))
    probit = norm.cdf(mixture.f_means / np.sqrt(1 + mixture.f_variances))  # [N, S, 1]
    probit = probit * (1 - 2e-3) + 1e-3  # GPflow's inv_probit keeps 1e-3 from 0 and 1
    p = np.sum(mixture.weights[..., None] * probit, axis=1)[:, 0]
    positive = labels.numpy()[:, 0] == 1
    accuracy = np.mean((p > 0.5) == positive)
    nll = -np.mean(np.log(np.where(positive, p, 1 - p)))
    assert 0.6 < accuracy < 1.0  # a trained, imperfect classifier: the check can fail
    assert scores["accuracy"] == pytest.approx(accuracy, abs=1e-7)
    assert scores["mixture_accuracy"] == pytest.approx(accuracy, abs=1e-7)
    assert scores["nll"] == pytest.approx(nll, rel=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("kind", model_types("functional", "subclassed", "clone"))
def test_regression_metrics_equal_numpy_in_other_model_types(kind):
    x, y, _ = _data()
    model = _model(kind, gpflow.likelihoods.Gaussian(variance=0.1))
    model.compile(
        tf_keras.optimizers.Adam(0.05), loss=ga.AVDGPLoss(), metrics=["mse", ga.MixtureNLL()]
    )
    model.fit(x, y, batch_size=40, epochs=3, verbose=0)
    scores = model.evaluate(x, y, batch_size=NUM_DATA, verbose=0, return_dict=True)

    mixture = ga.predict_mixture(model, x, likelihood=_likelihood_of(model))
    mean, _ = mixture.y_moments()
    y = y.numpy()
    # Keras' "mse" accumulates in float32 (floatx), the package's metrics in float64
    assert scores["mse"] == pytest.approx(np.mean((mean - y) ** 2), rel=1e-6)
    noise = _likelihood_of(model).variance.numpy()
    density = np.sum(
        mixture.weights[..., None]
        * norm.pdf(y[:, None, :], mixture.f_means, np.sqrt(mixture.f_variances + noise)),
        axis=1,
    )
    assert scores["nll"] == pytest.approx(-np.mean(np.log(density)), rel=1e-9)


@pytest.mark.parametrize("kind", model_types("sequential", "functional", "subclassed", "clone"))
def test_a_loss_that_does_not_read_the_distribution_is_refused_before_any_update(kind):
    """Without a loss Keras would train the KL terms alone (loss 0.001), with ``"mse"`` the
    mean of y without the noise variance: refused while the step is traced, nothing updated.
    (``AVDGPModel`` trains its objective without a loss and refuses ``"mse"`` at ``compile``.)"""
    x, y, _ = _data()
    model = _model(kind, gpflow.likelihoods.Gaussian(variance=0.1))
    model(x)  # builds every weight
    before = [w.copy() for w in model.get_weights()]
    for loss in (None, "mse"):
        model.compile(tf_keras.optimizers.Adam(0.05), loss=loss)
        with pytest.raises(ValueError) as error:
            model.fit(x, y, batch_size=40, epochs=1, verbose=0)
        # AutoGraph prefixes the frames of Keras' step; the refusal is the last line
        last = str(error.value).strip().splitlines()[-1].strip()
        assert re.fullmatch(
            r"ValueError: likelihood: the loss does not read the model's predictive "
            r"distribution.*compile\(loss=gpflux_avdgp\.AVDGPLoss\(\)\).*"
            r"predictive_distribution\(y_pred\).*",
            last,
        ), (loss, last)
        for old, new in zip(before, model.get_weights()):
            np.testing.assert_array_equal(old, new)


def test_a_gradient_tape_of_ones_own_trains_when_its_loss_reads_the_distribution():
    x, y, _ = _data()
    model = _model("functional", gpflow.likelihoods.Gaussian(variance=0.1))
    with tf.GradientTape() as tape:
        outputs = model(x, training=True)
        loss = -tf.reduce_mean(predictive_distribution(outputs).log_prob(y)) + tf.add_n(
            model.losses
        )
    gradients = tape.gradient(loss, model.trainable_variables)
    assert all(g is not None for g in gradients)
    assert np.abs(gradients[-1].numpy()).sum() > 0  # the noise variance's
    with tf.GradientTape() as tape:
        outputs = model(x, training=True)
        loss = tf.reduce_mean((outputs - y) ** 2) + tf.add_n(model.losses)
    with pytest.raises(ValueError, match=r"^likelihood: the loss does not read"):
        tape.gradient(loss, model.trainable_variables)


def test_the_output_is_the_mean_of_y_carrying_the_predictive_distribution():
    x, y, _ = _data()
    model = _model("functional", gpflow.likelihoods.Gaussian(variance=0.1))
    outputs = model(x)
    distribution = predictive_distribution(outputs)
    np.testing.assert_allclose(outputs.numpy(), distribution.mean().numpy(), rtol=1e-12)
    mixture = ga.predict_mixture(model, x, likelihood=distribution.likelihood)
    mean, variance = mixture.y_moments()
    np.testing.assert_allclose(model.predict(x, verbose=0), mean, rtol=1e-10)
    np.testing.assert_allclose(distribution.stddev().numpy(), np.sqrt(variance), rtol=1e-10)
    np.testing.assert_allclose(distribution.log_prob(y).numpy(), mixture.log_density(y), 1e-10)


@pytest.mark.slow
def test_a_loss_of_ones_own_reads_the_distribution_as_with_tfp():
    x, y, _ = _data()
    model = _model("functional", gpflow.likelihoods.Gaussian(variance=0.1))

    def negative_log_density(y_true, y_pred):
        return -predictive_distribution(y_pred).log_prob(y_true)

    model.compile(tf_keras.optimizers.Adam(0.05), loss=negative_log_density)
    losses = model.fit(x, y, batch_size=40, epochs=4, verbose=0).history["loss"]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]


@pytest.mark.slow
def test_plus_minus_one_labels_are_scored_as_gpflow_reads_them_in_an_avdgp_model():
    x, _, labels = _data()
    model = _model("avdgp", gpflow.likelihoods.Bernoulli())
    metrics = ["accuracy", tf_keras.metrics.AUC(name="auc"), ga.MixtureNLL()]
    model.compile(tf_keras.optimizers.Adam(0.05), metrics=metrics)
    model.fit(x, 2 * labels - 1, batch_size=40, epochs=3, verbose=0)
    with_01 = model.evaluate(x, labels, batch_size=NUM_DATA, verbose=0, return_dict=True)
    with_pm1 = model.evaluate(x, 2 * labels - 1, batch_size=NUM_DATA, verbose=0, return_dict=True)
    assert with_01["accuracy"] > 0.6 and with_01["auc"] > 0.6
    for name in ("loss", "accuracy", "auc", "nll"):
        assert with_pm1[name] == pytest.approx(with_01[name], abs=1e-12), name


@pytest.mark.slow
@pytest.mark.parametrize("kind", model_types("sequential", "functional", "subclassed"))
def test_plus_minus_one_labels_are_refused_where_keras_metrics_would_misread_them(kind):
    x, _, labels = _data()
    model = _model(kind, gpflow.likelihoods.Bernoulli())
    model.compile(tf_keras.optimizers.Adam(0.05), loss=ga.AVDGPLoss(), metrics=["accuracy"])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"pass \(y == 1\) as the labels"):
        model.fit(x, 2 * labels - 1, batch_size=40, epochs=1, verbose=0)


@pytest.mark.parametrize(  # AVDGPModel's by default: it trained on {1, 2} silently (issue 49)
    "kind", model_types(*MODEL_TYPES, default=("avdgp",))
)
def test_bernoulli_labels_other_than_0_1_or_plus_minus_1_are_refused_in_every_model_type(kind):
    """``{1, 2}`` would train with 2 read as the negative class (accuracy 0.16 read with 2 as
    the positive one): refused in one line, whatever the model type."""
    x, _, labels = _data()
    model = _model(kind, gpflow.likelihoods.Bernoulli())
    loss = None if kind == "avdgp" else ga.AVDGPLoss()
    model.compile(tf_keras.optimizers.Adam(0.05), loss=loss, metrics=["accuracy"])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"labels"):
        model.fit(x, labels + 1, batch_size=40, epochs=1, verbose=0)


@pytest.mark.parametrize("kind", model_types(*MODEL_TYPES, default=("avdgp",)))
def test_bool_labels_train_and_score_as_0_1_labels_in_every_model_type(kind):
    """Issue 74, row 5: ``y > 0`` as ``bool`` gave a dtype ``TypeError`` in an AVDGPModel;
    True / False are classes 1 and 0: the same losses and metrics as float ``{0, 1}``."""
    x, _, labels = _data()
    results = []
    for y in (tf.cast(labels, tf.bool), labels):
        tf_keras.utils.set_random_seed(0)
        model = _model(kind, gpflow.likelihoods.Bernoulli())
        loss = None if kind == "avdgp" else ga.AVDGPLoss()
        model.compile(tf_keras.optimizers.Adam(0.05), loss=loss, metrics=[ga.MixtureNLL()])
        history = model.fit(x, y, batch_size=40, epochs=1, verbose=0).history["loss"]
        scores = model.evaluate(x, y, batch_size=NUM_DATA, verbose=0, return_dict=True)
        results.append((history, scores))
    assert results[0][0] == pytest.approx(results[1][0], abs=1e-12)
    for name, value in results[1][1].items():
        assert results[0][1][name] == pytest.approx(value, abs=1e-12), name


def test_an_ar2pp_model_trains_its_predictive_objective_and_saves_it(tmp_path):
    x, y, _ = _data()
    model = _model("avdgp", gpflow.likelihoods.Gaussian(variance=0.1), rule="ar2pp")
    model.compile(tf_keras.optimizers.Adam(0.05))  # nothing more said
    assert model.layers[-1].objective.value == "predictive"
    outputs = model(x, training=True)
    kl = tf.add_n(model.losses)
    expected = -np.mean(predictive_distribution(outputs).log_prob(y).numpy()) + kl.numpy()
    elbo_term = -np.mean(predictive_distribution(outputs).expected_log_likelihood(y).numpy())
    assert abs(expected - (elbo_term + kl.numpy())) > 1e-3  # the two objectives differ here
    loss = model.compute_loss(x, y, outputs)
    assert loss.numpy() == pytest.approx(expected, rel=1e-12)

    model.save(tmp_path / "model.keras")
    reloaded = ga.load_model(tmp_path / "model.keras")
    assert reloaded.layers[-1].objective.value == "predictive"
    with pytest.raises(ValueError, match=r"^avdgp_loss: objective 'elbo', but the model trains"):
        model.compile("adam", loss=ga.AVDGPLoss(objective="elbo"))


@pytest.mark.slow
def test_as_deep_gp_predicts_class_probabilities_of_a_multiclass_likelihood():
    x, _, labels = _data()
    classes = (labels.numpy()[:, 0] + (x.numpy()[:, 1] > 1)).astype(np.float64)[:, None]  # 0-2
    likelihood = gpflow.likelihoods.MultiClass(3)
    layer = ga.AmortizedGPLayer(3, 4, NUM_DATA, num_points=4, seed=0)
    deep_gp = ga.as_deep_gp([layer], likelihood, input_dim=2)
    training = deep_gp.as_training_model()
    training.compile(tf_keras.optimizers.Adam(0.05))
    training.fit({"inputs": x, "targets": classes}, batch_size=40, epochs=2, verbose=0)
    outputs = deep_gp.as_prediction_model()(x)
    sequential = tf_keras.Sequential([layer, ga.TrainableLikelihood(likelihood)])
    expected = ga.predict_mixture(sequential, x).class_probabilities()
    np.testing.assert_allclose(outputs.y_mean.numpy(), expected, rtol=1e-9)
    np.testing.assert_allclose(outputs.y_mean.numpy().sum(axis=1), 1.0, rtol=1e-12)


def test_model_from_json_rebuilds_an_avdgp_model():
    x, _, _ = _data()
    model = _model("avdgp", gpflow.likelihoods.Gaussian(variance=0.1))
    rebuilt = tf_keras.models.model_from_json(model.to_json())
    assert isinstance(rebuilt, ga.AVDGPModel)
    rebuilt.set_weights(model.get_weights())
    np.testing.assert_array_equal(rebuilt(x).numpy(), model(x).numpy())


def test_predict_of_one_row_and_h5_weights_are_refused_in_one_line(tmp_path):
    x, _, _ = _data()
    model = _model("avdgp", gpflow.likelihoods.Gaussian(variance=0.1))
    with pytest.raises(ValueError, match=r"^x: .*x\.reshape\(1, -1\)") as error:
        model.predict(x.numpy()[0], verbose=0)
    assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match=r"^filepath: HDF5 weights .* save_weights\('weights'\)"):
        model.save_weights(str(tmp_path / "w.h5"))
    model.save_weights(str(tmp_path / "weights"))  # a TensorFlow checkpoint
    copy = _model("avdgp", gpflow.likelihoods.Gaussian(variance=0.3))
    copy.load_weights(str(tmp_path / "weights"))
    np.testing.assert_array_equal(copy(x).numpy(), model(x).numpy())


def test_a_multi_input_functional_model_predicts_its_mixture_and_refuses_export(tmp_path):
    x, y, _ = _data()
    built = ga.build_avdgp(2, [1], 4, NUM_DATA, gpflow.likelihoods.Gaussian(0.1), seed=0)
    first, second = tf_keras.Input((1,), dtype=tf.float64), tf_keras.Input((1,), dtype=tf.float64)
    outputs = tf_keras.layers.Concatenate(dtype=tf.float64)([first, second])
    for layer in built.layers:
        outputs = layer(outputs)
    model = tf_keras.Model([first, second], outputs)
    parts = [x.numpy()[:, :1], x.numpy()[:, 1:]]
    mixture = ga.predict_mixture(model, parts, batch_size=50)
    expected = ga.predict_mixture(built, x.numpy(), batch_size=50)
    np.testing.assert_allclose(mixture.f_means, expected.f_means, rtol=1e-12)
    with pytest.raises(ValueError, match=r"^model: .* has 2 inputs, the export serves one"):
        ga.export(model, tmp_path / "served")


@pytest.mark.slow
def test_a_refit_with_targets_of_another_rank_trains():
    """Keras traces the step again for ``[N]`` after ``[N, 1]`` with targets of unknown rank."""
    x, y, _ = _data()
    model = _model("avdgp", gpflow.likelihoods.Gaussian(variance=0.1))
    model.compile(tf_keras.optimizers.Adam(0.05))
    first = model.fit(x, y, batch_size=40, epochs=1, verbose=0).history["loss"]
    second = model.fit(x, y[:, 0], batch_size=40, epochs=1, verbose=0).history["loss"]
    assert np.isfinite(first + second).all()


def test_predict_mixture_and_export_read_the_gp_head_of_a_model_with_a_dense_head_too(tmp_path):
    x, _, _ = _data()
    built = ga.build_avdgp(2, [1], 4, NUM_DATA, gpflow.likelihoods.Gaussian(0.1), seed=0)
    inputs = tf_keras.Input((2,), dtype=tf.float64)
    gp_head = inputs
    for layer in built.layers:
        gp_head = layer(gp_head)
    dense_head = tf_keras.layers.Dense(3, dtype=tf.float64)(inputs)
    for outputs in ([dense_head, gp_head], {"class": dense_head, "gp": gp_head}):
        model = tf_keras.Model(inputs, outputs)
        mixture = ga.predict_mixture(model, x.numpy(), batch_size=50)
        expected = ga.predict_mixture(built, x.numpy(), batch_size=50)
        np.testing.assert_array_equal(mixture.f_means, expected.f_means)
        assert mixture.likelihood is built.likelihood
    served = tf.saved_model.load(str(ga.export(model, tmp_path / "served")))
    np.testing.assert_allclose(
        served.signatures["predict_y"](x=x)["mean"].numpy(),
        built.predict(x.numpy(), verbose=0)["mean"],
        rtol=1e-10,
    )
    two = tf_keras.Model(inputs, [dense_head, tf_keras.layers.Dense(1, dtype=tf.float64)(inputs)])
    with pytest.raises(ValueError, match=r"likelihood: the model holds no .* pass likelihood="):
        ga.predict_mixture(two, x.numpy())
    with pytest.raises(ValueError, match=r"^model: 2 outputs, 0 of them a TrainableLikelihood's"):
        ga.predict_mixture(two, x.numpy(), likelihood=gpflow.likelihoods.Gaussian())


@pytest.mark.slow
def test_predict_mixture_takes_a_dict_of_named_inputs_and_a_nested_model(tmp_path):
    x, _, _ = _data()
    built = ga.build_avdgp(2, [1], 4, NUM_DATA, gpflow.likelihoods.Gaussian(0.1), seed=0)
    first = tf_keras.Input((1,), dtype=tf.float64, name="width")
    second = tf_keras.Input((1,), dtype=tf.float64, name="height")
    outputs = tf_keras.layers.Concatenate(dtype=tf.float64)([first, second])
    for layer in built.layers:
        outputs = layer(outputs)
    model = tf_keras.Model([first, second], outputs)
    columns = {"height": x.numpy()[:, 1:], "width": x.numpy()[:, :1]}
    expected = ga.predict_mixture(built, x.numpy(), batch_size=50).f_means
    np.testing.assert_array_equal(ga.predict_mixture(model, columns, batch_size=50).f_means,
                                  expected)  # fmt: skip
    with pytest.raises(ValueError, match=r"inputs: expected the keys \['height', 'width'\]"):
        ga.predict_mixture(model, {"width": columns["width"]})
    nested = tf_keras.Sequential([tf_keras.Input((2,), dtype=tf.float64), built])
    np.testing.assert_array_equal(
        ga.predict_mixture(nested, x.numpy(), batch_size=50).f_means, expected
    )
    served = tf.saved_model.load(str(ga.export(nested, tmp_path / "served")))
    np.testing.assert_allclose(
        served.signatures["predict_y"](x=x)["mean"].numpy(),
        built.predict(x.numpy(), verbose=0)["mean"],
        rtol=1e-10,
    )


_LOAD_IN_A_FRESH_PROCESS = """
import sys
import numpy as np
import gpflux_avdgp
x = np.load(sys.argv[1])
for path in sys.argv[2:]:
    model = gpflux_avdgp.load_model(path)
    np.save(f"{path}.npy", model.predict(x, verbose=0))
    print(type(model).__name__)
"""


@pytest.mark.slow  # a fresh process imports TensorFlow (about 20 s in the default suite)
def test_plain_models_of_our_layers_load_in_a_fresh_process_with_load_model(tmp_path):
    """``gpflux_avdgp.load_model`` loads every model type. (``tf_keras.models.load_model`` of a
    plain ``Sequential`` or Functional file needs ``import gpflux_avdgp`` first: Keras looks
    nested layers up by name only and passes the unknown name on as the layer, a ``TypeError``
    no code of ours can reach; an ``AVDGPModel`` file loads, its class's module imported.)"""
    x, _, _ = _data()
    np.save(tmp_path / "x.npy", x.numpy())
    kinds = {"sequential": "Sequential", "functional": "Functional"}
    models = {kind: _model(kind, gpflow.likelihoods.Gaussian(variance=0.1)) for kind in kinds}
    for kind, model in models.items():
        model.save(tmp_path / f"{kind}.keras")
    done = subprocess.run(
        [sys.executable, "-c", _LOAD_IN_A_FRESH_PROCESS, str(tmp_path / "x.npy"),
         *(str(tmp_path / f"{kind}.keras") for kind in kinds)],
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=""),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == list(kinds.values())
    for kind, model in models.items():
        expected = model.predict(x.numpy(), verbose=0)  # NumPy rows, as the other process reads
        np.testing.assert_array_equal(np.load(tmp_path / f"{kind}.keras.npy"), expected)
