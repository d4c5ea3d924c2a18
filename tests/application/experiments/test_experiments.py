"""The experiment harness: model zoo, training runner, benchmark summaries, demo settings."""

from __future__ import annotations

import csv
import math
import subprocess
import sys

import gpflow
import numpy as np
import pytest
import scipy.stats
import tensorflow as tf

from avdgp import training, zoo
from avdgp._quiet_tensorflow import _is_noise
from avdgp.data import Split, Standardizer
from avdgp.data.batching import epoch_shuffled_batches
from avdgp.experiments.bench import results as bench_results
from avdgp.experiments.bench import run as bench
from avdgp.experiments.bench import tables as bench_tables
from avdgp.experiments.demo import run as demo
from avdgp.metrics import multiclass_metrics
from avdgp.training import runner
from avdgp.training.runner import SplitData
from avdgp.training.skeleton import run
from gpflux_avdgp import AmortizedGPLayer, PredictiveMixture, SigmaPointGPLayer, load_model
from gpflux_avdgp.layers.inference import MLPInference
from gpflux_avdgp.prediction import predict_mixture
from gpflux_avdgp.propagation import PropagationRule
from gpflux_avdgp.rules import Objective


# ------------------------------------------------------------------------- model names
@pytest.mark.parametrize(
    "name, expected",
    [
        ("avdgp", (zoo.ModelKind.AVDGP, "ar2p")),
        ("avdgp-ar2pp", (zoo.ModelKind.AVDGP, "ar2pp")),
        ("AVDGP-AR1", (zoo.ModelKind.AVDGP, "ar1")),
        ("dspp", (zoo.ModelKind.DSPP, None)),
        (" svgp ", (zoo.ModelKind.SVGP, None)),
    ],
)
def test_parse_model_name(name, expected):
    assert zoo.parse_model_name(name) == expected


@pytest.mark.parametrize("name", ["gpr", "avdgp-ar3", ""])
def test_parse_model_name_rejects_unknown(name):
    with pytest.raises(ValueError, match="model"):
        zoo.parse_model_name(name)


# ------------------------------------------------------------------------- specs
@pytest.mark.parametrize(
    "spec, dims, inducing",
    [
        (zoo.ModelSpec(), [16, 4, 1], [8, 4, 4]),  # the paper's AVDGP
        (zoo.ModelSpec(model="dsdgp"), [16, 4, 1], [256, 128, 128]),
        (zoo.ModelSpec(model="dspp"), [16, 4, 1], [256, 128, 128]),
        (zoo.ModelSpec(model="idsgp"), [1], [16]),
        (zoo.ModelSpec(model="sgp-avi", num_layers=3), [1], [16]),  # shallow ignores layers
        (zoo.ModelSpec(model="svgp"), [1], [256]),
        (zoo.ModelSpec(num_layers=2), [16, 1], [8, 4]),
        (zoo.ModelSpec(num_layers=4, num_inducing=[5]), [16, 4, 4, 1], [5, 5, 5, 5]),
        (zoo.ModelSpec(num_layers=2, hidden_dims=[3], num_inducing=[6, 2]), [3, 1], [6, 2]),
    ],
)
def test_spec_defaults_follow_the_paper(spec, dims, inducing):
    assert spec.resolved_dims() == dims
    assert spec.resolved_inducing() == inducing


def test_spec_rejects_inconsistent_sizes():
    with pytest.raises(ValueError, match="hidden_dims: expected 2 widths for 3 layers"):
        zoo.ModelSpec(hidden_dims=[4]).resolved_dims()
    with pytest.raises(ValueError, match="num_inducing: expected 1 or 3 values"):
        zoo.ModelSpec(num_inducing=[4, 4]).resolved_inducing()
    with pytest.raises(ValueError, match="num_inducing"):
        zoo.ModelSpec(num_inducing=[0]).resolved_inducing()
    with pytest.raises(ValueError, match="rule"):
        zoo.build_model(zoo.ModelSpec(rule="ar9"), 2, 10)
    with pytest.raises(ValueError, match="task"):
        zoo.build_model(zoo.ModelSpec(task="ranking"), 2, 10)


