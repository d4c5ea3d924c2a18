"""``avdgp uncertainty``: predictive uncertainty off the data, in gaps and under shift."""

from __future__ import annotations

from pathlib import Path

from ..errors import CommandLineError
from .common import checked_model_names, load_tensorflow, progress_stream

__all__ = ["uncertainty_command"]


def uncertainty_command(args) -> int:
    load_tensorflow()
    from avdgp.experiments.uncertainty.report import summarise_uncertainty
    from avdgp.experiments.uncertainty.run import UncertaintySettings, run_uncertainty
    from avdgp.zoo import model_label

    models = checked_model_names(args.models)
    problems = [name.strip() for name in args.problems.split(",") if name.strip()]
    if not problems:
        raise CommandLineError("avdgp uncertainty: --problems is empty")
    if not 0.0 < args.quantile < 1.0:
        raise CommandLineError(
            f"avdgp uncertainty: --quantile: expected a number in (0, 1), got {args.quantile}"
        )
    settings = UncertaintySettings(
        problems=problems,
        models=models,
        seeds=args.seeds,
        epochs=args.epochs,
        preset=args.preset,
        column=args.column,
        quantile=args.quantile,
        data_root=args.data_root,
        rows=args.rows,
    )
    run_uncertainty(settings, args.out, stream=progress_stream(args))
    report = summarise_uncertainty(args.out, [model_label(name) for name in models])
    print(report.read_text())
    print(f"Results in {Path(args.out)}/ (uncertainty.csv, uncertainty.md, PNG figures)")
    return 0
