"""Fault tolerance: killed runs resume exactly, and a failing step stops with a useful error.

* ``epoch_shuffled_batches``: the order of epoch ``e`` is a function of ``(seed, e)`` only.
* A real ``SIGKILL`` of a training subprocess under ``BackupAndRestore`` mid-epoch, then a
  restart, ends with the weights and losses of an uninterrupted run (AR2: stochastic).
* The harness (``fit_model``/``run``, used by ``avdgp fit --save``) resumes an interrupted run,
  refuses a folder with other settings, and names the layer, epoch and batch of a NaN step
  while the backup keeps the weights of its last backed-up epoch.
"""

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras
from helpers import SCRIPTS_DIR, UCI_ROOT, prepare_split_run_dir, run_cli

import gpflux_avdgp
from avdgp.data import Split
from avdgp.data.batching import epoch_shuffled_batches
from avdgp.training import (
    EpochProgress,
    TrainConfig,
    TrainingDiverged,
    fit_model,
    float_type,
)
from avdgp.training.fit import KeptBackup, _describe_non_finite_step, best_epoch_callbacks
from avdgp.training.runner import SplitData
from avdgp.training.skeleton import run
from avdgp.zoo import ModelSpec, build_model
from gpflux_avdgp.layers.base import NON_FINITE_MESSAGE

SCRIPT = SCRIPTS_DIR / "resumable_fit.py"


def _epoch_rows(data: tf.data.Dataset) -> list[float]:
    return [value for x, _ in data for value in x.numpy()[:, 0].tolist()]


# ----------------------------------------------------------------------- epoch_shuffled_batches
def test_epoch_order_depends_only_on_seed_and_epoch():
    counter = tf.Variable(0, dtype=tf.int64)
    x = np.arange(10.0)[:, None]
    data = epoch_shuffled_batches(x, 2 * x, 4, seed=1, step_counter=counter)
    assert int(data.cardinality()) == 3
    epoch0 = _epoch_rows(data)
    assert sorted(epoch0) == list(range(10)) and epoch0 != list(range(10))
    assert _epoch_rows(data) == epoch0  # a second pass at the same step: same order
    counter.assign(3)  # three steps of four rows: epoch 1
    epoch1 = _epoch_rows(data)
    assert sorted(epoch1) == list(range(10)) and epoch1 != epoch0
    counter.assign(5)  # still epoch 1
    assert _epoch_rows(data) == epoch1
    # a fresh dataset (a restarted process) at the same step gives the same order
    fresh = epoch_shuffled_batches(x, 2 * x, 4, seed=1, step_counter=tf.Variable(3, tf.int64))
    assert _epoch_rows(fresh) == epoch1
    other_seed = epoch_shuffled_batches(x, 2 * x, 4, seed=2, step_counter=counter)
    assert _epoch_rows(other_seed) != epoch1
    targets = [value for _, y in data for value in y.numpy()[:, 0].tolist()]
    np.testing.assert_array_equal(targets, 2 * np.array(epoch1))  # rows stay paired


def test_epoch_shuffled_batches_keeps_float64():
    x = np.arange(6.0)[:, None] / 3
    data = epoch_shuffled_batches(x, x, 4, seed=0, step_counter=tf.Variable(0, tf.int64))
    batch_x, _ = next(iter(data))
    assert batch_x.dtype == tf.float64
    assert set(batch_x.numpy()[:, 0]) <= set(x[:, 0])  # no float32 rounding


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"batch_size": 0}, "batch_size"),
        ({"seed": 1.5}, "seed"),
        ({"step_counter": tf.Variable(0.0)}, "step_counter"),
        ({"step_counter": 3}, "step_counter"),
        ({"targets": np.zeros((5, 1))}, "same, non-zero number of rows"),
    ],
)
def test_epoch_shuffled_batches_rejects_bad_arguments(kwargs, match):
    arguments = dict(
        inputs=np.zeros((4, 1)),
        targets=np.zeros((4, 1)),
        batch_size=2,
        seed=0,
        step_counter=tf.Variable(0, tf.int64),
    )
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=match):
        epoch_shuffled_batches(**arguments)


# ----------------------------------------------------------------------- SIGKILL and restart
def _run_script(*args: str, **popen) -> subprocess.Popen:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


