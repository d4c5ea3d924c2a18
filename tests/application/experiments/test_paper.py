"""``avdgp paper``: the paper's numbers as data, resumable runs, tables rendered beside the
paper's (from the CSV files alone), and (slow) every table end to end on a tiny budget."""

from __future__ import annotations

import csv
import functools
import gzip
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from helpers import REPO_ROOT, run_cli

from avdgp.experiments.bench import run as bench_run
from avdgp.experiments.bench.results import append_row
from avdgp.experiments.bench.run import run_version
from avdgp.experiments.demo.run import DemoSettings
from avdgp.experiments.paper import request as paper
from avdgp.experiments.paper import table_format, toy_grid
from avdgp.experiments.paper.run import run_paper

TINY = paper.Budget(
    "tiny",
    "a test's: 1 seed, 2 epochs, a toy of 300 rows",
    (0,),
    2,
    2,
    DemoSettings(num_rows=300, epochs=1, num_sigma_points=4, curve_points=1),
)


@pytest.fixture
def tiny_budget(monkeypatch):
    monkeypatch.setitem(paper.BUDGETS, "tiny", TINY)
    return "tiny"


def _write_uci(folder: Path, rng, rows: int = 120, dim: int = 3) -> None:
    folder.mkdir(parents=True)
    x = rng.uniform(-2.0, 2.0, (rows, dim))
    y = np.sin(x[:, 0]) + 0.1 * rng.standard_normal(rows)
    with gzip.open(folder / "data.csv.gz", "wt") as handle:
        np.savetxt(handle, np.column_stack([x, y]), delimiter=",")


# ------------------------------------------------------------------------- the paper's numbers
def test_the_papers_numbers_are_read_from_its_tables():
    table5 = table_format.paper_numbers("table5")
    assert len(table5) == 300  # 3 metrics x (8 sets x 8 models + 6 sets x 6 models)
    row = next(
        r
        for r in table5
        if (r["metric"], r["dataset"], r["model"]) == ("nll", "Bike", "avdgp-ar2pp")
    )
    assert (float(row["mean"]), float(row["std"]), row["bold"]) == (-0.742, 0.024, "True")
    ranks = {
        (r["metric"], r["model"]): float(r["rank_mean"])
        for r in table_format.paper_numbers("table3")
    }
    assert ranks["nll", "avdgp-ar2pp"] == 1.27 and ranks["rmse", "solve-gp"] == 5.19
    table2 = {
        (int(r["total_inducing"]), int(r["layers"])): float(r["error_mean"])
        for r in table_format.paper_numbers("table2")
    }
    assert len(table2) == 16 and table2[32, 4] == 2.59 and table2[128, 1] == 6.04
    table4 = table_format.paper_numbers("table4")
    assert len(table4) == 42 and {r["model"] for r in table4} == {"dsdgp", "dspp", "avdgp-ar2p"}
    assert len(table_format.paper_numbers("table1")) == 9


def test_the_tables_of_the_paper_numbers_match_its_tex_source(tmp_path):
    """The package's CSV files are what the extraction script reads from the paper today."""
    tex = REPO_ROOT.parent / "shared" / "paper" / "amortized-vi-for-deep-gps.tex"
    if not tex.exists():
        pytest.skip(f"the paper's source is not beside the project ({tex})")
    import runpy

    script = REPO_ROOT / "benchmarks" / "paper_numbers_from_tex.py"
    namespace = runpy.run_path(str(script))
    namespace["main"]([str(tex), str(tmp_path)])
    packaged = Path(table_format.__file__).parent / "numbers"
    for name in ("table1", "table2", "table3", "table4", "table5"):
        assert (tmp_path / f"{name}.csv").read_text() == (packaged / f"{name}.csv").read_text()


