"""Train the same small AVDGP on one GPU without a strategy and under MirroredStrategy over
every visible GPU (``strategy_from_name("mirrored")``), through the runner's ``fit_model``.

    python gpu_mirrored_fit.py RULE  ->  prints one JSON line: replicas, and the losses and
                                         weights of both runs

Used by tests/application/training/test_distributed.py when TensorFlow sees a GPU. The global
batch is 8 rows per GPU, so every batch splits evenly.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from gpflow.keras import tf_keras  # noqa: E402

from avdgp.training import (
    TrainConfig,
    fit_model,
    float_type,  # noqa: E402
)
from avdgp.training.distribute import strategy_from_name  # noqa: E402
from avdgp.zoo import ModelSpec, build_model  # noqa: E402


def train(strategy, rule: str, batch: int) -> dict:
    rows = 5 * batch
    rng = np.random.default_rng(0)
    x = rng.normal(size=(rows, 2))
    y = np.sin(x[:, :1]) + 0.1 * rng.normal(size=(rows, 1))
    spec = ModelSpec(
        model="avdgp", rule=rule, num_layers=2, hidden_dims=[2], num_inducing=[4, 3],
        num_points=4, seed=1,
    )  # fmt: skip
    config = TrainConfig.from_preset(
        "paper", epochs=3, batch_size=batch, learning_rate=0.02, seed=0
    )
    tf_keras.backend.clear_session()
    tf_keras.utils.set_random_seed(0)
    with float_type("float64"):
        if strategy is None:
            built = build_model(spec, 2, rows, inputs=x)
        else:
            with strategy.scope():
                built = build_model(spec, 2, rows, inputs=x)
        progress = fit_model(built, x, y, config, strategy=strategy)
    weights = [w.tolist() for w in built.model.get_weights() if w.dtype.kind == "f"]
    return {"losses": progress.losses, "weights": weights}


def main() -> None:
    rule = sys.argv[1]
    strategy = strategy_from_name("mirrored")
    gpus = tf.config.list_logical_devices("GPU")
    batch = 8 * len(gpus)
    with tf.device(gpus[0].name):
        single = train(None, rule, batch)
    mirrored = train(strategy, rule, batch)
    devices = list(strategy.extended.worker_devices)
    print(json.dumps({"replicas": strategy.num_replicas_in_sync, "devices": devices,
                      "single": single, "mirrored": mirrored}))  # fmt: skip


if __name__ == "__main__":
    main()
