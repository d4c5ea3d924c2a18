"""``gpflux_avdgp.export``: a SavedModel that serves with plain TensorFlow.

The exports are loaded in a fresh Python process that imports only TensorFlow (and NumPy) and
must give the numbers of :func:`~gpflux_avdgp.predict_mixture` in this process, for any batch
size, on every call. One subprocess serves every check (TensorFlow's import dominates its cost);
those checks run in the slow suite. By default, an in-process export of a float32 model is
loaded back and compared with ``predict_mixture``, and bad arguments are refused.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras
from helpers import SAME_NUMBERS_RTOL
from reference import gaussian_mixture_log_density
from scipy import special

import gpflux_avdgp
from gpflux_avdgp.io import serving
from gpflux_avdgp.io.serving import METADATA_FILE, SIGNATURES
from gpflux_avdgp.prediction import model_mixture

BATCH_SIZES = (1, 7, 50)
RTOL = SAME_NUMBERS_RTOL  # float64 throughout
OUTPUTS = ("mean", "variance", "std", "component_means", "component_variances", "weights")
PACKAGES = ("gpflux_avdgp", "gpflow", "gpflux", "tensorflow_probability", "tf_keras")

#: Runs in the fresh process: load every export, call every signature at every batch size
#: (twice, for determinism), try bad inputs, and report what it imported.
SERVER = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf

    folder = sys.argv[1]
    cases = json.loads(open(f"{folder}/cases.json").read())
    arrays, report = {}, {"errors": {}, "metadata": {}}
    for name, case in cases.items():
        served = tf.saved_model.load(case["path"])
        report["metadata"][name] = json.loads(served.metadata().numpy().decode())
        x_all = np.load(f"{folder}/{name}_x.npy")
        y_all = np.load(f"{folder}/{name}_y.npy")
        for batch in case["batch_sizes"]:
            x, y = tf.constant(x_all[:batch]), tf.constant(y_all[:batch])
            for call in (0, 1):
                for key in ("predict_f", "predict_y"):
                    for output, value in served.signatures[key](x=x).items():
                        arrays[f"{name}/{key}/{batch}/{call}/{output}"] = value.numpy()
                value = served.signatures["log_density"](x=x, y=y)["log_density"]
                arrays[f"{name}/log_density/{batch}/{call}"] = value.numpy()
        x, y = x_all[:4].copy(), y_all[:4].copy()
        x_nan = x.copy()
        x_nan[2, 1] = np.nan
        y_inf = y.copy()
        y_inf[0, 0] = np.inf
        bad = {
            "nan": lambda: served.signatures["predict_y"](x=tf.constant(x_nan)),
            "empty": lambda: served.signatures["predict_f"](x=tf.constant(x[:0])),
            "width": lambda: served.signatures["predict_y"](x=tf.constant(x[:, :-1])),
            "rank": lambda: served.signatures["predict_y"](x=tf.constant(x[None])),
            "dtype": lambda: served.signatures["predict_y"](x=tf.constant(x.astype("float32"))),
            "y_inf": lambda: served.signatures["log_density"](
                x=tf.constant(x), y=tf.constant(y_inf)
            ),
            "y_rows": lambda: served.signatures["log_density"](
                x=tf.constant(x), y=tf.constant(y[:3])
            ),
            "attribute_width": lambda: served.predict_y(tf.constant(x[:, :-1])),
        }
        for what, call in bad.items():
            try:
                call()
                message = None
            except Exception as error:  # noqa: BLE001 - reported to the parent
                message = f"{type(error).__name__}: {error}"
            report["errors"][f"{name}/{what}"] = message
    report["modules"] = sorted(sys.modules)
    np.savez(f"{folder}/served.npz", **arrays)
    open(f"{folder}/report.json", "w").write(json.dumps(report))
    """)