# ------------------------------------------------------------------------- requests
def test_requests_pick_the_tables_data_sets_models_and_seeds(tmp_path):
    table5 = paper.PaperRequest("table5", tmp_path)
    assert table5.uci_datasets() == tuple(paper.PAPER_DATASETS)
    assert "avdgp-ar1" in table5.uci_models("wine")  # a small set: AR1 and AR2 as in the paper
    assert "avdgp-ar1" in table5.uci_models("protein")  # the paper's Table 5 has it there
    assert "avdgp-ar1" not in table5.uci_models("keggdirected")
    assert paper.PaperRequest("table1", tmp_path).uci_datasets() == paper.SMALL_DATASETS
    assert paper.PaperRequest("table1", tmp_path, seeds=[4]).run_seeds == (4,)
    assert paper.PaperRequest("table2", tmp_path, budget="full").toy_settings.num_rows == 80000
    with pytest.raises(ValueError, match="table: expected one of"):
        paper.PaperRequest("table6", tmp_path)
    with pytest.raises(ValueError, match="budget"):
        paper.PaperRequest("table1", tmp_path, budget="huge")
    table2 = paper.PaperRequest("table2", tmp_path, sizes=[32], seeds=[0])
    assert [(run.name, sum(run.spec.resolved_inducing())) for run in paper.toy_runs(table2)] == [
        ("SGP-AVI", 32),
        ("AVDGP-2L", 32),
        ("AVDGP-3L", 32),
        ("AVDGP-4L", 32),
    ]
    with pytest.raises(ValueError, match=r"sizes: expected values of \[16, 32, 64, 128\]"):
        paper.PaperRequest("table2", tmp_path, sizes=[48])
    baselines = paper.PaperRequest("table5", tmp_path, models=["idsgp", "avdgp-ar1"])
    assert baselines.trained_models("wine") == ("idsgp", "avdgp-ar1")
    assert baselines.trained_models("bike") == ("idsgp", "avdgp-ar1")
    assert baselines.trained_models("keggdirected") == ("idsgp",)  # no AR1 on the large sets
    assert baselines.uci_models("wine") == paper.TABLE_MODELS["table5"]  # the table shows all
    assert table5.trained_models("wine") == table5.uci_models("wine")
    for table, models in (("table1", ["dspp"]), ("table2", ["svgp"]), ("table3", [])):
        with pytest.raises(ValueError, match=f"models: expected some of .* for {table}"):
            paper.PaperRequest(table, tmp_path, models=models)


def test_toy_cells_split_the_inducing_points_like_the_paper():
    settings = DemoSettings()
    cells = {layers: toy_grid.table2_run(64, layers, 0, settings) for layers in (1, 2, 3, 4)}
    assert cells[1].spec.model == "sgp-avi" and cells[1].spec.resolved_inducing() == [64]
    assert cells[2].spec.resolved_inducing() == [32, 32]
    assert cells[3].spec.resolved_inducing() == [32, 16, 16]
    assert cells[4].spec.resolved_inducing() == [32, 16, 8, 8]
    assert cells[4].spec.resolved_dims() == [2, 2, 2, 1]
    with pytest.raises(ValueError, match="does not split"):
        toy_grid.table2_run(18, 4, 0, settings)
    mlp = toy_grid.ablation_run("mlp", 3, 1, settings)
    assert (mlp.name, mlp.spec.model, mlp.spec.extra) == ("MLP-3", "idsgp", {"hidden_layers": 3})
    assert toy_grid.ablation_run("affine", 2, 1, settings).spec.model == "sgp-avi"


# ------------------------------------------------------------------------- rendering
def _uci_row(dataset, model, seed, nll, epochs=100, preset="default", seconds=1.0, table="table3"):
    settings = paper.PaperRequest(table, Path("unused"), preset=preset).bench_settings(dataset)
    return {
        "version": run_version(settings, model),
        "dataset": dataset,
        "model": model,
        "seed": seed,
        "epochs": epochs,
        "status": "ok",
        "n_train": 80,
        "n_val": 10,
        "n_test": 10,
        "dim": 3,
        "nll": nll,
        "rmse": nll / 2,
        "crps": nll / 3,
        "train_seconds_per_epoch": seconds,
        "predict_seconds": seconds / 10,
        "preset": preset,
    }


