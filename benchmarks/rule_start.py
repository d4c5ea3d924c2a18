"""One change at a time: the amortization rules of Table 1 with the paper's start of the
inducing points (``inducing_init="input"``, ``W_m = I``) instead of the default (``"global"``,
``W_m = 0``), everything else as ``avdgp paper table1`` (default preset, best validation epoch,
patience 20, the same splits and seeds).

Runs go to their own folder (resumable, ``avdgp bench``'s files); ``--compare`` prints test
NLL / RMSE per data set beside the default start's rows of the Table 1 folder::

    python benchmarks/rule_start.py --models avdgp-ar1 --out docs/experiments/paper/start_input
    python benchmarks/rule_start.py --models avdgp-ar1 --out docs/experiments/paper/start_input \\
        --compare docs/experiments/paper/uci/results.csv
"""

from __future__ import annotations

import argparse
import csv
from collections import defaultdict
from pathlib import Path

import numpy as np

from avdgp.experiments.bench.run import BenchSettings, run_bench
from avdgp.experiments.paper.request import SMALL_DATASETS


def _scores(path: Path, models: list[str]) -> dict:
    """``(dataset, model) -> {seed: (nll, rmse)}`` of the default preset's finished rows."""
    table: dict = defaultdict(dict)
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row["model"] in models and row["status"] == "ok" and row["preset"] == "default":
                table[row["dataset"], row["model"]][int(row["seed"])] = (
                    float(row["nll"]),
                    float(row["rmse"]),
                )
    return table


def _cell(runs: dict) -> str:
    if not runs:
        return "–"
    nll, rmse = np.array(list(runs.values())).T
    return f"{nll.mean():.3f} / {rmse.mean():.3f} ({len(runs)})"


def compare(start_input: Path, start_global: Path, models: list[str], datasets) -> str:
    """A Markdown table: test NLL / RMSE (mean over the seeds both starts finished)."""
    ours, default = _scores(start_input, models), _scores(start_global, models)
    lines = [
        "| data set | model | `W_m = 0` (default): NLL / RMSE (seeds) "
        "| `W_m = I`: NLL / RMSE (seeds) |",
        "|---|---|---:|---:|",
    ]
    for dataset in datasets:
        for model in models:
            a, b = default.get((dataset, model), {}), ours.get((dataset, model), {})
            common = sorted(set(a) & set(b))
            lines.append(
                f"| {dataset} | {model} | {_cell({s: a[s] for s in common})} | "
                f"{_cell({s: b[s] for s in common})} |"
            )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="avdgp-ar1")
    parser.add_argument("--datasets", default=",".join(SMALL_DATASETS))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--data-root")
    parser.add_argument("--compare", type=Path, help="the default start's results.csv")
    args = parser.parse_args(argv)
    models = [name.strip() for name in args.models.split(",")]
    datasets = [name.strip() for name in args.datasets.split(",")]
    if args.compare is not None:
        print(compare(args.out / "results.csv", args.compare, models, datasets))
        return 0
    for dataset in datasets:  # one data set at a time, as avdgp paper runs them
        settings = BenchSettings(
            datasets=(dataset,),
            models=models,
            seeds=[int(seed) for seed in args.seeds.split(",")],
            epochs=100,
            data_root=args.data_root,
            extra={"extra": {"inducing_init": "input"}},
            training={"steps_per_execution": 10},
        )
        run_bench(settings, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
