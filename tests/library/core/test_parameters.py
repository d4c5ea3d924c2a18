"""read_once: a GPflow module whose parameters are read once computes what the module does."""

from __future__ import annotations

import gpflow
import numpy as np
import pytest
import tensorflow as tf

from gpflux_avdgp.core.parameters import read_once

KERNELS = {
    "matern52": lambda: gpflow.kernels.Matern52(variance=1.7, lengthscales=0.6),
    "rbf_ard": lambda: gpflow.kernels.SquaredExponential(lengthscales=[0.5, 1.5, 2.0]),
    "rational_quadratic": lambda: gpflow.kernels.RationalQuadratic(alpha=0.7),
    "sum_with_active_dims": lambda: gpflow.kernels.Matern32(active_dims=[0, 1])
    + gpflow.kernels.Linear(variance=0.3, active_dims=[2]),
    "product": lambda: gpflow.kernels.Matern12() * gpflow.kernels.Cosine(lengthscales=2.0),
}


@pytest.mark.parametrize("name", list(KERNELS))
def test_a_kernel_read_once_gives_the_kernel_s_values_and_gradients(name):
    kernel = KERNELS[name]()
    rng = np.random.default_rng(0)
    x, z = tf.constant(rng.normal(size=(5, 3))), tf.constant(rng.normal(size=(4, 3)))

    def values(module):
        return (module(x, z), module(x, full_cov=False), module(z))

    with tf.GradientTape(persistent=True) as tape:
        expected = values(kernel)
        found = values(read_once(kernel))
        expected_sum = sum(tf.reduce_sum(v) for v in expected)
        found_sum = sum(tf.reduce_sum(v) for v in found)
    for mine, theirs in zip(found, expected):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    variables = kernel.trainable_variables
    for mine, theirs in zip(
        tape.gradient(found_sum, variables), tape.gradient(expected_sum, variables)
    ):
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-14)


def test_read_once_reads_each_parameter_once():
    kernel = gpflow.kernels.Matern52(variance=1.7, lengthscales=0.6)
    x = tf.TensorSpec([None, 2], tf.float64)

    def softplus_ops(module_of):
        def three_uses(points):
            module = module_of()
            return module(points) + module(points) + module(points)

        graph = tf.function(three_uses).get_concrete_function(x).graph
        return sum(op.type == "Softplus" for op in graph.get_operations())

    assert softplus_ops(lambda: kernel) == 6  # variance and lengthscales, three times each
    assert softplus_ops(lambda: read_once(kernel)) == 2


def test_the_view_leaves_the_module_as_it_was():
    kernel = gpflow.kernels.SquaredExponential(variance=2.0)
    view = read_once(kernel)
    assert isinstance(view, gpflow.kernels.SquaredExponential)
    assert isinstance(kernel.variance, gpflow.Parameter)
    assert len(kernel.trainable_variables) == 2
