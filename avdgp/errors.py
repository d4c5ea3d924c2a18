"""The application's errors about the user's input: each ends an ``avdgp`` command with one line
and exit status 2 (``avdgp.cli.main``).

The library raises ``TypeError`` for an argument of the wrong type and ``ValueError`` for a
wrong value. The command line gives the library values argparse has already typed, so a
``TypeError`` there is our bug (an internal error, exit 1), while a ``ValueError`` names a value
the user chose (exit 2).
"""

from __future__ import annotations

__all__ = ["CommandLineError", "UsageError"]


class UsageError(Exception):
    """The user's input cannot be used: a file, a table, an option or a folder."""


class CommandLineError(UsageError):
    """Bad command-line input; the message already names the command and is printed as is."""
