"""Shared fixtures: seeded RNGs and a clean Keras session per test; the test processes'
TensorFlow settings."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from xdist import is_xdist_controller, is_xdist_worker  # noqa: E402

# TensorFlow and GPflow load in the processes that run tests, not here: with ``-n 2`` this file
# is also read by pytest-xdist's controller, which runs none, and an import here kept it about
# 10 s from starting the workers (``pytest -n 2 tests/library/test_kernels.py``: 21 s of wall
# clock with the imports here, 11-12 s without).


def pytest_sessionstart(session: pytest.Session) -> None:
    """Before any test module is imported, in each process that runs tests (not xdist's
    controller): skip GPflow's docstring rewriting (2 s of each process's import of GPflow, for
    docstrings no test reads; the checks stay on), as the ``avdgp`` command does
    (``avdgp/cli/common.py``), and give each xdist worker one intra-op thread."""
    if is_xdist_controller(session):
        return
    import check_shapes
    import tensorflow as tf

    check_shapes.set_rewrite_docstrings(None)
    if is_xdist_worker(session):
        # README's command runs two workers on two cores: TensorFlow's default of one intra-op
        # thread per core each oversubscribes them (the layers' tests with -n 2: user CPU 326
        # -> 297-315 s, wall 193 -> 179-186 s, within this machine's run-to-run noise).
        tf.config.threading.set_intra_op_parallelism_threads(1)


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded NumPy generator (tests must not depend on global random state)."""
    return np.random.default_rng(20261122)


@pytest.fixture(autouse=True)
def _clean_keras_session():
    """Fresh Keras name scopes and seeds for every test."""
    import tensorflow as tf
    from gpflow.keras import tf_keras

    tf_keras.backend.clear_session()
    tf.random.set_seed(1234)
    yield