# ------------------------------------------------------------------------- built models
def _gp_layers(built: zoo.BuiltModel) -> list:
    return [layer for layer in built.model.layers if layer.name.startswith("gp_layer")]


@pytest.mark.parametrize("rule", ["ar1", "ar2", "ar2p", "ar2pp"])
def test_avdgp_is_mean_field_affine_with_the_rule(rule):
    built = zoo.build_model(zoo.ModelSpec(rule=rule, num_points=5), 3, 50)
    layers = _gp_layers(built)
    assert [type(layer) for layer in layers] == [AmortizedGPLayer] * 3
    assert [layer.units for layer in layers] == [16, 4, 1]
    assert [layer.num_inducing for layer in layers] == [8, 4, 4]
    assert not any(layer.full_rank for layer in layers)
    expected_rule = PropagationRule.AR2P if rule == "ar2pp" else PropagationRule(rule)
    assert {layer.rule for layer in layers} == {expected_rule}
    objective = Objective.PREDICTIVE if rule == "ar2pp" else Objective.ELBO
    assert built.model.layers[-1].objective is objective  # the model's, which its loss takes
    if rule == "ar1":  # the paper's AR1: one sample in training, S at test time
        assert layers[1]._resolved_num_points(True) == 1
        assert layers[1]._resolved_num_points(False) == 5
    else:
        assert layers[1]._resolved_num_points(True) == 5
    assert isinstance(built.likelihood, gpflow.likelihoods.Gaussian)


def test_shallow_amortized_baselines_are_full_rank_with_their_inference():
    idsgp = _gp_layers(zoo.build_model(zoo.ModelSpec(model="idsgp"), 3, 50))
    sgp_avi = _gp_layers(zoo.build_model(zoo.ModelSpec(model="sgp-avi"), 3, 50))
    assert len(idsgp) == len(sgp_avi) == 1
    assert isinstance(idsgp[0].inference, MLPInference)
    assert idsgp[0].full_rank and idsgp[0].num_inducing == 16
    assert sgp_avi[0].inference_kind.value == "affine" and sgp_avi[0].full_rank


@pytest.mark.parametrize(
    "model, rule, objective",
    [
        # default suite for DS-DGP: test_paper_preset_gives_deep_baselines_mean_field_q
        pytest.param("dsdgp", PropagationRule.AR1, Objective.ELBO, marks=pytest.mark.slow),
        ("dspp", PropagationRule.AR2P, Objective.PREDICTIVE),
    ],
)
def test_deep_global_inducing_baselines(model, rule, objective, rng):
    inputs = rng.standard_normal((300, 5))
    spec = zoo.ModelSpec(model=model, num_inducing=[20, 10, 10], num_points=6)
    built = zoo.build_model(spec, 5, 300, inputs=inputs)
    layers = _gp_layers(built)
    assert [type(layer) for layer in layers] == [SigmaPointGPLayer] * 3
    assert {layer.rule for layer in layers} == {rule}
    assert built.model.layers[-1].objective is objective  # the model's, which its loss takes
    means = [layer.gp_layer.mean_function for layer in layers]
    assert isinstance(means[0], gpflow.mean_functions.Linear)
    assert isinstance(means[1], gpflow.mean_functions.Linear)
    assert isinstance(means[2], gpflow.mean_functions.Zero)
    assert means[0].A.trainable  # learned, not GPflux's fixed identity/PCA mean
    # first-layer inducing points start at training inputs
    z = layers[0].gp_layer.inducing_variable.inducing_variable.Z.numpy()
    assert z.shape == (20, 5)
    assert all(np.any(np.all(np.isclose(inputs, row), axis=1)) for row in z)
    if model == "dsdgp":  # doubly stochastic: one sample in training, S at test time
        assert layers[1]._resolved_num_points(True) == 1
        assert layers[1]._resolved_num_points(False) == 6


