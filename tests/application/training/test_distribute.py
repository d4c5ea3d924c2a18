"""In-process tests of :mod:`avdgp.training.distribute`: TF_CONFIG checks, strategy
names, where workers write, the DATA sharding option and the uneven-batch rules.

Training across two workers is in ``test_multiworker.py`` (subprocesses); across two logical
CPUs in ``test_distributed.py``.
"""

from __future__ import annotations

import json
import tempfile
from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf

from avdgp.training.distribute import (
    STRATEGY_NAMES,
    TFConfigError,
    configure_cpu_devices,
    is_chief,
    read_tf_config,
    shard_global_batches,
    strategy_from_name,
    uneven_batches_message,
    worker_name,
    worker_save_dir,
)

CLUSTER = {"worker": ["127.0.0.1:2222", "127.0.0.1:2223"]}


def tf_config(**overrides) -> dict:
    config = {"cluster": CLUSTER, "task": {"type": "worker", "index": 1}}
    config.update(overrides)
    return {"TF_CONFIG": json.dumps(config)}


# ---------------------------------------------------------------------------------------------
# TF_CONFIG
# ---------------------------------------------------------------------------------------------


def test_read_tf_config_returns_the_cluster_and_task():
    config = read_tf_config(tf_config())
    assert config["cluster"] == CLUSTER
    assert config["task"] == {"type": "worker", "index": 1}
    chief = {"chief": ["a:1"], "worker": ["b:2"]}
    assert read_tf_config(tf_config(cluster=chief, task={"type": "chief", "index": 0}))


@pytest.mark.parametrize(
    "environ, problem",
    [
        ({}, "TF_CONFIG: not set"),
        ({"TF_CONFIG": "  "}, "TF_CONFIG: not set"),
        ({"TF_CONFIG": "{'cluster': 1"}, "TF_CONFIG: not valid JSON"),
        ({"TF_CONFIG": "[1, 2]"}, "expected a JSON object, got list"),
        (tf_config(cluster={}), "no 'cluster' object"),
        (
            tf_config(cluster={"ps": ["a:1"], "worker": ["b:2"]}),
            "cluster job 'ps' is not supported",
        ),
        (tf_config(cluster={"worker": []}), "cluster job 'worker': expected a non-empty list"),
        (tf_config(cluster={"worker": ["localhost"]}), "expected a non-empty list of 'host:port'"),
        (tf_config(cluster={"chief": ["a:1", "b:2"]}), "at most one chief"),
        (tf_config(task=None), "no 'task' object"),
        (tf_config(task={"type": "chief", "index": 0}), "task type 'chief' is not a job"),
        (tf_config(task={"type": "worker", "index": 2}), r"task index 2 is not in 0..1"),
        (tf_config(task={"type": "worker", "index": True}), r"task index True is not in 0..1"),
    ],
)
def test_read_tf_config_explains_what_is_wrong_and_what_it_must_hold(environ, problem):
    with pytest.raises(TFConfigError, match=problem) as caught:
        read_tf_config(environ)
    message = str(caught.value)
    assert "needs the environment variable TF_CONFIG on every worker" in message
    example = message.split("TF_CONFIG='")[1].split("'")[0]
    assert json.loads(example)["task"] == {"type": "worker", "index": 0}  # a usable example
    assert isinstance(caught.value, ValueError)


