"""The result of one training run, typed: :class:`RunRecord` (what ``avdgp fit`` prints, the
bench tabulates and ``run.json`` stores under ``result``) and :class:`DataColumns` (the data
layout ``avdgp predict`` and ``avdgp export`` read back from ``run.json``).

Both runners (arrays and streamed shards) build their record with the same constructor, and
:func:`~avdgp.training.rundir.save_run` writes ``run.json`` once, with the data layout
in it; nothing patches the file afterwards."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional

__all__ = ["DataColumns", "RunRecord"]


@dataclass(frozen=True)
class DataColumns:
    """Which columns of a CSV file a saved run was trained on (``run.json``'s ``data``)."""

    target: Optional[str]
    """The ``--target`` option as given (a column name or index), or ``None`` (the last)."""
    feature_names: Optional[list[str]]
    """The input columns' names, in order: ``[D]``; ``None`` for a file without a header."""
    target_name: Optional[str]
    """The target column's name; ``None`` for a file without a header."""
    classes: Optional[list] = None
    """Classification: the original label of class 0 and class 1; ``None`` for regression."""

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class RunRecord:
    """One trained and scored model.

    Scores are dictionaries keyed by metric name: regression ``nll``, ``rmse``, ``crps``,
    ``coverage_95``; classification ``nll``, ``error_rate``, ``brier``, ``ece``.
    Curves are ``[[epoch (from 1), nll], ...]``.
    """

    # What was trained, on what.
    model: str
    """The model kind (``avdgp``, ``svgp``, ``dsdgp``, ...)."""
    label: str
    """The model's display name, e.g. ``AVDGP-AR2PP``."""
    rule: Optional[str]
    """AVDGP's amortization rule (``ar1`` ... ``ar2pp``); ``None`` for other models."""
    task: str
    dataset: str
    n_train: int
    n_val: int
    n_test: int
    dim: int
    """The input width D."""
    # Scores.
    test: dict
    """Test metrics in model (standardised) units, the paper's."""
    test_original_units: Optional[dict]
    """Regression with a standardiser: the test metrics in the targets' original units."""
    val: Optional[dict]
    """Validation metrics of the kept weights, or ``None`` without a validation split."""
    # Time and training.
    train_seconds_per_epoch: float
    """Mean seconds of the epochs after the first (the first includes tracing)."""
    first_epoch_seconds: float
    predict_seconds: float
    """Seconds to predict the test set (after a warm-up batch)."""
    final_train_loss: float
    resumed_from_epoch: int
    """0, or the epoch an interrupted run was resumed from."""
    epoch_seconds: list[float]
    """Training seconds of every epoch run in this process: ``[epochs run]``."""
    best_epoch: Optional[int]
    """The epoch whose weights were kept (from 1), with best-epoch selection; else ``None``."""
    stopped_epoch: int
    """The last epoch trained (smaller than ``epochs`` after early stopping)."""
    val_nll_curve: Optional[list]
    test_nll_curve: Optional[list]
    replicas: int
    """Devices training in sync, over all workers."""
    # Settings.
    epochs: int
    batch_size: int
    learning_rate: float
    dtype: str
    seed: int
    steps_per_execution: int
    schedule: str
    restore_best: bool
    patience: Optional[int]
    # Architecture.
    layers: int
    dims: list
    """Output width of every layer: ``[layers]``."""
    num_inducing: list
    """Inducing points of every layer (per datapoint for AVDGP): ``[layers]``."""
    num_points: int
    """Sigma points (AR2P/AR2PP) or samples S."""
    num_parameters: int
    streamed_shards: Optional[dict] = None
    """Streamed runs: ``{"train": shards, "test": shards}``; ``None`` for arrays."""

    def as_dict(self) -> dict[str, Any]:
        """The record as JSON-ready built-in types (the ``result`` of ``run.json``)."""
        return dataclasses.asdict(self)