@pytest.mark.slow
def test_backup_and_restore_after_sigkill_matches_an_uninterrupted_run(tmp_path):
    marker = tmp_path / "stalled"
    killed = _run_script(
        str(tmp_path / "backup"), str(tmp_path / "unused.npz"), "--stall-at", "2,3", str(marker)
    )
    uninterrupted = _run_script(str(tmp_path / "backup_full"), str(tmp_path / "full.npz"))
    deadline = time.monotonic() + 240
    while not marker.exists():
        assert killed.poll() is None, killed.stderr.read()
        assert time.monotonic() < deadline, "the training subprocess never reached the stall"
        time.sleep(0.2)
    os.kill(killed.pid, signal.SIGKILL)  # mid-epoch 3 (0-based epoch 2, batch 3)
    assert killed.wait(timeout=60) == -signal.SIGKILL
    assert not (tmp_path / "unused.npz").exists()
    assert (tmp_path / "backup").is_dir()  # epochs 1 and 2 were backed up

    restarted = _run_script(str(tmp_path / "backup"), str(tmp_path / "resumed.npz"))
    assert restarted.wait(timeout=300) == 0, restarted.stderr.read()
    assert uninterrupted.wait(timeout=300) == 0, uninterrupted.stderr.read()

    full, resumed = np.load(tmp_path / "full.npz"), np.load(tmp_path / "resumed.npz")
    assert int(full["first_epoch"]) == 0
    assert int(resumed["first_epoch"]) == 2  # resumed, did not start over
    assert int(resumed["iterations"]) == int(full["iterations"]) == 4 * 8
    np.testing.assert_allclose(resumed["losses"], full["losses"][2:], rtol=1e-12)
    weight_keys = sorted(key for key in full.files if key.startswith("w"))
    assert weight_keys == sorted(key for key in resumed.files if key.startswith("w"))
    for key in weight_keys:
        np.testing.assert_allclose(resumed[key], full[key], rtol=1e-12, atol=1e-14)
    assert not any((tmp_path / "backup").iterdir())  # BackupAndRestore cleans up on success


# ----------------------------------------------------------------------- harness
def _split(rng, rows: int = 120) -> Split:
    x = rng.normal(size=(rows, 2))
    y = np.sin(x[:, :1]) + 0.1 * rng.normal(size=(rows, 1))
    return Split(x, y, x[:0], y[:0], x[:20], y[:20])


SPEC = ModelSpec(
    model="avdgp", rule="ar2", num_layers=2, hidden_dims=[2], num_inducing=[3, 3], num_points=4
)


class _Interrupt(tf_keras.callbacks.Callback):
    """Raises KeyboardInterrupt at a (0-based) epoch and batch, as a Ctrl-C would."""

    def __init__(self, epoch: int, batch: int):
        super().__init__()
        self.at, self.epoch = (epoch, batch), None

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if (self.epoch, batch) == self.at:
            raise KeyboardInterrupt


def _train(split, config, backup_dir, callbacks=(), progress=None, selection=None):
    """``fit_model`` of a fresh model; ``selection(built)`` gives callbacks put first."""
    tf_keras.backend.clear_session()
    tf_keras.utils.set_random_seed(config.seed)
    built = build_model(SPEC, 2, len(split.x_train))
    chosen = () if selection is None else selection(built)
    progress = fit_model(
        built,
        split.x_train,
        split.y_train,
        config,
        callbacks=(*chosen, *callbacks),
        backup_dir=backup_dir,
        progress=progress,
    )
    return built, progress, chosen


@pytest.mark.slow
def test_fit_model_resumes_from_its_backup(tmp_path, rng):
    split = _split(rng)
    config = TrainConfig.from_preset(
        "paper", epochs=3, batch_size=30, learning_rate=0.02, seed=4, backup_interval=0
    )
    full, full_progress, _ = _train(split, config, tmp_path / "full")
    with pytest.raises(KeyboardInterrupt):
        _train(split, config, tmp_path / "backup", callbacks=(_Interrupt(1, 2),))
    resumed, progress, _ = _train(split, config, tmp_path / "backup")
    assert progress.first_epoch == 1
    np.testing.assert_allclose(progress.losses, full_progress.losses[1:], rtol=1e-12)
    for mine, theirs in zip(resumed.model.get_weights(), full.model.get_weights()):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-14)


