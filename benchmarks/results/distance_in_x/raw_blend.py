"""Prototype (not kept; run at commit d443015, see README.md):
the DGP's predictive mixture blended with an SVGP trained on the
same split, by a weight a(x) measured on the raw input: p = a p_DGP + (1 - a) p_SVGP.
python raw_blend.py PROBLEM SEED [DESIGN]"""

import sys

import gpflow
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
from gpflux_avdgp.prediction import predict_mixture

problem, seed = sys.argv[1], int(sys.argv[2])
design = sys.argv[3] if len(sys.argv) > 3 else None
split = hole_split(seed) if problem == "hole" else function_split(problem, seed)
config = TrainConfig.from_preset("default", epochs=300, seed=seed, learning_rate=0.01)


def train(spec):
    tf_keras.utils.set_random_seed(seed)
    built = build_model(spec, split.x_train.shape[1], len(split.x_train), inputs=split.x_train)
    fit_model(
        built,
        split.x_train,
        split.y_train,
        config,
        callbacks=best_epoch_callbacks(built, split, config),
    )
    return built


def arrays(built, x):
    m = predict_mixture(built.model, x, likelihood=built.likelihood)
    return [
        m.weights,
        m.f_means[..., 0],
        m.f_variances[..., 0],
        m.y_means[..., 0],
        m.y_variances[..., 0],
    ]


with float_type(config.dtype):
    dgp = train(ModelSpec(model="avdgp", rule="ar2p", seed=seed, design=design))
    svgp = train(ModelSpec(model="svgp", seed=seed))
    kernels = [m for m in svgp.model.submodules if isinstance(m, gpflow.kernels.Stationary)]
    prior_var = float(kernels[0].variance.numpy())
    xt = tf.constant(split.x_train)
    anchors = spread_rows(xt, 32)
    reach = reach_of(nearest_anchor_distance(xt, anchors), anchors)
    print("raw reach", float(reach), "svgp prior var", prior_var, flush=True)

    def gate(x, how):
        if how.startswith("reach"):
            d = nearest_anchor_distance(tf.constant(x), anchors)
            return reach_weight(d, reach, float(how[5:])).numpy()
        fvar = arrays(svgp, x)[2][:, 0]
        return np.clip(1.0 - fvar / prior_var, 0.0, 1.0)

    def blended(how):
        def predict(x):
            a = arrays(dgp, x)
            if how == "dgp":
                return a
            b = arrays(svgp, x)
            if how == "svgp":
                return b
            g = gate(x, how)[:, None]
            w = np.concatenate([a[0] * g, b[0] * (1 - g)], axis=1)
            return [w] + [np.concatenate([p, q], axis=1) for p, q in zip(a[1:], b[1:])]

        return predict

    for how in ("dgp", "svgp", "reach1", "reach0.5", "svgpvar"):
        p = blended(how)
        s = hole_scores(p, seed) if problem == "hole" else function_scores(problem, p, seed)
        keys = (
            ["hole_f_coverage", "hole_nll", "hole_rmse"]
            if problem == "hole"
            else ["gap_f_coverage", "gap_nll", "gap_rmse", "far_ratio_1", "beyond_coverage_95"]
        )
        print(
            f"RESULT {problem} {seed} {design or 'default'} {how} "
            + " ".join(f"{k}={s[k]:.3f}" for k in keys),
            flush=True,
        )
