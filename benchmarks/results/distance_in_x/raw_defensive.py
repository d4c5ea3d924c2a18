"""Prototype (not kept): a defensive mixture off the data. The default AVDGP, its last layer
gated by a_x (the reach gate on the raw x, K fixed anchors), and an SVGP trained on the same
split; predicted as  p = (1 - w) p_gated + w p_SVGP,  w = (1 - a_x)(1 - beta).
python raw_defensive.py PROBLEM SEED"""

import os
import sys

import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from avdgp.experiments.uncertainty.problems import (
    function_scores,
    function_split,
    hole_scores,
    hole_split,
)
from avdgp.experiments.zoo import ModelSpec, build_model
from avdgp.training import TrainConfig, fit_model, float_type
from avdgp.training.fit import best_epoch_callbacks
from gpflux_avdgp.core.anchors import nearest_anchor_distance, reach_of, reach_weight, spread_rows
from gpflux_avdgp.prediction import padded_size, predict_mixture

problem, seed = sys.argv[1], int(sys.argv[2])
split = hole_split(seed) if problem == "hole" else function_split(problem, seed)
config = TrainConfig.from_preset("default", epochs=300, seed=seed, learning_rate=0.01)
STATE = {"ax": None}


def train(spec):
    tf_keras.utils.set_random_seed(seed)
    built = build_model(spec, split.x_train.shape[1], len(split.x_train), inputs=split.x_train)
    callbacks = best_epoch_callbacks(built, split, config)
    fit_model(built, split.x_train, split.y_train, config, callbacks=callbacks)
    return built


def arrays(built, x):
    m = predict_mixture(built.model, x, likelihood=built.likelihood)
    return [m.weights, m.f_means[..., 0], m.f_variances[..., 0]] + [
        m.y_means[..., 0],
        m.y_variances[..., 0],
    ]


with float_type(config.dtype):
    dgp = train(ModelSpec(model="avdgp", rule="ar2p", seed=seed))
    svgp = train(
        ModelSpec(
            model="svgp",
            seed=seed,
            num_inducing=(int(os.environ.get("GUARD_M", "256")),),  # the SVGP's size
        )
    )
    last = [layer for layer in dgp.model.layers if hasattr(layer, "num_anchors")][-1]
    original = last._anchor_weight

    def patched(kernel, h, chol_cc, training):
        w = original(kernel, h, chol_cc, training)
        ax = STATE["ax"]
        if ax is None:
            return w
        k = int(h.shape[0]) // len(ax)
        return tf.minimum(w, tf.constant(np.repeat(ax, k), w.dtype))

    last._anchor_weight = patched
    tf.config.run_functions_eagerly(True)
    xt = tf.constant(split.x_train)
    gates = {}
    for count in (32, 128):
        anchors = spread_rows(xt, count)
        reach = reach_of(nearest_anchor_distance(xt, anchors), anchors)
        gates[count] = (anchors, reach)
        print("raw reach", count, float(reach), flush=True)

    def a_x(x, count, scale):
        anchors, reach = gates[count]
        return reach_weight(nearest_anchor_distance(tf.constant(x), anchors), reach, scale).numpy()

    def make(count, scale, beta):
        def predict(x):
            n = len(x)
            ax = a_x(x, count, scale)
            pad = padded_size(n, 1000, False)
            STATE["ax"] = np.concatenate([ax, np.ones(pad - n)])
            gated = arrays(dgp, x)
            STATE["ax"] = None
            if beta is None:
                return gated
            b = arrays(svgp, x)
            w = ((1.0 - ax) * (1.0 - beta))[:, None]
            weights = np.concatenate([gated[0] * (1 - w), b[0] * w], axis=1)
            return [weights] + [np.concatenate([p, q], axis=1) for p, q in zip(gated[1:], b[1:])]

        return predict

    for count, scale, beta in (
        (32, 0.5, None),
        (32, 0.5, 0.1),
        (32, 0.5, 0.2),
        (32, 0.5, 0.3),
        (32, 1.0, 0.2),
        (128, 0.5, None),
        (128, 0.5, 0.2),
    ):
        p = make(count, scale, beta)
        if problem == "hole":
            s = hole_scores(p, seed)
            keys = ["hole_f_coverage", "hole_nll", "hole_rmse"]
        else:
            s = function_scores(problem, p, seed)
            keys = ["gap_f_coverage", "gap_nll", "gap_rmse", "far_ratio_1", "beyond_coverage_95"]
        values = " ".join(f"{k}={s[k]:.3f}" for k in keys)
        print(f"RESULT {problem} {seed} K={count} s={scale} beta={beta} {values}", flush=True)
