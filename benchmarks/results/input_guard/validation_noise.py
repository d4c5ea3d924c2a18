"""Prototype (stop 66, rejected): the default on the 24 shift splits at 100 epochs, each scored
also with the Gaussian noise variance refitted on the validation rows (the layers fixed).

    PYTHONPATH=. python benchmarks/results/input_guard/validation_noise.py OUT

Writes ``OUT/uncertainty.csv`` (the harness's rows) and ``OUT/recal.jsonl`` (per split: the
trained noise, the validation optimum, NLL and 50 / 95 % coverage of held-in and shifted rows
with each; keys ending ``_val`` use the refitted noise). ``docs/design.md``, "A noise variance
refitted on the validation rows".
"""

import json
import sys

import numpy as np
from scipy.optimize import minimize_scalar

from avdgp import metrics
from avdgp.experiments.uncertainty import run as uncertainty
from gpflux_avdgp import predict_mixture

OUT = sys.argv[1]
harness_score = uncertainty.UncertaintyData.score


def _parts(built, x) -> tuple:
    """Weights, means of y, variances of f ``[N, S]`` and the noise ``[N, S]``."""
    p = predict_mixture(built.model, x, likelihood=built.likelihood)
    noise = p.y_variances[..., 0] - p.f_variances[..., 0]
    return p.weights, p.y_means[..., 0], p.f_variances[..., 0], noise


def score(self, built, task, standardizer, config, predict_batch_size):
    scored = harness_score(self, built, task, standardizer, config, predict_batch_size)
    weights, means, f_variances, noise = _parts(built, self.split.x_val)
    y = self.split.y_val.reshape(-1)
    trained = float(np.mean(noise))

    def validation_nll(log_noise: float) -> float:
        variances = f_variances + np.exp(log_noise)
        return metrics.gaussian_mixture_nll(y, weights, means, variances)

    bounds = (np.log(trained) - 6, np.log(trained) + 6)
    refitted = float(np.exp(minimize_scalar(validation_nll, bounds=bounds, method="bounded").x))
    row = {"problem": self.problem, "noise": trained, "noise_val": refitted}
    rows = {"in": (self.split.x_test, self.split.y_test), "shift": self.shifted}
    for suffix, (x, targets) in rows.items():
        weights, means, f_variances, _ = _parts(built, x)
        for tag, variance in (("", trained), ("_val", refitted)):
            scores = uncertainty.interval_scores(
                targets, weights, means, f_variances + variance, suffix + tag
            )
            kept = ("nll", "coverage_50", "coverage_95")
            row.update({key: value for key, value in scores.items() if key.startswith(kept)})
    with open(f"{OUT}/recal.jsonl", "a") as file:
        file.write(json.dumps(row) + "\n")
    return scored


uncertainty.UncertaintyData.score = score
settings = uncertainty.UncertaintySettings(
    problems=("shifts",),
    models=("avdgp-ar2p",),
    seeds=(0,),
    epochs=100,
    rows=4000,
    data_root="../shared/data/uci",
)
uncertainty.run_uncertainty(settings, OUT)
