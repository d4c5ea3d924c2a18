"""A run folder (``avdgp fit --save DIR``): ``settings.json`` to resume an interrupted run,
the ``backup`` folder of ``BackupAndRestore``, and the finished run's ``weights``,
``model.keras`` and ``run.json``. The same code serves runs on arrays and on streamed shards;
only the description of the data differs (:func:`array_data`, :func:`shard_data`).

One folder, one run: :func:`holding_run_dir` locks the folder for the whole run (training,
scoring, saving), so a second process on it is refused in one line; the lock goes with the
process, also after a crash. ``settings.json`` and ``run.json`` are written atomically."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, TextIO

import numpy as np

from ..data import Standardizer
from ..data.shards import ShardStatistics
from ..errors import UsageError, write_failure_reason
from .config import TrainConfig
from .distribute import is_chief
from .ownership import check_no_links, claim_run_dir, open_own_file
from .progress import EpochProgress
from .record import DataColumns, RunRecord

__all__ = [
    "BACKUP_DIR",
    "BEST_EPOCH_DIR",
    "LOCK_FILE",
    "PROGRESS_FILE",
    "RunDirInUse",
    "holding_run_dir",
    "locks_save_dir",
    "SETTINGS_FILE",
    "array_data",
    "prepare_run_dir",
    "remove_if_empty",
    "remove_training_state",
    "save_run",
    "shard_data",
    "training_settings",
]

SETTINGS_FILE = "settings.json"


BACKUP_DIR = "backup"
#: Beside the backup: the best-epoch selection's state (``training.best_epoch``).
BEST_EPOCH_DIR = "best_epoch"
#: Beside the backup: the epochs' seconds and losses (``training.progress``).
PROGRESS_FILE = "progress.json"


LOCK_FILE = ".lock"


class RunDirInUse(UsageError):
    """Another process is running in the folder."""


@contextlib.contextmanager
def holding_run_dir(directory: Path) -> Iterator[None]:
    """Claim ``directory`` as a run folder (:func:`~avdgp.training.ownership.claim_run_dir`:
    a user's folder is refused before anything is written) and hold its lock (``.lock``, an
    exclusive ``flock``, opened without following a link) for the block.

    The operating system releases the lock when the process ends, crash included, so a stale
    ``.lock`` file never blocks a later run.

    :raises RunDirInUse: if another process holds it.
    :raises UsageError: if the folder is not ours or holds a link.
    """
    claim_run_dir(directory)
    with open_own_file(directory / LOCK_FILE, "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another process"
            raise RunDirInUse(
                f"{directory}: another avdgp run is using this folder ({holder}); wait for it "
                "to finish or choose another --save folder"
            ) from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"pid {os.getpid()}")
        lock.flush()
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def locks_save_dir(run: Callable) -> Callable:
    """Decorate a run function whose keyword ``save_dir`` is its folder: the chief process
    holds the folder (:func:`holding_run_dir`) from preparing it to saving the run; the other
    workers of a multi-worker run (keyword ``strategy``) only read it."""

    @functools.wraps(run)
    def locked(*args, **kwargs):
        save_dir, strategy = kwargs.get("save_dir"), kwargs.get("strategy")
        if save_dir is None or (strategy is not None and not is_chief(strategy)):
            return run(*args, **kwargs)
        with holding_run_dir(Path(save_dir)):
            return run(*args, **kwargs)

    return locked


def array_data(inputs: np.ndarray, targets: np.ndarray) -> dict:
    """What identifies training arrays in ``settings.json``: the row count and the SHA-256 of
    the float64 bytes (a resumed run must see the same data)."""
    digest = hashlib.sha256(
        np.ascontiguousarray(inputs, np.float64).tobytes()
        + np.ascontiguousarray(targets, np.float64).tobytes()
    ).hexdigest()
    return {"n_train": int(len(inputs)), "data_sha256": digest}


def shard_data(statistics: ShardStatistics) -> dict:
    """What identifies streamed training shards: row count, shard count and the SHA-256 of the
    scan's row counts and column moments (so the shards may move between runs)."""
    text = json.dumps(
        {
            "rows": list(statistics.rows_per_shard),
            "mean": statistics.column_mean.tolist(),
            "std": statistics.column_std.tolist(),
        }
    )
    return {
        "n_train": statistics.num_rows,
        "streamed_shards": len(statistics.shards),
        "data_sha256": hashlib.sha256(text.encode()).hexdigest(),
    }


