"""``avdgp bench``: models over UCI data sets and seeds with the paper's protocol."""

from __future__ import annotations

from pathlib import Path

from ..errors import CommandLineError
from .common import checked_model_names, load_tensorflow, progress_stream

__all__ = ["bench_command"]


def bench_command(args) -> int:
    load_tensorflow()
    from avdgp.experiments.bench.run import BenchSettings, run_bench

    models = checked_model_names(args.models)
    datasets = [name.strip() for name in args.datasets.split(",") if name.strip()]
    if not datasets:
        raise CommandLineError("avdgp bench: --datasets is empty")
    settings = BenchSettings(
        datasets=datasets,
        models=models,
        seeds=args.seeds,
        epochs=args.epochs,
        dtype=args.dtype,
        data_root=args.data_root,
        max_rows=args.max_rows,
        preset=args.preset,
        training={
            key: value
            for key, value in (
                ("learning_rate", args.learning_rate),
                ("schedule", args.schedule),
                ("restore_best", args.restore_best),
                ("patience", args.patience),
                ("steps_per_execution", args.steps_per_execution),
            )
            if value is not None
        },
    )
    tables = run_bench(settings, args.out, stream=progress_stream(args))
    print(tables.read_text())
    print(f"Results in {Path(args.out)}/ (results.csv, tables.md, nll/rmse/crps.png)")
    return 0
