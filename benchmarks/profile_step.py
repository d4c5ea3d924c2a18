"""Where the time of one AVDGP training step goes: a TensorFlow profile, grouped by stage.

Trains the paper's 3-layer AVDGP-AR2P (dims 16/4/1, M 8/4/4, S 32, batch 100) on elevators
(and optionally GPflux's DS-DGP for comparison) and reports, per training step:

* the wall-clock time of a step in ``model.fit``, and of the same step in a bare
  ``tf.function`` loop (GradientTape + Adam): the difference is Keras' per-step overhead;
* the time inside the compiled train function (from the profiler's trace);
* the CPU time of the TensorFlow ops, grouped by the name scopes the layers open
  (``inference``: the amortization networks, ``covariances``: the kernel, ``cholesky``,
  ``conditional``, ``kl``, ``propagate``: the sigma points), forward and backward
  (``gradient_tape/...``) separately, and the top op types.

Op times are summed over TensorFlow's worker threads, so they can exceed the wall-clock time
when ops run in parallel; their shares are what the profile is for.

    python benchmarks/profile_step.py --out benchmarks/results/profile
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import tempfile
import time
from pathlib import Path

DATA_ROOT = Path(os.environ.get("AVDGP_DATA_ROOT", Path(__file__).parents[2] / "shared/data/uci"))

#: (label, name-scope segment) in the order they are matched against an op's name.
STAGES = (
    ("amortization networks", "inference"),
    ("kernel (K_uu, K_uf, k_ff)", "covariances"),
    ("Cholesky (with jitter retries)", "cholesky"),
    ("conditional (solves, projections)", "conditional"),
    ("KL", "kl"),
    ("sigma-point propagation", "propagate"),
    ("objective (expected log-likelihood)", "loss"),
    ("optimizer (Adam)", "Adam"),
)
OTHER = "other (packing, NaN checks, metrics, GPflux layers)"


def stage_of(op_name: str) -> str:
    """The stage label of a TF op event name ``"scope/.../op:Type"``."""
    segments = op_name.split(":")[0].split("/")
    for label, scope in STAGES:
        if any(segment == scope or segment.startswith(scope + "_") for segment in segments):
            return label
    if any(segment.endswith("_loss") or segment == "compile_loss" for segment in segments):
        return STAGES[6][0]
    return OTHER


def op_times(xplane_file: str) -> dict:
    """Summed durations (seconds) of TF op events on the compute threads of a profile, by
    ``(stage, direction)`` and by op type, and the total time inside ``train_function``."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(Path(xplane_file).read_bytes())
    by_stage = collections.Counter()
    by_type = collections.Counter()
    in_function, calls = 0.0, 0
    for plane in space.planes:
        names = {key: meta.name for key, meta in plane.event_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                name = names.get(event.metadata_id, "")
                seconds = event.duration_ps * 1e-12
                if line.name == "python" and name == "train_function":
                    in_function, calls = in_function + seconds, calls + 1
                if ":" not in name or "::" in name:
                    continue  # not a "scope/op:Type" op event
                if not line.name.startswith(("tf_Compute", "tf_inter_op", "tf_XLA")):
                    continue
                op_name, op_type = name.rsplit(":", 1)
                direction = "backward" if op_name.startswith("gradient_tape/") else "forward"
                by_stage[(stage_of(op_name), direction)] += seconds
                by_type[op_type] += seconds
    return {
        "by_stage": by_stage,
        "by_type": by_type,
        "train_function_seconds": in_function,
        "train_function_calls": calls,
    }


def build(model_name: str, dtype: str, x_train, jit: bool):
    """Compiled model of the zoo (``avdgp`` AR2P or ``dsdgp``), 3 layers, paper settings."""
    from gpflow.keras import tf_keras

    from avdgp.zoo import ModelSpec, build_model

    rule = "ar2p" if model_name == "avdgp" else None
    spec = ModelSpec(model=model_name, rule=rule, num_layers=3, seed=0)
    built = build_model(spec, x_train.shape[1], len(x_train), inputs=x_train[:10000])
    optimizer = tf_keras.optimizers.Adam(0.005)
    optimizer.build(built.model.trainable_variables)
    built.model.compile(optimizer=optimizer, loss=built.loss, jit_compile=jit)
    return built


def bare_step_seconds(model, data, steps: int) -> float:
    """Seconds per step of a ``tf.function`` loop doing what ``fit``'s train step does."""
    import tensorflow as tf

    optimizer, loss_fn = model.optimizer, model.compiled_loss

    @tf.function(jit_compile=bool(model.jit_compile))
    def step(inputs, targets):
        with tf.GradientTape() as tape:
            outputs = model(inputs, training=True)
            loss = loss_fn(targets, outputs, regularization_losses=model.losses)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return loss

    batches = iter(data.repeat())
    for _ in range(3):
        step(*next(batches))  # tracing
    start = time.perf_counter()
    for _ in range(steps):
        loss = step(*next(batches))
    loss.numpy()
    return (time.perf_counter() - start) / steps


def fit_step_seconds(model, data, steps: int) -> float:
    """Seconds per step of ``model.fit`` over ``steps`` batches (after a tracing call)."""
    model.fit(data, epochs=1, steps_per_epoch=3, verbose=0)
    start = time.perf_counter()
    model.fit(data, epochs=1, steps_per_epoch=steps, verbose=0)
    return (time.perf_counter() - start) / steps


def profile(args) -> dict:
    import numpy as np
    import tensorflow as tf

    from avdgp.data import Standardizer, load_dataset, split_dataset
    from avdgp.data.batching import epoch_shuffled_batches
    from avdgp.training import float_type

    split = split_dataset(load_dataset(DATA_ROOT / args.dataset), seed=0, split=0)
    scaler = Standardizer.fit(split.x_train, split.y_train)
    x_train = np.asarray(scaler.transform_x(split.x_train))
    y_train = np.asarray(scaler.transform_y(split.y_train))
    result = {"dataset": args.dataset, "n_train": len(x_train), "model": args.model}
    result.update(dtype=args.dtype, jit=args.jit, batch_size=args.batch_size, steps=args.steps)
    with float_type(args.dtype):
        built = build(args.model, args.dtype, x_train, args.jit)
        model = built.model
        data = epoch_shuffled_batches(
            x_train,
            y_train,
            args.batch_size,
            seed=0,
            step_counter=model.optimizer.iterations,
            dtype=model.inputs[0].dtype,
        ).repeat()
        result["fit_seconds_per_step"] = fit_step_seconds(model, data, args.steps)
        result["bare_seconds_per_step"] = bare_step_seconds(model, data, args.steps)
        logdir = tempfile.mkdtemp(prefix="avdgp-profile-")
        tf.profiler.experimental.start(logdir)
        model.fit(data, epochs=1, steps_per_epoch=args.profile_steps, verbose=0)
        tf.profiler.experimental.stop()
    trace = op_times(sorted(glob.glob(f"{logdir}/plugins/profile/*/*.xplane.pb"))[-1])
    steps = args.profile_steps
    result["train_function_seconds_per_step"] = trace["train_function_seconds"] / steps
    result["op_seconds_per_step"] = sum(trace["by_stage"].values()) / steps
    result["by_stage"] = {
        f"{stage} | {direction}": seconds / steps
        for (stage, direction), seconds in sorted(trace["by_stage"].items())
    }
    result["by_type"] = {
        op_type: seconds / steps for op_type, seconds in trace["by_type"].most_common(12)
    }
    return result


def markdown(result: dict) -> str:
    """The profile as Markdown tables (milliseconds per step)."""
    ms = 1e3
    lines = [
        f"### {result['model']} on {result['dataset']} ({result['dtype']}, "
        f"jit {result['jit']}, batch {result['batch_size']})",
        "",
        "| per training step | ms |",
        "|---|---:|",
        f"| `model.fit` (wall clock) | {result['fit_seconds_per_step'] * ms:.1f} |",
        f"| bare `tf.function` loop (wall clock) | {result['bare_seconds_per_step'] * ms:.1f} |",
        f"| Keras overhead (difference) | "
        f"{(result['fit_seconds_per_step'] - result['bare_seconds_per_step']) * ms:.1f} |",
        f"| inside the train function (trace) | "
        f"{result['train_function_seconds_per_step'] * ms:.1f} |",
        f"| TF op time, all threads (trace) | {result['op_seconds_per_step'] * ms:.1f} |",
    ]
    if result["by_stage"] and not result["jit"]:
        total = result["op_seconds_per_step"]
        stages = collections.defaultdict(dict)
        for key, seconds in result["by_stage"].items():
            stage, direction = key.split(" | ")
            stages[stage][direction] = seconds
        lines += ["", "| stage | forward ms | backward ms | share of op time |"]
        lines += ["|---|---:|---:|---:|"]
        order = sorted(stages, key=lambda stage: -sum(stages[stage].values()))
        for stage in order:
            forward, backward = stages[stage].get("forward", 0.0), stages[stage].get(
                "backward", 0.0
            )
            share = (forward + backward) / total
            lines.append(f"| {stage} | {forward * ms:.2f} | {backward * ms:.2f} | {share:.0%} |")
        lines += ["", "| op type | ms |", "|---|---:|"]
        lines += [f"| {name} | {seconds * ms:.2f} |" for name, seconds in result["by_type"].items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="elevators")
    parser.add_argument("--models", default="avdgp,dsdgp", help="comma-separated avdgp,dsdgp")
    parser.add_argument("--dtypes", default="float64,float32")
    parser.add_argument("--jit", default="no", help="comma-separated subset of no,yes")
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--steps", type=int, default=100, help="timed steps")
    parser.add_argument("--profile-steps", type=int, default=30, help="profiled steps")
    parser.add_argument("--out", default="benchmarks/results/profile")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--dtype", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        args.jit = args.jit == "yes"
        print(json.dumps(profile(args)))
        return
    import subprocess
    import sys

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for model in args.models.split(","):
        for dtype in args.dtypes.split(","):
            for jit in args.jit.split(","):
                command = [sys.executable, __file__, "--one", "--model", model, "--dtype", dtype]
                command += ["--jit", jit, "--dataset", args.dataset, "--steps", str(args.steps)]
                command += ["--batch-size", str(args.batch_size)]
                command += ["--profile-steps", str(args.profile_steps)]
                done = subprocess.run(command, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    print(done.stderr[-3000:], file=sys.stderr)
                    raise SystemExit(f"{model} {dtype} jit {jit} failed")
                result = json.loads(done.stdout.strip().splitlines()[-1])
                results.append(result)
                print(markdown(result), flush=True)
    (out / "profile.json").write_text(json.dumps(results, indent=2))
    (out / "profile.md").write_text("\n".join(markdown(result) for result in results))


if __name__ == "__main__":
    main()
