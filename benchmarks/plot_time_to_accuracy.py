"""Time-to-accuracy figure of one seed of every model from a bench folder's ``curves.jsonl``.

``avdgp bench`` draws ``time_<dataset>.png`` with every run; this draws the runs of the given
seeds only, so each model is one line::

    python benchmarks/plot_time_to_accuracy.py docs/experiments/bench100 --datasets elevators \
        --seeds 0 --suffix _seed0
"""

from __future__ import annotations

import argparse
from pathlib import Path

from avdgp.experiments.bench.results import CURVES_FILE, read_curves
from avdgp.experiments.bench.tables import plot_time_curves


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path, help="bench output folder with curves.jsonl")
    parser.add_argument("--datasets", required=True, help="comma-separated")
    parser.add_argument("--seeds", default="0", help="comma-separated (default 0)")
    parser.add_argument("--suffix", default="_seed0", help="file name: time_<dataset><suffix>.png")
    args = parser.parse_args(argv)
    curves = read_curves(args.folder / CURVES_FILE)
    if not curves:
        parser.error(f"{args.folder / CURVES_FILE}: no curves (run avdgp bench first)")
    try:
        seeds = [int(seed) for seed in args.seeds.split(",")]
    except ValueError:
        parser.error(f"--seeds: expected comma-separated integers, got {args.seeds!r}")
    datasets = args.datasets.split(",")
    written = plot_time_curves(curves, datasets, args.folder, seeds=seeds, suffix=args.suffix)
    if not written:
        parser.error(f"no curves of seeds {seeds} for {datasets} in {args.folder / CURVES_FILE}")
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
