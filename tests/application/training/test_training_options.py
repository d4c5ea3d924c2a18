"""Training options chosen from the learning-curve study: where the affine inducing points
start, the cosine learning-rate schedule, and best-epoch selection on validation NLL."""

from __future__ import annotations

import math

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras

from avdgp import training, zoo
from avdgp.data import Split
from avdgp.training.runner import SplitData
from avdgp.training.skeleton import run
from gpflux_avdgp import (
    AmortizedGPLayer,
    AVDGPLoss,
    ValidationNLL,
    build_avdgp,
    predict_mixture,
)


def _data(rng, n=120):
    x = rng.uniform(-2, 2, (n, 2))
    y = np.sin(2 * x[:, :1]) + 0.1 * rng.standard_normal((n, 1))
    return x, y


# ------------------------------------------------------------------------- inducing_init
@pytest.mark.parametrize("init, identity", [(None, 0.0), ("global", 0.0), ("input", 1.0)])
def test_layer_inducing_init_reaches_the_inference_and_its_config(rng, init, identity):
    options = {} if init is None else {"inducing_init": init}
    layer = AmortizedGPLayer(1, 3, 50, **options)
    layer(tf.constant(rng.normal(size=(4, 2))))
    weights = layer.inference.affine_weights.numpy()
    np.testing.assert_array_equal(weights, np.tile(np.eye(2) * identity, (3, 1, 1)))
    config = layer.get_config()
    assert config["inducing_init"] == (init or "global")
    rebuilt = AmortizedGPLayer.from_config(config)
    assert rebuilt.inducing_init.value == config["inducing_init"]


def test_global_init_makes_the_first_layer_depend_on_its_input_at_once(rng):
    """With ``W_m = I`` the kernel part of a first layer is input-independent at the start
    (the mean is a linear map of the q(u) network alone); with ``W_m = 0`` it is not."""
    x = tf.constant(rng.normal(size=(6, 2)))
    spread = {}
    for init in ("input", "global"):
        layer = AmortizedGPLayer(1, 4, 50, inducing_init=init, seed=1)
        layer(x)
        inducing = layer.inference(x).inducing  # [N, M, D]
        offsets = inducing.numpy() - x.numpy()[:, None, :]
        spread[init] = np.ptp(offsets, axis=0).max()  # how Z - x varies over datapoints
    assert spread["input"] < 1e-12
    assert spread["global"] > 0.5


def test_unknown_inducing_init_is_one_line_error():
    with pytest.raises(ValueError, match="inducing_init: expected one of .*got 'random'"):
        AmortizedGPLayer(1, 3, 50, inducing_init="random")


# ------------------------------------------------------------------------- schedule
def test_cosine_schedule_spans_all_epochs():
    config = training.TrainConfig.from_preset(
        "paper", epochs=4, learning_rate=0.01, schedule="cosine", final_learning_fraction=0.1
    )
    schedule = config.learning_rate_for(steps_per_epoch=5)  # 20 steps in all
    rates = [float(schedule(step)) for step in (0, 10, 20, 40)]
    expected_middle = 0.01 * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    np.testing.assert_allclose(rates, [0.01, expected_middle, 0.001, 0.001], rtol=1e-6)
    assert (
        training.TrainConfig(learning_rate=0.02, schedule="constant").learning_rate_for(5) == 0.02
    )


@pytest.mark.parametrize(
    "options, message, error",
    [
        ({"schedule": "step"}, "schedule: expected one of", ValueError),
        (
            {"final_learning_fraction": 1.5},
            r"final_learning_fraction: expected a number in \[0, 1\]",
            ValueError,
        ),
        ({"restore_best": "yes"}, "restore_best: expected a bool", TypeError),
        ({"backup_interval": -1}, "backup_interval: expected seconds >= 0", ValueError),
        ({"backup_interval": float("inf")}, "backup_interval: expected seconds", ValueError),
        ({"backup_interval": True}, "backup_interval: expected seconds", ValueError),
        (
            {"restore_best": True, "patience": 0},
            "patience: expected an integer >= 1, got 0",
            ValueError,
        ),
        (
            {"patience": 5, "restore_best": False},
            "patience: stopping early needs restore_best",
            ValueError,
        ),
    ],
)
def test_train_config_rejects_bad_options(options, message, error):
    with pytest.raises(error, match=message) as caught:
        training.TrainConfig(**options)
    assert type(caught.value) is error


