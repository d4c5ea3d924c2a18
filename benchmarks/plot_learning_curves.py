"""Figures of learning curves written by ``learning_curves.py`` / ``reference_avdgp.py``.

One panel per model (or per data set), one line per variant (mean over seeds, thin lines per
seed)::

    python benchmarks/plot_learning_curves.py benchmarks/results/learning/toy.jsonl \
        --metric test_error_rate --variants "baseline,w_scale=0,..." \
        --out docs/experiments/learning/toy_init.png
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure


def read(paths: list[str]) -> list[dict]:
    rows = []
    for path in paths:
        for line in Path(path).read_text().splitlines():
            if line.startswith("{"):
                record = json.loads(line)
                if "error" not in record:
                    rows.append(record)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--metric", default="test_error_rate")
    parser.add_argument("--x", default="step", choices=["step", "seconds", "epoch"])
    parser.add_argument("--variants", default=None, help="comma-separated, in this order")
    parser.add_argument("--labels", default=None, help="comma-separated legend labels")
    parser.add_argument("--models", default=None, help="comma-separated panels")
    parser.add_argument("--steps-per-epoch", type=int, default=133)
    parser.add_argument("--title", default="")
    parser.add_argument("--ylim", default=None, help="low,high")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)

    rows = read(args.files)
    variants = (
        args.variants.split(";")
        if args.variants
        else list(dict.fromkeys(r["variant"] for r in rows))
    )
    labels = args.labels.split(";") if args.labels else variants
    models = (
        args.models.split(",") if args.models else list(dict.fromkeys(r["model"] for r in rows))
    )
    scale = 100.0 if args.metric.endswith("error_rate") else 1.0
    fig = Figure(figsize=(4.6 * len(models) + 3.2, 3.8), dpi=100, layout="constrained")
    for panel, model in enumerate(models):
        ax = fig.add_subplot(1, len(models), panel + 1)
        for index, (variant, label) in enumerate(zip(variants, labels)):
            series = defaultdict(dict)  # seed -> x -> y
            for r in rows:
                if r["model"] == model and r["variant"] == variant and args.metric in r:
                    x = r["step"] / args.steps_per_epoch if args.x == "epoch" else r[args.x]
                    series[r["seed"]][round(x, 3)] = scale * r[args.metric]
            if not series:
                continue
            for seed_points in series.values():
                xs = sorted(seed_points)
                ax.plot(xs, [seed_points[x] for x in xs], color=f"C{index}", alpha=0.25, lw=0.8)
            common = sorted(set.intersection(*(set(p) for p in series.values())))
            mean = [np.mean([p[x] for p in series.values()]) for x in common]
            ax.plot(common, mean, color=f"C{index}", lw=2, label=f"{label} ({len(series)} seeds)")
        ax.set(
            xlabel={"step": "optimisation steps", "seconds": "training seconds", "epoch": "epochs"}[
                args.x
            ],
            ylabel=args.metric.replace("_", " ") + (" (%)" if scale == 100.0 else ""),
            title=f"{args.title}{model}",
        )
        if args.ylim:
            low, high = (float(v) for v in args.ylim.split(","))
            ax.set_ylim(low, high)
        ax.grid(alpha=0.3)
    handles, names = {}, []
    for ax in fig.axes:
        for handle, name in zip(*ax.get_legend_handles_labels()):
            if name not in handles:
                handles[name] = handle
                names.append(name)
    fig.legend([handles[n] for n in names], names, fontsize=7, loc="outside right upper")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
