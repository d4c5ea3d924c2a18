"""Train / validation / test splits: the paper's random 8:1:1, or a data set's own test masks."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from .csv_format import DataError
from .dataset import Dataset, Split

__all__ = ["split_dataset"]


def _check_fraction(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise DataError(f"{name}: expected a number in [0, 1), got {value!r}")
    value = float(value)
    if not math.isfinite(value) or not 0.0 <= value < 1.0:
        raise DataError(f"{name}: expected a number in [0, 1), got {value!r}")
    return value


def _count(fraction: float, total: int) -> int:
    """``fraction * total`` rounded half up (robust to float round-off like 0.1 * 30)."""
    return int(math.floor(fraction * total + 0.5 + 1e-9))


def _make_split(dataset: Dataset, train: np.ndarray, val: np.ndarray, test: np.ndarray) -> Split:
    x, y = dataset.inputs, dataset.targets[:, None]
    train, val, test = np.sort(train), np.sort(val), np.sort(test)
    return Split(
        x_train=x[train],
        y_train=y[train],
        x_val=x[val],
        y_val=y[val],
        x_test=x[test],
        y_test=y[test],
    )


def split_dataset(
    dataset: Dataset,
    *,
    seed: int = 0,
    split: Optional[int] = None,
    test_fraction: float = 0.1,
    val_fraction: float = 0.1,
) -> Split:
    """Split ``dataset`` into train / validation / test parts (each kept in file order).

    With ``split`` the test rows are those marked in column ``split`` of ``dataset.test_masks``
    and the validation rows a random ``val_fraction`` of the remaining rows. Without it, a random
    permutation gives ``round(test_fraction * N)`` test rows, ``round(val_fraction * N)``
    validation rows and the rest for training (8:1:1 by default, as in the AVDGP paper).

    :param dataset: The data set.
    :param seed: Seed of ``np.random.default_rng`` for the random parts.
    :param split: Index of the predefined test mask to use, or ``None`` for a random split.
    :param test_fraction: Fraction of rows for testing (random split only), in (0, 1).
    :param val_fraction: Fraction of rows (with ``split``: of the non-test rows) for validation,
        in [0, 1); 0 gives an empty validation part.
    :return: The :class:`Split`, with targets as [n, 1] columns.
    :raises DataError: For bad fractions or mask index, or if a part would be too small (at least
        2 training rows and 1 test row).
    """
    test_fraction = _check_fraction("test_fraction", test_fraction)
    val_fraction = _check_fraction("val_fraction", val_fraction)
    if split is None and test_fraction <= 0.0:
        raise DataError(f"test_fraction: expected a number in (0, 1), got {test_fraction!r}")
    if split is None and test_fraction + val_fraction >= 1.0:
        raise DataError(
            f"test_fraction + val_fraction must be < 1 to leave training rows, "
            f"got {test_fraction!r} + {val_fraction!r}"
        )
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise DataError(f"seed: expected an integer >= 0, got {seed!r}")
    rng = np.random.default_rng(int(seed))
    n = dataset.num_rows

    if split is not None:
        masks = dataset.test_masks
        if masks is None:
            raise DataError(f"{dataset.name}: has no predefined test splits; leave out split")
        k = masks.shape[1]
        if (
            isinstance(split, bool)
            or not isinstance(split, (int, np.integer))
            or not (0 <= split < k)
        ):
            raise DataError(
                f"{dataset.name}: split {split!r} is out of range; the data set has {k} test "
                f"splits (0..{k - 1})"
            )
        is_test = masks[:, int(split)]
        test = np.flatnonzero(is_test)
        rest = rng.permutation(np.flatnonzero(~is_test))
        n_val = _count(val_fraction, rest.size)
        val, train = rest[:n_val], rest[n_val:]
        what = f"split {split}"
    else:
        order = rng.permutation(n)
        n_test = _count(test_fraction, n)
        n_val = _count(val_fraction, n)
        test, val, train = order[:n_test], order[n_test : n_test + n_val], order[n_test + n_val :]
        what = f"test_fraction={test_fraction}, val_fraction={val_fraction}"

    if test.size < 1:
        raise DataError(f"{dataset.name}: {what} leaves no test rows out of {n}")
    if train.size < 2:
        raise DataError(
            f"{dataset.name}: {what} leaves {train.size} training rows out of {n} (need >= 2)"
        )
    return _make_split(dataset, train, val, test)
