"""Average ranks of methods across data sets and seeds (like the paper's Table 3)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .common import as_float_array

__all__ = ["average_ranks"]


def _average_tied_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks ``1..M`` of ``values [M]`` (smallest first); ties share their average rank."""
    less = np.sum(values[None, :] < values[:, None], axis=1)  # [M]
    equal = np.sum(values[None, :] == values[:, None], axis=1)  # [M], counts itself
    return less + 0.5 * (equal + 1.0)


def average_ranks(
    scores: Mapping[str, Mapping[str, Sequence[float]]],
) -> dict[str, tuple[float, float]]:
    """Average rank of each method across datasets, as mean and spread over seeds.

    ``scores[dataset][method]`` is the per-seed list of a lower-is-better metric, seed ``k`` at
    index ``k``. For every seed ``k``, the methods are ranked within each dataset (rank 1 is the
    lowest score; ties get the average of the ranks they span, like ``scipy.stats.rankdata``) and
    the ranks are averaged over datasets. The result is the mean and the population standard
    deviation (``ddof = 0``) of these per-seed average ranks.

    Incomplete results: the methods are all those named in any dataset. A (dataset, seed ``k``)
    pair is used only if every method has a (non-NaN) value at index ``k`` in that dataset, so a
    dataset lacking a method is dropped entirely and a method with fewer seeds drops the later
    seeds of that dataset. Seeds with no usable dataset are left out of the mean and the spread.

    :param scores: ``{dataset: {method: [score per seed]}}``.
    :return: ``{method: (mean average rank, std over seeds)}`` in order of first appearance.
    :raises ValueError: if ``scores`` is malformed or no (dataset, seed) pair is comparable.
    """
    if not isinstance(scores, Mapping) or len(scores) == 0:
        raise ValueError(
            f"scores: expected a non-empty mapping dataset -> method -> list, got {scores!r}"
        )
    methods: list[str] = []
    tables: dict[str, dict[str, np.ndarray]] = {}
    for dataset, per_method in scores.items():
        if not isinstance(per_method, Mapping):
            raise ValueError(
                f"scores[{dataset!r}]: expected a mapping method -> list of scores, "
                f"got {type(per_method).__name__}"
            )
        tables[dataset] = {}
        for method, values in per_method.items():
            array = as_float_array(f"scores[{dataset!r}][{method!r}]", values)
            if array.ndim != 1:
                raise ValueError(
                    f"scores[{dataset!r}][{method!r}]: expected a 1-D list of per-seed scores, "
                    f"got shape {array.shape}"
                )
            tables[dataset][method] = array
            if method not in methods:
                methods.append(method)
    num_seeds = max((len(a) for table in tables.values() for a in table.values()), default=0)

    per_seed_ranks = []  # one [M] vector of average ranks per usable seed
    for seed in range(num_seeds):
        ranks = []
        for table in tables.values():
            if not all(method in table and len(table[method]) > seed for method in methods):
                continue
            values = np.array([table[method][seed] for method in methods])  # [M]
            if np.any(np.isnan(values)):
                continue
            ranks.append(_average_tied_ranks(values))
        if ranks:
            per_seed_ranks.append(np.mean(ranks, axis=0))
    if not per_seed_ranks:
        raise ValueError(
            "scores: expected at least one dataset and seed where every method "
            f"({', '.join(map(repr, methods))}) has a score, got none"
        )
    stacked = np.stack(per_seed_ranks)  # [K, M]
    mean, std = stacked.mean(axis=0), stacked.std(axis=0)
    return {method: (float(mean[i]), float(std[i])) for i, method in enumerate(methods)}
