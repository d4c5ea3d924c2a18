"""Prototype (not kept): the defensive mixture of raw_defensive.py on the covariate shifts of
`avdgp uncertainty` (4000 rows, 30 epochs), K anchors on x (128 unless --anchors).
python raw_defensive_shift.py SEED PROBLEM... [--anchors K]"""

# ruff: noqa: B023 (the closures run within their own iteration of the loop)
import argparse
import json

import gpflow
import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from avdgp.experiments.uncertainty.run import UncertaintySettings, _problem_data, interval_scores
from avdgp.training import TrainConfig, fit_model, float_type
from avdgp.training.fit import best_epoch_callbacks
from avdgp.zoo import ModelSpec, build_model
from gpflux_avdgp.core.anchors import nearest_anchor_distance, reach_of, reach_weight, spread_rows
from gpflux_avdgp.prediction import padded_size, predict_mixture

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("seed", type=int)
parser.add_argument("problems", nargs="+")
parser.add_argument("--anchors", type=int, default=128, help="fixed anchors on x")
args = parser.parse_args()
seed, problems = args.seed, args.problems
settings = UncertaintySettings(rows=4000)
config = TrainConfig.from_preset("default", epochs=30, seed=seed)
STATE = {"ax": None}


def arrays(built, x, f_variance=False):
    m = predict_mixture(built.model, x, likelihood=built.likelihood)
    if f_variance:
        return m.f_variances[:, 0, 0]
    return [m.weights, m.y_means[..., 0], m.y_variances[..., 0]]


with float_type(config.dtype):
    for problem in problems:
        data, _, width = _problem_data(problem, seed, settings)
        split = data.split

        def train(spec):
            tf_keras.utils.set_random_seed(seed)
            built = build_model(spec, width, len(split.x_train), inputs=split.x_train)
            callbacks = best_epoch_callbacks(built, split, config)
            fit_model(built, split.x_train, split.y_train, config, callbacks=callbacks)
            return built

        tf.config.run_functions_eagerly(False)
        dgp = train(ModelSpec(model="avdgp", rule="ar2p", seed=seed))
        svgp = train(ModelSpec(model="svgp", seed=seed))
        last = [layer for layer in dgp.model.layers if hasattr(layer, "num_anchors")][-1]
        original = last._anchor_weight

        def patched(kernel, h, chol_cc, training, _original=original):
            w = _original(kernel, h, chol_cc, training)
            ax = STATE["ax"]
            if ax is None:
                return w
            k = int(h.shape[0]) // len(ax)
            return tf.minimum(w, tf.constant(np.repeat(ax, k), w.dtype))

        last._anchor_weight = patched
        tf.config.run_functions_eagerly(True)
        xt = tf.constant(split.x_train)
        anchors = spread_rows(xt, args.anchors)
        reach = reach_of(nearest_anchor_distance(xt, anchors), anchors)

        kernels = [m for m in svgp.model.submodules if isinstance(m, gpflow.kernels.Stationary)]
        prior_var = float(kernels[0].variance.numpy())
        ratio_train = arrays(svgp, split.x_train, f_variance=True) / prior_var
        ratio_reach = float(np.quantile(ratio_train, 0.99))

        def predict(x, beta, by_variance=False):
            out = []
            for start in range(0, len(x), 1000):
                part = x[start : start + 1000]
                n = len(part)
                d = nearest_anchor_distance(tf.constant(part), anchors)
                ax = reach_weight(d, reach, 0.5).numpy()
                if by_variance:  # and where the SVGP's own f variance says it does not know
                    ratio = arrays(svgp, part, f_variance=True) / prior_var
                    beyond = (ratio - ratio_reach) / max(1.0 - ratio_reach, 1e-9)
                    ax = np.minimum(ax, np.clip(1.0 - beyond, 0.0, 1.0))
                if beta is None:
                    STATE["ax"] = None
                    out.append(arrays(dgp, part))
                    continue
                STATE["ax"] = np.concatenate([ax, np.ones(padded_size(n, 1000, False) - n)])
                gated = arrays(dgp, part)
                STATE["ax"] = None
                b = arrays(svgp, part)
                w = ((1.0 - ax) * (1.0 - beta))[:, None]
                weights = np.concatenate([gated[0] * (1 - w), b[0] * w], axis=1)
                out.append(
                    [weights] + [np.concatenate([p, q], axis=1) for p, q in zip(gated[1:], b[1:])]
                )
            return [np.concatenate([o[i] for o in out]) for i in range(3)]

        x_shift, y_shift = data.shifted
        for label, model_predict in (
            ("dgp", lambda x: predict(x, None)),
            ("svgp", lambda x: arrays(svgp, x)),
            ("defensive", lambda x: predict(x, 0.2)),
            ("defensive-var", lambda x: predict(x, 0.2, True)),
        ):
            s = interval_scores(y_shift, *model_predict(x_shift), "shift")
            s.update(interval_scores(split.y_test, *model_predict(split.x_test), "in"))
            keys = ("nll_shift", "coverage_95_shift", "nll_in", "coverage_95_in", "coverage_50_in")
            values = {k: round(float(s[k]), 4) for k in keys}
            print(
                "RESULT", json.dumps({"problem": problem, "seed": seed, "model": label, **values})
            )
            print("reach", float(reach), "svgp ratio reach", ratio_reach, flush=True)
