"""Where prior reversion's anchors start: amortization inputs of rows spread over the training
data, placed in one eager call before training. A model type that never calls it places them
in its first training step, on that global batch (every replica's rows), with placement ops in
the step; placed once over the data, one device, several replicas, several steps per call and
a resumed run start from the same anchors."""

from __future__ import annotations

import contextlib

import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from .amortized_gp_layer import AmortizedGPLayer
from .input_guard import InputGuard

__all__ = ["PLACEMENT_ROWS", "place_anchors", "placement_inputs"]

#: Rows of the training data that the anchors are placed on (evenly spread).
PLACEMENT_ROWS = 1024


def place_anchors(model: tf_keras.Model, x) -> bool:
    """Place the anchors not placed yet of every :class:`~gpflux_avdgp.AmortizedGPLayer` of
    ``model`` on the amortization inputs of rows of ``x`` (:func:`placement_inputs`), in one
    forward pass in prediction mode (no draw counter moves, no other weight changes), and the
    model's :class:`~gpflux_avdgp.layers.input_guard.InputGuard` if it has one not placed. ``x`` is
    read only if some layer needs it. ``AVDGPModel.fit`` calls it; another model type places
    them on its first training batch unless this is called before its ``fit``.

    :param x: what ``fit`` is given: an array or tensor ``[N, D]``, or a ``tf.data.Dataset``.
    :returns: whether any layer was placed.
    """
    layers = [
        layer
        for layer in model.submodules
        if isinstance(layer, AmortizedGPLayer)
        and layer.num_anchors
        and not (layer.built and layer.anchors_placed_now())
    ]
    guard = getattr(model, "guard", None)
    guard = guard if isinstance(guard, InputGuard) and not guard.placed else None
    inputs = placement_inputs(x) if layers or guard else None
    if inputs is None:
        return False
    inputs = tf.convert_to_tensor(inputs)
    if model.inputs and inputs.dtype.is_floating:
        inputs = tf.cast(inputs, model.inputs[0].dtype)  # e.g. float64 rows of a float32 array
    if guard is not None:
        guard.place(inputs)
    if not layers:
        return True
    with contextlib.ExitStack() as placing:
        for layer in layers:
            placing.enter_context(layer.placing_anchors())
        model(inputs, training=False)
    return True


def placement_inputs(x):
    """Up to :data:`PLACEMENT_ROWS` rows spread evenly over an array or tensor ``x`` (whatever
    its order and the batch size), or over the first batches of a ``tf.data.Dataset`` up to as
    many rows (a batch smaller than ``K`` would give coinciding anchors, a singular ``K_CC``);
    ``None`` for other inputs (generators, dicts), whose training step places them itself."""
    if isinstance(x, tf.data.Dataset):
        batches, rows = [], 0
        for element in x:
            batch = element[0] if isinstance(element, (tuple, list)) else element
            if isinstance(batch, dict) or len(batch.shape) == 0:
                return None
            batches.append(batch)
            rows += int(tf.shape(batch)[0])
            if rows >= PLACEMENT_ROWS:
                break
        x = tf.concat(batches, axis=0) if batches else None
    if not isinstance(x, (np.ndarray, tf.Tensor)) or len(x.shape) == 0 or not x.shape[0]:
        return None
    count = int(x.shape[0])
    rows = np.arange(min(count, PLACEMENT_ROWS)) * count // min(count, PLACEMENT_ROWS)
    return tf.gather(x, rows) if isinstance(x, tf.Tensor) else x[rows]
