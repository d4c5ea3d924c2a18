"""Train the paper's 3-layer AVDGP on a UCI data set from ``../shared/data/uci`` layout.

Usage::

    python examples/uci_regression.py ../shared/data/uci/elevators --epochs 5 [--rule ar2p]

Split 0 of the data set's ``test_mask.csv.gz`` is the test set; inputs and targets are
standardised with training statistics and metrics are reported in standardised units (as the
paper does). Model: dims 16/4/1, M = 8/4/4, S = 32, Adam 0.005, batch 100.
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import gpflow  # noqa: E402
import numpy as np  # noqa: E402
from gpflow.keras import tf_keras  # noqa: E402

import gpflux_avdgp  # noqa: E402


class EpochTimer(tf_keras.callbacks.Callback):
    """Wall-clock seconds of each training epoch."""

    def on_train_begin(self, logs=None):
        self.seconds = []

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(time.perf_counter() - self._start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--rule", default="ar2p", choices=["ar1", "ar2", "ar2p", "ar2pp"])
    parser.add_argument("--split", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    data = np.loadtxt(os.path.join(args.folder, "data.csv.gz"), delimiter=",")
    mask = np.loadtxt(os.path.join(args.folder, "test_mask.csv.gz"), delimiter=",")
    test = mask[:, args.split].astype(bool)
    x, y = data[:, :-1], data[:, -1:]
    x_mean, x_std = x[~test].mean(0), x[~test].std(0) + 1e-12
    y_mean, y_std = y[~test].mean(0), y[~test].std(0)
    x, y = (x - x_mean) / x_std, (y - y_mean) / y_std
    x_train, y_train, x_test, y_test = x[~test], y[~test], x[test], y[test]

    tf_keras.utils.set_random_seed(args.seed)
    likelihood = gpflow.likelihoods.Gaussian(variance=0.1)
    model = gpflux_avdgp.build_avdgp(
        x.shape[1],
        [16, 4, 1],
        [8, 4, 4],
        len(x_train),
        likelihood,
        rule=args.rule,
        seed=args.seed,
    )
    model.compile(tf_keras.optimizers.Adam(0.005))  # the loss: the ELBO, or AR2PP's objective
    timer = EpochTimer()
    model.fit(x_train, y_train, batch_size=100, epochs=args.epochs, verbose=2, callbacks=[timer])

    start = time.perf_counter()
    prediction = gpflux_avdgp.predict_mixture(model, x_test)
    predict_seconds = time.perf_counter() - start
    mean, _ = prediction.y_moments()
    rmse = float(np.sqrt(np.mean((mean - y_test) ** 2)))
    nll = float(-np.mean(prediction.log_density(y_test)))
    steady = timer.seconds[1:] or timer.seconds
    print(
        f"{os.path.basename(os.path.normpath(args.folder))} {args.rule}: "
        f"n_train={len(x_train)} n_test={len(x_test)} epochs={args.epochs} "
        f"test RMSE={rmse:.3f} NLL={nll:.3f} (standardised) "
        f"s/epoch={np.mean(steady):.1f} (first {timer.seconds[0]:.1f}) "
        f"predict s={predict_seconds:.1f}"
    )


if __name__ == "__main__":
    main()
