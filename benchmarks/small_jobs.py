"""Wall-clock seconds of the small jobs a GP user runs on small data, beside TensorFlow's import.

Issue 50 asks that ``avdgp predict`` of 100 rows and ``avdgp export`` take at most 3x the bare
``import tensorflow``, ``avdgp fit`` of 400 rows x 100 epochs at most 25 s, and that time
outside the epochs stay under 10 % of a ``fit``. Each command runs ``--repeats`` times in a
fresh process (the console script, as a user types it), one after another, on a 400-row CSV
of 8 inputs written here (a smooth function plus noise, seed 0). For ``fit`` the epochs'
seconds are read from its record (``--json``; the first includes tracing), so the time outside
them is the wall time less their sum. The table is appended to
``benchmarks/results/small_jobs/results.md``; run it alone.

    python benchmarks/small_jobs.py              # 3 runs each
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results" / "small_jobs" / "results.md"


def write_data(folder: Path, rows: int, seed: int = 0) -> tuple[Path, Path]:
    """A ``rows``-row training CSV and a 100-row CSV of new inputs (with their target)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, size=(rows + 100, 8))
    y = np.sin(x[:, 0]) + 0.5 * x[:, 1] * x[:, 2] + 0.1 * rng.standard_normal(rows + 100)
    header = ",".join([f"x{i}" for i in range(8)] + ["y"])
    table = np.column_stack([x, y])
    train, new = folder / "train.csv", folder / "new.csv"
    np.savetxt(train, table[:rows], delimiter=",", header=header, comments="", fmt="%.6f")
    np.savetxt(new, table[rows:], delimiter=",", header=header, comments="", fmt="%.6f")
    return train, new


def timed(command: list[str], env: dict) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr.strip()[-2000:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows", type=int, default=400)
    parser.add_argument("--epochs", type=int, default=100)
    args = parser.parse_args()
    avdgp = shutil.which("avdgp") or sys.exit("avdgp is not installed (pip install -e .)")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    rows: dict[str, list[float]] = {}
    outside: list[float] = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        train, new = write_data(folder, args.rows)
        for repeat in range(args.repeats):
            run_dir, export_dir = folder / f"run{repeat}", folder / f"export{repeat}"
            jobs = {
                "python -c 'import tensorflow'": [sys.executable, "-c", "import tensorflow"],
                "python -c 'import gpflux_avdgp'": [sys.executable, "-c", "import gpflux_avdgp"],
                f"avdgp fit ({args.rows} rows, {args.epochs} epochs)": [
                    avdgp, "fit", str(train), "--epochs", str(args.epochs), "--save",
                    str(run_dir), "--json", str(folder / f"fit{repeat}.json"),
                ],
                "avdgp predict (100 rows)": [
                    avdgp, "predict", str(run_dir), str(new), "--out", str(folder / "p.csv")
                ],
                "avdgp export": [avdgp, "export", str(run_dir), str(export_dir)],
            }  # fmt: skip
            for name, command in jobs.items():
                seconds = timed(command, env)
                rows.setdefault(name, []).append(seconds)
                if name.startswith("avdgp fit"):
                    record = json.loads((folder / f"fit{repeat}.json").read_text())
                    outside.append(seconds - sum(record["epoch_seconds"]))
    tf_import = statistics.median(rows["python -c 'import tensorflow'"])
    date = datetime.date.today().isoformat()
    lines = [
        f"\n## {date}: median of {args.repeats} fresh processes, one after another\n",
        "| job | median s | max s | / import tensorflow |",
        "|---|---:|---:|---:|",
    ]
    for name, values in rows.items():
        median = statistics.median(values)
        lines.append(f"| `{name}` | {median:.1f} | {max(values):.1f} | {median / tf_import:.1f}x |")
    fit_name = next(name for name in rows if name.startswith("avdgp fit"))
    fit_median = statistics.median(rows[fit_name])
    lines.append(
        f"\n`avdgp fit`: {statistics.median(outside):.1f} s outside its epochs "
        f"({100 * statistics.median(outside) / fit_median:.0f} % of its wall time; the epochs' "
        "seconds from its record, the first with tracing)."
    )
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as handle:
        handle.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
