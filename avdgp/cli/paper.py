"""``avdgp paper TABLE``: one of the paper's tables, run (resumably) and printed beside the
paper's numbers."""

from __future__ import annotations

from pathlib import Path

from ..errors import CommandLineError
from .common import load_tensorflow, progress_stream

__all__ = ["paper_command"]


def paper_command(args) -> int:
    load_tensorflow()
    from avdgp.experiments.paper.request import PaperRequest
    from avdgp.experiments.paper.run import run_paper

    datasets = None
    if args.datasets is not None:
        datasets = [name.strip() for name in args.datasets.split(",") if name.strip()]
        if not datasets:
            raise CommandLineError("avdgp paper: --datasets is empty")
    models = None
    if args.models is not None:
        models = [name.strip() for name in args.models.split(",") if name.strip()]
        if not models:
            raise CommandLineError("avdgp paper: --models is empty")
    request = PaperRequest(
        table=args.table,
        out=Path(args.out),
        budget=args.budget,
        preset=args.preset,
        seeds=args.seeds,
        datasets=datasets,
        data_root=args.data_root,
        sizes=args.sizes,
        models=models,
        render_only=args.render_only,
        epochs=args.epochs,
    )
    table = run_paper(request, stream=progress_stream(args))
    print(table.read_text())
    print(f"Written: {table} and {table.with_suffix('.csv')}")
    return 0
