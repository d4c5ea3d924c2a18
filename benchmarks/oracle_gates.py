"""Oracle gates: the default AVDGP trained on a 1-D problem of ``avdgp uncertainty`` (300
epochs), then each chosen set of layers forced to revert fully (``a = 0``) at the gap's points
at prediction; prints the gap's f-band coverage, NLL of noisy y, RMSE and std gap / in.

    python benchmarks/oracle_gates.py kink 0
    python benchmarks/oracle_gates.py wiggle 0

Layers are identified by their input width (1, 16, 4 for the default). The reversion weight is
replaced by monkeypatching the layer module's ``anchor_weight`` in this script's process and
running eagerly; nothing of the library is changed.
"""

import sys

import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

import gpflux_avdgp.layers.amortized_gp_layer as agl
from avdgp import metrics
from avdgp.experiments.uncertainty.problems import FUNCTIONS, GAP, function_split
from avdgp.training import TrainConfig, fit_model, float_type
from avdgp.training.fit import best_epoch_callbacks
from avdgp.zoo import ModelSpec, build_model
from gpflux_avdgp.prediction import predict_mixture

problem, seed = sys.argv[1], int(sys.argv[2])
split = function_split(problem, seed)
config = TrainConfig.from_preset("default", epochs=300, seed=seed, learning_rate=0.01)
original = agl.anchor_weight
FORCED = set()


def patched(kernel, inputs, anchors, chol_cc=None):
    weight = original(kernel, inputs, anchors, chol_cc)
    layer = int(round(float(tf.shape(anchors)[1])))  # identify by input width
    return tf.zeros_like(weight) if layer in FORCED else weight


with float_type(config.dtype):
    tf_keras.utils.set_random_seed(seed)
    built = build_model(
        ModelSpec(model="avdgp", rule="ar2p", seed=seed),
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
    widths = [layer.input_dim for layer in built.model.layers if hasattr(layer, "num_anchors")]
    print("layer input widths", widths)
    agl.anchor_weight = patched
    tf.config.run_functions_eagerly(True)
    function, noise = FUNCTIONS[problem]
    rng = np.random.default_rng(5)
    gap = rng.uniform(*GAP, (300, 1))
    truth = function(gap)[:, 0]
    y = truth + noise(gap)[:, 0] * rng.standard_normal(300)
    inside = split.x_test[:300]
    for label, forced in [
        ("none", set()),
        ("first", {widths[0]}),
        ("last", {widths[-1]}),
        ("all", set(widths)),
    ]:
        FORCED.clear()
        FORCED.update(forced)
        p = predict_mixture(built.model, gap, likelihood=built.likelihood)
        w, fm, fv = p.weights, p.f_means[..., 0], p.f_variances[..., 0]
        ym, yv = p.y_means[..., 0], p.y_variances[..., 0]
        cover = metrics.central_interval_coverage(truth, w, fm, fv, 0.95)[0.95]
        nll = metrics.gaussian_mixture_nll(y, w, ym, yv)
        mean, var = metrics.mixture_mean_and_variance(w, ym, yv)
        FORCED.clear()
        q = predict_mixture(built.model, inside, likelihood=built.likelihood)
        _, vin = metrics.mixture_mean_and_variance(
            q.weights, q.y_means[..., 0], q.y_variances[..., 0]
        )
        print(
            f"{problem} seed {seed} forced={label:5s} gap f-cover {cover:.2f} gap nll {nll:.2f} "
            f"rmse {metrics.rmse(truth, mean):.3f} "
            f"std gap/in {np.sqrt(var).mean() / np.sqrt(vin).mean():.2f}"
        )
