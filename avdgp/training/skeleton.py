"""One run, whatever the source of its data: :func:`run` prepares (or resumes) the save
folder, builds the model, trains it, scores it, records and saves the run. A :class:`RunData`
says how to train and score on its data: arrays in memory
(:class:`~avdgp.training.runner.SplitData`) or CSV shards streamed from disk
(:class:`~avdgp.training.streaming.ShardData`)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import NamedTuple, Optional, Protocol, TextIO

import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from avdgp.data import Standardizer
from avdgp.errors import UsageError
from avdgp.training.config import TrainConfig, float_type
from avdgp.training.distribute import barrier, is_chief, worker_save_dir
from avdgp.training.progress import EpochProgress
from avdgp.training.record import DataColumns, RunRecord
from avdgp.training.rundir import (
    PROGRESS_FILE,
    locks_save_dir,
    prepare_run_dir,
    remove_if_empty,
    remove_training_state,
    save_run,
)
from avdgp.zoo import BuiltModel, ModelSpec, Task, build_model
from gpflux_avdgp.checks import check_choice

__all__ = ["RunData", "Scored", "Trained", "run", "run_record"]


class Trained(NamedTuple):
    """What a data source's training leaves for the record."""

    stopped_epoch: int
    best_epoch: Optional[int] = None
    val_nll_curve: Optional[list] = None
    test_nll_curve: Optional[list] = None


class Scored(NamedTuple):
    """A trained model's scores: test (model and original units), validation, seconds."""

    test: dict
    test_original_units: Optional[dict]
    val: Optional[dict]
    predict_seconds: float


class RunData(Protocol):
    """Where a run's data come from: arrays in memory (:class:`SplitData`) or CSV shards
    streamed from disk (:class:`~avdgp.training.streaming.ShardData`). The rest of a
    run is one skeleton, :func:`run`."""

    #: ``(n_train, n_val, n_test, input width D)``.
    sizes: tuple[int, int, int, int]
    #: ``{"train": shards, "test": shards}`` when streamed, else ``None``.
    streamed_shards: Optional[dict]

    def identity(self) -> dict:
        """What identifies the training data in ``settings.json`` (a resumed run checks it)."""

    def init_inputs(self, config: TrainConfig) -> np.ndarray:
        """Training inputs ``[n, D]`` to start global inducing points from."""

    def train(
        self,
        built: BuiltModel,
        config: TrainConfig,
        *,
        progress: EpochProgress,
        backup_dir: Optional[Path],
        strategy: Optional[tf.distribute.Strategy],
    ) -> Trained:
        """Train ``built`` with :func:`~avdgp.training.fit.fit_model` or its dataset twin."""

    def score(
        self,
        built: BuiltModel,
        task: Task,
        standardizer: Optional[Standardizer],
        config: TrainConfig,
        predict_batch_size: int,
    ) -> Scored:
        """Predict and score the test (and validation) data."""


