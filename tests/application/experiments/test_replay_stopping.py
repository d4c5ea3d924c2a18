"""``benchmarks/replay_stopping.py`` replays Keras' ``EarlyStopping`` on recorded curves: the
epoch it keeps and the epoch it stops at must be Keras' own."""

import json

import numpy as np
import pytest
from gpflow.keras import tf_keras
from helpers import load_benchmark


def _replay_module():
    return load_benchmark("replay_stopping")


class _Model:
    stop_training = False


def _keras_kept_and_stopped(val_nll: list[float], patience: int) -> tuple[int, int]:
    """``(best epoch, last trained epoch)``, 1-based, of Keras' own ``EarlyStopping``."""
    stopper = tf_keras.callbacks.EarlyStopping(monitor="val_nll", mode="min", patience=patience)
    model = _Model()
    stopper.set_model(model)
    stopper.on_train_begin()
    for epoch, value in enumerate(val_nll):
        stopper.on_epoch_end(epoch, {"val_nll": value})
        if model.stop_training:
            return stopper.best_epoch + 1, epoch + 1
    return stopper.best_epoch + 1, len(val_nll)


@pytest.mark.parametrize("patience", [1, 3, 10, 20])
def test_kept_epoch_is_keras_early_stopping(patience):
    replay = _replay_module()
    rng = np.random.default_rng(patience)
    for _ in range(50):
        # falling curves with noise and plateaus, as validation NLL curves are
        curve = list(np.cumsum(rng.normal(-0.01, 0.05, size=100)))
        assert replay.kept_epoch(curve, patience, 1) == _keras_kept_and_stopped(curve, patience)


def test_a_late_start_keeps_the_best_epoch_before_it():
    replay = _replay_module()
    curve = [1.0, 0.5] + [0.6] * 60
    assert replay.kept_epoch(curve, 20, 1) == (2, 22)
    assert replay.kept_epoch(curve, 20, 50) == (2, 50)  # stops at 50, keeps epoch 2


def test_rules_and_summary_on_recorded_curves(tmp_path, capsys):
    """Two runs of 30 epochs and 7 steps: a step floor of 2000 never stops them; the summary
    compares every rule with the default."""
    replay = _replay_module()
    (tmp_path / "results.csv").write_text(
        "dataset,model,seed,n_train\nenergy,avdgp-ar1,0,614\nenergy,avdgp-ar1,1,614\n"
    )
    late = [1.4] * 25 + [0.5, 0.4, 0.3, 0.3, 0.3]  # learns after a plateau of 25 epochs
    runs = [
        {
            "dataset": "energy",
            "model": "avdgp-ar1",
            "seed": seed,
            "epochs": 30,
            "val_nll_curve": [[e, v] for e, v in enumerate(late, start=1)],
            "test_nll_curve": [[e, v + 0.1] for e, v in enumerate(late, start=1)],
        }
        for seed in (0, 1)
    ]
    (tmp_path / "curves.jsonl").write_text("\n".join(json.dumps(run) for run in runs))
    assert replay.main([str(tmp_path / "curves.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "| energy | avdgp-ar1 | 2 | 1.500 (stop 11/11) | 1.500 (stop 21/21) |" in out
    assert "| P=20, at least 2000 steps | -1.100 | -1.100 | -1.100 | 0 of 1 | 100 % |" in out
    assert "| P=20 (default) | +0.000 | +0.000 | +0.000 | 0 of 1 | 70 % |" in out
