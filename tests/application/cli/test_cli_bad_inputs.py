"""Bad data and settings from outside end with one line and exit 2 (data, options) or exit 3
(divergence), never "internal error": absurd learning rates, truncated and changed shards,
columns of huge values, and generated broken CSV files (the property test)."""

from __future__ import annotations

import errno
import gzip
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from gpflow.keras import tf_keras
from helpers import assert_one_line_cli_error, run_cli, write_shard

from avdgp.cli import demo
from avdgp.cli.main import main
from avdgp.data import DataError
from avdgp.errors import CommandLineError, UsageError
from avdgp.training import TrainingDiverged
from avdgp.training.fit import _describe_non_finite_step, is_numerical_failure
from avdgp.training.progress import EpochProgress

TINY = ["--epochs", "2", "--batch-size", "40", "--points", "4", "--quiet"]
SHALLOW = ["--model", "sgp-avi", "--inducing", "4"]


def _table(rng: np.random.Generator, rows: int = 80) -> np.ndarray:
    x = rng.uniform(-2.0, 2.0, size=(rows, 2))
    return np.column_stack([x, np.sin(x[:, 0]) + 0.1 * rng.normal(size=rows)])


def _write_csv(path: Path, table: np.ndarray, header: str = "a,b,y") -> Path:
    return write_shard(path, table, header.split(","))


# ------------------------------------------------------------------------ settings
@pytest.mark.parametrize("rate", ["1e300", "inf", "4e38"])
def test_a_learning_rate_beyond_float32_is_refused_by_option(capsys, tmp_path, rng, rate):
    data = _write_csv(tmp_path / "d.csv", _table(rng))
    status, out, err = run_cli(capsys, ["fit", data, *TINY, "--learning-rate", rate])
    assert_one_line_cli_error(status, out, err, "--learning-rate: expected a positive number up")


@pytest.mark.slow
def test_a_huge_learning_rate_with_the_cosine_schedule_diverges_with_exit_3(capsys, tmp_path, rng):
    data = _write_csv(tmp_path / "d.csv", _table(rng))
    args = ["fit", data, *TINY, *SHALLOW, "--learning-rate", "3e38", "--schedule", "cosine"]
    status, out, err = run_cli(capsys, args)
    assert_one_line_cli_error(status, out, err, "avdgp fit: training diverged:", code=3)


@pytest.mark.parametrize(
    "message",
    [
        "gp_layer_1: non-finite values (NaN or inf) in the layer output : Tensor had NaN values",
        "SVGP posterior Cholesky factor is non-finite : Tensor had Inf values",
        "Cholesky decomposition was not successful. The input might not be valid.",
    ],
)
def test_numerical_failures_are_divergences(message):
    assert is_numerical_failure(tf.errors.InvalidArgumentError(None, None, message))


@pytest.mark.parametrize(
    "message, where",
    [
        ("Cholesky decomposition was not successful.", "a Cholesky factor"),
        ("SVGP posterior Cholesky factor is non-finite", "a Cholesky factor"),
        ("Detected at node 'x/CheckNumerics'", "a checked tensor"),
    ],
)
def test_gpflows_numerical_failures_are_described_as_such(message, where):
    progress = EpochProgress("m", stream=None)
    progress.epoch, progress.batch = 2, 4
    error = tf.errors.InvalidArgumentError(None, None, message)
    model = tf_keras.Sequential([tf_keras.Input((1,)), tf_keras.layers.Dense(1)])
    assert _describe_non_finite_step(error, model, progress, backup=None) == (
        f"m: training stopped in epoch 3, batch 5: non-finite values (NaN or inf) in {where} "
        "of a GPflow computation"
    )


def test_shape_and_data_errors_are_not_divergences():
    error = tf.errors.InvalidArgumentError(None, None, "Expect 3 fields but have 2 in record 0")
    assert not is_numerical_failure(error)


