"""Write the saved models that ``tests/test_legacy_models.py`` loads.

Run once, from the repository root, on the layout *before* the package was split into
``core/``, ``io/``, ``data/``, ``training/`` (commit recorded in ``README.md`` beside this
file): ``python tests/data/legacy_layout/make_models.py``. The files must not be regenerated
after a move, or the test no longer shows that old files load.

Writes ``avdgp_ar2pp.keras`` (``build_avdgp``, AR2P layers trained with the predictive
objective), ``mixed_ar1.keras`` (Dense, a wrapped GPflux ``GPLayer``, an amortized AR1 layer,
a Bernoulli likelihood) and ``expected.npz`` (inputs and the predictive mixtures of both).
"""

from __future__ import annotations

from pathlib import Path

import gpflow
import gpflux
import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from gpflux_avdgp import (
    AmortizedGPLayer,
    AVDGPLoss,
    SigmaPointGPLayer,
    TrainableLikelihood,
    build_avdgp,
    predict_mixture,
)

HERE = Path(__file__).parent
FIELDS = ("weights", "f_means", "f_variances", "y_means", "y_variances")


def regression_model(num_data: int) -> tuple[tf_keras.Model, gpflow.likelihoods.Likelihood]:
    likelihood = gpflow.likelihoods.Gaussian(variance=0.1)
    model = build_avdgp(2, [3, 1], [4, 3], num_data, likelihood, rule="ar2p", num_points=4)
    model.compile(
        tf_keras.optimizers.Adam(0.01), loss=AVDGPLoss(likelihood, objective="predictive")
    )
    return model, likelihood


def mixed_model(num_data: int) -> tuple[tf_keras.Model, gpflow.likelihoods.Likelihood]:
    likelihood = gpflow.likelihoods.Bernoulli()
    kernel = gpflux.helpers.construct_basic_kernel(
        gpflow.kernels.Matern32(lengthscales=np.ones(3)), output_dim=2, share_hyperparams=True
    )
    inducing = gpflux.helpers.construct_basic_inducing_variables(
        4, 3, output_dim=2, share_variables=True, z_init=np.linspace(-1, 1, 12).reshape(4, 3)
    )
    gpflux_layer = gpflux.layers.GPLayer(
        kernel,
        inducing,
        num_data,
        num_latent_gps=2,
        mean_function=gpflow.mean_functions.Linear(np.ones((3, 2)), np.zeros(2)),
        name="gpflux_first",
        verbose=False,
    )
    model = tf_keras.Sequential(
        [
            tf_keras.Input((2,), dtype=tf.float64),
            tf_keras.layers.Dense(3, activation="tanh", dtype=tf.float64, name="features"),
            SigmaPointGPLayer(gpflux_layer, seed=0, name="gp_1"),
            AmortizedGPLayer(
                1,
                3,
                num_data,
                mean_function="linear",
                ard=True,
                rule="ar1",
                num_points=2,
                num_predict_points=3,
                seed=1,
                name="gp_2",
            ),
            TrainableLikelihood(likelihood, name="likelihood"),
        ]
    )
    model.compile(tf_keras.optimizers.Adam(0.01), loss=AVDGPLoss(likelihood))
    return model, likelihood


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 2))
    y = np.sin(2.0 * x[:, :1]) + 0.5 * x[:, 1:] ** 2
    labels = (y > 0.5).astype(np.float64)
    expected = {"inputs": x}
    for name, build, targets in (
        ("avdgp_ar2pp", regression_model, y),
        ("mixed_ar1", mixed_model, labels),
    ):
        tf.random.set_seed(0)
        model, _ = build(len(x))
        model.fit(x, targets, batch_size=8, epochs=3, shuffle=False, verbose=0)
        model.save(HERE / f"{name}.keras")
        mixture = predict_mixture(model, x)
        for field in FIELDS:
            expected[f"{name}/{field}"] = getattr(mixture, field)
    np.savez(HERE / "expected.npz", **expected)


if __name__ == "__main__":
    main()
