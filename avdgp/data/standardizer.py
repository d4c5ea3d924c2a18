"""Standardisation fitted on training rows, and two-class label checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from .csv_format import MAX_LISTED, DataError, readonly
from .dataset import Split

__all__ = [
    "Standardizer",
    "check_binary_targets",
    "check_columns_standardizable",
    "check_standardizable",
    "safe_std",
]


def check_standardizable(
    mean: np.ndarray,
    std: np.ndarray,
    max_abs: np.ndarray,
    names: Optional[Sequence[str]],
    label: str,
) -> None:
    """Refuse a column whose mean or standard deviation is not a finite float64 (values near the
    float64 maximum overflow the sums of squares: ``1e308`` squared is ``inf``), naming it.

    :param mean: ``[C]`` column means; ``std``, ``max_abs``: ``[C]`` likewise.
    :param names: the ``C`` column names in file order (a header), or ``None``.
    :raises DataError: ``label: column k ('name'): ...``.
    """
    bad = ~(np.isfinite(mean) & np.isfinite(std))
    if not bad.any():
        return
    column = int(np.argmax(bad))
    name = f" ({names[column]!r})" if names is not None else ""
    raise DataError(
        f"{label}: column {column + 1}{name}: values up to {max_abs[column]:.3g} overflow the "
        "standardisation (their mean or standard deviation is not a finite float64); rescale "
        "the column"
    )


def check_columns_standardizable(
    values: np.ndarray, names: Optional[Sequence[str]], label: str
) -> None:
    """:func:`check_standardizable` for a table held in memory, ``values`` ``[N, C]``."""
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is what is checked
        mean, std = values.mean(axis=0), values.std(axis=0)
    check_standardizable(mean, std, np.abs(values).max(axis=0), names, label)


def safe_std(values: np.ndarray) -> np.ndarray:
    """Column standard deviations, with 1.0 for (numerically) constant columns."""
    std = values.std(axis=0)
    scale = np.abs(values).max(axis=0)
    return np.where(std <= 1e-12 * scale, 1.0, std)


@dataclass(frozen=True, eq=False)
class Standardizer:
    """Affine maps to zero-mean, unit-variance inputs and targets, fitted on training data.

    :param x_mean: Input means, [D].
    :param x_std: Input standard deviations, [D] (1.0 for constant columns).
    :param y_mean: Target mean.
    :param y_std: Target standard deviation (1.0 for constant targets).
    """

    x_mean: np.ndarray
    x_std: np.ndarray
    y_mean: float
    y_std: float

    @classmethod
    def fit(
        cls, x_train: np.ndarray, y_train: np.ndarray, *, standardize_targets: bool = True
    ) -> "Standardizer":
        """Fit to training data.

        :param x_train: Training inputs, [N, D].
        :param y_train: Training targets, [N] or [N, 1].
        :param standardize_targets: If ``False`` the targets are left as they are (``y_mean``
            0, ``y_std`` 1), e.g. for classification labels.
        """
        x = np.asarray(x_train, dtype=np.float64)
        y = np.asarray(y_train, dtype=np.float64).reshape(-1)
        if x.ndim != 2 or x.shape[0] < 1:
            raise DataError(f"x_train: expected a non-empty [N, D] array, got shape {x.shape}")
        if y.shape[0] != x.shape[0]:
            raise DataError(f"y_train: expected {x.shape[0]} targets, got {y.shape[0]}")
        x_mean = x.mean(axis=0)
        x_std = safe_std(x)
        if standardize_targets:
            y_mean, y_std = float(y.mean()), float(safe_std(y[:, None])[0])
        else:
            y_mean, y_std = 0.0, 1.0
        return cls(x_mean=readonly(x_mean), x_std=readonly(x_std), y_mean=y_mean, y_std=y_std)

    def transform_x(self, x: np.ndarray) -> np.ndarray:
        """Standardize inputs ``x`` [N, D]."""
        x = np.asarray(x, dtype=np.float64)
        if x.shape[-1] != self.x_mean.shape[0]:
            raise DataError(
                f"inputs have {x.shape[-1]} columns; the standardizer was fitted to "
                f"{self.x_mean.shape[0]}"
            )
        return (x - self.x_mean) / self.x_std

    def transform_y(self, y: np.ndarray) -> np.ndarray:
        """Standardize targets ``y`` (any shape, e.g. [N] or [N, 1])."""
        return (np.asarray(y, dtype=np.float64) - self.y_mean) / self.y_std

    def transform_split(self, split: Split) -> Split:
        """``split`` with every part's inputs and targets standardised (the standardiser is
        fitted on its train part)."""
        return Split(
            x_train=self.transform_x(split.x_train),
            y_train=self.transform_y(split.y_train),
            x_val=self.transform_x(split.x_val),
            y_val=self.transform_y(split.y_val),
            x_test=self.transform_x(split.x_test),
            y_test=self.transform_y(split.y_test),
        )

    def inverse_transform_y(self, y: np.ndarray) -> np.ndarray:
        """Map standardized targets (or predictive means) back to the original scale.

        Predictive standard deviations scale by ``y_std`` alone (variances by ``y_std ** 2``).
        """
        return np.asarray(y, dtype=np.float64) * self.y_std + self.y_mean


def check_binary_targets(targets: np.ndarray) -> np.ndarray:
    """Map two-class labels to 0.0 / 1.0 (the smaller value to 0, the larger to 1).

    Accepts {0, 1}, {-1, 1}, {1, 2} or any two distinct finite values.

    :param targets: Labels, any shape (e.g. [N] or [N, 1]).
    :return: float64 array of the same shape holding 0.0 and 1.0.
    :raises DataError: If the labels are empty, not finite, or do not take exactly 2 values.
    """
    try:
        values = np.asarray(targets, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError("classification targets must be numbers") from None
    if values.size == 0:
        raise DataError("classification targets are empty")
    if not np.isfinite(values).all():
        raise DataError(
            f"classification targets hold {int((~np.isfinite(values)).sum())} NaN or "
            "infinite values"
        )
    distinct = np.unique(values)
    if distinct.size != 2:
        shown = ", ".join(f"{v:g}" for v in distinct[:MAX_LISTED])
        more = ", ..." if distinct.size > MAX_LISTED else ""
        raise DataError(
            f"classification needs exactly 2 distinct target values, found {distinct.size}: "
            f"{shown}{more}"
        )
    return (values == distinct[1]).astype(np.float64)