def test_table3_ranks_and_scores_sit_beside_the_papers(tmp_path):
    results = tmp_path / "uci" / "results.csv"
    results.parent.mkdir()
    models = paper.TABLE_MODELS["table3"]
    for seed in (0, 1, 2):
        for rank, model in enumerate(models):  # solve-gp worst ... avdgp-ar2pp best
            append_row(results, _uci_row("wine", model, seed, 2.0 - 0.1 * rank))
            append_row(results, _uci_row("elevators", model, seed, 1.0 - 0.1 * rank))
    append_row(results, _uci_row("wine", "dsdgp", 3, -9.0))  # a seed not asked for
    append_row(results, _uci_row("wine", "dspp", 0, -9.0, preset="paper"))  # another preset
    request = paper.PaperRequest("table3", tmp_path, datasets=["wine", "elevators", "bike"])
    text = run_paper(replace(request, render_only=True), stream=None).read_text()
    assert "Budget **reduced**" in text and "Preset `default`; seeds 0, 1, 2" in text
    assert "Still missing: bike solve-gp (seeds 0, 1, 2)" in text
    ours = " | ".join(f"{rank}.00 (0.00)" for rank in (6, 5, 4, 3, 2, 1))
    assert f"| NLL | ours | {ours} |" in text
    theirs = "5.63 (0.16) | 4.80 (0.32) | 2.19 (0.18) | 4.09 (0.29) | 3.03 (0.28) | 1.27 (0.18)"
    assert f"| | paper | {theirs} |" in text
    assert "Ranks over the 2 data sets" in text and "(elevators, wine)" in text
    assert "| | paper (Wine) | 1.169 ± 0.020 |" in text
    assert (
        "| wine | ours | 2.000 ± 0.000 | 1.900 ± 0.000 |" in text
    )  # the other preset and seed left out
    rows = list(csv.DictReader((tmp_path / "table3.csv").open()))
    rank = next(r for r in rows if (r["metric"], r["model"]) == ("rank_nll", "avdgp-ar2pp"))
    assert (float(rank["ours_mean"]), float(rank["paper_mean"])) == (1.0, 1.27)


def test_ranks_keep_each_seed_apart_when_a_data_set_lacks_one(tmp_path):
    """Elevators has seeds 1 and 2 only: they are ranked with wine's seeds 1 and 2, not as
    seeds 0 and 1."""
    results = tmp_path / "uci" / "results.csv"
    results.parent.mkdir()
    models = paper.TABLE_MODELS["table1"]  # avdgp-ar1, avdgp-ar2, avdgp-ar2p
    for seed in (0, 1, 2):
        order = models if seed == 0 else models[::-1]  # seed 0: AR1 first; 1, 2: AR2P first
        for rank, model in enumerate(order):
            append_row(results, _uci_row("wine", model, seed, 1.0 + rank))
            if seed > 0:
                append_row(results, _uci_row("elevators", model, seed, 1.0 + rank))
    request = paper.PaperRequest(
        "table1", tmp_path, datasets=["wine", "elevators"], render_only=True
    )
    text = run_paper(request, stream=None).read_text()
    # AR1 ranks 1, 3, 3 over seeds 0, 1, 2: mean 2.33, std 0.94; AR2P 3, 1, 1
    assert "| NLL | ours | 2.33 (0.94) | 2.00 (0.00) | 1.67 (0.94) |" in text
    assert "Ranks over the 2 data sets" in text


