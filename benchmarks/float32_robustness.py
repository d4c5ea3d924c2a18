"""Does float32 training of a 3-layer AVDGP ever produce a NaN loss or a failed Cholesky?

Trains the paper's 3-layer AVDGP (dims 16/4/1, M 8/4/4, S 32, batch 100, Adam 0.005) in
float32 on standardised UCI splits for several seeds and records, per run, whether every
training batch had a finite loss. Writes one JSON line per run.

    python benchmarks/float32_robustness.py --datasets elevators,kin40k,pol,concrete,energy \
        --seeds 0,1,2 --epochs 5 --out benchmarks/results/float32_robustness.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from avdgp.data import Standardizer, load_dataset, split_dataset
from avdgp.training import TrainConfig, float_type
from avdgp.zoo import ModelSpec, build_model


class BatchLosses(tf_keras.callbacks.Callback):
    """Counts non-finite per-batch losses (running epoch means, so the first one sticks)."""

    def __init__(self):
        super().__init__()
        self.first_bad = None
        self.batches = 0

    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1
        loss = float((logs or {}).get("loss", math.nan))
        if not math.isfinite(loss) and self.first_bad is None:
            self.first_bad = self.batches
            self.model.stop_training = True


def one_run(data_root: Path, name: str, seed: int, epochs: int, rule: str) -> dict:
    dataset = load_dataset(data_root / name)
    split = split_dataset(dataset, seed=seed, split=0)
    split = Standardizer.fit(split.x_train, split.y_train).transform_split(split)
    config = TrainConfig.from_preset("paper", epochs=epochs, seed=seed, dtype="float32")
    tf_keras.backend.clear_session()
    tf_keras.utils.set_random_seed(seed)
    record = {"dataset": name, "seed": seed, "epochs": epochs, "rule": rule}
    start = time.perf_counter()
    with float_type("float32"):
        spec = ModelSpec(model="avdgp", rule=rule, num_layers=3, seed=seed)
        built = build_model(spec, split.x_train.shape[1], len(split.x_train))
        model = built.model
        model.compile(tf_keras.optimizers.Adam(config.learning_rate), loss=built.loss)
        data = tf.data.Dataset.from_tensor_slices(
            (split.x_train.astype(np.float32), split.y_train.astype(np.float32))
        )
        data = data.shuffle(len(split.x_train), seed=seed).batch(config.batch_size)
        watcher = BatchLosses()
        try:
            history = model.fit(data, epochs=epochs, verbose=0, callbacks=[watcher])
            record["losses"] = [float(v) for v in history.history["loss"]]
            record["outcome"] = "nan" if watcher.first_bad else "finite"
            record["first_bad_batch"] = watcher.first_bad
        except tf.errors.InvalidArgumentError as error:
            record["outcome"] = "error"
            record["error"] = str(error).splitlines()[0][:200]
            record["first_bad_batch"] = watcher.batches + 1
    record["batches"] = watcher.batches
    record["seconds"] = time.perf_counter() - start
    return record


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="elevators,kin40k,pol,concrete,energy")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--rule", default="ar2p")
    parser.add_argument("--out", default="benchmarks/results/float32_robustness.jsonl")
    parser.add_argument(
        "--data-root", default=os.environ.get("AVDGP_DATA_ROOT", "../shared/data/uci")
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for name in args.datasets.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            record = one_run(Path(args.data_root), name, seed, args.epochs, args.rule)
            print(json.dumps(record), flush=True)
            with out.open("a") as stream:
                stream.write(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
