"""How the training time of AVDGP-AR2P grows with N, M, S and the number of layers.

One sweep at a time changes one quantity of the paper's 3-layer AVDGP-AR2P (dims 16/4/1,
M 8/4/4, S 32, batch 100, float64, no XLA) on the synthetic regression data of
``benchmarks/speed.py`` (8 inputs):

* ``N``: rows of the training set; a full epoch is timed (the second, after tracing);
* ``M``: inducing points of every layer (the same value for all layers);
* ``S``: sigma points;
* ``layers``: GP layers (widths 16, then 4s, then 1);

for ``M``, ``S`` and ``layers`` the second pass of ``--steps`` minibatches is timed and given
as seconds per epoch of 10,000 rows. All points run in one process, one after the other.
Writes ``scaling.json`` and a 2x2 figure ``scaling.png``.

    python benchmarks/scaling.py --out benchmarks/results/scaling
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from speed import synthetic  # noqa: E402  (benchmarks/ is not a package)

SWEEPS = {
    "N": [2500, 5000, 10000, 20000, 40000],
    "M": [2, 4, 8, 16, 32],
    "S": [4, 8, 16, 32, 64],
    "layers": [1, 2, 3, 4, 5],
}
DEFAULTS = {"N": 10000, "M": None, "S": 32, "layers": 3}
EPOCH_ROWS = 10000


def spec_for(sweep: str, value: int):
    """The :class:`ModelSpec` of one point: the paper's model with one quantity changed."""
    from avdgp.zoo import ModelSpec

    settings = dict(DEFAULTS, **{sweep: value})
    layers = settings["layers"]
    inducing = None if settings["M"] is None else [settings["M"]] * layers
    hidden = None if layers != 1 else []
    return ModelSpec(
        model="avdgp",
        rule="ar2p",
        num_layers=layers,
        hidden_dims=hidden,
        num_inducing=inducing,
        num_points=settings["S"],
        seed=0,
    )


def time_point(sweep: str, value: int, x, y, steps: int, batch_size: int) -> dict:
    """Train one point twice over its minibatches; time the second pass."""
    from gpflow.keras import tf_keras

    from avdgp.data.batching import epoch_shuffled_batches
    from avdgp.training import EpochProgress
    from avdgp.zoo import build_model

    rows = value if sweep == "N" else steps * batch_size
    x, y = x[:rows], y[:rows]
    spec = spec_for(sweep, value)
    tf_keras.utils.set_random_seed(0)
    built = build_model(spec, x.shape[1], len(x), inputs=x)
    optimizer = tf_keras.optimizers.Adam(0.005)
    optimizer.build(built.model.trainable_variables)
    built.model.compile(optimizer, loss=built.loss)
    data = epoch_shuffled_batches(
        x,
        y,
        batch_size,
        seed=0,
        step_counter=optimizer.iterations,
        dtype=built.model.inputs[0].dtype,
    )
    progress = EpochProgress("scaling", stream=None)
    built.model.fit(data, epochs=2, verbose=0, callbacks=[progress])
    steps_done = -(-rows // batch_size)
    seconds_per_step = progress.seconds[1] / steps_done
    epoch = progress.seconds[1] if sweep == "N" else seconds_per_step * EPOCH_ROWS / batch_size
    return {
        "sweep": sweep,
        "value": value,
        "rows": rows,
        "seconds_per_step": seconds_per_step,
        "seconds_per_epoch": epoch,
        "final_loss": progress.losses[-1],
    }


def plot(records: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = {
        "N": "training rows N (one full epoch)",
        "M": "inducing points per layer M",
        "S": "sigma points S",
        "layers": "GP layers",
    }
    figure, axes = plt.subplots(2, 2, figsize=(8, 6), constrained_layout=True)
    for axis, sweep in zip(axes.flat, SWEEPS):
        points = [r for r in records if r["sweep"] == sweep]
        if not points:
            axis.set_visible(False)
            continue
        axis.plot([r["value"] for r in points], [r["seconds_per_epoch"] for r in points], "o-")
        axis.set_xlabel(labels[sweep])
        axis.set_ylabel("seconds per epoch" + ("" if sweep == "N" else " of 10k rows"))
        if sweep in ("M", "S"):
            axis.set_xscale("log", base=2)
        axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
    figure.suptitle("AVDGP-AR2P training time (CPU, float64, batch 100)")
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", default=",".join(SWEEPS))
    parser.add_argument("--steps", type=int, default=60, help="timed minibatches (M, S, layers)")
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--out", default="benchmarks/results/scaling")
    args = parser.parse_args(argv)
    sweeps = args.sweeps.split(",")
    unknown = sorted(set(sweeps) - set(SWEEPS))
    if unknown:
        parser.error(f"--sweeps: unknown {unknown}; choose from {list(SWEEPS)}")

    from avdgp.training import float_type

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    x, y = synthetic(max(SWEEPS["N"]))
    records = []
    with float_type("float64"):
        for sweep in sweeps:
            for value in SWEEPS[sweep]:
                record = time_point(sweep, value, x, y, args.steps, args.batch_size)
                records.append(record)
                print(json.dumps(record), flush=True)
                (out / "scaling.json").write_text(json.dumps(records, indent=2))
    plot(records, out / "scaling.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
