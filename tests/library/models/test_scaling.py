"""Memory of a training step grows linearly with the batch size, never as ``O(B^2)``.

XLA's optimized HLO of the whole train step (forward, loss, gradients) lists every buffer with
a static shape, so the test reads them instead of timing or sampling memory (which is noisy on
a shared machine):

* no buffer has two axes that scale with the batch (e.g. ``[B, B]`` or ``[B, B S]``);
* the total number of elements over all buffers is affine in ``B`` (``c + O(B M^2 L)``): it
  grows by the same amount from ``B`` to ``2 B`` as from ``2 B`` to ``3 B`` (a quadratic step
  grows 5/3 times as much). The constant ``c`` (the weights, prior reversion's ``K x K``
  anchor matrices) does not depend on the batch and is not asked to be small.

A deliberately quadratic step (a kernel matrix over the batch) is flagged by the same checks.
"""

import re

import gpflow
import numpy as np
import pytest
import tensorflow as tf

import gpflux_avdgp

SHAPE = re.compile(r"\b(?:f64|f32|s64|s32|u64|u32|pred)\[([0-9,]*)\]")
BATCH = 97  # prime: no other dimension of the model is a multiple of it


def _buffer_shapes(step, batch: int, dim: int) -> list[tuple[int, ...]]:
    compiled = tf.function(step, jit_compile=True)
    x = tf.zeros([batch, dim], tf.float64)
    y = tf.zeros([batch, 1], tf.float64)
    hlo = compiled.experimental_get_compiler_ir(x, y)(stage="optimized_hlo")
    return [tuple(int(d) for d in dims.split(",") if d) for dims in SHAPE.findall(hlo)]


def _batch_axes(shape: tuple[int, ...], batch: int) -> int:
    return sum(1 for size in shape if size % batch == 0)


def _total_elements(shapes) -> int:
    return sum(int(np.prod(shape)) if shape else 1 for shape in shapes)


def _avdgp_train_step(rule: str):
    likelihood = gpflow.likelihoods.Gaussian(0.1)
    model = gpflux_avdgp.build_avdgp(
        4, [3, 2, 1], [8, 4, 4], 1000, likelihood, rule=rule, num_points=8, seed=0
    )
    loss = gpflux_avdgp.AVDGPLoss(likelihood)

    def step(x, y):
        with tf.GradientTape() as tape:
            value = tf.reduce_mean(loss(y, model(x, training=True))) + tf.add_n(model.losses)
        return tape.gradient(value, model.trainable_variables)

    return step


def _quadratic_step(x, y):
    """A full-batch kernel matrix: the O(B^2) memory an amortized layer must avoid."""
    squared_distances = tf.reduce_sum((x[:, None, :] - x[None, :, :]) ** 2, axis=-1)  # [B, B]
    return tf.reduce_sum(tf.exp(-0.5 * squared_distances)) + tf.reduce_sum(y)


@pytest.mark.slow
@pytest.mark.parametrize("rule", ["ar2p", pytest.param("ar1", marks=pytest.mark.slow)])
def test_train_step_memory_is_linear_in_the_batch(rule):
    step = _avdgp_train_step(rule)
    shapes = _buffer_shapes(step, BATCH, 4)
    doubled = _buffer_shapes(step, 2 * BATCH, 4)
    tripled = _buffer_shapes(step, 3 * BATCH, 4)
    assert not [s for s in shapes if _batch_axes(s, BATCH) >= 2], "a [B, B]-like buffer"
    assert not [s for s in doubled if _batch_axes(s, 2 * BATCH) >= 2]
    batch_sized = [s for s in shapes if _batch_axes(s, BATCH) == 1]
    assert batch_sized  # the check sees the per-datapoint buffers ([B, M, M], [B S, ...])
    assert 0.98 < _growth_ratio(shapes, doubled, tripled) < 1.02


def _growth_ratio(shapes, doubled, tripled) -> float:
    """``(T(3B) - T(2B)) / (T(2B) - T(B))`` of the total elements: 1 for an affine step, 5/3
    for a quadratic one."""
    totals = [_total_elements(s) for s in (shapes, doubled, tripled)]
    return (totals[2] - totals[1]) / (totals[1] - totals[0])


def test_the_checks_flag_a_quadratic_step():
    shapes = _buffer_shapes(_quadratic_step, BATCH, 4)
    doubled = _buffer_shapes(_quadratic_step, 2 * BATCH, 4)
    tripled = _buffer_shapes(_quadratic_step, 3 * BATCH, 4)
    assert [s for s in shapes if _batch_axes(s, BATCH) >= 2]
    assert _total_elements(doubled) / _total_elements(shapes) > 3.0
    assert _growth_ratio(shapes, doubled, tripled) > 1.6
