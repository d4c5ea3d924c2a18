"""Import TensorFlow without its start-up log noise on stderr.

TensorFlow 2.21 writes a handful of INFO lines (oneDNN notice, CUDA stubs, CPU features) to
file descriptor 2 while it loads, before ``TF_CPP_MIN_LOG_LEVEL`` takes effect, so every
``avdgp`` command would start with them. This module captures fd 2 while TensorFlow loads and
lists its devices, then writes back every captured line except those known start-up notices.
It does nothing if TensorFlow is already imported. The application calls it only under the command
line (:func:`running_the_cli`): importing ``gpflux_avdgp`` as a library neither redirects file
descriptor 2 nor probes the devices, and TensorFlow's own ``TF_CPP_MIN_LOG_LEVEL`` governs its
notices there.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile

__all__ = ["import_tensorflow_quietly", "running_the_cli"]

_NOISE = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\) is called"
    r"|[IW]\d{4} [\d:. ]+\d+ (port|cudart_stub|cpu_feature_guard)\.cc:\d+\]"
    r"|E\d{4} [\d:. ]+\d+ cuda_platform\.cc:\d+\] failed call to cuInit"
    r"|To enable the following instructions: .* rebuild TensorFlow)"
)


def _is_noise(line: str) -> bool:
    return bool(_NOISE.match(line))


def running_the_cli() -> bool:
    """Whether this process is ``avdgp ...`` or ``python -m avdgp ...``."""
    if os.path.basename(sys.argv[0] if sys.argv else "").startswith("avdgp"):
        return True
    args = list(getattr(sys, "orig_argv", []))
    return any(a == "-m" and b == "avdgp" for a, b in zip(args, args[1:]))


def import_tensorflow_quietly() -> None:
    """Import TensorFlow and list its devices with the start-up notices filtered out.

    Under the ``avdgp`` command line it also defaults ``TF_CPP_MIN_LOG_LEVEL`` to 2, since
    TensorFlow's C++ warnings (e.g. grappler's "Not handling type DT_DOUBLE") are not the
    user's concern there; a library user's setting is left alone.
    """
    if "tensorflow" in sys.modules:
        return
    if running_the_cli():
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        saved_fd = os.dup(2)
    except OSError:  # no usable stderr: nothing to filter
        import tensorflow  # noqa: F401

        return
    with tempfile.TemporaryFile(mode="w+b") as capture:
        sys.stderr.flush()
        os.dup2(capture.fileno(), 2)
        try:
            import tensorflow as tf

            tf.config.list_physical_devices()  # the CUDA probe logs here
        finally:
            sys.stderr.flush()
            os.dup2(saved_fd, 2)
            os.close(saved_fd)
            capture.seek(0)
            text = capture.read().decode("utf-8", errors="replace")
            kept = [line for line in text.splitlines(keepends=True) if not _is_noise(line)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()
