"""Train the same small AVDGP on one device and under MirroredStrategy on two logical CPUs.

    python mirrored_fit.py RULE [guard|guard-every-2|guard-every-2-variance|functional]  ->
    prints one JSON line: losses and weights of both runs (``guard``: the model has an input
    guard, trained in every step or every second step, without its variance gate or with it;
    ``functional``: a Functional model of the same layers, whose anchors are placed in the
    first step, not by ``place_anchors`` before ``fit``)

Used by tests/application/training/test_distributed.py (logical devices must be set before
TensorFlow starts, so this runs in its own process).
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["CUDA_VISIBLE_DEVICES"] = ""

import tensorflow as tf  # noqa: E402

CPU = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(CPU, [tf.config.LogicalDeviceConfiguration()] * 2)

import gpflow  # noqa: E402
import numpy as np  # noqa: E402
from gpflow.keras import tf_keras  # noqa: E402

import gpflux_avdgp  # noqa: E402


def train(strategy: tf.distribute.Strategy, rule: str, option: str) -> tuple[list, list]:
    guard = {
        "guard": True,
        "guard-every-2": {"train_every": 2, "variance_gate": False},
        "guard-every-2-variance": {"train_every": 2},
    }.get(option, False)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 2))
    y = np.sin(x[:, :1]) + 0.1 * rng.normal(size=(200, 1))
    tf_keras.utils.set_random_seed(0)
    with strategy.scope():
        likelihood = gpflow.likelihoods.Gaussian(0.1)
        model = gpflux_avdgp.build_avdgp(
            2, [2, 1], [4, 3], 200, likelihood, rule=rule, num_points=4, seed=1, guard=guard
        )
        if option == "functional":
            inputs = tf_keras.Input((2,), dtype=tf.float64)
            outputs = inputs
            for layer in model.layers:
                outputs = layer(outputs)
            model = tf_keras.Model(inputs, outputs)
        # SGD with a guard: Adam's steps would hide a gradient scaled by the replicas
        optimizer = tf_keras.optimizers.SGD(0.02) if guard else tf_keras.optimizers.Adam(0.02)
        model.compile(optimizer, loss=gpflux_avdgp.AVDGPLoss(likelihood))
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(40)  # global batch 40
    history = model.fit(data, epochs=3, verbose=0)
    weights = [w.tolist() for w in model.get_weights() if w.dtype.kind == "f"]
    return history.history["loss"], weights


def main() -> None:
    rule, option = sys.argv[1], (sys.argv[2:] or [""])[0]
    single = train(tf.distribute.OneDeviceStrategy("/cpu:0"), rule, option)
    mirrored = train(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]), rule, option)
    print(json.dumps({"single": single, "mirrored": mirrored}))


if __name__ == "__main__":
    main()
