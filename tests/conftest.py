"""Shared fixtures: seeded RNGs and a clean Keras session per test; the worker processes'
settings."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import check_shapes  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

# GPflow's shape checks rewrite each decorated function's docstring as it is defined: 2 s of
# every worker's import of GPflow, for docstrings no test reads (the checks stay on). As the
# avdgp command does (avdgp/cli/common.py), before GPflow is imported.
check_shapes.set_rewrite_docstrings(None)

from gpflow.keras import tf_keras  # noqa: E402

if os.environ.get("PYTEST_XDIST_WORKER"):
    # README's command runs two workers on two cores: TensorFlow's default of one intra-op
    # thread per core each oversubscribes them (the layers' tests with -n 2: user CPU 326 ->
    # 297-315 s, wall 193 -> 179-186 s, within this machine's run-to-run noise).
    tf.config.threading.set_intra_op_parallelism_threads(1)


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
