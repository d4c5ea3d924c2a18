"""Shared fixtures: seeded RNGs and a clean Keras session per test."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Under pytest-xdist each worker's TensorFlow would start a thread per core for its ops, and the
# workers would take turns on the cores: give each worker its share (README's command, two
# workers on two cores: one each; four heavy modules ran in 238 s against 287 s).
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    share = (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", str(max(1, share)))

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
from gpflow.keras import tf_keras  # noqa: E402


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded NumPy generator (tests must not depend on global random state)."""
    return np.random.default_rng(20261122)


@pytest.fixture(autouse=True)
def _clean_keras_session():
    """Fresh Keras name scopes and seeds for every test."""
    tf_keras.backend.clear_session()
    tf.random.set_seed(1234)
    yield
