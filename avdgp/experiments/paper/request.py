"""What ``avdgp paper`` is asked for: the tables, datasets, models, budgets and seeds of the
AVDGP paper's experiments (:class:`PaperRequest`), and the toy runs a table needs.

One folder holds everything, so the tables share their runs and a rerun trains only what is
missing (every finished run is a row at once)::

    DIR/uci/results.csv      accuracy runs of Tables 1, 3 and 5 (``avdgp bench``'s files)
    DIR/timing/results.csv   Table 4's seconds per epoch (short runs of their own)
    DIR/toy/toy.csv          Table 2 and the inference-function ablation
    DIR/<table>.md, .csv     what a command prints, with the paper's numbers beside ours

``--render-only`` rewrites a table from the CSV files without training.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional, Sequence

from avdgp.experiments.bench.run import BenchSettings
from avdgp.experiments.demo.run import FULL, REDUCED, DemoSettings
from avdgp.experiments.paper.toy_grid import ABLATION_DEPTHS, ablation_run, table2_run

__all__ = [
    "BUDGETS",
    "Budget",
    "PAPER_DATASETS",
    "PaperRequest",
    "SMALL_DATASETS",
    "TABLES",
    "TABLE_MODELS",
    "TOY_SIZES",
    "toy_runs",
]

TABLES = ("table1", "table2", "table3", "table4", "table5", "inference-ablation")

#: Our data sets that the paper also uses, with its names (the others are not shared offline).
PAPER_DATASETS = {
    "wine": "Wine",
    "elevators": "Elevator",
    "bike": "Bike",
    "protein": "Protein",
    "keggdirected": "KeggD",
    "keggundirected": "KeggU",
}
#: Table 4's high-dimensional sets, as synthetic data of their shapes (timing only).
SYNTHETIC_TABLE4 = {
    "ctslice-shape": "CTSlice",
    "wec100-shape": "WEC100",
    "conductor-shape": "Conductor",
}
#: The 8 smallest shared sets, in place of the paper's 8 smallest (Table 1, AR1 and AR2).
SMALL_DATASETS = (
    "energy",
    "concrete",
    "wine",
    "parkinsons",
    "pumadyn32nm",
    "pol",
    "elevators",
    "bike",
)

#: Table 2's rows: ``|M|``, the inducing points summed over layers.
TOY_SIZES = (16, 32, 64, 128)

TABLE_MODELS = {
    "table1": ("avdgp-ar1", "avdgp-ar2", "avdgp-ar2p"),
    "table3": ("solve-gp", "dsdgp", "dspp", "idsgp", "avdgp-ar2p", "avdgp-ar2pp"),
    "table4": ("dsdgp", "dspp", "avdgp-ar2p"),
    "table5": (
        "solve-gp",
        "dsdgp",
        "dspp",
        "idsgp",
        "avdgp-ar1",
        "avdgp-ar2",
        "avdgp-ar2p",
        "avdgp-ar2pp",
    ),
}


@dataclass(frozen=True)
class Budget:
    """How much a table costs.

    :param name: ``"full"`` or ``"reduced"``.
    :param description: the protocol in words, printed with every table.
    :param seeds: the splits and initialisations (the paper: 5).
    :param epochs: the UCI runs' epochs (with the default preset, the most: they stop 20
        epochs after the best validation NLL).
    :param timing_epochs: epochs of Table 4's runs (the first is not timed).
    :param toy: the toy problem's size and length.
    """

    name: str
    description: str
    seeds: tuple[int, ...]
    epochs: int
    timing_epochs: int
    toy: DemoSettings


BUDGETS = {
    "full": Budget(
        "full",
        "the paper's size: 5 seeds (0-4), 100 epochs on the UCI sets; the toy problem with "
        "40000 training points, 100 epochs (40000 steps) and S = 32; Table 4 from 10 epochs",
        (0, 1, 2, 3, 4),
        100,
        10,
        FULL,
    ),
    "reduced": Budget(
        "reduced",
        "3 seeds (0-2), at most 100 epochs on the UCI sets; the toy problem at the demo's "
        "size: 6000 training points, 40 epochs (2400 steps), S = 16; Table 4 from 3 epochs",
        (0, 1, 2),
        100,
        3,
        REDUCED,
    ),
}


@dataclass(frozen=True)
class PaperRequest:
    """One ``avdgp paper`` command.

    :param table: one of :data:`TABLES`.
    :param out: the folder of all runs and tables.
    :param budget: ``"full"`` or ``"reduced"`` (:data:`BUDGETS`).
    :param preset: ``"default"`` (the package's: global inducing-point start, cosine decay,
        best validation epoch with patience 20) or ``"paper"`` (its settings, the last epoch;
        mean-field ``q(u)`` for DS-DGP and DSPP).
    :param seeds: instead of the budget's.
    :param datasets: instead of the table's (UCI tables).
    :param data_root: folder of the UCI sets (default ``$AVDGP_DATA_ROOT`` or
        ``../shared/data/uci``).
    :param sizes: Table 2's rows to run, ``|M|`` of :data:`TOY_SIZES` (default all).
    :param models: of a UCI table's models, the ones to train (default all); the table still
        shows all of them, so the cheap ones can run first.
    :param render_only: write the table from the runs there are; train nothing.
    :param epochs: a cap on the UCI runs' epochs below the budget's (e.g. 30 for the costly
        DSPP and SOLVE-GP); capped runs are their own cells and their table its own files
        (:func:`~avdgp.experiments.paper.table_format.output_stem`), never mixed with full ones.
    """

    table: str
    out: Path
    budget: str = "reduced"
    preset: str = "default"
    seeds: Optional[Sequence[int]] = None
    datasets: Optional[Sequence[str]] = None
    data_root: Optional[str] = None
    sizes: Optional[Sequence[int]] = None
    models: Optional[Sequence[str]] = None
    render_only: bool = False
    epochs: Optional[int] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "out", Path(self.out))
        if self.table not in TABLES:
            raise ValueError(f"table: expected one of {list(TABLES)}, got {self.table!r}")
        if self.budget not in BUDGETS:
            raise ValueError(f"budget: expected one of {sorted(BUDGETS)}, got {self.budget!r}")
        if self.preset not in ("default", "paper"):
            raise ValueError(f"preset: expected 'default' or 'paper', got {self.preset!r}")
        if self.epochs is not None and not 0 < self.epochs <= self.protocol.epochs:
            raise ValueError(
                f"epochs: expected a cap from 1 to the {self.budget} budget's "
                f"{self.protocol.epochs}, got {self.epochs}"
            )
        unknown = sorted(set(self.sizes or ()) - set(TOY_SIZES))
        if unknown:
            raise ValueError(f"sizes: expected values of {list(TOY_SIZES)}, got {unknown}")
        if self.models is not None:
            known = TABLE_MODELS.get(self.table, ())
            unknown = [model for model in self.models if model not in known]
            if not known or unknown or not self.models:
                raise ValueError(
                    f"models: expected some of {list(known)} for {self.table}, got "
                    f"{list(self.models)}"
                )

    @property
    def protocol(self) -> Budget:
        return BUDGETS[self.budget]

    @property
    def run_seeds(self) -> tuple[int, ...]:
        return tuple(self.seeds) if self.seeds else self.protocol.seeds

    @property
    def uci_epochs(self) -> int:
        """Epochs of the UCI runs of Tables 1, 3 and 5: the cap, else the budget's."""
        return self.epochs or self.protocol.epochs

    @property
    def capped(self) -> bool:
        return self.epochs is not None and self.epochs != self.protocol.epochs

    @property
    def toy_settings(self) -> DemoSettings:
        return replace(self.protocol.toy, preset=self.preset)

    @property
    def toy_sizes(self) -> tuple[int, ...]:
        """Table 2's ``|M|`` rows to run and show."""
        return tuple(sorted(set(self.sizes))) if self.sizes else TOY_SIZES

    def uci_datasets(self) -> tuple[str, ...]:
        """The data sets of a UCI table to run (Table 1: the small ones; else those the paper
        has), or ``datasets`` when a slice names them."""
        if self.datasets:
            return tuple(self.datasets)
        return self.table_datasets()

    def table_datasets(self) -> tuple[str, ...]:
        """The data sets a UCI table shows, whatever slice ran: the table's own, then any
        other that ``datasets`` named."""
        own = SMALL_DATASETS if self.table == "table1" else tuple(PAPER_DATASETS)
        if self.table == "table4":  # the paper: AVDGP is slower at high D; test it
            own += tuple(SYNTHETIC_TABLE4)
        return tuple(dict.fromkeys(own + tuple(self.datasets or ())))

    def uci_models(self, dataset: str) -> tuple[str, ...]:
        """Table 5 runs AR1 and AR2 on the small sets and on protein (the paper's Table 5
        has them there too)."""
        models = TABLE_MODELS[self.table]
        if self.table == "table5" and dataset not in SMALL_DATASETS + ("protein",):
            models = tuple(m for m in models if m not in ("avdgp-ar1", "avdgp-ar2"))
        return models

    @property
    def uci_folder(self) -> str:
        """``timing`` for Table 4's short runs, else ``uci``."""
        return "timing" if self.table == "table4" else "uci"

    def bench_settings(self, dataset: str) -> BenchSettings:
        """What ``avdgp bench`` runs for ``dataset``; its :func:`~avdgp.experiments.bench.run.
        run_version` is the version the table's rows must carry."""
        timing = self.table == "table4"
        training: dict = {"steps_per_execution": 10}
        if timing:
            training["restore_best"] = False  # every epoch trains; no validation scoring
        return BenchSettings(
            datasets=(dataset,),
            models=self.trained_models(dataset),
            seeds=self.run_seeds,
            epochs=self.protocol.timing_epochs if timing else self.uci_epochs,
            data_root=self.data_root,
            preset=self.preset,
            training=training,
        )

    def trained_models(self, dataset: str) -> tuple[str, ...]:
        """Of :meth:`uci_models`, those ``models`` asks to train (default all)."""
        models = self.uci_models(dataset)
        return models if self.models is None else tuple(m for m in models if m in self.models)


def toy_runs(request: PaperRequest) -> list:
    """The toy runs of Table 2 or the ablation under the request's budget and seeds."""
    settings = request.toy_settings
    if request.table == "table2":
        return [
            table2_run(total, layers, seed, settings)
            for seed in request.run_seeds
            for total in request.toy_sizes
            for layers in (1, 2, 3, 4)
        ]
    return [
        run
        for seed in request.run_seeds
        for run in (
            [ablation_run("affine", 2, seed, settings)]
            + [ablation_run("mlp", depth, seed, settings) for depth in ABLATION_DEPTHS]
        )
    ]
