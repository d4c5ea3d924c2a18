"""Peak memory of ``avdgp predict`` against the number of rows (a figure, not a timed test).

Builds the paper's 3-layer AVDGP-AR2P for D = 18 (dims 16/4/1, M 8/4/4, S 32, untrained:
memory does not depend on training) as a model folder like ``avdgp fit --save`` writes, then
runs ``avdgp predict MODEL_DIR rows.csv --out predictions.csv`` in a subprocess for each row
count and reports its peak resident memory (``ru_maxrss`` of the child) and wall time, and the
memory of the same command on 1,000 rows (TensorFlow and the model alone).

    python benchmarks/predict_memory.py --rows 1000,100000,1000000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

DIM = 18


def model_folder(folder: Path) -> Path:
    from avdgp.zoo import ModelSpec, build_model

    built = build_model(ModelSpec(model="avdgp", rule="ar2p", seed=0), DIM, 10_000)
    built.model.compile("adam")
    built.model.save(folder / "model.keras")
    run = {
        "spec": {"task": "regression", "model": "avdgp"},
        "result": {"dtype": "float64", "label": "avdgp-ar2p"},
        "keras_file": "model.keras",
        "standardizer": {"x_mean": [0.0] * DIM, "x_std": [1.0] * DIM, "y_mean": 0.0, "y_std": 1.0},
    }
    (folder / "run.json").write_text(json.dumps(run))
    return folder


def write_rows(path: Path, rows: int) -> Path:
    rng = np.random.default_rng(0)
    with open(path, "w") as handle:
        for start in range(0, rows, 100_000):
            block = rng.normal(size=(min(100_000, rows - start), DIM))
            np.savetxt(handle, block, delimiter=",", fmt="%.6f")
    return path


def peak_of_child(command: list[str]) -> tuple[float, float]:
    """``(peak resident MB, wall seconds)`` of one child process."""
    start = time.perf_counter()
    script = (
        "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
        "stdout=subprocess.DEVNULL); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *command], capture_output=True, text=True, check=True
    )
    return int(done.stdout.strip()) / 1024, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1000,100000,1000000")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        folder = model_folder(Path(temporary))
        print("| rows | peak resident memory | wall time |")
        print("|---:|---:|---:|")
        for rows in [int(r) for r in args.rows.split(",")]:
            data = write_rows(folder / "rows.csv", rows)
            command = [
                sys.executable,
                "-m",
                "avdgp",
                "predict",
                str(folder),
                str(data),
                "--out",
                str(folder / "p.csv"),
            ]
            megabytes, seconds = peak_of_child(command)
            lines = sum(1 for _ in open(folder / "p.csv"))
            assert lines == rows + 1, (lines, rows)
            print(f"| {rows:,} | {megabytes:,.0f} MB | {seconds:.0f} s |", flush=True)
            os.remove(data)


if __name__ == "__main__":
    main()
