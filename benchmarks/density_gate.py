"""Prototype of a data-spacing gate (issue 48): every layer's reversion weight measured with a
Matern-5/2 kernel whose lengthscale is ``SCALE`` times the median nearest-anchor distance (no
gradient through it), at most the layer's own weight; in training and prediction. The model is
``avdgp-ar2p:identity-hidden`` with anchors with a global posterior in every layer, trained
300 epochs on a 1-D problem of ``avdgp uncertainty``; prints the gap's f-band coverage, NLL of
noisy y, RMSE, std gap / in and the in-data RMSE of f.

    python benchmarks/density_gate.py kink 0 1

The weight is replaced by monkeypatching the layer module's ``anchor_weight`` in this script's
process; nothing of the library is changed.
"""

import sys

import gpflow
import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

import gpflux_avdgp.layers.amortized_gp_layer as agl
from avdgp import metrics
from avdgp.experiments.uncertainty.problems import FUNCTIONS, GAP, function_split
from avdgp.experiments.zoo import ModelSpec, build_model
from avdgp.training import TrainConfig, fit_model, float_type
from avdgp.training.fit import best_epoch_callbacks
from gpflux_avdgp.prediction import predict_mixture

problem, seed, scale = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
original = agl.anchor_weight
UNIT = gpflow.kernels.Matern52(variance=1.0, lengthscales=1.0)


def spacing_weight(kernel, inputs, anchors):
    """``min(a_kernel, a_spacing)``: ``a_spacing`` on inputs and anchors divided by the
    lengthscale ``scale * median_k min_j |C_k - C_j|``."""
    fixed = tf.stop_gradient(anchors)
    count = tf.shape(fixed)[0]
    squared = tf.reduce_sum(tf.square(fixed[:, None] - fixed[None]), -1)
    squared += tf.eye(count, dtype=fixed.dtype) * 1e30  # not its own neighbour
    nearest = tf.sqrt(tf.reduce_min(squared, -1))
    lengthscale = scale * tf.sort(nearest)[count // 2]
    spacing = original(UNIT, inputs / lengthscale, anchors / lengthscale)
    return tf.minimum(spacing, original(kernel, inputs, anchors))


agl.anchor_weight = spacing_weight
split = function_split(problem, seed)
config = TrainConfig.from_preset("default", epochs=300, seed=seed, learning_rate=0.01)
spec = ModelSpec(seed=seed, design="identity-hidden", extra={"anchor_posterior": True})
with float_type(config.dtype):
    tf_keras.utils.set_random_seed(seed)
    built = build_model(spec, 1, len(split.x_train), inputs=split.x_train)
    callbacks = best_epoch_callbacks(built, split, config)
    fit_model(built, split.x_train, split.y_train, config, callbacks=callbacks)
    function, noise = FUNCTIONS[problem]
    rng = np.random.default_rng(5)
    gap = rng.uniform(*GAP, (300, 1))
    truth = function(gap)[:, 0]
    y = truth + noise(gap)[:, 0] * rng.standard_normal(300)
    p = predict_mixture(built.model, gap, likelihood=built.likelihood)
    cover = metrics.central_interval_coverage(
        truth, p.weights, p.f_means[..., 0], p.f_variances[..., 0], 0.95
    )[0.95]
    nll = metrics.gaussian_mixture_nll(y, p.weights, p.y_means[..., 0], p.y_variances[..., 0])
    mean, var = metrics.mixture_mean_and_variance(
        p.weights, p.y_means[..., 0], p.y_variances[..., 0]
    )
    inside = split.x_test[:300]
    q = predict_mixture(built.model, inside, likelihood=built.likelihood)
    mean_in, var_in = metrics.mixture_mean_and_variance(
        q.weights, q.y_means[..., 0], q.y_variances[..., 0]
    )
    ratio = np.sqrt(var).mean() / np.sqrt(var_in).mean()
    print(
        f"{problem} seed {seed} scale {scale} gap f-cover {cover:.3f} nll {nll:.2f} "
        f"rmse {metrics.rmse(truth, mean):.3f} std gap/in {ratio:.2f} "
        f"in-data rmse of f {metrics.rmse(function(inside)[:, 0], mean_in):.3f}"
    )