@pytest.mark.slow  # default suite: test_streaming_save_folder_resumes_only_the_same_data
def test_run_refuses_a_folder_with_other_settings_or_a_finished_run(tmp_path, rng):
    split = _split(rng)
    config = TrainConfig.from_preset("paper", epochs=1, batch_size=60, seed=0)
    prepare_split_run_dir(tmp_path, SPEC, split, config, "toy")
    prepare_split_run_dir(tmp_path, SPEC, split, config, "toy")  # same settings: resume
    with pytest.raises(ValueError, match=r"other settings \(train.epochs: 1 -> 2\)"):
        prepare_split_run_dir(
            tmp_path, SPEC, split, TrainConfig.from_preset("paper", epochs=2, batch_size=60), "toy"
        )
    other_data = dataclasses.replace(split, x_train=split.x_train + 1)
    with pytest.raises(ValueError, match="data_sha256"):
        prepare_split_run_dir(tmp_path, SPEC, other_data, config, "toy")
    record = run(SplitData(split), SPEC, config, dataset="toy", stream=None, save_dir=tmp_path)
    assert record.resumed_from_epoch == 0
    assert (tmp_path / "run.json").exists() and not (tmp_path / "backup").exists()
    with pytest.raises(ValueError, match="holds a finished run"):
        run(SplitData(split), SPEC, config, dataset="toy", stream=None, save_dir=tmp_path)


class _PoisonLayer(tf_keras.callbacks.Callback):
    """Sets a kernel parameter of ``layer`` to NaN at a (0-based) epoch and batch."""

    def __init__(self, layer: str, epoch: int, batch: int):
        super().__init__()
        self.layer, self.at, self.epoch = layer, (epoch, batch), None
        self.finished_weights = None

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        self.finished_weights = [w.numpy() for w in self.model.weights]

    def on_train_batch_begin(self, batch, logs=None):
        if (self.epoch, batch) == self.at:
            kernel = self.model.get_layer(self.layer).kernel
            kernel.lengthscales.unconstrained_variable.assign(np.nan)


def test_nan_step_names_layer_epoch_and_batch_and_keeps_last_good_weights(tmp_path, rng):
    split = _split(rng)
    config = TrainConfig.from_preset(
        "paper", epochs=3, batch_size=30, learning_rate=0.02, seed=1, backup_interval=0
    )
    poison = _PoisonLayer("gp_layer_2", epoch=1, batch=2)
    backup = tmp_path / "backup"
    with pytest.raises(TrainingDiverged) as caught:
        _train(split, config, backup, callbacks=(poison,))
    message = str(caught.value)
    assert "training stopped in epoch 2, batch 3" in message
    assert "non-finite values (NaN or inf) in the output of layer 'gp_layer_2'" in message
    assert f"the weights after epoch 1 are kept in {backup}" in message

    # the backup holds the finite weights of epoch 1, not the poisoned ones
    reader = tf.train.load_checkpoint(str(backup / "chief"))
    saved = [
        reader.get_tensor(name)
        for name in reader.get_variable_to_shape_map()
        if reader.get_variable_to_dtype_map()[name].is_floating
    ]
    assert saved and all(np.all(np.isfinite(value)) for value in saved)
    finished = {value.tobytes() for value in poison.finished_weights if value.dtype.kind == "f"}
    assert finished <= {value.tobytes() for value in saved}


@pytest.mark.slow
def test_nan_in_a_layer_stops_before_the_optimizer_step(rng):
    """check_numerics fails the step in the forward pass: no weight becomes NaN."""
    likelihood = gpflow.likelihoods.Gaussian(0.1)
    model = gpflux_avdgp.build_avdgp(2, [2, 1], 3, 40, likelihood, num_points=4, seed=0)
    model.compile(tf_keras.optimizers.Adam(0.01), loss=gpflux_avdgp.AVDGPLoss(likelihood))
    x, y = rng.normal(size=(40, 2)), rng.normal(size=(40, 1))
    model.fit(x, y, batch_size=20, epochs=1, verbose=0)
    model.get_layer("gp_layer_1").kernel.variance.unconstrained_variable.assign(np.inf)
    before = [w.numpy() for w in model.trainable_weights if w.dtype.is_floating]
    with pytest.raises(tf.errors.InvalidArgumentError, match="gp_layer_1: non-finite values"):
        model.fit(x, y, batch_size=20, epochs=1, verbose=0)
    after = [w.numpy() for w in model.trainable_weights if w.dtype.is_floating]
    for old, new in zip(before, after):
        np.testing.assert_array_equal(old, new)


class _RaiseOpError(tf_keras.callbacks.Callback):
    """Fails the first batch with an InvalidArgumentError that is not about NaN or inf."""

    def on_train_batch_begin(self, batch, logs=None):
        raise tf.errors.InvalidArgumentError(None, None, "indices[3] = 7 is not in [0, 5)")


