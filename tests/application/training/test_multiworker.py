"""Multi-worker training matches single-device training.

Two worker processes on 127.0.0.1 form a ``MultiWorkerMirroredStrategy`` cluster (gRPC, CPU
only, one replica each) and train small AVDGPs through the runner's ``fit_model``
(``tests/scripts/multiworker_fit.py``), while a third process trains the same models on one
device without a strategy. With the same global batch, each worker takes its half of every
global batch (``shard_global_batches``), Keras sums the replicas' halved mean losses, and the
AR1/AR2 Monte Carlo draws of worker ``w`` are rows ``w B .. (w + 1) B`` of the draws one device
makes for the global batch (the replica id counts across workers), so the loss trajectories
and the weights agree up to float round-off.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from cluster import run_cluster
from helpers import SCRIPTS_DIR

SCRIPT = SCRIPTS_DIR / "multiworker_fit.py"
#: Seconds for a whole cluster run (start-up, 3 epochs per rule, both workers and reference).
TIMEOUT = 420


def train_on_a_cluster(directory: Path, rules: str) -> dict:
    """Results of worker 0, worker 1 and the single-device process for ``rules``."""
    csv_dir = directory / "csv"
    csv_dir.mkdir(parents=True)
    for part in range(2):  # 8 rows each: first column 100 * part + row
        rows = [f"{100 * part + row},0" for row in range(8)]
        (csv_dir / f"part{part}.csv").write_text("\n".join(rows) + "\n")

    def command(name: str) -> list[str]:
        out = directory / f"{name}.json"
        return [sys.executable, str(SCRIPT), str(out), rules, "--csv-dir", str(csv_dir)]

    workers, (single,) = run_cluster(
        [command("worker0"), command("worker1")],
        directory / "logs",
        timeout=TIMEOUT,
        others=[command("single")],
    )
    for finished in (*workers, single):
        assert finished.returncode == 0, finished.describe()
    return {
        name: json.loads((directory / f"{name}.json").read_text())
        for name in ("worker0", "worker1", "single")
    }


@pytest.fixture(scope="module")
def cluster_results(tmp_path_factory) -> dict:
    return train_on_a_cluster(tmp_path_factory.mktemp("multiworker"), "ar2p,ar2")


@pytest.mark.slow
def test_each_worker_gets_its_slice_of_every_global_batch(cluster_results):
    single = cluster_results["single"]["splits"]["rows"]  # 11 rows in batches of 5
    first = cluster_results["worker0"]["splits"]["rows"]
    second = cluster_results["worker1"]["splits"]["rows"]
    assert [len(batch[0]) for batch in single] == [5, 5, 1]
    assert [len(b[0]) for b in first] == [3, 3, 1] and [len(b[0]) for b in second] == [2, 2, 0]
    for whole, (ours,), (theirs,) in zip(single, first, second):
        assert ours + theirs == whole[0]  # worker 0 the first rows, worker 1 the rest


@pytest.mark.slow
def test_file_pipelines_are_split_by_batch_not_by_file(cluster_results):
    """tf.data's default AUTO policy gives each worker its own file (different batches);
    ``shard_global_batches`` gives each worker its half of every global batch."""
    single = [batch[0] for batch in cluster_results["single"]["splits"]["files_sharded"]]
    auto = [cluster_results[w]["splits"]["files_auto"] for w in ("worker0", "worker1")]
    assert [row for (batch,) in auto[0] for row in batch] == list(range(8))  # file 0 only
    assert [row for (batch,) in auto[1] for row in batch] == list(range(100, 108))
    sharded = [cluster_results[w]["splits"]["files_sharded"] for w in ("worker0", "worker1")]
    assert len(single) == len(sharded[0]) == len(sharded[1]) == 4
    for whole, (ours,), (theirs,) in zip(single, *sharded):
        assert ours + theirs == whole and len(ours) == len(theirs) == 2


@pytest.mark.slow
def test_replica_ids_count_across_workers(cluster_results):
    """The layers' ``_replica_position`` sees the global replica id: worker 1 is replica 1."""
    assert cluster_results["single"]["splits"]["replicas"] == [[0, 1]]
    assert cluster_results["worker0"]["splits"]["replicas"] == [[0, 2]]
    assert cluster_results["worker1"]["splits"]["replicas"] == [[1, 2]]


def assert_same_training(results: dict, rule: str) -> None:
    single = results["single"][rule]
    assert len(single["losses"]) == 3
    assert single["losses"][-1] < single["losses"][0]  # it trained
    for worker in ("worker0", "worker1"):
        ours = results[worker][rule]
        # Keras averages the epoch loss in float32, hence rtol 1e-6 on the reported losses
        np.testing.assert_allclose(ours["losses"], single["losses"], rtol=1e-6)
        assert len(ours["weights"]) == len(single["weights"])
        for mine, theirs in zip(ours["weights"], single["weights"]):
            np.testing.assert_allclose(mine, theirs, rtol=1e-9, atol=1e-11)
    for mine, theirs in zip(
        results["worker0"][rule]["weights"], results["worker1"][rule]["weights"]
    ):
        np.testing.assert_array_equal(mine, theirs)  # all-reduced: the same on every worker


@pytest.mark.slow
@pytest.mark.parametrize("rule", ["ar2p", "ar2"])
def test_multiworker_training_matches_one_device(cluster_results, rule):
    assert_same_training(cluster_results, rule)


@pytest.mark.slow
def test_multiworker_training_matches_one_device_ar1(tmp_path):
    assert_same_training(train_on_a_cluster(tmp_path, "ar1"), "ar1")
