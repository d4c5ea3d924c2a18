"""The application's errors: those about the user's input each end an ``avdgp`` command with one
line and exit status 2 (``avdgp.cli.main``), a diverged training with status 3.

The library raises ``TypeError`` for an argument of the wrong type and ``ValueError`` for a
wrong value. The command line gives the library values argparse has already typed, so a
``TypeError`` there is our bug (an internal error, exit 1), while a ``ValueError`` names a value
the user chose (exit 2).
"""

from __future__ import annotations

import os

__all__ = ["CommandLineError", "TrainingDiverged", "UsageError", "write_failure_reason"]


class UsageError(Exception):
    """The user's input cannot be used: a file, a table, an option or a folder."""


class CommandLineError(UsageError):
    """Bad command-line input; the message already names the command and is printed as is."""


class TrainingDiverged(RuntimeError):
    """The training loss, a layer's output or a gradient became NaN or infinite."""


def write_failure_reason(error: BaseException) -> str:
    """Why a write failed, in a few words: the system's text for an ``OSError`` (``No space
    left on device``), else the first line of the message (TensorFlow's file errors)."""
    number = getattr(error, "errno", None)
    if number:
        return os.strerror(number)
    text = getattr(error, "message", None) or str(error)
    return (text.strip().splitlines() or [type(error).__name__])[0][:200]
