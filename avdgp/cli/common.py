"""What several ``avdgp`` commands share: the progress stream, one-line messages, output
checks and the printed result record."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
from pathlib import Path
from typing import IO, Iterator, Optional, Sequence

from ..errors import CommandLineError, write_failure_reason

__all__ = [
    "check_output_file",
    "check_output_paths",
    "checked_model_names",
    "kept_epoch_line",
    "load_tensorflow",
    "one_line",
    "print_next_commands",
    "print_record",
    "print_stage",
    "progress_stream",
    "write_failure",
    "writes_through",
    "spreadsheet_safe",
    "writing_atomically",
]


def load_tensorflow() -> None:
    """Load TensorFlow, once a command has checked what it can check without it: refuse an
    address-space limit it cannot start under, hide its start-up notices
    (:mod:`avdgp._quiet_tensorflow`) and its retracing warnings, which are not the user's
    concern, and skip GPflow's docstring rewriting (below). Every command calls it before its
    first import of TensorFlow, the library or the training code."""
    from .._quiet_tensorflow import import_tensorflow_quietly
    from .._startup import check_address_space

    check_address_space()
    import_tensorflow_quietly()
    import check_shapes
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    # GPflow's shape checks rewrite the docstring of each decorated function as it is defined,
    # 1.3 s of every command's import of the library; a command shows no docstring. The
    # checks themselves stay on. Before GPflow is imported (it is not yet: see above).
    check_shapes.set_rewrite_docstrings(None)


def print_stage(args, line: str) -> None:
    """``avdgp <command>: <line>`` on stderr, unless ``--quiet``: what a command is doing
    before a silence of more than a second or two (loading, tracing)."""
    if not args.quiet:
        print(f"avdgp {args.command}: {line}", file=sys.stderr, flush=True)


def progress_stream(args) -> Optional[object]:
    return None if args.quiet else sys.stderr


def checked_model_names(text: str) -> list[str]:
    """The comma-separated model names of ``--models``, each checked before any training.

    :raises ValueError: naming an unknown model or design.
    """
    from avdgp.zoo import parse_model_name

    models = [name.strip() for name in text.split(",") if name.strip()]
    for name in models:
        parse_model_name(name)
    return models


def one_line(error: Exception) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def check_output_paths(json_file: Optional[str], save_dir: Optional[str]) -> None:
    """Fail before training, not after, when an output cannot be written."""
    check_output_file("fit", "--json", json_file)
    if save_dir is not None:
        path = Path(save_dir)
        if path.is_symlink():
            raise CommandLineError(
                f"avdgp fit: --save {save_dir}: is a symbolic link (to {os.readlink(path)}); "
                "name the folder itself"
            )
        if path.exists() and not path.is_dir():
            raise CommandLineError(f"avdgp fit: --save {save_dir}: is a file, expected a folder")
        existing = next((p for p in [path, *path.parents] if p.exists()), Path("."))
        if not os.access(existing, os.W_OK):
            raise CommandLineError(f"avdgp fit: --save {save_dir}: {existing} is not writable")


def writes_through(path: Path) -> bool:
    """Whether an output ``path`` is a stream (a character device such as ``/dev/null``, a
    FIFO, or a link to one such as ``/dev/stdout``): written to in place as shell redirection
    does, never replaced."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def check_output_file(
    command: str, option: str, value: Optional[str], inputs: Sequence[tuple[str, str]] = ()
) -> None:
    """An output file that is absent, a regular file (replaced atomically) or a stream
    (:func:`writes_through`); anything else (a folder, a link to a file or folder, a socket, a
    block device) is refused in one line, before any work. So is an output that is one of the
    command's ``inputs`` (``(name, path)`` pairs, e.g. ``("DATA", "rows.csv")``: the same
    file, through any link or hard link) or lies inside an input folder."""
    if value is None:
        return
    path = Path(value)
    where = f"avdgp {command}: {option} {value}"
    if writes_through(path):
        return
    for name, source in inputs:
        _check_not_input(where, path, name, Path(source))
    if path.is_symlink():
        raise CommandLineError(
            f"{where}: is a symbolic link (to {os.readlink(path)}); name the file itself"
        )
    if path.is_dir():
        raise CommandLineError(f"{where}: is a folder, expected a file name")
    if path.exists() and not path.is_file():
        raise CommandLineError(f"{where}: is not a regular file (a socket or a device)")
    existing = next((p for p in path.absolute().parents if p.exists()), Path("."))
    if not existing.is_dir() or not os.access(existing, os.W_OK):
        raise CommandLineError(f"{where}: {existing} is not writable")


