"""Which files are the shards: a glob pattern, a folder, one file or a list of files."""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Optional, Sequence, Union

from .csv_format import DataError

__all__ = [
    "FileState",
    "ShardSource",
    "describe_change",
    "file_state",
    "has_glob_characters",
    "resolve_shards",
]

PathLike = Union[str, "os.PathLike[str]"]
#: What names shards: a glob pattern, a folder, one file, or a list of files.
ShardSource = Union[PathLike, Sequence[PathLike]]

_SUFFIXES = (".csv", ".csv.gz")
_GLOB_CHARACTERS = ("*", "?", "[")


def _is_csv(path: Path) -> bool:
    return path.name.lower().endswith(_SUFFIXES)


def has_glob_characters(text: str) -> bool:
    """Whether ``text`` is a glob pattern (holds ``*``, ``?`` or ``[``)."""
    return any(character in text for character in _GLOB_CHARACTERS)


def resolve_shards(source: ShardSource) -> list[Path]:
    """The CSV shards named by ``source``.

    :param source: a glob pattern (``"data/train-*.csv.gz"``, ``**`` recurses), a folder (its
        ``*.csv`` and ``*.csv.gz`` files, not recursive), one ``.csv``/``.csv.gz`` file, or a
        list of such files.
    :returns: the shard paths: a pattern's matches and a folder's files sorted by name (so the
        order does not depend on the file system), a list in the order given.
    :raises DataError: when nothing matches, a path is missing or no CSV file, or a list names
        a file twice.
    """
    if isinstance(source, (str, os.PathLike)):
        text = os.fspath(source)
        if not isinstance(text, str):
            text = os.fsdecode(text)
        if not text:
            raise DataError("no data path given")
        if has_glob_characters(text) and not Path(text).exists():
            matches = sorted(glob.glob(os.path.expanduser(text), recursive=True))
            if not matches:
                raise DataError(f"{text}: no file matches the pattern")
            shards = [Path(match) for match in matches]
            for shard in shards:
                if not shard.is_file() or not _is_csv(shard):
                    raise DataError(f"{text}: matches {shard}, which is not a .csv or .csv.gz file")
            return shards
        location = Path(text).expanduser()
        if location.is_dir():
            shards = sorted(
                (child for child in location.iterdir() if child.is_file() and _is_csv(child)),
                key=lambda path: path.name,
            )
            if not shards:
                raise DataError(f"{text}: the folder holds no .csv or .csv.gz files")
            return shards
        paths: Sequence[PathLike] = [text]
    elif isinstance(source, Sequence):
        paths = source
        if not paths:
            raise DataError("shards: expected at least one file, got an empty list")
    else:
        raise DataError(
            f"shards: expected a glob pattern, a folder, a file or a list of files, got {source!r}"
        )
    shards, seen = [], set()
    for item in paths:
        path = Path(os.fspath(item)).expanduser()
        if not path.exists():
            raise DataError(f"{item}: no such file or folder")
        if not path.is_file() or not _is_csv(path):
            raise DataError(f"{item}: not a .csv or .csv.gz file")
        if path.resolve() in seen:
            raise DataError(f"{item}: named twice in the list of shards")
        seen.add(path.resolve())
        shards.append(path)
    return shards


#: What a scan records of a shard to notice a later change: size in bytes and mtime in ns.
FileState = tuple[int, int]


def file_state(path: Path) -> FileState:
    """``(size in bytes, modification time in ns)`` of ``path``."""
    status = path.stat()
    return int(status.st_size), int(status.st_mtime_ns)


def describe_change(path: Path, scanned: FileState) -> Optional[str]:
    """How ``path`` differs from its ``scanned`` state (``"was removed"``, ``"changed size
    from 10 to 12 bytes"``, ``"was rewritten"``), or ``None`` if it looks the same."""
    try:
        size, modified = file_state(path)
    except OSError:
        return "was removed or cannot be read"
    if size != scanned[0]:
        return f"changed size from {scanned[0]} to {size} bytes"
    if modified != scanned[1]:
        return "was rewritten"
    return None
