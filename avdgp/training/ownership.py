"""Which folders are ours to write: a run folder is marked as ours when we make it, and nothing
in it is ever written through a link.

``avdgp fit --save DIR`` writes, replaces and deletes files in ``DIR`` (the backup, the
best-epoch state, the weights). So it accepts only

- a folder that does not exist yet (made, then marked),
- an empty folder (marked),
- a folder it marked before (:data:`MARK_FILE`), to resume or to refuse a finished run,
- a run folder of an older version (before the mark): every entry one of our names
  (:data:`RUN_FOLDER_NAMES`) and a ``settings.json`` or ``run.json`` of ours (marked then),

and refuses any other folder in one line, before writing anything. Inside an accepted folder
it refuses symbolic links and files with more than one hard link anywhere (checked before
training and again before saving): writing through either would change a file outside the
folder. Our own small files are opened with ``O_NOFOLLOW``.
"""

from __future__ import annotations

import fnmatch
import json
import os
from pathlib import Path

from ..errors import UsageError

__all__ = ["MARK_FILE", "RUN_FOLDER_NAMES", "check_no_links", "claim_run_dir", "open_own_file"]

#: The file that marks a folder as an avdgp run folder (written when avdgp makes or adopts it).
MARK_FILE = ".avdgp-run"
_MARK_TEXT = '{"made_by": "avdgp", "kind": "run folder"}\n'

#: What a run folder holds (``fnmatch`` patterns): an older run folder is recognised by them.
RUN_FOLDER_NAMES = (
    MARK_FILE,
    ".lock",
    "settings.json",
    "run.json",
    "progress.json",
    "backup",
    "best_epoch",
    "checkpoint",
    "weights.index",
    "weights.data-*",
    "model.keras",
    ".model.partial-*.keras",
    ".settings.json.*",
    ".run.json.*",
)


def claim_run_dir(directory: Path) -> None:
    """Make ``directory`` a run folder of ours, or refuse it before writing anything.

    :raises UsageError: if it is not a folder, is a non-empty folder that is not a run folder
        of ours, or holds a link (:func:`check_no_links`).
    """
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"{directory}: not a folder; give --save a new or empty folder")
    if not directory.exists():
        directory.mkdir(parents=True, exist_ok=True)
    entries = sorted(path.name for path in directory.iterdir())
    marked = (directory / MARK_FILE).is_file() and not (directory / MARK_FILE).is_symlink()
    if entries and not marked and not _older_run_folder(directory, entries):
        strangers = [name for name in entries if not _is_our_name(name)] or entries
        count = "1 entry" if len(entries) == 1 else f"{len(entries)} entries"
        raise UsageError(
            f"{directory}: not an avdgp run folder and not empty ({count}, e.g. "
            f"{strangers[0]!r}); give --save a new or empty folder (avdgp writes, replaces and "
            "deletes files only in folders it made)"
        )
    check_no_links(directory)
    if not marked:
        with open_own_file(directory / MARK_FILE, "w") as handle:
            handle.write(_MARK_TEXT)


def check_no_links(directory: Path) -> None:
    """Refuse a run folder that holds a symbolic link or a file with another hard link, at
    any depth (links are not followed).

    :raises UsageError: naming the first such entry and the fix.
    """
    for root, folders, files in os.walk(directory, followlinks=False):
        for name in sorted(folders + files):
            path = Path(root) / name
            if path.is_symlink():
                kind = "a symbolic link"
            elif path.is_file() and path.stat().st_nlink > 1:
                kind = "a file with another hard link"
            else:
                continue
            raise UsageError(
                f"{path}: {kind} in run folder {directory}; avdgp never writes through links "
                "in a run folder: remove it, or give --save a new folder"
            )


def open_own_file(path: Path, mode: str):
    """Open ``path`` for ``mode`` (``"w"`` or ``"a+"``) without following a final symbolic
    link (``O_NOFOLLOW``): a link planted there is refused, never written through.

    :raises UsageError: if ``path`` is a symbolic link.
    """
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW
    if mode == "w":
        flags |= os.O_TRUNC
    elif mode != "a+":
        raise ValueError(f"mode: expected 'w' or 'a+', got {mode!r}")
    try:
        descriptor = os.open(path, flags, 0o644)
    except OSError as error:
        if Path(path).is_symlink():
            raise UsageError(
                f"{path}: a symbolic link; avdgp never writes through links in a run folder: "
                "remove it, or give --save a new folder"
            ) from None
        raise error
    return os.fdopen(descriptor, "w" if mode == "w" else "a+")


def _is_our_name(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in RUN_FOLDER_NAMES)


def _older_run_folder(directory: Path, entries: list[str]) -> bool:
    """A run folder made before the mark: only our names, and a ``settings.json`` or
    ``run.json`` (a regular file) whose JSON object has our ``spec`` entry."""
    if not all(_is_our_name(name) for name in entries):
        return False
    for name in ("settings.json", "run.json"):
        path = directory / name
        if path.is_file() and not path.is_symlink() and path.stat().st_size < 1_000_000:
            try:
                content = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(content, dict) and isinstance(content.get("spec"), dict):
                return True
    return False
