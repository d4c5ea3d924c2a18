"""Why a gap is confident (issue 48): train a design of ``avdgp uncertainty``'s 1-D problems
(300 epochs) and print each GP layer's kernel lengthscale and variance, then the mean and std
of f at 13 points across the gap and at 13 training inputs, beside the truth.

    python benchmarks/gap_diagnosis.py wiggle 0 identity-reach
"""

import sys

import numpy as np
from gpflow.keras import tf_keras

from avdgp import metrics
from avdgp.experiments.uncertainty.problems import FUNCTIONS, GAP, function_split
from avdgp.training import TrainConfig, fit_model, float_type
from avdgp.training.fit import best_epoch_callbacks
from avdgp.zoo import ModelSpec, build_model
from gpflux_avdgp.prediction import predict_mixture

problem, seed = sys.argv[1], int(sys.argv[2])
design = sys.argv[3] if len(sys.argv) > 3 else None
split = function_split(problem, seed)
config = TrainConfig.from_preset("default", epochs=300, seed=seed, learning_rate=0.01)
with float_type(config.dtype):
    tf_keras.utils.set_random_seed(seed)
    built = build_model(
        ModelSpec(seed=seed, design=design), 1, len(split.x_train), inputs=split.x_train
    )
    callbacks = best_epoch_callbacks(built, split, config)
    fit_model(built, split.x_train, split.y_train, config, callbacks=callbacks)
    for layer in built.model.layers:
        if hasattr(layer, "num_anchors"):
            kernel = layer.kernel
            lengthscales = np.round(np.atleast_1d(kernel.lengthscales.numpy()), 3)
            print(
                f"{layer.name}: lengthscale {lengthscales} variance {kernel.variance.numpy():.4f}"
            )
    inside = split.x_train[:: max(1, len(split.x_train) // 13)][:13]
    for name, points in (("gap", np.linspace(*GAP, 13)[:, None]), ("data", inside)):
        p = predict_mixture(built.model, points, likelihood=built.likelihood)
        mean, var = metrics.mixture_mean_and_variance(
            p.weights, p.f_means[..., 0], p.f_variances[..., 0]
        )
        print(f"{name}: x     {np.round(points[:, 0], 2)}")
        print(f"{name}: f     {np.round(mean, 2)}")
        print(f"{name}: std   {np.round(np.sqrt(var), 3)}")
        print(f"{name}: truth {np.round(FUNCTIONS[problem][0](points)[:, 0], 2)}")
