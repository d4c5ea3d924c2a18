"""``avdgp demo``: the paper's toy "DGP" letters problem on embedded data."""

from __future__ import annotations

import sys

from .common import load_tensorflow, progress_stream

__all__ = ["demo_command"]


def demo_command(args) -> int:
    load_tensorflow()
    from avdgp.experiments.demo.run import demo_settings, run_demo

    settings = demo_settings(
        args.full,
        epochs=args.epochs,
        num_rows=args.rows,
        total_inducing=args.total_inducing,
        seed=args.seed,
        preset=args.preset,
    )
    run_demo(settings, args.out, stream=progress_stream(args), report=sys.stdout)
    return 0
