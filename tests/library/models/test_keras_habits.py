"""What a Keras user writes works with the right numbers or refuses in one line: one test per
habit of issue 25's table (metrics in compile, predict, evaluate, saving with GPflow objects,
likelihood mistakes, a Dense after a GP layer, float types, copies)."""

from __future__ import annotations

import copy
import subprocess
import sys
import warnings

import gpflow
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp
from gpflow.keras import tf_keras
from reference import gaussian_mixture_crps_integral, gaussian_mixture_log_density

import gpflux_avdgp as ga
from gpflux_avdgp.keras_metrics import gaussian_mixture_crps

NUM_DATA = 200


def regression_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2.0, 2.0, (NUM_DATA, 2))
    return x, np.sin(2.0 * x[:, :1]) + 0.1 * rng.standard_normal((NUM_DATA, 1))


def classification_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2.0, 2.0, (NUM_DATA, 2))
    return x, (x[:, :1] + 0.5 * x[:, 1:] > 0).astype(np.float64)


def small_model(likelihood, *, kernel="matern52", mean_function=None, seed=0) -> ga.AVDGPModel:
    return ga.build_avdgp(
        2,
        [2, 1],
        4,
        NUM_DATA,
        likelihood,
        num_points=8,
        kernel=kernel,
        mean_function=mean_function,
        seed=seed,
    )


@pytest.fixture(scope="module")
def regressor():
    tf_keras.utils.set_random_seed(0)
    x, y = regression_data()
    model = small_model(gpflow.likelihoods.Gaussian(variance=0.1))
    model.compile(tf_keras.optimizers.Adam(0.02))
    model.fit(x, y, batch_size=50, epochs=5, verbose=0)
    return model, x, y


@pytest.fixture(scope="module")
def classifier():
    tf_keras.utils.set_random_seed(0)
    x, y = classification_data()
    model = small_model(gpflow.likelihoods.Bernoulli())
    model.compile(tf_keras.optimizers.Adam(0.03))
    model.fit(x, y, batch_size=50, epochs=5, verbose=0)
    return model, x, y


@pytest.mark.slow
# ------------------------------------------------------------------ metrics in compile
def test_accuracy_in_compile_is_the_accuracy_of_the_class_probabilities(classifier):
    model, x, y = classifier
    model.compile(
        tf_keras.optimizers.Adam(0.03), metrics=["accuracy", ga.MixtureAccuracy(name="ours")]
    )
    logs = model.evaluate(x, y, batch_size=64, verbose=0, return_dict=True)
    probabilities = ga.predict_mixture(model, x).class_probabilities()
    expected = np.mean((probabilities[:, 0] > 0.5) == (y[:, 0] == 1.0))
    assert expected > 0.6  # a trained classifier, not a chance-level one
    assert logs["accuracy"] == pytest.approx(expected, abs=1e-6)
    assert logs["ours"] == pytest.approx(expected, abs=1e-12)


def test_standard_and_package_metrics_score_the_predictive_distribution(regressor):
    model, x, y = regressor
    metrics = ["mse", "mae", tf_keras.metrics.RootMeanSquaredError(name="root_mse")]
    metrics += [ga.MixtureNLL(), ga.MixtureRMSE(), ga.MixtureCRPS()]
    model.compile(tf_keras.optimizers.Adam(0.02), metrics=metrics)
    logs = model.evaluate(x, y, batch_size=64, verbose=0, return_dict=True)

    prediction = ga.predict_mixture(model, x)
    mean, _ = prediction.y_moments()
    weights, means, variances = prediction.weights, prediction.y_means, prediction.y_variances
    assert logs["mse"] == pytest.approx(np.mean((y - mean) ** 2), rel=1e-5)
    assert logs["mae"] == pytest.approx(np.mean(np.abs(y - mean)), rel=1e-5)
    assert logs["root_mse"] == pytest.approx(np.sqrt(np.mean((y - mean) ** 2)), rel=1e-5)
    assert logs["rmse"] == pytest.approx(np.sqrt(np.mean((y - mean) ** 2)), rel=1e-10)
    nll = -np.mean(gaussian_mixture_log_density(y, np.log(weights), means, variances, 0.0))
    assert logs["nll"] == pytest.approx(nll, rel=1e-10)
    crps = np.mean(gaussian_mixture_crps(y, weights, means, variances))  # the test below
    assert logs["crps"] == pytest.approx(crps, rel=1e-10)


