"""``check_kernel_width``: a kernel's per-column parameters must fit the layer's input width."""

from __future__ import annotations

import gpflow
import numpy as np
import pytest

from gpflux_avdgp.kernels import check_kernel_width


@pytest.mark.parametrize(
    "kernel",
    [
        gpflow.kernels.Matern32(),  # one lengthscale for every column
        gpflow.kernels.Matern32(lengthscales=[1.0, 2.0, 3.0]),
        gpflow.kernels.SquaredExponential(lengthscales=[1.0, 2.0], active_dims=[0, 2]),
        gpflow.kernels.Linear(variance=[1.0, 1.0, 1.0]) + gpflow.kernels.RBF(),
        gpflow.kernels.SharedIndependent(
            gpflow.kernels.Matern52(lengthscales=[1.0] * 3), output_dim=2
        ),
        gpflow.kernels.White(),  # no per-column parameters
    ],
    ids=["scalar", "ard", "active-dims", "sum", "shared-independent", "white"],
)
def test_kernels_that_fit_width_three_pass(kernel):
    check_kernel_width(kernel, 3)


@pytest.mark.parametrize(
    "kernel, message",
    [
        (
            gpflow.kernels.Matern32(lengthscales=[1.0, 1.0, 1.0]),
            r"^kernel: expected 2 lengthscales for input width 2, got 3 \(Matern32\); "
            r"give 2 or a scalar$",
        ),
        (
            gpflow.kernels.RBF() * gpflow.kernels.Matern12(lengthscales=[1.0] * 4),
            r"expected 2 lengthscales for input width 2, got 4 \(Matern12\)",
        ),
        (
            gpflow.kernels.Linear(variance=[1.0, 1.0, 1.0]),
            r"expected 2 variances for input width 2, got 3 \(Linear\)",
        ),
        (
            gpflow.kernels.RBF(active_dims=[0, 2]),
            r"^kernel: active_dims \[0, 2\] of SquaredExponential reach past input width 2$",
        ),
        (
            gpflow.kernels.SeparateIndependent(
                [gpflow.kernels.RBF(), gpflow.kernels.RBF(lengthscales=np.ones(5))]
            ),
            r"expected 2 lengthscales for input width 2, got 5",
        ),
    ],
    ids=["ard", "product", "linear", "active-dims", "separate"],
)
def test_kernels_that_do_not_fit_width_two_are_named(kernel, message):
    with pytest.raises(ValueError, match=message):
        check_kernel_width(kernel, 2)
