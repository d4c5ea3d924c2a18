"""Best-epoch selection that survives an interruption.

Keras' ``EarlyStopping(restore_best_weights=True)`` keeps its state (the best validation NLL,
its epoch and weights, the epochs waited) in memory and resets it at the start of ``fit``, so a
run resumed from ``BackupAndRestore``'s backup chose the best epoch among the epochs after the
restart only, and stopped later than the uninterrupted run: a different model, silently.
:class:`ResumableEarlyStopping` writes that state (and the validation curve) beside the backup
after every epoch and reads it back when training resumes, so the resumed run ends with the
uninterrupted run's weights.

The backup (:class:`~avdgp.training.fit.KeptBackup`) asks for the state of epoch ``e`` just
before it backs up epoch ``e``; the state goes to the other of two files than the last one,
atomically: whichever epoch the backup holds, the state of that epoch is on disk.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Optional

import numpy as np

from gpflux_avdgp.callbacks import BestEpochStopping

__all__ = ["ResumableEarlyStopping"]


class ResumableEarlyStopping(BestEpochStopping):
    """``BestEpochStopping`` (Keras' ``EarlyStopping`` that leaves a guard at its last
    weights) whose state is saved to ``state_dir`` with every backup
    (:meth:`keep_state`) and restored when ``fit`` resumes at a later epoch, or resumes with no
    epoch left (the backup of a finished training); the run deletes it with the backup.

    :param state_dir: a folder beside the backup (created on first use).
    :param curve: a callback with a ``history`` list of ``(epoch, value)`` (``ValidationNLL``),
        saved and restored with the state.
    :param options: ``EarlyStopping``'s options.
    """

    def __init__(self, state_dir: Path, *, curve: Optional[object] = None, **options):
        super().__init__(**options)
        self.state_dir, self.curve = Path(state_dir), curve
        self._epoch_ran = False
        self._next_file = 0  # the state file the next keep_state writes

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._epoch_ran = False

    def on_epoch_begin(self, epoch, logs=None):
        if not self._epoch_ran:  # the first epoch of this fit: BackupAndRestore has restored
            self._epoch_ran = True
            if epoch > 0:
                self._restore(epoch - 1)

    def on_train_end(self, logs=None):
        if not self._epoch_ran:  # resumed from the backup of a finished training
            self._restore(None)
        super().on_train_end(logs)  # restores the best epoch's weights

    # ------------------------------------------------------------------ state on disk
    def _file(self, index: int) -> Path:
        return self.state_dir / f"state{index}.npz"

    def keep_state(self, epoch: int) -> None:
        """Save the state after ``epoch`` (the backup is about to hold that epoch) to the
        file the last save did not write."""
        state = {
            "epoch": epoch,
            "best": float(self.best),
            "best_epoch": int(self.best_epoch),
            "wait": int(self.wait),
            "stopped_epoch": int(self.stopped_epoch),
            "curve": [list(point) for point in getattr(self.curve, "history", [])],
        }
        weights = {f"w{i}": w for i, w in enumerate(self.best_weights or [])}
        self.state_dir.mkdir(parents=True, exist_ok=True)
        partial = self.state_dir / f".partial-{socket.gethostname()}-{os.getpid()}.npz"
        np.savez(partial, state=np.array(json.dumps(state)), **weights)
        os.replace(partial, self._file(self._next_file))
        self._next_file = 1 - self._next_file

    def _restore(self, epoch: Optional[int]) -> None:
        """Take the saved state of (finished) ``epoch``, or of the latest epoch saved with
        ``None``, if there is one."""
        saved_states = [
            (*self._read(self._file(index)), index)
            for index in (0, 1)
            if self._file(index).is_file()
        ]
        fitting = [s for s in saved_states if epoch is None or s[0]["epoch"] == epoch]
        if not fitting:
            return
        state, weights, index = max(fitting, key=lambda saved: saved[0]["epoch"])
        self._next_file = 1 - index
        self.best, self.best_epoch = state["best"], state["best_epoch"]
        self.wait, self.stopped_epoch = state["wait"], state["stopped_epoch"]
        self.best_weights = weights or None
        if self.curve is not None:
            self.curve.history[:0] = [tuple(point) for point in state["curve"]]

    @staticmethod
    def _read(path: Path) -> tuple[dict, list]:
        with np.load(path, allow_pickle=False) as saved:
            count = sum(1 for key in saved.files if key.startswith("w"))
            return json.loads(str(saved["state"])), [saved[f"w{i}"] for i in range(count)]