def test_the_closed_form_mixture_crps_is_the_integral_of_its_definition():
    rng = np.random.default_rng(3)
    weights = rng.dirichlet(np.ones(4), size=5)  # [N, S]
    means = rng.normal(size=(5, 4, 2))  # [N, S, Q]
    variances = rng.uniform(0.01, 2.0, size=(5, 4, 2))
    y = rng.normal(size=(5, 2))
    crps = gaussian_mixture_crps(y, weights, means, variances).numpy()  # [N, Q]
    for q in range(2):
        expected = gaussian_mixture_crps_integral(
            y[:, q], weights, means[..., q], variances[..., q]
        )
        np.testing.assert_allclose(crps[:, q], expected, rtol=1e-7)


@pytest.mark.slow
def test_classifier_metrics_match_numpy(classifier):
    model, x, y = classifier
    model.compile(
        tf_keras.optimizers.Adam(0.03),
        metrics=["mse", tf_keras.metrics.AUC(name="auc"), ga.MixtureBrier(), ga.MixtureNLL()],
    )
    logs = model.evaluate(x, y, batch_size=64, verbose=0, return_dict=True)
    probabilities = ga.predict_mixture(model, x).class_probabilities()
    p = probabilities[:, 0]
    brier = np.mean((p - y[:, 0]) ** 2)
    assert logs["mse"] == pytest.approx(brier, rel=1e-5)
    assert logs["brier"] == pytest.approx(brier, rel=1e-10)
    nll = -np.mean(np.log(np.where(y[:, 0] == 1.0, p, 1.0 - p)))
    assert logs["nll"] == pytest.approx(nll, rel=1e-8)
    assert 0.5 < logs["auc"] <= 1.0


@pytest.mark.slow
def test_package_metrics_monitor_validation_in_callbacks(regressor, tmp_path):
    model, x, y = regressor
    model.compile(tf_keras.optimizers.Adam(0.02), metrics=[ga.MixtureNLL()])
    stop = tf_keras.callbacks.EarlyStopping("val_nll", patience=1, restore_best_weights=True)
    best = tf_keras.callbacks.ModelCheckpoint(
        str(tmp_path / "best.keras"), monitor="val_nll", save_best_only=True
    )
    history = model.fit(
        x,
        y,
        batch_size=50,
        epochs=2,
        verbose=0,
        validation_data=(tf.constant(x), tf.constant(y)),  # fit would round arrays to float32
        callbacks=[stop, best],
    )
    assert set(history.history) == {"loss", "kl", "nll", "val_loss", "val_nll"}
    assert np.all(np.isfinite(history.history["val_nll"]))
    reloaded = ga.load_model(tmp_path / "best.keras")
    logs = reloaded.evaluate(x, y, batch_size=64, verbose=0, return_dict=True)
    assert logs["nll"] == pytest.approx(min(history.history["val_nll"]), rel=1e-9)


@pytest.mark.parametrize(
    "metric, likelihood, message",
    [
        ("accuracy", "gaussian", r"metrics: 'accuracy' scores class labels, .*Gaussian"),
        (tf_keras.metrics.AUC(), "gaussian", r"metrics: AUC\(\) scores class labels"),
        ("categorical_accuracy", "bernoulli", r"predicts p\(y = 1\) \[batch, 1\]"),
        ("mse", "multiclass", r"metrics: 'mse' compares y .* one class index per row"),
    ],
)
def test_a_metric_that_cannot_mean_anything_is_refused_at_compile(metric, likelihood, message):
    likelihoods = {
        "gaussian": gpflow.likelihoods.Gaussian(),
        "bernoulli": gpflow.likelihoods.Bernoulli(),
        "multiclass": gpflow.likelihoods.MultiClass(3),
    }
    lik = likelihoods[likelihood]
    units = [2, 3] if likelihood == "multiclass" else [2, 1]
    model = ga.build_avdgp(2, units, 4, NUM_DATA, lik, num_points=8, seed=0)
    with pytest.raises(ValueError, match=message) as error:
        model.compile("adam", metrics=[metric])
    assert "\n" not in str(error.value) and "gpflux_avdgp.Mixture" in str(error.value)


