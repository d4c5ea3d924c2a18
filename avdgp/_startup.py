"""What the command line settles before TensorFlow loads: the working folder is no import
location, and the address-space limit leaves TensorFlow room to start."""

from __future__ import annotations

import os
import sys

__all__ = ["TENSORFLOW_BYTES", "check_address_space", "skip_working_folder"]

#: Address space TensorFlow itself takes before any model (measured on 2026-11-25: ``avdgp fit``
#: and ``avdgp predict`` abort under ``ulimit -v 2500000``, run under ``3000000``).
TENSORFLOW_BYTES = 3_000_000 * 1024


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


def check_address_space() -> None:
    """Exit with status 2 and one line if ``ulimit -v`` leaves TensorFlow too little address
    space (it would abort or segfault while loading, with no message of ours)."""
    try:
        import resource
    except ImportError:  # not a POSIX system
        return
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY and soft < TENSORFLOW_BYTES:
        print(
            f"avdgp: the address-space limit (ulimit -v) is {soft // 1024} KiB; TensorFlow needs "
            f"about {TENSORFLOW_BYTES // 1024} KiB to start; raise it (e.g. 'ulimit -v "
            "unlimited')",
            file=sys.stderr,
        )
        raise SystemExit(2)