def test_table4_compares_ratios_to_dsdgp(tmp_path):
    results = tmp_path / "timing" / "results.csv"
    results.parent.mkdir()
    for model, seconds in (("dsdgp", 4.0), ("dspp", 8.0), ("avdgp-ar2p", 1.0)):
        row = _uci_row("elevators", model, 0, 0.5, epochs=3, seconds=seconds, table="table4")
        append_row(results, row)
    request = paper.PaperRequest(
        "table4", tmp_path, datasets=["elevators"], seeds=[0], render_only=True
    )
    text = run_paper(request, stream=None).read_text()
    assert "| elevators | ours | 4.00 (1 run) | 8.00 (1 run) | 1.00 (1 run) |" in text
    assert text.count(" 0.25 |") == 1  # ours: AVDGP / DS-DGP
    assert "| | paper (Elevator, GPU) | 6.91 | 8.71 | 6.40 | 3.59 | 3.67 | 3.37 | 0.93 |" in text


def test_toy_tables_render_from_their_rows(tmp_path):
    settings = paper.BUDGETS["reduced"].toy
    path = tmp_path / "toy" / "toy.csv"
    (tmp_path / "toy" / "inducing").mkdir(parents=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=toy_grid.COLUMNS)
        writer.writeheader()
        for seed, error in ((0, 0.05), (1, 0.07)):
            run = toy_grid.table2_run(32, 3, seed, settings)
            writer.writerow(
                {**run.identity(settings), "error_rate": error, "nll": 0.2, "seconds": 9}
            )
        for name, errors in (("affine", (0.1, 0.12)), ("MLP-4", (0.1, 0.4))):
            for seed, error in enumerate(errors):
                kind, depth = ("affine", 2) if name == "affine" else ("mlp", 4)
                run = toy_grid.ablation_run(kind, depth, seed, settings)
                writer.writerow(
                    {**run.identity(settings), "error_rate": error, "nll": 0.2, "seconds": 9}
                )
                np.save(
                    toy_grid.inducing_file(tmp_path / "toy", run, settings), np.zeros((64, 8, 2))
                )
    table2 = run_paper(
        paper.PaperRequest("table2", tmp_path, seeds=[0, 1], render_only=True), stream=None
    )
    text = table2.read_text()
    row = "| 32 | – / 7.63 ± 1.43 | – / 4.40 ± 1.25 | 6.00 ± 1.00 (2) / 4.14 ± 0.68 | "
    assert row + "– / 2.59 ± 0.27 |" in text
    assert re.search(r"Still missing 30 of 32 runs: SGP-AVI \|M\| 16 \(seeds 0, 1\)", text)
    ablation = run_paper(
        paper.PaperRequest("inference-ablation", tmp_path, seeds=[0, 1], render_only=True),
        stream=None,
    ).read_text()
    assert "| MLP-4 | 2 | 10.00, 40.00 | 25.00 ± 15.00 |" in ablation
    assert "| MLP-1 | 0 | – | – |" in ablation
    assert (tmp_path / "inference_ablation.png").stat().st_size > 0
    assert (tmp_path / "inference_ablation_inducing.png").stat().st_size > 0


def test_other_budgets_and_presets_render_to_their_own_files(tmp_path):
    """A full-budget or paper-preset render must not overwrite the reduced default table."""
    written = {}
    for budget, preset in (("reduced", "default"), ("full", "default"), ("reduced", "paper")):
        request = paper.PaperRequest(
            "table5", tmp_path, budget=budget, preset=preset, datasets=["wine"], render_only=True
        )
        written[budget, preset] = run_paper(request, stream=None)
    assert [path.name for path in written.values()] == [
        "table5.md",
        "table5_full.md",
        "table5_paper.md",
    ]
    assert "Budget **reduced**" in written["reduced", "default"].read_text()
    assert "Budget **full**" in written["full", "default"].read_text()
    assert "Preset `paper`" in written["reduced", "paper"].read_text()
    assert (tmp_path / "table5_full.csv").exists() and (tmp_path / "table5_paper.csv").exists()


