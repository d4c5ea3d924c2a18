"""Prototype (not kept): a defensive mixture off the data, on the 1-D problems and the hole of
``avdgp uncertainty``. The default AVDGP, its last layer gated by ``a_x`` (the reach gate of
``K`` fixed anchors on the raw ``x``), and an SVGP trained on the same split; predicted as

    p = (1 - w) p_gated + w p_SVGP,   w = (1 - a_x)(1 - beta).

A variant is ``K:scale:beta`` (``beta`` ``none``: the gate alone, no SVGP), with ``:var`` to
lower ``a_x`` also where the SVGP's f variance over its prior variance is beyond the 0.99
quantile of its training rows', with ``:nogate`` to mix the default's last layer ungated
(``p_gated`` replaced by the default's own prediction). Run from the repository root with
``PYTHONPATH=.``:

    python raw_defensive.py kink 0
    python raw_defensive.py hole 0 --variants 512:0.5:0.2,512:0.5:0.2:var
    python raw_defensive.py kink 0 --guard-size 128 --variants 128:0.5:0.2
"""

import argparse

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
from gpflux_avdgp.prediction import padded_size, predict_mixture

#: The variants of ``defensive_functions.txt``.
VARIANTS = "32:0.5:none,32:0.5:0.1,32:0.5:0.2,32:0.5:0.3,32:1.0:0.2,128:0.5:none,128:0.5:0.2"

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("problem")
parser.add_argument("seed", type=int)
parser.add_argument(
    "--variants", default=VARIANTS, help="comma-separated K:scale:beta[:var][:nogate]"
)
parser.add_argument("--guard-size", type=int, default=256, help="the SVGP's inducing points")
args = parser.parse_args()
problem, seed = args.problem, args.seed
variants = []
for text in args.variants.split(","):
    count, scale, beta, *flag = text.split(":")
    variants.append((int(count), float(scale), None if beta == "none" else float(beta), flag))
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
    """``[weights, f means, f variances, y means, y variances]``, each ``[N, S]``."""
    m = predict_mixture(built.model, x, likelihood=built.likelihood)
    return [m.weights] + [a[..., 0] for a in (m.f_means, m.f_variances, m.y_means, m.y_variances)]


with float_type(config.dtype):
    dgp = train(ModelSpec(model="avdgp", rule="ar2p", seed=seed))
    svgp = train(ModelSpec(model="svgp", seed=seed, num_inducing=(args.guard_size,)))
    last = [layer for layer in dgp.model.layers if hasattr(layer, "num_anchors")][-1]
    original = last._anchor_weight

    def patched(kernel, h, chol_cc, training):
        """The last layer's weight capped by ``a_x`` (one per datapoint, repeated per row)."""
        w = original(kernel, h, chol_cc, training)
        ax = STATE["ax"]
        if ax is None:
            return w
        return tf.minimum(w, tf.constant(np.repeat(ax, int(h.shape[0]) // len(ax)), w.dtype))

    last._anchor_weight = patched
    tf.config.run_functions_eagerly(True)
    xt = tf.constant(split.x_train)
    gates = {}
    for count in sorted({variant[0] for variant in variants}):
        anchors = spread_rows(xt, count)
        gates[count] = (anchors, reach_of(nearest_anchor_distance(xt, anchors), anchors))
        print("raw reach", count, float(gates[count][1]), flush=True)
    kernels = [m for m in svgp.model.submodules if isinstance(m, gpflow.kernels.Stationary)]
    prior_var = float(kernels[0].variance.numpy())

    def variance_ratio(x):
        return arrays(svgp, x)[2][:, 0] / prior_var

    ratio_reach = float(np.quantile(variance_ratio(split.x_train), 0.99))

    def a_x(x, count, scale, by_variance):
        anchors, reach = gates[count]
        a = reach_weight(nearest_anchor_distance(tf.constant(x), anchors), reach, scale).numpy()
        if by_variance:
            beyond = (variance_ratio(x) - ratio_reach) / max(1.0 - ratio_reach, 1e-9)
            a = np.minimum(a, np.clip(1.0 - beyond, 0.0, 1.0))
        return a

    def make(count, scale, beta, by_variance, gate_last):
        def predict(x):
            n = len(x)
            ax = a_x(x, count, scale, by_variance)
            if gate_last:
                STATE["ax"] = np.concatenate([ax, np.ones(padded_size(n, 1000, False) - n)])
            gated = arrays(dgp, x)
            STATE["ax"] = None
            if beta is None:
                return gated
            guard = arrays(svgp, x)
            w = ((1.0 - ax) * (1.0 - beta))[:, None]
            weights = np.concatenate([gated[0] * (1 - w), guard[0] * w], axis=1)
            return [weights] + [np.concatenate(pair, axis=1) for pair in zip(gated[1:], guard[1:])]

        return predict

    for count, scale, beta, flag in variants:
        p = make(count, scale, beta, "var" in flag, "nogate" not in flag)
        if problem == "hole":
            s = hole_scores(p, seed)
            keys = ["hole_f_coverage", "hole_nll", "hole_rmse"]
        else:
            s = function_scores(problem, p, seed)
            keys = ["gap_f_coverage", "gap_nll", "gap_rmse", "far_ratio_1", "beyond_coverage_95"]
        label = f"K={count} s={scale} beta={beta}" + "".join(f"+{f}" for f in flag)
        values = " ".join(f"{k}={s[k]:.3f}" for k in keys)
        print(f"RESULT {problem} {seed} {label} {values}", flush=True)