@pytest.mark.parametrize("model", ["dsdgp", "dspp", "svgp"])
def test_paper_preset_gives_deep_baselines_mean_field_q(model, rng):
    """The paper: "shallow GPs use full-rank variational approximations, while deep models use
    mean-field": ``q_sqrt`` ``[M, L]`` under ``--preset paper`` (only the new one is trained),
    ``[L, M, M]`` under the defaults and for the shallow SVGP."""
    inputs = rng.standard_normal((60, 3))
    for preset in ("default", "paper"):
        spec = zoo.ModelSpec(model=model, num_inducing=[6], num_points=4, preset=preset)
        built = zoo.build_model(spec, 3, 60, inputs=inputs)
        mean_field = preset == "paper" and model != "svgp"
        for layer in _gp_layers(built):
            q_sqrt = layer.gp_layer.q_sqrt
            assert q_sqrt.shape.rank == (2 if mean_field else 3)
            owned = [v for v in layer.trainable_variables if "q_sqrt" in v.name]
            assert len(owned) == 1 and owned[0] is q_sqrt.unconstrained_variable


@pytest.mark.slow
def test_mean_field_deep_baseline_saves_and_reloads(rng, tmp_path):
    inputs = rng.standard_normal((60, 3))
    spec = zoo.ModelSpec(model="dspp", num_inducing=[6], num_points=4, preset="paper")
    built = zoo.build_model(spec, 3, 60, inputs=inputs)
    built.model.compile(loss=built.loss)
    built.model.fit(inputs, np.sin(inputs[:, :1]), epochs=1, batch_size=30, verbose=0)
    path = tmp_path / "dspp.keras"
    built.model.save(path)
    reloaded = load_model(path)
    gp_layers = [layer for layer in reloaded.layers if layer.name.startswith("gp_layer")]
    assert [layer.gp_layer.q_sqrt.shape.rank for layer in gp_layers] == [2, 2, 2]
    np.testing.assert_array_equal(
        reloaded.predict(inputs[:5], verbose=0), built.model.predict(inputs[:5], verbose=0)
    )


def test_pca_projection_finds_the_principal_directions(rng):
    directions = np.linalg.qr(rng.standard_normal((4, 4)))[0]
    inputs = (rng.standard_normal((2000, 4)) * [5.0, 2.0, 0.3, 0.1]) @ directions.T
    projection = zoo.build._pca_projection(inputs, 4, 2)  # [4, 2]
    for column, direction in zip(projection.T, directions.T[:2]):
        assert abs(abs(column @ direction) - 1.0) < 1e-2
    np.testing.assert_array_equal(zoo.build._pca_projection(inputs, 2, 3), np.eye(2, 3))


def test_classification_models_use_a_bernoulli_likelihood():
    for model in ("avdgp", "svgp"):
        built = zoo.build_model(zoo.ModelSpec(model=model, task="classification"), 2, 20)
        assert isinstance(built.likelihood, gpflow.likelihoods.Bernoulli)


@pytest.mark.slow
@pytest.mark.parametrize(
    "model",
    [
        "avdgp",
        pytest.param("idsgp", marks=pytest.mark.slow),
        pytest.param("dspp", marks=pytest.mark.slow),
    ],
)
def test_k_class_models_have_k_outputs_and_a_multiclass_likelihood(model, rng):
    spec = zoo.ModelSpec(model=model, task="classification", num_classes=3, num_points=4)
    built = zoo.build_model(spec, 2, 20)
    likelihood = built.likelihood
    assert isinstance(likelihood, gpflow.likelihoods.MultiClass) and likelihood.num_classes == 3
    assert isinstance(likelihood.invlink, gpflow.likelihoods.RobustMax)
    assert spec.resolved_dims()[-1] == 3 and built.model.layers[-1].likelihood is likelihood
    x, y = rng.normal(size=(7, 2)), rng.integers(0, 3, size=(7, 1)).astype(np.float64)
    prediction = predict_mixture(built.model, x)
    assert prediction.f_means.shape[0] == 7 and prediction.f_means.shape[2] == 3  # [N, S, K]
    scores, original = runner.score_prediction(prediction, y, zoo.Task.CLASSIFICATION)
    assert original is None
    assert scores == multiclass_metrics(y, prediction.class_probabilities())


