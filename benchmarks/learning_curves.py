"""Learning curves: test (and validation) metrics against optimisation steps and seconds.

One run trains one model on the toy "DGP" letters or a UCI split and scores the test and
validation sets every ``--every`` steps; the time spent scoring is excluded from the training
seconds. Each variant changes one setting of the baseline model, so curves can be compared side
by side (``docs/experiments/learning.md``).

Examples::

    python benchmarks/learning_curves.py toy --model avdgp-3l --steps 2400 --every 300 \
        --variant baseline --out benchmarks/results/learning/toy.jsonl
    python benchmarks/learning_curves.py elevators --epochs 10 --variant lengthscale=sqrt_d \
        --out benchmarks/results/learning/elevators.jsonl

Variants are ``name=value`` overrides applied after the model is built (``lengthscale``,
``bias_scale``, ``kernel_variance``, ``noise``) or to the settings (``lr``, ``num_points``,
``hidden_layers``, ``kl``, ``dtype``, ``whiten``, ``ard``, ``width``, ``schedule``); ``baseline``
changes nothing. Each line of the output file is one evaluation: variant, seed, step, seconds,
metrics.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from avdgp.data import Standardizer, load_dataset, split_dataset
from avdgp.experiments.demo.toy import toy_splits
from avdgp.training import TrainConfig, fit_model, float_type
from avdgp.training.runner import score_prediction
from avdgp.zoo import ModelSpec, Task, build_model
from gpflux_avdgp.prediction import predict_mixture


class CurveRecorder(tf_keras.callbacks.Callback):
    """Scores the model every ``every`` steps; training seconds exclude the scoring."""

    def __init__(self, every: int, score, sink, label: dict):
        super().__init__()
        self.every, self.score, self.sink, self.label = every, score, sink, label
        self.step, self.train_seconds, self.losses = 0, 0.0, []

    def on_train_batch_begin(self, batch, logs=None):
        self._start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.train_seconds += time.perf_counter() - self._start
        self.step += 1
        self.losses.append(float(logs["loss"]))
        if self.step % self.every == 0:
            self.emit()

    def emit(self):
        scores = self.score(self.model)
        record = {
            **self.label,
            "step": self.step,
            "seconds": round(self.train_seconds, 3),
            "train_loss": float(np.mean(self.losses[-self.every :])),
            **scores,
        }
        self.sink(record)


def _apply_overrides(built, overrides: dict, input_std: float = 1.0) -> None:
    """Post-build changes of initial values (one hypothesis at a time)."""
    model = built.model
    gp_layers = [layer for layer in model.layers if hasattr(layer, "kernel")]
    for layer in gp_layers:
        dim = layer.input_dim
        if "lengthscale" in overrides:
            value = overrides["lengthscale"]
            if value == "ref":  # the reference code: softplus(0) * sqrt(D)
                scale = math.log(2.0) * math.sqrt(dim)
            else:
                scale = math.sqrt(dim) if value == "sqrt_d" else float(value)
            layer.kernel.lengthscales.assign(np.full_like(layer.kernel.lengthscales.numpy(), scale))
        if "kernel_variance" in overrides:
            layer.kernel.variance.assign(float(overrides["kernel_variance"]))
        if "w_scale" in overrides and hasattr(layer.inference, "affine_weights"):
            weights = layer.inference.affine_weights
            eye = np.broadcast_to(np.eye(dim), weights.shape)
            weights.assign(eye * float(overrides["w_scale"]))
        if "bias_scale" in overrides and hasattr(layer.inference, "affine_biases"):
            biases = layer.inference.affine_biases
            rng = np.random.default_rng(int(overrides.get("seed", 0)) + 17 * dim)
            value = overrides["bias_scale"]
            if value == "normal":
                new = rng.standard_normal(biases.shape)
            else:
                new = rng.uniform(-1, 1, biases.shape) * float(value)
            biases.assign(new)
    if "noise" in overrides:
        built.likelihood.variance.assign(float(overrides["noise"]))


def _parse_variant(text: str) -> dict:
    if text == "baseline":
        return {}
    result = {}
    for part in text.split(","):
        key, _, value = part.partition("=")
        result[key.strip()] = value.strip()
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", help="'toy' or a UCI folder name under --data-root")
    parser.add_argument("--data-root", default="../shared/data/uci")
    parser.add_argument(
        "--split",
        default="0",
        help="test-mask column of the UCI folder, or 'random': avdgp bench's 8:1:1 split of "
        "each seed",
    )
    parser.add_argument("--model", default="avdgp-3l")
    parser.add_argument("--variant", action="append", default=None)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--steps", type=int, default=None, help="total steps (toy)")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--every", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--toy-points", type=int, default=12000)
    parser.add_argument("--num-points", type=int, default=None, help="S")
    parser.add_argument("--out", required=True)
    parser.add_argument(
        "--dump-split",
        default=None,
        help="write the standardised split of each seed to this .npz prefix and stop "
        "(input of benchmarks/reference_avdgp.py)",
    )
    args = parser.parse_args(argv)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    variants = args.variant or ["baseline"]

    def sink(record):
        print(json.dumps(record), flush=True)
        with out.open("a") as handle:
            handle.write(json.dumps(record) + "\n")

    for seed in [int(s) for s in args.seeds.split(",")]:
        for variant in variants:
            run_one(args, seed, variant, sink)
    return 0


def _layer_options(overrides: dict) -> dict:
    """Layer keyword options named by a variant (``ModelSpec.extra``)."""
    extra = {}
    if "hidden_layers" in overrides:
        extra["hidden_layers"] = int(overrides["hidden_layers"])
    if "kl" in overrides:
        extra["kl_convention"] = overrides["kl"]
    if "init" in overrides:
        extra["inducing_init"] = overrides["init"]
    if "whiten" in overrides:
        extra["whiten"] = overrides["whiten"] == "1"
    if "ard" in overrides:
        extra["ard"] = overrides["ard"] == "1"
    return extra


def _toy_spec(model: str, overrides: dict, seed: int, num_points: int) -> ModelSpec:
    extra = _layer_options(overrides)
    common = dict(task="classification", num_points=num_points, seed=seed, extra=extra)
    total = int(overrides.get("total_inducing", 32))
    if model == "sgp-avi":
        return ModelSpec(model="sgp-avi", num_inducing=[total], rule=None, **common)
    if model == "avdgp-2l":
        return ModelSpec(
            num_layers=2, hidden_dims=[2], num_inducing=[total // 2, total // 2], **common
        )
    return ModelSpec(
        num_layers=3,
        hidden_dims=[2, 2],
        num_inducing=[total // 2, total // 4, total // 4],
        **common,
    )


def run_one(args, seed: int, variant: str, sink) -> None:
    overrides = _parse_variant(variant)
    overrides.setdefault("seed", seed)
    dtype = overrides.get("dtype", "float64")
    tf_keras.backend.clear_session()
    tf_keras.utils.set_random_seed(seed)
    if args.data == "toy":
        split = toy_splits(args.toy_points, seed)
        scaler = Standardizer.fit(split.x_train, split.y_train, standardize_targets=False)
        task = Task.CLASSIFICATION
        num_points = int(overrides.get("num_points", args.num_points or 16))
        spec = _toy_spec(args.model, overrides, seed, num_points)
        lr = float(overrides.get("lr", args.lr or 0.01))
    else:
        dataset = load_dataset(Path(args.data_root) / args.data)
        split = split_dataset(
            dataset, seed=seed, split=None if args.split == "random" else int(args.split)
        )
        scaler = Standardizer.fit(split.x_train, split.y_train)
        task = Task.REGRESSION
        num_points = int(overrides.get("num_points", args.num_points or 32))
        model, _, rule = args.model.partition("-")
        spec = ModelSpec(
            model=model,
            rule=rule or "ar2p",
            num_points=num_points,
            seed=seed,
            extra=_layer_options(overrides),
        )
        lr = float(overrides.get("lr", args.lr or 0.005))
    split = scaler.transform_split(split)
    if args.dump_split:
        np.savez(
            f"{args.dump_split}{seed}.npz",
            **{
                name: getattr(split, name)
                for name in ("x_train", "y_train", "x_val", "y_val", "x_test", "y_test")
            },
        )
        return
    steps_per_epoch = math.ceil(len(split.x_train) / args.batch_size)
    if args.epochs is not None:
        epochs = args.epochs
    else:
        epochs = math.ceil((args.steps or 2400) / steps_per_epoch)
    config = TrainConfig.from_preset(
        "paper",
        epochs=epochs,
        batch_size=args.batch_size,
        learning_rate=lr,
        seed=seed,
        dtype=dtype,
        schedule=overrides.get("schedule", "constant"),
        final_learning_fraction=float(overrides.get("final", 0.1)),
    )
    label = {"data": args.data, "model": args.model, "variant": variant, "seed": seed}
    with float_type(dtype):
        built = build_model(spec, split.x_train.shape[1], len(split.x_train), inputs=split.x_train)
        built.model(split.x_train[:2])  # build the weights
        _apply_overrides(built, overrides)

        def score(model):
            out = {}
            for name, x, y in (
                ("test", split.x_test, split.y_test),
                ("val", split.x_val, split.y_val),
            ):
                prediction = predict_mixture(model, x, likelihood=built.likelihood, batch_size=1000)
                scores, _ = score_prediction(prediction, y, task)
                keep = ("error_rate", "nll") if task is Task.CLASSIFICATION else ("nll", "rmse")
                out.update({f"{name}_{key}": round(float(scores[key]), 5) for key in keep})
            return out

        def diagnose(model):
            out = {}
            for layer in model.layers:
                if not hasattr(layer, "kernel"):
                    continue
                name = layer.name.replace("gp_layer_", "l")
                out[f"{name}_ls"] = round(float(np.mean(layer.kernel.lengthscales.numpy())), 4)
                out[f"{name}_var"] = round(float(layer.kernel.variance.numpy()), 4)
                if layer.sigma_points is not None:
                    out[f"{name}_xi_max"] = round(
                        float(np.abs(layer.sigma_points.numpy()).max()), 3
                    )
                if layer.weight_logits is not None:
                    w = tf.nn.softmax(layer.weight_logits).numpy()
                    out[f"{name}_w_max"] = round(float(w.max()), 4)
                if hasattr(layer.inference, "affine_weights"):
                    out[f"{name}_W_max"] = round(
                        float(np.abs(layer.inference.affine_weights.numpy()).max()), 3
                    )
            return out

        def score_and_diagnose(model):
            return {**score(model), **diagnose(model)}

        recorder = CurveRecorder(args.every, score_and_diagnose, sink, label)
        start = time.perf_counter()
        try:
            fit_model(built, split.x_train, split.y_train, config, callbacks=(recorder,))
        except Exception as error:  # noqa: BLE001 - a diverged variant is a result too
            sink({**label, "step": recorder.step, "error": f"{type(error).__name__}: {error}"})
        if recorder.step % args.every:
            recorder.emit()
        print(f"# {variant} seed {seed}: {time.perf_counter() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