# ------------------------------------------------------------------------- running
@pytest.mark.slow
def test_a_uci_table_runs_resumes_and_renders_without_training(tmp_path, rng, tiny_budget, capsys):
    """One model (``--models``), a rerun and ``--render-only``; the test below runs every
    table with all its models."""
    root = tmp_path / "uci_data"
    _write_uci(root / "tinyset", rng)
    args = [
        "paper",
        "table1",
        "--budget",
        tiny_budget,
        "--datasets",
        "tinyset",
        "--data-root",
        root,
        "--out",
        tmp_path / "out",
    ]
    status, out, err = run_cli(capsys, args + ["--models", "avdgp-ar2p"])
    assert status == 0, err
    rows = list(csv.DictReader((tmp_path / "out" / "uci" / "results.csv").open()))
    assert [(r["model"], r["status"], r["epochs"]) for r in rows] == [("avdgp-ar2p", "ok", "2")]
    assert "; tinyset avdgp-ar1 (seeds 0); tinyset avdgp-ar2 (seeds 0)." in out
    assert "| | paper | 2.23 (0.49) | 2.03 (0.51) | 1.75 (0.43) |" in out
    table = (tmp_path / "out" / "table1_tiny.md").read_text()
    status, _, err = run_cli(capsys, args + ["--models", "avdgp-ar2p"])  # a rerun trains nothing
    assert status == 0 and err.count("done, skipped") == 1
    assert len(list(csv.DictReader((tmp_path / "out" / "uci" / "results.csv").open()))) == 1
    (tmp_path / "out" / "table1_tiny.md").unlink()
    status, out, _ = run_cli(capsys, args + ["--render-only"])
    assert status == 0 and (tmp_path / "out" / "table1_tiny.md").read_text() == table


def test_paper_command_rejects_bad_input(capsys, tmp_path):
    status, _, err = run_cli(capsys, ["paper", "table9", "--out", tmp_path])
    assert status == 2 and "invalid choice" in err
    status, _, err = run_cli(capsys, ["paper", "table1", "--budget", "huge", "--out", tmp_path])
    assert status == 2 and "budget: expected one of ['full', 'reduced']" in err
    status, _, err = run_cli(capsys, ["paper", "table1", "--datasets", ",", "--out", tmp_path])
    assert status == 2 and "--datasets is empty" in err
    status, _, err = run_cli(capsys, ["paper", "table1", "--models", "svgp", "--out", tmp_path])
    assert status == 2 and "models: expected some of ['avdgp-ar1', 'avdgp-ar2'" in err


@pytest.mark.slow
@pytest.mark.parametrize(
    "table", ["table1", "table2", "table3", "table4", "table5", "inference-ablation"]
)
def test_every_table_runs_end_to_end_on_a_tiny_budget(table, tmp_path, rng, tiny_budget, capsys):
    """Each command trains its runs (here: one seed, a couple of epochs, tiny data), writes
    its Markdown and CSV, and the rerun only renders."""
    root = tmp_path / "uci_data"
    _write_uci(root / "tinyset", rng, rows=200)
    args = [
        "paper",
        table,
        "--budget",
        tiny_budget,
        "--out",
        tmp_path / "out",
        "--datasets",
        "tinyset",
        "--data-root",
        root,
    ]
    status, out, err = run_cli(capsys, args)
    assert status == 0, err
    missing = out.split("Still missing", 1)[-1].split("\n", 1)[0]
    assert "tinyset" not in missing  # the table's own sets are missing, not the slice's
    stem = table.replace("-", "_") + "_tiny"
    assert (tmp_path / "out" / f"{stem}.csv").stat().st_size > 0
    status, _, err = run_cli(capsys, args)
    assert status == 0 and "done, skipped" in err and "epoch 1/" not in err


