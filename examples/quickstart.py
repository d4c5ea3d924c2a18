"""README quick-start: a 3-layer AVDGP (AR2P) on a small synthetic regression problem.

Run: ``python examples/quickstart.py`` (about 15 s on 2 CPU cores).
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # silence TensorFlow start-up logs

import gpflow  # noqa: E402
import numpy as np  # noqa: E402
from gpflow.keras import tf_keras  # noqa: E402

import gpflux_avdgp  # noqa: E402

# A step function with noise: hard for a shallow GP, easy for a deep one.
tf_keras.utils.set_random_seed(0)  # reproducible shuffling and initialisation
rng = np.random.default_rng(0)
X = rng.uniform(-2, 2, (1000, 1))
Y = np.where(X > 0, 1.0, -1.0) + 0.05 * rng.standard_normal(X.shape)
X_test = np.linspace(-2, 2, 200)[:, None]
Y_test = np.where(X_test > 0, 1.0, -1.0)

likelihood = gpflow.likelihoods.Gaussian(variance=0.1)
model = gpflux_avdgp.build_avdgp(
    input_dim=1,
    units=[4, 4, 1],  # three GP layers
    num_inducing=[8, 4, 4],  # inducing points per datapoint, per layer
    num_data=len(X),
    likelihood=likelihood,
    rule="ar2p",  # learnable sigma points, S = 32
    seed=0,
)
model.compile(tf_keras.optimizers.Adam(0.01), loss=gpflux_avdgp.AVDGPLoss(likelihood))
model.fit(X, Y, batch_size=100, epochs=30, verbose=0)

prediction = gpflux_avdgp.predict_mixture(model, X_test)
mean, variance = prediction.y_moments()
rmse = np.sqrt(np.mean((mean - Y_test) ** 2))
nll = -np.mean(prediction.log_density(Y_test))
print(f"test RMSE {rmse:.3f}, test NLL {nll:.3f}, mixture components {prediction.weights.shape[1]}")
