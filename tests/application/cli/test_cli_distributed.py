"""``avdgp fit --strategy``: data-parallel training from the command line.

One concurrent launch (``python -m avdgp fit`` subprocesses, CPU only) trains the same
small AR2 model on one device, under ``--strategy mirrored`` on two logical CPUs
(``$AVDGP_CPU_DEVICES=2``), and under ``--strategy multiworker`` as two workers on 127.0.0.1;
two more mirrored runs check the batch-size rules. The distributed records equal the
single-device record (global batch 40, 160 training rows: every batch splits evenly); only the
chief prints and writes. Bad ``--strategy``, ``TF_CONFIG`` and ``$AVDGP_CPU_DEVICES`` values
are checked in-process.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from cluster import Finished, run_cluster
from helpers import assert_one_line_cli_error, run_cli

from avdgp.cli import main

#: A small AR2 model, 2 epochs, global batch 40 (160 training rows after the 8:1:1 split).
FIT = [
    "--rule", "ar2", "--layers", "2", "--hidden-dims", "2", "--inducing", "4,3", "--points", "4",
    "--epochs", "2", "--batch-size", "40", "--learning-rate", "0.02",
]  # fmt: skip
TIMEOUT = 480
MIRRORED = {"AVDGP_CPU_DEVICES": "2"}


def write_data(path: Path) -> Path:
    rng = np.random.default_rng(3)
    x = rng.uniform(-2, 2, size=(200, 2))
    y = np.sin(2 * x[:, 0]) * x[:, 1] + 0.1 * rng.standard_normal(200)
    rows = ["x1,x2,y"] + [f"{a!r},{b!r},{c!r}" for (a, b), c in zip(x, y)]
    path.write_text("\n".join(rows) + "\n")
    return path


def fit_command(data: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "avdgp", "fit", str(data), *FIT, *args]


def stderr_lines(finished: Finished) -> list[str]:
    """What the user sees on stderr (TensorFlow's own C++ start-up lines aside)."""
    return [line for line in finished.stderr.splitlines() if line and "I0000" not in line]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("cli_distributed")
    data = write_data(root / "data.csv")
    (root / "tmp0").mkdir(), (root / "tmp1").mkdir()
    save = root / "multiworker_save"  # one folder, as on a cluster's shared file system
    multiworker = ["--strategy", "multiworker", "--save", str(save)]
    workers, others = run_cluster(
        [
            fit_command(data, "--json", str(root / "worker0.json"), *multiworker),
            fit_command(data, "--json", str(root / "worker1.json"), *multiworker),
        ],
        root / "logs",
        timeout=TIMEOUT,
        worker_env=[{"TMPDIR": str(root / "tmp0")}, {"TMPDIR": str(root / "tmp1")}],
        others=[
            fit_command(data, "--quiet", "--json", str(root / "single.json")),
            fit_command(
                data, "--strategy", "mirrored", "--json", str(root / "mirrored.json"), "--quiet"
            ),
            fit_command(data, "--strategy", "mirrored", "--batch-size", "45", "--epochs", "1"),
            fit_command(data, "--strategy", "mirrored", "--batch-size", "53", "--quiet"),
        ],
        others_env=[{}, MIRRORED, MIRRORED, MIRRORED],
    )
    single, mirrored, uneven, too_small = others
    return {
        "root": root,
        "save": save,
        "workers": workers,
        "single": single,
        "mirrored": mirrored,
        "uneven": uneven,
        "too_small": too_small,
    }


def record(runs: dict, name: str) -> dict:
    path = runs["root"] / f"{name}.json"
    assert path.is_file(), f"{path} missing"
    return json.loads(path.read_text())


def assert_same_record(ours: dict, single: dict) -> None:
    assert single["replicas"] == 1 and ours["replicas"] == 2
    np.testing.assert_allclose(ours["final_train_loss"], single["final_train_loss"], rtol=1e-6)
    for part in ("test", "test_original_units", "val"):
        assert ours[part].keys() == single[part].keys()
        for key, value in single[part].items():
            np.testing.assert_allclose(ours[part][key], value, rtol=1e-6, atol=1e-9, err_msg=key)
    assert ours["num_parameters"] == single["num_parameters"]


@pytest.mark.slow
def test_fit_mirrored_on_two_logical_cpus_matches_one_device(runs):
    for name in ("single", "mirrored"):
        assert runs[name].returncode == 0, runs[name].describe()
    assert stderr_lines(runs["mirrored"]) == []  # --quiet
    assert "avdgp-ar2 on data" in runs["mirrored"].stdout
    assert_same_record(record(runs, "mirrored"), record(runs, "single"))


@pytest.mark.slow
def test_fit_multiworker_matches_one_device(runs):
    chief, other = runs["workers"]
    assert chief.returncode == 0, chief.describe()
    assert other.returncode == 0, other.describe()
    assert_same_record(record(runs, "worker0"), record(runs, "single"))


@pytest.mark.slow
def test_fit_multiworker_only_the_chief_prints_and_writes(runs):
    chief, other = runs["workers"]
    assert chief.returncode == 0 and other.returncode == 0, other.describe()
    assert "avdgp-ar2 on data" in chief.stdout and "test (standardised units)" in chief.stdout
    assert [line for line in stderr_lines(chief) if "epoch 2/2" in line]  # its progress
    assert other.stdout == ""
    assert stderr_lines(other) == ["avdgp fit: worker 1 of 2 finished"]
    assert not (runs["root"] / "worker1.json").exists()
    saved = {path.name for path in runs["save"].iterdir()}  # no backup/, no workertemp_1/
    assert saved == {
        ".avdgp-run",  # the mark of a run folder avdgp made
        ".lock",  # the chief's lock of the folder (released with its process)
        "checkpoint",
        "model.keras",
        "run.json",
        "settings.json",
        "weights.data-00000-of-00001",
        "weights.index",
    }, saved
    info = json.loads((runs["save"] / "run.json").read_text())
    assert info["result"]["replicas"] == 2 and info["data"]["target_name"] == "y"
    for worker in ("tmp0", "tmp1"):  # the non-chief's temporary save folder is gone
        assert list((runs["root"] / worker).iterdir()) == [], worker


@pytest.mark.slow
def test_fit_mirrored_warns_about_batches_that_do_not_split_evenly(runs):
    uneven = runs["uneven"]
    assert uneven.returncode == 0, uneven.describe()
    warnings = [line for line in stderr_lines(uneven) if "warning" in line]
    assert warnings == [
        "avdgp fit: warning: batches of 25 and 45 rows do not split evenly over 2 replicas, so "
        "those steps weight rows differently from single-device training; for the same "
        "trajectory make the batch size and the last batch (160 mod 45 = 25) multiples of 2"
    ]


@pytest.mark.slow
def test_fit_mirrored_refuses_a_batch_smaller_than_the_replicas(runs):
    too_small = runs["too_small"]
    assert too_small.returncode == 2, too_small.describe()
    assert too_small.stdout == ""
    assert stderr_lines(too_small) == [
        "avdgp fit: batch_size: a batch of 1 rows cannot be split over 2 replicas (160 rows "
        "in batches of 53); choose a batch size, and a last batch (N mod batch size), of at "
        "least 2 rows"
    ]


# ---------------------------------------------------------------------------------------------
# Bad --strategy, TF_CONFIG and $AVDGP_CPU_DEVICES: one line, exit status 2 (in-process)
# ---------------------------------------------------------------------------------------------


def assert_cli_refuses(capsys, args: list, expected: str) -> None:
    assert_one_line_cli_error(*run_cli(capsys, args), expected)


@pytest.fixture
def data(tmp_path) -> Path:
    return write_data(tmp_path / "data.csv")


def test_unknown_strategy(capsys, data):
    assert_cli_refuses(
        capsys,
        ["fit", data, "--strategy", "tpu"],
        "argument --strategy: invalid choice: 'tpu' (choose from 'default', 'mirrored', "
        "'multiworker')",
    )


@pytest.mark.parametrize(
    "value, expected",
    [
        (None, "avdgp fit: --strategy multiworker: TF_CONFIG: not set; multi-worker training "),
        ("{not json", "avdgp fit: --strategy multiworker: TF_CONFIG: not valid JSON"),
        (
            '{"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 1}}',
            "TF_CONFIG: task index 1 is not in 0..0 for job 'worker'",
        ),
    ],
)
def test_multiworker_without_a_valid_tf_config(capsys, monkeypatch, data, value, expected):
    if value is None:
        monkeypatch.delenv("TF_CONFIG", raising=False)
    else:
        monkeypatch.setenv("TF_CONFIG", value)
    assert_cli_refuses(capsys, ["fit", data, "--strategy", "multiworker"], expected)
    assert_cli_refuses(  # the message shows what TF_CONFIG must hold
        capsys, ["fit", data, "--strategy", "multiworker"], '"task": {"type": "worker"'
    )


@pytest.mark.parametrize("value", ["abc", "0", "-2"])
def test_bad_cpu_device_count(capsys, monkeypatch, data, value):
    monkeypatch.setenv("AVDGP_CPU_DEVICES", value)
    assert_cli_refuses(
        capsys,
        ["fit", data, "--strategy", "mirrored"],
        f"avdgp fit: $AVDGP_CPU_DEVICES: expected a positive integer, got '{value}'",
    )


def test_a_lost_worker_is_reported_in_one_line(capsys, monkeypatch, data):
    """What a worker gets when another stops mid-run (TensorFlow's heartbeat check; seen with
    a worker killed after its first epoch): one line naming the lost task, exit status 1."""
    import tensorflow as tf

    import avdgp.training.skeleton as skeleton

    def lost(*args, **kwargs):
        raise tf.errors.UnavailableError(
            None,
            None,
            "Graph execution error:\n\nDetected at node StatefulPartitionedCall defined at (most "
            'recent call last):\n  File "x.py", line 1\n\n{{function_node CollectiveReduceV2}} '
            "Collective ops is aborted by: Error reported from /job:worker/task:1: The following "
            "tasks are unhealthy (stopped sending heartbeats):\n/job:worker/replica:0/task:1\n"
            "The tasks have crashed.",
        )

    monkeypatch.setattr(skeleton, "run", lost)
    status = main(["fit", str(data), "--quiet"])
    captured = capsys.readouterr()
    assert status == 1 and captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert lines[0].startswith(
        "avdgp fit: a worker of the cluster stopped or cannot be reached "
        "(Collective ops is aborted by"
    )
    assert "/job:worker/replica:0/task:1" in lines[0] and "File" not in lines[0]
    assert lines[0].endswith(
        "start every worker again (a run with --save resumes from its last backup)"
    )
