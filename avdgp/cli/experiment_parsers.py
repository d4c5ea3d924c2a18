"""The parsers of the experiment commands: ``avdgp bench``, ``uncertainty`` and ``paper``."""

from __future__ import annotations

from .arguments import (
    DATA_ROOT_HELP,
    add_preset_arguments,
    add_steps_per_execution,
    int_list,
    positive_int,
)

__all__ = ["PAPER_TABLES", "add_bench", "add_paper", "add_uncertainty"]


def add_bench(commands) -> None:
    bench = commands.add_parser(
        "bench",
        help="the paper's benchmark protocol (resumable)",
        description="Train and score models over data sets and seeds with the paper's "
        "protocol (8:1:1 splits, Adam 0.005, batch 100/500); writes results.csv, tables.md "
        "and PNG plots; finished runs are skipped when rerun.",
    )
    bench.add_argument("--datasets", default="elevators", help="comma-separated names or paths")
    bench.add_argument(
        "--models",
        default="svgp,dsdgp,dspp,idsgp,avdgp-ar2p,avdgp-ar2pp",
        help="comma-separated models (avdgp-ar1|ar2|ar2p|ar2pp, svgp, solve-gp, dsdgp, dspp, "
        "idsgp, sgp-avi)",
    )
    bench.add_argument("--seeds", type=int_list, default=[0, 1, 2, 3, 4], help="seeds")
    bench.add_argument("--epochs", type=positive_int, default=100, help="epochs per run")
    add_preset_arguments(bench)
    add_steps_per_execution(bench)
    bench.add_argument(
        "--dtype", choices=("float64", "float32"), default="float64", help="float type"
    )
    bench.add_argument(
        "--max-rows", type=positive_int, help="subsample larger data sets (default: all rows)"
    )
    bench.add_argument("--data-root", help=DATA_ROOT_HELP)
    bench.add_argument("--out", default="avdgp-bench", help="output folder")
    bench.add_argument("--quiet", action="store_true", help="no progress output (results only)")


def add_uncertainty(commands) -> None:
    command = commands.add_parser(
        "uncertainty",
        help="how far each model's uncertainty can be trusted (resumable)",
        description="Train models on 1-D problems (std far from the data: 'far'; in a gap of "
        "the data: 'gap'; four functions with a gap and a far field: 'trend', 'kink', "
        "'hetero', 'wiggle', or 'functions' for all four), a 2-D square with a hole ('hole') "
        "and UCI sets under covariate shift (train below a quantile of one input, test above "
        "it: NAME, NAME@COLUMN, NAME@pc1, or 'shifts' for the sweep of six sets); writes "
        "uncertainty.csv, uncertainty.md, band and reliability figures; finished runs are "
        "skipped when rerun.",
    )
    command.add_argument(
        "--problems",
        default="far,gap,concrete",
        help="comma-separated: far, gap, trend, kink, hetero, wiggle, functions, hole, shifts, "
        "UCI names or paths (NAME@COLUMN or NAME@pc1 picks the shifted input)",
    )
    command.add_argument(
        "--models",
        default="avdgp-ar2p,avdgp-ar2pp,svgp,dsdgp,dspp",
        help="comma-separated models, as for bench",
    )
    command.add_argument("--seeds", type=int_list, default=[0, 1, 2], help="seeds")
    command.add_argument("--epochs", type=positive_int, default=100, help="epochs per run")
    command.add_argument(
        "--preset", choices=("default", "paper"), default="default", help="settings, as for fit"
    )
    command.add_argument(
        "--column", type=int, default=0, help="input column the shift cuts, from 0"
    )
    command.add_argument(
        "--quantile", type=float, default=0.8, help="train below this quantile of it"
    )
    command.add_argument(
        "--rows",
        type=positive_int,
        help="at most this many rows of a UCI set, a random subset (default: all)",
    )
    command.add_argument("--data-root", help=DATA_ROOT_HELP)
    command.add_argument("--out", default="avdgp-uncertainty", help="output folder")
    command.add_argument("--quiet", action="store_true", help="no progress output (results only)")


PAPER_TABLES = ("table1", "table2", "table3", "table4", "table5", "inference-ablation")


def add_paper(commands) -> None:
    paper = commands.add_parser(
        "paper",
        help="one of the paper's tables or its ablation figure, beside the paper's numbers",
        description="Run what TABLE still misses (resumable: every finished run is a row "
        "under --out) and write TABLE.md and TABLE.csv with the paper's numbers beside ours. "
        "Tables 1, 3 and 5 share their UCI runs; Table 4 times short runs of its own; Table 2 "
        "and the ablation run the toy problem.",
    )
    paper.add_argument("table", choices=PAPER_TABLES, metavar="TABLE", help=", ".join(PAPER_TABLES))
    paper.add_argument(
        "--budget",
        default="reduced",
        help="reduced (default): 3 seeds, the toy at the demo's size; full: the paper's 5 "
        "seeds and toy size (hours to days on a CPU)",
    )
    paper.add_argument(
        "--preset",
        choices=("default", "paper"),
        default="default",
        help="'default': the package's settings (best validation epoch, patience 20); "
        "'paper': the paper's (last epoch, mean-field q(u) for DS-DGP and DSPP)",
    )
    paper.add_argument(
        "--seeds", type=int_list, help="seeds (default: the budget's, reduced 0,1,2)"
    )
    paper.add_argument(
        "--datasets", help="comma-separated UCI names (default: the table's data sets)"
    )
    paper.add_argument("--data-root", help=DATA_ROOT_HELP)
    paper.add_argument(
        "--sizes", type=int_list, help="table2: the |M| rows (default: 16,32,64,128)"
    )
    paper.add_argument(
        "--models",
        help="UCI tables: comma-separated models of the table to train (default all; the table "
        "shows all)",
    )
    paper.add_argument(
        "--epochs",
        type=int,
        help="Tables 1, 3 and 5: a cap on the UCI runs' epochs (default: the budget's 100); "
        "capped runs are cells and table files of their own (e.g. table5_full_paper_e30)",
    )
    paper.add_argument("--out", default="avdgp-paper", help="output folder")
    paper.add_argument(
        "--render-only", action="store_true", help="write the table from the runs there are"
    )
    paper.add_argument("--quiet", action="store_true", help="no progress output (results only)")
