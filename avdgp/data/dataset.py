"""The in-memory containers: a whole data set, and its train / validation / test parts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from .csv_format import DataError, readonly

__all__ = ["Dataset", "Split"]


@dataclass(frozen=True, eq=False)
class Dataset:
    """A regression or classification data set held in memory.

    The arrays are stored as read-only float64 (``test_masks`` as bool) copies.

    :param name: Short name, e.g. the file stem or the UCI folder name.
    :param inputs: Inputs, [N, D] float64.
    :param targets: Targets, [N] float64.
    :param test_masks: Optional predefined test splits, [N, K] bool; column ``k`` marks the test
        rows of split ``k``.
    :param feature_names: Optional names of the ``D`` input columns (from a CSV header).
    :param target_name: Optional name of the target column (from a CSV header).
    :param classes: For a data set read with class labels (``load_dataset(...,
        class_labels=True)``): the ``K`` labels, numbers or strings, in class-index order;
        ``targets`` then holds class indices ``0..K-1``.
    """

    name: str
    inputs: np.ndarray
    targets: np.ndarray
    test_masks: Optional[np.ndarray] = None
    feature_names: Optional[list[str]] = None
    target_name: Optional[str] = None
    classes: Optional[tuple] = None

    def __post_init__(self) -> None:
        inputs = np.asarray(self.inputs, dtype=np.float64)
        targets = np.asarray(self.targets, dtype=np.float64)
        if inputs.ndim != 2:
            raise DataError(f"{self.name}: inputs must be a 2-d array [N, D], got {inputs.shape}")
        if targets.ndim != 1 or targets.shape[0] != inputs.shape[0]:
            raise DataError(
                f"{self.name}: targets must be a 1-d array of {inputs.shape[0]} values, "
                f"got shape {targets.shape}"
            )
        object.__setattr__(self, "inputs", readonly(inputs))
        object.__setattr__(self, "targets", readonly(targets))
        if self.test_masks is not None:
            masks = np.asarray(self.test_masks)
            if masks.ndim != 2 or masks.shape[0] != inputs.shape[0]:
                raise DataError(
                    f"{self.name}: test_masks must be a 2-d array [{inputs.shape[0]}, K], "
                    f"got shape {masks.shape}"
                )
            object.__setattr__(self, "test_masks", readonly(masks.astype(bool)))
        if self.feature_names is not None:
            names = [str(n) for n in self.feature_names]
            if len(names) != inputs.shape[1]:
                raise DataError(
                    f"{self.name}: {len(names)} feature names for {inputs.shape[1]} input columns"
                )
            object.__setattr__(self, "feature_names", names)
        if self.classes is not None:
            self._check_classes(targets)

    def _check_classes(self, targets: np.ndarray) -> None:
        classes = tuple(self.classes)
        if not classes:
            raise DataError(f"{self.name}: classes: expected at least one class label")
        bad = (targets != np.round(targets)) | (targets < 0) | (targets >= len(classes))
        if bad.any():
            row = int(np.argmax(bad))
            raise DataError(
                f"{self.name}: targets: expected class indices 0..{len(classes) - 1} with "
                f"classes, row {row + 1} is {targets[row]!r}"
            )
        object.__setattr__(self, "classes", classes)

    @property
    def num_classes(self) -> Optional[int]:
        """Number of classes ``K`` of a data set read with class labels, else ``None``."""
        return None if self.classes is None else len(self.classes)

    @property
    def num_rows(self) -> int:
        """Number of observations ``N``."""
        return int(self.inputs.shape[0])

    @property
    def num_features(self) -> int:
        """Number of input columns ``D``."""
        return int(self.inputs.shape[1])

    def __repr__(self) -> str:
        masks = "none" if self.test_masks is None else str(self.test_masks.shape[1])
        classes = "" if self.classes is None else f", num_classes={len(self.classes)}"
        return (
            f"Dataset(name={self.name!r}, num_rows={self.num_rows}, "
            f"num_features={self.num_features}, test_masks={masks}{classes})"
        )


@dataclass(frozen=True, eq=False)
class Split:
    """Train / validation / test parts of a data set (validation may have 0 rows).

    :param x_train: Training inputs, [n_train, D].
    :param y_train: Training targets, [n_train, 1].
    :param x_val: Validation inputs, [n_val, D].
    :param y_val: Validation targets, [n_val, 1].
    :param x_test: Test inputs, [n_test, D].
    :param y_test: Test targets, [n_test, 1].
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    def __repr__(self) -> str:
        return (
            f"Split(train={self.x_train.shape[0]}, val={self.x_val.shape[0]}, "
            f"test={self.x_test.shape[0]}, num_features={self.x_train.shape[1]})"
        )
