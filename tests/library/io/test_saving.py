"""``model.save`` / ``load_model`` round trips (``.keras`` and TensorFlow SavedModel formats)
without ``custom_objects``: every value (GPflow parameters included), the predictions, the
optimizer state and continued training survive; the compiled loss keeps training the model's
likelihood; ``ModelCheckpoint`` works; loading never unpickles; bad files give one-line
errors. Zoo-wide round trips are in ``tests/application/zoo/test_saving_zoo.py``; the helpers both
use are in ``tests/saving_checks.py``.

Before saving, every variable and the optimizer's state are moved away from their initial
values, so a reload that ignored one would be caught.
"""

from __future__ import annotations

import os
import re
import shutil
import zipfile

import gpflow
import gpflux
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp
from gpflow.keras import tf_keras
from saving_checks import (
    FORMAT_CASES,
    FORMATS,
    NUM_DATA,
    assert_loss_shares_likelihood,
    assert_same_optimizer_state,
    assert_same_predictions,
    assert_same_weights,
    perturb_state,
    refusing_unpickling,
    toy_data,
)

import gpflux_avdgp
from gpflux_avdgp import (
    AmortizedGPLayer,
    AVDGPLoss,
    SigmaPointGPLayer,
    TrainableLikelihood,
)
from gpflux_avdgp.io.saving import ModelFileError
from gpflux_avdgp.layers.gpflux_config import gp_layer_from_config, gp_layer_to_config

BATCH_SIZE = 8


def make_gp_layer(
    input_dim: int, output_dim: int, num_inducing: int, *, name: str, **options
) -> gpflux.layers.GPLayer:
    """A GPflux layer like the zoo's: shared ARD Matern-3/2, shared inducing points."""
    kernel = gpflux.helpers.construct_basic_kernel(
        gpflow.kernels.Matern32(lengthscales=np.ones(input_dim)),
        output_dim=output_dim,
        share_hyperparams=True,
    )
    inducing = gpflux.helpers.construct_basic_inducing_variables(
        num_inducing,
        input_dim,
        output_dim=output_dim,
        share_variables=True,
        z_init=np.linspace(-1.0, 1.0, num_inducing * input_dim).reshape(num_inducing, -1),
    )
    options.setdefault("mean_function", gpflow.mean_functions.Zero())
    return gpflux.layers.GPLayer(
        kernel, inducing, NUM_DATA, num_latent_gps=output_dim, name=name, verbose=False, **options
    )


def mixed_model(likelihood: gpflow.likelihoods.Likelihood) -> tf_keras.Sequential:
    """Dense features, a wrapped GPflux layer (linear mean) and an amortized AR1 layer (linear
    mean, ARD, a step counter keying its draws), ending in the likelihood layer."""
    return tf_keras.Sequential(
        [
            tf_keras.Input((2,), dtype=tf.float64),
            tf_keras.layers.Dense(3, activation="tanh", dtype=tf.float64, name="features"),
            SigmaPointGPLayer(
                make_gp_layer(
                    3,
                    2,
                    4,
                    name="gpflux_first",
                    mean_function=gpflow.mean_functions.Linear(np.ones((3, 2)), np.zeros(2)),
                ),
                seed=0,
                name="gp_1",
            ),
            AmortizedGPLayer(
                1,
                3,
                NUM_DATA,
                mean_function="linear",
                ard=True,
                rule="ar1",
                num_train_samples=2,
                num_points=3,
                seed=1,
                name="gp_2",
            ),
            TrainableLikelihood(likelihood, name="likelihood"),
        ]
    )


def fit_one_epoch(model: tf_keras.Model, x: np.ndarray, y: np.ndarray) -> None:
    model.fit(x, y, batch_size=BATCH_SIZE, epochs=1, shuffle=False, verbose=0)


