"""The progress lines of a training run: the ETA comes from the second epoch on (the first
includes tracing: issue 36 measured 'ETA 1156 s' for a 97 s run)."""

from __future__ import annotations

import io

from avdgp.training import progress as progress_module
from avdgp.training.progress import EpochProgress


def test_the_eta_ignores_the_first_epoch_and_ends_with_the_run(monkeypatch):
    clock = iter([0.0, 30.0, 30.0, 32.0, 32.0, 36.0, 36.0, 38.0])  # epochs of 30, 2, 4, 2 s
    monkeypatch.setattr(progress_module.time, "perf_counter", lambda: next(clock))
    stream = io.StringIO()
    progress = EpochProgress("m", stream)
    progress.set_params({"epochs": 4})
    for epoch in range(4):
        progress.on_epoch_begin(epoch)
        progress.on_epoch_end(epoch, {"loss": 1.5})
    assert stream.getvalue().splitlines() == [
        "[m] epoch 1/4 loss 1.5000 30.0 s (tracing included; ETA after the next epoch)",
        "[m] epoch 2/4 loss 1.5000 2.0 s (ETA 4 s)",  # 2 epochs left at 2 s
        "[m] epoch 3/4 loss 1.5000 4.0 s (ETA 3 s)",  # 1 left at the mean of 2 and 4 s
        "[m] epoch 4/4 loss 1.5000 2.0 s",
    ]
    assert progress.seconds == [30.0, 2.0, 4.0, 2.0]


def test_a_resumed_run_times_its_own_first_epoch_as_tracing(monkeypatch):
    clock = iter([0.0, 20.0, 20.0, 21.0])
    monkeypatch.setattr(progress_module.time, "perf_counter", lambda: next(clock))
    stream = io.StringIO()
    progress = EpochProgress("m", stream)
    progress.set_params({"epochs": 10})
    for epoch in (7, 8):  # resumed after epoch 7 of 10
        progress.on_epoch_begin(epoch)
        progress.on_epoch_end(epoch, {"loss": 2.0})
    assert stream.getvalue().splitlines() == [
        "[m] epoch 8/10 loss 2.0000 20.0 s (tracing included; ETA after the next epoch)",
        "[m] epoch 9/10 loss 2.0000 1.0 s (ETA 1 s)",
    ]
