"""The guard's followed rho_r after training on a synthetic problem (300 epochs)."""

import sys

from gpflow.keras import tf_keras

from avdgp.experiments.uncertainty.run import (
    ONE_D_LEARNING_RATE,
    UncertaintySettings,
    _problem_data,
)
from avdgp.training import TrainConfig, fit_model, float_type
from avdgp.training.fit import best_epoch_callbacks
from avdgp.zoo import ModelSpec, build_model

problem, seed = sys.argv[1], int(sys.argv[2])
settings = UncertaintySettings(
    problems=[problem], models=["avdgp-ar2p:guard"], seeds=[seed], epochs=300
)
data, scaler, _ = _problem_data(problem, seed, settings)
split = data.split
config = TrainConfig.from_preset(
    "default", epochs=300, seed=seed, learning_rate=ONE_D_LEARNING_RATE
)
with float_type(config.dtype):
    tf_keras.utils.set_random_seed(seed)
    built = build_model(
        ModelSpec(model="avdgp", rule="ar2p", seed=seed, design="guard"),
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
    g = built.model.guard
    print(
        problem,
        seed,
        "reach",
        round(float(g.reach.numpy()), 4),
        "variance_reach",
        round(float(g.variance_reach.numpy()), 4),
    )
