"""Class labels of a classification target: numbers or strings, mapped to class indices.

A classification target column holds ``K`` distinct labels, numbers (``0``/``1``, ``1``..``3``)
or text (``yes``/``no``, ``setosa``/``versicolor``/``virginica``). The model reads class
indices ``0..K-1``; the labels, in index order, are kept beside the data
(:attr:`~avdgp.data.Dataset.classes`) and written back by ``avdgp predict``.

Order: if every label is a number, the labels are numbers sorted by value (``"1"`` and
``"1.0"`` are one class); otherwise they are the stripped strings, sorted as text. So a binary
target ``{0, 1}`` keeps its meaning (index 1 is label 1), as ``check_binary_targets`` did.
"""

from __future__ import annotations

from typing import Iterable, Union

import numpy as np

from .csv_format import MAX_LISTED, DataError, is_number

__all__ = [
    "MAX_CLASSES",
    "ClassLabel",
    "LabelCodes",
    "check_class_count",
    "encode_labels",
    "format_label",
]

#: Most classes a classification target may have (more is taken for a regression target).
MAX_CLASSES = 100

ClassLabel = Union[float, str]


class LabelCodes:
    """Codes for labels in order of first appearance, as a ``np.loadtxt`` converter.

    Call it on each raw cell (it returns the cell's code as a float); :meth:`indices` then maps
    the codes to class indices in the order of :func:`encode_labels`.
    """

    def __init__(self) -> None:
        self._codes: dict[str, int] = {}

    def __call__(self, cell: str) -> float:
        text = cell.strip()
        if not text:
            raise ValueError("empty class label")
        return float(self._codes.setdefault(text, len(self._codes)))

    def indices(self, codes: np.ndarray, label: str) -> tuple[np.ndarray, tuple[ClassLabel, ...]]:
        """``(class indices like codes, float64; the K labels in index order)``."""
        raw = list(self._codes)  # raw[c] is the label of code c
        classes, index_of_raw = _classes(raw, label)
        lookup = np.asarray(index_of_raw, dtype=np.float64)
        return lookup[np.asarray(codes, dtype=np.int64)], classes


def _classes(raw: list[str], label: str) -> tuple[tuple[ClassLabel, ...], list[int]]:
    """The sorted classes of distinct stripped labels ``raw`` and each one's class index."""
    if raw and all(is_number(text) for text in raw):
        values = [float(text) for text in raw]
        bad = [text for text, value in zip(raw, values) if not np.isfinite(value)]
        if bad:
            raise DataError(f"{label}: class label {bad[0]!r} is not a finite number")
        classes: tuple[ClassLabel, ...] = tuple(sorted(set(values)))
        position = {value: index for index, value in enumerate(classes)}
        return classes, [position[value] for value in values]
    classes = tuple(sorted(set(raw)))
    position = {text: index for index, text in enumerate(classes)}
    return classes, [position[text] for text in raw]


def encode_labels(
    labels: Iterable[object], label: str = "labels"
) -> tuple[np.ndarray, tuple[ClassLabel, ...]]:
    """Class indices ``[N]`` (float64) and the ``K`` labels in index order.

    :param labels: ``N`` labels: numbers or strings (stripped; an empty one is an error).
    :param label: how messages name the data.
    :raises DataError: for an empty or non-finite label.
    """
    codes = LabelCodes()
    raw = []
    for row, value in enumerate(labels, start=1):
        if isinstance(value, (bytes, np.bytes_)):
            value = value.decode("utf-8", errors="replace")
        text = value if isinstance(value, str) else repr(float(value))
        try:
            raw.append(codes(text))
        except ValueError:
            raise DataError(f"{label}: row {row}: the class label is empty") from None
    return codes.indices(np.asarray(raw), label)


def check_class_count(classes: tuple[ClassLabel, ...], label: str) -> None:
    """Refuse what is unlikely to be a classification target, listing some labels: fewer than
    2 classes, more than :data:`MAX_CLASSES`, or more than 2 numeric labels that are not all
    integers (two labels may be any numbers, e.g. ``-1``/``1`` or ``0.5``/``1.5``).

    :param classes: the distinct labels, sorted (``MAX_CLASSES + 1`` of them stand for "more").
    """
    shown = ", ".join(format_label(value) for value in classes[:MAX_LISTED])
    shown += ", ..." if len(classes) > MAX_LISTED else ""
    if len(classes) < 2:
        raise DataError(
            f"{label}: classification needs at least 2 classes, the target has "
            f"{len(classes)}: {shown}"
        )
    if len(classes) > MAX_CLASSES:
        raise DataError(
            f"{label}: the target has more than {MAX_CLASSES} distinct values ({shown}), more "
            "classes than classification accepts; is it a regression target?"
        )
    fractional = [
        value for value in classes if not isinstance(value, str) and not float(value).is_integer()
    ]
    if len(classes) > 2 and fractional:
        raise DataError(
            f"{label}: the target has {len(classes)} distinct numbers, not all integers "
            f"({shown}); classes with more than 2 numeric labels must be integers (or text); "
            "is it a regression target?"
        )


def format_label(value: ClassLabel) -> str:
    """A class label as a data file writes it: ``2.0`` -> ``2``, ``0.5`` -> ``0.5``,
    ``"yes"`` -> ``yes``."""
    if isinstance(value, str):
        return value
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)