@pytest.mark.slow
def test_binary_scores_use_the_models_own_probabilities(rng):
    """The experiments score a Bernoulli model with the probabilities its likelihood gives
    (GPflow's probit, floored at 1e-3), the same numbers as predict and avdgp predict."""
    built = zoo.build_model(zoo.ModelSpec(task="classification", num_points=4), 2, 20)
    x = rng.normal(size=(7, 2))
    prediction = predict_mixture(built.model, x)
    expected = np.sum(
        prediction.weights
        * (
            0.001
            + 0.998
            * scipy.stats.norm.cdf(
                prediction.f_means[..., 0] / np.sqrt(1 + prediction.f_variances[..., 0])
            )
        ),
        axis=1,
    )
    np.testing.assert_allclose(runner.class_probabilities(prediction), expected, rtol=1e-12)
    y = rng.integers(0, 2, size=(7, 1)).astype(np.float64)
    scores, _ = runner.score_prediction(prediction, y, zoo.Task.CLASSIFICATION)
    assert scores["nll"] == pytest.approx(
        -np.mean(np.log(np.where(y[:, 0] == 1, expected, 1 - expected))), rel=1e-12
    )


def test_num_classes_picks_the_likelihood_and_is_checked():
    assert zoo.ModelSpec(task="classification", num_classes=2).output_dim() == 1
    assert zoo.ModelSpec(task="regression", num_classes=5).output_dim() == 1
    with pytest.raises(ValueError, match="num_classes: expected 2 or more classes, got 1"):
        zoo.ModelSpec(task="classification", num_classes=1).resolved_dims()


# ------------------------------------------------------------------------- runner
def test_float_type_sets_and_restores_gpflow_defaults():
    before = gpflow.default_float(), gpflow.default_jitter()
    with training.float_type("float32"):
        assert gpflow.default_float() == np.float32
        assert gpflow.default_jitter() == training.JITTER["float32"]
        built = zoo.build_model(zoo.ModelSpec(num_layers=2), 3, 20)
        assert built.model.inputs[0].dtype == tf.float32
    assert (gpflow.default_float(), gpflow.default_jitter()) == before


def test_training_data_keeps_float64():
    x = np.linspace(0, 1, 12).reshape(6, 2) + 1e-12  # float32 would round the 1e-12 away
    counter = tf.Variable(0, dtype=tf.int64)
    data = epoch_shuffled_batches(x, x[:, :1], 4, seed=0, step_counter=counter)
    batches = list(data)
    assert batches[0][0].dtype == tf.float64
    stacked = np.concatenate([b[0].numpy() for b in batches])
    np.testing.assert_array_equal(np.sort(stacked, axis=0), np.sort(x, axis=0))


def test_train_config_validates():
    with pytest.raises(ValueError, match="epochs"):
        training.TrainConfig(epochs=0)
    with pytest.raises(ValueError, match="learning_rate"):
        training.TrainConfig(learning_rate=-1.0)
    with pytest.raises(ValueError, match="dtype"):
        training.TrainConfig(dtype="float16")


