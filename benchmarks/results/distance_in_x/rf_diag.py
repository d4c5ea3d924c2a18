"""Per-layer reach, excess and gate in the gap and in the data (prototype diagnosis)."""

import sys

import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from avdgp.experiments.uncertainty.problems import GAP, function_split
from avdgp.training import TrainConfig, fit_model, float_type
from avdgp.training.fit import best_epoch_callbacks
from avdgp.zoo import ModelSpec, build_model
from gpflux_avdgp.core.anchors import anchor_spacing
from gpflux_avdgp.prediction import predict_mixture

problem, seed, design = sys.argv[1], int(sys.argv[2]), sys.argv[3]
split = function_split(problem, seed)
config = TrainConfig.from_preset("default", epochs=300, seed=seed, learning_rate=0.01)
with float_type(config.dtype):
    tf_keras.utils.set_random_seed(seed)
    built = build_model(
        ModelSpec(model="avdgp", rule="ar2p", seed=seed, design=design),
        1,
        len(split.x_train),
        inputs=split.x_train,
    )
    fit_model(
        built,
        split.x_train,
        split.y_train,
        config,
        callbacks=best_epoch_callbacks(built, split, config),
    )
    tf.config.run_functions_eagerly(True)
    gps = [layer for layer in built.model.layers if hasattr(layer, "num_anchors")]
    seen = {}
    for layer in gps:
        orig = layer._anchor_weight

        def wrap(kernel, h, chol, training, spread=None, _l=layer, _o=orig):
            w = _o(kernel, h, chol, training, spread)
            seen[_l.name] = (w.numpy(), getattr(_l, "_excess", tf.zeros_like(w)).numpy())
            return w

        layer._anchor_weight = wrap
    for label, x in (
        ("gap", np.linspace(GAP[0], GAP[1], 25)[:, None]),
        ("data", split.x_test[:200]),
    ):
        predict_mixture(built.model, x, likelihood=built.likelihood)
        for layer in gps:
            w, e = seen[layer.name]
            n = len(x)
            w, e = w[:n], e[:n]
            print(
                f"{problem} {seed} {label} {layer.name} "
                f"reach {float(layer.anchor_reach.numpy()):.3f} "
                f"spacing {float(anchor_spacing(layer.anchors)):.4f} "
                f"gate min/med {w.min():.2f}/{np.median(w):.2f} "
                f"excess max/med {e.max():.2f}/{np.median(e):.2f}"
            )
    print("gap x", np.round(np.linspace(GAP[0], GAP[1], 25), 2))
    print("last gate", np.round(seen[gps[-1].name][0][:25], 2))
    print("first excess", np.round(seen[gps[0].name][1][:25], 2))
