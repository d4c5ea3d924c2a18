"""The working folder is not an import location for the command line."""

from __future__ import annotations

import os
import sys

__all__ = ["skip_working_folder"]


def skip_working_folder() -> None:
    """Drop the working folder that ``python -m`` puts first on ``sys.path``, so that a module
    file lying in the folder ``avdgp`` is run from (a model folder from elsewhere, say) is never
    imported in place of an installed one (``-P`` / ``PYTHONSAFEPATH`` in Python 3.11)."""
    args = list(getattr(sys, "orig_argv", []))
    started_as_module = any(a == "-m" and b == "avdgp" for a, b in zip(args, args[1:]))
    if sys.flags.safe_path or not sys.path or not started_as_module:
        return
    if sys.path[0] in ("", os.getcwd()) and not os.path.isfile(
        os.path.join(sys.path[0] or ".", "avdgp", "__init__.py")
    ):
        del sys.path[0]
