"""Train the default AVDGP with ``jit_compile=True`` (for tests/application/training/test_xla.py).

    TF_XLA_FLAGS=--tf_xla_persistent_cache_directory=DIR python xla_programs.py

XLA's persistent cache writes one file per program it compiles, so DIR then holds as many
files as the training step was compiled: once for batches of one shape, unless a value that
changes from step to step (a slice's start, say) became a constant of the program.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import gpflow  # noqa: E402
import numpy as np  # noqa: E402
from gpflow.keras import tf_keras  # noqa: E402

import gpflux_avdgp  # noqa: E402

ROWS, BATCH, EPOCHS = 120, 30, 3

rng = np.random.default_rng(0)
x = rng.uniform(-2.0, 2.0, (ROWS, 2))
y = np.sin(2.0 * x[:, :1]) + 0.5 * x[:, 1:] ** 2 + 0.1 * rng.standard_normal((ROWS, 1))
model = gpflux_avdgp.build_avdgp(2, [2, 1], 4, ROWS, gpflow.likelihoods.Gaussian(), seed=0)
model.compile(tf_keras.optimizers.Adam(0.01), jit_compile=True)
history = model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, shuffle=True, verbose=0)
assert np.all(np.isfinite(history.history["loss"])), history.history
