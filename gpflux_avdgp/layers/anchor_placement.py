"""Where prior reversion's anchors start: on the amortization inputs of rows spread over the
training data, placed in one eager call before training rather than inside the training step.

Placed inside the step (the fallback of a graph traced before any placement), each replica of
a ``tf.distribute`` strategy would place its own share of the first batch, and the placement
ops would run in every step. Placed once from rows of the training data, one device, several
replicas, several steps per call and a resumed run start from the same anchors, and the step
carries no placement ops.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from .amortized_gp_layer import AmortizedGPLayer

__all__ = ["PLACEMENT_ROWS", "place_anchors", "placement_inputs"]

#: Rows of an in-memory training set that the anchors are placed on (evenly spread).
PLACEMENT_ROWS = 1024


def place_anchors(model: tf_keras.Model, inputs) -> bool:
    """Place the anchors of every :class:`~gpflux_avdgp.AmortizedGPLayer` of ``model`` whose
    anchors are not placed yet, on the amortization inputs that ``inputs`` give it (one forward
    pass in prediction mode: no draw counter moves, no weight but the anchors changes).

    ``AVDGPModel.fit`` calls it with :func:`placement_inputs`; call it before ``fit`` of another
    model type that holds such layers (otherwise its training graph places them on the first
    batch, and under a ``tf.distribute`` strategy each replica on its own share of it).

    :param model: any Keras model.
    :param inputs: model inputs ``[N, D]``, e.g. rows spread over the training set.
    :returns: whether any layer was placed.
    """
    layers = [
        layer
        for layer in model.submodules
        if isinstance(layer, AmortizedGPLayer)
        and layer.num_anchors
        and (not layer.built or not layer._anchors_placed_now())
    ]
    if not layers:
        return False
    if not model.built:
        model(inputs, training=False)  # builds the layers; anchors still unplaced
        return place_anchors(model, inputs)
    for layer in layers:
        layer._placing_anchors = True
    try:
        model(inputs, training=False)
    finally:
        for layer in layers:
            layer._placing_anchors = False
    return True


def placement_inputs(x):
    """Inputs to place the anchors on, from what ``fit`` is given: up to
    :data:`PLACEMENT_ROWS` rows evenly spread over an array or tensor (whatever its order and
    the batch size), or over the first batches of a ``tf.data.Dataset`` up to as many rows (so
    that small batches do not give ``K`` anchors on fewer rows: coinciding anchors make
    ``K_CC`` singular); ``None`` for other inputs (generators, ``Sequence``, dicts), whose
    training graph places the anchors itself."""
    if isinstance(x, tf.data.Dataset):
        batches, rows = [], 0
        for element in x:  # batches until PLACEMENT_ROWS rows (a batch may be smaller than K)
            batch = element[0] if isinstance(element, (tuple, list)) else element
            if isinstance(batch, dict) or len(batch.shape) == 0:
                return None
            batches.append(batch)
            rows += int(tf.shape(batch)[0])
            if rows >= PLACEMENT_ROWS:
                break
        if not batches:
            return None
        x = tf.concat(batches, axis=0)
    if not isinstance(x, (np.ndarray, tf.Tensor)) or len(x.shape) == 0 or not x.shape[0]:
        return None
    count = int(x.shape[0])
    kept = min(count, PLACEMENT_ROWS)
    rows = np.arange(kept) * count // kept
    return tf.gather(x, rows) if isinstance(x, tf.Tensor) else x[rows]