def _perturbed(model: tf_keras.Model, seed: int) -> tf_keras.Model:
    """Move every variable away from its initial value (as training would), deterministically."""
    rng = np.random.default_rng(seed)
    model(tf.zeros([1, model.inputs[0].shape[-1]], model.inputs[0].dtype))  # build lazily
    for variable in model.trainable_variables:
        noise = 0.2 * rng.standard_normal(variable.shape)
        variable.assign(variable + tf.constant(noise, variable.dtype))
    return model


def _model(rule: str, likelihood, input_dim: int, seed: int) -> tf_keras.Model:
    model = gpflux_avdgp.build_avdgp(
        input_dim, [2, 1], [4, 3], 100, likelihood, rule=rule, num_points=5, seed=seed
    )
    return _perturbed(model, seed)


class Served:
    """What the fresh process returned: arrays by key, error messages, metadata, modules."""

    def __init__(self, folder: Path):
        with np.load(folder / "served.npz") as archive:
            self.arrays = dict(archive)
        report = json.loads((folder / "report.json").read_text())
        self.errors, self.metadata = report["errors"], report["metadata"]
        self.modules = report["modules"]

    def outputs(self, name: str, signature: str, batch: int, call: int = 0) -> dict:
        prefix = f"{name}/{signature}/{batch}/{call}/"
        return {key[len(prefix) :]: v for key, v in self.arrays.items() if key.startswith(prefix)}