def test_only_non_finite_failures_become_divergence(tmp_path, rng):
    """Another runtime error is re-raised as it is, not reported as a diverged loss."""
    split = _split(rng)
    config = TrainConfig.from_preset("paper", epochs=1, batch_size=30, seed=0)
    with pytest.raises(tf.errors.InvalidArgumentError, match="is not in"):
        _train(split, config, tmp_path / "backup", callbacks=(_RaiseOpError(),))


def test_gradient_failure_is_described_with_its_layer():
    model = tf_keras.Sequential(
        [tf_keras.Input((2,)), tf_keras.layers.Dense(1, name="gp_layer_1")], name="avdgp"
    )
    progress = EpochProgress("AVDGP", stream=None)
    progress.epoch, progress.batch = 4, 11
    error = tf.errors.InvalidArgumentError(
        None,
        None,
        "Not a number (NaN) or infinity (Inf) values detected in gradient. "
        f"gp_layer_1: {NON_FINITE_MESSAGE} : Tensor had NaN values",
    )
    backup = KeptBackup(Path("out/backup"))
    assert _describe_non_finite_step(error, model, progress, backup) == (
        "AVDGP: training stopped in epoch 5, batch 12: non-finite values (NaN or inf) in the "
        "gradient at the output of layer 'gp_layer_1'"
    )  # nothing backed up yet
    backup.backed_up_epoch = 2  # backed up after the third epoch, not since
    assert _describe_non_finite_step(error, model, progress, backup) == (
        "AVDGP: training stopped in epoch 5, batch 12: non-finite values (NaN or inf) in the "
        "gradient at the output of layer 'gp_layer_1'; the weights after epoch 3 are kept in "
        "out/backup"
    )


@pytest.mark.slow
def test_float32_training_on_standardised_uci_data_stays_finite():
    """A short float32 run of the paper's 3-layer AVDGP on a UCI split (see the benchmark
    ``benchmarks/float32_robustness.py`` for the longer measurement)."""
    from avdgp.data import Standardizer, load_dataset, split_dataset

    root = UCI_ROOT / "concrete"
    dataset = load_dataset(root)
    for seed in (0, 1):
        split = split_dataset(dataset, seed=seed, split=0)
        split = Standardizer.fit(split.x_train, split.y_train).transform_split(split)
        config = TrainConfig.from_preset(
            "paper", epochs=2, batch_size=100, seed=seed, dtype="float32"
        )
        tf_keras.backend.clear_session()
        tf_keras.utils.set_random_seed(seed)
        with float_type("float32"):
            spec = ModelSpec(model="avdgp", rule="ar2p", num_layers=3, seed=seed)
            built = build_model(spec, split.x_train.shape[1], len(split.x_train))
            assert built.model.inputs[0].dtype == tf.float32
            progress = fit_model(built, split.x_train, split.y_train, config)
        assert all(np.isfinite(progress.losses)), progress.losses


# ----------------------------------------------------------------------- avdgp fit --save
def _fit_command(data: Path, save: Path) -> list[str]:
    return [
        sys.executable, "-m", "avdgp", "fit", str(data), "--rule", "ar2", "--layers", "2",
        "--hidden-dims", "2", "--inducing", "3,3", "--points", "4", "--epochs", "4",
        "--batch-size", "8", "--learning-rate", "0.01", "--seed", "3", "--save", str(save),
        "--backup-interval", "0",
    ]  # fmt: skip


