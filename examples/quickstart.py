"""README quick-start: a 3-layer AVDGP (AR2P) on a small synthetic regression problem.

Run: ``python examples/quickstart.py`` (about a minute on 2 CPU cores, TensorFlow's start
included; TensorFlow prints a few start-up lines on stderr). It prints two lines: the test RMSE
beside that of predicting the training mean, the test NLL, and how many test targets the 95 %
intervals hold.
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
model.compile(tf_keras.optimizers.Adam(0.01), metrics=[gpflux_avdgp.MixtureNLL()])  # loss: ELBO
model.fit(X, Y, batch_size=100, epochs=30, verbose=0)

outputs = model.predict(X_test, verbose=0)  # mean, std, lower_95, upper_95 of y: [N, 1] each
rmse = np.sqrt(np.mean((outputs["mean"] - Y_test) ** 2))
baseline = np.sqrt(np.mean((Y.mean() - Y_test) ** 2))  # predicting the training mean
nll = model.evaluate(X_test, Y_test, verbose=0, return_dict=True)["nll"]
inside = np.mean((outputs["lower_95"] <= Y_test) & (Y_test <= outputs["upper_95"]))
print(f"test RMSE {rmse:.3f} (the training mean: {baseline:.3f}), test NLL {nll:.3f}")
print(f"95 % intervals hold {100 * inside:.0f} % of the test targets")
# A good fit: RMSE well below the mean's (below 0.3; the step at 0 is the hard part) and
# intervals that hold at least 90 % of the targets. tests/test_examples.py checks both.
