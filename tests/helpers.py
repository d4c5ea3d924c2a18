"""Helpers shared by the test modules (``tests/`` is on ``sys.path`` under pytest, so
``from helpers import ...`` works from any test module, in any sub-folder), and the folders the
tests read: the test tree mirrors the packages (``tests/library/core`` tests
``gpflux_avdgp/core``...), so paths are taken from here, not from a test file's depth."""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Sequence

import numpy as np

from avdgp.cli import main
from avdgp.training.rundir import array_data, prepare_run_dir

#: ``(rtol, atol)`` of float64 maths against the NumPy loop references of ``reference.py``: the
#: same formulas summed in another order (and Cholesky solves instead of inverses), so agreement
#: to about 1e-8 is expected; a wrong term would miss by far more.
REFERENCE_TOLERANCE = (1e-8, 1e-8)
#: ``rtol`` of float64 results computed twice by different routes that should agree to
#: round-off (metrics in two units, an exported SavedModel against ``predict_mixture``).
SAME_NUMBERS_RTOL = 1e-10

#: ``tests/``.
TESTS_DIR = Path(__file__).resolve().parent
#: The repository root.
REPO_ROOT = TESTS_DIR.parent
#: Programs the subprocess tests run.
SCRIPTS_DIR = TESTS_DIR / "scripts"
#: Files the tests read (models saved by earlier layouts).
FIXTURES_DIR = TESTS_DIR / "fixtures"
#: The UCI data beside the repository (``../shared/data/uci``); tests that need it skip without.
UCI_ROOT = REPO_ROOT.parent / "shared" / "data" / "uci"


def load_benchmark(name: str) -> ModuleType:
    """The script ``benchmarks/<name>.py`` as a module (the benchmarks are no package)."""
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_cli(capsys, args: Sequence[object]) -> tuple[int, str, str]:
    """Run ``avdgp ARGS`` in this process; returns ``(exit status, stdout, stderr)``."""
    status = main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def assert_one_line_cli_error(
    status: int, out: str, err: str, expected: str, code: int = 2, *, stages: int = 0
) -> None:
    """Exit status ``code``, nothing on stdout, no traceback, and exactly one stderr line that
    starts with ``avdgp`` and holds ``expected``, after ``stages`` progress lines of the command
    (``avdgp predict: loading ...``: what it was doing when it failed)."""
    assert status == code, (status, out, err)
    assert "Traceback" not in err and "Traceback" not in out
    assert out == "", out
    lines = err.splitlines()
    assert len(lines) == stages + 1, err
    command = lines[-1].split(":")[0]
    assert all(line.startswith(f"{command}: ") for line in lines[:-1]), err
    lines = lines[-1:]
    assert lines[0].startswith("avdgp"), lines[0]
    assert expected in lines[0], lines[0]


def prepare_split_run_dir(directory: Path, spec, split, config, dataset: str) -> Path:
    """The run folder ``run(spec, split, config, dataset=dataset, save_dir=directory)`` sets up
    (``settings.json`` checked or written); returns its backup folder."""
    return prepare_run_dir(
        directory,
        spec=spec,
        config=config,
        dataset=dataset,
        data=array_data(split.x_train, split.y_train),
    )


def write_shard(path: Path, values: np.ndarray, header=None, delimiter: str = ",") -> Path:
    """``values`` [n, C] as CSV (17 significant digits: float64 round-trips), gzip if .gz."""
    lines = [] if header is None else [delimiter.join(header)]
    lines += [delimiter.join(f"{v:.17g}" for v in row) for row in np.asarray(values)]
    text = "\n".join(lines) + "\n"
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt") as handle:
            handle.write(text)
    else:
        path.write_text(text)
    return path