def test_a_point_prediction_loss_is_refused_at_compile(regressor):
    model, _, _ = regressor
    with pytest.raises(ValueError, match=r"^loss: 'mse' scores a point prediction.*AVDGPLoss"):
        model.compile("adam", loss="mse")


# ------------------------------------------------------------------ predict
def test_predict_returns_mean_and_std_of_y_for_any_batch_size_and_a_dataset(regressor):
    model, x, _ = regressor
    prediction = ga.predict_mixture(model, x)
    mean, variance = prediction.y_moments()  # the noise is in the variance of y
    for batch_size in (7, 200):
        outputs = model.predict(x, batch_size=batch_size, verbose=0)
        assert set(outputs) == {"mean", "std", "lower_95", "upper_95"}
        np.testing.assert_allclose(outputs["mean"], mean, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(outputs["std"], np.sqrt(variance), rtol=1e-10)
    dataset = tf.data.Dataset.from_tensor_slices(x).batch(33)
    np.testing.assert_allclose(model.predict(dataset, verbose=0)["mean"], mean, rtol=1e-10)
    from_dataset = ga.predict_mixture(model, dataset)
    np.testing.assert_allclose(from_dataset.y_moments()[0], mean, rtol=1e-10)
    assert (variance > model.likelihood.variance.numpy()).all()


@pytest.mark.slow
def test_predict_gives_class_probabilities(classifier):
    model, x, _ = classifier
    outputs = model.predict(x, verbose=0)
    assert set(outputs) == {"probabilities"}
    expected = ga.predict_mixture(model, x).class_probabilities()
    np.testing.assert_allclose(outputs["probabilities"], expected, rtol=1e-10)


def test_one_row_of_width_two_suggests_the_right_reshape(regressor):
    model, _, _ = regressor
    with pytest.raises(ValueError, match=r"x\.reshape\(1, -1\): one row"):
        ga.predict_mixture(model, np.zeros(2))


@pytest.mark.slow
# ------------------------------------------------------------------ evaluate and History
def test_evaluate_returns_a_scalar_loss_and_history_has_stable_names(regressor):
    model, x, y = regressor
    model.compile(tf_keras.optimizers.Adam(0.02))
    loss = model.evaluate(x, y, verbose=0)
    assert isinstance(loss, float) and np.isfinite(loss)
    history = model.fit(x, y, batch_size=100, epochs=1, verbose=0)
    assert set(history.history) == {"loss", "kl"}


# ------------------------------------------------------------------ saving GPflow objects
KERNELS = {
    "matern32": lambda: gpflow.kernels.Matern32(),
    "ard": lambda: gpflow.kernels.SquaredExponential(lengthscales=[1.0, 2.0]),
    "sum": lambda: gpflow.kernels.Matern52() + gpflow.kernels.Linear(),
    "product": lambda: gpflow.kernels.Matern12() * gpflow.kernels.Constant(),
}


SLOW = pytest.mark.slow


@pytest.mark.parametrize(
    "kernel",
    [
        "sum",  # Matern52 + Linear with a Constant mean: the default suite's round trip
        pytest.param("matern32", marks=SLOW),
        pytest.param("ard", marks=SLOW),
        pytest.param("product", marks=SLOW),
    ],
)
def test_models_with_gpflow_kernel_objects_save_and_reload(kernel, tmp_path):
    x, y = regression_data()
    model = small_model(
        gpflow.likelihoods.Gaussian(variance=0.1),
        kernel=KERNELS[kernel](),
        mean_function=gpflow.mean_functions.Constant(0.5) if kernel == "sum" else None,
    )
    model.compile(tf_keras.optimizers.Adam(0.02))
    model.fit(x, y, batch_size=100, epochs=1, verbose=0)
    path = tmp_path / "model.keras"
    model.save(path)

    reloaded = ga.load_model(path)
    np.testing.assert_allclose(
        reloaded.predict(x[:20], verbose=0)["mean"], model.predict(x[:20], verbose=0)["mean"]
    )
    for before, after in zip(model.optimizer.variables, reloaded.optimizer.variables):
        np.testing.assert_array_equal(before.numpy(), after.numpy())
    if kernel != "sum":  # the slow variants train on (one more trace)
        reloaded.fit(x, y, batch_size=100, epochs=1, verbose=0)


def test_a_kernel_that_cannot_be_saved_is_refused_when_the_layer_is_built():
    kernel = gpflow.kernels.Matern32()
    two = gpflow.utilities.to_default_float(2.0)
    kernel.variance.prior = tfp.distributions.Gamma(two, two)
    with pytest.raises(NotImplementedError, match=r"gp_layer_1: kernel\.variance has a prior"):
        small_model(gpflow.likelihoods.Gaussian(), kernel=kernel)


@SLOW
def test_a_float32_model_reloads_in_a_float64_process(tmp_path):
    x, y = regression_data()
    with gpflow.config.as_context(gpflow.config.Config(float=np.float32)):
        model = small_model(gpflow.likelihoods.Gaussian(variance=0.1), kernel=KERNELS["sum"]())
        model.compile(tf_keras.optimizers.Adam(0.02))
        model.fit(x.astype(np.float32), y.astype(np.float32), batch_size=100, epochs=1, verbose=0)
        expected = model.predict(x[:10].astype(np.float32), verbose=0)["mean"]
        model.save(tmp_path / "m.keras")
    assert gpflow.default_float() is np.float64
    reloaded = ga.load_model(tmp_path / "m.keras")
    np.testing.assert_allclose(reloaded.predict(x[:10], verbose=0)["mean"], expected, rtol=1e-6)


def test_h5_is_refused_in_one_line(regressor, tmp_path):
    model, _, _ = regressor
    with pytest.raises(ValueError, match=r"^filepath: the HDF5 format .* 'model\.keras'"):
        model.save(tmp_path / "m.h5")


def test_a_layer_deep_copies():
    layer = ga.AmortizedGPLayer(2, 4, NUM_DATA, kernel=gpflow.kernels.Matern32(), seed=0)
    layer(np.zeros((3, 2)))
    copied = copy.deepcopy(layer)
    np.testing.assert_array_equal(copied(np.ones((3, 2))).numpy(), layer(np.ones((3, 2))).numpy())


# ------------------------------------------------------------------ no silent mistakes
def test_a_model_without_trainable_likelihood_is_refused_at_compile():
    model = ga.AVDGPModel(
        [tf_keras.Input((2,), dtype=tf.float64), ga.AmortizedGPLayer(1, 4, NUM_DATA)]
    )
    with pytest.raises(ValueError, match=r"not a TrainableLikelihood; end the model with"):
        model.compile("adam")


def test_a_loss_on_another_likelihood_is_refused_at_compile():
    model = small_model(gpflow.likelihoods.Gaussian())
    with pytest.raises(ValueError, match=r"^loss: AVDGPLoss holds another likelihood"):
        model.compile("adam", loss=ga.AVDGPLoss(gpflow.likelihoods.Gaussian()))


def test_a_dense_layer_right_after_a_gp_layer_is_refused_when_added():
    with pytest.raises(ValueError, match=r"'dense.*' \(Dense\) follows .* put .*MixtureMean"):
        ga.AVDGPModel(
            [
                tf_keras.Input((2,), dtype=tf.float64),
                ga.AmortizedGPLayer(2, 4, NUM_DATA),
                tf_keras.layers.Dense(2, dtype=tf.float64),
                ga.TrainableLikelihood(gpflow.likelihoods.Gaussian()),
            ]
        )


def test_a_kernel_object_shared_by_two_layers_is_refused_when_the_second_is_built():
    kernel = gpflow.kernels.Matern32()
    with pytest.raises(ValueError, match=r"its kernel object is also layer 'first'.*deepcopy"):
        tf_keras.Sequential(
            [
                tf_keras.Input((2,), dtype=tf.float64),
                ga.AmortizedGPLayer(2, 4, NUM_DATA, kernel=kernel, name="first"),
                ga.AmortizedGPLayer(1, 4, NUM_DATA, kernel=kernel, name="second"),
            ]
        )


def test_build_avdgp_gives_every_layer_its_own_copy_of_a_kernel_object():
    kernel = gpflow.kernels.Matern32(lengthscales=2.0)
    model = small_model(gpflow.likelihoods.Gaussian(), kernel=kernel)
    kernels = [layer.kernel for layer in model.layers[:2]]
    assert kernels[0] is kernel and kernels[1] is not kernel
    assert kernels[1].lengthscales.numpy() == 2.0


@pytest.mark.parametrize("reader", ["dense", "flatten"])
def test_a_keras_layer_reading_the_mixture_of_a_plain_sequential_is_refused(reader):
    layer = {
        "dense": tf_keras.layers.Dense(1, dtype=tf.float64),
        "flatten": tf_keras.layers.Flatten(),
    }
    model = tf_keras.Sequential(
        [tf_keras.Input((2,), dtype=tf.float64), ga.AmortizedGPLayer(2, 4, NUM_DATA), layer[reader]]
    )
    model.compile("adam", loss="mse")
    with pytest.raises(ValueError, match=r"reads the packed mixture .* put gpflux_avdgp\.Mixture"):
        model.fit(np.zeros((10, 2)), np.zeros((10, 1)), verbose=0)
    with pytest.raises(ValueError, match=r"\n\w+: a (Dense|Flatten) reads the packed mixture"):
        model(np.zeros((3, 2)))  # eagerly: the line inside Keras' "calling layer" context


def plain_model(likelihood, *, with_likelihood_layer: bool = True) -> tf_keras.Sequential:
    layers = [tf_keras.Input((2,), dtype=tf.float64), ga.AmortizedGPLayer(1, 4, NUM_DATA)]
    if with_likelihood_layer:
        layers.append(ga.TrainableLikelihood(likelihood))
    return tf_keras.Sequential(layers)


def test_a_plain_model_whose_loss_holds_another_likelihood_is_refused_at_the_first_step():
    x, y = regression_data()
    model = plain_model(gpflow.likelihoods.Gaussian())
    model.compile("adam", loss=ga.AVDGPLoss(gpflow.likelihoods.Gaussian()))
    with pytest.raises(ValueError, match=r"holds another likelihood than the loss.*model\.like"):
        model.fit(x, y, verbose=0, epochs=1)


@pytest.mark.slow
def test_a_plain_model_without_trainable_likelihood_warns_that_the_noise_will_not_train():
    x, y = regression_data()
    likelihood = gpflow.likelihoods.Gaussian(variance=0.1)
    model = plain_model(likelihood, with_likelihood_layer=False)
    model.compile(tf_keras.optimizers.Adam(0.05), loss=ga.AVDGPLoss(likelihood))
    with pytest.warns(UserWarning, match=r"will not train; end the model with .*Trainable"):
        model.fit(x, y, batch_size=50, epochs=2, verbose=0)
    assert likelihood.variance.numpy() == pytest.approx(0.1)  # what the warning is about

    held = gpflow.likelihoods.Gaussian(variance=0.1)
    model = plain_model(held)
    model.compile(tf_keras.optimizers.Adam(0.05), loss=ga.AVDGPLoss(held))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no warning when the model holds it
        model.fit(x, y, batch_size=50, epochs=2, verbose=0)
    assert held.variance.numpy() != pytest.approx(0.1)


@pytest.mark.slow
def test_a_subclassed_model_holding_the_likelihood_layer_as_an_attribute_trains_it_unwarned():
    """Issue 49: a subclassed model with the GP and likelihood layers as attributes was warned
    that the variance would not train (it trained: 0.1 -> 0.163)."""

    class Subclassed(tf_keras.Model):
        def __init__(self, gp, likelihood_layer):
            super().__init__()
            self.gp, self.likelihood_layer = gp, likelihood_layer

        def call(self, inputs):
            return self.likelihood_layer(self.gp(inputs))

    x, y = regression_data()
    likelihood = gpflow.likelihoods.Gaussian(variance=0.1)
    built = ga.build_avdgp(x.shape[1], [1], 4, len(x), likelihood, num_points=4, seed=0)
    model = Subclassed(built.layers[0], built.layers[-1])
    model.compile(tf_keras.optimizers.Adam(0.05), loss=ga.AVDGPLoss())
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        model.fit(x, y, batch_size=50, epochs=2, verbose=0)
    assert likelihood.variance.numpy() != pytest.approx(0.1)


@SLOW
def test_load_model_of_a_saved_model_folder_is_quiet_and_restores_the_optimizer(
    regressor, tmp_path, caplog
):
    model, x, _ = regressor
    model.compile(tf_keras.optimizers.Adam(0.02))
    model.fit(x, regression_data()[1], batch_size=100, epochs=1, verbose=0)
    model.save(tmp_path / "folder")
    with caplog.at_level("WARNING", logger="tensorflow"):
        reloaded = ga.load_model(tmp_path / "folder")
    assert [r.getMessage() for r in caplog.records if r.name == "tensorflow"] == []
    assert reloaded.optimizer.iterations.numpy() == model.optimizer.iterations.numpy()
    np.testing.assert_allclose(
        reloaded.predict(x[:5], verbose=0)["mean"], model.predict(x[:5], verbose=0)["mean"]
    )


@SLOW
def test_a_keras_file_loads_in_a_fresh_process_without_importing_the_package(regressor, tmp_path):
    model, x, _ = regressor
    model.save(tmp_path / "m.keras")
    np.save(tmp_path / "x.npy", x[:5])
    script = (
        "import sys, numpy as np\n"
        "from gpflow.keras import tf_keras\n"
        f"model = tf_keras.models.load_model({str(tmp_path / 'm.keras')!r})\n"
        f"x = np.load({str(tmp_path / 'x.npy')!r})\n"
        "print(type(model).__name__, repr(model.predict(x, verbose=0)['mean'].ravel().tolist()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True
    )
    name, values = done.stdout.strip().splitlines()[-1].split(" ", 1)
    assert name == "AVDGPModel"
    np.testing.assert_allclose(eval(values), model.predict(x[:5], verbose=0)["mean"].ravel())


@SLOW
def test_an_as_deep_gp_training_model_saves_and_reloads(tmp_path):
    x, y = regression_data()
    likelihood = gpflow.likelihoods.Gaussian(variance=0.1)
    layers = [ga.AmortizedGPLayer(2, 4, NUM_DATA, seed=0)]
    layers.append(ga.AmortizedGPLayer(1, 4, NUM_DATA, num_points=8, seed=1))
    deep_gp = ga.as_deep_gp(layers, likelihood, input_dim=2)
    training_model = deep_gp.as_training_model()
    training_model.compile(tf_keras.optimizers.Adam(0.02))
    data = {"inputs": x, "targets": y}
    training_model.fit(data, batch_size=100, epochs=2, verbose=0)
    training_model.save(tmp_path / "deep_gp.keras")

    reloaded = ga.load_model(tmp_path / "deep_gp.keras")
    assert reloaded.layers[-1].likelihood.variance.numpy() == likelihood.variance.numpy() != 0.1
    expected = training_model.evaluate(data, batch_size=100, verbose=0)
    assert reloaded.evaluate(data, batch_size=100, verbose=0) == pytest.approx(expected, rel=1e-9)
