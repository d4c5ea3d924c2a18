"""The data-spacing gate (issue 48) on one 1-D problem of ``avdgp uncertainty``: every layer's
reversion weight is ``min(a(h), a_s(h))`` with ``a_s`` measured at ``SCALE`` times the anchors'
median spacing (``AmortizedGPLayer(spacing_gate=SCALE)``); the model is
``avdgp-ar2p:identity-hidden`` with anchors with a global posterior in every layer, trained
300 epochs; prints the gap's f-band coverage, NLL of noisy y, RMSE, std gap / in and the
in-data RMSE of f.

    python benchmarks/density_gate.py kink 0 1

(The first run, in ``benchmarks/results/density_gate.txt``, monkeypatched the same weight into
the layer before the option existed.)
"""

import sys

import numpy as np
from gpflow.keras import tf_keras

from avdgp import metrics
from avdgp.experiments.uncertainty.problems import FUNCTIONS, GAP, function_split
from avdgp.experiments.zoo import ModelSpec, build_model
from avdgp.training import TrainConfig, fit_model, float_type
from avdgp.training.fit import best_epoch_callbacks
from gpflux_avdgp.prediction import predict_mixture

problem, seed, scale = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
split = function_split(problem, seed)
config = TrainConfig.from_preset("default", epochs=300, seed=seed, learning_rate=0.01)
extra = {"anchor_posterior": True, "spacing_gate": scale}
spec = ModelSpec(seed=seed, design="identity-hidden", extra=extra)
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