@locks_save_dir
def run(
    data: RunData,
    spec: ModelSpec,
    config: TrainConfig,
    *,
    dataset: str,
    standardizer: Optional[Standardizer] = None,
    stream: Optional[TextIO] = sys.stderr,
    save_dir: Optional[Path] = None,
    predict_batch_size: int = 1000,
    strategy: Optional[tf.distribute.Strategy] = None,
    data_columns: Optional[DataColumns] = None,
) -> RunRecord:
    """Train ``spec`` on ``data`` and return the result record, whatever the data's source
    (arrays in memory, :class:`~avdgp.training.runner.SplitData`, already standardised; CSV
    shards streamed from disk, :class:`~avdgp.training.streaming.ShardData`): prepare (or
    resume) the save folder, build ``spec`` under the float type, train, score, record and
    save.

    The record (:class:`~avdgp.training.record.RunRecord`) holds the test scores in
    standardised and (regression) original units, the validation scores, the seconds per
    epoch (after the first, which includes tracing) and of prediction, the kept and last
    epochs, the settings and the architecture. With ``save_dir`` it is written to
    ``run.json`` with ``data_columns`` (the CSV layout, for ``avdgp predict``).

    With a ``tf.distribute`` ``strategy`` the model is built, compiled and trained in its
    scope (see :func:`~avdgp.training.fit.fit_model`); under multi-worker training every worker
    runs this with the same arguments, and only the chief writes ``save_dir`` (the others
    check it, and save to a temporary folder that is removed).
    """
    task = check_choice("task", spec.task, Task)
    chief = strategy is None or is_chief(strategy)
    backup_dir = None
    made_save_dir = save_dir is not None and not Path(save_dir).exists()
    if save_dir is not None:
        backup_dir = prepare_run_dir(
            Path(save_dir),
            spec=spec,
            config=config,
            dataset=dataset,
            data=data.identity(),
            stream=stream,
            write=chief,
        )
    tf_keras.backend.clear_session()
    tf_keras.utils.set_random_seed(config.seed)
    scope = contextlib.nullcontext() if strategy is None else strategy.scope()
    with float_type(config.dtype):
        inputs = data.init_inputs(config)
        num_train, _, _, width = data.sizes
        with scope:
            built = build_model(spec, width, num_train, inputs=inputs)
        progress = EpochProgress(
            spec.label,
            stream=stream,
            state_file=None if save_dir is None else Path(save_dir) / PROGRESS_FILE,
        )
        trained = data.train(
            built, config, progress=progress, backup_dir=backup_dir, strategy=strategy
        )
        if save_dir is not None and not progress.seconds:
            raise UsageError(
                f"{save_dir}: the interrupted run had finished training, but the epochs' "
                f"record ({PROGRESS_FILE}) is missing; delete {backup_dir} and run the same "
                "command again"
            )  # resumed from the backup of a finished training: no epoch ran in this process
        if strategy is not None:
            barrier(strategy)  # every worker has finished writing its backup
        scored = data.score(built, task, standardizer, config, predict_batch_size)
        record = run_record(
            spec,
            built,
            config,
            progress,
            dataset=dataset,
            sizes=data.sizes,
            test=scored.test,
            test_original_units=scored.test_original_units,
            val=scored.val,
            predict_seconds=scored.predict_seconds,
            best_epoch=trained.best_epoch,
            stopped_epoch=trained.stopped_epoch,
            val_nll_curve=trained.val_nll_curve,
            test_nll_curve=trained.test_nll_curve,
            replicas=1 if strategy is None else int(strategy.num_replicas_in_sync),
            streamed_shards=data.streamed_shards,
        )
        if save_dir is not None:
            with worker_save_dir(Path(save_dir), strategy) as directory:
                save_run(built, record, standardizer, directory, data_columns=data_columns)
            # kept until now: a kill while scoring or saving resumes with no epoch to train
            if chief or made_save_dir:  # a worker's own folder, or the shared one once saved
                remove_training_state(Path(save_dir))
            if not chief and made_save_dir:
                remove_if_empty(Path(save_dir))  # made by BackupAndRestore on this machine
    return record


def run_record(
    spec: ModelSpec,
    built: BuiltModel,
    config: TrainConfig,
    progress: EpochProgress,
    *,
    dataset: str,
    sizes: tuple[int, int, int, int],
    test: dict,
    test_original_units: Optional[dict],
    val: Optional[dict],
    predict_seconds: float,
    stopped_epoch: int,
    best_epoch: Optional[int] = None,
    val_nll_curve: Optional[list] = None,
    test_nll_curve: Optional[list] = None,
    replicas: int = 1,
    streamed_shards: Optional[dict] = None,
) -> RunRecord:
    """The :class:`~avdgp.training.record.RunRecord` of a finished run, for arrays and
    streamed shards alike.

    :param sizes: ``(n_train, n_val, n_test, input width D)``.
    """
    n_train, n_val, n_test, dim = (int(size) for size in sizes)
    steady = progress.seconds[1:] or progress.seconds
    return RunRecord(
        model=spec.kind.value,
        label=spec.label,
        rule=spec.rule if spec.kind.value == "avdgp" else None,
        task=Task(spec.task).value,
        dataset=dataset,
        n_train=n_train,
        n_val=n_val,
        n_test=n_test,
        dim=dim,
        test=test,
        test_original_units=test_original_units,
        val=val,
        train_seconds_per_epoch=float(np.mean(steady)),
        first_epoch_seconds=float(progress.seconds[0]),
        predict_seconds=float(predict_seconds),
        final_train_loss=float(progress.losses[-1]),
        resumed_from_epoch=int(progress.first_epoch or 0),
        epoch_seconds=[round(seconds, 4) for seconds in progress.seconds],
        best_epoch=best_epoch,
        stopped_epoch=int(stopped_epoch),
        val_nll_curve=val_nll_curve,
        test_nll_curve=test_nll_curve,
        replicas=int(replicas),
        epochs=config.epochs,
        batch_size=config.batch_size,
        learning_rate=config.learning_rate,
        dtype=config.dtype,
        seed=config.seed,
        steps_per_execution=config.steps_per_execution,
        schedule=config.schedule,
        restore_best=config.restore_best,
        patience=config.patience,
        layers=spec.resolved_layers(),
        dims=spec.resolved_dims(),
        num_inducing=spec.resolved_inducing(),
        num_points=spec.num_points,
        num_parameters=int(sum(int(np.prod(v.shape)) for v in built.model.trainable_variables)),
        streamed_shards=streamed_shards,
    )
