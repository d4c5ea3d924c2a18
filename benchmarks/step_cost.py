"""What one training step costs a device: ops, XLA kernels, branches and seconds, side by side.

On a GPU every TensorFlow op (or every XLA kernel under ``jit_compile=True``) is at least one
kernel launch of a few microseconds, so a step of thousands of tiny ops is bound by launches,
not FLOPs. For the paper's 3-layer AVDGP-AR2P (units 16/4/1, M 8/4/4, S 32; the default preset
and the paper's), a float Keras MLP of about the same parameter count (two hidden layers of 96)
and GPflux's DS-DGP (256/128/128 global inducing points), on UCI elevators (D = 18), batch
100, Adam, this script reports per training step:

* **compute ops** of the traced ``train_step`` (branches and loop bodies included; constants,
  variable reads, identities, shapes and no-ops left out), by stage (the layers' name scopes,
  the optimizer, the loss);
* **graph branches and loops** (``If``/``While`` ops): on a GPU each costs a round trip to the
  host to read its predicate;
* **XLA kernels**: the instructions of the optimized HLO's entry computation that run
  (fusions, dots, copies, calls, loops, custom calls; not parameters, constants, tuples,
  bitcasts), with ``jit_compile=True``;
* **seconds per epoch** on this machine's CPU, without and with XLA, the median of
  ``--epochs`` epochs after one epoch of tracing; and the ratios to the MLP and to DS-DGP
  measured in the same run.

Every configuration runs in its own process, one after the other (never two at once).

    python benchmarks/step_cost.py --out benchmarks/results/step_cost

On a GPU machine the same command measures the GPU (TensorFlow places the step there); add
``--device-note "GPU name"`` to label the results. Separate processes run minutes apart, and
this shared machine's speed drifts by up to 40 % over a run; ``--paired avdgp:flat,mlp:flat``
trains both in one process with their epochs alternated, for a ratio that drift does not move.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

DATA_ROOT = Path(os.environ.get("AVDGP_DATA_ROOT", Path(__file__).parents[2] / "shared/data/uci"))
MODELS = (
    "avdgp", "avdgp-paper",
    "avdgp-no-reach", "avdgp-guard", "avdgp-guard-64", "avdgp-guard-256",
    "avdgp-guard-fixed-kernel", "avdgp-guard-mean-field", "avdgp-previous-guard",
    "avdgp-guard-every-4", "avdgp-guard-every-1000", "mlp", "dsdgp",
    "svgp", "svgp-64", "svgp-128",
)  # fmt: skip
#: ``model:optimizer`` run by default: Keras' Adam, or the package's FlatAdam (what ``avdgp``
#: trains with), for both AVDGPs and the MLP.
CONFIGURATIONS = (
    "avdgp:flat", "avdgp:adam", "avdgp-paper:flat", "avdgp-paper:adam", "mlp:flat", "mlp:adam",
    "dsdgp:adam",
)  # fmt: skip
#: Graph ops that move or describe data rather than compute (not counted).
NOT_COMPUTE = {
    "Const", "ReadVariableOp", "Identity", "IdentityN", "NoOp", "Shape", "ShapeN", "Placeholder",
    "VarHandleOp", "StopGradient", "Size", "Rank",
}  # fmt: skip
CONTROL_FLOW = {"If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase"}
#: HLO instructions that do not launch anything.
NOT_KERNELS = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast"}
#: The layers' name scopes, in the order they are matched.
STAGES = (
    "prior_reversion", "inference", "covariances", "cholesky", "conditional", "kl", "propagate",
)  # fmt: skip


def _live(graph) -> list:
    """The ops of ``graph`` that run: those its outputs and control outputs depend on (the
    runtime prunes the rest, e.g. a tensor a layer computes and never reads)."""
    targets = [t.op for t in graph.outputs] + list(graph.control_outputs)
    live: dict = {}
    while targets:
        op = targets.pop()
        if op.name in live:
            continue
        live[op.name] = op
        targets.extend(t.op for t in op.inputs)
        targets.extend(op.control_inputs)
    return [op for op in graph.get_operations() if op.name in live]


def _walk(graph, prefix: str = ""):
    """``(name, op)`` of every op of ``graph`` that runs and of the functions its ops call."""
    for op in _live(graph) if hasattr(graph, "outputs") else graph.get_operations():
        yield prefix + op.name, op
        for attr in ("then_branch", "else_branch", "body", "cond", "f", "branches"):
            try:
                value = op.get_attr(attr)
            except ValueError:
                continue
            for function in value if isinstance(value, list) else [value]:
                inner = graph._get_function(getattr(function, "name", ""))
                if inner is not None:
                    yield from _walk(inner.graph, prefix + op.name + "/")


def stage_of(name: str) -> str:
    """``forward/<stage>`` or ``backward/<stage>`` of an op or HLO instruction name."""
    parts = [p for p in name.split("/") if p]
    if parts and parts[0].startswith("jit_"):
        parts = parts[1:]
    backward = bool(parts) and parts[0] == "gradient_tape"
    parts = parts[1:] if backward else parts
    direction = "backward" if backward else "forward"
    for stage in STAGES:
        if stage in parts:
            return f"{direction}/{stage}"
    text = "/".join(parts).lower()
    if any(word in text for word in ("adam", "assignaddvariableop", "assignsubvariableop")):
        return "optimizer"
    if "loss" in text:
        return f"{direction}/loss"
    return f"{direction}/other"


def count_graph(model, x, y) -> dict:
    """Compute ops and control flow of one traced training step, with ops by stage."""
    import tensorflow as tf

    step = tf.function(model.train_step)
    graph = step.get_concrete_function((tf.constant(x), tf.constant(y))).graph
    stages: collections.Counter = collections.Counter()
    control = 0
    for name, op in _walk(graph):
        if op.type in CONTROL_FLOW:
            control += 1
        if op.type not in NOT_COMPUTE:
            stages[stage_of(name)] += 1
    return {"ops": sum(stages.values()), "control_flow": control, "ops_by_stage": dict(stages)}


def count_xla(model, x, y) -> dict:
    """Kernels of the XLA-compiled training step (entry computation of the optimized HLO)."""
    import tensorflow as tf

    step = tf.function(model.train_step, jit_compile=True)
    hlo = step.experimental_get_compiler_ir((tf.constant(x), tf.constant(y)))(stage="optimized_hlo")
    entry = hlo[hlo.index("\nENTRY") :]
    entry = entry[: entry.index("\n}")]
    kinds: collections.Counter = collections.Counter()
    stages: collections.Counter = collections.Counter()
    for line in entry.splitlines()[1:]:
        match = re.search(r"=\s*\S+\s+([a-z][a-z\-]*)\(", line)
        if match is None or match.group(1) in NOT_KERNELS:
            continue
        kinds[match.group(1)] += 1
        name = re.search(r'op_name="([^"]*)"', line)
        stages[stage_of(name.group(1) if name else "")] += 1
    loops = len(re.findall(r"\swhile\(", hlo))
    return {
        "xla_kernels": sum(kinds.values()),
        "xla_kinds": dict(kinds),
        "xla_by_stage": dict(stages),
        "xla_loops": loops,
    }


def load(dtype):
    from avdgp.data import Standardizer, load_dataset, split_dataset

    split = split_dataset(load_dataset(DATA_ROOT / "elevators"), seed=0, split=0)
    scaler = Standardizer.fit(split.x_train, split.y_train)
    x = scaler.transform_x(split.x_train).astype(dtype)
    y = scaler.transform_y(split.y_train).astype(dtype)
    return x, y


def build(name: str, x, num_data: int):
    """``(model, loss)``."""
    import gpflow
    from gpflow.keras import tf_keras

    from avdgp.zoo import ModelSpec, build_model

    if name == "mlp":
        model = tf_keras.Sequential(
            [
                tf_keras.Input((x.shape[1],), dtype=gpflow.default_float()),
                tf_keras.layers.Dense(96, activation="relu"),
                tf_keras.layers.Dense(96, activation="relu"),
                tf_keras.layers.Dense(1),
            ]
        )
        loss = "mse"
    else:
        # svgp-M: an SVGP of M global inducing points (a guard's size); svgp: the zoo's 256
        inducing = (int(name[5:]),) if name.startswith("svgp-") else None
        kind, preset, design = {
            "avdgp": ("avdgp", "default", None),
            "avdgp-paper": ("avdgp", "paper", None),
            "avdgp-no-reach": ("avdgp", "default", "no-reach"),
            "avdgp-guard": ("avdgp", "default", "guard"),
            "avdgp-guard-64": ("avdgp", "default", "guard-64"),
            "avdgp-guard-256": ("avdgp", "default", "guard-256"),
            "avdgp-guard-fixed-kernel": ("avdgp", "default", "guard-fixed-kernel"),
            "avdgp-guard-mean-field": ("avdgp", "default", "guard-mean-field"),
            "avdgp-previous-guard": ("avdgp", "default", "previous-guard"),
            "avdgp-guard-every-4": ("avdgp", "default", "guard-every-4"),
            "avdgp-guard-every-1000": ("avdgp", "default", "guard-every-1000"),
            "dsdgp": ("dsdgp", "default", None),
            "svgp": ("svgp", "default", None),
        }["svgp" if inducing else name]
        spec = ModelSpec(
            model=kind,
            rule="ar2p",
            num_layers=3,
            seed=0,
            preset=preset,
            design=design,
            num_inducing=inducing,
        )
        built = build_model(spec, x.shape[1], num_data, inputs=x[:10000])
        model, loss = built.model, built.loss
    return model, loss


def one_configuration(args) -> dict:
    import numpy as np
    import tensorflow as tf
    from gpflow.keras import tf_keras

    from avdgp.training import float_type
    from gpflux_avdgp.optimizers import FlatAdam

    tf_keras.utils.set_random_seed(0)
    with float_type(args.dtype):
        x, y = load(np.float64 if args.dtype == "float64" else np.float32)
        model_name, optimizer_name = args.model.split(":")
        model, loss = build(model_name, x, len(x))
        optimizer = {"adam": tf_keras.optimizers.Adam, "flat": FlatAdam}[optimizer_name](0.005)
        model.compile(optimizer, loss=loss, jit_compile=args.jit == "yes")
        record = {"model": args.model, "dtype": args.dtype, "jit": args.jit}
        model.fit(x[:100], y[:100], batch_size=100, epochs=1, verbose=0)  # builds every weight
        record["parameters"] = int(sum(np.prod(v.shape) for v in model.trainable_variables))
        record["variables"] = len(model.trainable_variables)
        if args.jit == "no":
            record.update(count_graph(model, x[:100], y[:100]))
            record.update(count_xla(model, x[:100], y[:100]))
        if args.epochs == 0:
            return record
        seconds = []

        class Timer(tf_keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                self.start = time.perf_counter()

            def on_epoch_end(self, epoch, logs=None):
                seconds.append(time.perf_counter() - self.start)

        rows = (len(x) // args.batch_size) * args.batch_size
        model.fit(
            x[:rows],
            y[:rows],
            batch_size=args.batch_size,
            epochs=args.epochs + 1,
            verbose=0,
            shuffle=True,
            callbacks=[Timer()],
        )
        record.update(
            rows=rows,
            seconds_per_epoch=float(np.median(seconds[1:])),
            epoch_seconds=seconds,
            device=args.device_note or ("GPU" if tf.config.list_physical_devices("GPU") else "CPU"),
            tf_version=tf.__version__,
        )
    return record


def paired(args) -> dict:
    """Epochs of ``args.paired`` (two ``model:optimizer``, without XLA) built in one process
    and alternated, ``args.epochs`` each after a traced one: the ratio of each pair of
    neighbouring epochs does not see the machine's speed drift over a run, which moves the
    separate processes' seconds by up to 40 %. Wall seconds and the process's CPU seconds
    (every thread's): on this machine single wall epochs jump between two levels about 2x
    apart (1.3 and 2.6 s on elevators) whichever model runs, and the CPU seconds do not."""
    import numpy as np
    from gpflow.keras import tf_keras

    from avdgp.training import float_type
    from gpflux_avdgp.optimizers import FlatAdam

    first, second = args.paired.split(",")
    with float_type(args.dtype):
        x, y = load(np.float64 if args.dtype == "float64" else np.float32)
        rows = (len(x) // args.batch_size) * args.batch_size
        models = {}
        for configuration in (first, second):
            tf_keras.utils.set_random_seed(0)
            name, optimizer = configuration.split(":")
            model, loss = build(name, x, len(x))
            model.compile(
                {"adam": tf_keras.optimizers.Adam, "flat": FlatAdam}[optimizer](0.005), loss=loss
            )
            models[configuration] = model

        def epoch(configuration: str) -> tuple[float, float]:
            start, cpu = time.perf_counter(), time.process_time()
            models[configuration].fit(
                x[:rows], y[:rows], batch_size=args.batch_size, epochs=1, verbose=0, shuffle=True
            )
            return time.perf_counter() - start, time.process_time() - cpu

        for configuration in models:
            epoch(configuration)  # traces
        seconds: dict = {first: [], second: []}
        cpu_seconds: dict = {first: [], second: []}
        for round_ in range(args.epochs):
            for configuration in (first, second) if round_ % 2 == 0 else (second, first):
                wall, cpu = epoch(configuration)
                seconds[configuration].append(wall)
                cpu_seconds[configuration].append(cpu)
    ratios = [a / b for a, b in zip(seconds[first], seconds[second])]
    cpu_ratios = [a / b for a, b in zip(cpu_seconds[first], cpu_seconds[second])]
    return {
        "paired": [first, second],
        "dtype": args.dtype,
        "epoch_seconds": seconds,
        "ratios": ratios,
        "median_ratio": float(np.median(ratios)),
        "epoch_cpu_seconds": cpu_seconds,
        "cpu_ratios": cpu_ratios,
        "median_cpu_ratio": float(np.median(cpu_ratios)),
    }


def _order(configuration: str) -> tuple:
    model, optimizer = configuration.split(":")
    return (MODELS.index(model), optimizer != "flat")


def table(records: list[dict]) -> str:
    """Markdown: one row per ``model:optimizer``; the ratios are to the MLP with the same
    optimizer and to DS-DGP (Keras' Adam), each at its faster setting (XLA or not), all from
    the same run."""
    by = {(r["model"], r["jit"]): r for r in records}

    def best(configuration: str):
        found = [by[(configuration, jit)] for jit in ("no", "yes") if (configuration, jit) in by]
        timed = [r["seconds_per_epoch"] for r in found if "seconds_per_epoch" in r]
        return min(timed) if timed else None

    lines = [
        "| per training step (model : optimizer) | compute ops | branches/loops | XLA kernels "
        "| s/epoch | s/epoch, XLA | ratio to the MLP | ratio to DS-DGP |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for configuration in sorted({r["model"] for r in records}, key=_order):
        plain, jit = by.get((configuration, "no")), by.get((configuration, "yes"))
        if plain is None:
            continue
        optimizer = configuration.split(":")[1]
        mine, mlp, dsdgp = best(configuration), best(f"mlp:{optimizer}"), best("dsdgp:adam")

        def cell(value, digits=2):
            return "-" if value is None else f"{value:.{digits}f}"

        lines.append(
            f"| {configuration} ({plain['parameters']:,} parameters, {plain['variables']} "
            f"variables) | {plain['ops']:,} | {plain['control_flow']} | "
            f"{plain['xla_kernels']:,} | {cell(plain.get('seconds_per_epoch'))} | "
            f"{cell(jit and jit.get('seconds_per_epoch'))} | "
            f"{cell(mine and mlp and mine / mlp)} | {cell(mine and dsdgp and mine / dsdgp)} |"
        )
    return "\n".join(lines)


def stage_table(records: list[dict], model: str = "avdgp:flat") -> str:
    """Markdown: ops and XLA kernels of ``model`` by stage."""
    plain = next((r for r in records if r["model"] == model and r["jit"] == "no"), None)
    if plain is None:
        return ""
    keys = sorted(set(plain["ops_by_stage"]) | set(plain["xla_by_stage"]))
    lines = ["| stage | compute ops | XLA kernels |", "|---|---:|---:|"]
    for key in sorted(keys, key=lambda k: -plain["ops_by_stage"].get(k, 0)):
        lines.append(
            f"| {key} | {plain['ops_by_stage'].get(key, 0)} | {plain['xla_by_stage'].get(key, 0)} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models",
        default=",".join(CONFIGURATIONS),
        help=f"comma-separated model:optimizer, models {', '.join(MODELS)}, optimizers adam, flat",
    )
    parser.add_argument("--jit", default="no,yes", help="comma-separated subset of no,yes")
    parser.add_argument("--dtype", default="float64")
    parser.add_argument(
        "--epochs", type=int, default=3, help="timed epochs after one traced (0: count only)"
    )
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--device-note", default="")
    parser.add_argument("--out", default="benchmarks/results/step_cost")
    parser.add_argument(
        "--paired",
        help="two model:optimizer trained in one process, epochs alternated (e.g. "
        "avdgp:flat,mlp:flat): their ratio, robust to the machine's drift; nothing else runs",
    )
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one_configuration(args)))
        return 0
    if args.paired:
        record = paired(args)
        Path(args.out).mkdir(parents=True, exist_ok=True)
        with open(Path(args.out) / "paired.jsonl", "a") as file:
            file.write(json.dumps(record) + "\n")
        first, second = record["paired"]
        ratios = ", ".join(f"{ratio:.2f}" for ratio in record["ratios"])
        cpu_ratios = ", ".join(f"{ratio:.2f}" for ratio in record["cpu_ratios"])
        print(
            f"{first} / {second}, epochs alternated in one process: median ratio "
            f"{record['median_ratio']:.2f} (ratios {ratios}); CPU seconds: median ratio "
            f"{record['median_cpu_ratio']:.2f} (ratios {cpu_ratios})"
        )
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records = []
    for model in args.models.split(","):
        for jit in args.jit.split(","):
            command = [sys.executable, __file__, "--one", "--model", model, "--jit", jit]
            command += ["--dtype", args.dtype, "--epochs", str(args.epochs)]
            command += ["--batch-size", str(args.batch_size), "--device-note", args.device_note]
            print(f"{model}, XLA {jit} ...", file=sys.stderr, flush=True)
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                print(done.stderr[-3000:], file=sys.stderr)
                continue
            record = json.loads(done.stdout.strip().splitlines()[-1])
            records.append(record)
            with open(out / "results.jsonl", "a") as file:
                file.write(json.dumps(record) + "\n")
    stages = stage_table(records)
    text = table(records) + ("\n\nStages of avdgp:flat:\n\n" + stages if stages else "")
    (out / "table.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