class _Scaler:
    """The statistics an export reads (``x_mean``, ``x_std`` ``[D]``, ``y_mean``, ``y_std``), as
    the application's ``Standardizer`` holds them, and its maps into model units."""

    def __init__(self, x: np.ndarray, y: np.ndarray):
        self.x_mean, self.x_std = x.mean(axis=0), x.std(axis=0)
        self.y_mean, self.y_std = float(np.mean(y)), float(np.std(y))

    def transform_x(self, x: np.ndarray) -> np.ndarray:
        return (x - self.x_mean) / self.x_std

    def transform_y(self, y: np.ndarray) -> np.ndarray:
        return (y - self.y_mean) / self.y_std


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """Export four models, save their test inputs, run :data:`SERVER` once."""
    folder = tmp_path_factory.mktemp("export")
    rng = np.random.default_rng(7)
    regression = _model("ar2p", gpflow.likelihoods.Gaussian(0.1), 3, seed=1)
    classification = _model("ar2p", gpflow.likelihoods.Bernoulli(), 2, seed=2)
    ar2 = _model("ar2", gpflow.likelihoods.Gaussian(0.1), 3, seed=3)
    x_raw = rng.normal(loc=5.0, scale=3.0, size=(50, 3))
    scaler = _Scaler(x_raw, 100.0 + 20.0 * rng.normal(size=50))

    x = rng.normal(size=(50, 3))
    labels = (rng.uniform(size=(50, 1)) < 0.5).astype(np.float64)
    cases = {
        "regression": (regression, x, x[:, :1] + 0.3, {}),
        "standardised": (regression, x_raw, 100.0 + 20.0 * x[:, :1], {"standardizer": scaler}),
        "classification": (classification, x[:, :2], labels, {}),
        "ar2": (ar2, x, x[:, :1], {}),
    }
    described = {}
    for name, (model, inputs, targets, options) in cases.items():
        path = gpflux_avdgp.export(model, folder / name, **options)
        np.save(folder / f"{name}_x.npy", inputs)
        np.save(folder / f"{name}_y.npy", targets)
        described[name] = {"path": str(path), "batch_sizes": list(BATCH_SIZES)}
    (folder / "cases.json").write_text(json.dumps(described))
    result = subprocess.run(
        [sys.executable, "-c", SERVER, str(folder)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    models = {"regression": regression, "classification": classification, "ar2": ar2}
    return models, cases, scaler, Served(folder), folder


def _expected(model, inputs, targets) -> tuple[dict, dict, np.ndarray]:
    """predict_f and predict_y outputs and the log density, from predict_mixture."""
    prediction = gpflux_avdgp.predict_mixture(model, inputs)
    f_mean, f_variance = prediction.f_moments()
    y_mean, y_variance = prediction.y_moments()
    common = {"weights": prediction.weights}
    f = dict(
        common,
        mean=f_mean,
        variance=f_variance,
        component_means=prediction.f_means,
        component_variances=prediction.f_variances,
    )
    y = dict(
        common,
        mean=y_mean,
        variance=y_variance,
        component_means=prediction.y_means,
        component_variances=prediction.y_variances,
    )
    f["std"], y["std"] = np.sqrt(f_variance), np.sqrt(y_variance)
    if isinstance(prediction.likelihood, gpflow.likelihoods.Gaussian):
        y["lower_95"], y["upper_95"] = prediction.central_interval(0.95)
    else:  # a classifier: model.predict's name for the class probabilities
        y["probabilities"] = y_mean
    return f, y, prediction.log_density(targets)


def _assert_outputs(served: dict, expected: dict, batch: int) -> None:
    assert set(OUTPUTS) <= set(served) == set(expected)
    for key in expected:
        np.testing.assert_allclose(served[key], expected[key][:batch], rtol=RTOL, err_msg=key)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["regression", "classification"])
def test_plain_tensorflow_serves_the_numbers_of_predict_mixture(setup, name):
    models, cases, _, served, _ = setup
    model, inputs, targets, _ = cases[name]
    f, y, log_density = _expected(model, inputs, targets)
    for batch in BATCH_SIZES:
        _assert_outputs(served.outputs(name, "predict_f", batch), f, batch)
        _assert_outputs(served.outputs(name, "predict_y", batch), y, batch)
        got = served.arrays[f"{name}/log_density/{batch}/0"]
        np.testing.assert_allclose(got, log_density[:batch], rtol=RTOL)
    shapes = served.outputs(name, "predict_y", 7)
    assert shapes["mean"].shape == shapes["variance"].shape == (7, 1)
    assert shapes["component_means"].shape == shapes["component_variances"].shape == (7, 5, 1)
    assert shapes["weights"].shape == (7, 5)


@pytest.mark.slow
def test_classification_predict_y_mean_is_the_class_probability(setup):
    models, cases, _, served, _ = setup
    model, inputs, _, _ = cases["classification"]
    prediction = gpflux_avdgp.predict_mixture(model, inputs)
    got = served.outputs("classification", "predict_y", 50)["mean"][:, 0]
    np.testing.assert_allclose(got, prediction.class_probabilities()[:, 0], rtol=RTOL)
    # GPflow's probit squashes Phi into [1e-3, 1 - 1e-3] (gpflow.likelihoods.utils.inv_probit)
    means, variances = prediction.f_means[..., 0], prediction.f_variances[..., 0]  # [N, S]
    probability = np.sum(prediction.weights * special.ndtr(means / np.sqrt(1 + variances)), 1)
    np.testing.assert_allclose(got, 1e-3 + (1 - 2e-3) * probability, rtol=RTOL)
    assert ((got > 0) & (got < 1)).all()


@pytest.mark.slow
def test_standardised_export_takes_raw_features_and_answers_in_original_units(setup):
    models, cases, scaler, served, _ = setup
    _, x_raw, y_raw, _ = cases["standardised"]
    f, y, log_density = _expected(
        models["regression"], scaler.transform_x(x_raw), scaler.transform_y(y_raw)
    )
    for moments in (f, y):
        for key in {"mean", "component_means", "lower_95", "upper_95"} & set(moments):
            moments[key] = moments[key] * scaler.y_std + scaler.y_mean
        moments["std"] = moments["std"] * scaler.y_std
        for key in ("variance", "component_variances"):
            moments[key] = moments[key] * scaler.y_std**2
    for batch in BATCH_SIZES:
        _assert_outputs(served.outputs("standardised", "predict_f", batch), f, batch)
        _assert_outputs(served.outputs("standardised", "predict_y", batch), y, batch)
        got = served.arrays[f"standardised/log_density/{batch}/0"]
        np.testing.assert_allclose(got, log_density[:batch] - np.log(scaler.y_std), rtol=RTOL)
    # the original-unit log density is that of the rescaled mixture (tests/reference.py)
    served_y = served.outputs("standardised", "predict_y", 50)
    reference = gaussian_mixture_log_density(
        y_raw.reshape(-1, 1),
        np.log(served_y["weights"]),
        served_y["component_means"],
        served_y["component_variances"],
        0.0,
    )
    np.testing.assert_allclose(served.arrays["standardised/log_density/50/0"], reference, rtol=1e-9)


@pytest.mark.slow
def test_ar2p_serving_is_deterministic(setup):
    served = setup[3]
    for name in ("regression", "classification", "standardised"):
        for batch in BATCH_SIZES:
            for signature in ("predict_f", "predict_y"):
                first = served.outputs(name, signature, batch, call=0)
                second = served.outputs(name, signature, batch, call=1)
                for key in OUTPUTS:
                    np.testing.assert_array_equal(first[key], second[key])
            np.testing.assert_array_equal(
                served.arrays[f"{name}/log_density/{batch}/0"],
                served.arrays[f"{name}/log_density/{batch}/1"],
            )


@pytest.mark.slow
def test_ar2_serving_is_deterministic(setup):
    """AR2 predicts with fixed common random numbers: the same numbers on every call, in any
    batch, equal to ``predict_mixture``'s."""
    models, cases, _, served, _ = setup
    model, inputs, targets, _ = cases["ar2"]
    first = gpflux_avdgp.predict_mixture(model, inputs)
    second = gpflux_avdgp.predict_mixture(model, inputs)
    if not np.array_equal(first.f_means, second.f_means):
        pytest.skip("AR2 prediction in Python is not deterministic yet (common random numbers)")
    f, y, log_density = _expected(model, inputs, targets)
    for batch in BATCH_SIZES:
        for call in (0, 1):
            _assert_outputs(served.outputs("ar2", "predict_f", batch, call), f, batch)
            _assert_outputs(served.outputs("ar2", "predict_y", batch, call), y, batch)
            got = served.arrays[f"ar2/log_density/{batch}/{call}"]
            np.testing.assert_allclose(got, log_density[:batch], rtol=RTOL)


@pytest.mark.slow
def test_the_serving_process_imported_only_tensorflow(setup):
    modules = setup[3].modules
    assert "tensorflow" in modules
    loaded = [m for m in modules if m.split(".")[0] in PACKAGES]
    assert loaded == [], loaded


@pytest.mark.slow
@pytest.mark.parametrize(
    "what, expected",
    [
        ("nan", "x: contains NaN or inf"),
        ("empty", "x: empty batch, expected at least one row"),
        ("width", "Shape of tensor x [4,2] is not compatible with expected shape [?,3]"),
        ("rank", "Shape of tensor x [1,4,3] is not compatible with expected shape [?,3]"),
        ("dtype", "expected to be a double tensor but is a float tensor"),
        ("y_inf", "y: contains NaN or inf"),
        ("y_rows", "y: expected one row per row of x"),
        ("attribute_width", "Can not cast TensorSpec(shape=(4, 2)"),
    ],
)
def test_serving_rejects_bad_input_with_a_clear_error(setup, what, expected):
    message = setup[3].errors[f"regression/{what}"]
    assert message is not None, f"{what}: no error"
    assert expected in message, message


@pytest.mark.slow
def test_metadata_describes_the_export(setup):
    served, folder = setup[3], setup[4]
    plain, scaled = served.metadata["regression"], served.metadata["standardised"]
    assert plain["input_dim"] == 3 and plain["output_dim"] == 1
    assert plain["num_components"] == 5
    assert plain["dtype"] == "float64"
    assert plain["likelihood"] == "Gaussian"
    assert plain["signatures"] == list(SIGNATURES)
    assert plain["gpflux_avdgp_version"] == gpflux_avdgp.__version__
    assert not plain["standardized_inputs"] and not plain["standardized_targets"]
    assert scaled["standardized_inputs"] and scaled["standardized_targets"]
    scaler = setup[2]
    np.testing.assert_array_equal(scaled["x_std"], scaler.x_std)
    assert scaled["y_mean"] == [scaler.y_mean]
    assert served.metadata["classification"]["likelihood"] == "Bernoulli"
    on_disk = json.loads((folder / "standardised" / METADATA_FILE).read_text())
    assert on_disk == scaled


@pytest.mark.slow
def test_float32_model_exports_a_float32_signature(tmp_path, rng):
    with gpflow.config.as_context(gpflow.config.Config(float=np.float32, jitter=1e-5)):
        model = _model("ar2p", gpflow.likelihoods.Gaussian(0.1), 2, seed=4)
        x = rng.normal(size=(6, 2)).astype(np.float32)
        expected = gpflux_avdgp.predict_mixture(model, x).y_moments()
        gpflux_avdgp.export(model, tmp_path / "single")
    served = tf.saved_model.load(str(tmp_path / "single"))
    got = served.signatures["predict_y"](x=tf.constant(x))
    assert got["mean"].dtype == tf.float32
    # two float32 graphs of the same maths (export's, predict_mixture's): measured 1.4e-6, about
    # 12 float32 ulps; the float64 export tests hold the numbers to 1e-12
    np.testing.assert_allclose(got["mean"].numpy(), expected[0], rtol=1e-5)
    np.testing.assert_allclose(got["variance"].numpy(), expected[1], rtol=1e-5)


@pytest.fixture(scope="module")
def small_model():
    return gpflux_avdgp.build_avdgp(2, [1], [3], 10, gpflow.likelihoods.Gaussian(), num_points=3)


@pytest.mark.parametrize(
    "options, message",
    [
        (
            {
                "standardizer": {"x_mean": [0, 0], "x_std": [1, 1], "y_mean": 0, "y_std": 1},
                "x_mean": [0, 0],
            },
            "standardizer: give either a standardizer or x_mean, not both",
        ),
        ({"standardizer": {"x_mean": [0, 0]}}, "x_std, y_mean, y_std missing in dict"),
        ({"x_mean": [0.0, 0.0]}, "x_mean, x_std: give both or neither"),
        ({"x_mean": [0, 0, 0], "x_std": [1, 1, 1]}, r"x_mean: expected a scalar or shape \(2,\)"),
        ({"x_mean": [0, 0], "x_std": [1, 0]}, r"x_std: expected positive values, got \[1.0, 0.0\]"),
        ({"y_mean": np.nan, "y_std": 1}, r"y_mean: expected finite values, got \[nan\]"),
        ({"likelihood": "gaussian"}, "likelihood: expected a GPflow likelihood, got 'gaussian'"),
        ({"metadata": {"dtype": "int8"}}, "metadata: dtype: set by export, cannot be replaced"),
        ({"metadata": {"when": object()}}, "metadata: expected JSON-able values"),
        ({"feature_names": ["a"]}, r"feature_names: expected 2 strings, one per input"),
        ({"feature_names": ["a", "a"]}, "feature_names: 'a' named more than once"),
        ({"feature_names": ["a", "price (EUR)"]}, "'price \\(EUR\\)' cannot name a signature"),
    ],
)
def test_export_rejects_bad_arguments(small_model, tmp_path, options, message):
    with pytest.raises(ValueError, match=message):
        gpflux_avdgp.export(small_model, tmp_path / "out", **options)
    assert not (tmp_path / "out").exists()


def test_export_rejects_bad_models_and_paths(small_model, tmp_path):
    bernoulli = gpflux_avdgp.build_avdgp(2, [1], [3], 10, gpflow.likelihoods.Bernoulli())
    with pytest.raises(ValueError, match="target standardisation needs a Gaussian likelihood"):
        gpflux_avdgp.export(bernoulli, tmp_path / "b", y_mean=1.0, y_std=2.0)
    file = tmp_path / "file"
    file.write_text("")
    with pytest.raises(ValueError, match="path: .*file is a file, expected a folder"):
        gpflux_avdgp.export(small_model, file)
    headless = tf_keras.Sequential(small_model.layers[:-1])
    with pytest.raises(ValueError, match=r"holds no TrainableLikelihood layer; pass likelihood="):
        gpflux_avdgp.export(headless, tmp_path / "h")
    with pytest.raises(ValueError, match="model: expected a tf_keras.Model, got str"):
        gpflux_avdgp.export("model.keras", tmp_path / "s")


def test_an_export_traces_the_model_once_for_all_its_signatures(small_model, tmp_path, monkeypatch):
    """Every signature calls one traced mixture of the model (tracing is most of an export's
    time): one eager call that builds what is lazily built, then one trace."""
    calls = []

    def counted(*args, **kwargs):
        calls.append(tf.executing_eagerly())
        return model_mixture(*args, **kwargs)

    monkeypatch.setattr(serving, "model_mixture", counted)
    gpflux_avdgp.export(small_model, tmp_path / "e", feature_names=["width", "height"])
    assert calls == [True, False]


@pytest.mark.slow
def test_an_export_with_feature_names_serves_columns_by_name(small_model, tmp_path, rng):
    """The by-name signatures stack the named columns in the model's order: any order of
    keyword arguments gives the positional signature's numbers; TensorFlow refuses a missing or
    unknown column, naming it."""
    scaling = {"x_mean": [1.0, -2.0], "x_std": [2.0, 0.5], "y_mean": 3.0, "y_std": 4.0}
    path = gpflux_avdgp.export(
        small_model, tmp_path / "e", standardizer=scaling, feature_names=["width", "height"]
    )
    served = tf.saved_model.load(str(path))
    assert set(served.signatures) == {*SIGNATURES, "predict_f_by_name", "predict_y_by_name"}
    metadata = json.loads(served.metadata().numpy())
    assert metadata["feature_names"] == ["width", "height"]
    assert metadata["signatures"][-2:] == ["predict_f_by_name", "predict_y_by_name"]
    x = rng.normal(size=(7, 2))
    width, height = tf.constant(x[:, 0]), tf.constant(x[:, 1])
    for name in ("predict_f", "predict_y"):
        expected = served.signatures[name](x=tf.constant(x))
        got = served.signatures[f"{name}_by_name"](height=height, width=width)
        assert set(got) == set(expected)
        for key in expected:
            np.testing.assert_array_equal(got[key].numpy(), expected[key].numpy())
    by_name = served.signatures["predict_y_by_name"]
    with pytest.raises(TypeError, match="missing a required argument: 'height'"):
        by_name(width=width)
    with pytest.raises(TypeError, match="unexpected keyword argument 'depth'"):
        by_name(width=width, height=height, depth=width)
    with pytest.raises(tf.errors.InvalidArgumentError, match="height: expected as many rows"):
        by_name(width=width, height=height[:3])


@pytest.mark.parametrize(
    "likelihood", ["Gaussian", pytest.param("Bernoulli", marks=pytest.mark.slow)]
)
def test_predict_y_serves_every_output_of_model_predict(tmp_path, rng, likelihood):
    """``mean``, ``std`` and the 95 % interval, or ``probabilities``: the names and numbers of
    ``model.predict``, beside the moments and components."""
    model = gpflux_avdgp.build_avdgp(
        2, [1], [3], 10, getattr(gpflow.likelihoods, likelihood)(), num_points=3
    )
    x = rng.normal(size=(6, 2))
    served = tf.saved_model.load(str(gpflux_avdgp.export(model, tmp_path / "e")))
    got = served.signatures["predict_y"](x=tf.constant(x))
    expected = model.predict(x, verbose=0)
    assert set(expected) <= set(got)
    for key, value in expected.items():
        np.testing.assert_allclose(got[key].numpy(), value, rtol=1e-9, atol=1e-12, err_msg=key)
    np.testing.assert_array_equal(got["std"].numpy(), np.sqrt(got["variance"].numpy()))
