"""Helpers shared by the test modules (``tests/`` is on ``sys.path`` under pytest, so
``from helpers import ...`` works from any test module)."""

from __future__ import annotations

from typing import Sequence

from gpflux_avdgp.cli import main


def run_cli(capsys, args: Sequence[object]) -> tuple[int, str, str]:
    """Run ``avdgp ARGS`` in this process; returns ``(exit status, stdout, stderr)``."""
    status = main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def assert_one_line_cli_error(
    status: int, out: str, err: str, expected: str, code: int = 2
) -> None:
    """Exit status ``code``, nothing on stdout, no traceback, and exactly one stderr line that
    starts with ``avdgp`` and holds ``expected``."""
    assert status == code, (status, out, err)
    assert "Traceback" not in err and "Traceback" not in out
    assert out == "", out
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("avdgp"), lines[0]
    assert expected in lines[0], lines[0]
