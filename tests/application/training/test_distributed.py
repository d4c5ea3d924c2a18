"""Data-parallel training with ``tf.distribute`` matches single-device training.

Under ``MirroredStrategy`` on two logical CPU devices each replica gets half of every global
batch; the losses are summed across replicas by Keras, and the AR1/AR2 Monte Carlo draws of
replica ``r`` are rows ``r B .. (r + 1) B`` of the draws one device makes for the global batch
(:func:`gpflux_avdgp.propagation.propagate`'s ``replica``), so the loss trajectory and the
weights equal single-device training up to float round-off, for the stochastic rules too. With GPUs,
``strategy_from_name("mirrored")`` trains on all of them (skipped on machines without one).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from helpers import SCRIPTS_DIR

SCRIPT = SCRIPTS_DIR / "mirrored_fit.py"


# AR2 under MirroredStrategy also runs in the fast suite through
# tests/application/cli/test_cli_distributed.py.
@pytest.mark.slow
@pytest.mark.parametrize(
    "rule",
    [
        "ar2p",
        pytest.param("ar2", marks=pytest.mark.slow),
        pytest.param("ar1", marks=pytest.mark.slow),
    ],
)
def test_mirrored_strategy_matches_one_device(rule):
    _check_mirrored_matches_one_device(rule)


@pytest.mark.slow
def test_mirrored_strategy_with_an_input_guard_matches_one_device():
    """The guard's loss is each replica's share (SGD: a gradient doubled by two replicas
    would show in the weights, Adam's steps would hide it), its variance quantile the global
    batch's; its weights are among the model's."""
    _check_mirrored_matches_one_device("ar2p", "guard")


@pytest.mark.slow
def test_mirrored_strategy_with_a_guard_trained_every_second_step_matches_one_device():
    """The guard's gradients, made in a conditional on the step count, are all-reduced as in
    every step; with its variance gate (a quantile gathered across replicas, which cannot
    happen in a conditional) it is refused in one line."""
    _check_mirrored_matches_one_device("ar2p", "guard-every-2")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "ar2p", "guard-every-2-variance"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode != 0
    assert "train_every=2 with the variance gate under a strategy of several" in done.stderr


@pytest.mark.slow
def test_a_functional_model_under_mirrored_strategy_matches_one_device_without_place_anchors():
    """Its anchors are placed in the first step, on the global batch's rows on every replica
    (each replica's own half placed other anchors: loss 4.076 against 4.004 on one device)."""
    _check_mirrored_matches_one_device("ar2p", "functional")


def _check_mirrored_matches_one_device(*args: str) -> None:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    single_losses, single_weights = result["single"]
    mirrored_losses, mirrored_weights = result["mirrored"]
    assert len(single_losses) == len(mirrored_losses) == 3
    assert single_losses[-1] < single_losses[0]  # it trained
    # Keras averages the epoch loss in float32, hence rtol 1e-6 on the reported losses
    np.testing.assert_allclose(mirrored_losses, single_losses, rtol=1e-6)
    assert len(single_weights) == len(mirrored_weights)
    for ours, theirs in zip(mirrored_weights, single_weights):
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-11)


GPU_SCRIPT = SCRIPTS_DIR / "gpu_mirrored_fit.py"
GPUS = tf.config.list_physical_devices("GPU")


@pytest.mark.gpu
@pytest.mark.skipif(
    not GPUS, reason="no GPU visible to TensorFlow (tf.config.list_physical_devices('GPU') is [])"
)
def test_mirrored_strategy_over_every_gpu_matches_one_gpu():
    """``strategy_from_name("mirrored")`` trains on every GPU, with one GPU's trajectory."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")  # the GPUs stay visible
    done = subprocess.run(
        [sys.executable, str(GPU_SCRIPT), "ar2"], capture_output=True, text=True, env=env,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["replicas"] == len(GPUS)
    assert all("GPU" in device for device in result["devices"]), result["devices"]
    single_losses, mirrored_losses = result["single"]["losses"], result["mirrored"]["losses"]
    assert single_losses[-1] < single_losses[0]  # it trained
    np.testing.assert_allclose(mirrored_losses, single_losses, rtol=1e-6)
    # NCCL sums the replicas' gradients in its own order: a little more round-off than on CPUs
    for ours, theirs in zip(result["mirrored"]["weights"], result["single"]["weights"]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-8, atol=1e-10)
