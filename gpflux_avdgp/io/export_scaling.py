"""The affine maps an export applies between raw and model units: a standardizer's or the
explicit ``x_mean``, ``x_std``, ``y_mean``, ``y_std``, checked into vectors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

__all__ = ["ArrayLike", "Scaling", "scaling_of"]

ArrayLike = Union[np.ndarray, float, list]


@dataclass(frozen=True)
class Scaling:
    """Affine maps between raw and model units: ``x_model = (x - x_mean) / x_std`` and
    ``y = y_model * y_std + y_mean``."""

    x_mean: np.ndarray  # [D]
    x_std: np.ndarray  # [D]
    y_mean: np.ndarray  # [Q]
    y_std: np.ndarray  # [Q]
    inputs: bool  # whether x is standardised
    targets: bool  # whether y is standardised


def _vector(name: str, value: object, length: int, positive: bool) -> np.ndarray:
    """``value`` (a scalar or ``[length]``) as a finite float64 vector ``[length]``."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected numbers, got {value!r}") from None
    if array.ndim == 0:
        array = np.full(length, float(array))
    if array.shape != (length,):
        raise ValueError(f"{name}: expected a scalar or shape ({length},), got {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name}: expected finite values, got {array.tolist()}")
    if positive and (array <= 0).any():
        raise ValueError(f"{name}: expected positive values, got {array.tolist()}")
    return array


def scaling_of(
    standardizer: object,
    x_mean: Optional[ArrayLike],
    x_std: Optional[ArrayLike],
    y_mean: Optional[ArrayLike],
    y_std: Optional[ArrayLike],
    input_dim: int,
    output_dim: int,
) -> Scaling:
    """Resolve ``standardizer`` or the explicit statistics into checked vectors.

    :raises ValueError: for both kinds given, half a pair, or a bad shape or value.
    """
    explicit = {"x_mean": x_mean, "x_std": x_std, "y_mean": y_mean, "y_std": y_std}
    if standardizer is not None:
        given = [name for name, value in explicit.items() if value is not None]
        if given:
            raise ValueError(
                f"standardizer: give either a standardizer or {', '.join(given)}, not both"
            )
        if isinstance(standardizer, dict):
            explicit = {name: standardizer.get(name) for name in explicit}
        else:
            explicit = {name: getattr(standardizer, name, None) for name in explicit}
        missing = [name for name, value in explicit.items() if value is None]
        if missing:
            raise ValueError(
                f"standardizer: expected x_mean, x_std, y_mean and y_std (like "
                f"avdgp.data.Standardizer), {', '.join(missing)} missing in "
                f"{type(standardizer).__name__}"
            )
    for first, second in (("x_mean", "x_std"), ("y_mean", "y_std")):
        if (explicit[first] is None) != (explicit[second] is None):
            raise ValueError(f"{first}, {second}: give both or neither")
    inputs, targets = explicit["x_mean"] is not None, explicit["y_mean"] is not None
    scaled_y_mean = _vector("y_mean", explicit["y_mean"] if targets else 0.0, output_dim, False)
    scaled_y_std = _vector("y_std", explicit["y_std"] if targets else 1.0, output_dim, True)
    # y_mean = 0, y_std = 1 (a classification Standardizer) is no target scaling at all
    identity = not scaled_y_mean.any() and bool(np.all(scaled_y_std == 1.0))
    return Scaling(
        x_mean=_vector("x_mean", explicit["x_mean"] if inputs else 0.0, input_dim, False),
        x_std=_vector("x_std", explicit["x_std"] if inputs else 1.0, input_dim, True),
        y_mean=scaled_y_mean,
        y_std=scaled_y_std,
        inputs=inputs,
        targets=targets and not identity,
    )