@pytest.mark.slow
def test_fit_model_follows_the_schedule(rng):
    x, y = _data(rng, 60)
    spec = zoo.ModelSpec(num_layers=1, num_inducing=[3], seed=0)
    built = zoo.build_model(spec, 2, len(x))
    config = training.TrainConfig.from_preset(
        "paper",
        epochs=3,
        batch_size=20,
        learning_rate=0.01,
        schedule="cosine",
        final_learning_fraction=0.0,
    )
    training.fit_model(built, x, y, config)
    optimizer = built.model.optimizer
    assert int(optimizer.iterations) == 9
    assert float(optimizer.learning_rate) < 1e-3  # near the end of the half cosine (step 8 of 9)


# ------------------------------------------------------------------------- best epoch
def test_validation_nll_matches_predict_mixture(rng):
    x, y = _data(rng)
    likelihood = gpflow.likelihoods.Gaussian(variance=0.1)
    model = build_avdgp(2, [1], 4, len(x), likelihood, seed=0)
    model.compile(tf_keras.optimizers.Adam(0.01), loss=AVDGPLoss(likelihood))
    scorer = ValidationNLL(x[:30], y[:30, 0], every=2)
    history = model.fit(x, y, epochs=3, batch_size=40, verbose=0, callbacks=[scorer])
    assert [epoch for epoch, _ in scorer.history] == [1, 2]  # every 2nd epoch and the last
    expected = -np.mean(predict_mixture(model, x[:30]).log_density(y[:30]))
    np.testing.assert_allclose(scorer.history[-1][1], expected, rtol=1e-10)
    assert np.isclose(history.history["val_nll"][-1], expected)


@pytest.mark.slow
@pytest.mark.parametrize("float_type", ["float64", "float32"])
def test_validation_nll_in_padded_batches_equals_the_mixture_log_density(rng, float_type):
    """30 rows in batches of 8 (padded to 32, the padding dropped), Bernoulli labels and a
    float32 model: the traced score is the eager mixture's mean log density."""
    x = rng.uniform(-2, 2, (30, 2))
    labels = (x[:, :1] > 0).astype(float)
    with gpflow.config.as_context(gpflow.config.Config(float=float_type)):
        likelihood = gpflow.likelihoods.Bernoulli()
        model = build_avdgp(2, [1], 4, len(x), likelihood, seed=0)
        model.compile(tf_keras.optimizers.Adam(0.01), loss=AVDGPLoss(likelihood))
        scorer = ValidationNLL(x, labels, batch_size=8)
        model.fit(x, labels, epochs=1, batch_size=10, verbose=0, callbacks=[scorer])
        expected = -np.mean(predict_mixture(model, x).log_density(labels.astype(float_type)))
    rtol = 1e-10 if float_type == "float64" else 1e-5
    np.testing.assert_allclose(scorer.history[-1][1], expected, rtol=rtol)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"x": np.zeros((3, 2)), "y": np.zeros(4)}, "y: expected 3 targets"),
        ({"x": np.zeros((3,)), "y": np.zeros(3)}, "x: expected"),
        ({"x": np.zeros((3, 2)), "y": np.zeros(3), "every": 0}, "every: expected"),
    ],
)
def test_validation_nll_rejects_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ValidationNLL(**kwargs)


def test_restore_best_ends_with_the_weights_of_the_best_epoch(rng):
    """A learning rate that makes the validation NLL go up again: the run ends with the
    weights of the best scored epoch, whose NLL it reports."""
    x, y = _data(rng, 160)
    split = Split(x[:100], y[:100], x[100:130], y[100:130], x[130:], y[130:])
    spec = zoo.ModelSpec(num_layers=1, num_inducing=[3], seed=0)
    config = training.TrainConfig.from_preset(
        "paper", epochs=6, batch_size=20, learning_rate=0.3, seed=0, restore_best=True
    )
    record = run(SplitData(split), spec, config, dataset="toy", stream=None)
    curve = dict(record.val_nll_curve)
    assert len(curve) == 6
    best = min(curve, key=curve.get)
    assert best < 6  # the last epoch is worse: without restoring, the final NLL differs
    assert record.best_epoch == best
    np.testing.assert_allclose(record.val["nll"], curve[best], rtol=1e-6)


