"""The errors of reading a model from disk, each a ``ValueError`` with a one-line message."""

from __future__ import annotations

__all__ = ["ModelFileError", "UnsafeModelError"]


class ModelFileError(ValueError):
    """A saved model file or SavedModel directory that cannot be loaded."""


class UnsafeModelError(ModelFileError):
    """A saved model that names code outside the allow list, or a file outside its folder:
    refused before anything in it is deserialised."""