# ------------------------------------------------------------------------ full round trip
@pytest.mark.parametrize("suffix", FORMAT_CASES)
def test_round_trip_restores_everything_and_continues_training(tmp_path, rng, suffix):
    x, y = toy_data(rng)
    likelihood = gpflow.likelihoods.Gaussian(0.1)
    model = mixed_model(likelihood)
    model.compile(tf_keras.optimizers.Adam(0.05), loss=AVDGPLoss(likelihood))
    perturb_state(model, rng)  # as after training, but every variable moves

    path = str(tmp_path / f"model{suffix}")
    model.save(path)
    with refusing_unpickling():
        if suffix == ".keras":
            reloaded = tf_keras.models.load_model(path, safe_mode=True)  # no custom_objects
        else:  # tf_keras.models.load_model would restart the optimizer: add its state back
            reloaded = gpflux_avdgp.load_model(path)
    assert_same_weights(model, reloaded)
    assert_loss_shares_likelihood(reloaded)
    assert_same_optimizer_state(model, reloaded)
    assert_same_predictions(model, reloaded, x)
    first, reloaded_first = model.get_layer("gp_1").gp_layer, reloaded.get_layer("gp_1").gp_layer
    np.testing.assert_array_equal(
        reloaded_first.mean_function.A.numpy(), first.mean_function.A.numpy()
    )

    variance_before = likelihood.variance.numpy()
    fit_one_epoch(model, x, y)
    fit_one_epoch(reloaded, x, y)
    # the loss trains the likelihood layer's variance, identically in both models
    assert likelihood.variance.numpy() != variance_before
    reloaded_variance = reloaded.layers[-1].likelihood.variance.numpy()
    np.testing.assert_allclose(reloaded_variance, likelihood.variance.numpy(), rtol=1e-12)
    for index, (value, reloaded_value) in enumerate(
        zip(model.get_weights(), reloaded.get_weights())
    ):
        np.testing.assert_allclose(
            reloaded_value, value, rtol=1e-12, atol=1e-14, err_msg=f"weight {index}"
        )
    assert reloaded.optimizer.iterations.numpy() == model.optimizer.iterations.numpy()


@pytest.mark.slow
def test_model_checkpoint_keeps_the_best_model_in_both_formats(tmp_path, rng):
    x, y = toy_data(rng)
    likelihood = gpflow.likelihoods.Gaussian(0.1)
    model = gpflux_avdgp.build_avdgp(2, [1], 3, NUM_DATA, likelihood, seed=0)
    model.compile(tf_keras.optimizers.Adam(0.05), loss=AVDGPLoss(likelihood))
    paths = {suffix: str(tmp_path / f"best{suffix}") for suffix in FORMATS}
    checkpoints = [
        tf_keras.callbacks.ModelCheckpoint(
            path, monitor="loss", save_best_only=True, save_weights_only=False
        )
        for path in paths.values()
    ]
    snapshots = []
    keep = tf_keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: snapshots.append(model.get_weights())
    )
    history = model.fit(
        x,
        y,
        batch_size=BATCH_SIZE,
        epochs=2,
        shuffle=False,
        verbose=0,
        callbacks=checkpoints + [keep],
    )

    best = int(np.argmin(history.history["loss"]))
    for path in paths.values():
        assert os.path.exists(path)
        reloaded = tf_keras.models.load_model(path, safe_mode=True)
        for value, reloaded_value in zip(snapshots[best], reloaded.get_weights()):
            np.testing.assert_array_equal(reloaded_value, value)
        assert_loss_shares_likelihood(reloaded)


def _gaussian_log_density(y: float, mean: float, variance: float) -> float:
    return -0.5 * (np.log(2 * np.pi * variance) + (y - mean) ** 2 / variance)