# ------------------------------------------------------------------------- cells and slices
def test_rows_of_drifted_settings_or_another_cap_never_share_a_cell(tmp_path, monkeypatch):
    """A cell takes rows of the request's epochs and of the version its settings give now: a
    legacy row, a capped row and a row whose preset has since changed stay out."""
    results = tmp_path / "uci" / "results.csv"
    results.parent.mkdir()
    row = functools.partial(_uci_row, "wine", "avdgp-ar2p", preset="paper", table="table5")
    append_row(results, row(0, 1.0))
    append_row(results, {**row(1, -5.0), "version": ""})  # written before the column existed
    append_row(results, row(2, -7.0, epochs=30))
    request = paper.PaperRequest(
        "table5", tmp_path, budget="full", preset="paper", seeds=[0, 1, 2], render_only=True
    )
    cells = "| wine | ours | – | – | – | – | – | – | {} | – |"
    full = run_paper(request, stream=None)
    assert full.name == "table5_full_paper.md"
    assert cells.format("**1.000 (1 run)**") in full.read_text()
    capped = run_paper(replace(request, epochs=30), stream=None)
    assert capped.name == "table5_full_paper_e30.md"
    assert cells.format("**-7.000 (1 run)**") in capped.read_text()
    assert "--epochs 30 --render-only" in capped.read_text()
    assert cells.format("**1.000 (1 run)**") in full.read_text()  # not overwritten
    monkeypatch.setattr(bench_run, "layer_options", lambda preset: {"inducing_init": "global"})
    drifted = run_paper(request, stream=None).read_text()
    assert cells.format("–") in drifted and "wine avdgp-ar2p (seeds 0, 1, 2)" in drifted
    with pytest.raises(ValueError, match="epochs: expected a cap from 1 to the full budget's 100"):
        paper.PaperRequest("table5", tmp_path, budget="full", epochs=101)


def test_a_slice_renders_every_row_of_the_table(tmp_path):
    """``--datasets wine`` trains wine only, but the table it writes keeps elevators' rows."""
    results = tmp_path / "uci" / "results.csv"
    results.parent.mkdir()
    append_row(results, _uci_row("elevators", "dsdgp", 0, 0.25, table="table5"))
    request = paper.PaperRequest("table5", tmp_path, datasets=["wine"], seeds=[0])
    assert request.uci_datasets() == ("wine",)
    text = run_paper(replace(request, render_only=True), stream=None).read_text()
    assert "| elevators | ours | – | **0.250 (1 run)** |" in text
    assert "--datasets" not in text  # the command shown rewrites the whole table


def test_a_failed_run_is_retried_and_an_ok_one_is_not(tmp_path, rng, monkeypatch):
    root = tmp_path / "data"
    _write_uci(root / "tinyset", rng)
    settings = bench_run.BenchSettings(
        datasets=("tinyset",), models=("avdgp-ar2p",), seeds=(0,), epochs=2, data_root=root
    )
    outcomes = iter(["failed: diverged", "ok"])

    def fake_run(settings, label, seed, dataset, *rest):
        row = _uci_row(dataset, label, seed, 1.0, epochs=2)
        return {**row, "status": next(outcomes), "version": "v"}

    monkeypatch.setattr(bench_run, "_run_one", fake_run)
    monkeypatch.setattr(bench_run, "run_version", lambda settings, label: "v")
    monkeypatch.setattr(bench_run, "summarise", lambda *args, **kwargs: None)
    for _ in range(3):  # failed, retried ok, then skipped
        bench_run.run_bench(settings, tmp_path / "out", stream=None)
    rows = list(csv.DictReader((tmp_path / "out" / "results.csv").open()))
    assert [r["status"] for r in rows] == ["failed: diverged", "ok"]


