"""The ``avdgp`` command line: ``demo``, ``fit``, ``bench``, ``paper``, ``predict`` and
``export`` (also ``python -m avdgp``).

Bad input (missing file, malformed data, unknown option, impossible setting) ends with a
one-line message on stderr and exit status 2, never a traceback. Set ``AVDGP_DEBUG=1`` to see
the traceback of an unexpected error.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys
from typing import Callable, Optional, Sequence

from ..errors import CommandLineError, TrainingDiverged, UsageError
from .parser import build_parser

__all__ = ["main"]

EXIT_BAD_INPUT = 2


EXIT_DIVERGED = 3


EXIT_INTERNAL = 1


#: The module of each command, imported once its command is parsed (``--help`` imports none).
COMMANDS = ("demo", "fit", "bench", "uncertainty", "paper", "predict", "export")


def _command(name: str) -> Callable[[argparse.Namespace], int]:
    """``avdgp.cli.<name>.<name>_command``."""
    return getattr(importlib.import_module(f"{__package__}.{name}"), f"{name}_command")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit status."""
    args = None
    try:
        args = build_parser().parse_args(argv)  # no TensorFlow: --help answers at once
        return _command(args.command)(args)  # each loads TensorFlow after its own checks
    except CommandLineError as error:
        print(str(error), file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        hint = ""
        if getattr(args, "save", None):
            hint = "; run the same command again to resume from the last backup"
        print(f"{_prefix(args)}: interrupted{hint}", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 - the CLI turns every error into one line
        if os.environ.get("AVDGP_DEBUG"):
            raise
        return _report(error, _prefix(args))


def _prefix(args) -> str:
    """``avdgp fit``: what every error line of a command starts with (``avdgp`` before one is
    parsed), as the commands' own refusals (:class:`~avdgp.errors.CommandLineError`) do."""
    command = getattr(args, "command", None)
    return f"avdgp {command}" if command else "avdgp"


def _is_tensorflow_error(error: Exception, name: str) -> bool:
    """Whether ``error`` is ``tf.errors.<name>`` (never, before TensorFlow is loaded: an error
    raised before it loads does not load it)."""
    tf = sys.modules.get("tensorflow")
    return tf is not None and isinstance(error, getattr(tf.errors, name))


def _is_lost_worker(error: Exception) -> bool:
    """Whether ``error`` is TensorFlow's report that another worker of a multi-worker run
    stopped (its heartbeats ended) or cannot be reached."""
    return _is_tensorflow_error(error, "UnavailableError")


def _is_out_of_memory(error: Exception) -> bool:
    return isinstance(error, MemoryError) or _is_tensorflow_error(error, "ResourceExhaustedError")


#: What the system says of a full disk or quota (TensorFlow's file errors carry the text).
FULL_DISK_TEXTS = (os.strerror(errno.ENOSPC), os.strerror(errno.EDQUOT))


def _is_full_disk(error: Exception) -> bool:
    """Whether ``error`` is a write that found the disk full (an ``OSError``, or TensorFlow's
    ``ResourceExhaustedError`` of a checkpoint write, which is no memory error)."""
    if getattr(error, "errno", None) in (errno.ENOSPC, errno.EDQUOT):
        return True
    return any(text in str(error) for text in FULL_DISK_TEXTS)


def _report(error: Exception, prefix: str = "avdgp") -> int:
    message = " ".join(str(error).split()) or type(error).__name__
    if isinstance(error, TrainingDiverged):
        print(f"{prefix}: training diverged: {message}", file=sys.stderr)
        return EXIT_DIVERGED
    if _is_full_disk(error) and not isinstance(error, UsageError):  # UsageError: ours, worded
        reason = message.split(" [[")[0][:200]
        print(
            f"{prefix}: the disk is full ({reason}); free some space and run the same "
            "command again (a run with --save resumes from its last backup)",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    if _is_out_of_memory(error):
        reason = message.split(" [[")[0][:200]  # TensorFlow appends the graph's node
        print(
            f"{prefix}: out of memory ({type(error).__name__}: {reason}); lower --batch-size, "
            "--inducing or --points",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    if isinstance(error, (UsageError, ValueError, OSError)):  # TypeError: ours (see ..errors)
        print(f"{prefix}: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if _is_lost_worker(error):
        start = message.find("Collective ops is aborted")  # after TF's graph traceback
        reason = (message[start:] if start >= 0 else message[-300:])[:300]
        print(
            f"{prefix}: a worker of the cluster stopped or cannot be reached ({reason}); start "
            "every worker again (a run with --save resumes from its last backup)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    print(
        f"{prefix}: internal error: {type(error).__name__}: {message[:500]} "
        "(set AVDGP_DEBUG=1 for the traceback)",
        file=sys.stderr,
    )
    return EXIT_INTERNAL