@pytest.mark.slow
def test_cli_fit_save_resumes_a_killed_run(tmp_path, rng):
    rows = 2400  # 240 training steps per epoch: the kill lands inside epoch 3
    x = rng.normal(size=(rows, 3))
    y = np.sin(x[:, 0]) + 0.1 * rng.normal(size=rows)
    data = tmp_path / "data.csv"
    np.savetxt(data, np.column_stack([x, y]), delimiter=",", header="a,b,c,y", comments="")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")

    def start(save: Path) -> subprocess.Popen:
        return subprocess.Popen(
            _fit_command(data, save), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip

    uninterrupted = start(tmp_path / "full")
    killed = start(tmp_path / "run")
    backup_state = tmp_path / "run" / "backup" / "chief" / "checkpoint"
    deadline = time.monotonic() + 300
    # the end of epoch 2: TF writes ckpt-2's files, then names it in the state file (killing
    # between the two resumes from epoch 1, as a loaded machine showed)
    while not (backup_state.exists() and 'ckpt-2"' in backup_state.read_text()):
        assert killed.poll() is None, killed.stderr.read()
        assert time.monotonic() < deadline, "the run never finished its second epoch"
        time.sleep(0.05)
    os.kill(killed.pid, signal.SIGKILL)  # inside epoch 3
    assert killed.wait(timeout=60) == -signal.SIGKILL
    assert (tmp_path / "run" / "backup").is_dir() and not (tmp_path / "run" / "run.json").exists()

    resumed = subprocess.run(
        _fit_command(data, tmp_path / "run"), env=env, capture_output=True, text=True, timeout=600
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming the interrupted run" in resumed.stderr
    assert "epoch 1/4" not in resumed.stderr and "epoch 3/4" in resumed.stderr
    assert uninterrupted.wait(timeout=600) == 0, uninterrupted.stderr.read()

    def result(folder: str) -> dict:
        return json.loads((tmp_path / folder / "run.json").read_text())["result"]

    full, continued = result("full"), result("run")
    assert continued["resumed_from_epoch"] == 2 and full["resumed_from_epoch"] == 0
    assert continued["final_train_loss"] == pytest.approx(full["final_train_loss"], rel=1e-10)
    for key, value in full["test"].items():
        assert continued["test"][key] == pytest.approx(value, rel=1e-10), key
    assert not (tmp_path / "run" / "backup").exists()

    again = subprocess.run(
        _fit_command(data, tmp_path / "run"), env=env, capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 2
    assert "holds a finished run" in again.stderr


# ------------------------------------------------------------ best-epoch selection on resume
def _selection_run(split, config, backup_dir, interrupt=None, progress=None):
    """``fit_model`` with the harness' best-epoch selection (its state beside the backup)."""

    def selection(built):
        return best_epoch_callbacks(
            built, split, config, state_dir=backup_dir.parent / "best_epoch"
        )

    callbacks = () if interrupt is None else (interrupt,)
    built, _, chosen = _train(split, config, backup_dir, callbacks, progress, selection)
    return built, chosen


@pytest.mark.slow  # default suite: test_the_selection_state_round_trips_through_its_files
def test_a_resumed_run_selects_the_uninterrupted_runs_best_epoch(tmp_path):
    """Killed after epoch 2 of 5 with the best validation NLL at epoch 1, the resumed run ends
    with epoch 1's weights and the whole validation curve, as the uninterrupted run does
    (Keras' EarlyStopping alone restarts its search: it chose epoch 4)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(140, 2))
    y = np.sin(x[:, :1]) + 0.1 * rng.normal(size=(140, 1))
    split = Split(x[:100], y[:100], x[100:120], y[100:120], x[120:], y[120:])
    # the rate makes the validation NLL worsen after epoch 1 (measured: 1.041, 1.036, 1.060, ...)
    config = TrainConfig(
        epochs=5, batch_size=25, learning_rate=0.3, seed=4, patience=None, backup_interval=0
    )
    full, (full_scorer, full_stopper) = _selection_run(split, config, tmp_path / "a" / "backup")
    assert full_stopper.best_epoch == 1  # the premise: the best epoch precedes the interruption
    with pytest.raises(KeyboardInterrupt):
        _selection_run(split, config, tmp_path / "b" / "backup", interrupt=_Interrupt(3, 0))
    resumed, (scorer, stopper) = _selection_run(split, config, tmp_path / "b" / "backup")
    assert stopper.best_epoch == 1
    assert [e for e, _ in scorer.history] == [e for e, _ in full_scorer.history] == list(range(5))
    np.testing.assert_allclose(
        [v for _, v in scorer.history], [v for _, v in full_scorer.history], rtol=1e-10
    )
    for mine, theirs in zip(resumed.model.get_weights(), full.model.get_weights()):
        np.testing.assert_allclose(mine, theirs, rtol=1e-10, atol=1e-12)


@pytest.mark.slow  # default suite: test_a_finished_backup_resumes_with_no_epoch_left
def test_fitting_again_on_an_early_stopped_backup_trains_no_epoch(tmp_path):
    """Early stopping ends training after epoch 3 of 5; the backup marks it as the last, so a
    second fit on it (a kill before the run kept its result) runs no epoch and ends with the
    selected epoch's weights, curve and the epochs' record of the first fit."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(140, 2))
    y = np.sin(x[:, :1]) + 0.1 * rng.normal(size=(140, 1))
    split = Split(x[:100], y[:100], x[100:120], y[100:120], x[120:], y[120:])
    config = TrainConfig(epochs=5, batch_size=25, learning_rate=0.3, seed=4, patience=1)
    backup, record = tmp_path / "backup", tmp_path / "progress.json"
    first_progress = EpochProgress("m", stream=None, state_file=record)
    first, (first_scorer, first_stopper) = _selection_run(
        split, config, backup, progress=first_progress
    )
    assert first_stopper.stopped_epoch == 2 and len(first_progress.seconds) == 3  # the premise
    progress = EpochProgress("m", stream=None, state_file=record)
    again, (scorer, stopper) = _selection_run(split, config, backup, progress=progress)
    assert progress.seconds == first_progress.seconds and progress.first_epoch == 0
    assert progress.losses == first_progress.losses
    assert (stopper.best_epoch, stopper.stopped_epoch) == (1, 2)
    assert scorer.history == first_scorer.history
    for mine, theirs in zip(again.model.get_weights(), first.model.get_weights()):
        np.testing.assert_array_equal(mine, theirs)


def test_the_selection_state_round_trips_through_its_files(tmp_path):
    """The state of epoch ``e`` is restored only for a resume after epoch ``e``; the other
    file keeps the state of the backup before (a kill between the state and the backup)."""
    from avdgp.training.best_epoch import ResumableEarlyStopping

    class Curve:
        history = [(0, 1.5), (1, 1.25)]

    stopper = ResumableEarlyStopping(tmp_path / "state", curve=Curve(), patience=3)
    stopper.best, stopper.best_epoch, stopper.wait, stopper.stopped_epoch = 1.25, 1, 0, 0
    stopper.best_weights = [np.arange(3.0), np.eye(2)]
    stopper.keep_state(1)
    stopper.best, stopper.wait = 1.0, 5
    stopper.keep_state(2)
    later = Curve()
    later.history = [(2, 1.1)]
    fresh = ResumableEarlyStopping(tmp_path / "state", curve=later, patience=3)
    fresh.on_train_begin()
    fresh.on_epoch_begin(2)  # resumes after epoch 1
    assert (fresh.best, fresh.best_epoch, fresh.wait) == (1.25, 1, 0)
    np.testing.assert_array_equal(fresh.best_weights[1], np.eye(2))
    assert later.history == [(0, 1.5), (1, 1.25), (2, 1.1)]
    other = ResumableEarlyStopping(tmp_path / "state", patience=3)
    other.on_train_begin()
    other.on_epoch_begin(3)
    assert (other.best, other.wait) == (1.0, 5)
    untouched = ResumableEarlyStopping(tmp_path / "state", patience=3)
    untouched.on_train_begin()
    untouched.on_epoch_begin(5)  # no state of epoch 4: a fresh selection
    assert untouched.best_weights is None and untouched.wait == 0


def test_two_backups_of_epochs_of_one_parity_keep_the_state_of_the_earlier(tmp_path):
    """Backups are spaced in time, so two in a row can be of epochs 1 and 3: the state of epoch
    3 goes to the other file than epoch 1's, and a kill before epoch 3's backup (which leaves
    the backup at epoch 1) still finds epoch 1's state."""
    from avdgp.training.best_epoch import ResumableEarlyStopping

    stopper = ResumableEarlyStopping(tmp_path / "state", patience=3)
    stopper.best, stopper.best_epoch, stopper.wait, stopper.stopped_epoch = 1.25, 1, 0, 0
    stopper.keep_state(1)
    stopper.best, stopper.best_epoch = 1.0, 3
    stopper.keep_state(3)  # killed before the backup of epoch 3
    resumed = ResumableEarlyStopping(tmp_path / "state", patience=3)
    resumed.on_train_begin()
    resumed.on_epoch_begin(2)  # the backup holds epoch 1
    assert (resumed.best, resumed.best_epoch) == (1.25, 1)
    resumed.best_epoch = 2
    resumed.keep_state(2)  # replaces epoch 3's file, not the restored one
    again = ResumableEarlyStopping(tmp_path / "state", patience=3)
    again.on_train_begin()
    again.on_epoch_begin(2)
    assert again.best_epoch == 1


def test_backups_are_spaced_by_the_interval_and_the_last_epoch_is_always_backed_up(
    tmp_path, monkeypatch
):
    """With a 10 s interval and epochs of 4 s (a fake clock), the backup is written after
    epochs 3 and 6 and after the last, 7, and each time the companions keep their state
    first."""
    from types import SimpleNamespace

    from avdgp.training import fit as fit_module
    from avdgp.training.fit import KeptBackup

    clock = [0.0]
    monkeypatch.setattr(fit_module, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    kept, seen = [], []

    class Companion:
        def keep_state(self, epoch):
            kept.append(epoch)

    class Tick(tf_keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            clock[0] += 4.0

    class Spy(tf_keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen.append(backup.backed_up_epoch)

    backup = KeptBackup(tmp_path / "backup", 10.0, (Companion(),))
    model = tf_keras.Sequential([tf_keras.layers.Dense(1, input_shape=(2,))])
    model.compile(tf_keras.optimizers.Adam(0.1), "mse")
    x = np.random.default_rng(0).normal(size=(16, 2))
    model.fit(x, x[:, :1], epochs=7, batch_size=8, verbose=0, callbacks=[Tick(), backup, Spy()])
    assert kept == [2, 5, 6]
    assert seen == [None, None, 2, 2, 2, 5, 6]


@pytest.mark.parametrize("many_workers", [False, True])
def test_multi_worker_training_backs_up_every_epoch(tmp_path, monkeypatch, many_workers):
    """Workers decide alike only by epochs (no shared clock): under a multi-worker strategy
    the backup ignores the interval; otherwise it keeps the config's."""
    from types import SimpleNamespace

    from avdgp.training import fit as fit_module

    class MultiWorker:  # stands for tf.distribute.MultiWorkerMirroredStrategy
        pass

    monkeypatch.setattr(fit_module.tf.distribute, "MultiWorkerMirroredStrategy", MultiWorker)
    seen = {}

    def fit(data, epochs, verbose, callbacks):
        seen["backup"] = callbacks[-1]

    strategy = MultiWorker() if many_workers else tf.distribute.get_strategy()
    model = SimpleNamespace(distribute_strategy=strategy, fit=fit)
    built = SimpleNamespace(model=model, label="m")
    config = TrainConfig(epochs=2, backup_interval=12.0)
    fit_module._fit_reporting_divergence(built, None, config, None, (), tmp_path / "backup")
    assert isinstance(seen["backup"], KeptBackup)
    assert seen["backup"].interval == (0.0 if many_workers else 12.0)


# ------------------------------------------------------------ a kill after training
class _Scores(tf_keras.callbacks.Callback):
    """A validation curve that is best at epoch 1, in the logs as ``score``."""

    values = [3.0, 2.0, 2.5, 2.6, 2.7, 2.8]

    def __init__(self):
        super().__init__()
        self.history = []

    def on_epoch_end(self, epoch, logs=None):
        logs["score"] = self.values[epoch]
        self.history.append((epoch, self.values[epoch]))


def test_a_finished_backup_resumes_with_no_epoch_left(tmp_path):
    """``KeptBackup`` keeps its backup after ``fit`` and marks the epoch of an early stop as
    the last: fitting again (a kill before the run kept its result) runs no epoch, and the
    progress and the selection take their state from beside the backup, so the second fit
    ends as the first did: the selected epoch's weights, its curve and the epochs' record."""
    from avdgp.training.best_epoch import ResumableEarlyStopping
    from avdgp.training.fit import KeptBackup

    x = np.random.default_rng(0).normal(size=(32, 2))

    def fit():
        tf_keras.utils.set_random_seed(0)
        model = tf_keras.Sequential([tf_keras.layers.Dense(1, input_shape=(2,))])
        model.compile(tf_keras.optimizers.Adam(0.1), "mse")
        progress = EpochProgress("m", stream=None, state_file=tmp_path / "progress.json")
        scores = _Scores()
        stopper = ResumableEarlyStopping(
            tmp_path / "state", curve=scores, monitor="score", patience=1,
            restore_best_weights=True,
        )  # fmt: skip
        callbacks = [progress, scores, stopper, KeptBackup(tmp_path / "backup", 0, (stopper,))]
        model.fit(x, x[:, :1], epochs=6, batch_size=8, verbose=0, callbacks=callbacks)
        return model, progress, scores, stopper

    model, progress, scores, stopper = fit()
    assert stopper.stopped_epoch == 2 and len(progress.seconds) == 3  # stopped early
    again, again_progress, again_scores, again_stopper = fit()
    assert again_progress.seconds == progress.seconds  # no epoch ran: the first fit's record
    assert (again_progress.losses, again_progress.first_epoch) == (progress.losses, 0)
    assert (again_stopper.best_epoch, again_stopper.stopped_epoch) == (1, 2)
    assert again_scores.history == scores.history
    for mine, theirs in zip(again.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(mine, theirs)  # epoch 1's, not the backup's epoch 2
    assert EpochProgress.finished(tmp_path / "progress.json")


def _small_fit(data: Path, save: Path, *more: str) -> list[str]:
    return [
        "fit", data, "--rule", "ar2", "--layers", "2", "--hidden-dims", "2", "--inducing", "3,3",
        "--points", "4", "--epochs", "3", "--batch-size", "20", "--seed", "3", "--save", save,
        *more,
    ]  # fmt: skip


def _same_result(tmp_path: Path, full: str, continued: str) -> None:
    """The runs in ``tmp_path / full`` and ``tmp_path / continued`` saved the same scores,
    selection, weights and optimizer state."""

    def result(folder: str) -> dict:
        return json.loads((tmp_path / folder / "run.json").read_text())["result"]

    for key in ("test", "final_train_loss", "stopped_epoch", "best_epoch", "val_nll_curve"):
        assert result(continued)[key] == result(full)[key], key
    reloaded = {
        folder: gpflux_avdgp.load_model(tmp_path / folder / "model.keras")
        for folder in (full, continued)
    }
    for mine, theirs in zip(reloaded[continued].variables, reloaded[full].variables):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    for mine, theirs in zip(
        reloaded[continued].optimizer.variables(), reloaded[full].optimizer.variables()
    ):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    leftovers = {"backup", "best_epoch", "progress.json"} & {
        path.name for path in (tmp_path / continued).iterdir()
    }
    assert not leftovers  # removed once run.json was written


def _kill_after_training(capsys, monkeypatch, data: Path, save: Path, target, name: str):
    """Run ``avdgp fit`` with ``target.name`` raising as a kill would there."""

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(target, name, killed)
    assert run_cli(capsys, _small_fit(data, save))[0] != 0  # main reports it
    monkeypatch.undo()
    assert any((save / "backup").iterdir())  # the backup outlives training
    assert not (save / "run.json").exists()


@pytest.fixture
def small_csv(tmp_path, rng) -> Path:
    x = rng.normal(size=(120, 2))
    data = tmp_path / "data.csv"
    np.savetxt(data, np.column_stack([x, np.sin(x[:, 0])]), delimiter=",", header="a,b,y",
               comments="")  # fmt: skip
    return data


@pytest.mark.slow  # three fits through the command line
def test_a_run_stopped_while_saving_resumes_without_training(
    capsys, tmp_path, small_csv, monkeypatch
):
    """Issue 47: training ended, then the final save failed (a kill, a full disk): the rerun
    resumes from the backup with no epoch left, trains none, and saves the uninterrupted
    run's result."""
    from avdgp.training import skeleton

    assert run_cli(capsys, _small_fit(small_csv, tmp_path / "full"))[0] == 0
    _kill_after_training(capsys, monkeypatch, small_csv, tmp_path / "run", skeleton, "save_run")
    status, out, err = run_cli(capsys, _small_fit(small_csv, tmp_path / "run"))
    assert status == 0, err
    assert "had finished training; scoring and saving it" in err
    assert "epoch 1/3" not in err and "epoch 3/3" not in err
    _same_result(tmp_path, "full", "run")


@pytest.mark.slow  # two fits through the command line
def test_a_run_stopped_right_after_its_last_backup_resumes_without_training(
    capsys, tmp_path, small_csv, monkeypatch
):
    """Stopped after the last epoch's backup, before any callback's end of training (the
    best epoch's weights not yet restored, the epochs' record not marked finished): the rerun
    trains no epoch, restores the selected epoch from its state, and saves the uninterrupted
    run's result (it was refused before, and earlier still it trained again from epoch 0)."""
    assert run_cli(capsys, _small_fit(small_csv, tmp_path / "full"))[0] == 0
    _kill_after_training(capsys, monkeypatch, small_csv, tmp_path / "run", EpochProgress,
                         "on_train_end")  # fmt: skip
    status, out, err = run_cli(capsys, _small_fit(small_csv, tmp_path / "run"))
    assert status == 0, err
    assert "resuming the interrupted run" in err and not re.search(r"epoch \d+/3", err)
    _same_result(tmp_path, "full", "run")
