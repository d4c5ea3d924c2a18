"""``examples/quickstart.py`` (README's quick-start) prints what its comments promise."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from helpers import REPO_ROOT


@pytest.mark.slow  # trains a model for 30 epochs in a fresh process
def test_the_quickstart_prints_a_good_fit_and_nothing_else():
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=600,
        env={k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"},  # a user's
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert len(lines) == 2, done.stdout  # no progress bars
    scores = re.fullmatch(
        r"test RMSE ([\d.]+) \(the training mean: ([\d.]+)\), test NLL (-?[\d.]+)", lines[0]
    )
    coverage = re.fullmatch(r"95 % intervals hold (\d+) % of the test targets", lines[1])
    assert scores and coverage, lines
    rmse, baseline = float(scores[1]), float(scores[2])
    assert rmse < 0.3 and baseline > 0.9  # the comments' "a good fit"
    assert int(coverage[1]) >= 90
    # stderr: TensorFlow's start-up lines only (CUDA probing, CPU features: 7 here), no op's
    # log lines per step (issue 50 saw 100 of "Not handling type DT_DOUBLE")
    noise = done.stderr.splitlines()
    assert len(noise) <= 10 and "Not handling type" not in done.stderr, done.stderr[-2000:]
