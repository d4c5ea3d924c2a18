"""Cost of the model's output convention per training epoch and per step, in every Keras model
type (docs/design.md, "What the model outputs to Keras").

The paper's 3-layer AR2P model (M = 8/4/4, S = 32, units 16/4/1) on 5000 synthetic rows,
batch 100, Adam; one process, each configuration trained for 1 warm-up epoch (tracing) then
timed over ``--epochs`` epochs; the median epoch is reported, with the compute ops of the
traced training step (``train_step`` as one ``tf.function``; constants, variable reads,
identities, shapes and no-ops left out).

    python benchmarks/keras_model_step.py [--epochs 5]
"""

from __future__ import annotations

import argparse
import time

import gpflow
import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

import gpflux_avdgp as ga

#: Graph ops that move or describe data rather than compute (not counted).
NOT_COMPUTE = {
    "Const", "ReadVariableOp", "Identity", "IdentityN", "NoOp", "Shape", "ShapeN", "Placeholder",
    "VarHandleOp", "StopGradient", "Size", "Rank",
}  # fmt: skip


class EpochTimer(tf_keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.seconds: list[float] = []

    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(time.perf_counter() - self.start)


def build(kind: str) -> tuple[tf_keras.Model, gpflow.likelihoods.Likelihood]:
    """The paper's model as an ``AVDGPModel``, or its layers in another Keras model type."""
    likelihood = gpflow.likelihoods.Gaussian(variance=0.1)
    model = ga.build_avdgp(8, [16, 4, 1], [8, 4, 4], 5000, likelihood, seed=0)
    if kind == "AVDGPModel":
        return model, likelihood
    inputs = tf_keras.Input((8,), dtype="float64")
    if kind == "Sequential":
        return tf_keras.Sequential([inputs] + model.layers), likelihood
    outputs = inputs
    for layer in model.layers:
        outputs = layer(outputs)
    return tf_keras.Model(inputs, outputs), likelihood


def compute_ops(model: tf_keras.Model, x: np.ndarray, y: np.ndarray) -> int:
    """Compute ops of one traced training step on a batch of 100 rows."""
    step = tf.function(model.train_step)
    graph = step.get_concrete_function((tf.constant(x[:100]), tf.constant(y[:100]))).graph
    return _count(graph)


def _count(graph) -> int:
    total = 0
    for op in graph.get_operations():
        if op.type not in NOT_COMPUTE:
            total += 1
        for name in ("then_branch", "else_branch", "body", "cond", "f"):
            try:
                function = op.get_attr(name)
            except ValueError:
                continue
            inner = graph._get_function(function.name) if hasattr(function, "name") else None
            if inner is not None:
                total += _count(inner.graph)
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (5000, 8))
    y = np.sin(x[:, :1]) + 0.1 * rng.standard_normal((5000, 1))
    configurations = {
        "Sequential, AVDGPLoss": ("Sequential", []),
        "Functional, AVDGPLoss": ("Functional", []),
        "AVDGPModel, no metric": ("AVDGPModel", []),
        "AVDGPModel, 'mse'": ("AVDGPModel", ["mse"]),
        "Functional, 'mse'": ("Functional", ["mse"]),
        "AVDGPModel, MixtureNLL()": ("AVDGPModel", ["nll"]),
    }
    print("| configuration | s / epoch (median) | ratio to the first | step compute ops |")
    print("|---|---:|---:|---:|")
    baseline = None
    for label, (kind, metric_names) in configurations.items():
        tf_keras.utils.set_random_seed(0)
        model, likelihood = build(kind)
        metrics = [{"nll": ga.MixtureNLL()}.get(name, name) for name in metric_names]
        # AVDGPLoss(likelihood): the form versions before and after issue 35 both take
        model.compile(
            tf_keras.optimizers.Adam(0.005), loss=ga.AVDGPLoss(likelihood), metrics=metrics
        )
        timer = EpochTimer()
        try:
            model.fit(x, y, batch_size=100, epochs=args.epochs + 1, verbose=0, callbacks=[timer])
        except (ValueError, TypeError) as error:  # an earlier version's refusal or failure
            print(f"| {label} | fails: {str(error).splitlines()[-1][:80]} | | |", flush=True)
            continue
        seconds = float(np.median(timer.seconds[1:]))
        baseline = baseline or seconds
        ops = compute_ops(model, x, y)
        print(f"| {label} | {seconds:.2f} | {seconds / baseline:.2f} | {ops} |", flush=True)


if __name__ == "__main__":
    main()
