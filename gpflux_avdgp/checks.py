"""Argument checks shared by the public constructors: each error names the argument.

An argument of the wrong type raises ``TypeError``, a value out of range ``ValueError``.
"""

from __future__ import annotations

import enum
from typing import Optional, TypeVar

import numpy as np
import tensorflow as tf

__all__ = [
    "NON_FINITE",
    "checked_finite",
    "check_positive_int",
    "check_nonnegative_int",
    "check_choice",
    "check_feature_matrix",
]

E = TypeVar("E", bound=enum.Enum)


def _check_int(name: str, value: object, minimum: int) -> int:
    expected = f"{name}: expected an integer >= {minimum}, got {value!r}"
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{expected} ({type(value).__name__})")
    if value < minimum:
        raise ValueError(expected)
    return int(value)


def check_positive_int(name: str, value: object) -> int:
    """Return ``value`` as an ``int`` if it is an integer ``>= 1``.

    :raises TypeError: for a non-integer (``bool`` included); ``ValueError`` for one below 1.
    """
    return _check_int(name, value, 1)


def check_nonnegative_int(name: str, value: object) -> int:
    """Return ``value`` as an ``int`` if it is an integer ``>= 0``.

    :raises TypeError: for a non-integer (``bool`` included); ``ValueError`` for a negative one.
    """
    return _check_int(name, value, 0)


def check_optional_positive_int(name: str, value: object) -> Optional[int]:
    """Like :func:`check_positive_int` but lets ``None`` through."""
    return None if value is None else check_positive_int(name, value)


def check_choice(name: str, value: object, choices: type[E]) -> E:
    """Return the member of the ``Enum`` ``choices`` named or valued ``value``.

    :raises TypeError: if ``value`` is neither a member nor a string; ``ValueError`` for a
        string that names no member.
    """
    if isinstance(value, choices):
        return value
    allowed = ", ".join(repr(m.value) for m in choices)
    if not isinstance(value, str):
        raise TypeError(
            f"{name}: expected one of {allowed}, got {value!r} ({type(value).__name__})"
        )
    for member in choices:
        if value.lower() == str(member.value):
            return member
    raise ValueError(f"{name}: expected one of {allowed}, got {value!r}")


def check_feature_matrix(
    name: str, value: object, num_features: Optional[int] = None
) -> np.ndarray:
    """Return ``value`` as a finite, non-empty numeric array ``[N, D]`` (``D = num_features``).

    Checks, in this order: a numeric (integer or floating) dtype (else ``TypeError``), rank 2,
    the width ``num_features`` (when given), at least one row, no NaN or infinite value (each
    else ``ValueError``). Each error names ``name`` with the expected and actual value; a
    NaN/inf error gives the (0-based) ``[row, column]`` of the first bad value.

    :param name: the argument's name in error messages.
    :param value: an array-like or an eager tensor, ``[N, D]``.
    :param num_features: the required ``D``; ``None`` accepts any ``D >= 1``.
    :returns: the input as a NumPy array (not copied when it already is one), ``[N, D]``.
    """
    if hasattr(value, "numpy") and callable(value.numpy):  # eager tf.Tensor / tf.Variable
        value = value.numpy()
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as error:  # ragged nested lists, odd objects
        raise TypeError(
            f"{name}: expected a numeric array [N, D], got {type(value).__name__} ({error})"
        ) from None
    width = "D" if num_features is None else str(num_features)
    if array.dtype.kind not in "iuf":
        raise TypeError(
            f"{name}: expected a numeric (integer or floating) array [N, {width}], got dtype "
            f"{array.dtype} ({type(value).__name__})"
        )
    if array.ndim != 2:
        hint = ""
        if array.ndim == 1 and num_features not in (None, 1) and array.size == num_features:
            hint = " (reshape a vector with x.reshape(1, -1): one row)"
        elif array.ndim == 1:
            hint = f" (reshape a vector with x.reshape(-1, {num_features or 1}))"
        raise ValueError(
            f"{name}: expected a 2-d array [N, {width}], got rank {array.ndim} with shape "
            f"{array.shape}{hint}"
        )
    if num_features is not None and array.shape[1] != num_features:
        raise ValueError(
            f"{name}: expected {num_features} feature columns [N, {num_features}], got shape "
            f"{array.shape}"
        )
    if array.shape[0] == 0:
        raise ValueError(f"{name}: empty batch, expected at least one row, got shape {array.shape}")
    if array.dtype.kind == "f":
        bad = ~np.isfinite(array)
        if bad.any():
            row, col = (int(i) for i in np.argwhere(bad)[0])
            count = int(bad.sum())
            plural = "value is" if count == 1 else "values are"
            raise ValueError(
                f"{name}: {count} {plural} NaN or inf (first at row {row}, column {col}: "
                f"{name}[{row}, {col}] = {float(array[row, col])!r})"
            )
    return array


def check_finite_data(**named: object) -> None:
    """Refuse NaN or inf in each named value that is in-memory data (NumPy arrays, eager
    tensors, lists, tuples or dicts of them, e.g. ``fit``'s ``x`` and ``y``); datasets and
    generators pass unread.

    :raises ValueError: naming the array, how many values are bad and where the first is.
    """
    for name, value in named.items():
        if isinstance(value, (list, tuple, dict)):
            items = value.items() if isinstance(value, dict) else enumerate(value)
            check_finite_data(**{f"{name}[{key!r}]": item for key, item in items})
            continue
        if hasattr(value, "numpy") and callable(value.numpy) and hasattr(value, "dtype"):
            value = value.numpy()
        bad = ~np.isfinite(value) if getattr(value, "dtype", np.dtype(int)).kind in "fc" else None
        if bad is not None and bad.any():
            first = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(
                f"{name}: {int(bad.sum())} of {value.size} values are NaN or inf (first at "
                f"[{', '.join(map(str, first))}]: {value[first]!r}); drop or impute those rows"
            )


#: Opens the message of every in-graph check of :func:`checked_finite`.
NON_FINITE = "[non-finite]"


def checked_finite(value: object, what: str) -> object:
    """``value`` (a tensor, array or nested structure of them) with every floating tensor
    passed through ``tf.debugging.check_numerics``: a step that meets NaN or inf stops there,
    before anything that depends on it (the gradients, the optimizer's update) runs.

    :param what: what the value is, for the message (``"the targets y"``).
    :raises tf.errors.InvalidArgumentError: when run, if a value is NaN or inf; the message
        starts with :data:`NON_FINITE` and ``what``.
    """

    def check(item: object) -> object:
        if isinstance(item, (tf.Tensor, tf.Variable, np.ndarray)):
            tensor = tf.convert_to_tensor(item)
            if tensor.dtype.is_floating:
                return tf.debugging.check_numerics(tensor, f"{NON_FINITE} {what} hold NaN or inf")
        return item

    return tf.nest.map_structure(check, value)
