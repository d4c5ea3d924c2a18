"""Prototype (not kept; run at commit d443015, see README.md):
a reach gate measured on the raw input x, applied at prediction to
the last layer only (min with its own weight). Trains the zoo design on a 1-D problem, then
scores function_scores under several gates.  python raw_gate.py PROBLEM SEED DESIGN"""

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
from avdgp.training import TrainConfig, fit_model, float_type
from avdgp.training.fit import best_epoch_callbacks
from avdgp.zoo import ModelSpec, build_model
from gpflux_avdgp.core.anchors import nearest_anchor_distance, reach_of, reach_weight, spread_rows
from gpflux_avdgp.prediction import padded_size, predict_mixture

problem, seed = sys.argv[1], int(sys.argv[2])
design = sys.argv[3] if len(sys.argv) > 3 else ""
split = hole_split(seed) if problem == "hole" else function_split(problem, seed)
config = TrainConfig.from_preset("default", epochs=300, seed=seed, learning_rate=0.01)
STATE = {"ax": None}

with float_type(config.dtype):
    tf_keras.utils.set_random_seed(seed)
    built = build_model(
        (
            ModelSpec(model="avdgp", rule="ar2p", seed=seed, design=design)
            if design
            else ModelSpec(model="avdgp", rule="ar2p", seed=seed)
        ),
        split.x_train.shape[1],
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
    gps = [layer for layer in built.model.layers if hasattr(layer, "num_anchors")]
    last = gps[-1]
    original = last._anchor_weight

    def patched(kernel, h, chol_cc, training):
        w = original(kernel, h, chol_cc, training)
        ax = STATE["ax"]
        if ax is None:
            return w
        k = int(h.shape[0]) // len(ax)
        return tf.minimum(w, tf.constant(np.repeat(ax, k), w.dtype))

    last._anchor_weight = patched
    import gpflux_avdgp.layers.amortized_gp_layer as agl

    original_revert = agl.revert_to_prior

    def revert(q_mu, q_sqrt, weight):
        mu, sq = original_revert(q_mu, q_sqrt, weight)
        if STATE.get("varonly") and q_mu.shape[-1] == 1:
            return q_mu, sq
        return mu, sq

    agl.revert_to_prior = revert
    tf.config.run_functions_eagerly(True)
    xt = tf.constant(split.x_train)
    anchors = spread_rows(xt, 32)
    reach = reach_of(nearest_anchor_distance(xt, anchors), anchors)
    print("raw reach", float(reach))

    def make_predict(scale):
        def predict(x):
            n = len(x)
            pad = padded_size(n, 1000, False)
            if scale is None:
                STATE["ax"] = None
            else:
                d = nearest_anchor_distance(tf.constant(x), anchors)
                ax = reach_weight(d, reach, scale).numpy()
                STATE["ax"] = np.concatenate([ax, np.ones(pad - n)]) if pad > n else ax
            m = predict_mixture(built.model, x, likelihood=built.likelihood)
            return (
                m.weights,
                m.f_means[..., 0],
                m.f_variances[..., 0],
                m.y_means[..., 0],
                m.y_variances[..., 0],
            )

        return predict

    for scale, varonly in ((None, False), (1.0, False), (0.5, False), (1.0, True), (0.5, True)):
        STATE["varonly"] = varonly
        p = make_predict(scale)
        s = hole_scores(p, seed) if problem == "hole" else function_scores(problem, p, seed)
        keys = (
            ["hole_f_coverage", "hole_nll", "hole_rmse"]
            if problem == "hole"
            else ["gap_f_coverage", "gap_nll", "gap_rmse", "far_ratio_1", "beyond_coverage_95"]
        )
        print(
            f"RESULT {problem} {seed} {design or 'default'} scale={scale}{'v' if varonly else ''} "
            + " ".join(f"{k}={s[k]:.3f}" for k in keys),
            flush=True,
        )