def test_a_loss_from_its_config_scores_the_likelihood_and_objective_of_the_model():
    """No likelihood in a loss's config, so none to go stale: the rebuilt loss scores the
    likelihood the model's output carries, as it is now; a likelihood in an earlier file's
    config (a copy) is dropped, and its objective kept as the file's."""
    likelihood = gpflow.likelihoods.Gaussian(0.3)
    config = AVDGPLoss(objective="predictive").get_config()
    assert "likelihood" not in config and config["objective"] == "predictive"
    rebuilt = AVDGPLoss.from_config(config)
    assert rebuilt.likelihood is None and rebuilt.objective.value == "predictive"

    layer = TrainableLikelihood.from_config(
        TrainableLikelihood(likelihood, objective="predictive").get_config()
    )
    layer.likelihood.variance.assign(0.7)  # trained since the save
    packed = tf.constant([[[0.5, 0.2, 0.0]]], tf.float64)  # one component, Q = 1
    targets = tf.constant([[0.4]], tf.float64)
    expected = -_gaussian_log_density(0.4, 0.5, 0.2 + 0.7)
    np.testing.assert_allclose(rebuilt(targets, layer(packed)).numpy(), expected, rtol=1e-12)
    with pytest.raises(ValueError, match="holds another likelihood than the loss"):
        AVDGPLoss(likelihood)(targets, layer(packed))
    with pytest.raises(ValueError, match=r"^avdgp_loss: objective 'elbo', but the model trains"):
        AVDGPLoss(objective="elbo")(targets, layer(packed))

    legacy = dict(config, likelihood={"class_name": "Gaussian", "config": {"variance": 0.3}})
    from_file = AVDGPLoss.from_config(legacy)  # an earlier file: its objective is the file's
    assert from_file.likelihood is None and from_file.objective.value == "predictive"
    elbo_layer = TrainableLikelihood(layer.likelihood)  # earlier files' layers: no objective
    np.testing.assert_allclose(from_file(targets, elbo_layer(packed)).numpy(), expected, 1e-12)
    earlier_model = gpflux_avdgp.build_avdgp(1, [1], 2, 10, gpflow.likelihoods.Gaussian(), seed=0)
    earlier_model.compile("adam", loss=from_file)  # compile_from_config of such a file: kept
    assert earlier_model.loss is from_file


