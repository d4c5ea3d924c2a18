"""GPflow kernels with their NumPy references (``reference.py``), shared by the covariance tests."""

import gpflow
import numpy as np
import reference
from helpers import REFERENCE_TOLERANCE

#: ``name: (GPflow kernel factory, NumPy reference factory)``, on 3 input columns.
KERNEL_CASES = {
    "matern52_isotropic": (
        lambda: gpflow.kernels.Matern52(variance=1.7, lengthscales=0.8),
        lambda: reference.matern52(1.7, 0.8),
    ),
    "matern52_ard": (
        lambda: gpflow.kernels.Matern52(variance=0.6, lengthscales=[0.5, 1.3, 2.1]),
        lambda: reference.matern52(0.6, [0.5, 1.3, 2.1]),
    ),
    "squared_exponential_isotropic": (
        lambda: gpflow.kernels.SquaredExponential(variance=2.3, lengthscales=1.4),
        lambda: reference.squared_exponential(2.3, 1.4),
    ),
    "squared_exponential_ard": (
        lambda: gpflow.kernels.SquaredExponential(variance=0.9, lengthscales=[0.7, 1.1, 0.4]),
        lambda: reference.squared_exponential(0.9, [0.7, 1.1, 0.4]),
    ),
    "linear": (
        lambda: gpflow.kernels.Linear(variance=0.8),
        lambda: reference.linear(0.8),
    ),
    "linear_ard": (
        lambda: gpflow.kernels.Linear(variance=[0.3, 1.2, 2.0]),
        lambda: reference.linear([0.3, 1.2, 2.0]),
    ),
    "polynomial": (
        lambda: gpflow.kernels.Polynomial(degree=3.0, variance=0.7, offset=1.5),
        lambda: reference.polynomial(0.7, 1.5, 3.0),
    ),
}


def assert_covariance_blocks(actual, expected) -> None:
    """``(Kuu, Kuf, kff)`` tensors against NumPy arrays, to ``REFERENCE_TOLERANCE``."""
    rtol, atol = REFERENCE_TOLERANCE
    for name, act, exp in zip(("Kuu", "Kuf", "kff"), actual, expected):
        np.testing.assert_allclose(act.numpy(), exp, rtol=rtol, atol=atol, err_msg=name)