def test_read_tf_config_reads_the_environment_by_default(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", tf_config()["TF_CONFIG"])
    assert read_tf_config()["task"]["index"] == 1
    monkeypatch.delenv("TF_CONFIG")
    with pytest.raises(TFConfigError, match="not set"):
        read_tf_config()


# ---------------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------------


def test_strategy_names():
    assert STRATEGY_NAMES == ("default", "mirrored", "multiworker")
    with pytest.raises(ValueError, match="strategy: expected one of default, mirrored, multi"):
        strategy_from_name("tpu")
    assert strategy_from_name("default") is tf.distribute.get_strategy()


def test_mirrored_uses_every_logical_cpu_without_gpus():
    assert not tf.config.list_logical_devices("GPU")  # CUDA_VISIBLE_DEVICES="" in the tests
    strategy = strategy_from_name("mirrored")
    assert isinstance(strategy, tf.distribute.MirroredStrategy)
    assert strategy.num_replicas_in_sync == len(tf.config.list_logical_devices("CPU"))
    assert is_chief(strategy) and worker_name(strategy) == ""


def test_multiworker_needs_tf_config_before_anything_else(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(TFConfigError, match="TF_CONFIG: not set"):
        strategy_from_name("multiworker")
    monkeypatch.setenv("TF_CONFIG", tf_config()["TF_CONFIG"])
    tf.constant(1.0) + 1.0  # TensorFlow has run operations in this process
    with pytest.raises(ValueError, match="create it at program start, before TensorFlow runs"):
        strategy_from_name("multiworker")


def test_cpu_devices_are_configured_at_program_start_only():
    with pytest.raises(ValueError, match="count: expected a positive integer, got 0"):
        configure_cpu_devices(0)
    tf.config.list_logical_devices()  # initialises the devices
    with pytest.raises(ValueError, match="cannot split the CPU into 3 logical devices"):
        configure_cpu_devices(3)


# ---------------------------------------------------------------------------------------------
# Who writes where
# ---------------------------------------------------------------------------------------------


def fake_worker(task_type: str, task_id: int, chief: bool) -> SimpleNamespace:
    """The attributes of a MultiWorkerMirroredStrategy that the helpers read."""
    cluster = SimpleNamespace(as_dict=lambda: {"worker": ["a:1", "b:2", "c:3"]})
    return SimpleNamespace(
        extended=SimpleNamespace(should_checkpoint=chief),
        cluster_resolver=SimpleNamespace(
            task_type=task_type, task_id=task_id, cluster_spec=lambda: cluster
        ),
    )


def test_the_chief_writes_to_the_folder(tmp_path):
    target = tmp_path / "run" / "deeper"
    with worker_save_dir(target, tf.distribute.get_strategy()) as directory:
        assert directory == target and directory.is_dir()
    chief = fake_worker("worker", 0, chief=True)
    assert is_chief(chief) and worker_name(chief) == "worker 0 of 3"
    with worker_save_dir(tmp_path / "other", chief) as directory:
        assert directory == tmp_path / "other"
    assert directory.is_dir()


def test_other_workers_write_to_a_temporary_folder_that_is_removed(tmp_path, monkeypatch):
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    worker = fake_worker("worker", 2, chief=False)
    assert not is_chief(worker) and worker_name(worker) == "worker 2 of 3"
    target = tmp_path / "shared"
    with worker_save_dir(target, worker) as directory:
        assert directory.parent == tmp_path / "tmp" and directory.name.startswith("avdgp-worker2")
        (directory / "weights").write_text("x")
    assert not directory.exists() and not target.exists()
    with pytest.raises(RuntimeError, match="boom"):
        with worker_save_dir(target, worker) as directory:
            raise RuntimeError("boom")
    assert not directory.exists()
    assert list((tmp_path / "tmp").iterdir()) == []


# ---------------------------------------------------------------------------------------------
# Batches
# ---------------------------------------------------------------------------------------------


def test_shard_global_batches_sets_data_sharding_and_keeps_the_batches():
    dataset = tf.data.Dataset.range(10).batch(4)
    assert dataset.options().experimental_distribute.auto_shard_policy == (
        tf.data.experimental.AutoShardPolicy.AUTO
    )
    sharded = shard_global_batches(dataset)
    assert sharded.options().experimental_distribute.auto_shard_policy == (
        tf.data.experimental.AutoShardPolicy.DATA
    )
    assert [b.numpy().tolist() for b in sharded] == [b.numpy().tolist() for b in dataset]


@pytest.mark.parametrize(
    "rows, batch, replicas",
    [(200, 40, 2), (200, 40, 1), (201, 40, 1), (160, 40, 4), (90, 40, 2), (30, 40, 2)],
)
def test_even_batches_need_no_message(rows, batch, replicas):
    assert uneven_batches_message(rows, batch, replicas) is None


def test_uneven_batches_are_named():
    message = uneven_batches_message(200, 45, 2)  # 45, 45, 45, 45, 20
    assert message.startswith("batches of 45 rows do not split evenly over 2 replicas")
    message = uneven_batches_message(205, 40, 2)  # 40 x 5, then 5
    assert message.startswith("batches of 5 rows do not split")
    assert "(205 mod 40 = 5) multiples of 2" in message
    message = uneven_batches_message(203, 40, 2)
    assert message.startswith("batches of 3 rows")
    assert uneven_batches_message(21, 40, 2).startswith("batches of 21 rows")  # one batch


@pytest.mark.parametrize(
    "rows, batch, replicas, smallest", [(201, 40, 2, 1), (200, 1, 2, 1), (3, 40, 4, 3)]
)
def test_a_replica_without_rows_is_refused(rows, batch, replicas, smallest):
    with pytest.raises(ValueError, match=f"batch_size: a batch of {smallest} rows cannot be"):
        uneven_batches_message(rows, batch, replicas)


# ---------------------------------------------------------------------------------------------
# fit_model with a strategy (one device here; two replicas in the subprocess tests)
# ---------------------------------------------------------------------------------------------


def test_fit_model_refuses_a_model_built_outside_the_strategy(rng):
    from avdgp.training import TrainConfig, fit_model
    from avdgp.zoo import ModelSpec, build_model

    spec = ModelSpec(model="avdgp", rule="ar2p", num_layers=1, num_inducing=[3], num_points=2)
    x, y = rng.normal(size=(8, 2)), rng.normal(size=(8, 1))
    built = build_model(spec, 2, 8)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with pytest.raises(ValueError, match="strategy: the model was built outside this strategy's"):
        fit_model(
            built, x, y, TrainConfig.from_preset("paper", epochs=1, batch_size=4), strategy=strategy
        )


@pytest.mark.slow
def test_fit_model_in_a_strategy_scope_trains_like_no_strategy(rng):
    from gpflow.keras import tf_keras

    from avdgp.training import TrainConfig, fit_model, float_type
    from avdgp.zoo import ModelSpec, build_model

    spec = ModelSpec(
        model="avdgp", rule="ar2", num_layers=2, hidden_dims=[2], num_inducing=[3, 3], num_points=3
    )
    x, y = rng.normal(size=(12, 2)), rng.normal(size=(12, 1))
    config = TrainConfig.from_preset("paper", epochs=2, batch_size=4, learning_rate=0.01)
    results = []
    for strategy in (None, tf.distribute.MirroredStrategy(["/cpu:0"])):
        tf_keras.backend.clear_session()
        tf_keras.utils.set_random_seed(0)
        with float_type("float64"):
            if strategy is None:
                built = build_model(spec, 2, 12)
            else:
                with strategy.scope():
                    built = build_model(spec, 2, 12)
            progress = fit_model(built, x, y, config, strategy=strategy)
        results.append((progress.losses, built.model.get_weights()))
    (losses, weights), (mirrored_losses, mirrored_weights) = results
    np.testing.assert_allclose(mirrored_losses, losses, rtol=1e-6)
    for ours, theirs in zip(mirrored_weights, weights):
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)
