"""Training and prediction speed of AVDGP-AR2P against GPflux's DS-DGP, side by side.

For each data set (UCI elevators and a synthetic set of 500k rows), model (the paper's 3-layer
AVDGP-AR2P: dims 16/4/1, M 8/4/4, S 32; GPflux DS-DGP: 256/128/128 inducing points), float
type and ``jit_compile`` setting, one subprocess (so peak memory is per configuration):

* trains ``--steps`` minibatches of 100 twice (the first pass includes tracing) and reports
  the second pass scaled to a full epoch: ``seconds per epoch``;
* predicts ``--predict-rows`` test rows with S = 32 (DS-DGP: 32 samples) after a warm-up call;
* reports the peak resident memory of the process.

Ratios AVDGP / DS-DGP are taken between configurations of the same run.

    python benchmarks/speed.py --out benchmarks/results/speed

``--steps-per-execution 1,10`` also runs every configuration with 10 training steps per call
of Keras' train function (``model.compile(steps_per_execution=10)``) and adds a table of the
epoch times against one step per call:

    python benchmarks/speed.py --datasets elevators --jit no --steps-per-execution 1,10 \
        --out benchmarks/results/steps_per_execution
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

DATA_ROOT = Path(os.environ.get("AVDGP_DATA_ROOT", Path(__file__).parents[2] / "shared/data/uci"))
MODELS = {
    "avdgp-ar2p": ("avdgp", "ar2p", None),
    "avdgp-ar2p:previous": ("avdgp", "ar2p", "previous"),
    "avdgp-ar2p:reverting-128": ("avdgp", "ar2p", "reverting-128"),
    "dsdgp": ("dsdgp", None, None),
}


def synthetic(rows: int, dim: int = 8, seed: int = 0):
    """``y = sin(x w1) * cos(x w2) + 0.1 * eps``, ``x ~ N(0, I)``: smooth, non-stationary."""
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, dim))
    w1, w2 = rng.standard_normal((dim, 1)), rng.standard_normal((dim, 1))
    y = np.sin(x @ w1) * np.cos(0.5 * x @ w2) + 0.1 * rng.standard_normal((rows, 1))
    return x, y


def load(dataset: str, synthetic_rows: int):
    """Standardised ``(x_train, y_train, x_test)``."""
    import numpy as np

    if dataset == "synthetic":
        x, y = synthetic(synthetic_rows)
        cut = int(0.9 * len(x))
        return x[:cut], y[:cut], x[cut:]
    from avdgp.data import Standardizer, load_dataset, split_dataset

    split = split_dataset(load_dataset(DATA_ROOT / dataset), seed=0, split=0)
    scaler = Standardizer.fit(split.x_train, split.y_train)
    return (
        scaler.transform_x(split.x_train),
        scaler.transform_y(split.y_train),
        np.asarray(scaler.transform_x(split.x_test)),
    )


def one_configuration(args) -> dict:
    """Run one (data set, model, dtype, jit) configuration in this process."""
    import numpy as np
    import tensorflow as tf
    from gpflow.keras import tf_keras

    from avdgp.data.batching import epoch_shuffled_batches
    from avdgp.training import EpochProgress, float_type
    from avdgp.zoo import ModelSpec, build_model
    from gpflux_avdgp.prediction import predict_mixture

    x_train, y_train, x_test = load(args.dataset, args.synthetic_rows)
    kind, rule, design = MODELS[args.model]
    tf_keras.utils.set_random_seed(0)
    with float_type(args.dtype):
        spec = ModelSpec(model=kind, rule=rule, num_layers=3, seed=0, design=design)
        built = build_model(spec, x_train.shape[1], len(x_train), inputs=x_train[:10000])
        model = built.model
        optimizer = tf_keras.optimizers.Adam(0.005)
        optimizer.build(model.trainable_variables)
        model.compile(
            optimizer,
            loss=built.loss,
            jit_compile=args.jit,
            steps_per_execution=args.steps_per_execution,
        )
        steps_per_epoch = math.ceil(len(x_train) / args.batch_size)
        steps = min(args.steps, steps_per_epoch)
        data = epoch_shuffled_batches(
            x_train[: steps * args.batch_size],
            y_train[: steps * args.batch_size],
            args.batch_size,
            seed=0,
            step_counter=optimizer.iterations,
            dtype=model.inputs[0].dtype,
        )
        progress = EpochProgress("speed", stream=None)
        model.fit(data, epochs=2, verbose=0, callbacks=[progress])
        epoch_seconds = progress.seconds[1] / steps * steps_per_epoch

        rows = x_test[: args.predict_rows]
        predict_mixture(model, rows, batch_size=1000)  # warm-up: traces every batch shape
        start = time.perf_counter()
        predict_mixture(model, rows, batch_size=1000)
        predict_seconds = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "dataset": args.dataset,
        "model": args.model,
        "dtype": args.dtype,
        "jit": args.jit,
        "steps_per_execution": args.steps_per_execution,
        "n_train": int(len(x_train)),
        "steps_timed": int(steps),
        "seconds_per_step": progress.seconds[1] / steps,
        "seconds_per_epoch": epoch_seconds,
        "first_pass_seconds": progress.seconds[0],
        "predict_rows": int(len(rows)),
        "predict_seconds": predict_seconds,
        "peak_rss_mb": peak_mb,
        "final_loss": float(progress.losses[-1]),
        "tf_version": tf.__version__,
        "numpy_version": np.__version__,
    }


def _steps_per_call(record: dict) -> int:
    return record.get("steps_per_execution", 1)  # results written before the option: 1


def table(records: list[dict]) -> str:
    """Markdown: one row per (data set, dtype, jit, steps per call) with both models and their
    ratios."""
    lines = [
        "| data | dtype | jit | steps/call | AVDGP s/epoch | DS-DGP s/epoch | ratio "
        "| AVDGP predict s | DS-DGP predict s | ratio | AVDGP peak MB | DS-DGP peak MB |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    keys = sorted({(r["dataset"], r["dtype"], r["jit"], _steps_per_call(r)) for r in records})
    for key in keys:
        found = {
            r["model"]: r
            for r in records
            if (r["dataset"], r["dtype"], r["jit"], _steps_per_call(r)) == key
        }
        ours, theirs = found.get("avdgp-ar2p"), found.get("dsdgp")
        if ours is None or theirs is None:
            continue
        lines.append(
            f"| {key[0]} ({ours['n_train']} rows, {ours['predict_rows']} test) | {key[1]} | "
            f"{'yes' if key[2] else 'no'} | {key[3]} | {ours['seconds_per_epoch']:.1f} | "
            f"{theirs['seconds_per_epoch']:.1f} | "
            f"{ours['seconds_per_epoch'] / theirs['seconds_per_epoch']:.2f} | "
            f"{ours['predict_seconds']:.2f} | {theirs['predict_seconds']:.2f} | "
            f"{ours['predict_seconds'] / theirs['predict_seconds']:.2f} | "
            f"{ours['peak_rss_mb']:.0f} | {theirs['peak_rss_mb']:.0f} |"
        )
    return "\n".join(lines)


def design_table(records: list[dict]) -> str:
    """Markdown: seconds per epoch and prediction of each AVDGP design against the default
    ``avdgp-ar2p`` of the same configuration ("" when no design was run)."""
    designs = sorted({r["model"] for r in records if ":" in r["model"]})
    if not designs:
        return ""
    lines = [
        "| data | dtype | jit | design | s/epoch | default s/epoch | ratio | predict s | ratio |",
        "|---|---|---|---|---:|---:|---:|---:|---:|",
    ]
    keys = sorted({(r["dataset"], r["dtype"], r["jit"], _steps_per_call(r)) for r in records})
    for key in keys:
        found = {
            r["model"]: r
            for r in records
            if (r["dataset"], r["dtype"], r["jit"], _steps_per_call(r)) == key
        }
        default = found.get("avdgp-ar2p")
        for design in (d for d in designs if d in found and default is not None):
            ours = found[design]
            lines.append(
                f"| {key[0]} | {key[1]} | {'yes' if key[2] else 'no'} | {design} | "
                f"{ours['seconds_per_epoch']:.2f} | {default['seconds_per_epoch']:.2f} | "
                f"{ours['seconds_per_epoch'] / default['seconds_per_epoch']:.2f} | "
                f"{ours['predict_seconds']:.2f} | "
                f"{ours['predict_seconds'] / default['predict_seconds']:.2f} |"
            )
    return "\n".join(lines)


def steps_per_call_table(records: list[dict]) -> str:
    """Markdown: for each (data set, model, dtype, jit), seconds per epoch with every number
    of steps per call and the ratio to one step per call ("" when there is nothing to compare).
    """
    values = sorted({_steps_per_call(r) for r in records})
    if len(values) < 2 or 1 not in values:
        return ""
    others = [v for v in values if v != 1]
    header = " | ".join(f"{v} steps/call s/epoch | ratio" for v in others)
    lines = [
        f"| data | model | dtype | jit | 1 step/call s/epoch | {header} |",
        "|---|---|---|---|---:|" + "---:|---:|" * len(others),
    ]
    groups = sorted({(r["dataset"], r["model"], r["dtype"], r["jit"]) for r in records})
    for group in groups:
        found = {
            _steps_per_call(r): r["seconds_per_epoch"]
            for r in records
            if (r["dataset"], r["model"], r["dtype"], r["jit"]) == group
        }
        if 1 not in found:
            continue
        cells = " | ".join(
            f"{found[v]:.2f} | {found[v] / found[1]:.2f}" if v in found else "- | -" for v in others
        )
        lines.append(
            f"| {group[0]} | {group[1]} | {group[2]} | {'yes' if group[3] else 'no'} "
            f"| {found[1]:.2f} | {cells} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="elevators,synthetic")
    parser.add_argument("--models", default="avdgp-ar2p,dsdgp")
    parser.add_argument("--dtypes", default="float32,float64")
    parser.add_argument("--jit", default="no,yes", help="comma-separated subset of no,yes")
    parser.add_argument("--steps", type=int, default=100, help="timed minibatches per pass")
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument(
        "--steps-per-execution",
        default="1",
        help="comma-separated training steps per call of the train function (1)",
    )
    parser.add_argument("--predict-rows", type=int, default=2000)
    parser.add_argument("--synthetic-rows", type=int, default=500_000)
    parser.add_argument("--out", default="benchmarks/results/speed")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dataset", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--dtype", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        args.jit = args.jit == "yes"
        args.steps_per_execution = int(args.steps_per_execution)
        print(json.dumps(one_configuration(args)))
        return 0

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records = []
    configurations = itertools.product(
        args.datasets.split(","),
        args.dtypes.split(","),
        args.jit.split(","),
        args.models.split(","),
        args.steps_per_execution.split(","),
    )
    for dataset, dtype, jit, model, steps_per_call in configurations:
        command = [
            sys.executable, __file__, "--one", "--dataset", dataset, "--model", model,
            "--dtype", dtype, "--jit", jit, "--steps", str(args.steps),
            "--batch-size", str(args.batch_size), "--predict-rows", str(args.predict_rows),
            "--synthetic-rows", str(args.synthetic_rows), "--steps-per-execution", steps_per_call,
        ]  # fmt: skip
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            name = f"{dataset} {model} {dtype} jit={jit} steps/call={steps_per_call}"
            print(f"{name}: failed", file=sys.stderr)
            print(done.stderr[-2000:], file=sys.stderr)
            continue
        record = json.loads(done.stdout.strip().splitlines()[-1])
        records.append(record)
        print(json.dumps(record), flush=True)
        (out / "speed.json").write_text(json.dumps(records, indent=2))
    report = table(records)
    extra = steps_per_call_table(records)
    if extra:
        report += "\n\nEpoch time against one training step per call:\n\n" + extra
    designs = design_table(records)
    if designs:
        report += "\n\nAVDGP designs against the default:\n\n" + designs
    (out / "speed.md").write_text(report + "\n")
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
