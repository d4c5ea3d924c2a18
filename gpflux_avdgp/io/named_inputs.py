"""Serving by column name: signatures whose inputs are the features, one ``[N]`` tensor each.

An export given ``feature_names`` adds ``predict_f_by_name`` and ``predict_y_by_name`` beside
the positional signatures. Their inputs are named after the features, so a client sends
columns by name in any order; TF Serving's REST API, for one, takes rows as
``{"instances": [{"width": 1.5, "height": 0.2}, ...]}``. TensorFlow itself refuses a call
that misses a feature or names one the model does not know, naming it; the columns are
stacked in the order the model was trained on, ``[N, D]``, and served as by ``predict_f`` and
``predict_y``.
"""

from __future__ import annotations

import re
from typing import Callable, Optional, Sequence

import tensorflow as tf

__all__ = ["NAMED_SIGNATURES", "check_feature_names", "named_signatures"]

#: The signatures an export with feature names adds, and the positional one each serves.
NAMED_SIGNATURES = {"predict_f_by_name": "predict_f", "predict_y_by_name": "predict_y"}

#: What TensorFlow accepts as a signature input's name.
_TENSOR_NAME = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\-/]*$")


def check_feature_names(names: Optional[Sequence[str]], input_dim: int) -> Optional[list[str]]:
    """``names`` as a list, checked: ``D`` distinct strings TensorFlow accepts as input names.

    :raises ValueError: naming the first name that does not fit, and the fix.
    """
    if names is None:
        return None
    names = list(names)
    if len(names) != input_dim or not all(isinstance(name, str) for name in names):
        raise ValueError(f"feature_names: expected {input_dim} strings, one per input, got {names}")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"feature_names: {', '.join(map(repr, repeated))} named more than once")
    invalid = [name for name in names if not _TENSOR_NAME.match(name)]
    if invalid:
        raise ValueError(
            f"feature_names: {invalid[0]!r} cannot name a signature input (letters, digits and "
            "_ . - / only, not first); rename the column, or export without feature_names"
        )
    return names


def named_signatures(
    positional: dict[str, Callable[[tf.Tensor], dict]], names: Sequence[str], dtype: tf.DType
) -> dict[str, tf.types.experimental.ConcreteFunction]:
    """The by-name signatures: for each of :data:`NAMED_SIGNATURES`, a concrete function of
    one ``[N]`` tensor per name that stacks them ``[N, D]`` in ``names``' order and calls
    ``positional[...]`` (the export's ``tf.function`` of ``x``)."""
    specs = {name: tf.TensorSpec([None], dtype, name=name) for name in names}
    signatures = {}
    for named, served in NAMED_SIGNATURES.items():
        function = positional[served]

        def by_name(columns: dict, function=function) -> dict:
            rows = tf.shape(columns[names[0]])[0]
            checks = [
                tf.debugging.assert_equal(
                    tf.shape(columns[name])[0],
                    rows,
                    message=f"{name}: expected as many rows as {names[0]}",
                )
                for name in names[1:]
            ]
            with tf.control_dependencies(checks):  # before the stack, which would fail first
                return function(tf.stack([columns[name] for name in names], axis=1))  # [N, D]

        signatures[named] = tf.function(by_name, autograph=False).get_concrete_function(specs)
    return signatures