def test_epoch_progress_stops_on_a_non_finite_loss():
    progress = training.EpochProgress("m", stream=None)

    class _Model:
        stop_training = False

    progress.set_model(_Model())
    progress.set_params({"epochs": 3})
    progress.on_epoch_begin(0)
    progress.on_epoch_end(0, {"loss": 1.5})
    progress.on_epoch_begin(1)
    with pytest.raises(
        training.TrainingDiverged, match="m: the training loss became nan in epoch 2"
    ):
        progress.on_epoch_end(1, {"loss": math.nan})
    assert progress.model.stop_training
    assert progress.losses[0] == 1.5 and len(progress.seconds) == 2


def _mixture(rng, n=50, s=3) -> PredictiveMixture:
    weights = rng.dirichlet(np.ones(s), size=n)
    means = rng.standard_normal((n, s, 1))
    variances = rng.uniform(0.1, 0.5, (n, s, 1))
    likelihood = gpflow.likelihoods.Gaussian(variance=0.1)
    return PredictiveMixture(weights, means, variances - 0.1, means, variances, likelihood)


def test_scores_in_original_units_are_rescaled(rng):
    prediction = _mixture(rng)
    y = rng.standard_normal((50, 1))
    scaler = Standardizer(x_mean=np.zeros(1), x_std=np.ones(1), y_mean=3.0, y_std=2.5)
    scaled, original = runner.score_prediction(prediction, y, zoo.Task.REGRESSION, scaler)
    assert set(scaled) >= {"nll", "rmse", "crps"}
    np.testing.assert_allclose(original["nll"], scaled["nll"] + np.log(2.5), rtol=1e-12)
    np.testing.assert_allclose(original["rmse"], scaled["rmse"] * 2.5, rtol=1e-12)
    np.testing.assert_allclose(original["crps"], scaled["crps"] * 2.5, rtol=1e-12)


def test_run_returns_the_documented_record(rng):
    x = rng.uniform(-2, 2, (120, 2))
    y = np.sin(x[:, :1]) + 0.1 * rng.standard_normal((120, 1))
    split = Split(x[:80], y[:80], x[80:90], y[80:90], x[90:], y[90:])
    spec = zoo.ModelSpec(num_layers=2, hidden_dims=[2], num_inducing=[3], num_points=3)
    config = training.TrainConfig.from_preset("paper", epochs=2, batch_size=40, seed=3)
    record = run(SplitData(split), spec, config, dataset="toy", stream=None)
    assert isinstance(record, training.RunRecord)
    assert (record.model, record.dataset, record.epochs, record.seed) == ("avdgp", "toy", 2, 3)
    assert record.streamed_shards is None and record.task == "regression"
    assert (record.n_train, record.n_val, record.n_test, record.dim) == (80, 10, 30, 2)
    assert set(record.test) == {"nll", "rmse", "crps", "coverage_95"}
    assert all(np.isfinite(v) for v in record.test.values())
    assert record.train_seconds_per_epoch > 0 and record.predict_seconds > 0
    assert record.rule == "ar2p" and record.label == "avdgp-ar2p"
    assert record.val is not None and record.test_original_units is None


# ------------------------------------------------------------------------- bench summary
def _write_results(path, rows):
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=bench_results.COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row.get(k, "") for k in bench_results.COLUMNS})


def _result(dataset, model, seed, nll, status="ok"):
    return dict(
        dataset=dataset, model=model, seed=seed, epochs=5, status=status, n_train=80, n_val=10,
        n_test=10, dim=3, nll=nll, rmse=nll + 1, crps=nll + 2, coverage_95=0.9,
        train_seconds_per_epoch=1.0, first_epoch_seconds=5.0, predict_seconds=0.1,
    )  # fmt: skip


