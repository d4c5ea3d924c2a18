"""The errors of reading a model from disk, each a ``ValueError`` with a one-line message."""

from __future__ import annotations

__all__ = ["ModelFileError", "UnsafeModelError", "one_line"]


class ModelFileError(ValueError):
    """A saved model file or SavedModel directory that cannot be loaded."""


class UnsafeModelError(ModelFileError):
    """A saved model that names code outside the allow list, or a file outside its folder:
    refused before anything in it is deserialised."""


def one_line(error: BaseException, limit: int = 200) -> str:
    """``"Type: first line of the message"``, at most ``limit`` characters."""
    lines = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    return text if len(text) <= limit else text[: limit - 3] + "..."
