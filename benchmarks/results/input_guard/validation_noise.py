"""Prototype: the default on the shift splits (100 epochs), scored also with the Gaussian noise
variance refitted on the validation rows (the layers fixed): does the in-domain bar move?"""
import sys, csv, json
import numpy as np
from scipy.optimize import minimize_scalar
from avdgp.experiments.uncertainty import run as U
from avdgp import metrics
from gpflux_avdgp import predict_mixture

out = sys.argv[1]
extra_rows = []
original = U.UncertaintyData.score

def nll(y, w, m, v):
    return metrics.gaussian_mixture_nll(y, w, m, v)

def score(self, built, task, standardizer, config, predict_batch_size):
    scored = original(self, built, task, standardizer, config, predict_batch_size)
    def parts(x):
        p = predict_mixture(built.model, x, likelihood=built.likelihood)
        return p.weights, p.y_means[..., 0], p.f_variances[..., 0], p.y_variances[..., 0] - p.f_variances[..., 0]
    w, m, fv, noise = parts(self.split.x_val)
    y = self.split.y_val.reshape(-1)
    s2 = float(np.mean(noise))
    res = minimize_scalar(lambda t: nll(y, w, m, fv + np.exp(t)), bounds=(np.log(s2) - 6, np.log(s2) + 6), method="bounded")
    s2_val = float(np.exp(res.x))
    row = {"problem": self.problem, "noise": s2, "noise_val": s2_val}
    for suffix, (x, yy) in {"in": (self.split.x_test, self.split.y_test), "shift": self.shifted}.items():
        w, m, fv, _ = parts(x)
        for tag, v in (("", fv + s2), ("_val", fv + s2_val)):
            s = U.interval_scores(yy, w, m, v, suffix + tag)
            row.update({k: s[k] for k in s if k.startswith(("nll", "coverage_50", "coverage_95"))})
    extra_rows.append(row)
    with open(f"{out}/recal.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")
    return scored

U.UncertaintyData.score = score
settings = U.UncertaintySettings(problems=("shifts",), models=("avdgp-ar2p",), seeds=(0,), epochs=100, rows=4000, data_root="/work/shared/data/uci")
U.run_uncertainty(settings, out)
