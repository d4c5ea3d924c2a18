"""Train a small stochastic (AR2) AVDGP with BackupAndRestore (for
tests/application/training/test_resume.py).

    python resumable_fit.py BACKUP_DIR OUT.npz [--stall-at EPOCH,BATCH MARKER]

With ``--stall-at`` the run writes MARKER when it reaches that (0-based) epoch and batch, then
sleeps until the test kills it with SIGKILL. OUT.npz receives the final weights, the epoch
losses of this process and the first epoch it trained (> 0 after a resume).
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import gpflow  # noqa: E402
import numpy as np  # noqa: E402
from gpflow.keras import tf_keras  # noqa: E402

import gpflux_avdgp  # noqa: E402
from avdgp.data.batching import epoch_shuffled_batches  # noqa: E402

EPOCHS, BATCH, ROWS = 4, 20, 160


class Stall(tf_keras.callbacks.Callback):
    def __init__(self, epoch: int, batch: int, marker: str):
        super().__init__()
        self.at, self.marker, self.epoch = (epoch, batch), marker, None

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if (self.epoch, batch) == self.at:
            with open(self.marker, "w") as stream:
                stream.write("stalled\n")
            time.sleep(600)


class FirstEpoch(tf_keras.callbacks.Callback):
    first = None

    def on_epoch_begin(self, epoch, logs=None):
        if self.first is None:
            self.first = epoch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("backup")
    parser.add_argument("out")
    parser.add_argument("--stall-at", nargs=2, metavar=("EPOCH,BATCH", "MARKER"))
    args = parser.parse_args()

    tf_keras.utils.set_random_seed(11)
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, size=(ROWS, 2))
    y = np.sin(2 * x[:, :1]) * x[:, 1:] + 0.1 * rng.standard_normal((ROWS, 1))
    likelihood = gpflow.likelihoods.Gaussian(variance=0.1)
    model = gpflux_avdgp.build_avdgp(
        2, [3, 1], [4, 3], ROWS, likelihood, rule="ar2", num_points=5, seed=3
    )
    optimizer = tf_keras.optimizers.Adam(0.02)
    model.compile(optimizer, loss=gpflux_avdgp.AVDGPLoss(likelihood))
    data = epoch_shuffled_batches(x, y, BATCH, seed=5, step_counter=optimizer.iterations)
    first = FirstEpoch()
    callbacks = [first, tf_keras.callbacks.BackupAndRestore(args.backup)]
    if args.stall_at:
        epoch, batch = (int(v) for v in args.stall_at[0].split(","))
        callbacks.append(Stall(epoch, batch, args.stall_at[1]))
    history = model.fit(data, epochs=EPOCHS, verbose=0, callbacks=callbacks)
    weights = {f"w{i}": w for i, w in enumerate(model.get_weights())}
    np.savez(
        args.out,
        losses=np.array(history.history["loss"]),
        first_epoch=np.array(first.first),
        iterations=np.array(optimizer.iterations.numpy()),
        **weights,
    )


if __name__ == "__main__":
    main()