def test_a_stopped_run_resumes_from_its_own_run_folder(tmp_path, rng, monkeypatch):
    """Each run trains in a run folder of its own under ``running/`` (``--save``'s backup and
    resume, tested in ``test_resume.py``): the same folder after a stop, gone once its row is
    written."""
    root = tmp_path / "data"
    _write_uci(root / "tinyset", rng)
    settings = bench_run.BenchSettings(
        datasets=("tinyset",), models=("avdgp-ar2p",), seeds=(0,), epochs=2, data_root=root
    )
    folders = []

    def fake_run(data, spec, config, *, save_dir, **kwargs):
        folders.append(save_dir)
        save_dir.mkdir(parents=True, exist_ok=True)
        if len(folders) == 1:
            raise KeyboardInterrupt  # stopped midway: the folder stays for the rerun
        return "record"

    monkeypatch.setattr(bench_run, "run", fake_run)
    monkeypatch.setattr(
        bench_run, "_row", lambda record, *args: _uci_row("tinyset", "avdgp-ar2p", 0, 1.0)
    )
    monkeypatch.setattr(bench_run, "append_curve", lambda *args: None)
    monkeypatch.setattr(bench_run, "summarise", lambda *args, **kwargs: None)
    with pytest.raises(KeyboardInterrupt):
        bench_run.run_bench(settings, tmp_path / "out", stream=None)
    assert folders[0].is_dir() and folders[0].parent == tmp_path / "out" / "running"
    version = bench_run.run_version(settings, "avdgp-ar2p")
    assert folders[0].name == f"tinyset-avdgp-ar2p-seed0-e2-default-{version}"
    bench_run.run_bench(settings, tmp_path / "out", stream=None)
    assert folders[1] == folders[0] and not folders[0].exists()


def test_avdgp_bench_drops_bikes_target_counts_by_default(tmp_path, rng):
    """Bike's casual and registered counts (inputs 16 and 17) sum to its target: every bench,
    not only ``avdgp paper``, removes them unless told otherwise."""
    _write_uci(tmp_path / "bike", rng, rows=30, dim=17)
    settings = bench_run.BenchSettings(datasets=("bike",), data_root=tmp_path)
    dataset = bench_run._load("bike", tmp_path, None, settings.drop_features["bike"])
    assert dataset.inputs.shape == (30, 15)
    assert paper.PaperRequest("table5", tmp_path).bench_settings("bike").drop_features == {
        "bike": (15, 16)
    }
    kept = bench_run.BenchSettings(drop_features={}).drop_features.get("bike", ())
    assert bench_run._load("bike", tmp_path, None, kept).inputs.shape == (30, 17)


def test_table4_times_synthetic_data_of_the_papers_high_dimensional_shapes(tmp_path):
    """The paper says AVDGP costs more than DS-DGP at high D; we have none of its
    high-dimensional sets, so Table 4 times synthetic data of their shapes."""
    assert set(paper.SYNTHETIC_TABLE4) == set(bench_run.SYNTHETIC_SHAPES)
    table4 = paper.PaperRequest("table4", tmp_path)
    assert table4.uci_datasets()[-3:] == ("ctslice-shape", "wec100-shape", "conductor-shape")
    assert "ctslice-shape" not in paper.PaperRequest("table5", tmp_path).uci_datasets()
    wec = bench_run.synthetic_dataset("wec100-shape")
    assert wec.inputs.shape == (9595, 200) and wec.targets.shape == (9595,)
    assert np.array_equal(wec.inputs, bench_run._load("wec100-shape", None, None).inputs)
    results = tmp_path / "timing" / "results.csv"
    results.parent.mkdir()
    for model, seconds in (("dsdgp", 4.0), ("dspp", 8.0), ("avdgp-ar2p", 6.0)):
        row = _uci_row("ctslice-shape", model, 0, 0.5, epochs=3, seconds=seconds, table="table4")
        append_row(results, row)
    request = paper.PaperRequest("table4", tmp_path, seeds=[0], render_only=True)
    text = run_paper(request, stream=None).read_text()
    assert "| ctslice-shape | ours | 4.00 (1 run) | 8.00 (1 run) | 6.00 (1 run) |" in text
    assert " 1.50 |" in text  # ours: AVDGP / DS-DGP
    assert "| | paper (CTSlice, GPU) | 27.19 |" in text