@pytest.mark.slow
def test_patience_stops_with_the_best_epoch_of_the_full_run(rng):
    """Early stopping ends after ``patience`` epochs without a better validation NLL, with the
    same best epoch, weights and scores as training all epochs and restoring the best."""
    x, y = _data(rng, 160)
    split = Split(x[:100], y[:100], x[100:130], y[100:130], x[130:], y[130:])
    spec = zoo.ModelSpec(num_layers=1, num_inducing=[3], seed=0)
    settings = dict(epochs=8, batch_size=20, learning_rate=0.3, seed=0, restore_best=True)
    full = run(
        SplitData(split),
        spec,
        training.TrainConfig.from_preset("paper", **settings),
        dataset="toy",
        stream=None,
    )
    curve = [nll for _, nll in full.val_nll_curve]
    patience, best, expected_stop = 2, 0, len(curve)
    for epoch, nll in enumerate(curve):
        best = epoch if nll < curve[best] else best
        if epoch - best >= patience:
            expected_stop = epoch + 1
            break
    assert expected_stop < len(curve)  # the curve makes this run stop early
    stopped = run(
        SplitData(split, test_curve=True),
        spec,
        training.TrainConfig.from_preset("paper", **settings, patience=patience),
        dataset="toy",
        stream=None,
    )
    assert full.stopped_epoch == 8 and stopped.stopped_epoch == expected_stop
    assert len(stopped.epoch_seconds) == expected_stop
    assert stopped.best_epoch == full.best_epoch == best + 1
    np.testing.assert_allclose(stopped.test["nll"], full.test["nll"], rtol=1e-10)
    # the test curve is scored after every epoch; the record's test NLL is the best epoch's
    test_curve = dict(stopped.test_nll_curve)
    assert sorted(test_curve) == list(range(1, expected_stop + 1))
    np.testing.assert_allclose(stopped.test["nll"], test_curve[best + 1], rtol=1e-6)
    assert full.test_nll_curve is None


def test_patience_follows_the_preset_and_restore_best():
    from avdgp.training.config import DEFAULT_PATIENCE

    assert training.TrainConfig.from_preset().patience == DEFAULT_PATIENCE
    assert training.TrainConfig.from_preset(patience=0).patience is None  # 0: all epochs
    assert training.TrainConfig.from_preset(patience=3).patience == 3
    assert training.TrainConfig.from_preset(restore_best=False).patience is None
    assert training.TrainConfig.from_preset("paper").patience is None
    with pytest.raises(ValueError, match="patience: stopping early needs restore_best"):
        training.TrainConfig.from_preset(restore_best=False, patience=3)


def test_restore_best_needs_validation_rows(rng):
    x, y = _data(rng, 60)
    split = Split(x[:40], y[:40], x[:0], y[:0], x[40:], y[40:])
    config = training.TrainConfig.from_preset("paper", epochs=1, batch_size=20, restore_best=True)
    with pytest.raises(ValueError, match="restore_best: selecting the best epoch needs validation"):
        run(SplitData(split), zoo.ModelSpec(num_layers=1, num_inducing=[3]), config, dataset="t")


@pytest.mark.parametrize("resumable", [False, True])
def test_the_best_epoch_is_restored_with_a_guard_left_at_its_last_weights(rng, tmp_path, resumable):
    """The run's early stopping is the library's ``BestEpochStopping`` (tested with a guarded
    model in ``tests/library/layers/test_input_guard.py``), resumable or not."""
    from types import SimpleNamespace

    from avdgp.training.fit import best_epoch_callbacks
    from gpflux_avdgp.callbacks import BestEpochStopping

    x, y = _data(rng, 60)
    split = Split(x[:40], y[:40], x[40:50], y[40:50], x[50:], y[50:])
    config = training.TrainConfig.from_preset("paper", epochs=3, batch_size=20, restore_best=True)
    built = SimpleNamespace(likelihood=gpflow.likelihoods.Gaussian())
    state_dir = tmp_path if resumable else None
    _, stopping = best_epoch_callbacks(built, split, config, state_dir=state_dir)
    assert isinstance(stopping, BestEpochStopping) and stopping.restore_best_weights


