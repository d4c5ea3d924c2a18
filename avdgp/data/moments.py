"""Column moments of a table read chunk by chunk (the standardisation pass over shards)."""

from __future__ import annotations

import numpy as np

__all__ = ["RunningMoments"]


class RunningMoments:
    """Count, mean, sum of squared deviations and largest magnitude per column, merged chunk by
    chunk with Chan, Golub and LeVeque's pairwise update.

    The moments are kept for the data minus a shift, the first row seen, so that the merged
    means are of small numbers and keep their absolute precision: for a column like
    ``1e9 + N(0, 1e-3)`` the standard deviation stays accurate to about ``1e-9`` (a running
    mean near ``1e9`` would carry rounding errors of ``1e-7`` into every merge).
    """

    def __init__(self, num_columns: int):
        self.count = 0
        self.shift = np.zeros(num_columns)  # [C], the first row
        self.shifted_mean = np.zeros(num_columns)  # [C], mean of (x - shift)
        self.squares = np.zeros(num_columns)  # [C], sum of (x - mean)^2
        self.max_abs = np.zeros(num_columns)  # [C]

    def update(self, chunk: np.ndarray) -> None:
        """Merge ``chunk`` [n, C] (float64)."""
        n = chunk.shape[0]
        if n == 0:
            return
        if self.count == 0:
            self.shift = chunk[0].copy()
        centred = chunk - self.shift  # [n, C]
        chunk_mean = centred.mean(axis=0)  # [C]
        chunk_squares = np.square(centred - chunk_mean).sum(axis=0)  # [C]
        total = self.count + n
        delta = chunk_mean - self.shifted_mean  # [C]
        self.shifted_mean = self.shifted_mean + delta * (n / total)
        self.squares = self.squares + chunk_squares + delta**2 * (self.count * n / total)
        self.max_abs = np.maximum(self.max_abs, np.abs(chunk).max(axis=0))
        self.count = total

    @property
    def mean(self) -> np.ndarray:
        """Mean per column, [C]."""
        return self.shift + self.shifted_mean

    @property
    def std(self) -> np.ndarray:
        """Population standard deviation per column (NumPy's ``std``, ``ddof=0``), [C]."""
        return np.sqrt(self.squares / max(self.count, 1))
