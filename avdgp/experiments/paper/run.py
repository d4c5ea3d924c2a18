"""``avdgp paper``: the AVDGP paper's tables and its ablation figure, run and set beside the paper's
own numbers (what is asked: :mod:`avdgp.experiments.paper.request`; the tables:
:mod:`avdgp.experiments.paper.tables`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional, TextIO

from avdgp.experiments.bench.run import run_bench
from avdgp.experiments.paper.request import PaperRequest, toy_runs
from avdgp.experiments.paper.tables import render
from avdgp.experiments.paper.toy_grid import run_toy

__all__ = ["run_paper"]


def _bench(request: PaperRequest, stream) -> None:
    for dataset in request.uci_datasets():
        run_bench(request.bench_settings(dataset), request.out / request.uci_folder, stream=stream)


def run_paper(request: PaperRequest, *, stream: Optional[TextIO] = sys.stderr) -> Path:
    """Run what ``request.table`` still misses (unless ``render_only``), then write
    ``<table>.md`` and ``<table>.csv`` (and its figures) in ``request.out``.

    :returns: the path of the Markdown table.
    """
    out = Path(request.out)
    out.mkdir(parents=True, exist_ok=True)
    if not request.render_only:
        if request.table in ("table1", "table3", "table4", "table5"):
            _bench(request, stream)
        else:
            run_toy(toy_runs(request), request.toy_settings, out / "toy", stream=stream)
    return render(request)