def prepare_run_dir(
    directory: Path,
    *,
    spec: Any,
    config: TrainConfig,
    dataset: str,
    data: dict,
    stream: Optional[TextIO] = None,
    write: bool = True,
) -> Path:
    """Make ``directory`` ready for a run, or for resuming the interrupted run it holds.

    Writes ``settings.json`` (model, training settings, data description) atomically. A folder
    that holds an interrupted run with the same settings resumes it (its ``backup`` folder,
    written by ``BackupAndRestore`` after every epoch, is restored by ``fit``). With
    ``write=False`` (a non-chief worker of multi-worker training) it only checks the folder.

    :param spec: the model's settings, a dataclass (e.g. a ``ModelSpec``); its ``label``, if
        any, names the model in the "resuming" line.
    :param data: what identifies the training data: :func:`array_data` or :func:`shard_data`.
    :raises ValueError: if the folder holds a finished run, or an interrupted run with other
        settings or data.
    :returns: the backup folder, ``directory / "backup"``.
    """
    settings = {"spec": asdict(spec), "train": training_settings(config), "dataset": dataset}
    settings.update(data)
    settings = json.loads(json.dumps(settings, default=_jsonable))
    if (directory / "run.json").exists():
        raise ValueError(
            f"{directory}: holds a finished run (run.json); choose another folder or delete it"
        )
    settings_file = directory / SETTINGS_FILE
    backup_dir = directory / BACKUP_DIR
    if directory.exists():
        check_no_links(directory)
    if settings_file.exists():
        try:
            saved = json.loads(settings_file.read_text())
        except (OSError, ValueError) as error:
            raise ValueError(f"{settings_file}: unreadable ({error}); delete the folder") from None
        changed = _changed_settings(saved, settings)
        if changed:
            raise ValueError(
                f"{directory}: holds an interrupted run with other settings ({', '.join(changed)}"
                "); use the same settings to resume it, or another folder"
            )
        label = getattr(spec, "label", type(spec).__name__)
        if EpochProgress.finished(directory / PROGRESS_FILE) and stream is not None:
            print(
                f"[{label}] the interrupted run in {directory} had finished training; scoring "
                "and saving it",
                file=stream,
            )
        elif backup_dir.exists() and any(backup_dir.iterdir()) and stream is not None:
            print(f"[{label}] resuming the interrupted run in {directory}", file=stream)
        elif stream is not None:  # stopped before its first backup, or after training (saving)
            print(
                f"[{label}] the interrupted run in {directory} left no backup to resume "
                "from; training again from epoch 0",
                file=stream,
            )
    if write:
        directory.mkdir(parents=True, exist_ok=True)
        _write_atomically(settings_file, json.dumps(settings, indent=2))
    return backup_dir


def training_settings(config: TrainConfig) -> dict:
    """The training settings a saved run must match to be resumed: all of ``config`` but the
    speed settings that do not change the results (``steps_per_execution``,
    ``backup_interval``)."""
    settings = asdict(config)
    del settings["steps_per_execution"], settings["backup_interval"]
    return settings


def _changed_settings(saved: dict, current: dict, prefix: str = "") -> list[str]:
    """Dotted names of the entries that differ between two settings dictionaries."""
    changed = []
    for key in sorted(set(saved) | set(current)):
        old, new = saved.get(key), current.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            changed += _changed_settings(old, new, f"{prefix}{key}.")
        elif old != new:
            changed.append(f"{prefix}{key}: {old} -> {new}")
    return changed


def save_run(
    built: Any,
    record: RunRecord,
    standardizer: Optional[Standardizer],
    directory: Path,
    *,
    data_columns: Optional[DataColumns] = None,
) -> None:
    """Write ``weights`` (TF checkpoint), ``model.keras`` (with the optimizer state) and
    ``run.json``: ``spec`` (``built.spec`` as a dict), ``standardizer``, ``result`` (``record``)
    and ``data`` (``data_columns``: the CSV layout ``avdgp predict`` reads; ``null`` for runs
    on arrays). This is the only writer of ``run.json``.

    :raises NotImplementedError: if a layer holds a component no config can rebuild (only
        possible with custom kernels or mean functions).
    """
    import tensorflow as tf

    try:
        _save_files(built, record, standardizer, directory, data_columns)
    except (OSError, tf.errors.OpError) as error:  # a full disk, a lost permission
        raise UsageError(
            f"{directory}: could not save the run ({write_failure_reason(error)}); free some "
            "space and run the same command again"
        ) from None


def _save_files(
    built: Any,
    record: RunRecord,
    standardizer: Optional[Standardizer],
    directory: Path,
    data_columns: Optional[DataColumns],
) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    check_no_links(directory)  # again: a link planted while the run trained
    built.model.save_weights(str(directory / "weights"))
    partial_model = directory / f".model.partial-{os.getpid()}.keras"
    try:  # renamed once complete: a kill or a full disk never leaves half a model.keras
        built.model.save(partial_model)
        partial_model.replace(directory / "model.keras")
    finally:
        partial_model.unlink(missing_ok=True)
    info = {
        "spec": asdict(built.spec),
        "standardizer": None if standardizer is None else asdict(standardizer),
        "keras_file": "model.keras",
        "result": record.as_dict(),
        "data": None if data_columns is None else data_columns.as_dict(),
    }
    _write_atomically(directory / "run.json", json.dumps(info, indent=2, default=_jsonable))


def _write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader sees all of it or the previous file."""
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    with open_own_file(partial, "w") as handle:
        handle.write(text)
    partial.replace(path)  # replaces a link at ``path`` itself, never its target


def remove_training_state(directory: Path) -> None:
    """Remove what training keeps in run folder ``directory`` to resume (the backup, the
    best-epoch selection's state, the epochs' record), once its result is kept."""
    shutil.rmtree(directory / BACKUP_DIR, ignore_errors=True)
    shutil.rmtree(directory / BEST_EPOCH_DIR, ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        (directory / PROGRESS_FILE).unlink()


def remove_if_empty(directory: Path) -> None:
    """Remove ``directory`` if it exists and is empty (another worker may do the same)."""
    with contextlib.suppress(OSError):
        if directory.is_dir() and not any(directory.iterdir()):
            directory.rmdir()


def _jsonable(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)
