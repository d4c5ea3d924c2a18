"""Test scores at the best validation epoch of learning curves (``learning_curves.py`` or
``reference_avdgp.py`` output): what the default preset's selection would keep.

For every run (data set, model, variant, seed) the evaluation of lowest validation NLL is kept;
prints one Markdown row per variant: test NLL / RMSE per seed (with the step), and their mean::

    python benchmarks/best_epoch.py benchmarks/results/learning/wine_one_change.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np


def best_rows(paths: list[Path]) -> dict:
    """``(data, model, variant) -> {seed: record of lowest val_nll}``."""
    best: dict = defaultdict(dict)
    for path in paths:
        for line in path.read_text().splitlines():
            if not line.startswith("{"):
                continue
            record = json.loads(line)
            if "error" in record or "val_nll" not in record:
                continue
            key = (record["data"], record["model"], record.get("variant", "baseline"))
            seed = int(record["seed"])
            kept = best[key].get(seed)
            if kept is None or record["val_nll"] < kept["val_nll"]:
                best[key][seed] = record
    return best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("curves", type=Path, nargs="+")
    args = parser.parse_args(argv)
    print("| data | model | variant | per seed: test NLL / RMSE (step) | mean NLL / RMSE |")
    print("|---|---|---|---|---:|")
    for (data, model, variant), seeds in sorted(best_rows(args.curves).items()):
        runs = [seeds[seed] for seed in sorted(seeds)]
        cells = ", ".join(f"{r['test_nll']:.3f} / {r['test_rmse']:.3f} ({r['step']})" for r in runs)
        nll = np.mean([r["test_nll"] for r in runs])
        rmse = np.mean([r["test_rmse"] for r in runs])
        print(f"| {data} | {model} | `{variant}` | {cells} | {nll:.3f} / {rmse:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