# ------------------------------------------------------------------------- presets
def test_presets_set_the_documented_options():
    from avdgp.training.config import TRAINING_DIFFERENCES, training_options
    from gpflux_avdgp import presets

    assert training.TrainConfig() == training.TrainConfig.from_preset("default")
    assert training.TrainConfig() != training.TrainConfig.from_preset("paper")
    assert presets.layer_options("paper") == {"inducing_init": "input"}
    assert presets.layer_options() == {
        "inducing_init": "global",
        "whiten": True,
        "num_anchors": 32,
        "reach_gate": 1.0,
    }
    assert (presets.hidden_mean_function(), presets.hidden_mean_function("paper")) == (
        "linear",
        None,
    )
    paper = training.TrainConfig.from_preset("paper", epochs=3)
    assert (
        paper.schedule,
        paper.restore_best,
        paper.learning_rate,
        paper.epochs,
        paper.patience,
    ) == ("constant", False, 0.005, 3, None)
    default = training.TrainConfig.from_preset(learning_rate=None, schedule="constant")
    assert (default.schedule, default.restore_best, default.learning_rate, default.patience) == (
        "constant",
        True,
        0.005,
        20,
    )
    assert set(presets.PAPER_DIFFERENCES) == {"inducing_init", "prior_reversion", "reach_gate"}
    assert set(TRAINING_DIFFERENCES) == {"schedule", "restore_best", "patience"}
    with pytest.raises(ValueError, match="preset: expected one of"):
        training_options("fast")


@pytest.mark.slow
@pytest.mark.parametrize(
    "preset, identity",
    # the paper's in the slow suite; test_presets_set_the_documented_options checks its options
    [("default", 0.0), pytest.param("paper", 1.0, marks=pytest.mark.slow)],
)
def test_preset_reaches_the_layers_of_build_avdgp_and_the_zoo(preset, identity):
    likelihood = gpflow.likelihoods.Gaussian()
    models = [
        build_avdgp(3, [2, 1], 2, 10, likelihood, preset=preset),
        zoo.build_model(zoo.ModelSpec(num_layers=2, preset=preset), 3, 10).model,
    ]
    for model in models:
        for layer in model.layers:
            if isinstance(layer, AmortizedGPLayer):
                dim = layer.input_dim
                expected = np.tile(np.eye(dim) * identity, (layer.num_inducing, 1, 1))
                np.testing.assert_array_equal(layer.inference.affine_weights.numpy(), expected)
    explicit = build_avdgp(3, [1], 2, 10, likelihood, preset="paper", inducing_init="global")
    assert explicit.layers[0].inducing_init.value == "global"  # keywords override the preset
    idsgp = zoo.build_model(zoo.ModelSpec(model="idsgp", preset=preset), 3, 10)  # no affine maps
    assert idsgp.model.layers[0].inference_kind.value == "mlp"


def test_bench_rows_keep_their_preset(tmp_path):
    from avdgp.experiments.bench import results as bench_results
    from avdgp.experiments.bench import run as bench

    path = tmp_path / "results.csv"
    legacy = [c for c in bench_results.COLUMNS if c not in ("preset", "best_epoch")]
    path.write_text(
        ",".join(legacy) + "\n" + "wine,avdgp-ar2p,0,10,ok" + "," * (len(legacy) - 5) + "\n"
    )
    bench_results.append_row(
        path,
        {
            "dataset": "wine",
            "model": "svgp",
            "seed": 0,
            "epochs": 10,
            "status": "ok",
            "preset": "default",
        },
    )
    rows = bench.read_results(path)
    assert [row["preset"] for row in rows] == ["paper", "default"]  # before the column: paper
    assert [row["model"] for row in rows] == ["avdgp-ar2p", "svgp"]
    assert path.read_text().splitlines()[0] == ",".join(bench_results.COLUMNS)  # header upgraded
    assert bench.display_model("avdgp-ar2p", "paper") == "avdgp-ar2p/paper"
    assert bench.display_model("avdgp-ar2p", "default") == "avdgp-ar2p"