def test_summary_tables_and_ranks(tmp_path):
    rows = [
        _result("a", "m1", 0, 1.0), _result("a", "m2", 0, 2.0),
        _result("a", "m1", 1, 3.0), _result("a", "m2", 1, 2.0),
        _result("b", "m1", 0, 0.5), _result("b", "m2", 0, 0.7),
        _result("b", "m1", 1, 0.5), _result("b", "m2", 1, 0.9),
        _result("b", "m2", 2, float("nan"), status="failed: loss nan"),
    ]  # fmt: skip
    _write_results(tmp_path / "results.csv", rows)
    tables = bench.summarise(tmp_path / "results.csv", tmp_path).read_text()
    # data set a: m1 = 2.0 +- 1.0 beats m2 = 2.0 +- 0.0? equal means: the first is bold
    assert "| a | 100 | 3 | **2.000 ± 1.000** | 2.000 ± 0.000 |" in tables
    assert "| b | 100 | 3 | **0.500 ± 0.000** | 0.800 ± 0.100 |" in tables
    # ranks: seed 0: a m1 1, b m1 1 -> m1 1.0; seed 1: a m1 2, b m1 1 -> 1.5 => 1.25 +- 0.25
    assert "| NLL | 1.25 (0.25) | 1.75 (0.25) |" in tables
    assert "Runs: 8 finished" in tables  # the failed run is left out
    for metric in ("nll", "rmse", "crps"):
        assert (tmp_path / f"{metric}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_summary_shows_the_given_models_first_and_then_all_others(tmp_path):
    rows = [
        {**_result("a", model, 0, nll), "preset": "default"}
        for model, nll in (("m1", 1.0), ("m2", 2.0), ("m3", 3.0))
    ]
    _write_results(tmp_path / "results.csv", rows)
    tables = bench.summarise(tmp_path / "results.csv", tmp_path, models=["m3"]).read_text()
    assert "| data set | N | D | m3 | m1 | m2 |" in tables


def test_summary_without_finished_runs_is_an_error(tmp_path):
    _write_results(tmp_path / "results.csv", [_result("a", "m", 0, 1.0, status="failed: x")])
    with pytest.raises(ValueError, match="no finished runs"):
        bench.summarise(tmp_path / "results.csv", tmp_path)


# ------------------------------------------------------------------------- demo settings
def test_demo_splits_inducing_points_like_the_paper():
    specs = demo._specs(demo.DemoSettings(total_inducing=32))
    assert specs["SGP-AVI"].resolved_inducing() == [32]
    assert specs["AVDGP-2L"].resolved_inducing() == [16, 16]  # 1:1
    assert specs["AVDGP-3L"].resolved_inducing() == [16, 8, 8]  # 2:1:1
    assert specs["AVDGP-3L"].resolved_dims() == [2, 2, 1]  # D^l = 2 (paper's toy)
    with pytest.raises(ValueError, match="total_inducing"):
        demo._specs(demo.DemoSettings(total_inducing=3))
    assert demo.demo_settings(True, epochs=None).epochs == demo.FULL.epochs
    assert demo.demo_settings(False, epochs=3).epochs == 3


# ------------------------------------------------------------------------- quiet import
def test_start_up_notices_are_recognised_and_other_lines_kept():
    noise = [
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
        "I0000 00:00:1795317474.093761   24233 port.cc:153] oneDNN custom operations are on.",
        "I0000 00:00:1795317474.094245   24233 cudart_stub.cc:31] Could not find cuda drivers",
        "E0000 00:00:1795317476.901296   24233 cuda_platform.cc:52] failed call to cuInit: X",
        "To enable the following instructions: AVX2 FMA, in other operations, rebuild "
        "TensorFlow with the appropriate compiler flags.",
    ]
    kept = [
        "E0000 00:00:1795317476.901296   24233 cuda_platform.cc:52] out of memory",
        "Traceback (most recent call last):",
        "W0000 00:00:1.0 1 some_other.cc:1] a real warning",
    ]
    assert all(_is_noise(line) for line in noise)
    assert not any(_is_noise(line) for line in kept)


@pytest.mark.slow
def test_importing_the_package_leaves_stderr_and_devices_alone():
    """A library import redirects no file descriptor and lists no devices (the CLI's quiet
    import does both: ``test_cli.py`` checks that ``avdgp`` prints no TensorFlow notices)."""
    script = (
        "import os, sys\n"
        "calls = []\n"
        "real_dup2 = os.dup2\n"
        "os.dup2 = lambda *args: calls.append(args) or real_dup2(*args)\n"
        "import gpflux_avdgp\n"
        "print(len(calls), 'tensorflow' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == ["0", "True"]


def test_time_curves_of_chosen_seeds_draw_one_line_per_model(tmp_path, monkeypatch):
    def curve(model, seed, nll):
        return dict(
            dataset="a", model=model, preset="default", seed=seed, best_epoch=2,
            epoch_seconds=[3.0, 1.0, 1.0], test_nll_curve=[[1, nll], [2, nll - 1], [3, nll]],
        )  # fmt: skip

    curves = [curve("m1", 0, 5.0), curve("m1", 1, 6.0), curve("m2", 0, 7.0), curve("m2", 2, 8.0)]
    drawn = {}

    def capture(runs, path, *, title):
        drawn[path.name] = (runs, title)
        return path

    monkeypatch.setattr(bench_tables.plots, "plot_time_to_accuracy", capture)
    written = bench.plot_time_curves(curves, ["a", "b"], tmp_path, seeds=[0], suffix="_seed0")
    assert [path.name for path in written] == ["time_a_seed0.png"]  # no curves of data set b
    runs, title = drawn["time_a_seed0.png"]
    assert runs == {
        "m1": [([3.0, 1.0, 1.0], [5.0, 4.0, 5.0], 2)],
        "m2": [([3.0, 1.0, 1.0], [7.0, 6.0, 7.0], 2)],
    }
    assert title.startswith("a, seed 0:")
    bench.plot_time_curves(curves, ["a"], tmp_path)
    assert [len(model_runs) for model_runs in drawn["time_a.png"][0].values()] == [2, 2]


def test_summary_uses_the_longest_run_per_seed(tmp_path):
    short = dict(_result("a", "m1", 0, 9.0), epochs=2)
    _write_results(
        tmp_path / "results.csv",
        [short, _result("a", "m1", 0, 1.0), _result("a", "m2", 0, 2.0)],
    )
    tables = bench.summarise(tmp_path / "results.csv", tmp_path).read_text()
    assert "| a | 100 | 3 | **1.000 (1 seed)** | 2.000 (1 seed) |" in tables
    assert "Epochs per data set: a 5." in tables


@pytest.mark.parametrize(
    "argv, orig_argv, expected",
    [
        (["/venv/bin/avdgp", "fit"], ["python", "/venv/bin/avdgp", "fit"], True),
        (["-m"], ["python", "-m", "avdgp", "demo"], True),
        (["-m"], ["python", "-m", "pytest"], False),
        (["script.py"], ["python", "script.py"], False),
    ],
)
def test_cli_detection(monkeypatch, argv, orig_argv, expected):
    from avdgp._quiet_tensorflow import running_the_cli

    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(sys, "orig_argv", orig_argv)
    assert running_the_cli() is expected


def test_ranks_compare_the_same_seeds_when_one_is_missing(tmp_path):
    rows = [
        _result("a", "m1", 0, 1.0), _result("a", "m1", 1, 100.0), _result("a", "m1", 2, 1.0),
        _result("a", "m2", 0, 2.0), _result("a", "m2", 2, 50.0),  # m2 lacks seed 1
    ]  # fmt: skip
    _write_results(tmp_path / "results.csv", rows)
    tables = bench.summarise(tmp_path / "results.csv", tmp_path).read_text()
    assert "| NLL | 1.00 (0.00) | 2.00 (0.00) |" in tables  # seeds 0 and 2 only


def test_model_labels_are_canonical():
    assert zoo.model_label("AVDGP") == "avdgp-ar2p"
    assert zoo.model_label("avdgp-ar1") == "avdgp-ar1"
    assert zoo.model_label("dsdgp") == "dsdgp"