def _check_not_input(where: str, path: Path, name: str, source: Path) -> None:
    """Refuse an output that would replace input ``source`` or write inside it."""
    if not source.exists():
        return
    if source.is_dir():
        inside = path.absolute().resolve().is_relative_to(source.resolve())
        if inside:
            raise CommandLineError(
                f"{where}: is inside the input {name} folder {source}; write the output "
                "elsewhere"
            )
    elif path.exists() and os.path.samefile(path, source):
        raise CommandLineError(
            f"{where}: is the input {name} ({source}), which it would replace; name another "
            "file for the output"
        )


#: A cell starting with one of these is a formula to a spreadsheet (OWASP's CSV injection list).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(label: str) -> str:
    """``label`` as a cell a spreadsheet shows as text: a label that would start a formula
    (``=HYPERLINK(...)``, ``@SUM(1+1)``) gets the usual leading ``'``; numbers (``-1``) are
    left as they are."""
    if not label.startswith(FORMULA_STARTS):
        return label
    try:
        float(label)
        return label
    except ValueError:
        return "'" + label


def write_failure(command: str, what: str, error: BaseException) -> CommandLineError:
    """One line for a failed write (full disk, lost permission), naming what was written."""
    full_disk = getattr(error, "errno", None) == errno.ENOSPC
    hint = "; free some space and run it again" if full_disk else ""
    return CommandLineError(
        f"avdgp {command}: {what}: could not write ({write_failure_reason(error)}){hint}"
    )


@contextlib.contextmanager
def writing_atomically(path: Path, command: str, option: str) -> Iterator[IO[str]]:
    """A text file to write ``path`` through: written under a temporary name beside it and
    renamed once complete, so a full disk or a kill never leaves a partial file under ``path``.
    A stream (:func:`writes_through`: ``/dev/null``, a FIFO, ``/dev/stdout``) is written to in
    place, never replaced.

    :raises CommandLineError: one line naming ``option`` and ``path`` if the write fails.
    """
    check_output_file(command, option, str(path))
    if writes_through(path):
        try:
            with open(path, "w", newline="", encoding="utf-8") as handle:
                yield handle
        except OSError as error:
            raise write_failure(command, f"{option} {path}", error) from None
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        with open(partial, "w", newline="", encoding="utf-8") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        partial.replace(path)
    except OSError as error:
        raise write_failure(command, f"{option} {path}", error) from None
    finally:
        with contextlib.suppress(OSError):
            partial.unlink()


def print_record(record) -> None:
    """Print a :class:`~avdgp.training.record.RunRecord`: sizes, test scores, the epoch whose
    weights were kept, seconds."""
    scores = ", ".join(f"{key} {value:.4f}" for key, value in record.test.items())
    print(
        f"{record.label} on {record.dataset} (n_train {record.n_train}, n_test "
        f"{record.n_test}, D {record.dim}, {record.epochs} epochs)"
    )
    if record.task == "classification":
        print(f"  test: {scores}")
    else:
        print(f"  test (standardised units): {scores}")
    if record.test_original_units:
        original = ", ".join(
            f"{key} {value:.4f}" for key, value in record.test_original_units.items()
        )
        print(f"  test (original units):     {original}")
    print(f"  {kept_epoch_line(record)}")
    print(
        f"  {record.train_seconds_per_epoch:.2f} s/epoch (first epoch "
        f"{record.first_epoch_seconds:.1f} s), predict {record.predict_seconds:.2f} s"
    )


def kept_epoch_line(record) -> str:
    """Which epoch's weights the scores are of, and its validation NLL, e.g. ``kept epoch 57
    of 77 (lowest validation NLL 0.1234, standardised units; stopped after 20 epochs without a
    lower one)`` or ``kept the last epoch, 100 (validation NLL 0.2100)``."""
    units = ", standardised units" if record.task != "classification" else ""
    val_nll = None if not record.val else record.val.get("nll")
    if record.best_epoch is not None:
        text = f"kept epoch {record.best_epoch} of {record.stopped_epoch}"
        details = [] if val_nll is None else [f"lowest validation NLL {val_nll:.4f}{units}"]
        if record.stopped_epoch < record.epochs:
            details.append(
                f"stopped after {record.stopped_epoch - record.best_epoch} epochs without a "
                "lower one"
            )
        return text + (f" ({'; '.join(details)})" if details else "")
    text = f"kept the last epoch, {record.stopped_epoch}"
    return text + ("" if val_nll is None else f" (validation NLL {val_nll:.4f}{units})")


def print_next_commands(save_dir: str, data: str) -> None:
    """After ``fit --save``: where the run is and the commands that use it."""
    folder = Path(save_dir)
    print(f"  saved in {folder}/ (model.keras, weights, run.json); next:")
    print(f"    avdgp predict {folder} {data} --out predictions.csv")
    print(f"    avdgp export {folder} {folder.parent / (folder.name + '-serving')}")