# ------------------------------------------------------------------------------ data
def test_a_column_of_huge_values_is_refused_by_name(capsys, tmp_path, rng):
    table = _table(rng)
    table[:, 1] = rng.uniform(0.5, 1.5, size=len(table)) * 1e308
    data = _write_csv(tmp_path / "d.csv", table, header="a,huge,y")
    status, out, err = run_cli(capsys, ["fit", data, *TINY])
    assert_one_line_cli_error(status, out, err, "d.csv: column 2 ('huge'): values up to")


def test_a_truncated_gzip_shard_is_named_at_the_scan(capsys, tmp_path, rng):
    folder = tmp_path / "shards"
    folder.mkdir()
    for k in range(3):
        _write_csv(folder / f"p{k}.csv.gz", _table(rng, rows=2000))
    whole = (folder / "p1.csv.gz").read_bytes()
    (folder / "p1.csv.gz").write_bytes(whole[: len(whole) // 2])
    status, out, err = run_cli(capsys, ["fit", folder, *TINY, *SHALLOW])
    assert_one_line_cli_error(status, out, err, "p1.csv.gz: could not read the file after line")


@pytest.mark.slow
def test_whitespace_only_lines_are_skipped(capsys, tmp_path, rng):
    data = _write_csv(tmp_path / "d.csv", _table(rng))
    lines = data.read_text().splitlines()
    data.write_text("\n".join(lines[:30] + ["   ", "\t"] + lines[30:] + ["  "]) + "\n")
    status, _, err = run_cli(capsys, ["fit", data, *TINY, *SHALLOW, "--json", tmp_path / "r"])
    assert status == 0, err


@pytest.mark.slow
def test_a_shard_changed_during_a_streamed_fit_is_named_and_the_run_resumes(
    capsys, tmp_path, rng, monkeypatch
):
    """A training shard rewritten after epoch 2: the fit stops before epoch 3 naming it (exit 2);
    with the shard restored, the same command resumes from epoch 2 and finishes."""
    folder = tmp_path / "shards"
    folder.mkdir()
    for k in range(3):
        _write_csv(folder / f"p{k}.csv", _table(rng))
    original = (folder / "p0.csv").read_text()
    command = ["fit", folder, *SHALLOW, "--epochs", "4", "--batch-size", "40", "--quiet"]
    command += ["--save", tmp_path / "run", "--json", tmp_path / "record.json"]
    command += ["--backup-interval", "0"]  # the backup of epoch 2 is where the run resumes

    finish_epoch = EpochProgress.on_epoch_end

    def rewrite_after_epoch_2(self, epoch, logs=None):
        finish_epoch(self, epoch, logs)
        if epoch == 1:
            (folder / "p0.csv").write_text(original.replace("\n", "\n\n", 3))

    monkeypatch.setattr(EpochProgress, "on_epoch_end", rewrite_after_epoch_2)
    status, out, err = run_cli(capsys, command)
    assert_one_line_cli_error(status, out, err, "p0.csv: changed size from")
    assert "since it was scanned (before epoch 3)" in err
    assert f"{tmp_path / 'run'} keeps its last backup" in err

    monkeypatch.setattr(EpochProgress, "on_epoch_end", finish_epoch)
    (folder / "p0.csv").write_text(original)  # restored: same content, a new mtime
    status, out, err = run_cli(capsys, command)
    assert status == 0, err
    record = (tmp_path / "record.json").read_text()
    assert '"resumed_from_epoch": 2' in record


# -------------------------------------------------------------- generated bad CSV files
def _broken_csv(rng: np.random.Generator, text: str) -> tuple[str, str]:
    """``text`` (a valid CSV with a header) with one random defect that makes it invalid, and
    random blank lines on top; returns ``(new text, defect)``."""
    lines = text.splitlines()
    row = int(rng.integers(1, len(lines)))
    cells = lines[row].split(",")
    defect = ["non-numeric", "missing-cell", "extra-cell", "empty-cell", "truncated"][
        int(rng.integers(5))
    ]
    if defect == "non-numeric":
        cells[int(rng.integers(len(cells)))] = str(rng.choice(["abc", "1.2.3", "--", "1e", "x7"]))
    elif defect == "missing-cell":
        cells.pop(int(rng.integers(len(cells))))
    elif defect == "extra-cell":
        cells.insert(int(rng.integers(len(cells) + 1)), f"{rng.normal():.3g}")
    elif defect == "empty-cell":
        cells[int(rng.integers(len(cells)))] = ""
    else:  # cut inside the row, before its last delimiter
        joined = ",".join(cells)
        cells = [joined[: int(rng.integers(1, joined.rindex(",") + 1))]]
    lines[row] = ",".join(cells)
    if defect == "truncated":
        lines = lines[: row + 1]
    for _ in range(int(rng.integers(0, 4))):  # blank and whitespace-only lines anywhere
        lines.insert(int(rng.integers(1, len(lines) + 1)), str(rng.choice(["", "  ", "\t"])))
    return "\n".join(lines) + ("\n" if defect != "truncated" else ""), defect


@pytest.mark.slow
def test_generated_broken_csv_files_end_with_one_line_and_exit_2(capsys, tmp_path):
    """At least 50 files, every one broken by a random defect, some gzip-compressed: each is
    refused with one line (no traceback) that names the file, before any training."""
    rng = np.random.default_rng(20261124)
    valid = _write_csv(tmp_path / "valid.csv", _table(rng, rows=40)).read_text()
    defects = []
    for index in range(60):
        text, defect = _broken_csv(rng, valid)
        name = f"broken_{index:02d}.csv" + (".gz" if index % 4 == 3 else "")
        path = tmp_path / name
        if name.endswith(".gz"):
            with gzip.open(path, "wt") as handle:
                handle.write(text)
        else:
            path.write_text(text)
        status, out, err = run_cli(capsys, ["fit", path, *TINY, *SHALLOW])
        assert_one_line_cli_error(status, out, err, name)
        defects.append(defect)
    assert len(set(defects)) == 5  # every kind of defect was generated


@pytest.mark.slow
def test_generated_broken_shards_end_with_one_line_and_exit_2(capsys, tmp_path):
    """The same defects in one of three streamed shards: named at the scan, exit 2."""
    rng = np.random.default_rng(7)
    for index in range(12):
        folder = tmp_path / f"set{index}"
        folder.mkdir()
        for k in range(3):
            _write_csv(folder / f"p{k}.csv", _table(rng, rows=40))
        broken = folder / f"p{int(rng.integers(3))}.csv"
        text, _ = _broken_csv(rng, broken.read_text())
        broken.write_text(text)
        status, out, err = run_cli(capsys, ["fit", folder, *TINY, *SHALLOW])
        assert_one_line_cli_error(status, out, err, broken.name)
        shutil.rmtree(folder)
        assert not os.path.exists(folder)


@pytest.mark.parametrize(
    "error, status, start",
    [
        (CommandLineError("avdgp fit: --epochs 0: expected >= 1"), 2, "avdgp fit: --epochs 0"),
        (DataError("d.csv: row 3: not a number"), 2, "avdgp demo: d.csv: row 3"),
        (UsageError("m: the folder is in use"), 2, "avdgp demo: m: the folder"),
        (ValueError("num_inducing: expected an integer >= 1, got 0"), 2, "avdgp demo: num_"),
        (FileNotFoundError("no such file"), 2, "avdgp demo: no such file"),
        (TrainingDiverged("loss is NaN"), 3, "avdgp demo: training diverged: loss is NaN"),
        (
            TypeError("seed: expected an int, got 'a' (str)"),
            1,
            "avdgp demo: internal error: TypeError",
        ),
        (
            MemoryError("Unable to allocate 74.5 GiB"),
            2,
            "avdgp demo: out of memory (MemoryError: Un",
        ),
        (
            tf.errors.ResourceExhaustedError(None, None, "OOM when allocating [[node x]]"),
            2,
            "avdgp demo: out of memory (ResourceExhaustedError: OOM when allocating); lower",
        ),
        (
            tf.errors.ResourceExhaustedError(
                None,
                None,
                "m/backup/chief/ckpt-3_temp/part-00000-of-00001.data-00000-of-00001"
                ".tempstate1; No space left on device",
            ),
            2,
            "avdgp demo: the disk is full (m/backup/chief/ckpt-3_temp/",
        ),
        (OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), 2, "avdgp demo: the disk is full"),
    ],
    ids=[
        "command-line",
        "data",
        "usage",
        "value",
        "file",
        "diverged",
        "type-is-ours",
        "memory",
        "tensorflow-memory",
        "full-disk-checkpoint",
        "full-disk",
    ],
)
def test_main_maps_each_error_type_to_its_exit_status(monkeypatch, capsys, error, status, start):
    """Input errors exit 2 and divergence 3 with one line; a TypeError can only be our bug (the
    command line passes the library values argparse has typed): internal error, exit 1."""

    def failing_command(args):
        raise error

    monkeypatch.setattr(demo, "demo_command", failing_command)
    monkeypatch.delenv("AVDGP_DEBUG", raising=False)
    assert main(["demo"]) == status
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(start), line


@pytest.mark.parametrize(
    "options, expected",
    [
        (["--inducing", "100000"], "--inducing 100000,100000,100000 --points 32 --batch-size"),
        (["--points", "1000000"], "--inducing 8,4,4 --points 1000000 --batch-size 100: a "),
        (["--model", "svgp", "--inducing", "100000"], "--inducing 100000 --points 32"),
    ],
)
def test_sizes_that_cannot_fit_in_memory_are_refused_before_training(
    capsys, tmp_path, rng, options, expected
):
    """The step's memory is estimated from the sizes (``avdgp.training.memory``) and
    refused in one line naming the options, before TensorFlow allocates (or the kernel kills us)."""
    data = _write_csv(tmp_path / "d.csv", _table(rng))
    status, out, err = run_cli(capsys, ["fit", data, "--epochs", "1", "--quiet", *options])
    assert_one_line_cli_error(status, out, err, expected)
    assert "more than the" in err and "of memory here; lower --inducing" in err


def test_the_step_memory_estimate_passes_the_paper_models():
    """The estimate refuses absurd sizes only: the paper's models on D = 18 need well under a
    GiB; SVGP with 100,000 inducing points needs the 8 * M^2 * 4 bytes of its q_sqrt alone."""
    from avdgp.training.memory import step_bytes
    from avdgp.zoo import ModelSpec

    for model in ("avdgp", "sgp-avi", "svgp", "dsdgp", "dspp", "solve-gp"):
        assert (
            step_bytes(ModelSpec(model=model, rule="ar2p" if model == "avdgp" else None), 18, 100)
            < 2**30
        ), model
    huge = step_bytes(ModelSpec(model="svgp", num_inducing=[100_000]), 18, 100)
    assert huge >= 8 * 100_000**2 * 4


@pytest.mark.slow  # a subprocess under a resource limit
@pytest.mark.parametrize("kib", [1_000_000, 2_500_000])
def test_an_address_space_limit_too_small_for_tensorflow_is_one_line(tmp_path, kib):
    """Under ``ulimit -v`` 1 GB TensorFlow's import failed with a traceback, under 2.5 GB it
    aborted with no message; the command line now checks the limit before loading it (after
    the checks that need no TensorFlow: the data file is read first)."""
    import resource
    import subprocess
    import sys

    np.savetxt(tmp_path / "data.csv", np.arange(60.0).reshape(20, 3), delimiter=",")

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (kib * 1024, resource.RLIM_INFINITY))

    done = subprocess.run(
        [sys.executable, "-m", "avdgp", "fit", "data.csv"],
        cwd=tmp_path,
        preexec_fn=limit,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"avdgp: the address-space limit (ulimit -v) is {kib} KiB; TensorFlow needs about "
        "3000000 KiB to start; raise it (e.g. 'ulimit -v unlimited')"
    )


def test_a_header_naming_a_column_twice_is_refused_before_training(capsys, tmp_path, rng):
    """``predict`` reads columns by name, so ``fit`` refuses what ``predict`` would."""
    data = _write_csv(tmp_path / "d.csv", _table(rng), header="a,a,y")
    status, out, err = run_cli(capsys, ["fit", data, *TINY])
    assert_one_line_cli_error(status, out, err, "names column 'a' more than once")