@pytest.mark.slow
def test_a_metric_from_its_config_scores_the_models_likelihood():
    """As the loss: a reloaded metric scores with the model's likelihood, not a stale copy."""
    likelihood = gpflow.likelihoods.Gaussian(0.3)
    config = gpflux_avdgp.MixtureNLL(likelihood).get_config()
    config["likelihood"] = {"class_name": "Gaussian", "config": {"variance": 0.3}}  # old files
    metric = gpflux_avdgp.MixtureNLL.from_config(config)
    assert metric.likelihood is None
    layer = TrainableLikelihood(likelihood)
    packed = tf.constant([[[0.5, 0.2, 0.0]]], tf.float64)
    likelihood.variance.assign(0.7)  # trained since the save
    metric.update_state(tf.constant([[0.4]], tf.float64), layer(packed))
    expected = -_gaussian_log_density(0.4, 0.5, 0.2 + 0.7)
    np.testing.assert_allclose(metric.result().numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize(
    "likelihood",
    [
        gpflow.likelihoods.MultiClass(3, invlink=gpflow.likelihoods.RobustMax(3, epsilon=0.01)),
        gpflow.likelihoods.Softmax(3),
    ],
    ids=["robustmax", "softmax"],
)
def test_categorical_likelihoods_are_saved_with_their_classes(likelihood):
    config = TrainableLikelihood(likelihood).get_config()
    rebuilt = TrainableLikelihood.from_config(config).likelihood
    assert type(rebuilt) is type(likelihood) and rebuilt.num_classes == 3
    if isinstance(likelihood, gpflow.likelihoods.MultiClass):
        assert type(rebuilt.invlink) is gpflow.likelihoods.RobustMax
        assert rebuilt.invlink.epsilon.numpy() == pytest.approx(0.01)
    with pytest.raises(NotImplementedError, match="StudentT cannot be saved; Gaussian, Bern"):
        TrainableLikelihood(gpflow.likelihoods.StudentT()).get_config()


@pytest.mark.slow
def test_a_multiclass_model_round_trip_predicts_the_same_probabilities(tmp_path, rng):
    likelihood = gpflow.likelihoods.MultiClass(3)
    model = gpflux_avdgp.build_avdgp(2, [3], 4, NUM_DATA, likelihood, num_points=3, seed=1)
    model.compile(tf_keras.optimizers.Adam(0.05), loss=AVDGPLoss(likelihood))
    x = rng.normal(size=(NUM_DATA, 2))
    fit_one_epoch(model, x, rng.integers(0, 3, size=(NUM_DATA, 1)).astype(np.float64))
    model.save(tmp_path / "model.keras")
    reloaded = tf_keras.models.load_model(tmp_path / "model.keras", safe_mode=True)
    assert_loss_shares_likelihood(reloaded)
    expected = gpflux_avdgp.predict_mixture(model, x).class_probabilities()
    got = gpflux_avdgp.predict_mixture(reloaded, x).class_probabilities()
    np.testing.assert_allclose(got, expected, rtol=1e-12)


# ------------------------------------------------------------------- SigmaPointGPLayer config
def wrap(gp_layer: gpflux.layers.GPLayer, input_dim: int = 2) -> SigmaPointGPLayer:
    """A built wrapper (AR2P, three components) around ``gp_layer``."""
    layer = SigmaPointGPLayer(gp_layer, rule="ar2p", num_points=3, name="wrapped")
    layer.build((None, 1, 2 * input_dim + 1))
    return layer


def with_prior(gp_layer: gpflux.layers.GPLayer) -> gpflux.layers.GPLayer:
    gp_layer.kernel.kernel.variance.prior = tfp.distributions.Gamma(
        np.float64(2.0), np.float64(1.0)
    )
    return gp_layer


def with_exp_transform(gp_layer: gpflux.layers.GPLayer) -> gpflux.layers.GPLayer:
    gp_layer.kernel.kernel.lengthscales = gpflow.Parameter(
        np.ones(2), transform=tfp.bijectors.Exp()
    )
    return gp_layer


def with_kernel(kernel: gpflow.kernels.Kernel, **options) -> gpflux.layers.GPLayer:
    inducing = gpflow.inducing_variables.SharedIndependentInducingVariables(
        gpflow.inducing_variables.InducingPoints(np.zeros((4, 2)))
    )
    return gpflux.layers.GPLayer(
        kernel,
        inducing,
        NUM_DATA,
        mean_function=gpflow.mean_functions.Zero(),
        num_latent_gps=1,
        verbose=False,
        **options,
    )


class OwnKernel(gpflow.kernels.SquaredExponential):
    """A kernel class from outside GPflow: nothing names it in a file."""


UNSUPPORTED = {
    "kernel class": (
        lambda: with_kernel(gpflow.kernels.SharedIndependent(OwnKernel(), 1)),
        "kernel OwnKernel cannot be saved; use a class of gpflow.kernels",
    ),
    "inducing variable": (
        lambda: gpflux.layers.GPLayer(
            gpflow.kernels.SharedIndependent(gpflow.kernels.Matern52(), 1),
            gpflow.inducing_variables.FallbackSharedIndependentInducingVariables(
                gpflow.inducing_variables.InducingPoints(np.zeros((4, 2)))
            ),
            NUM_DATA,
            mean_function=gpflow.mean_functions.Zero(),
            num_latent_gps=1,
            verbose=False,
        ),
        "inducing variable FallbackSharedIndependentInducingVariables cannot be saved",
    ),
    "prior": (
        lambda: with_prior(make_gp_layer(2, 1, 4, name="g")),
        "kernel.kernel.variance has a prior, which cannot be saved",
    ),
    "transform": (
        lambda: with_exp_transform(make_gp_layer(2, 1, 4, name="g")),
        "kernel.kernel.lengthscales has a shape or transform its class does not rebuild",
    ),
}


@pytest.mark.parametrize("case", list(UNSUPPORTED))
def test_sigma_point_config_refuses_what_it_cannot_rebuild(case):
    """Never saves a wrapped layer as something else: unsupported parts raise instead."""
    make, message = UNSUPPORTED[case]
    layer = wrap(make())
    with pytest.raises(NotImplementedError, match=f"wrapped: gp_layer: {message}"):
        layer.get_config()


@pytest.mark.slow
@pytest.mark.parametrize("suffix", FORMAT_CASES)
def test_sigma_point_layer_round_trip_of_every_supported_structure(tmp_path, rng, suffix):
    """Separate kernels (ARD and isotropic) and inducing points, identity mean, unwhitened,
    frozen inducing points: structure, trainable flags and every value come back."""
    kernel = gpflow.kernels.SeparateIndependent(
        [gpflow.kernels.Matern12(lengthscales=np.ones(2)), gpflow.kernels.SquaredExponential()]
    )
    inducing = gpflow.inducing_variables.SeparateIndependentInducingVariables(
        [gpflow.inducing_variables.InducingPoints(rng.normal(size=(3, 2))) for _ in range(2)]
    )
    gp_layer = gpflux.layers.GPLayer(
        kernel,
        inducing,
        NUM_DATA,
        mean_function=gpflow.mean_functions.Identity(2),
        whiten=False,
        name="separate",
        verbose=False,
    )
    gpflow.set_trainable(inducing, False)
    likelihood = gpflow.likelihoods.Gaussian(0.1)
    model = tf_keras.Sequential(
        [
            tf_keras.Input((2,), dtype=tf.float64),
            SigmaPointGPLayer(gp_layer, seed=1, name="wrapped"),
            TrainableLikelihood(likelihood),
        ]
    )
    perturb_state(model, rng)
    path = str(tmp_path / f"model{suffix}")
    model.save(path)
    reloaded = tf_keras.models.load_model(path)

    config = model.get_layer("wrapped").get_config()
    assert reloaded.get_layer("wrapped").get_config() == config
    kernels = config["gp_layer"]["kernel"]["arguments"]["kernels"]["kernels"]
    assert [k["class_name"] for k in kernels] == ["Matern12", "SquaredExponential"]
    assert [k["arguments"]["lengthscales"] for k in kernels] == [
        {"parameter": [2]},
        {"parameter": []},
    ]
    assert_same_weights(model, reloaded)
    assert [v.trainable for v in reloaded.weights] == [v.trainable for v in model.weights]
    x = rng.normal(size=(5, 2))
    np.testing.assert_array_equal(reloaded(x).numpy(), model(x).numpy())


SAVED_SINCE_ONE_SERIALISER = {
    "linear kernel": lambda: with_kernel(
        gpflow.kernels.SharedIndependent(gpflow.kernels.Linear(variance=0.7), 1)
    ),
    "active_dims": lambda: with_kernel(
        gpflow.kernels.SharedIndependent(gpflow.kernels.Matern52(active_dims=[0]), 1)
    ),
    "sum kernel": lambda: with_kernel(
        gpflow.kernels.SharedIndependent(
            gpflow.kernels.Matern32(lengthscales=[1.0, 2.0]) + gpflow.kernels.Linear(), 1
        )
    ),
    "constant mean": lambda: make_gp_layer(
        2, 1, 4, name="g", mean_function=gpflow.mean_functions.Constant(np.full(1, 0.3))
    ),
}


@pytest.mark.parametrize("case", list(SAVED_SINCE_ONE_SERIALISER))
def test_sigma_point_layer_saves_any_gpflow_kernel_and_mean_function(tmp_path, rng, case):
    """Kernels and mean functions go through the package's one serialiser of GPflow objects,
    so a wrapped GPflux layer saves what the amortized layers save: every value comes back."""
    model = tf_keras.Sequential(
        [
            tf_keras.Input((2,), dtype=tf.float64),
            SigmaPointGPLayer(SAVED_SINCE_ONE_SERIALISER[case](), seed=1, name="wrapped"),
            TrainableLikelihood(gpflow.likelihoods.Gaussian(0.1)),
        ]
    )
    perturb_state(model, rng)
    path = str(tmp_path / "model.keras")
    model.save(path)
    reloaded = tf_keras.models.load_model(path)
    assert_same_weights(model, reloaded)
    x = rng.normal(size=(5, 2))
    np.testing.assert_array_equal(reloaded(x).numpy(), model(x).numpy())


def test_the_gpflow_serialiser_keeps_the_input_dimensions_of_nested_kernels():
    """Stationary kernels take active_dims through **kwargs; it was dropped on reload before."""
    from gpflux_avdgp.gpflow_config import module_from_config, module_to_config

    kernel = gpflow.kernels.Matern52(active_dims=[1]) + gpflow.kernels.Linear(active_dims=[0])
    rebuilt = module_from_config(module_to_config(kernel, "kernel", where="k"), "kernel")
    assert [np.asarray(k.active_dims).tolist() for k in rebuilt.kernels] == [[1], [0]]


def test_gp_layer_config_rebuilds_the_same_structure():
    gp_layer = make_gp_layer(
        2, 3, 4, name="pca", mean_function=gpflow.mean_functions.Linear(np.ones((2, 3)))
    )
    config = gp_layer_to_config(gp_layer)
    rebuilt = gp_layer_from_config(config)
    assert gp_layer_to_config(rebuilt) == config
    assert rebuilt.name == "pca" and rebuilt.num_data == NUM_DATA and rebuilt.whiten
    assert rebuilt.q_sqrt.shape == gp_layer.q_sqrt.shape == (3, 4, 4)


# ------------------------------------------------------------------------ bad model files
@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict[str, str]:
    """A tiny model with moved state saved in both formats: ``{".keras": file, "": folder}``."""
    directory = tmp_path_factory.mktemp("saved")
    likelihood = gpflow.likelihoods.Gaussian(0.1)
    model = gpflux_avdgp.build_avdgp(2, [1], 2, NUM_DATA, likelihood, seed=0)
    model.compile(tf_keras.optimizers.Adam(0.01), loss=AVDGPLoss(likelihood))
    perturb_state(model, np.random.default_rng(0))
    paths = {suffix: str(directory / f"model{suffix}") for suffix in FORMATS}
    for path in paths.values():
        model.save(path)
    return paths


def copy_saved(saved: dict[str, str], suffix: str, tmp_path) -> str:
    target = str(tmp_path / os.path.basename(saved[suffix]))
    if suffix:
        shutil.copy(saved[suffix], target)
    else:
        shutil.copytree(saved[suffix], target)
    return target


def truncate(path: str) -> None:
    with open(path, "rb") as handle:
        data = handle.read()
    with open(path, "wb") as handle:
        handle.write(data[: len(data) // 2])


def assert_one_line_load_error(path: str, message: str) -> ModelFileError:
    with pytest.raises(ModelFileError, match=f"^{re.escape(path)}: {message}") as info:
        gpflux_avdgp.load_model(path)
    assert "\n" not in str(info.value)
    assert isinstance(info.value, ValueError)
    return info.value


def test_load_model_loads_both_formats(saved):
    for path in saved.values():
        model = gpflux_avdgp.load_model(path)
        assert_loss_shares_likelihood(model)
        assert model.optimizer.iterations.numpy() == 5


@pytest.mark.parametrize("damage", ["truncated", "random bytes", "empty"])
def test_damaged_keras_file_gives_one_line_error(saved, tmp_path, damage):
    path = copy_saved(saved, ".keras", tmp_path)
    if damage == "truncated":
        truncate(path)
    else:
        data = np.random.default_rng(0).bytes(4096) if damage == "random bytes" else b""
        with open(path, "wb") as handle:
            handle.write(data)
    assert_one_line_load_error(
        path, re.escape("not a valid .keras archive (truncated or corrupt?)")
    )


def test_keras_archive_with_a_corrupt_member_gives_one_line_error(saved, tmp_path):
    path = copy_saved(saved, ".keras", tmp_path)
    with zipfile.ZipFile(saved[".keras"]) as archive:
        header_offset = archive.getinfo("config.json").header_offset
    with open(path, "r+b") as handle:  # flip bytes inside the stored config.json
        handle.seek(header_offset + 26)  # local header: name and extra-field lengths
        name_length, extra_length = np.frombuffer(handle.read(4), dtype="<u2")
        handle.seek(header_offset + 30 + int(name_length) + int(extra_length) + 5)
        handle.write(b"\xff\xff\xff")
    assert_one_line_load_error(path, "corrupt .keras archive \\(config.json fails its CRC check\\)")


def test_missing_or_misnamed_file_gives_one_line_error(saved, tmp_path):
    assert_one_line_load_error(str(tmp_path / "absent.keras"), "no such file or directory")
    misnamed = str(tmp_path / "model.zip")
    shutil.copy(saved[".keras"], misnamed)
    assert_one_line_load_error(misnamed, "expected a .keras archive or a SavedModel directory")
    assert_one_line_load_error(
        str(tmp_path), re.escape("not a SavedModel directory (no saved_model.pb)")
    )


def test_damaged_saved_model_gives_one_line_error(saved, tmp_path):
    path = copy_saved(saved, "", tmp_path)
    truncate(os.path.join(path, "saved_model.pb"))
    error = assert_one_line_load_error(path, "the SavedModel cannot be loaded")
    assert error.__cause__ is not None


def test_saved_model_without_variables_gives_one_line_error(saved, tmp_path):
    path = copy_saved(saved, "", tmp_path)
    shutil.rmtree(os.path.join(path, "variables"))
    assert_one_line_load_error(path, "incomplete SavedModel \\(no variables/variables.index")


def test_saved_model_with_truncated_variables_gives_one_line_error(saved, tmp_path):
    path = copy_saved(saved, "", tmp_path)
    variables = os.path.join(path, "variables")
    (data_file,) = [name for name in os.listdir(variables) if name.startswith("variables.data")]
    truncate(os.path.join(variables, data_file))
    assert_one_line_load_error(path, "the SavedModel cannot be loaded")
