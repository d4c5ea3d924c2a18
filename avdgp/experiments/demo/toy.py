"""The AVDGP paper's toy binary classification problem: points inside the letters "DGP".

Inputs are uniform on the unit square, ``x1, x2 ~ U(0, 1)``, and the label is 1 iff the point
lies inside the letters, drawn with matplotlib's bundled DejaVu Sans Bold font. The text is
stretched to span ``[0.05, 0.95]`` horizontally and ``[0.15, 0.85]`` vertically, which makes about
a third of the square positive.

The counters (holes) of letters such as "D" and "P" are outside the letters. Matplotlib's
``Path.contains_points`` on the compound text path reports points in those holes as inside
(it tests the sub-paths separately), so :func:`letters_mask` counts how many closed outlines
contain a point and takes the parity (the even-odd rule) instead.
"""

from __future__ import annotations

import functools

import numpy as np

from avdgp.data import Dataset, Split, split_dataset

__all__ = ["letters_mask", "make_toy_dataset", "toy_splits", "TOY_BOX"]

#: Box the text is scaled into: ``(x_min, x_max, y_min, y_max)`` in the unit square.
TOY_BOX = (0.05, 0.95, 0.15, 0.85)

# Outlines are flattened to polygons at this many units per em, so curves get fine segments.
_FLATTEN_SIZE = 1000.0


@functools.lru_cache(maxsize=16)
def _letter_polygons(text: str) -> tuple[np.ndarray, ...]:
    """Closed glyph outlines of ``text`` as polygons [M, 2] scaled into :data:`TOY_BOX`."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextPath
    from matplotlib.transforms import Affine2D

    path = TextPath(
        (0.0, 0.0), text, size=1.0, prop=FontProperties(family="DejaVu Sans", weight="bold")
    )
    polygons = [
        np.asarray(p, dtype=np.float64)
        for p in path.to_polygons(Affine2D().scale(_FLATTEN_SIZE), closed_only=True)
        if len(p) >= 4
    ]
    if not polygons:
        raise ValueError(f"text {text!r} has no filled glyph outlines")
    vertices = np.concatenate(polygons, axis=0)
    low, high = vertices.min(axis=0), vertices.max(axis=0)
    x0, x1, y0, y1 = TOY_BOX
    scale = np.array([x1 - x0, y1 - y0]) / (high - low)
    offset = np.array([x0, y0])
    result = []
    for polygon in polygons:
        scaled = (polygon - low) * scale + offset
        scaled.setflags(write=False)
        result.append(scaled)
    return tuple(result)


def letters_mask(points: np.ndarray, text: str = "DGP") -> np.ndarray:
    """Whether each point lies inside the letters of ``text`` (holes of letters are outside).

    :param points: Points in the unit square, [N, 2].
    :param text: The letters, laid out in one line and stretched into :data:`TOY_BOX`.
    :return: bool [N], ``True`` inside a letter.
    """
    from matplotlib.path import Path

    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"text: expected a non-empty string, got {text!r}")
    points = np.asarray(points, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] != 2:
        raise ValueError(f"points: expected an array of shape [N, 2], got {points.shape}")
    inside = np.zeros(points.shape[0], dtype=bool)
    if points.shape[0] == 0:
        return inside
    for polygon in _letter_polygons(text):
        # Even-odd rule: a point inside an outer outline and a hole outline is outside.
        inside ^= Path(polygon, closed=True).contains_points(points)
    return inside


def make_toy_dataset(num_rows: int, seed: int = 0) -> Dataset:
    """Sample the toy classification data set: ``x ~ U(0, 1)^2``, label 1 inside "DGP".

    :param num_rows: Number of points ``N``.
    :param seed: Seed of ``np.random.default_rng``; the same seed gives the same data.
    :return: A :class:`Dataset` named ``"dgp-letters"`` with inputs [N, 2] and targets [N] of
        0.0 / 1.0, without test masks.
    """
    if isinstance(num_rows, bool) or not isinstance(num_rows, (int, np.integer)):
        raise ValueError(f"num_rows: expected an integer >= 1, got {num_rows!r}")
    if num_rows < 1:
        raise ValueError(f"num_rows: expected an integer >= 1, got {num_rows!r}")
    rng = np.random.default_rng(seed)
    inputs = rng.uniform(0.0, 1.0, size=(int(num_rows), 2))
    targets = letters_mask(inputs).astype(np.float64)
    return Dataset(
        name="dgp-letters",
        inputs=inputs,
        targets=targets,
        feature_names=["x1", "x2"],
        target_name="inside",
    )


def toy_splits(num_rows: int, seed: int = 0) -> Split:
    """The paper's protocol: sample ``num_rows`` and split them train:test:val = 3:2:1.

    :param num_rows: Total number of points (train + test + validation); a multiple of 6
        gives exact 3:2:1 counts.
    :param seed: Seed for the data and, through a derived seed, for the split.
    :return: The :class:`Split` (targets [n, 1] of 0.0 / 1.0).
    """
    dataset = make_toy_dataset(num_rows, seed)
    split_seed = int(np.random.SeedSequence([int(seed), 1]).generate_state(1)[0])
    return split_dataset(dataset, seed=split_seed, test_fraction=2 / 6, val_fraction=1 / 6)
