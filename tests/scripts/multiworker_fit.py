"""Train small AVDGPs on one device, or as one worker of a MultiWorkerMirroredStrategy cluster.

    python multiworker_fit.py OUT.json RULES [--csv-dir DIR]

``RULES`` is comma-separated (e.g. ``ar2p,ar2``). With ``TF_CONFIG`` set this process is one
worker of the cluster it describes (``avdgp.training.distribute.strategy_from_name
("multiworker")``, created first, before TensorFlow runs anything); without it, it trains on
one device with no strategy. OUT.json receives, per rule, the epoch losses and the final
float weights from ``avdgp.training.fit_model`` (3 epochs, global batch 40,
the runner's own data pipeline), and how the data were split:

* ``replicas``: ``[replica id, replicas in sync]`` as the layers see them;
* ``rows``: the rows of every global batch of ``epoch_shuffled_batches`` (11 rows, batches of
  5) that this worker's replica got, through ``shard_global_batches``;
* ``files_auto`` / ``files_sharded``: the same for two CSV files read with ``TextLineDataset``
  under tf.data's default ``AUTO`` policy and under ``shard_global_batches`` (with
  ``--csv-dir``, a folder holding ``part0.csv`` and ``part1.csv``).

Used by tests/application/training/test_multiworker.py; the test starts the workers and the
single-device run.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["CUDA_VISIBLE_DEVICES"] = ""

from avdgp.training.distribute import strategy_from_name  # noqa: E402

# MultiWorkerMirroredStrategy must exist before TensorFlow runs an operation.
STRATEGY = strategy_from_name("multiworker") if os.environ.get("TF_CONFIG") else None

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from gpflow.keras import tf_keras  # noqa: E402

from avdgp.data.batching import epoch_shuffled_batches  # noqa: E402
from avdgp.training import (  # noqa: E402
    TrainConfig,
    fit_model,
    float_type,  # noqa: E402
)
from avdgp.training.distribute import shard_global_batches  # noqa: E402
from avdgp.zoo import ModelSpec, build_model  # noqa: E402
from gpflux_avdgp.layers.base import _replica_position  # noqa: E402

ROWS, BATCH, EPOCHS = 200, 40, 3


def train(rule: str) -> dict:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(ROWS, 2))
    y = np.sin(x[:, :1]) + 0.1 * rng.normal(size=(ROWS, 1))
    spec = ModelSpec(
        model="avdgp", rule=rule, num_layers=2, hidden_dims=[2], num_inducing=[4, 3],
        num_points=4, seed=1,
    )  # fmt: skip
    config = TrainConfig.from_preset(
        "paper", epochs=EPOCHS, batch_size=BATCH, learning_rate=0.02, seed=0
    )
    tf_keras.backend.clear_session()
    tf_keras.utils.set_random_seed(0)
    with float_type("float64"):
        if STRATEGY is None:
            built = build_model(spec, 2, ROWS, inputs=x)
        else:
            with STRATEGY.scope():
                built = build_model(spec, 2, ROWS, inputs=x)
        progress = fit_model(built, x, y, config, strategy=STRATEGY)
    weights = [w.tolist() for w in built.model.get_weights() if w.dtype.kind == "f"]
    return {"losses": progress.losses, "weights": weights}


def local_rows(dataset: tf.data.Dataset) -> list:
    """The first column of this worker's part of every global batch, per local replica."""
    if STRATEGY is None:
        return [[batch[:, 0].numpy().tolist()] for batch in dataset]
    rows = []
    for batch in STRATEGY.experimental_distribute_dataset(dataset):
        parts = STRATEGY.experimental_local_results(batch)
        rows.append([part[:, 0].numpy().tolist() for part in parts])
    return rows


def split_checks(csv_dir: str) -> dict:
    counter = tf.Variable(0, dtype=tf.int64)
    table = np.arange(11, dtype=np.float64)[:, None]
    batches = epoch_shuffled_batches(table, table, 5, seed=0, step_counter=counter)
    result = {"rows": local_rows(shard_global_batches(batches.map(lambda x, y: x)))}
    if STRATEGY is None:
        positions = [[0, 1]]
    else:
        positions = STRATEGY.experimental_local_results(
            STRATEGY.run(lambda: tf.stack(_replica_position()))
        )
    result["replicas"] = [np.asarray(p).tolist() for p in positions]
    if csv_dir:
        files = [os.path.join(csv_dir, f"part{i}.csv") for i in range(2)]
        lines = tf.data.TextLineDataset(files).map(
            lambda line: tf.strings.to_number(tf.strings.split(line, ","), tf.float64)
        )
        result["files_auto"] = local_rows(lines.batch(4))
        result["files_sharded"] = local_rows(shard_global_batches(lines.batch(4)))
    return result


def main() -> None:
    out, rules = sys.argv[1], sys.argv[2].split(",")
    csv_dir = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--csv-dir" else ""
    result = {"splits": split_checks(csv_dir)}
    for rule in rules:
        result[rule] = train(rule)
    with open(out, "w") as stream:
        json.dump(result, stream)


if __name__ == "__main__":
    main()
