"""Peak memory of streaming CSV shards through one epoch of training, against the data size.

    python stream_memory.py generate DIR [--shards 16] [--rows 2000000] [--features 7]
        writes DIR/part-*.csv (every fourth shard gzip-compressed), NumPy chunk by chunk;
        prints JSON: rows, columns, text bytes (uncompressed CSV), float64 bytes
    python stream_memory.py train DIR [--batch-size 20000] [--load | --model-only]
        scans DIR's shards, builds a 1-layer AVDGP and trains it for one epoch on the streamed
        shards (--load: on the shards loaded whole with NumPy instead, the control;
        --model-only: on ten in-memory batches of random rows, the training step's own working
        memory, which grows with the batch size and not with the data);
        prints JSON with the resident set sizes (bytes) along the way

Memory is read from /proc/self/status: ``VmRSS`` (now) and ``VmHWM`` (peak since the last
reset; writing ``5`` to /proc/self/clear_refs resets it). ``scan_growth``: the peak during the
statistics pass minus the resident size before it (TensorFlow and the package imported).
``epoch_growth``: the peak during the epoch (with --load: loading and the epoch) minus the
resident size after the model was built and warmed up on three streamed batches (tracing and
the pipeline's threads are fixed costs). ``total_growth``: the peak of the whole run minus the
resident size after the imports. Used by tests/application/data/test_streaming.py; the docs'
memory figure comes from it.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["CUDA_VISIBLE_DEVICES"] = ""

import numpy as np  # noqa: E402

CHUNK_ROWS = 50_000


def _status(key: str) -> int:
    """A ``Vm*`` line of /proc/self/status in bytes."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def _reset_peak() -> bool:
    """Reset VmHWM to the current VmRSS; False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def generate(directory: Path, shards: int, rows: int, features: int, seed: int) -> dict:
    """Write ``shards`` CSV shards of ``rows`` rows in all (header ``x1..xD,y``)."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    header = ",".join([f"x{i + 1}" for i in range(features)] + ["y"]) + "\n"
    per_shard = [rows // shards + (1 if k < rows % shards else 0) for k in range(shards)]
    text_bytes = 0
    for k, count in enumerate(per_shard):
        compressed = k % 4 == 3
        path = directory / f"part-{k:03d}.csv{'.gz' if compressed else ''}"
        opener = (
            (lambda p: gzip.open(p, "wt", compresslevel=1))
            if compressed
            else (lambda p: open(p, "w"))
        )
        with opener(path) as handle:
            handle.write(header)
            text_bytes += len(header)
            done = 0
            while done < count:
                n = min(CHUNK_ROWS, count - done)
                x = rng.standard_normal((n, features))  # [n, D]
                y = np.sin(x[:, :1]) + 0.1 * rng.standard_normal((n, 1))  # [n, 1]
                text = io.StringIO()
                np.savetxt(text, np.hstack([x, y]), fmt="%.17g", delimiter=",")
                handle.write(text.getvalue())
                text_bytes += len(text.getvalue())
                done += n
    return {
        "rows": rows,
        "columns": features + 1,
        "shards": shards,
        "text_bytes": text_bytes,
        "float64_bytes": rows * (features + 1) * 8,
    }


def train(directory: Path, batch_size: int, load: bool, model_only: bool = False) -> dict:
    """Scan, build, warm up, then one epoch; the resident sizes along the way."""
    import gpflow
    import tensorflow as tf
    from gpflow.keras import tf_keras

    import gpflux_avdgp
    from avdgp.data import load_dataset
    from avdgp.data.pipeline import csv_shard_dataset
    from avdgp.data.shards import scan_csv_shards

    tf.constant(1.0) + 1.0  # start the runtime before the first reading
    imported = _status("VmRSS")
    can_reset = _reset_peak()
    start = time.perf_counter()
    statistics = scan_csv_shards(directory)
    scan_seconds = time.perf_counter() - start
    scan_growth = _status("VmHWM") - imported
    tf_keras.utils.set_random_seed(0)
    likelihood = gpflow.likelihoods.Gaussian(0.1)
    model = gpflux_avdgp.build_avdgp(
        statistics.num_features, [1], 4, statistics.num_rows, likelihood, seed=0
    )
    optimizer = tf_keras.optimizers.Adam(0.01)
    optimizer.build(model.trainable_variables)
    model.compile(optimizer, loss=gpflux_avdgp.AVDGPLoss(likelihood))
    scaler = statistics.standardizer()
    streamed = csv_shard_dataset(statistics, batch_size=batch_size, standardizer=scaler)
    model.fit(streamed.take(3), epochs=1, verbose=0)  # warm-up: tracing, pipeline threads
    if model_only:  # ten batches made before the baseline: the step's working memory alone
        dtype = streamed.element_spec[0].dtype.as_numpy_dtype
        rows = np.random.default_rng(0).standard_normal((10 * batch_size, statistics.num_columns))
        rows = rows.astype(dtype)  # [10 B, D + 1]
        in_memory = tf.data.Dataset.from_tensor_slices((rows[:, :-1], rows[:, -1:]))
        in_memory = in_memory.batch(batch_size)
    baseline = _status("VmRSS")
    total_peak = _status("VmHWM")
    _reset_peak()
    start = time.perf_counter()
    if load:  # the control: the same epoch on the shards loaded whole
        parts = [load_dataset(path, min_rows=1) for path in statistics.shards]
        x = np.concatenate([scaler.transform_x(part.inputs) for part in parts])
        y = scaler.transform_y(np.concatenate([part.targets for part in parts]))[:, None]
        del parts
        data = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size)
    elif model_only:
        data = in_memory
    else:
        data = streamed
    history = model.fit(data, epochs=1, verbose=0)
    epoch_seconds = time.perf_counter() - start
    epoch_peak = _status("VmHWM")
    return {
        "mode": "load" if load else "model-only" if model_only else "stream",
        "rows": statistics.num_rows,
        "shards": len(statistics.shards),
        "batch_size": batch_size,
        "imported_rss": imported,
        "scan_growth": scan_growth,
        "baseline_rss": baseline,
        "epoch_peak_rss": epoch_peak,
        "epoch_growth": epoch_peak - baseline,
        "total_growth": max(total_peak, epoch_peak) - imported,
        "peak_reset": can_reset,
        "scan_seconds": scan_seconds,
        "epoch_seconds": epoch_seconds,
        "loss": float(history.history["loss"][-1]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("generate")
    make.add_argument("directory", type=Path)
    make.add_argument("--shards", type=int, default=16)
    make.add_argument("--rows", type=int, default=2_000_000)
    make.add_argument("--features", type=int, default=7)
    make.add_argument("--seed", type=int, default=0)
    fit = commands.add_parser("train")
    fit.add_argument("directory", type=Path)
    fit.add_argument("--batch-size", type=int, default=20_000)
    mode = fit.add_mutually_exclusive_group()
    mode.add_argument("--load", action="store_true")
    mode.add_argument("--model-only", action="store_true")
    args = parser.parse_args()
    if args.command == "generate":
        result = generate(args.directory, args.shards, args.rows, args.features, args.seed)
    else:
        result = train(args.directory, args.batch_size, args.load, args.model_only)
    print(json.dumps(result))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
