"""Does the paper reproduce? Every Table 5 cell run under the paper's protocol (``--preset paper
--budget full``: 5 seeds, 100 epochs, the last epoch) set beside the paper's, with a verdict,
and each of the paper's claims judged from seed-paired wins.

A cell is ``reproduced`` when ours and the paper's means differ by at most 2 pooled standard
deviations (``sqrt((s_ours^2 + s_paper^2) / 2)``, ours the sample std over seeds), else
``better`` or ``worse`` (lower is better for NLL, RMSE and CRPS). Only identical data are
judged: elevators and protein; bike is judged but marked ``near`` (our bike drops its two count
columns, which sum to the target); wine (red only) and the kegg sets are ``different data``.

A claim "A beats B on a metric" holds on a data set when A is better on at least 4 of the 5
seeds both ran (the same split and initialisation seed), fails when A wins at most 1 of 5, and
is ``mixed`` in between; with fewer than 5 common seeds it is ``open``.

    python -m avdgp.experiments.paper.reproduction docs/experiments/reproduction

writes ``DIR.md`` (the page beside the folder) from ``DIR/uci/results.csv`` (runs of other
settings versions, presets or epochs never enter; DSPP and SOLVE-GP capped at 30 epochs are
shown apart).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import numpy as np

from avdgp.experiments.bench.results import METRICS
from avdgp.experiments.paper.request import PAPER_DATASETS, TABLE_MODELS, PaperRequest
from avdgp.experiments.paper.table_format import paper_numbers
from avdgp.experiments.paper.tables import uci_values

__all__ = ["CLAIMS", "cell_verdict", "claim_verdict", "render_reproduction"]

#: Data identical to the paper's, near it, or different (not judged).
DATA_KIND = {
    "elevators": "identical",
    "protein": "identical",
    "bike": "near",
    "wine": "different data",
    "keggdirected": "different data",
    "keggundirected": "different data",
}
#: Models allowed a 30-epoch cap (at 100 epochs about 14 of the program's 30 hours).
CAPPED_MODELS = ("dspp", "solve-gp")
CAP = 30
SEEDS = (0, 1, 2, 3, 4)

#: The paper's claims on Table 5's data, in its words: (words, better model, worse model,
#: metrics). The claims of Tables 2 and 4 and the ablation are listed apart (:data:`OPEN`).
CLAIMS = (
    (
        "AVDGP-AR2PP outperforms AVDGP-AR2P in terms of NLL and CRPS",
        "avdgp-ar2pp",
        "avdgp-ar2p",
        ("nll", "crps"),
    ),
    (
        "AVDGP-AR2PP is superior to DSPP, its SVI counterpart, in terms of all metrics",
        "avdgp-ar2pp",
        "dspp",
        METRICS,
    ),
    (
        "AVDGP-AR2P outperforms all competitors in terms of RMSE and CRPS. It also performs "
        "better than the other three methods expect [sic] DSPP in terms of NLL (here: against "
        "DS-DGP)",
        "avdgp-ar2p",
        "dsdgp",
        METRICS,
    ),
    ("IDSGP outperforms DS-DGP in terms of all metrics", "idsgp", "dsdgp", METRICS),
)
OPEN = (
    ("the test error falls as |M| grows (Table 2; our words)", "Table 2 at the paper's size"),
    (
        '*"The results become unstable as the depth of amortization neural networks increases '
        '[...] The problem is eased by using affine transformations as inference functions"*',
        "the inference-network ablation at the paper's size",
    ),
    (
        '*"AVDGP generally runs faster on low-dimensional data while costing more on '
        'high-dimensional data"*',
        "Table 4 on the local sets and the synthetic high-dimensional shapes",
    ),
)


def cell_verdict(
    ours: list[float], paper: tuple[float, float], kind: str
) -> tuple[str, Optional[float]]:
    """``(verdict, difference in pooled stds)`` of one cell.

    :param ours: one score per seed (lower is better).
    :param paper: the paper's ``(mean, std)``.
    :param kind: :data:`DATA_KIND`'s entry for the data set.
    """
    if kind == "different data":
        return "different data", None
    if len(ours) < 2:
        return "open (1 seed)", None
    pooled = float(np.sqrt((np.var(ours, ddof=1) + paper[1] ** 2) / 2))
    difference = float(np.mean(ours)) - paper[0]
    distance = abs(difference) / pooled if pooled > 0 else float("inf")
    verdict = "reproduced" if distance <= 2 else ("better" if difference < 0 else "worse")
    if len(ours) < len(SEEDS):
        verdict += f" ({len(ours)} seeds)"
    return verdict, distance


def claim_verdict(better: dict[int, float], worse: dict[int, float]) -> tuple[str, int, int]:
    """``(verdict, wins, common seeds)`` of "``better`` beats ``worse``" from per-seed scores."""
    common = sorted(set(better) & set(worse))
    wins = sum(better[seed] < worse[seed] for seed in common)
    if len(common) < len(SEEDS):
        return "open", wins, len(common)
    verdict = "holds" if wins >= 4 else ("fails" if wins <= 1 else "mixed")
    return verdict, wins, len(common)


def _values(out: Path) -> dict:
    """``(dataset, model) -> {metric: {seed: value}}``; capped models where no full run is."""
    request = PaperRequest("table5", out, budget="full", preset="paper", render_only=True)
    values = dict(uci_values(request))
    capped = uci_values(PaperRequest("table5", out, budget="full", preset="paper", epochs=CAP))
    for key, runs in capped.items():
        if key[1] in CAPPED_MODELS and key not in values:
            values[key] = runs
    return values


def _stats(runs: dict) -> str:
    scores = list(runs.values())
    if len(scores) == 1:
        return f"{scores[0]:.3f} (1 seed)"
    return f"{np.mean(scores):.3f} ± {np.std(scores, ddof=1):.3f} ({len(scores)})"


def _cell_lines(values: dict, capped: set) -> tuple[list[str], dict]:
    paper = {
        (row["metric"], row["dataset"], row["model"]): (float(row["mean"]), float(row["std"]))
        for row in paper_numbers("table5")
    }
    counts: dict = {}
    lines = []
    for metric in METRICS:
        lines += [f"### Test {metric.upper()}", ""]
        lines += [
            "| data set | model | ours | paper | verdict | distance |",
            "|---|---|---:|---:|---|---:|",
        ]
        for dataset, kind in DATA_KIND.items():
            for model in TABLE_MODELS["table5"]:
                runs = values.get((dataset, model), {}).get(metric)
                theirs = paper.get((metric, PAPER_DATASETS[dataset], model))
                if not runs or theirs is None:
                    continue
                verdict, distance = cell_verdict(list(runs.values()), theirs, kind)
                counts[verdict.split(" (")[0]] = counts.get(verdict.split(" (")[0], 0) + 1
                label = f"{model} ({CAP} epochs)" if (dataset, model) in capped else model
                shown = dataset if kind == "identical" else f"{dataset} ({kind})"
                lines.append(
                    f"| {shown} | {label} | {_stats(runs)} | {theirs[0]:.3f} ± {theirs[1]:.3f} "
                    f"| {verdict} | {'–' if distance is None else f'{distance:.1f}'} |"
                )
        lines.append("")
    return lines, counts


def _claim_lines(values: dict) -> list[str]:
    lines = [
        f'{number}. {better} against {worse}: *"{words}"*'
        for number, (words, better, worse, _) in enumerate(CLAIMS, start=1)
    ]
    lines += [
        f"{number}. {words}: open ({missing} not run yet)"
        for number, (words, missing) in enumerate(OPEN, start=len(CLAIMS) + 1)
    ]
    lines += ["", "| claim | data set | metric | wins | verdict |", "|---|---|---|---:|---|"]
    for number, (_, better, worse, metrics) in enumerate(CLAIMS, start=1):
        for dataset in DATA_KIND:
            for metric in metrics:
                ours = values.get((dataset, better), {}).get(metric)
                theirs = values.get((dataset, worse), {}).get(metric)
                if not ours or not theirs:
                    continue
                verdict, wins, common = claim_verdict(ours, theirs)
                lines.append(
                    f"| {number} | {dataset} | {metric.upper()} | {wins} of {common} | {verdict} |"
                )
    return lines + [""]


def render_reproduction(out: Path) -> Path:
    """Write the page ``<out>.md`` beside the folder ``out`` (``docs/experiments/
    reproduction.md``) from ``out/uci/results.csv``; returns its path."""
    out = Path(out)
    values = _values(out)
    capped = {key for key in values if key[1] in CAPPED_MODELS} - set(
        uci_values(PaperRequest("table5", out, budget="full", preset="paper"))
    )
    cells, counts = _cell_lines(values, capped)
    total = len(values) * len(SEEDS)
    runs = sum(len(runs.get("nll", {})) for runs in values.values())
    said = ", ".join(f"{count} {verdict}" for verdict, count in sorted(counts.items()))
    lines = [
        "# Does the paper reproduce?",
        "",
        "Table 5 under the paper's own protocol: every cell below ran with it",
        "(`--preset paper --budget full`: 5 random 8:1:1 splits, seeds 0-4, Adam 0.005,",
        "batch 100, 100 epochs, the last epoch's weights, Matérn-5/2, hidden widths 16 and 4,",
        "mean-field `q(u)` for DS-DGP and DSPP).",
        "Deviations: DS-DGP trains on S = 1 sample (the paper: 32); DSPP and SOLVE-GP may be",
        f"capped at {CAP} epochs, labelled so. Ours: mean ± sample std (seeds); the paper's:",
        "mean ± std over its 5 splits. How a verdict is reached, and the command that rewrites",
        "this page from `reproduction/uci/results.csv`: `avdgp/experiments/paper/",
        "reproduction.py`;",
        "`tests/application/experiments/test_reproduction.py` rebuilds it from the rows.",
        "",
        "```bash",
        "python -m avdgp.experiments.paper.reproduction docs/experiments/reproduction",
        "```",
        "",
        f"**Status**: {runs} runs in {len(values)} model-data cells ({total} runs when every",
        f"cell has its 5 seeds); per metric cell: {said or 'none yet'}.",
        "",
        "## The paper's claims",
        "",
        "Seed-paired: a claim holds on a data set when the better model wins on at least 4 of",
        "the 5 seeds both ran, fails at 1 or 0, is mixed in between, and is open with fewer than",
        "5 common seeds.",
        "",
        *_claim_lines(values),
        "## Cells",
        "",
        "Distance: |ours - paper| in pooled stds; within 2 is reproduced. Bike is near the",
        "paper's data (two count columns that sum to the target removed); wine (red only) and",
        "the kegg sets are different data and not judged.",
        "",
        *cells,
        "## What differs from the paper, and why",
        "",
        "- **Elevators**: every model is worse than the paper's alike (this page and the",
        "  reduced runs of [the paper page](paper.md)); the authors' own code on our elevators",
        "  gave RMSE 0.357 and NLL 0.390 against the paper's 0.29, so the offset lies in the",
        "  data or its preparation, not in our implementation.",
        "- **Wine**: ours is the 1,599-row red set; the paper's has 6,497 rows (red and white).",
        "- **KEGG**: our copies hold duplicate rows, so a random split puts copies of test rows",
        "  in training.",
        "- **Bike**: the casual and registered counts sum to the target and are removed.",
        "",
    ]
    path = out.parent / f"{out.name}.md"
    path.write_text("\n".join(lines).rstrip() + "\n")
    return path


if __name__ == "__main__":
    print(render_reproduction(Path(sys.argv[1] if len(sys.argv) > 1 else ".")))
