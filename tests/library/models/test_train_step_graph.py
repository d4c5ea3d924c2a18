"""The training step is one TensorFlow graph: no Python and no host round-trips per batch.

* the graph of ``model.train_step`` (forward, loss, gradients, Adam update), nested functions
  included, holds no op that calls back into Python (``PyFunc``, ``EagerPyFunc``) or prints;
* ``model.fit`` traces its train function on the first batch only and then runs every batch
  of every epoch through it (Python runs at trace time only);
* the same holds for every amortization rule and for classification.
"""

from __future__ import annotations

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras

import gpflux_avdgp

HOST_OPS = {"PyFunc", "PyFuncStateless", "EagerPyFunc", "Print", "PrintV2"}
NUM_DATA, DIM = 60, 2


def _model(rule: str, likelihood):
    """Two AVDGP layers; ``rule="ar2pp"`` is AR2P's layers with the predictive objective."""
    tf_keras.utils.set_random_seed(0)
    model = gpflux_avdgp.build_avdgp(
        input_dim=DIM,
        units=[2, 1],
        num_inducing=[4, 3],
        num_data=NUM_DATA,
        likelihood=likelihood,
        rule=rule,
        num_points=4,
        seed=0,
    )
    model.compile(tf_keras.optimizers.Adam(0.01))  # the loss: the rule's objective
    return model


def _op_types(graph_def: tf.compat.v1.GraphDef) -> set[str]:
    """Op types of a graph and of every function in its library (loops, conds, gradients)."""
    types = {node.op for node in graph_def.node}
    for function in graph_def.library.function:
        types.update(node.op for node in function.node_def)
    return types


def _data(classification: bool):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(NUM_DATA, DIM))
    y = np.sin(x[:, :1]) + 0.1 * rng.normal(size=(NUM_DATA, 1))
    return x, ((y > 0).astype(np.float64) if classification else y)


@pytest.mark.slow
@pytest.mark.parametrize(
    "rule, classification",
    [
        ("ar2p", False),
        *(
            pytest.param(rule, classification, marks=pytest.mark.slow)
            for rule, classification in [
                ("ar1", False),
                ("ar2", False),
                ("ar2pp", False),
                ("ar2p", True),
            ]
        ),
    ],
)
def test_train_step_graph_has_no_python_or_host_ops(rule, classification):
    likelihood = gpflow.likelihoods.Bernoulli() if classification else gpflow.likelihoods.Gaussian()
    model = _model(rule, likelihood)
    spec = (tf.TensorSpec([None, DIM], tf.float64), tf.TensorSpec([None, 1], tf.float64))
    concrete = tf.function(model.train_step).get_concrete_function(spec)
    types = _op_types(concrete.graph.as_graph_def())
    assert "AssignAddVariableOp" in types or "ResourceApplyAdam" in types  # the update is in it
    assert {"Cholesky", "MatrixTriangularSolve"} <= types  # and the GP maths
    assert not types & HOST_OPS, sorted(types & HOST_OPS)


def test_fit_traces_the_train_function_once_for_all_batches_and_epochs():
    """The first call traces ``train_function`` once (``fit`` makes Adam's slots before it: made
    in the trace, tf.function would trace a second time); later batches and epochs add none."""
    x, y = _data(classification=False)
    model = _model("ar2", gpflow.likelihoods.Gaussian())
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(20)  # 3 equal batches
    counts = []
    record = tf_keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: counts.append(
            model.train_function.experimental_get_tracing_count()
        )
    )
    model.fit(data, epochs=3, verbose=0, callbacks=[record])
    assert len(counts) == 9 and int(model.optimizer.iterations) == 9
    assert counts == [1] * 9, counts
