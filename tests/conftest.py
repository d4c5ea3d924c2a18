"""Shared fixtures: seeded RNGs and a clean Keras session per test."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

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
