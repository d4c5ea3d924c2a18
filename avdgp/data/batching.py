"""Minibatches whose order depends only on the seed and the epoch: training that resumes exactly.

``tf.data``'s ``shuffle(reshuffle_each_iteration=True)`` draws each epoch's order from a
generator that lives in the process, so a run restarted from a checkpoint (e.g. by
``tf_keras.callbacks.BackupAndRestore``) replays epoch 0's order where the uninterrupted run
would have used epoch ``e``'s. Here the order of epoch ``e`` is a stateless function of
``(seed, e)``, with ``e`` read from a step counter that the checkpoint restores (the
optimizer's ``iterations``), so an interrupted and restarted run sees the same batches as an
uninterrupted one.
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from gpflux_avdgp.checks import check_positive_int

__all__ = ["epoch_shuffled_batches"]


def epoch_shuffled_batches(
    inputs: np.ndarray,
    targets: np.ndarray,
    batch_size: int,
    *,
    seed: int,
    step_counter: tf.Variable,
    dtype: tf.DType = tf.float64,
) -> tf.data.Dataset:
    """One epoch of shuffled ``(inputs [B, D], targets [B, Q])`` batches per iteration.

    Every iteration of the dataset (Keras starts one per epoch) reads ``step_counter`` and
    uses epoch ``e = step_counter // steps_per_epoch`` to permute the rows with the stateless
    key ``[seed, e]``. Use the optimizer's ``iterations`` (after ``compile``) so the epoch is
    the one training is at, also after a restore.

    :param inputs: ``[N, D]`` features.
    :param targets: ``[N, Q]`` (or ``[N]``) targets.
    :param batch_size: rows per batch; the last batch of an epoch may be smaller.
    :param seed: shuffling seed.
    :param step_counter: an integer variable counting optimizer steps.
    :param dtype: float type of the tensors (``float64`` data is not cast to ``float32``).
    :returns: a dataset of ``ceil(N / batch_size)`` batches.
    """
    batch_size = check_positive_int("batch_size", batch_size)
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise ValueError(f"seed: expected an int, got {seed!r}")
    if not isinstance(step_counter, tf.Variable) or not step_counter.dtype.is_integer:
        raise ValueError(
            f"step_counter: expected an integer tf.Variable (e.g. model.optimizer.iterations), "
            f"got {step_counter!r}"
        )
    num_rows = len(inputs)
    if num_rows == 0 or len(targets) != num_rows:
        raise ValueError(
            f"inputs, targets: expected the same, non-zero number of rows, got {num_rows} and "
            f"{len(targets)}"
        )
    steps_per_epoch = math.ceil(num_rows / batch_size)
    features = tf.constant(inputs, dtype=dtype)  # [N, D]
    labels = tf.constant(targets, dtype=dtype)  # [N, Q]

    def one_epoch(_: tf.Tensor) -> tf.data.Dataset:
        epoch = tf.cast(step_counter.read_value(), tf.int64) // steps_per_epoch
        key = tf.stack([tf.constant(int(seed), tf.int64), epoch])
        order = tf.argsort(tf.random.stateless_uniform([num_rows], seed=key))  # [N]
        return tf.data.Dataset.from_tensor_slices(order).batch(batch_size)

    batches = tf.data.Dataset.range(1).flat_map(one_epoch)
    batches = batches.map(lambda rows: (tf.gather(features, rows), tf.gather(labels, rows)))
    batches = batches.apply(tf.data.experimental.assert_cardinality(steps_per_epoch))
    return batches.prefetch(tf.data.AUTOTUNE)
