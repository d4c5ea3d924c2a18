"""Per-epoch progress lines and timings of ``model.fit``."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Optional, TextIO

import numpy as np
from gpflow.keras import tf_keras

from .config import TrainingDiverged

__all__ = ["EpochProgress"]


class EpochProgress(tf_keras.callbacks.Callback):
    """One line per epoch (loss, seconds, ETA from the second epoch) and the wall-clock time of
    each epoch: from the previous epoch's line (the first: from its start) to this one's, so
    the work of every callback (validation scoring, backups) is counted and the ETA is that of
    the whole loop.

    Raises :class:`TrainingDiverged` at the end of an epoch whose loss is not finite.

    :param label: printed in front of every line.
    :param stream: where to print; ``None`` prints nothing.
    :param state_file: with a backup (:class:`~avdgp.training.fit.KeptBackup`), where the
        seconds and losses are kept after every epoch, atomically and before the backup: a
        ``fit`` resumed from the backup of a finished training runs no epoch and takes them
        from there.
    """

    def __init__(
        self,
        label: str,
        stream: Optional[TextIO] = sys.stderr,
        *,
        state_file: Optional[Path] = None,
    ):
        super().__init__()
        self._supports_tf_logs = True  # batch hooks must not fetch the loss every step
        self.label, self.stream, self.state_file = label, stream, state_file
        self.seconds: list[float] = []
        self.losses: list[float] = []
        self.first_epoch: Optional[int] = None
        self.epoch, self.batch = 0, 0
        self.steps_per_execution = 1  # batches per train-function call, set by fit_model
        self._last_line: Optional[float] = None  # perf_counter() of the last epoch's line

    def _time_left(self, epochs_left: int) -> str:
        """`` (ETA 85 s)`` from the epochs after the second of this run (the first traces the
        step, the second holds what callbacks after this one traced at the first's end, e.g.
        the validation scoring: 1.5 s against 0.1 s later on 160 rows); before: when the ETA
        comes; at the end: nothing."""
        if epochs_left <= 0:
            return ""
        if len(self.seconds) < 3:
            tracing = "tracing included; " if len(self.seconds) == 1 else ""
            return f" ({tracing}ETA after the next epoch)"
        return f" (ETA {np.mean(self.seconds[2:]) * epochs_left:.0f} s)"

    def on_train_begin(self, logs: Optional[dict] = None) -> None:
        self._last_line = None  # a new fit: its first epoch is timed from its start

    def on_epoch_begin(self, epoch: int, logs: Optional[dict] = None) -> None:
        if self._last_line is None:
            self._last_line = time.perf_counter()
        if self.first_epoch is None:
            self.first_epoch = epoch  # > 0 when training resumed from a backup
        self.epoch, self.batch = epoch, 0

    def on_train_batch_begin(self, batch: int, logs: Optional[dict] = None) -> None:
        self.batch = batch  # where a failing step happened; no host round-trip needed

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        now = time.perf_counter()
        self.seconds.append(now - self._last_line)
        self._last_line = now
        loss = float((logs or {}).get("loss", math.nan))
        self.losses.append(loss)
        total = self.params.get("epochs", len(self.seconds))
        if self.stream is not None:
            print(
                f"[{self.label}] epoch {epoch + 1}/{total} loss {loss:.4f} "
                f"{self.seconds[-1]:.1f} s{self._time_left(total - epoch - 1)}",
                file=self.stream,
                flush=True,
            )
        if not math.isfinite(loss):
            self.model.stop_training = True
            raise TrainingDiverged(
                f"{self.label}: the training loss became {loss} in epoch {epoch + 1}"
            )
        if self.state_file is not None:
            self._keep()

    def on_train_end(self, logs: Optional[dict] = None) -> None:
        if self.state_file is None:
            return
        if self.first_epoch is not None:
            self._keep(finished=True)
        elif self.state_file.is_file():  # no epoch ran: resumed from a finished training
            kept = json.loads(self.state_file.read_text())
            self.first_epoch, self.seconds, self.losses = (
                kept["first_epoch"],
                kept["seconds"],
                kept["losses"],
            )

    @staticmethod
    def finished(state_file: Path) -> bool:
        """Whether ``state_file`` holds the record of a training that ended."""
        try:
            return bool(json.loads(state_file.read_text()).get("finished"))
        except (OSError, ValueError, AttributeError):
            return False

    def _keep(self, finished: bool = False) -> None:
        kept = {
            "first_epoch": self.first_epoch,
            "seconds": self.seconds,
            "losses": self.losses,
            "finished": finished,
        }
        partial = self.state_file.with_name(f".{self.state_file.name}.{os.getpid()}")
        partial.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(json.dumps(kept))
        os.replace(partial, self.state_file)
