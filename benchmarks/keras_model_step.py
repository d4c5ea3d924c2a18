"""Cost of AVDGPModel's Keras hooks per training epoch, against a plain tf_keras.Sequential of
the same layers (docs/design.md, "What the model outputs to Keras").

The paper's 3-layer AR2P model (M = 8/4/4, S = 32, units 16/4/1) on 5000 synthetic rows,
batch 100, Adam; one process, one thread pair, each configuration trained for 1 warm-up epoch
(tracing) then timed over ``--epochs`` epochs; the median epoch is reported.

    python benchmarks/keras_model_step.py [--epochs 5]
"""

from __future__ import annotations

import argparse
import time

import gpflow
import numpy as np
from gpflow.keras import tf_keras

import gpflux_avdgp as ga


class EpochTimer(tf_keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.seconds: list[float] = []

    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(time.perf_counter() - self.start)


def build(plain: bool):
    likelihood = gpflow.likelihoods.Gaussian(variance=0.1)
    model = ga.build_avdgp(8, [16, 4, 1], [8, 4, 4], 5000, likelihood, seed=0)
    if plain:
        model = tf_keras.Sequential([tf_keras.Input((8,), dtype="float64")] + model.layers)
    return model, likelihood


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (5000, 8))
    y = np.sin(x[:, :1]) + 0.1 * rng.standard_normal((5000, 1))
    configurations = {
        "plain Sequential, AVDGPLoss": (True, []),
        "AVDGPModel, no metric": (False, []),
        "AVDGPModel, 'mse'": (False, ["mse"]),
        "AVDGPModel, MixtureNLL()": (False, ["nll"]),
        "AVDGPModel, MixtureCRPS()": (False, ["crps"]),
    }
    print("| configuration | s / epoch (median) | ratio to plain |")
    print("|---|---:|---:|")
    baseline = None
    for label, (plain, metric_names) in configurations.items():
        tf_keras.utils.set_random_seed(0)
        model, likelihood = build(plain)
        metrics = [
            {"nll": ga.MixtureNLL(), "crps": ga.MixtureCRPS()}.get(name, name)
            for name in metric_names
        ]
        loss = ga.AVDGPLoss(likelihood)
        model.compile(tf_keras.optimizers.Adam(0.005), loss=loss, metrics=metrics)
        timer = EpochTimer()
        model.fit(x, y, batch_size=100, epochs=args.epochs + 1, verbose=0, callbacks=[timer])
        seconds = float(np.median(timer.seconds[1:]))
        baseline = baseline or seconds
        print(f"| {label} | {seconds:.2f} | {seconds / baseline:.2f} |")


if __name__ == "__main__":
    main()
